// Pure parts of the bridge: config, breaker, warnings, turn slicing, message conversion, stripping.

import assert from "node:assert/strict";
import { test } from "node:test";

import { CircuitBreaker } from "../../openclaw_bridge/lib/breaker.js";
import { baseUrlOf, isExcludedAgent, resolveConfig } from "../../openclaw_bridge/lib/config.js";
import { stripInjected, stripMessage } from "../../openclaw_bridge/lib/injected.js";
import { agentIdOf, sliceTurn, textOf, toGatewayMessages, TurnTracker } from "../../openclaw_bridge/lib/turns.js";
import { createWarner } from "../../openclaw_bridge/lib/warn.js";
import { recorded } from "./helpers.mjs";

test("config: defaults, coercion, and warnings instead of errors", () => {
  const { config, warnings } = resolveConfig({
    port: "9001",
    recall: { timeoutMs: "fast", enabled: "false" },
    capture: true,
    tpyo: 1,
    breaker: { failureThreshold: 2, extra: {} },
  });
  assert.equal(config.port, 9001);
  assert.equal(config.host, "127.0.0.1");
  assert.equal(config.recall.timeoutMs, 2500);
  assert.equal(config.recall.enabled, false);
  assert.equal(config.capture.enabled, true);
  assert.equal(config.breaker.failureThreshold, 2);
  assert.deepEqual(config.skipTriggers, ["cron", "heartbeat", "memory", "overflow"]);
  assert.deepEqual(warnings.sort(), [
    'config "capture" should be an object; using defaults',
    'config "recall.timeoutMs" should be a non-negative number; using 2500',
    'unknown config key "breaker.extra" ignored',
    'unknown config key "tpyo" ignored',
  ]);
  assert.deepEqual(resolveConfig(undefined).warnings, []);
  assert.equal(resolveConfig("nonsense").warnings.length, 1);
});

test("config: recall.placement is prepend by default; an unknown value warns and keeps it", () => {
  assert.equal(resolveConfig({}).config.recall.placement, "prepend");
  assert.equal(resolveConfig({ recall: { placement: "appendSystem" } }).config.recall.placement, "appendSystem");
  const { config, warnings } = resolveConfig({ recall: { placement: "system" } });
  assert.equal(config.recall.placement, "prepend");
  assert.deepEqual(warnings, ['config "recall.placement" should be one of "prepend", "appendSystem"; using "prepend"']);
});

test("config: base URL, IPv6 and agent exclusion globs", () => {
  assert.equal(baseUrlOf(resolveConfig({}).config), "http://127.0.0.1:8420");
  assert.equal(baseUrlOf(resolveConfig({ host: "::1", port: 1 }).config), "http://[::1]:1");
  assert.ok(isExcludedAgent("ops-bot", ["ops-*"]));
  assert.ok(isExcludedAgent("main", ["main"]));
  assert.ok(!isExcludedAgent("main", ["ops-*", "mai"]));
});

test("breaker: opens after the threshold, one half-open probe, closes on success", () => {
  let now = 0;
  const b = new CircuitBreaker({ failureThreshold: 2, cooldownMs: 1000, now: () => now });
  assert.ok(b.tryAcquire());
  b.onFailure();
  assert.equal(b.state, "closed");
  assert.ok(b.tryAcquire());
  b.onFailure();
  assert.equal(b.state, "open");
  assert.ok(!b.tryAcquire(), "open: short-circuit");
  now = 999;
  assert.ok(!b.tryAcquire());
  now = 1000;
  assert.ok(b.tryAcquire(), "cooldown over: this caller is the probe");
  assert.equal(b.state, "half-open");
  assert.ok(!b.tryAcquire(), "only one probe at a time");
  b.onFailure();
  assert.equal(b.state, "open", "failed probe re-opens");
  assert.ok(!b.tryAcquire());
  now = 2000;
  assert.ok(b.tryAcquire());
  b.onSuccess();
  assert.equal(b.state, "closed");
  assert.ok(b.tryAcquire() && b.tryAcquire());
});

test("breaker: a success resets the failure count; a neutral probe frees the slot", () => {
  let now = 0;
  const b = new CircuitBreaker({ failureThreshold: 2, cooldownMs: 10, now: () => now });
  b.onFailure();
  b.onSuccess();
  b.onFailure();
  assert.equal(b.state, "closed");
  b.onFailure();
  now = 10;
  assert.ok(b.tryAcquire());
  b.onNeutral();
  assert.ok(b.tryAcquire(), "an aborted probe does not wedge the breaker");
});

