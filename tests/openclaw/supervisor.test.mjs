// autoStart: the optional service that starts a gateway when none answers and stops it again.
// The real-gateway case needs MEMORY_TENCENTDB_PYTHON (a Python with memory_tencentdb installed),
// which tests/openclaw/test_node_suites.py passes.

import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { bridgeWith, closedPort, startStub } from "./helpers.mjs";

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
    assert.equal(recalled, undefined, "empty store, nothing to inject");
    assert.deepEqual(api.warnings(), []);
    assert.ok(existsSync(join(ctx.stateDir, "logs", "memory-tencentdb-gateway.log")));
  } finally {
    await service.stop();
  }
  assert.ok(await waitFor(async () => !(await healthy(port)), 5000), "stopped with the host");
  assert.ok(readFileSync(join(ctx.stateDir, "logs", "memory-tencentdb-gateway.log"), "utf8").length > 0);
});
