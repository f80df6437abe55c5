// Ownership and the spool, on recorded hook payloads: which key the bridge sends, what a 401 or
// a gateway of another data directory means, and that a turn that cannot be delivered is kept
// on disk (0600) and sent later, in order. Stub gateways only; gateway.test.mjs does the same
// against the real gateway.

import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { bridgeWith, closedPort, configFor, live, recorded, startStub, tempDir, BRIDGE_DIR } from "./helpers.mjs";

const ownership = await import(new URL(`file://${join(BRIDGE_DIR, "lib", "ownership.js")}`).href);
const { CaptureSpool } = await import(new URL(`file://${join(BRIDGE_DIR, "lib", "spool.js")}`).href);

function dataDirWithKey(token) {
  const dir = tempDir("oc-data-");
  if (token !== undefined) writeFileSync(join(dir, "gateway.key"), `${token}\n`, { mode: 0o600 });
  return dir;
}

/** A gateway that serves `dataDir` and wants `token` on every route but /health. */
async function gatewayStub({ dataDir, token }) {
  const state = { token, dataDir };
  const stub = await startStub(
    (req) => {
      if (req.headers.authorization !== `Bearer ${state.token}`) return { status: 401, body: { error: "invalid or missing API key" } };
      if (req.url === "/recall") return { body: { prepend_context: "<relevant-memories>\n- teal\n</relevant-memories>", memory_count: 1 } };
      if (req.url === "/capture") return { body: { l0_recorded: 2 } };
      return { body: {} };
    },
    { health: () => ({ body: { status: "ok", ready: true, data_dir: state.dataDir, auth: "key-file" } }) },
  );
  stub.state = state;
  return stub;
}

function turn(n = 1) {
  const start = recorded("plain_turns", "before_prompt_build", n);
  const end = recorded("plain_turns", "agent_end", n);
  return { start, end, ctx: live(start.ctx) };
}

async function play(api, { start, end, ctx }) {
  const injected = await api.fire("before_prompt_build", start.event, ctx);
  await api.fire("agent_end", end.event, end.ctx);
  return injected;
}

function spooled(api) {
  const dir = join(api.stateDir, "memory-tencentdb", "spool");
  return existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(".json")).sort().map((n) => join(dir, n)) : [];
}

test("key: the content of <dataDir>/gateway.key is sent; a configured apiKey wins", async () => {
  const dataDir = dataDirWithKey("k-from-file");
  const stub = await gatewayStub({ dataDir, token: "k-from-file" });
  try {
    const api = await bridgeWith(configFor(stub.url, { dataDir }));
    const injected = await play(api, turn());
    assert.match(injected.prependContext, /teal/);
    assert.deepEqual(stub.paths(), ["/recall", "/capture"]);
    assert.ok(stub.requests.every((r) => r.headers.authorization === "Bearer k-from-file"));
    assert.deepEqual(api.warnings(), []);
    assert.deepEqual(spooled(api), []);

    stub.requests.length = 0;
    stub.state.token = "configured";
    const configured = await bridgeWith(configFor(stub.url, { dataDir, apiKey: "configured" }));
    await play(configured, turn());
    assert.ok(stub.requests.every((r) => r.headers.authorization === "Bearer configured"));
  } finally {
    await stub.close();
  }
});

test("key: a key file that changed (our gateway made a new one) is re-read after a 401", async () => {
  const dataDir = dataDirWithKey("old");
  const stub = await gatewayStub({ dataDir, token: "old" });
  try {
    const api = await bridgeWith(configFor(stub.url, { dataDir }));
    await play(api, turn());
    stub.state.token = "new";
    writeFileSync(join(dataDir, "gateway.key"), "new\n");
    stub.requests.length = 0;
    await play(api, turn());
    assert.deepEqual(stub.paths(), ["/recall", "/recall", "/capture"], "one retry with the new key");
    assert.equal(stub.requests.at(-1).headers.authorization, "Bearer new");
    assert.deepEqual(api.warnings(), []);
  } finally {
    await stub.close();
  }
});

