// Optional: start the memory gateway when nothing listens on its port. Loaded lazily and only
// with autoStart enabled, because spawning a process is something OpenClaw's security audit flags
// and most installs run the gateway as its own service instead.
//
// The gateway is started detached (its own process group, no pipes to us) so that it outlives a
// one-shot `openclaw agent --local` and finishes its background work after OpenClaw exits; it is
// given `--idle-exit` so it does not live forever: it drains and exits once nobody used it for
// `autoStart.idleExitSeconds`. It gets the data directory the bridge expects (TDAI_DATA_DIR), so
// the key it creates there is the one the bridge reads. A start claim in the state directory keeps
// two OpenClaw processes that see "connection refused" at the same moment from starting two.

import { spawn } from "node:child_process";
import { closeSync, mkdirSync, openSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { hostEnv } from "./ownership.js";

export class GatewaySupervisor {
  constructor({ config, dataDir, stateDir, say }) {
    this.config = config;
    this.dataDir = dataDir;
    this.stateDir = stateDir;
    this.say = say;
    this.pid = null;
    this.exitCode = null;
    this.logPath = stateDir ? join(stateDir, "logs", "memory-tencentdb-gateway.log") : "(no log: no state directory)";
  }

  /** The command line: the configured args, plus `--idle-exit N` unless they already say. */
  argv() {
    const { args, idleExitSeconds } = this.config.autoStart;
    const out = [...args];
    if (idleExitSeconds > 0 && !out.some((a) => a === "--idle-exit" || a.startsWith("--idle-exit="))) {
      out.push("--idle-exit", String(Math.round(idleExitSeconds)));
    }
    return out;
  }

  /** { started: true, pid } | { started: false, elsewhere: true } | { started: false, reason }. */
  async spawnDetached() {
    if (!this.#claim()) return { started: false, elsewhere: true };
    const { command, cwd } = this.config.autoStart;
    const env = {
      ...hostEnv(),
      TDAI_GATEWAY_HOST: this.config.host,
      TDAI_GATEWAY_PORT: String(this.config.port),
      TDAI_DATA_DIR: this.dataDir,
    };
    if (this.config.apiKey) env.TDAI_GATEWAY_API_KEY = this.config.apiKey;
    const logFd = this.#openLog();
    this.spawnedAt = Date.now();
    let child;
    try {
      child = spawn(command, this.argv(), {
        cwd: cwd || undefined,
        env,
        detached: true,
        stdio: ["ignore", logFd ?? "ignore", logFd ?? "ignore"],
      });
    } catch (error) {
      this.#release();
      return this.#failed(command, error);
    } finally {
      if (logFd !== null) closeSync(logFd);
    }
    const outcome = await new Promise((resolve) => {
      child.once("spawn", () => resolve({ started: true, pid: child.pid }));
      child.once("error", (error) => resolve(this.#failed(command, error)));
    });
    if (!outcome.started) {
      this.#release();
      return outcome;
    }
    this.pid = child.pid;
    child.once("exit", (code, signal) => {
      this.exitCode = code ?? signal ?? "?";
      this.#release();
    });
    child.unref(); // the host may exit; the gateway lives on
    this.say(
      "info",
      `started the memory gateway (pid ${child.pid}, ${this.dataDir}, idle exit ` +
        `${this.config.autoStart.idleExitSeconds || "off"}s); log: ${this.logPath}`,
    );
    return outcome;
  }

  /** The start is over (it answers, or it failed): others may start one again. */
  done() {
    this.#release();
  }

  /** SIGTERM to the gateway's pid only (it drains, bounded, before it exits). */
  terminate() {
    if (!this.pid || this.exitCode != null) return;
    try {
      process.kill(this.pid, "SIGTERM");
    } catch {
      // already gone
    }
  }

  #failed(command, error) {
    const reason = `could not start the gateway (${command}): ${error?.message ?? error}`;
    this.say("warn", reason);
    return { started: false, reason };
  }

  #claimPath() {
    return this.stateDir ? join(this.stateDir, "memory-tencentdb", "autostart.claim") : null;
  }

  // A claim older than the ready timeout belongs to a start that died: take it over.
  #claim() {
    const path = this.#claimPath();
    if (!path) return true;
    try {
      mkdirSync(join(this.stateDir, "memory-tencentdb"), { recursive: true, mode: 0o700 });
      try {
        const age = Date.now() - statSync(path).mtimeMs;
        if (age < this.config.autoStart.readyTimeoutMs) return false;
        unlinkSync(path);
      } catch {
        // no claim yet
      }
      writeFileSync(path, JSON.stringify({ pid: process.pid, at: new Date().toISOString() }), { flag: "wx", mode: 0o600 });
      this.claimed = true;
      return true;
    } catch (error) {
      return error?.code !== "EEXIST";
    }
  }

  #release() {
    if (!this.claimed) return;
    this.claimed = false;
    try {
      unlinkSync(this.#claimPath());
    } catch {
      // gone already
    }
  }

  #openLog() {
    if (!this.stateDir) return null;
    try {
      mkdirSync(join(this.stateDir, "logs"), { recursive: true });
      return openSync(this.logPath, "a", 0o600);
    } catch {
      return null;
    }
  }
}
