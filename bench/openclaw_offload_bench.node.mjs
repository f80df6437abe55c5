// Measurement half of bench/openclaw_offload_bench.py (which starts the real gateway, writes the
// inputs and passes them in the environment). Loads the real bridge (openclaw_bridge/index.js)
// with a stand-in for OpenClaw's plugin api, then times what OpenClaw would wait on:
//
//   per tool result: the tool-result middleware (-> POST /offload/tool-result), on outputs of
//                    2 KB to 45 KB, English and Chinese;
//   per model call:  the context engine's assemble (-> POST /offload/assemble), replaying a real
//                    recorded session (chained SWE-agent sessions) call by call: before each
//                    assistant message the engine assembles the history so far, and each tool
//                    result goes through the middleware first, as in OpenClaw's tool loop.
//
// Scenarios: gateway up; slow (a proxy delays every offload answer by 2 s: within the bridge's
// deadlines; and by 6 s: past them); down (nothing listens); hung (accepts, never answers); and
// offload off (the engine passes through). Prints one JSON document.

import http from "node:http";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const ROOT = join(here, "..");
const GATEWAY = process.env.MEMORY_TENCENTDB_GATEWAY_URL;
const DATA_DIR = process.env.MEMORY_TENCENTDB_DATA_DIR;
const INPUTS = process.env.MEMORY_TENCENTDB_BENCH_INPUTS;
const QUICK = process.argv.includes("--quick");
if (!GATEWAY || !DATA_DIR || !INPUTS) {
  console.error("run bench/openclaw_offload_bench.py, which starts the gateway");
  process.exit(2);
}
const inputs = JSON.parse(readFileSync(INPUTS, "utf8"));
const PLUGIN_ID = "memory-tencentdb";

let generation = 0;
async function freshBridge(url, enabled = true) {
  generation += 1;
  const { default: bridge } = await import(`${join(ROOT, "openclaw_bridge/index.js")}?bench=${generation}`);
  const got = { middleware: undefined, engine: undefined, warnings: [] };
  const { hostname, port } = new URL(url);
  bridge.register({
    registrationMode: "full",
    config: { plugins: { slots: { contextEngine: PLUGIN_ID } } },
    pluginConfig: { host: hostname, port: Number(port), dataDir: DATA_DIR, scope: `bench-${generation}`, offload: { enabled } },
    logger: { warn: (m) => got.warnings.push(m), info() {}, error: (m) => got.warnings.push(m), debug() {} },
    on() {},
    registerTool() {},
    registerService() {},
    registerContextEngine: (id, factory) => (got.engine = factory),
    registerAgentToolResultMiddleware: (handler) => (got.middleware = handler),
  });
  return got;
}

function ctxFor(session) {
  return { runtime: "openclaw", agentId: "main", sessionId: `sid-${session}`, sessionKey: session, runId: `run-${session}` };
}

function toolEvent(id, name, text, args = {}) {
  return { toolCallId: id, toolName: name, args, result: { content: [{ type: "text", text }], details: {} } };
}

// Per tool result, one output size at a time: a fresh call id each time (a repeated id would be a
// duplicate the gateway answers without writing).
async function timeToolResults(url, reps) {
  const bridge = await freshBridge(url);
  const out = {};
  for (const doc of inputs.docs) {
    const times = [];
    let stubbed = 0;
    for (let i = 0; i < reps; i += 1) {
      const session = `agent:main:bench-tr-${generation}`;
      const event = toolEvent(`call${doc.name.replace(/\W/g, "")}${generation}x${i}`, "exec", doc.text, { command: `cat ${doc.name}` });
      const t0 = performance.now();
      const answer = await bridge.middleware(event, ctxFor(session));
      times.push(performance.now() - t0);
      if (answer?.result) stubbed += 1;
    }
    out[doc.name] = { bytes: Buffer.byteLength(doc.text), calls: reps, stubbed, ...stats(times) };
  }
  return { per_output: out, warnings: bridge.warnings.length };
}