test("foreign: a gateway that answers 401 gets no turn, is named once with our data dir, and the turn is spooled", async () => {
  const ours = dataDirWithKey("ours");
  const stub = await gatewayStub({ dataDir: ours, token: "someone-else" });
  try {
    const api = await bridgeWith(configFor(stub.url, { dataDir: ours }));
    for (let i = 0; i < 3; i += 1) assert.equal(await play(api, turn()), undefined);
    assert.deepEqual(stub.paths(), ["/recall"], "after the first 401 nothing more is sent to it");
    assert.equal(stub.requests[0].headers.authorization, "Bearer ours");
    const paused = api.warnings().filter((w) => /memory paused/.test(w));
    assert.equal(paused.length, 1, api.warnings().join("\n"));
    assert.ok(paused[0].includes(ours) && paused[0].includes("(401)"), paused[0]);
    const files = spooled(api);
    assert.equal(files.length, 3, "every turn kept");
    const entry = JSON.parse(readFileSync(files[0], "utf8"));
    assert.equal(entry.route, "/capture");
    assert.deepEqual(
      entry.body.messages.map((m) => [m.role, m.content]),
      [["user", "I prefer short answers, please."], ["assistant", "Understood."]],
    );
    assert.equal(statSync(files[0]).mode & 0o777, 0o600);
    assert.equal(statSync(join(api.stateDir, "memory-tencentdb", "spool")).mode & 0o777, 0o700);
  } finally {
    await stub.close();
  }
});

test("foreign: a gateway whose /health names another data directory gets nothing at all", async () => {
  const ours = dataDirWithKey("same-token");
  const theirs = dataDirWithKey("same-token");
  const stub = await gatewayStub({ dataDir: theirs, token: "same-token" });
  try {
    const api = await bridgeWith(configFor(stub.url, { dataDir: ours }));
    await play(api, turn());
    const tool = api.tool("memory_tencentdb_memory_search", { agentId: "main", sessionKey: "agent:main:x" });
    assert.match((await tool.execute("c", { query: "color" })).content[0].text, /unavailable \(not our gateway\)/);
    await api.fire("session_end", { sessionKey: "agent:main:x", sessionId: "s", reason: "new" }, {});
    assert.deepEqual(stub.paths(), [], "not one request beyond /health");
    const paused = api.warnings().filter((w) => /memory paused/.test(w));
    assert.equal(paused.length, 1);
    assert.ok(paused[0].includes(`it serves ${theirs}`) && paused[0].includes(ours), paused[0]);
    assert.equal(spooled(api).length, 1);
  } finally {
    await stub.close();
  }
});

test("spool: waiting captures are sent oldest first after the next delivered one; refused ones move aside", async () => {
  const dataDir = dataDirWithKey("t");
  const stateDir = tempDir("oc-state-");
  const port = await closedPort();
  const down = await bridgeWith({ port, dataDir }, { stateDir });
  for (const n of [0, 1]) await play(down, turn(n));
  assert.equal(spooled(down).length, 2);
  assert.match(down.warnings().join("\n"), /capture not delivered: unreachable: ECONNREFUSED; kept in .*spool, sent when the gateway is back/);
  // A third file the gateway will refuse as bad input.
  new CaptureSpool(stateDir).put("/capture", { session_key: "agent:main:bad", messages: [] }, { dataDir });

  const bodies = [];
  const stub = await startStub(
    (req, body) => {
      if (req.url !== "/capture") return { body: {} };
      bodies.push(body);
      return body.messages.length ? { body: { l0_recorded: body.messages.length } } : { status: 422, body: { error: "messages: empty" } };
    },
    { health: () => ({ body: { status: "ok", data_dir: dataDir } }) },
  );
  try {
    const up = await bridgeWith(configFor(stub.url, { dataDir }), { stateDir });
    await play(up, turn(1));
    const texts = bodies.map((b) => b.messages.map((m) => m.content).join(" / "));
    assert.deepEqual(texts, [
      "I prefer short answers, please. / Understood.", // this turn
      "My favorite color is teal. / Noted: teal.", // spooled, oldest first
      "I prefer short answers, please. / Understood.",
      "",
    ]);
    assert.deepEqual(spooled(up), []);
    assert.equal(readdirSync(join(stateDir, "memory-tencentdb", "spool", "rejected")).length, 1);
    assert.ok(up.logs.some((l) => /sent 2 capture\(s\) kept from earlier runs; 1 refused/.test(l.message)));
    // Message ids let the gateway drop a replayed capture that had arrived after all.
    const ids = bodies[0].messages.map((m) => m.id);
    assert.equal(new Set(ids).size, 2);
    assert.ok(ids.every((id) => id.startsWith("openclaw:")));
    assert.deepEqual(bodies[2].messages.map((m) => m.id), ids, "same turn, same ids");
  } finally {
    await stub.close();
  }
});

