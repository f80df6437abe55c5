// Measurement half of bench/openclaw_overhead.py (which starts the real gateway and passes its
// URL in MEMORY_TENCENTDB_GATEWAY_URL). Plays recorded OpenClaw 2026.9 turns through the
// bridge's own hook handlers, exactly as the host awaits them (before_prompt_build, then
// agent_end), and times what each turn waits on the bridge. Prints one JSON document.
//
// Scenarios: the gateway up; slow (a proxy adds 2 s to every answer); down (nothing listens);
// hung (accepts and never answers). Default timeouts: recall 2.5 s, capture 5 s, breaker 3/30 s.

import http from "node:http";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, "..");
const GATEWAY = process.env.MEMORY_TENCENTDB_GATEWAY_URL;
const QUICK = process.argv.includes("--quick");
if (!GATEWAY) {
  console.error("run bench/openclaw_overhead.py, which starts the gateway");
  process.exit(2);
}

const fixture = (name) => JSON.parse(readFileSync(join(ROOT, "tests/openclaw/fixtures", `${name}.json`), "utf8"));
const plain = fixture("plain_turns").records;
const tool = fixture("tool_turn").records;
const TURNS = [
  [plain.filter((r) => r.hook === "before_prompt_build")[1], plain.filter((r) => r.hook === "agent_end")[1]],
  [tool.find((r) => r.hook === "before_prompt_build"), tool.find((r) => r.hook === "agent_end")],
];

let generation = 0;
async function freshBridge(url) {
  generation += 1;
  const { default: bridge } = await import(`${join(ROOT, "openclaw_bridge/index.js")}?bench=${generation}`);
  const hooks = {};
  const warnings = [];
  const { hostname, port } = new URL(url);
  bridge.register({
    registrationMode: "full",
    pluginConfig: { host: hostname, port: Number(port) },
    logger: { warn: (m) => warnings.push(m), info() {}, error: (m) => warnings.push(m) },
    on: (name, handler) => (hooks[name] = handler),
    registerTool() {},
    registerService() {},
  });
  return { hooks, warnings };
}

async function runScenario(url, turns) {
  const { hooks, warnings } = await freshBridge(url);
  const recall = [];
  const capture = [];
  const total = [];
  let recalled = 0;
  for (let i = 0; i < turns; i += 1) {
    const [start, end] = TURNS[i % TURNS.length];
    const session = `agent:main:bench-${generation}-${i}`;
    const ctx = { ...start.ctx, sessionKey: session, runId: `run-${generation}-${i}`, hookInvocation: { assertActive() {} } };
    const endCtx = { ...end.ctx, sessionKey: session, runId: ctx.runId };
    const t0 = performance.now();
    const injected = await hooks.before_prompt_build(structuredClone(start.event), ctx);
    const t1 = performance.now();
    await hooks.agent_end(structuredClone(end.event), endCtx);
    const t2 = performance.now();
    if (injected?.prependContext) recalled += 1;
    recall.push(t1 - t0);
    capture.push(t2 - t1);
    total.push(t2 - t0);
  }
  return {
    turns,
    turns_with_recall: recalled,
    recall: stats(recall),
    capture: stats(capture),
    per_turn_total: stats(total),
    first_turn_ms: round(total[0]),
    after_breaker_p50_ms: turns > 3 ? stats(total.slice(3)).p50_ms : null,
    warnings: warnings.length,
  };
}

function stats(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return {
    p50_ms: round(at(0.5)),
    p95_ms: round(at(0.95)),
    max_ms: round(sorted.at(-1)),
    mean_ms: round(values.reduce((a, b) => a + b, 0) / values.length),
  };
}

const round = (x) => Math.round(x * 1000) / 1000;

function listen(server) {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server.address().port)));
}

// Forwards to the real gateway after `delayMs`: a gateway that answers, slowly.
async function slowProxy(target, delayMs) {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () =>
      setTimeout(() => {
        const out = http.request(
          { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
          (answer) => {
            res.writeHead(answer.statusCode, answer.headers);
            answer.pipe(res);
          },
        );
        out.on("error", () => res.destroy());
        out.end(Buffer.concat(chunks));
      }, delayMs),
    );
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, close: () => closeAll(server) };
}

async function hungServer() {
  const server = http.createServer(() => {});
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}`, close: () => closeAll(server) };
}

async function closedUrl() {
  const server = http.createServer();
  const port = await listen(server);
  await new Promise((r) => server.close(r));
  return `http://127.0.0.1:${port}`;
}

function closeAll(server) {
  server.closeAllConnections?.();
  return new Promise((r) => server.close(r));
}

const counts = QUICK ? { up: 12, slow: 3, down: 12, hung: 4 } : { up: 60, slow: 6, down: 60, hung: 6 };
const scenarios = {};
await runScenario(GATEWAY, 3); // warm-up: module load, first connections
scenarios.up = await runScenario(GATEWAY, counts.up);
const proxy = await slowProxy(GATEWAY, 2000);
scenarios.slow_2s = await runScenario(proxy.url, counts.slow);
await proxy.close();
scenarios.down = await runScenario(await closedUrl(), counts.down);
const hung = await hungServer();
scenarios.hung = await runScenario(hung.url, counts.hung);
await hung.close();

console.log(JSON.stringify({ node: process.version, quick: QUICK, scenarios }));
