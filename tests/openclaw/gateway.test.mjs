// The bridge against our real gateway, driven by hook payloads recorded from OpenClaw 2026.9.x.
// tests/openclaw/test_node_suites.py starts the gateway and passes its URL in
// MEMORY_TENCENTDB_GATEWAY_URL and its data directory in MEMORY_TENCENTDB_GATEWAY_DATA_DIR
// (where its key is); without them (a bare `node --test`) these tests skip.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { bridgeWith, closedPort, configFor, live, recorded, tempDir } from "./helpers.mjs";

const GATEWAY = process.env.MEMORY_TENCENTDB_GATEWAY_URL;
const DATA_DIR = process.env.MEMORY_TENCENTDB_GATEWAY_DATA_DIR;
const skip = GATEWAY && DATA_DIR ? false : "MEMORY_TENCENTDB_GATEWAY_URL/_DATA_DIR not set (run through pytest)";

function token() {
  return readFileSync(join(DATA_DIR, "gateway.key"), "utf8").trim();
}

async function gateway(path, body) {
  const response = await fetch(GATEWAY + path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token()}` },
    body: JSON.stringify(body),
  });
  const data = await response.json();
  assert.ok(response.ok, `${path}: ${response.status} ${JSON.stringify(data)}`);
  return data;
}

/**
 * What the gateway holds for a session, as far as these queries find it. Search is ranked, so
 * each query targets one message; the union is deduplicated by id.
 */
async function sessionItems(sessionKey, queries) {
  const items = new Map();
  for (const query of queries) {
    const found = await gateway("/search/conversations", { query, session_key: sessionKey, scope: "main", limit: 20 });
    for (const item of found.items) items.set(item.id, item);
  }
  return [...items.values()];
}

/** A recorded record moved into its own session (and, optionally, agent) for test isolation. */
function relocated(fixture, hook, n, { agent = "main", session = randomUUID() } = {}) {
  const record = recorded(fixture, hook, n);
  const sessionKey = `agent:${agent}:${session}`;
  record.ctx = live({ ...record.ctx, agentId: agent, sessionKey });
  if (record.event?.sessionKey) record.event.sessionKey = sessionKey;
  return record;
}

// The bridge finds the key through `dataDir`. Scope "{agent}": these tests seed the gateway in
// the plain agent scope (scope naming per state directory has its own tests).
const LINK = { scope: "{agent}", recall: { timeoutMs: 10_000 }, capture: { timeoutMs: 10_000 } };

async function bridge(extra = {}, options = {}) {
  return bridgeWith(configFor(GATEWAY, { dataDir: DATA_DIR, ...LINK, ...extra }), options);
}

test("recall: a memory of the agent's scope reaches the prompt; another agent's does not", { skip }, async () => {
  const marker = `teal-${randomUUID().slice(0, 8)}`;
  // An agent of its own: the other suites on this gateway leave "favorite color" memories in
  // "main", and a scope of two or three near-identical memories is a known miss of the
  // relevance gate (centred on a mean that is those memories), not what this test is about.
  const agent = `a${randomUUID().slice(0, 8)}`;
  await gateway("/memories", {
    content: `The user's favorite color is ${marker}.`,
    type: "persona",
    session_key: `agent:${agent}:seed`,
    scope: agent,
  });
  const api = await bridge();
  const start = relocated("tool_turn", "before_prompt_build", 0, { agent });
  const injected = await api.fire("before_prompt_build", start.event, start.ctx);
  assert.match(injected.prependContext, /^<relevant-memories>/);
  assert.ok(injected.prependContext.includes(marker));
  assert.match(injected.appendSystemContext, /memory_tencentdb_memory_search/, "tool guide names our tools");

  const other = relocated("tool_turn", "before_prompt_build", 0, { agent: "other" });
  const elsewhere = await api.fire("before_prompt_build", other.event, other.ctx);
  assert.ok(!JSON.stringify(elsewhere ?? {}).includes(marker), "scope isolation");
  assert.deepEqual(api.warnings(), []);
});