test("warner: once per interval per key, then says how many were suppressed", () => {
  let now = 0;
  const lines = [];
  const warn = createWarner({ warn: (m) => lines.push(m) }, { intervalMs: 100, now: () => now });
  warn("a", "down");
  warn("a", "down");
  warn("b", "other");
  now = 50;
  warn("a", "down");
  now = 100;
  warn("a", "down");
  assert.deepEqual(lines, [
    "[memory-tencentdb] down",
    "[memory-tencentdb] other",
    "[memory-tencentdb] down (2 similar suppressed)",
  ]);
  // A logger that throws is swallowed.
  const broken = createWarner({ warn: () => { throw new Error("x"); } });
  assert.doesNotThrow(() => broken("k", "m"));
});

test("stripping: injected blocks leave prompts and persisted messages", () => {
  const text = "<relevant-memories>\n- likes teal\n</relevant-memories>\n\nWhat is my color?";
  assert.equal(stripInjected(text), "What is my color?");
  assert.equal(stripInjected("plain"), "plain");
  assert.equal(stripMessage({ role: "user", content: "plain" }), null);
  const cleaned = stripMessage({ role: "user", content: [{ type: "text", text }, { type: "image" }] });
  assert.deepEqual(cleaned.content, [{ type: "text", text: "What is my color?" }, { type: "image" }]);
});

test("turns: recorded agent_end holds the whole session; only this turn is kept", () => {
  const start = recorded("plain_turns", "before_prompt_build", 1);
  const end = recorded("plain_turns", "agent_end", 1);
  assert.equal(start.ctx.runId, end.ctx.runId, "runId correlates the two hooks");
  const prior = start.event.messages.length;
  assert.ok(end.event.messages.length > prior + 1, "history includes the earlier turn");
  const turn = sliceTurn(end.event.messages, { priorCount: prior, startedAt: Date.now() });
  assert.equal(turn.length, end.event.messages.length - prior);
  assert.equal(textOf(turn[0].content), "I prefer short answers, please.");
  // Without bookkeeping: the last user message onward gives the same turn.
  assert.deepEqual(sliceTurn(end.event.messages, undefined), turn);
  // A stale count (history compacted mid-turn, so shorter than noted) falls back to timestamps.
  const startedAt = turn[0].timestamp;
  assert.deepEqual(sliceTurn(end.event.messages, { priorCount: 99, startedAt }), turn);
});

test("turns: a recorded tool turn converts to user, tool call, tool result, answer", () => {
  const end = recorded("tool_turn", "agent_end");
  const messages = toGatewayMessages(sliceTurn(end.event.messages, undefined));
  assert.deepEqual(
    messages.map((m) => m.role),
    ["user", "assistant", "tool", "assistant"],
  );
  const [user, call, result, answer] = messages;
  assert.equal(user.content, "What is my favorite color? Check your memory.");
  assert.equal(call.tool_calls[0].function.name, "tool_call");
  assert.deepEqual(JSON.parse(call.tool_calls[0].function.arguments).args, { query: "favorite color" });
  assert.equal(result.tool_call_id, call.tool_calls[0].id);
  assert.match(result.content, /teal/);
  assert.equal(answer.content, "Your favorite color is teal.");
  for (const m of messages) assert.equal(typeof m.timestamp, "number");
});

test("turns: custom carriers dropped, tool errors marked, huge results capped", () => {
  const out = toGatewayMessages([
    { role: "custom", customType: "x" },
    { role: "toolResult", toolCallId: "c1", toolName: "exec", content: "boom", isError: true },
    { role: "toolResult", toolCallId: "c2", toolName: "read", content: [{ type: "text", text: "x".repeat(70_000) }] },
    { role: "assistant", content: [{ type: "thinking", thinking: "hmm" }] },
  ]);
  assert.equal(out.length, 2);
  assert.equal(out[0].content, "[error] boom");
  assert.ok(out[1].content.length < 65_000 && out[1].content.includes("truncated"));
});

test("turns: tracker is bounded; agent id falls back to the session key", () => {
  const t = new TurnTracker(2);
  t.begin("a", 1);
  t.begin("b", 2);
  t.begin("c", 3);
  assert.equal(t.take("a"), undefined);
  assert.equal(t.take("c").priorCount, 3);
  assert.equal(t.take("c"), undefined, "taken once");
  assert.equal(agentIdOf({}, "agent:ops:telegram:1"), "ops");
  assert.equal(agentIdOf({ agentId: "x" }, "agent:ops:1"), "x");
  assert.equal(agentIdOf(undefined, undefined), "main");
});
