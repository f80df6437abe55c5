// The connection to *our* gateway: every hook and tool call goes through here.
//
// - Ownership. Before the first call (and again after a failure, or a minute later) GET /health
//   must name the data directory we expect; every call carries our key (the configured apiKey,
//   else `<data dir>/gateway.key`, re-read once after a 401). A gateway that names another data
//   directory, or answers 401, is someone else's: it is treated as down, said once in the log
//   with the data directory we expected, and gets no turn of ours.
// - autoStart. When nothing listens on the port (connection refused, nothing else: a frozen or
//   foreign gateway is never joined by a second one) the bridge starts the gateway detached, with
//   `--idle-exit`, so a one-shot `openclaw agent --local` can use it and exit while it lives on,
//   and the first call waits for it (models loaded) within `autoStart.waitMs`.
//
// Results are the client's: { ok: true, data } or { ok: false, reason, status? }; never throws.

import { sameDir } from "./ownership.js";

const PROBE_MS = 800;
const POLL_MS = 200;
const VERIFY_TTL_MS = 60_000;

export class GatewayLink {
  constructor({ config, client, dataDir, stateDir, readKey, say }) {
    this.config = config;
    this.client = client;
    this.dataDir = dataDir;
    this.stateDir = stateDir;
    this.readKey = readKey;
    this.say = say; // (level, message) => void
    this.keyFromFile = "";
    this.verifiedAt = 0;
    this.modelsReady = false;
    this.foreignUntil = 0;
    this.foreignReason = "";
    this.told = new Set();
    this.supervisor = null;
    this.starting = null;
    this.nextStartAt = 0;
    client.apiKey = () => this.token();
  }

  get baseUrl() {
    return this.client.baseUrl;
  }

  token() {
    if (this.config.apiKey) return this.config.apiKey;
    if (!this.keyFromFile) this.keyFromFile = this.readKey(this.dataDir);
    return this.keyFromFile;
  }

