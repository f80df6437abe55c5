// The bridge against a gateway that is down, slow, or answering errors: every handler returns
// within its budget, nothing throws, the breaker stops the bleeding, warnings stay few.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, test } from "node:test";

import { bridgeWith, closedPort, configFor, expectedScope, live, recorded, startStub, timed, BRIDGE_DIR } from "./helpers.mjs";

const RECALL_ANSWER = {
  context: "<relevant-memories>\n- likes teal\n</relevant-memories>\n<user-persona>calm</user-persona>",
  prepend_context: "<relevant-memories>\n- likes teal\n</relevant-memories>",
  append_system_context: "<user-persona>calm</user-persona>",
  memories: [],
  strategy: "stub",
  memory_count: 1,
};

function answers(req) {
  if (req.url === "/recall") return { body: RECALL_ANSWER };
  if (req.url === "/capture") return { body: { l0_recorded: 2, scheduler_notified: true } };
  if (req.url.startsWith("/search/")) return { body: { results: "1. likes teal", total: 1 } };
  return { body: { flushed: true } };
}

// A recorded turn: a user prompt with its ctx, and the agent_end that followed.
function turn(n = 1) {
  const start = recorded("plain_turns", "before_prompt_build", n);
  const end = recorded("plain_turns", "agent_end", n);
  return { start, end, ctx: live(start.ctx) };
}

async function playTurn(api, { start, end, ctx }) {
  const injected = await api.fire("before_prompt_build", start.event, ctx);
  await api.fire("agent_end", end.event, end.ctx);
  return injected;
}

let stub;
before(async () => {
  stub = await startStub(answers);
});
after(async () => {
  await stub.close();
});

test("healthy stub: recall injects both parts, capture sends this turn with the agent scope", async () => {
  stub.requests.length = 0;
  const api = await bridgeWith(configFor(stub.url, { apiKey: "sekret" }));
  const injected = await playTurn(api, turn());
  assert.deepEqual(injected, {
    prependContext: RECALL_ANSWER.prepend_context,
    appendSystemContext: RECALL_ANSWER.append_system_context,
  });
  const [recall, capture] = stub.requests;
  assert.equal(recall.path, "/recall");
  assert.equal(recall.headers.authorization, "Bearer sekret");
  assert.deepEqual(
    { query: recall.body.query, scope: recall.body.scope, key: recall.body.session_key },
    { query: "I prefer short answers, please.", scope: await expectedScope(api, "main"), key: "agent:main:rec-plain" },
  );
  assert.equal(capture.path, "/capture");
  assert.equal(capture.body.scope, await expectedScope(api, "main"));
  assert.equal(capture.body.assistant_name, "main", "the agent's name goes with the turn");
  assert.deepEqual(
    capture.body.messages.map((m) => [m.role, m.content]),
    [["user", "I prefer short answers, please."], ["assistant", "Understood."]],
  );
  assert.deepEqual(api.warnings(), []);
});

test("healthy stub: an old gateway's single `context` still lands as prependContext", async () => {
  const old = await startStub(() => ({ body: { context: "<relevant-memories>x</relevant-memories>", memory_count: 1 } }));
  try {
    const api = await bridgeWith(configFor(old.url));
    const { start, ctx } = turn();
    assert.deepEqual(await api.fire("before_prompt_build", start.event, ctx), {
      prependContext: "<relevant-memories>x</relevant-memories>",
    });
  } finally {
    await old.close();
  }
});

test("healthy stub: the harness's currentUserMessage wins over prompt; empty means no recall", async () => {
  stub.requests.length = 0;
  const api = await bridgeWith(configFor(stub.url));
  const { start, ctx } = turn();
  const event = { ...start.event, prompt: "[history] ... I prefer short answers", currentUserMessage: "only this" };
  await api.fire("before_prompt_build", event, ctx);
  assert.equal(stub.requests[0].body.query, "only this");
  assert.equal(await api.fire("before_prompt_build", { ...event, currentUserMessage: "" }, ctx), undefined);
  assert.equal(stub.requests.length, 1, "an explicit empty request is not replaced by history");
});

test("healthy stub: recorded session ends (/new and shutdown) reach /session/end", async () => {
  stub.requests.length = 0;
  const api = await bridgeWith(configFor(stub.url));
  for (const n of [0, 1]) {
    const { event, ctx } = recorded("gateway_session", "session_end", n);
    await api.fire("session_end", event, ctx);
  }
  assert.deepEqual(stub.paths(), ["/session/end", "/session/end"]);
  const { sessionId } = recorded("gateway_session", "session_end", 0).event;
  assert.deepEqual(stub.requests[0].body, {
    session_key: "agent:main:rec-gw",
    session_id: sessionId,
    scope: await expectedScope(api, "main"),
    wait: false,
  });
});

