// autoStart: the optional service that starts a gateway when none answers and stops it again.
// The real-gateway case needs MEMORY_TENCENTDB_PYTHON (a Python with memory_tencentdb installed),
// which tests/openclaw/test_node_suites.py passes.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { BRIDGE_DIR, bridgeWith, closedPort, startStub } from "./helpers.mjs";

const PYTHON = process.env.MEMORY_TENCENTDB_PYTHON;

async function healthy(port) {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) });
    return response.ok;
  } catch {
    return false;
  }
}

async function waitFor(predicate, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await predicate()) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

function serviceCtx(api) {
  return { stateDir: api.stateDir, logger: api.logger };
}

test("autoStart: a gateway that already answers is used; nothing is spawned", async () => {
  const stub = await startStub(() => ({ body: { status: "ok" } }));
  try {
    const api = await bridgeWith({ port: stub.port, autoStart: { enabled: true, command: "no-such-command-xyz" } });
    const [service] = api.services;
    await service.start(serviceCtx(api));
    assert.ok(api.logs.some((l) => /using the gateway already running/.test(l.message)));
    assert.deepEqual(api.warnings(), []);
    await service.stop();
  } finally {
    await stub.close();
  }
});

test("autoStart: a command that cannot start is a warning, never a crash", async () => {
  const api = await bridgeWith({ port: await closedPort(), autoStart: { enabled: true, command: "no-such-command-xyz" } });
  const [service] = api.services;
  await assert.doesNotReject(service.start(serviceCtx(api)));
  await waitFor(async () => api.warnings().length > 0, 3000);
  assert.match(api.warnings().join("\n"), /could not start the gateway \(no-such-command-xyz\)/);
  await assert.doesNotReject(service.stop());
});

test("autoStart: starts our gateway when none answers, and stops it at shutdown", { skip: !PYTHON && "MEMORY_TENCENTDB_PYTHON not set" }, async () => {
  // The spawned gateway inherits this environment: its own data dir, no embedding model to load.
  process.env.TDAI_DATA_DIR = mkdtempSync(join(tmpdir(), "oc-autostart-"));
  process.env.TDAI_EMBEDDING_PROVIDER = "none";
  const port = await closedPort();
  const api = await bridgeWith({
    port,
    autoStart: { enabled: true, command: PYTHON, args: ["-m", "memory_tencentdb", "serve"], readyTimeoutMs: 60_000 },
  });
  const [service] = api.services;
  const ctx = serviceCtx(api);
  const started = performance.now();
  await service.start(ctx);
  assert.ok(performance.now() - started < 3000, "start() does not wait for the gateway to be ready");
  try {
    assert.ok(await waitFor(() => healthy(port), 60_000), "the spawned gateway answers on the configured port");
    const recalled = await api.fire(
      "before_prompt_build",
      { prompt: "hello", messages: [] },
      { sessionKey: "agent:main:auto", agentId: "main", runId: "r1" },
    );
    // Empty store: no memories this turn; the system part is the stable one (the tool guide,
    // always there so that it changes only with the persona or the scenes).
    assert.equal(recalled?.prependContext, undefined, "empty store: no memories to inject");
    assert.ok(!recalled?.appendSystemContext || /<memory-tools-guide>/.test(recalled.appendSystemContext), JSON.stringify(recalled));
    assert.ok(!/<relevant-memories>/.test(JSON.stringify(recalled ?? {})), "no memories anywhere");
    assert.deepEqual(api.warnings(), []);
    assert.ok(existsSync(join(ctx.stateDir, "logs", "memory-tencentdb-gateway.log")));
  } finally {
    await service.stop();
  }
  assert.ok(await waitFor(async () => !(await healthy(port)), 5000), "stopped with the host");
  assert.ok(readFileSync(join(ctx.stateDir, "logs", "memory-tencentdb-gateway.log"), "utf8").length > 0);
});

