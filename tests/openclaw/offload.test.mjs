// Context offload in the bridge (issue 11), driven by payloads recorded from OpenClaw 2026.9.6
// (fixtures/offload_turns.json, tests/openclaw/record_offload_fixtures.py) against a stand-in
// gateway: what each seam sends and uses, and every degrade path (gateway down, slow, 500,
// malformed answers): handlers never throw, keep their deadlines, and leave the host's data as
// it was. The real gateway's side is in offload_gateway.test.mjs.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { createContextEngineFactory, EngineActivity, runtimeCompaction } from "../../openclaw_bridge/lib/context_engine.js";
import { BRIDGE_DIR, bridgeWith, closedPort, configFor, expectedScope, fakeApi, live, loadBridge, recorded, startStub, timed } from "./helpers.mjs";

const PLUGIN = "memory-tencentdb";
const READ_TOOL = "memory_tencentdb_offload_read";
const SLOT = { plugins: { slots: { contextEngine: PLUGIN } } };
const manifest = JSON.parse(readFileSync(join(BRIDGE_DIR, "openclaw.plugin.json"), "utf8"));

const STUB_TEXT = "[offloaded: recorder_big_output 6000 chars | memory_tencentdb_offload_read {\"tool_call_id\": \"call_big_en\"}]";
const CANVAS = '<current_task_context file="001-build.mmd" sig="0123456789abcdef">\nCanvas of the active task\n```mermaid\nflowchart TD\n```\n</current_task_context>';
const GUIDE = "## Context offload\nCall memory_tencentdb_offload_read for originals.";

// What a healthy gateway answers, per route. Assemble hands the messages back with one canvas
// message before the newest user message, as the real one does.
function healthy(req, body) {
  if (req.url === "/offload/tool-result") {
    const big = typeof body.result === "string" ? body.result.length > 2000 : true;
    return { body: { offloaded: big, replacement: big ? STUB_TEXT : null, ref: "refs/x.md", tool_call_id: body.tool_call_id, duplicate: false } };
  }
  if (req.url === "/offload/assemble") {
    const messages = [...body.messages];
    let last = -1;
    messages.forEach((m, i) => {
      if (m.role === "user") last = i;
    });
    const canvas = { role: "user", content: [{ type: "text", text: CANVAS }], timestamp: 1 };
    if (last >= 0) messages.splice(last, 0, canvas);
    else messages.push(canvas);
    return { body: { messages, estimated_tokens: 1234, system_addition: GUIDE, level: "mild", canvas: { file: "001-build.mmd" }, stats: {} } };
  }
  if (req.url === "/offload/read") return { body: { kind: "tool_result", content: "the original", encoding: "text" } };
  if (req.url === "/offload/host-status") return { body: { ...body, since: "t", updated: "t" } };
  if (req.url === "/recall") return { body: { prepend_context: "<relevant-memories>\n- likes teal\n</relevant-memories>", append_system_context: "" } };
  return { body: {} };
}

let stub;
before(async () => {
  stub = await startStub((req, body) => stub.plan(req, body));
  stub.plan = healthy;
});
after(async () => {
  await stub.close();
});

function reset(plan = healthy) {
  stub.requests.length = 0;
  stub.plan = plan;
}

// Generous deadlines (a loaded 2-core machine), short ones where a test is about the deadline.
const offloadOn = (extra = {}) => ({ enabled: true, toolResultTimeoutMs: 3000, assembleTimeoutMs: 3000, canvasTimeoutMs: 3000, readTimeoutMs: 3000, ...extra });
const SHORT = { toolResultTimeoutMs: 400, assembleTimeoutMs: 400, canvasTimeoutMs: 400, readTimeoutMs: 400 };

async function bridge({ offload = offloadOn(), config = SLOT, url = stub.url, extra = {} } = {}) {
  return bridgeWith(configFor(url, { offload, recall: { enabled: false }, capture: { enabled: false }, ...extra }), { config });
}

function middlewareOf(api) {
  assert.equal(api.middlewares.length, 1);
  return api.middlewares[0].handler;
}

function engineOf(api) {
  const factory = api.engines.get(PLUGIN);
  assert.ok(factory, "engine registered under the plugin id");
  return factory({});
}

const toolResult = (n) => recorded("offload_turns", "tool_result_middleware", n);
const assembleCall = (n) => recorded("offload_turns", "engine.assemble", n);

// ---------------------------------------------------------------- registration and manifest

test("manifest: the middleware contract and the read tool are declared", () => {
  assert.deepEqual(manifest.contracts.agentToolResultMiddleware, ["openclaw"]);
  assert.ok(manifest.contracts.tools.includes(READ_TOOL));
  assert.equal(manifest.toolMetadata[READ_TOOL].sideEffecting, false);
  assert.equal(manifest.configSchema.properties.offload.properties.enabled.default, false);
});