test("spool: a capture kept for another data directory waits for that directory's gateway", async () => {
  const stateDir = tempDir("oc-state-");
  const spool = new CaptureSpool(stateDir);
  spool.put("/capture", { n: 1 }, { dataDir: "/srv/one" });
  spool.put("/capture", { n: 2 }, { dataDir: "/srv/two" });
  const sent = [];
  const out = await spool.replay(async (entry) => (sent.push(entry.body.n), { ok: true }), { dataDir: "/srv/two" });
  assert.deepEqual(sent, [2]);
  assert.equal(out.sent, 1);
  assert.equal(spool.count(), 1);
  // A claim left by a process that died is released for the next replay.
  const [left] = spool.pending();
  const path = join(spool.dir, left);
  const fs = await import("node:fs");
  fs.renameSync(path, `${path}.sending-999999999`);
  assert.deepEqual(spool.pending(), [left]);
  // A failure stops the replay and keeps the file.
  const failed = await spool.replay(async () => ({ ok: false, reason: "timeout after 5000ms" }), { dataDir: "/srv/one" });
  assert.equal(failed.stoppedBy, "timeout after 5000ms");
  assert.equal(spool.count(), 1);
});

test("data dir: config dataDir, else TDAI_DATA_DIR, else ${MEMORY_TENCENTDB_ROOT:-~/.memory-tencentdb}/memory-tdai", () => {
  const home = tempDir("oc-home-");
  assert.equal(ownership.expectedDataDir({ dataDir: "~/d" }, { HOME: home, TDAI_DATA_DIR: "/x" }), join(home, "d"));
  assert.equal(ownership.expectedDataDir({}, { HOME: home, TDAI_DATA_DIR: "/x" }), "/x");
  assert.equal(ownership.expectedDataDir({}, { HOME: home, MEMORY_TENCENTDB_ROOT: "/r" }), "/r/memory-tdai");
  assert.equal(ownership.expectedDataDir({}, { HOME: home }), join(home, ".memory-tencentdb", "memory-tdai"));
  mkdirSync(join(home, "memory-tdai"));
  assert.equal(ownership.expectedDataDir({}, { HOME: home }), join(home, "memory-tdai"), "the original's legacy dir, as the gateway");
});

test("scope: the agent id in ~/.openclaw (existing users keep theirs), agent@hash in any other state dir", () => {
  const home = tempDir("oc-home-");
  const env = { HOME: home };
  assert.equal(ownership.defaultScope("main", join(home, ".openclaw"), env), "main");
  const a = ownership.defaultScope("main", join(home, "profile-a"), env);
  const b = ownership.defaultScope("main", join(home, "profile-b"), env);
  assert.match(a, /^main@[0-9a-f]{8}$/);
  assert.notEqual(a, b, "two state dirs never share memory");
  assert.equal(ownership.defaultScope("main", join(home, "profile-a"), env), a, "stable");
  const shared = ownership.scopeResolver({ template: "{agent}", stateDir: join(home, "profile-a"), env });
  assert.equal(shared("ops"), "ops");
  assert.equal(ownership.scopeResolver({ template: "team", stateDir: "/x", env })("ops"), "team");
  assert.equal(ownership.scopeResolver({ template: "oc-{agent}", stateDir: "/x", env })("ops"), "oc-ops");
});

test("autoStart: a port that answers (even frozen or foreign) never gets a second gateway", async () => {
  const frozen = await startStub(() => ({ hang: true }), { health: () => ({ hang: true }) });
  try {
    const api = await bridgeWith(
      configFor(frozen.url, {
        recall: { timeoutMs: 600 },
        capture: { timeoutMs: 600 },
        autoStart: { enabled: true, command: "no-such-command-xyz", waitMs: 5_000 },
      }),
    );
    const started = performance.now();
    await play(api, turn());
    const ms = performance.now() - started;
    assert.ok(ms < 2_000, `a frozen gateway costs each call its own budget, not the start wait: ${ms} ms`);
    assert.ok(!api.warnings().some((w) => /could not start/.test(w)), "nothing was spawned");
    assert.equal(spooled(api).length, 1, "the turn is kept");
  } finally {
    await frozen.close();
  }
});

test("autoStart: a session end or a tool call never starts a gateway (only turns that may wait for it do)", async () => {
  const api = await bridgeWith({ port: await closedPort(), autoStart: { enabled: true, command: "no-such-command-xyz" } });
  await api.fire("session_end", { sessionKey: "agent:main:x", sessionId: "s", reason: "shutdown" }, {});
  const tool = api.tool("memory_tencentdb_memory_search", { agentId: "main", sessionKey: "agent:main:x" });
  assert.match((await tool.execute("c", { query: "q" })).content[0].text, /unavailable \(unreachable: ECONNREFUSED\)/);
  assert.ok(!api.warnings().some((w) => /could not start/.test(w)), api.warnings().join("\n"));
  // A turn does try (and says why it could not).
  await play(api, turn());
  assert.ok(api.warnings().some((w) => /could not start the gateway \(no-such-command-xyz\)/.test(w)));
  assert.equal(spooled(api).length, 1);
});