// A recorded session replayed call by call through the middleware and the engine.
async function playSession(url, maxModelCalls, { enabled = true, budget = inputs.token_budget } = {}) {
  const bridge = await freshBridge(url, enabled);
  const session = `agent:main:bench-session-${generation}`;
  const ctx = ctxFor(session);
  const history = [];
  const assembleTimes = [];
  const toolTimes = [];
  const callSizes = [];
  let prompt = "";
  let calls = 0;
  let inputTokens = 0;
  let assembledTokens = 0;
  let stubbed = 0;
  for (const message of inputs.session) {
    if (message.role === "user") {
      prompt = message.content?.[0]?.text ?? "";
      history.push(message);
      continue;
    }
    if (message.role === "toolResult") {
      if (bridge.middleware) {
        const event = toolEvent(message.toolCallId, message.toolName, message.content?.[0]?.text ?? "");
        const t0 = performance.now();
        const answer = await bridge.middleware(event, ctx);
        toolTimes.push(performance.now() - t0);
        if (answer?.result) {
          stubbed += 1;
          history.push({ ...message, content: answer.result.content });
          continue;
        }
      }
      history.push(message);
      continue;
    }
    // An assistant message: one model call, with the engine's assemble right before it.
    if (calls >= maxModelCalls) break;
    calls += 1;
    const engine = bridge.engine();
    const t0 = performance.now();
    const assembled = await engine.assemble({ sessionId: ctx.sessionId, sessionKey: session, messages: history.slice(), tokenBudget: budget, prompt, runtimeContext: { agentId: "main" } });
    assembleTimes.push(performance.now() - t0);
    callSizes.push(history.length);
    await engine.dispose();
    inputTokens += approxTokens(history);
    assembledTokens += approxTokens(assembled.messages);
    history.push(message);
  }
  return {
    model_calls: calls,
    tool_results: toolTimes.length,
    tool_results_stubbed: stubbed,
    assemble: stats(assembleTimes),
    tool_result: toolTimes.length ? stats(toolTimes) : null,
    first_assemble_ms: round(assembleTimes[0] ?? 0),
    after_breaker_assemble_p50_ms: assembleTimes.length > 4 ? stats(assembleTimes.slice(4)).p50_ms : null,
    history_chars_per_call: Math.round(inputTokens / Math.max(1, calls)) * 4,
    assembled_share: inputTokens ? round(assembledTokens / inputTokens) : null,
    slowest_calls: assembleTimes
      .map((ms, i) => ({ call: i + 1, messages: callSizes[i], ms: round(ms) }))
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 5),
    warning_count: bridge.warnings.length,
    warnings: bridge.warnings.slice(0, 5),
  };
}

function approxTokens(messages) {
  let chars = 0;
  for (const m of messages ?? []) chars += JSON.stringify(m?.content ?? "").length;
  return chars / 4;
}

function stats(values) {
  if (!values.length) return { p50_ms: null, p95_ms: null, max_ms: null, mean_ms: null };
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

// Forwards to the real gateway; answers of /offload/* routes are held back `delayMs` first.
async function slowProxy(target, delayMs) {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () =>
      setTimeout(
        () => {
          const out = http.request(
            { host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers },
            (answer) => {
              res.writeHead(answer.statusCode, answer.headers);
              answer.pipe(res);
            },
          );
          out.on("error", () => res.destroy());
          out.end(Buffer.concat(chunks));
        },
        req.url.startsWith("/offload/") ? delayMs : 0,
      ),
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

const n = QUICK
  ? { reps: 4, up: 30, slow: 4, down: 20, hung: 4 }
  : { reps: 15, up: 1_000, slow: 8, down: 60, hung: 6 };
await timeToolResults(GATEWAY, 2); // warm-up: module load, first connections, tokenizer
const result = { node: process.version, quick: QUICK, token_budget: inputs.token_budget, tool_results: {}, sessions: {} };

result.tool_results.up = await timeToolResults(GATEWAY, n.reps);
result.sessions.up = await playSession(GATEWAY, n.up);
result.sessions.offload_off = await playSession(GATEWAY, n.up, { enabled: false });
for (const delay of [2000, 6000]) {
  const proxy = await slowProxy(GATEWAY, delay);
  result.tool_results[`slow_${delay / 1000}s`] = await timeToolResults(proxy.url, 2);
  result.sessions[`slow_${delay / 1000}s`] = await playSession(proxy.url, n.slow);
  await proxy.close();
}
const down = await closedUrl();
result.tool_results.down = await timeToolResults(down, n.reps);
result.sessions.down = await playSession(down, n.down);
const hung = await hungServer();
result.tool_results.hung = await timeToolResults(hung.url, 2);
result.sessions.hung = await playSession(hung.url, n.hung);
await hung.close();

console.log(JSON.stringify(result));