test("offload off (default): the engine is a pass-through, no middleware, no read tool, no offload call", async () => {
  reset();
  const api = await bridgeWith(configFor(stub.url, { recall: { enabled: false }, capture: { enabled: false } }), { config: SLOT });
  assert.equal(api.middlewares.length, 0);
  assert.ok(!api.tools.has(READ_TOOL));
  assert.ok(!api.hooks.has("before_prompt_build"), "no canvas hook without offload (and no recall here)");
  const engine = engineOf(api);
  assert.equal(engine.info.id, PLUGIN);
  assert.equal(engine.info.ownsCompaction, true);
  assert.deepEqual(engine.info.transcriptSemantics, { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" });
  const { event } = assembleCall(5);
  const out = await engine.assemble(event);
  assert.equal(out.messages, event.messages, "the very same list");
  assert.ok(out.estimatedTokens > 0);
  assert.equal(out.promptAuthority, "preassembly_may_overflow", "OpenClaw's own overflow check stays on");
  assert.equal(out.systemPromptAddition, undefined);
  assert.deepEqual(stub.paths(), []);
  assert.deepEqual(api.warnings(), []);
});

test("offload off: recall's before_prompt_build is the plain recall hook, same timeout as before", async () => {
  const api = await bridgeWith(configFor(stub.url, {}), { config: SLOT });
  const off = api.hooks.get("before_prompt_build");
  assert.equal(off.opts.timeoutMs, 3000);
  const on = await bridgeWith(configFor(stub.url, { offload: { enabled: true } }), { config: SLOT });
  // recall 2500 in parallel with canvas 3000 + the fallback report 1500, plus the margin.
  assert.equal(on.hooks.get("before_prompt_build").opts.timeoutMs, 5000);
});

test("offload on: the middleware for the openclaw runtime, the read tool, the engine", async () => {
  const api = await bridge();
  assert.deepEqual(api.middlewares[0].options, { runtimes: ["openclaw"] });
  const tool = api.tool(READ_TOOL, { agentId: "main", sessionKey: "agent:main:x" });
  assert.equal(tool.name, READ_TOOL);
  assert.deepEqual(Object.keys(tool.parameters.properties).sort(), ["canvas", "node_id", "offset", "result_ref", "tool_call_id"]);
  assert.equal(tool.parameters.additionalProperties, false);
  assert.ok(engineOf(api).commitTurn);
  assert.deepEqual(api.warnings(), []);
});

test("a host without the offload registrations: the rest of the plugin still registers", async () => {
  const bridgeMod = await import(`${new URL(`file://${join(BRIDGE_DIR, "index.js")}`).href}?nohost=1`);
  const api = fakeApi({ pluginConfig: configFor(stub.url, { offload: { enabled: true } }) });
  delete api.registerAgentToolResultMiddleware;
  delete api.registerContextEngine;
  bridgeMod.default.register(api);
  assert.ok(api.hooks.has("before_prompt_build"));
  assert.ok(api.tools.has(READ_TOOL));
  assert.ok(api.warnings().some((w) => /tool results are not offloaded/.test(w)));
});

// ---------------------------------------------------------------- tool-result middleware

test("middleware: a large result becomes the gateway's stub; details and the rest are kept", async () => {
  reset();
  const api = await bridge();
  const { event, ctx } = toolResult(0); // recorder_big_output, 6000 chars
  const out = await middlewareOf(api)(event, ctx);
  assert.deepEqual(out, { result: { ...event.result, content: [{ type: "text", text: STUB_TEXT }] } });
  assert.deepEqual(out.result.details, event.result.details);
  const [sent] = stub.requests;
  assert.equal(sent.path, "/offload/tool-result");
  assert.deepEqual(
    { ...sent.body, timestamp: typeof sent.body.timestamp },
    {
      session_key: "agent:main:rec-offload",
      scope: await expectedScope(api, "main"),
      tool_call_id: "call_big_en",
      tool_name: "recorder_big_output",
      result: event.result.content[0].text,
      arguments: { chars: 6000, lang: "en" },
      is_error: false,
      timestamp: "number",
    },
  );
  assert.equal(sent.body.result.length, 6000, "sent byte-exact");
});

test("middleware: the core read tool and a Chinese result go the same way; a small one is kept", async () => {
  reset();
  const api = await bridge();
  const mw = middlewareOf(api);
  for (const n of [1, 2]) {
    const { event, ctx } = toolResult(n);
    const out = await mw(event, ctx);
    assert.equal(out.result.content[0].text, STUB_TEXT, event.toolName);
  }
  assert.equal(stub.requests[1].body.result, toolResult(2).event.result.content[0].text);
  assert.match(stub.requests[1].body.result, /第0行：构建日志/);
  const { event, ctx } = toolResult(0);
  event.result.content[0].text = "short output";
  assert.equal(await mw(event, ctx), undefined, "replacement null: the original stays");
});

test("middleware: never offloads the read-back, images, empty or odd events; no call for them", async () => {
  reset();
  const api = await bridge();
  const mw = middlewareOf(api);
  const { event, ctx } = toolResult(0);
  const cases = [
    { ...event, toolName: READ_TOOL },
    { ...event, toolName: "tool_call", args: { id: READ_TOOL, args: { tool_call_id: "x" } } },
    { ...event, result: { content: [...event.result.content, { type: "image", mimeType: "image/png", data: "AAAA" }] } },
    { ...event, result: { content: [] } },
    { ...event, result: { content: [{ type: "text", text: "" }] } },
    { ...event, result: 5 },
    { ...event, toolCallId: "" },
    null,
    "garbage",
  ];
  for (const c of cases) assert.equal(await mw(c, ctx), undefined);
  assert.equal(await mw(event, {}), undefined, "no session: nothing to file it under");
  assert.equal(await mw(event, undefined), undefined);
  assert.deepEqual(stub.paths(), []);
});

test("middleware: an excluded agent is left alone", async () => {
  reset();
  const api = await bridge({ extra: { excludeAgents: ["ma*"] } });
  const { event, ctx } = toolResult(0);
  assert.equal(await middlewareOf(api)(event, ctx), undefined);
  assert.deepEqual(stub.paths(), []);
});

test("middleware degrade: 500, malformed answers, a stub no shorter than the result: the original stays", async () => {
  const plans = [
    () => ({ status: 500, body: { error: "boom" } }),
    () => ({ status: 422, body: { error: "result: bad" } }),
    () => ({ status: 200, body: "not json" }),
    () => ({ body: { replacement: 42 } }),
    () => ({ body: { replacement: "   " } }),
    () => ({ body: { replacement: "x".repeat(100_001) } }),
    () => ({ body: { replacement: "y".repeat(7000) } }),
    () => ({ body: [] }),
    () => ({ body: null }),
  ];
  for (const plan of plans) {
    reset((req) => (req.url === "/offload/tool-result" ? plan() : healthy(req, {})));
    const api = await bridge({ extra: { breaker: { failureThreshold: 100 } } });
    const { event, ctx } = toolResult(0);
    const before = structuredClone(event);
    assert.equal(await middlewareOf(api)(event, ctx), undefined, JSON.stringify(plan()).slice(0, 80));
    assert.deepEqual(event, before, "the host's event is not touched");
  }
});

test("middleware degrade: slow gateway: gives up at its deadline and keeps the original", async () => {
  reset((req) => (req.url === "/offload/tool-result" ? { hang: true } : healthy(req, {})));
  const api = await bridge({ offload: offloadOn(SHORT) });
  const { event, ctx } = toolResult(0);
  const { ms, value } = await timed(() => middlewareOf(api)(event, ctx));
  assert.equal(value, undefined);
  assert.ok(ms < 1400, `deadline 400 ms kept, took ${ms} ms`);
  assert.ok(api.warnings().some((w) => /tool result kept whole \(offload unavailable: timeout after 400ms\)/.test(w)));
});

test("middleware degrade: /health answers but the offload route hangs: the breaker opens after 3 timeouts", async () => {
  reset((req) => (req.url === "/offload/tool-result" ? { hang: true } : healthy(req, {})));
  const api = await bridge({ offload: offloadOn(SHORT), extra: { breaker: { failureThreshold: 3, cooldownMs: 60_000 } } });
  const mw = middlewareOf(api);
  const took = [];
  for (let i = 0; i < 6; i += 1) {
    const { event, ctx } = toolResult(i % 3);
    const { ms, value } = await timed(() => mw(event, ctx));
    assert.equal(value, undefined);
    took.push(ms);
  }
  assert.equal(stub.requests.filter((r) => r.path === "/offload/tool-result").length, 3, "calls 4-6 short-circuit");
  assert.ok(took.slice(3).every((ms) => ms < 200), `after the breaker opened: ${took.map(Math.round)}`);
  assert.ok(api.warnings().some((w) => /circuit-open/.test(w)));
});

test("middleware degrade: gateway down: at once, warnings rate-limited, then the breaker stops the calls", async () => {
  const port = await closedPort();
  const api = await bridgeWith({ port, offload: offloadOn(), recall: { enabled: false }, breaker: { failureThreshold: 2, cooldownMs: 60_000 } }, { config: SLOT });
  const mw = middlewareOf(api);
  for (let i = 0; i < 6; i += 1) {
    const { event, ctx } = toolResult(i % 3);
    const { ms, value } = await timed(() => mw(event, ctx));
    assert.equal(value, undefined);
    assert.ok(ms < 1000, `took ${ms} ms`);
  }
  const warnings = api.warnings();
  assert.ok(warnings.some((w) => /ECONNREFUSED/.test(w)));
  assert.ok(warnings.some((w) => /circuit-open/.test(w)));
  assert.ok(warnings.length <= 3, `rate-limited: ${warnings.join(" | ")}`);
});

// ---------------------------------------------------------------- context engine

test("engine assemble: the gateway's messages, tokens and guide; the request carries the history and prompt", async () => {
  reset();
  const api = await bridge();
  const engine = engineOf(api);
  const { event } = assembleCall(5); // turn 2, pre-prompt: the 8 messages of turn 1
  const out = await engine.assemble(event);
  const [sent] = stub.requests;
  assert.equal(sent.path, "/offload/assemble");
  assert.deepEqual(
    { key: sent.body.session_key, budget: sent.body.token_budget, format: sent.body.format, prompt: sent.body.prompt, scope: sent.body.scope, follows: sent.body.current_turn_follows },
    { key: "agent:main:rec-offload", budget: event.tokenBudget, format: "agent", prompt: "总结一下刚才的结果。", scope: await expectedScope(api, "main"), follows: true },
  );
  assert.deepEqual(sent.body.messages, event.messages);
  assert.equal(out.messages.filter((m) => m.content?.[0]?.text === CANVAS).length, 1);
  assert.equal(out.estimatedTokens, 1234);
  assert.equal(out.systemPromptAddition, GUIDE);
  assert.equal(out.promptAuthority, undefined, "an assembled list is within the budget: ours to judge");
});

test("engine assemble: our earlier canvas is removed before the gateway adds one; one canvas per call", async () => {
  reset();
  const engine = engineOf(await bridge());
  const { event } = assembleCall(5);
  let messages = event.messages;
  for (let call = 0; call < 3; call += 1) {
    const out = await engine.assemble({ ...event, messages });
    messages = out.messages;
    assert.equal(messages.filter((m) => m.content?.[0]?.text?.startsWith("<current_task_context")).length, 1, `call ${call}`);
  }
  for (const req of stub.requests) {
    assert.ok(!req.body.messages.some((m) => m.content?.[0]?.text?.startsWith("<current_task_context")), "sent without our marker");
  }
  // The note on what left the context goes back to the gateway, which decides if it still holds.
  reset();
  const note = { role: "user", content: [{ type: "text", text: '<history_task_context mode="offloaded">\n5 earlier messages left\n</history_task_context>' }], timestamp: 2 };
  await engine.assemble({ ...event, messages: [note, ...event.messages] });
  assert.deepEqual(stub.requests[0].body.messages[0], note);
});

test("engine assemble: a user's own message that starts like a canvas (unsigned) is the user's and goes to the gateway", async () => {
  reset();
  const engine = engineOf(await bridge());
  const { event } = assembleCall(5);
  const mine = { role: "user", content: [{ type: "text", text: "<current_task_context> 这是我自己写的 / my own text" }], timestamp: 3 };
  await engine.assemble({ ...event, messages: [...event.messages, mine] });
  assert.ok(stub.requests[0].body.messages.some((m) => m.content?.[0]?.text === mine.content[0].text), "kept");
});

test("engine assemble: messages of other roles (compaction summaries) are kept ahead of the dialogue", async () => {
  reset();
  const engine = engineOf(await bridge());
  const { event } = assembleCall(5);
  const summary = { role: "compactionSummary", summary: "earlier work", timestamp: 5 };
  const out = await engine.assemble({ ...event, messages: [summary, ...event.messages] });
  assert.deepEqual(out.messages[0], summary);
  assert.ok(!stub.requests[0].body.messages.some((m) => m.role === "compactionSummary"), "not sent to the gateway");
});

test("engine assemble: tool-loop calls keep room for the system prompt and the reserve (recorded budgets)", async () => {
  reset();
  const api = await bridge();
  const engine = engineOf(api);
  const { event: prompt, ctx } = recorded("offload_turns", "before_prompt_build", 0);
  const calls = [0, 1, 2, 3, 4].map(assembleCall);
  // Loop calls carry the window; the pre-prompt call's budget is the window less the reserve
  // and the system prompt.
  const window = calls[1].event.runtimeSettings.limits.promptTokenBudget;
  const overhead = window - calls[0].event.tokenBudget;
  assert.ok(overhead > 10_000, `recorded overhead ${overhead}`);
  await engine.assemble(calls[0].event); // pre-prompt
  await api.fire("before_prompt_build", prompt, live(ctx));
  for (const c of calls.slice(1)) await engine.assemble(c.event); // one per model call
  const sent = stub.requests.filter((r) => r.path === "/offload/assemble").map((r) => r.body.token_budget);
  assert.deepEqual(sent, [calls[0].event.tokenBudget, ...calls.slice(1).map((c) => c.event.tokenBudget - overhead)]);
  // After the turn is committed, the next turn's first call is a pre-prompt call again.
  await engine.commitTurn(recorded("offload_turns", "engine.commitTurn", 0).event);
  reset();
  await engine.assemble(assembleCall(5).event);
  assert.equal(stub.requests[0].body.token_budget, assembleCall(5).event.tokenBudget);
});

test("engine assemble: a tiny budget is raised to the gateway's minimum; no budget or session: unchanged", async () => {
  reset();
  const engine = engineOf(await bridge());
  const { event } = assembleCall(1);
  await engine.assemble({ ...event, tokenBudget: 10 });
  assert.equal(stub.requests[0].body.token_budget, 1024);
  reset();
  for (const p of [{ ...event, tokenBudget: undefined }, { ...event, sessionKey: undefined, sessionId: undefined }, {}, undefined]) {
    const out = await engine.assemble(p);
    assert.ok(Array.isArray(out.messages));
  }
  assert.deepEqual(stub.paths(), []);
});

test("engine assemble degrade: down, slow, 500, malformed: the input messages, unchanged, within the deadline", async () => {
  const bad = [
    () => ({ status: 500, body: { error: "boom" } }),
    () => ({ status: 422, body: { error: "messages[0].role: bad" } }),
    () => ({ body: "not json" }),
    () => ({ body: { messages: "nope" } }),
    () => ({ body: { messages: [{ role: "system", content: "x" }] } }),
    () => ({ body: { messages: [{ role: "toolResult", toolCallId: "ghost", content: [] }] } }),
    () => ({ body: { messages: [null] } }),
    () => ({ body: { messages: [{ role: "user", content: 7 }] } }),
    () => ({ hang: true }),
  ];
  for (const plan of bad) {
    reset((req) => (req.url === "/offload/assemble" ? plan() : healthy(req, {})));
    const api = await bridge({ offload: offloadOn(SHORT), extra: { breaker: { failureThreshold: 100 } } });
    const { event } = assembleCall(5);
    const before = structuredClone(event.messages);
    const { ms, value } = await timed(() => engineOf(api).assemble(event));
    assert.equal(value.messages, event.messages, JSON.stringify(plan()).slice(0, 60));
    assert.equal(value.promptAuthority, "preassembly_may_overflow");
    assert.deepEqual(event.messages, before);
    assert.equal(value.systemPromptAddition, undefined);
    assert.ok(ms < 1400, `took ${ms} ms`);
  }
  const port = await closedPort();
  const down = await bridgeWith({ port, offload: offloadOn() }, { config: SLOT });
  const { event } = assembleCall(5);
  assert.equal((await engineOf(down).assemble(event)).messages, event.messages);
  assert.ok(down.warnings().some((w) => /context offload skipped for this model call: unreachable/.test(w)));
});

test("engine commitTurn: idempotent by advancementKey (recorded payload); dispose tears down nothing", async () => {
  reset();
  const api = await bridge();
  const engine = engineOf(api);
  const { event } = recorded("offload_turns", "engine.commitTurn", 0);
  assert.deepEqual(await engine.commitTurn(event), { status: "committed" });
  assert.deepEqual(await engine.commitTurn(event), { status: "duplicate" });
  // A fresh engine object of the same process (OpenClaw disposes it after each turn).
  await engine.dispose();
  const next = engineOf(api);
  assert.deepEqual(await next.commitTurn(event), { status: "duplicate" });
  assert.deepEqual(await next.commitTurn({ ...event, advancementKey: `${event.advancementKey}-2` }), { status: "committed" });
  // The shared link still works after dispose.
  const out = await next.assemble(assembleCall(5).event);
  assert.equal(out.estimatedTokens, 1234);
  assert.deepEqual(await next.bootstrap({}), { bootstrapped: true, importedMessages: 0 });
  assert.deepEqual(await next.maintain({}), { changed: false, bytesFreed: 0, rewrittenEntries: 0 });
});

test("engine compact: handed to the runtime's compaction; without it, a clear not-compacted", async () => {
  const config = { offload: { enabled: true, assembleTimeoutMs: 400 }, excludeAgents: [] };
  const seen = [];
  const make = (delegateCompaction) =>
    createContextEngineFactory({ pluginId: PLUGIN, config, link: {}, warn: () => {}, activity: new EngineActivity(), delegateCompaction })();
  const params = { sessionId: "s", sessionKey: "agent:main:x", force: true, tokenBudget: 1000 };
  const delegated = await make(async () => async (p) => {
    seen.push(p);
    return { ok: true, compacted: true, result: { tokensBefore: 900, tokensAfter: 300 } };
  }).compact(params);
  assert.deepEqual(delegated, { ok: true, compacted: true, result: { tokensBefore: 900, tokensAfter: 300 } });
  assert.deepEqual(seen, [params]);
  const missing = await make(async () => null).compact(params);
  assert.equal(missing.ok, false);
  assert.equal(missing.compacted, false);
  const throwing = await make(async () => async () => {
    throw new Error("runtime broke");
  }).compact(params);
  assert.deepEqual([throwing.ok, throwing.compacted], [false, false]);
  // The SDK loader: a failed import is "not available", asked once.
  let loads = 0;
  const loader = runtimeCompaction(async () => {
    loads += 1;
    throw new Error("no sdk");
  });
  assert.equal(await loader(), null);
  assert.equal(await loader(), null);
  assert.equal(loads, 1);
  const ok = runtimeCompaction(async () => ({ delegateCompactionToRuntime: () => "x" }));
  assert.equal(typeof (await ok()), "function");
});

test("engine compact: a failed runtime compaction is a benign skip while the gateway assembles every call within the budget", async () => {
  const on = { offload: { enabled: true, assembleTimeoutMs: 400 }, excludeAgents: [] };
  const off = { offload: { enabled: false, assembleTimeoutMs: 400 }, excludeAgents: [] };
  const rejected = { ok: false, compacted: false, reason: "compaction safeguard: summary quality guard blocked" };
  const make = (config, up) =>
    createContextEngineFactory({
      pluginId: PLUGIN, config, warn: () => {}, activity: new EngineActivity(),
      link: { ensure: async () => ({ ok: up }) },
      delegateCompaction: async () => async () => rejected,
    })();
  const params = { sessionId: "s", sessionKey: "agent:main:x", force: true, tokenBudget: 1000 };
  const skipped = await make(on, true).compact(params);
  assert.equal(skipped.ok, true);
  assert.equal(skipped.compacted, false);
  assert.match(skipped.reason, /^already under target: /); // OpenClaw classes it below_threshold
  // Gateway down (the host's messages go as they are) or offload off: the failure stands.
  assert.deepEqual(await make(on, false).compact(params), rejected);
  assert.deepEqual(await make(off, true).compact(params), rejected);
});

// ---------------------------------------------------------------- the per-turn canvas

test("no slot: the canvas once per turn through before_prompt_build, from the prior history and the prompt", async () => {
  reset();
  const api = await bridge({ config: {} });
  const { event, ctx } = recorded("offload_turns", "before_prompt_build", 1);
  const out = await api.fire("before_prompt_build", event, live(ctx));
  assert.deepEqual(out, { prependContext: CANVAS, appendSystemContext: GUIDE });
  const [sent] = stub.requests;
  assert.equal(sent.path, "/offload/assemble");
  assert.equal(sent.body.prompt, "总结一下刚才的结果。");
  assert.deepEqual(sent.body.messages, event.messages);
  assert.equal(sent.body.token_budget, 10_000_000, "read only: nothing is cut here");
  assert.equal(sent.body.current_turn_follows, true);
  assert.deepEqual(api.warnings(), []);
});

test("no slot: recall and canvas side by side, merged", async () => {
  reset();
  const api = await bridgeWith(configFor(stub.url, { offload: offloadOn(), capture: { enabled: false } }), { config: {} });
  const { event, ctx } = recorded("offload_turns", "before_prompt_build", 1);
  const out = await api.fire("before_prompt_build", event, live(ctx));
  assert.equal(out.prependContext, `<relevant-memories>\n- likes teal\n</relevant-memories>\n\n${CANVAS}`);
  assert.equal(out.appendSystemContext, GUIDE);
  assert.deepEqual(stub.paths().sort(), ["/offload/assemble", "/recall"]);
});

test("no slot degrade: gateway 500 / slow / down: no canvas, recall unaffected, no throw", async () => {
  for (const plan of [() => ({ status: 500, body: {} }), () => ({ hang: true }), () => ({ body: { messages: "x" } })]) {
    reset((req, body) => (req.url === "/offload/assemble" ? plan() : healthy(req, body)));
    const api = await bridgeWith(configFor(stub.url, { offload: offloadOn(SHORT), capture: { enabled: false }, breaker: { failureThreshold: 100 } }), { config: {} });
    const { event, ctx } = recorded("offload_turns", "before_prompt_build", 1);
    const { ms, value } = await timed(() => api.fire("before_prompt_build", event, live(ctx)));
    assert.deepEqual(value, { prependContext: "<relevant-memories>\n- likes teal\n</relevant-memories>" });
    assert.ok(ms < 1400, `took ${ms} ms`);
  }
});

test("slot ours and the engine ran: no canvas from the hook (the engine adds it per call), no report", async () => {
  reset();
  const api = await bridge();
  const engine = engineOf(api);
  await engine.assemble(assembleCall(5).event); // the pre-prompt call comes before the hook
  reset();
  const { event, ctx } = recorded("offload_turns", "before_prompt_build", 1);
  assert.equal(await api.fire("before_prompt_build", event, live(ctx)), undefined);
  assert.deepEqual(stub.paths(), []);
  assert.deepEqual(api.warnings(), []);
});

test("slot ours, engine from the `full` module instance, hooks from a `discovery` one: no false fallback", async () => {
  // OpenClaw 2026.9.6 loads the plugin module once per registration pass (seen in a real run).
  reset();
  const pluginConfig = configFor(stub.url, { offload: offloadOn(), recall: { enabled: false }, capture: { enabled: false } });
  const full = fakeApi({ pluginConfig, config: SLOT, registrationMode: "full" });
  (await loadBridge()).register(full);
  const discovery = fakeApi({ pluginConfig, config: SLOT, registrationMode: "discovery" });
  const second = await import(`${new URL(`file://${join(BRIDGE_DIR, "index.js")}`).href}?instance=discovery`);
  second.default.register(discovery);
  await engineOf(full).assemble(assembleCall(5).event);
  const { event, ctx } = recorded("offload_turns", "before_prompt_build", 1);
  assert.equal(await discovery.fire("before_prompt_build", event, live(ctx)), undefined);
  assert.ok(!stub.paths().includes("/offload/host-status"));
  assert.deepEqual([...full.warnings(), ...discovery.warnings()], []);
});

test("slot ours but OpenClaw fell back to legacy: said once, reported to /health, canvas per turn; cleared when the engine runs", async () => {
  reset();
  const api = await bridge();
  const { event, ctx } = recorded("offload_turns", "before_prompt_build", 1);
  for (let turn = 0; turn < 3; turn += 1) {
    const out = await api.fire("before_prompt_build", event, live(ctx));
    assert.equal(out.prependContext, CANVAS, `turn ${turn}: the canvas still comes`);
  }
  const lines = api.logs.filter((l) => /context engine "memory-tencentdb" is not in use/.test(l.message));
  assert.equal(lines.length, 1, "once per process");
  assert.equal(lines[0].level, "warn");
  const reports = stub.requests.filter((r) => r.path === "/offload/host-status");
  assert.equal(reports.length, 1, "reported once while it lasts");
  const { scope, ...report } = reports[0].body;
  assert.deepEqual(report, { host: "openclaw", engine: PLUGIN, fallback: "OpenClaw did not call it before this turn's prompt" });
  assert.equal(typeof scope, "string", "reported for the agent's own scope (the gateway checks the key may write it)");
  assert.ok(scope.length > 0);

  // The engine is used again: the report is cleared, once.
  await engineOf(api).assemble(assembleCall(5).event);
  await api.fire("before_prompt_build", event, live(ctx));
  await engineOf(api).assemble(assembleCall(5).event);
  await api.fire("before_prompt_build", event, live(ctx));
  const all = stub.requests.filter((r) => r.path === "/offload/host-status").map((r) => r.body.fallback);
  assert.deepEqual(all, ["OpenClaw did not call it before this turn's prompt", null]);
  assert.ok(api.logs.some((l) => /is in use again/.test(l.message)));
});

test("fallback report: a gateway without the route (404) or down does not break the turn; retried while down", async () => {
  reset((req, body) => (req.url === "/offload/host-status" ? { status: 404, body: { error: "not found" } } : healthy(req, body)));
  const api = await bridge();
  const { event, ctx } = recorded("offload_turns", "before_prompt_build", 1);
  await api.fire("before_prompt_build", event, live(ctx));
  await api.fire("before_prompt_build", event, live(ctx));
  assert.equal(stub.requests.filter((r) => r.path === "/offload/host-status").length, 1, "404: an older gateway, not retried");

  reset((req, body) => (req.url === "/offload/host-status" ? { status: 503, body: {} } : healthy(req, body)));
  const retrying = await bridge({ extra: { breaker: { failureThreshold: 100 } } });
  await retrying.fire("before_prompt_build", event, live(ctx));
  await retrying.fire("before_prompt_build", event, live(ctx));
  assert.equal(stub.requests.filter((r) => r.path === "/offload/host-status").length, 2, "503: tried again next turn");
});

// ---------------------------------------------------------------- the read tool

test("read tool: byte-exact original; exactly one key; long originals in pages", async () => {
  const original = "第一行 — exact bytes\r\n\ttabs and trailing spaces   \n".repeat(3);
  const long = "z".repeat(200_000);
  reset((req, body) => {
    if (req.url !== "/offload/read") return healthy(req, body);
    if (body.tool_call_id === "long") return { body: { kind: "tool_result", content: long, encoding: "text" } };
    if (body.canvas) return { body: { kind: "canvas", canvas: "001-x.mmd", text: "flowchart TD\n" } };
    if (body.node_id) return { body: { kind: "node", node_id: body.node_id, canvas: "001-x.mmd", rows: [{ tool_call_id: "a" }] } };
    return { body: { kind: "tool_result", tool_call_id: body.tool_call_id, content: original, encoding: "text" } };
  });
  const api = await bridge();
  const tool = api.tool(READ_TOOL, { agentId: "main", sessionKey: "agent:main:rec-offload" });
  const got = await tool.execute("c1", { tool_call_id: "call_big_en" });
  assert.equal(got.content[0].text, original);
  assert.deepEqual(stub.requests.at(-1).body, { tool_call_id: "call_big_en", scope: await expectedScope(api, "main"), session_key: "agent:main:rec-offload", offset: 0, length: 7700 });
  assert.equal((await tool.execute("c2", { canvas: "active" })).content[0].text, "flowchart TD\n");
  assert.match((await tool.execute("c3", { node_id: "001-N1" })).content[0].text, /^Node 001-N1 of canvas 001-x.mmd: 1 step/);
  // A gateway from before paging answers the whole text: the tool pages it itself (at the
  // default 16k-token window: 7,700 ASCII characters a page, see readback.test.mjs).
  const first = await tool.execute("c4", { tool_call_id: "long" });
  assert.match(first.content[0].text, /\n\n\[memory_tencentdb_offload_read page: characters 0-7700 of 200000; next page: memory_tencentdb_offload_read \{"tool_call_id":"long","offset":7700\}\]$/);
  const last = await tool.execute("c5", { tool_call_id: "long", offset: 199_000 });
  assert.equal(last.content[0].text, `${"z".repeat(1_000)}\n\n[memory_tencentdb_offload_read page: characters 199000-200000 of 200000; last page]`);
  const before = stub.requests.length;
  assert.match((await tool.execute("c6", {})).content[0].text, /Give exactly one of/);
  assert.match((await tool.execute("c7", { tool_call_id: "a", canvas: "active" })).content[0].text, /got tool_call_id, canvas/);
  assert.equal(stub.requests.length, before, "no call for a bad request");
});

test("read tool degrade: 404, 422, 500, down, malformed: a sentence, never a throw", async () => {
  const cases = [
    [() => ({ status: 404, body: { error: "no such tool_call_id" } }), /Nothing stored under tool_call_id "x"/],
    [() => ({ status: 422, body: { error: "tool_call_id: bad" } }), /Cannot read that: http 422: tool_call_id: bad/],
    [() => ({ status: 500, body: { error: "boom" } }), /unavailable right now \(http 500: boom\)/],
    [() => ({ body: "not json" }), /unavailable right now \(bad answer/],
    [() => ({ body: { kind: "tool_result", content: 5 } }), /unexpected answer/],
    [() => ({ hang: true }), /unavailable right now \(timeout after 400ms\)/],
  ];
  for (const [plan, expected] of cases) {
    reset((req, body) => (req.url === "/offload/read" ? plan() : healthy(req, body)));
    const api = await bridge({ offload: offloadOn(SHORT), extra: { breaker: { failureThreshold: 100 } } });
    const tool = api.tool(READ_TOOL, { agentId: "main", sessionKey: "agent:main:x" });
    const got = await tool.execute("c", { tool_call_id: "x" });
    assert.match(got.content[0].text, expected);
  }
  const port = await closedPort();
  const down = await bridgeWith({ port, offload: offloadOn() }, { config: SLOT });
  const got = await down.tool(READ_TOOL, { agentId: "main", sessionKey: "agent:main:x" }).execute("c", { result_ref: "refs/a.md" });
  assert.match(got.content[0].text, /unavailable right now \(unreachable: ECONNREFUSED\)/);
});

// ---------------------------------------------------------------- persistence and capture

test("the canvas block injected per turn is stripped from what gets persisted", async () => {
  const api = await bridge({ config: {} });
  const message = { role: "user", content: [{ type: "text", text: `${CANVAS}\n\nWhat next?` }], timestamp: 1 };
  const out = api.fire("before_message_write", { message }, {});
  assert.equal(out.message.content[0].text, "What next?");
});
