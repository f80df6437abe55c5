// Context offload through the bridge against our real gateway, driven by payloads recorded from
// OpenClaw 2026.9.6 (fixtures/offload_turns.json). tests/openclaw/test_node_suites.py starts the
// gateway and passes MEMORY_TENCENTDB_GATEWAY_URL and _DATA_DIR; a bare `node --test` skips.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { bridgeWith, configFor, live, recorded } from "./helpers.mjs";

const GATEWAY = process.env.MEMORY_TENCENTDB_GATEWAY_URL;
const DATA_DIR = process.env.MEMORY_TENCENTDB_GATEWAY_DATA_DIR;
const skip = GATEWAY && DATA_DIR ? false : "MEMORY_TENCENTDB_GATEWAY_URL/_DATA_DIR not set (run through pytest)";
const PLUGIN = "memory-tencentdb";
const READ_TOOL = "memory_tencentdb_offload_read";
const SLOT = { plugins: { slots: { contextEngine: PLUGIN } } };

async function health() {
  const key = readFileSync(join(DATA_DIR, "gateway.key"), "utf8").trim();
  const response = await fetch(`${GATEWAY}/health`, { headers: { authorization: `Bearer ${key}` } });
  return response.json();
}

async function bridge(config = SLOT) {
  const offload = { enabled: true, toolResultTimeoutMs: 10_000, assembleTimeoutMs: 10_000, canvasTimeoutMs: 10_000, readTimeoutMs: 10_000 };
  return bridgeWith(configFor(GATEWAY, { dataDir: DATA_DIR, scope: "{agent}", offload, recall: { enabled: false }, capture: { enabled: false } }), { config });
}

/** The recorded records of one hook, moved into a fresh session of their own. */
function inSession(hook, sessionKey) {
  const records = [];
  for (let n = 0; ; n += 1) {
    try {
      records.push(recorded("offload_turns", hook, n));
    } catch {
      break;
    }
  }
  const text = JSON.stringify(records).replaceAll("agent:main:rec-offload", sessionKey);
  return JSON.parse(text);
}

test("middleware + read tool: the three recorded results become stubs; each original reads back byte for byte", { skip }, async () => {
  const sessionKey = `agent:main:${randomUUID()}`;
  const api = await bridge();
  const mw = api.middlewares[0].handler;
  const tool = api.tool(READ_TOOL, { agentId: "main", sessionKey });
  for (const { event, ctx } of inSession("tool_result_middleware", sessionKey)) {
    const original = event.result.content[0].text;
    const out = await mw(event, ctx);
    assert.ok(out, `${event.toolName}: offloaded (${original.length} chars)`);
    const stub = out.result.content[0].text;
    assert.ok(stub.length < original.length / 2, `${event.toolName}: stub of ${stub.length} chars`);
    assert.match(stub, new RegExp(`${READ_TOOL} \\{"tool_call_id": "${event.toolCallId}"\\}`));
    assert.deepEqual(out.result.details, event.result.details);
    const back = await tool.execute("read-1", { tool_call_id: event.toolCallId });
    assert.equal(back.content[0].text, original, `${event.toolName}: byte-exact`);
    // The id as OpenClaw rewrites it for the provider (no underscores) finds it too.
    const noUnderscore = await tool.execute("read-2", { tool_call_id: event.toolCallId.replaceAll("_", "") });
    assert.equal(noUnderscore.content[0].text, original);
    // Sent again (a retried tool call): the same stub, nothing new on disk.
    const again = await mw(event, ctx);
    assert.equal(again.result.content[0].text, stub);
  }
  const missing = await tool.execute("read-3", { tool_call_id: "call_never_made" });
  assert.match(missing.content[0].text, /^Nothing stored under tool_call_id/);
  assert.deepEqual(api.warnings(), []);
});