test("recall.placement: prepend keeps this turn's memories out of the system part; appendSystem puts them after the stable part", { skip }, async () => {
  const marker = `amber-${randomUUID().slice(0, 8)}`;
  const agent = `p${randomUUID().slice(0, 8)}`;
  await gateway("/memories", {
    content: `The user's favorite color is ${marker}.`,
    type: "persona",
    session_key: `agent:${agent}:seed`,
    scope: agent,
  });
  const start = relocated("tool_turn", "before_prompt_build", 0, { agent });

  const prepend = await (await bridge()).fire("before_prompt_build", start.event, start.ctx);
  assert.ok(prepend.prependContext.includes(marker));
  assert.ok(!prepend.appendSystemContext.includes("<relevant-memories>"), "system part: stable only");
  // Another turn of the session, about something else: the system part is the same text.
  const other = relocated("tool_turn", "before_prompt_build", 0, { agent });
  other.event = { ...other.event, prompt: "How do I reverse a linked list in Python?" };
  delete other.event.currentUserMessage;
  const later = await (await bridge()).fire("before_prompt_build", other.event, other.ctx);
  assert.equal(later.appendSystemContext, prepend.appendSystemContext);

  const api = await bridge({ recall: { ...LINK.recall, placement: "appendSystem" } });
  const system = await api.fire("before_prompt_build", start.event, start.ctx);
  assert.equal(system.prependContext, undefined);
  assert.ok(system.appendSystemContext.startsWith(prepend.appendSystemContext), "stable part first");
  assert.ok(system.appendSystemContext.endsWith(prepend.prependContext), "then this turn's memories");
  assert.deepEqual(api.warnings(), []);
});

test("capture: only this turn of a recorded two-turn session is stored", { skip }, async () => {
  const api = await bridge();
  const session = randomUUID();
  const start = relocated("plain_turns", "before_prompt_build", 1, { session });
  const end = relocated("plain_turns", "agent_end", 1, { session });
  end.ctx.runId = start.ctx.runId;
  await api.fire("before_prompt_build", start.event, start.ctx);
  await api.fire("agent_end", end.event, end.ctx);
  const items = await sessionItems(start.ctx.sessionKey, [
    "I prefer short answers, please.",
    "Understood.",
    "My favorite color is teal.",
    "Noted: teal.",
  ]);
  assert.deepEqual(
    items.map((i) => [i.role, i.content]).sort(),
    [["assistant", "Understood."], ["user", "I prefer short answers, please."]],
    "the earlier turn in agent_end's history was not sent again",
  );
  assert.deepEqual(api.warnings(), []);
});

test("capture: a recorded tool turn keeps the tool call and its result", { skip }, async () => {
  const api = await bridge();
  const session = randomUUID();
  const start = relocated("tool_turn", "before_prompt_build", 0, { session });
  const end = relocated("tool_turn", "agent_end", 0, { session });
  await api.fire("before_prompt_build", start.event, start.ctx);
  await api.fire("agent_end", end.event, end.ctx);
  const items = await sessionItems(start.ctx.sessionKey, [
    "What is my favorite color? Check your memory.",
    "tool_call recorder_memory_search favorite color",
    "recorded the user likes teal",
    "Your favorite color is teal.",
  ]);
  assert.deepEqual(items.map((i) => i.role).sort(), ["assistant", "assistant", "tool", "user"]);
  assert.ok(items.some((i) => i.role === "tool" && i.content.includes("the user likes teal")));
  assert.ok(items.some((i) => i.role === "assistant" && i.content.includes("tool_call")));
});

test("capture: a recorded failed turn is not stored", { skip }, async () => {
  const api = await bridge();
  const session = randomUUID();
  const start = relocated("failed_turn", "before_prompt_build", 0, { session });
  const end = relocated("failed_turn", "agent_end", 0, { session });
  await api.fire("before_prompt_build", start.event, start.ctx);
  await api.fire("agent_end", end.event, end.ctx);
  const found = await gateway("/search/conversations", {
    query: "This turn will fail",
    session_key: start.ctx.sessionKey,
    scope: "main",
  });
  assert.equal(found.total, 0);
});

test("tools: both searches answer in the calling agent's scope", { skip }, async () => {
  const marker = `kiwi-${randomUUID().slice(0, 8)}`;
  await gateway("/memories", {
    content: `The user grows ${marker} in the garden.`,
    type: "episodic",
    session_key: "agent:main:seed",
    scope: "main",
  });
  await gateway("/capture", {
    session_key: "agent:main:garden",
    scope: "main",
    messages: [
      { role: "user", content: `I planted ${marker} today.` },
      { role: "assistant", content: "Nice." },
    ],
  });
  const api = await bridge();
  const toolCtx = recorded("tool_turn", "tool_execute", 0).toolCtx;
  const memories = await api.tool("memory_tencentdb_memory_search", toolCtx).execute("c1", { query: `${marker} garden` });
  assert.ok(memories.content[0].text.includes(marker), memories.content[0].text);
  assert.ok(memories.details.total >= 1);
  const conversations = await api
    .tool("memory_tencentdb_conversation_search", toolCtx)
    .execute("c2", { query: `planted ${marker}`, limit: 3 });
  assert.ok(conversations.content[0].text.includes(marker));

  const stranger = await api
    .tool("memory_tencentdb_memory_search", { ...toolCtx, agentId: "stranger", sessionKey: "agent:stranger:x" })
    .execute("c3", { query: `${marker} garden` });
  assert.ok(!stranger.content[0].text.includes(marker), "another agent's tool sees nothing");
  assert.deepEqual(api.warnings(), []);
});