// A one-shot run as `openclaw agent --local` makes it: a process that registers the bridge, runs
// one turn's hooks and exits. Services never start there; the first hook call must do it.
function oneShot({ port, dataDir, stateDir, message, runId }) {
  const indexUrl = new URL(`file://${BRIDGE_DIR}/index.js`).href;
  const config = {
    port,
    dataDir,
    scope: "{agent}",
    autoStart: { enabled: true, command: PYTHON, args: ["-m", "memory_tencentdb", "serve"], idleExitSeconds: 60, waitMs: 30_000 },
  };
  const script = `
    import bridge from ${JSON.stringify(indexUrl)};
    const hooks = {}, logs = [];
    const logger = Object.fromEntries(["debug", "info", "warn", "error"].map((l) => [l, (m) => logs.push(l + ": " + m)]));
    bridge.register({ registrationMode: "full", logger, pluginConfig: ${JSON.stringify(config)},
      runtime: { state: { resolveStateDir: () => ${JSON.stringify(stateDir)} } },
      on: (n, h) => (hooks[n] = h), registerTool() {}, registerService() {} });
    const ctx = { sessionKey: "agent:main:oneshot", agentId: "main", runId: ${JSON.stringify(runId)}, trigger: "user" };
    const t0 = performance.now();
    const injected = await hooks.before_prompt_build({ prompt: ${JSON.stringify(message)}, messages: [] }, ctx);
    const t1 = performance.now();
    await hooks.agent_end({ success: true, messages: [
      { role: "user", content: ${JSON.stringify(message)}, timestamp: Date.now() },
      { role: "assistant", content: [{ type: "text", text: "OK." }], stopReason: "stop", timestamp: Date.now() },
    ] }, ctx);
    console.log(JSON.stringify({ injected, recallMs: t1 - t0, captureMs: performance.now() - t1, logs }));`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("exit", (code) => (code === 0 ? resolve(JSON.parse(out.trim().split("\n").at(-1))) : reject(new Error(err))));
  });
}

test("one-shot autoStart: the first hook starts a detached gateway (--idle-exit), waits, captures; it outlives the run", { skip: !PYTHON && "MEMORY_TENCENTDB_PYTHON not set" }, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "oc-oneshot-data-"));
  const stateDir = mkdtempSync(join(tmpdir(), "oc-oneshot-state-"));
  const port = await closedPort();
  const first = await oneShot({ port, dataDir, stateDir, message: "Remember: my locker code is 4711.", runId: "one-1" });
  let pid;
  try {
    assert.ok(first.logs.some((l) => /started the memory gateway \(pid \d+/.test(l)), first.logs.join("\n"));
    assert.ok(!first.logs.some((l) => /^warn/.test(l)), first.logs.join("\n"));
    console.log(`cold start: recall hook ${Math.round(first.recallMs)} ms, capture hook ${Math.round(first.captureMs)} ms`);
    // The run is over; its gateway is not.
    const health = await (await fetch(`http://127.0.0.1:${port}/health`)).json();
    pid = health.pid;
    assert.equal(health.data_dir, realpathSync(dataDir));
    const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    assert.deepEqual(argv.slice(-2), ["--idle-exit", "60"]);
    const token = readFileSync(join(dataDir, "gateway.key"), "utf8").trim();
    const found = await (
      await fetch(`http://127.0.0.1:${port}/search/conversations`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: "locker code 4711", scope: "main", session_key: "agent:main:oneshot" }),
      })
    ).json();
    assert.ok(found.items.some((i) => i.content.includes("4711")), JSON.stringify(found));
    const spoolDir = join(stateDir, "memory-tencentdb", "spool");
    assert.ok(!existsSync(spoolDir) || readdirSync(spoolDir).length === 0, "nothing waiting");
    // The next one-shot run finds it running and starts nothing.
    const second = await oneShot({ port, dataDir, stateDir, message: "What is my locker code?", runId: "one-2" });
    assert.ok(!second.logs.some((l) => /started the memory gateway/.test(l)), second.logs.join("\n"));
    console.log(`warm: recall hook ${Math.round(second.recallMs)} ms`);
  } finally {
    if (pid) process.kill(pid, "SIGTERM");
  }
  assert.ok(await waitFor(async () => !(await healthy(port)), 10_000), "drained and stopped on SIGTERM");
});