test("down: every hook and tool returns at once, no throw, warnings rate-limited, breaker opens", async () => {
  const port = await closedPort();
  const api = await bridgeWith({ port, breaker: { failureThreshold: 2, cooldownMs: 60_000 } });
  for (let i = 0; i < 3; i += 1) {
    const { ms, value } = await timed(() => playTurn(api, turn()));
    assert.equal(value, undefined, "no memories, and no error");
    assert.ok(ms < 1000, `turn took ${ms} ms`);
  }
  const tool = api.tool("memory_tencentdb_memory_search", { agentId: "main", sessionKey: "agent:main:x" });
  const answer = await tool.execute("call-1", { query: "color" });
  assert.match(answer.content[0].text, /temporarily unavailable \(circuit-open\)/);
  await api.fire("session_end", { sessionKey: "agent:main:x", sessionId: "s", reason: "new" }, {});
  const warnings = api.warnings();
  assert.ok(warnings.some((w) => /recall skipped: unreachable: ECONNREFUSED/.test(w)));
  assert.ok(warnings.some((w) => /circuit-open/.test(w)));
  assert.ok(warnings.length <= 6, `rate-limited, got ${warnings.length}: ${warnings.join(" | ")}`);
});

test("slow: recall gives up at its own timeout; a slow-but-in-budget answer still lands", async () => {
  const slow = await startStub((req) => ({ ...answers(req), delayMs: 2000 }));
  try {
    const api = await bridgeWith(configFor(slow.url, { recall: { timeoutMs: 300 }, capture: { timeoutMs: 300 } }));
    const { ms, value } = await timed(() => playTurn(api, turn()));
    assert.equal(value, undefined);
    assert.ok(ms >= 550 && ms < 1500, `two timeouts of 300 ms, took ${ms} ms`);
    assert.ok(api.warnings().some((w) => /recall skipped: timeout after 300ms/.test(w)));

    const patient = await bridgeWith(configFor(slow.url, { recall: { timeoutMs: 2500 } }));
    const { start, ctx } = turn();
    const got = await timed(() => patient.fire("before_prompt_build", start.event, ctx));
    assert.equal(got.value.prependContext, RECALL_ANSWER.prepend_context);
    assert.ok(got.ms >= 1900 && got.ms < 2500, `took ${got.ms} ms`);
  } finally {
    await slow.close();
  }
});

test("slow: a late recall is dropped once the host stopped waiting for it", async () => {
  const api = await bridgeWith(configFor(stub.url));
  const { start } = turn();
  const ctx = live(start.ctx, { active: false });
  assert.equal(await api.fire("before_prompt_build", start.event, ctx), undefined);
});

test("slow: a tool call aborted by the host returns at once", async () => {
  const hang = await startStub(() => ({ hang: true }));
  try {
    const api = await bridgeWith(configFor(hang.url));
    const tool = api.tool("memory_tencentdb_conversation_search", { agentId: "main", sessionKey: "agent:main:x" });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const { ms, value } = await timed(() => tool.execute("c", { query: "q" }, controller.signal));
    assert.ok(ms < 1000, `took ${ms} ms`);
    assert.match(value.content[0].text, /unavailable \(aborted\)/);
  } finally {
    await hang.close();
  }
});

test("errors: 5xx opens the breaker; after the cooldown one probe closes it again", async () => {
  let status = 503;
  const flaky = await startStub((req) => (status === 200 ? answers(req) : { status, body: { error: "overloaded" } }));
  try {
    const api = await bridgeWith(configFor(flaky.url, { breaker: { failureThreshold: 3, cooldownMs: 300 } }));
    const { start, ctx } = turn();
    for (let i = 0; i < 5; i += 1) await api.fire("before_prompt_build", start.event, ctx);
    assert.equal(flaky.requests.length, 3, "calls 4 and 5 short-circuited");
    assert.ok(api.warnings().some((w) => /recall skipped: http 503: overloaded/.test(w)));

    status = 200;
    await new Promise((r) => setTimeout(r, 350));
    const probe = await api.fire("before_prompt_build", start.event, ctx);
    assert.equal(probe.prependContext, RECALL_ANSWER.prepend_context, "half-open probe succeeded");
    await api.fire("before_prompt_build", start.event, ctx);
    assert.equal(flaky.requests.length, 5, "closed again: calls go through");
  } finally {
    await flaky.close();
  }
});

test("errors: 4xx and malformed answers do not throw, and 4xx does not trip the breaker", async () => {
  const picky = await startStub((req) =>
    req.url === "/recall" ? { status: 422, body: { error: "query: field required" } } : { body: "not json{" },
  );
  try {
    const api = await bridgeWith(configFor(picky.url, { breaker: { failureThreshold: 2 } }));
    const { start, ctx } = turn();
    for (let i = 0; i < 4; i += 1) assert.equal(await api.fire("before_prompt_build", start.event, ctx), undefined);
    assert.equal(picky.requests.length, 4, "422 means the gateway is up");
    assert.ok(api.warnings().some((w) => /http 422: query: field required/.test(w)));
    const tool = api.tool("memory_tencentdb_memory_search", { agentId: "main" });
    const answer = await tool.execute("c", { query: "q" });
    assert.match(answer.content[0].text, /not JSON/);
  } finally {
    await picky.close();
  }
});