  /** Say a message once per process (ownership problems are not worth a line per turn). */
  #once(level, message) {
    if (this.told.has(message)) return;
    this.told.add(message);
    this.say(level, message);
  }

  #foreign(why) {
    this.verifiedAt = 0;
    this.foreignUntil = Date.now() + Math.max(1_000, this.config.breaker.cooldownMs);
    this.foreignReason = "not our gateway";
    this.#once(
      "warn",
      `memory paused: the gateway at ${this.baseUrl} is not ours (${why}); expected the gateway of data directory ` +
        `${this.dataDir}. No turn is sent to it; captures wait in the spool. Stop it, or set port/dataDir/apiKey ` +
        `in plugins.entries.memory-tencentdb.config.`,
    );
    return { ok: false, reason: this.foreignReason, foreign: true };
  }

  /** Judge a /health answer: ours, or someone else's. */
  #judge(data) {
    const reported = typeof data?.data_dir === "string" ? data.data_dir : "";
    if (reported && !sameDir(reported, this.dataDir)) return this.#foreign(`it serves ${reported}`);
    this.verifiedAt = Date.now();
    this.foreignUntil = 0;
    this.modelsReady = data?.ready !== false;
    return { ok: true, ready: this.modelsReady, data };
  }

  /**
   * Whether our gateway is there, starting it if allowed and nothing listens. `startWaitMs` is
   * how long a call may wait for a gateway that is starting. Returns { ok, reason?, waited }.
   */
  async ensure({ startWaitMs = 0, probeMs = PROBE_MS, ready = true } = {}) {
    const now = Date.now();
    if (now < this.foreignUntil) return { ok: false, reason: this.foreignReason, foreign: true };
    // A gateway this process started may answer before its models are loaded: a recall then
    // waits for them (within startWaitMs) rather than racing the load inside its own budget.
    const forModels = ready && startWaitMs > 0 && Boolean(this.supervisor?.pid) && !this.modelsReady;
    if (!forModels && this.verifiedAt && now - this.verifiedAt < VERIFY_TTL_MS) return { ok: true, waited: false };
    // A healthy /health must not reset the breaker: a gateway whose /health answers while a
    // route hangs would otherwise cost every call its whole timeout, turn after turn.
    const probe = await this.client.probe(probeMs, { countSuccess: false });
    if (probe.ok) {
      const judged = this.#judge(probe.data);
      if (!judged.ok || judged.ready || !forModels) return { ...judged, waited: false };
    } else {
      // Only a call that may wait for it starts a gateway: never a session end or a tool call
      // (say, during OpenClaw's shutdown, after we asked ours to stop).
      if (!probe.refused || !this.config.autoStart.enabled || startWaitMs <= 0) return { ok: false, reason: probe.reason };
      const start = await this.#start();
      if (!start.started && !start.elsewhere) return { ok: false, reason: `gateway not running (${start.reason})` };
    }
    const waitStart = Date.now();
    const up = await this.waitUp(waitStart + startWaitMs, { ready });
    if (up.ok) {
      const models = up.ready ? "models loaded" : "models still loading";
      const since = this.supervisor?.spawnedAt ? `, ${Date.now() - this.supervisor.spawnedAt} ms after it was started` : "";
      this.say("info", `the gateway answered after a wait of ${Date.now() - waitStart} ms${since} (${models})`);
    }
    return { ...up, waited: true };
  }

  /** Poll /health until ours answers (and, with `ready`, its models are loaded) or `deadline`. */
  async waitUp(deadline, { ready = false } = {}) {
    let last = { ok: false, reason: "gateway starting" };
    while (Date.now() < deadline) {
      if (this.supervisor?.exitCode != null) {
        return { ok: false, reason: `the gateway we started exited (code ${this.supervisor.exitCode}); see ${this.supervisor.logPath}` };
      }
      const probe = await this.client.probe(Math.min(PROBE_MS, Math.max(50, deadline - Date.now())), { bypassBreaker: true });
      if (probe.ok) {
        last = this.#judge(probe.data);
        if (last.ok) this.supervisor?.done();
        if (!last.ok || !ready || last.ready) return last;
      } else {
        last = { ok: false, reason: probe.refused ? "gateway starting" : probe.reason };
      }
      await sleep(Math.min(POLL_MS, Math.max(0, deadline - Date.now())));
    }
    return last.ok ? last : { ok: false, reason: `${last.reason} (not up after waiting)` };
  }

  /** Start the gateway once at a time; after a failed start, not again before the cooldown. */
  async #start() {
    if (this.starting) return this.starting;
    if (this.stopping) return { started: false, reason: "OpenClaw is shutting down" };
    // One we started that has not exited is still coming up: wait for it, never start another.
    if (this.supervisor?.pid && this.supervisor.exitCode == null) return { started: false, elsewhere: true };
    if (Date.now() < this.nextStartAt) return { started: false, reason: "last start failed; retrying later" };
    this.starting = (async () => {
      try {
        if (!this.supervisor) {
          const { GatewaySupervisor } = await import("./supervisor.js");
          this.supervisor = new GatewaySupervisor({ config: this.config, dataDir: this.dataDir, stateDir: this.stateDir, say: this.say });
        }
        const result = await this.supervisor.spawnDetached();
        if (!result.started && !result.elsewhere) this.nextStartAt = Date.now() + this.config.breaker.cooldownMs;
        return result;
      } catch (error) {
        this.nextStartAt = Date.now() + this.config.breaker.cooldownMs;
        return { started: false, reason: String(error?.message ?? error) };
      }
    })();
    const result = await this.starting;
    this.starting = null; // a later refusal (say the gateway idled out) may start it again
    return result;
  }

  /**
   * POST to our gateway. The whole call, health check included, keeps within `timeoutMs`, plus
   * up to `startWaitMs` only when it had to wait for a gateway that was starting.
   */
  async post(path, body, { timeoutMs, signal, startWaitMs = 0 } = {}) {
    const began = Date.now();
    // Recall and search want the models loaded; a capture only needs the gateway to answer.
    const ready = path === "/recall" || path.startsWith("/search/");
    const gate = await this.ensure({ startWaitMs, ready, probeMs: Math.min(PROBE_MS, Math.max(100, timeoutMs / 2)) });
    if (!gate.ok) return { ok: false, reason: gate.reason, ...(gate.foreign && { foreign: true }) };
    const left = gate.waited ? timeoutMs : Math.max(100, began + timeoutMs - Date.now());
    const sent = Date.now();
    let result = await this.client.post(path, body, { timeoutMs: left, signal });
    if (result.status === 401 && !this.config.apiKey) {
      const fresh = this.readKey(this.dataDir);
      if (fresh && fresh !== this.keyFromFile) {
        this.keyFromFile = fresh;
        result = await this.client.post(path, body, { timeoutMs: Math.max(100, sent + left - Date.now()), signal });
      }
    }
    if (result.status === 401) {
      return this.#foreign(
        this.config.apiKey ? "it refused the configured apiKey (401)" : `it refused the key of ${this.dataDir} (401)`,
      );
    }
    if (!result.ok && result.status === undefined) {
      this.verifiedAt = 0; // unreachable or timed out: check again next time
      // Say the caller's budget, not what was left of it after the health check.
      if (/^timeout after/.test(result.reason ?? "")) return { ...result, reason: `timeout after ${timeoutMs}ms` };
    }
    return result;
  }

  /** For a long-lived host: make sure a gateway runs, without waiting for it. */
  async warmUp() {
    const probe = await this.client.probe(PROBE_MS, { bypassBreaker: true });
    if (probe.ok) {
      const judged = this.#judge(probe.data);
      if (judged.ok) this.say("info", `using the gateway already running at ${this.baseUrl}`);
      return judged.ok ? "existing" : "foreign";
    }
    if (!probe.refused) {
      this.say("warn", `the gateway at ${this.baseUrl} does not answer (${probe.reason}); not starting a second one`);
      return "unavailable";
    }
    const start = await this.#start();
    if (!start.started) return start.elsewhere ? "starting" : "failed";
    return "spawned";
  }

  /** Stop the gateway this process started: ask it to drain, else SIGTERM; never wait, never SIGKILL. */
  async stopOwn() {
    this.stopping = true;
    const pid = this.supervisor?.pid;
    if (!pid || this.supervisor.exitCode != null) return false;
    const asked = await this.client.post("/admin/shutdown", { drain_s: 30 }, { timeoutMs: 1_000 });
    if (!asked.ok) this.supervisor.terminate();
    return true;
  }
}

// Not unref'd: a hook awaiting this must keep a one-shot CLI alive until the deadline it keeps.
function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