test("engine assemble: the recorded history comes back stubbed within a tight budget, at most one canvas", { skip }, async () => {
  const sessionKey = `agent:main:${randomUUID()}`;
  const api = await bridge();
  const engine = api.engines.get(PLUGIN)({});
  // Turn 1's results went through the middleware (as in a real run) before turn 2 assembles.
  const mw = api.middlewares[0].handler;
  for (const { event, ctx } of inSession("tool_result_middleware", sessionKey)) await mw(event, ctx);
  const { event } = inSession("engine.assemble", sessionKey)[5]; // turn 2, pre-prompt, 8 messages
  const size = (messages) => JSON.stringify(messages).length;
  const out = await engine.assemble({ ...event, tokenBudget: 3_000 });
  assert.notEqual(out.messages, event.messages, "the gateway's answer is used");
  assert.ok(size(out.messages) < size(event.messages) / 2, `${size(out.messages)} vs ${size(event.messages)} chars`);
  assert.ok(out.estimatedTokens <= 3_000, `estimated ${out.estimatedTokens}`);
  const canvases = out.messages.filter((m) => m.role === "user" && m.content?.[0]?.text?.startsWith("<current_task_context"));
  assert.ok(canvases.length <= 1);
  // Every tool result still follows its call (the host would reject the list otherwise).
  const calls = new Set(out.messages.flatMap((m) => (m.role === "assistant" ? m.content.filter((b) => b.type === "toolCall").map((b) => b.id) : [])));
  for (const m of out.messages) if (m.role === "toolResult") assert.ok(calls.has(m.toolCallId), m.toolCallId);
  // A session's first turn: OpenClaw's loop calls carry no history (the turn follows our list),
  // and the canvas of the steps so far still comes, alone.
  const first = await engine.assemble({ ...inSession("engine.assemble", sessionKey)[2].event });
  assert.equal(first.messages.length, 1);
  assert.match(first.messages[0].content[0].text, /^<current_task_context/);
  // The next model call gets our previous answer back: still at most one canvas.
  const next = await engine.assemble({ ...event, messages: out.messages, tokenBudget: 3_000 });
  assert.ok(next.messages.filter((m) => m.role === "user" && m.content?.[0]?.text?.startsWith("<current_task_context")).length <= 1);
  assert.deepEqual(api.warnings(), []);
});

test("no slot: the per-turn hook gets the canvas and guide from the real gateway, or nothing, never an error", { skip }, async () => {
  const sessionKey = `agent:main:${randomUUID()}`;
  const api = await bridge({});
  const mw = api.middlewares[0].handler;
  for (const { event, ctx } of inSession("tool_result_middleware", sessionKey)) await mw(event, ctx);
  const { event, ctx } = inSession("before_prompt_build", sessionKey)[1];
  const out = await api.fire("before_prompt_build", event, live(ctx));
  if (out?.prependContext) assert.match(out.prependContext, /^<current_task_context/);
  if (out?.appendSystemContext) assert.match(out.appendSystemContext, new RegExp(READ_TOOL));
  assert.deepEqual(api.warnings(), []);
});

test("fallback to legacy: one log line, /health offload.hosts + degraded while it lasts, cleared when the engine runs", { skip }, async () => {
  const sessionKey = `agent:main:${randomUUID()}`;
  const api = await bridge();
  const { event, ctx } = inSession("before_prompt_build", sessionKey)[1];
  await api.fire("before_prompt_build", event, live(ctx)); // no engine call before it: fallback
  // Reported for the agent's own scope: keyed "<scope>/openclaw" (bare "openclaw" is the default scope).
  const report = (health) => Object.entries(health.offload.hosts).find(([k]) => k === "openclaw" || k.endsWith("/openclaw"))?.[1];
  let h = await health();
  assert.match(report(h).fallback, /did not call it/);
  assert.ok(h.degraded.some((d) => /memory-tencentdb/.test(d)));
  assert.equal(api.logs.filter((l) => /is not in use/.test(l.message)).length, 1);

  await api.engines.get(PLUGIN)({}).assemble(inSession("engine.assemble", sessionKey)[5].event);
  await api.fire("before_prompt_build", event, live(ctx));
  h = await health();
  assert.equal(report(h).fallback, null);
  assert.ok(!h.degraded.some((d) => /memory-tencentdb/.test(d)));
});