test("skips: failed, cron, heartbeat and excluded-agent turns are not recalled or captured", async () => {
  stub.requests.length = 0;
  const api = await bridgeWith(configFor(stub.url, { excludeAgents: ["ops*"] }));
  const failedStart = recorded("failed_turn", "before_prompt_build");
  const failedEnd = recorded("failed_turn", "agent_end");
  // OpenClaw 2026.9 reports the failed model call as success: true; the last message says "error".
  assert.equal(failedEnd.event.messages.at(-1).stopReason, "error", "the recorded failure");
  await api.fire("before_prompt_build", failedStart.event, live(failedStart.ctx));
  await api.fire("agent_end", failedEnd.event, failedEnd.ctx);
  assert.deepEqual(stub.paths(), ["/recall"], "recall ran, the failed turn was not captured");

  stub.requests.length = 0;
  for (const trigger of ["cron", "heartbeat"]) {
    const { start, end } = turn();
    await api.fire("before_prompt_build", start.event, live({ ...start.ctx, trigger }));
    await api.fire("agent_end", end.event, { ...end.ctx, trigger });
  }
  const { start, end } = turn();
  const ops = { ...start.ctx, agentId: "ops-bot", sessionKey: "agent:ops-bot:x" };
  await api.fire("before_prompt_build", start.event, live(ops));
  await api.fire("agent_end", end.event, { ...end.ctx, agentId: "ops-bot", sessionKey: "agent:ops-bot:x" });
  assert.deepEqual(stub.paths(), []);
});

test("garbage in: handlers survive missing or malformed payloads", async () => {
  const api = await bridgeWith(configFor(stub.url));
  for (const name of ["before_prompt_build", "agent_end", "session_end", "before_message_write"]) {
    for (const [event, ctx] of [[undefined, undefined], [null, {}], [{ messages: "x", prompt: 5 }, { sessionKey: 1 }]]) {
      await assert.doesNotReject(async () => api.fire(name, event, ctx));
    }
  }
  const tool = api.tool("memory_tencentdb_memory_search", undefined);
  assert.match((await tool.execute("c", undefined)).content[0].text, /non-empty query/);
});

// Run the bridge in a child process, as a one-shot CLI would. Returns how long the process
// lingered after its script's last line: anything the bridge left ref'd shows up here.
function lingerMs(script) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", `${script}\nconsole.log(Date.now());`], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("exit", (code) => {
      if (code !== 0) return reject(new Error(stderr));
      resolve(Date.now() - Number(stdout.trim().split("\n").at(-1)));
    });
  });
}

test("no timer or socket keeps a one-shot process alive", async () => {
  const hang = await startStub(() => ({ hang: true }));
  const indexUrl = new URL(`file://${BRIDGE_DIR}/index.js`).href;
  const program = (url, extra, awaited) => `
    import bridge from ${JSON.stringify(indexUrl)};
    const hooks = {};
    const { hostname, port } = new URL(${JSON.stringify(url)});
    bridge.register({ registrationMode: "full", logger: {}, pluginConfig: { host: hostname, port: Number(port), ${extra} },
      on: (n, h) => (hooks[n] = h), registerTool() {}, registerService() {} });
    const calls = [
      hooks.before_prompt_build({ prompt: "hi", messages: [] }, { sessionKey: "agent:main:x", runId: "r" }),
      hooks.agent_end({ success: true, messages: [{ role: "user", content: "hi" }] }, { sessionKey: "agent:main:x", runId: "r" }),
    ];
    ${awaited ? "await Promise.all(calls);" : "// the host stopped waiting"}`;
  try {
    // Finished calls to a keep-alive server leave idle sockets that must not hold the process
    // (a held socket would show as the 4-5 s keep-alive timeout). Node 20's own fetch timers
    // linger up to ~1 s by themselves; Node 24, which OpenClaw runs on, about 40 ms.
    const afterCalls = await lingerMs(program(stub.url, "", true));
    assert.ok(afterCalls < 1500, `lingered ${afterCalls} ms after finished calls`);
    // Calls still pending against a gateway that never answers hold it only until our own timeout.
    const afterHang = await lingerMs(program(hang.url, "recall: { timeoutMs: 700 }, capture: { timeoutMs: 700 }", false));
    assert.ok(afterHang >= 500 && afterHang < 2500, `lingered ${afterHang} ms with calls pending`);
  } finally {
    await hang.close();
  }
});