test("session_end: a recorded Gateway session end is accepted", { skip }, async () => {
  const api = await bridge();
  const end = recorded("gateway_session", "session_end", 0);
  await api.fire("session_end", end.event, end.ctx);
  assert.deepEqual(api.warnings(), []);
});

test("before_message_write: recorded messages pass untouched; injected blocks are stripped", { skip }, async () => {
  const api = await bridge();
  for (const record of recordedWrites()) {
    assert.equal(api.fire("before_message_write", record.event, record.ctx), undefined);
  }
  // What an older host persisted: the prepended recall glued to the user's text.
  const { event, ctx } = recordedWrites()[0];
  const scope = `w${randomUUID().slice(0, 8)}`; // its own memory, not what other tests left
  await gateway("/memories", {
    content: "The user's favorite color is teal.",
    type: "persona",
    session_key: `agent:${scope}:seed`,
    scope,
  });
  const injected = (await gateway("/recall", { query: "favorite color", session_key: `agent:${scope}:x`, scope }))
    .prepend_context;
  assert.match(injected, /^<relevant-memories>/);
  event.message.content = `${injected}\n\n${event.message.content}`;
  const result = api.fire("before_message_write", event, ctx);
  assert.equal(result.message.content, "My favorite color is teal.");
});

function recordedWrites() {
  const writes = [];
  for (let n = 0; ; n += 1) {
    try {
      writes.push(recorded("plain_turns", "before_message_write", n));
    } catch {
      return writes;
    }
  }
}

test("spool: a turn captured while the gateway was down arrives with the next run's capture", { skip }, async () => {
  const stateDir = tempDir("oc-state-spool-");
  const session = randomUUID();
  const marker = `spooled-${randomUUID().slice(0, 8)}`;
  // Run 1: nothing listens where the bridge looks; the turn goes to the spool.
  const down = await bridgeWith({ port: await closedPort(), dataDir: DATA_DIR, ...LINK }, { stateDir });
  const first = relocated("plain_turns", "agent_end", 0, { session });
  first.event.messages = [
    { role: "user", content: `记住：我的车牌号是 ${marker}。`, timestamp: 1_750_000_000_000 },
    { role: "assistant", content: [{ type: "text", text: "好的，记住了。" }], stopReason: "stop", timestamp: 1_750_000_000_500 },
  ];
  first.ctx.runId = `run-${marker}`;
  await down.fire("agent_end", first.event, first.ctx);
  assert.match(down.warnings().join("\n"), /capture not delivered: unreachable: ECONNREFUSED; kept in /);
  // Run 2, same state directory, gateway reachable: its own turn, then the waiting one.
  const up = await bridge({}, { stateDir });
  const start = relocated("plain_turns", "before_prompt_build", 1, { session });
  const end = relocated("plain_turns", "agent_end", 1, { session });
  end.ctx.runId = start.ctx.runId;
  await up.fire("before_prompt_build", start.event, start.ctx);
  await up.fire("agent_end", end.event, end.ctx);
  const items = await sessionItems(start.ctx.sessionKey, [`车牌号 ${marker}`, "I prefer short answers, please."]);
  assert.ok(items.some((i) => i.role === "user" && i.content.includes(marker)), JSON.stringify(items));
  assert.ok(items.some((i) => i.content === "I prefer short answers, please."));
  assert.ok(up.logs.some((l) => /sent 1 capture\(s\) kept from earlier runs/.test(l.message)));
  // Replaying the same capture again (as after a timeout that did arrive) stores nothing twice.
  await up.fire("agent_end", first.event, first.ctx);
  const again = await sessionItems(start.ctx.sessionKey, [`车牌号 ${marker}`]);
  assert.equal(again.filter((i) => i.content.includes(marker)).length, 1, "deduplicated by message id");
});

test("ownership: our gateway's /health names our data directory; the key file lets us in", { skip }, async () => {
  const api = await bridge();
  const start = relocated("plain_turns", "before_prompt_build", 0);
  await api.fire("before_prompt_build", start.event, start.ctx);
  assert.deepEqual(api.warnings(), []);
  // The same gateway, but the bridge expects another data directory: not ours, nothing sent.
  const stranger = await bridge({ dataDir: tempDir("oc-other-data-") });
  assert.equal(await stranger.fire("before_prompt_build", start.event, start.ctx), undefined);
  assert.match(stranger.warnings().join("\n"), /memory paused: the gateway at .* is not ours \(it serves /);
});
