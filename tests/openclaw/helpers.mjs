// Shared helpers for the bridge's node --test suites: a stand-in for OpenClaw's plugin `api`, the
// recorded hook payloads, and a tiny HTTP server that plays a slow or failing gateway.

import { mkdtempSync, readFileSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
export const BRIDGE_DIR = join(here, "..", "..", "openclaw_bridge");

// Whatever falls back to the environment (a bridge loaded without a host runtime, child
// processes) must never read or write the developer's own ~/.openclaw or memory data.
process.env.OPENCLAW_STATE_DIR ||= mkdtempSync(join(tmpdir(), "oc-state-env-"));
process.env.TDAI_DATA_DIR ||= mkdtempSync(join(tmpdir(), "oc-data-env-"));

/** The scope the bridge gives an agent of this fake api's state directory. */
export async function expectedScope(api, agentId) {
  const { defaultScope } = await import(new URL(`file://${join(BRIDGE_DIR, "lib", "ownership.js")}`).href);
  return defaultScope(agentId, api.stateDir);
}

export function tempDir(prefix = "oc-") {
  return mkdtempSync(join(tmpdir(), prefix));
}

let generation = 0;

/**
 * A fresh copy of the bridge module: each import gets its own clients, breakers and turn state,
 * as a new OpenClaw process would.
 */
export async function loadBridge() {
  generation += 1;
  // State the bridge shares between its module instances of one process (globalThis) goes too.
  delete globalThis[Symbol.for("memory-tencentdb.offload")];
  const url = new URL(`file://${join(BRIDGE_DIR, "index.js")}?fresh=${generation}`);
  return (await import(url.href)).default;
}

/**
 * The subset of OpenClaw's plugin api the bridge touches, recording what it registers. Each
 * has its own state directory (as `api.runtime.state.resolveStateDir()` gives it).
 */
export function fakeApi({ pluginConfig = {}, registrationMode = "full", stateDir = tempDir("oc-state-"), config = {} } = {}) {
  const hooks = new Map();
  const tools = new Map();
  const services = [];
  const engines = new Map();
  const middlewares = [];
  const logs = [];
  const logger = Object.fromEntries(
    ["debug", "info", "warn", "error"].map((level) => [level, (message) => logs.push({ level, message })]),
  );
  return {
    id: "memory-tencentdb",
    registrationMode,
    pluginConfig,
    // OpenClaw's whole config (api.config): where plugins.slots.contextEngine is read.
    config,
    stateDir,
    runtime: { state: { resolveStateDir: () => stateDir } },
    logger,
    hooks,
    tools,
    services,
    logs,
    on(name, handler, opts) {
      hooks.set(name, { handler, opts });
    },
    registerTool(factory, opts) {
      tools.set(opts?.name, factory);
    },
    registerService(service) {
      services.push(service);
    },
    engines,
    middlewares,
    registerContextEngine(id, factory) {
      engines.set(id, factory);
    },
    registerAgentToolResultMiddleware(handler, options) {
      middlewares.push({ handler, options });
    },
    warnings() {
      return logs.filter((l) => l.level === "warn" || l.level === "error").map((l) => l.message);
    },
    /** Call a hook the way the host does; a sync hook's result is returned as is. */
    fire(name, event, ctx) {
      const hook = hooks.get(name);
      if (!hook) throw new Error(`hook ${name} not registered`);
      return hook.handler(event, ctx);
    },
    tool(name, toolCtx) {
      const factory = tools.get(name);
      if (!factory) throw new Error(`tool ${name} not registered`);
      return factory(toolCtx);
    },
  };
}

/** Register a fresh bridge and return its fake api. */
export async function bridgeWith(pluginConfig = {}, options = {}) {
  const bridge = await loadBridge();
  const api = fakeApi({ pluginConfig, ...options });
  bridge.register(api);
  return api;
}

/** Recorded payloads: { openclaw_version, description, records: [{hook, event, ctx}] }. */
export function fixture(name) {
  return JSON.parse(readFileSync(join(here, "fixtures", `${name}.json`), "utf8"));
}

/** The n-th recorded payload of a hook in a fixture (0-based), deep-copied. */
export function recorded(name, hook, n = 0) {
  const hits = fixture(name).records.filter((r) => r.hook === hook);
  if (!hits[n]) throw new Error(`${name}: no record ${n} of ${hook}`);
  return structuredClone(hits[n]);
}

/** Give a recorded ctx back the capability the host passes but JSON cannot hold. */
export function live(ctx, { active = true } = {}) {
  if (ctx?.hookInvocation) {
    ctx.hookInvocation = {
      assertActive() {
        if (!active) throw new Error("hook invocation no longer active");
      },
    };
  }
  return ctx;
}

/**
 * A stand-in gateway on 127.0.0.1. `behave(req, body)` returns { status, body, delayMs } or
 * { hang: true } (never answers); every request is recorded. GET /health is answered by
 * `health` instead (default: 200, ok) and recorded apart, in `healthRequests`.
 */
export async function startStub(behave = () => ({ status: 200, body: {} }), { health = () => ({ body: { status: "ok" } }) } = {}) {
  const requests = [];
  const healthRequests = [];
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (chunk) => (raw += chunk));
    req.on("end", () => {
      let body;
      try {
        body = raw ? JSON.parse(raw) : undefined;
      } catch {
        body = raw;
      }
      const isHealth = req.method === "GET" && req.url === "/health";
      (isHealth ? healthRequests : requests).push({ method: req.method, path: req.url, headers: req.headers, body });
      const plan = (isHealth ? stub.health(req) : stub.behave(req, body)) ?? {};
      if (plan.hang) return;
      const send = () => {
        if (res.destroyed) return;
        const payload = typeof plan.body === "string" ? plan.body : JSON.stringify(plan.body ?? {});
        res.writeHead(plan.status ?? 200, { "content-type": "application/json" });
        res.end(payload);
      };
      if (plan.delayMs) setTimeout(send, plan.delayMs);
      else send();
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  const stub = {
    port,
    url: `http://127.0.0.1:${port}`,
    requests,
    healthRequests,
    behave,
    health,
    paths: () => requests.map((r) => r.path),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return stub;
}

/** A port on which nothing listens. */
export async function closedPort() {
  const server = http.createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export function configFor(url, extra = {}) {
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port), ...extra };
}

export async function timed(fn) {
  const start = performance.now();
  const value = await fn();
  return { value, ms: performance.now() - start };
}
