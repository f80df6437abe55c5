// Optional: start a gateway when none answers, and stop it again at shutdown. Loaded lazily and
// only with autoStart enabled, because spawning a process is something OpenClaw's security audit
// flags and most installs run the gateway as its own service instead.

import { spawn } from "node:child_process";
import { mkdirSync, openSync, closeSync } from "node:fs";
import { join } from "node:path";

import { log } from "./warn.js";

const KILL_GRACE_MS = 1_500;
const POLL_MS = 250;

export class GatewaySupervisor {
  constructor({ config, client, logger, stateDir }) {
    this.config = config;
    this.client = client;
    this.logger = logger;
    this.stateDir = stateDir;
    this.child = null;
    this.exited = null;
  }

  /** "existing" if a gateway already answers, "spawned" if we started one, "failed" otherwise. */
  async ensureRunning() {
    if (await this.client.health(800)) {
      log(this.logger, "info", `using the gateway already running at ${this.client.baseUrl}`);
      return "existing";
    }
    const { command, args, cwd } = this.config.autoStart;
    const env = {
      ...process.env,
      TDAI_GATEWAY_HOST: this.config.host,
      TDAI_GATEWAY_PORT: String(this.config.port),
    };
    if (this.config.apiKey) env.TDAI_GATEWAY_API_KEY = this.config.apiKey;
    const logFd = this.#openLog();
    try {
      this.child = spawn(command, args, {
        cwd: cwd || undefined,
        env,
        stdio: ["ignore", logFd ?? "ignore", logFd ?? "ignore"],
      });
    } catch (error) {
      log(this.logger, "warn", `could not start the gateway (${command}): ${error?.message ?? error}`);
      return "failed";
    } finally {
      if (logFd !== null) closeSync(logFd);
    }
    this.exited = new Promise((resolve) => {
      this.child.once("exit", (code, signal) => resolve({ code, signal }));
      this.child.once("error", (error) => {
        log(this.logger, "warn", `could not start the gateway (${command}): ${error?.message ?? error}`);
        resolve({ code: null, signal: null, error });
      });
    });
    // Readiness is awaited in the background: the host's startup must never wait on us.
    this.#watchReady();
    return "spawned";
  }

  async stop() {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    let timer;
    const killed = new Promise((resolve) => {
      timer = setTimeout(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
        resolve();
      }, KILL_GRACE_MS);
      timer.unref?.();
    });
    await Promise.race([this.exited, killed]);
    clearTimeout(timer);
    this.child = null;
  }

  async #watchReady() {
    const deadline = Date.now() + this.config.autoStart.readyTimeoutMs;
    let gone = false;
    this.exited.then(() => {
      gone = true;
    });
    while (!gone && Date.now() < deadline) {
      if (await this.client.health(800)) {
        log(this.logger, "info", `started a gateway at ${this.client.baseUrl} (pid ${this.child?.pid})`);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS).unref?.());
    }
    log(this.logger, "warn", gone ? "the gateway we started exited early; see its log" : "the gateway we started is not answering yet");
  }

  #openLog() {
    if (!this.stateDir) return null;
    try {
      const dir = join(this.stateDir, "logs");
      mkdirSync(dir, { recursive: true });
      return openSync(join(dir, "memory-tencentdb-gateway.log"), "a");
    } catch {
      return null;
    }
  }
}
