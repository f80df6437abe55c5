// The bridge's memory_tencentdb_forget tool against our real gateway (started by
// test_node_suites.py): "forget that I said ..." removes what it names, in zh and en, says what it
// removed, keeps what merely resembles it, and never throws.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { bridgeWith, closedPort, configFor } from "./helpers.mjs";

const GATEWAY = process.env.MEMORY_TENCENTDB_GATEWAY_URL;
const DATA_DIR = process.env.MEMORY_TENCENTDB_GATEWAY_DATA_DIR;
const skip = GATEWAY && DATA_DIR ? false : "MEMORY_TENCENTDB_GATEWAY_URL/_DATA_DIR not set (run through pytest)";

async function gateway(method, path, body) {
  const token = readFileSync(join(DATA_DIR, "gateway.key"), "utf8").trim();
  const response = await fetch(GATEWAY + path, {
    method,
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, data: await response.json() };
}

test("forget: removes what the user names, reports it, keeps the rest", { skip }, async () => {
  const agent = `forget-${randomUUID().slice(0, 8)}`;
  const ids = {};
  for (const [key, content] of [
    ["en", "The user's gym locker number is 4471"],
    ["zh", "用户的前同事叫李雷"],
    ["keep", "The user enjoys hiking in the Alps"],
  ]) {
    const r = await gateway("POST", "/memories", { content, type: "persona", session_key: `agent:${agent}:s`, scope: agent });
    assert.equal(r.status, 201, JSON.stringify(r.data));
    ids[key] = r.data.id;
  }
  const api = await bridgeWith(configFor(GATEWAY, { dataDir: DATA_DIR, scope: "{agent}" }));
  const ctx = { agentId: agent, sessionKey: `agent:${agent}:s` };
  const tool = api.tool("memory_tencentdb_forget", ctx);
  const en = await tool.execute("c1", { query: "gym locker number" });
  assert.match(en.content[0].text, /Forgot 1 memory/);
  assert.ok(en.content[0].text.includes("4471"), en.content[0].text);
  assert.deepEqual(en.details.forgotten, [ids.en]);
  const zh = await tool.execute("c2", { query: "前同事李雷" });
  assert.deepEqual(zh.details.forgotten, [ids.zh]);
  const none = await tool.execute("c3", { query: "favourite colour of the car" });
  assert.match(none.content[0].text, /nothing was removed/);
  assert.deepEqual(none.details.forgotten, []);
  for (const key of ["en", "zh"]) {
    const shown = await gateway("GET", `/memories/${ids[key]}?scope=${agent}`);
    assert.equal(shown.data.status, "deleted");
  }
  const kept = await gateway("GET", `/memories/${ids.keep}?scope=${agent}`);
  assert.equal(kept.data.status, "active");
  const byId = await tool.execute("c4", { ids: [ids.keep] });
  assert.deepEqual(byId.details.forgotten, [ids.keep]);
  const empty = await tool.execute("c5", {});
  assert.match(empty.content[0].text, /Say what to forget/);
  assert.deepEqual(api.warnings(), []);
});

test("forget: a gateway that is down is a sentence, never a throw", async () => {
  const port = await closedPort();
  const api = await bridgeWith(configFor(`http://127.0.0.1:${port}`, { scope: "{agent}" }));
  const out = await api.tool("memory_tencentdb_forget", { agentId: "main", sessionKey: "agent:main:x" }).execute("c1", { query: "anything" });
  assert.match(out.content[0].text, /nothing was removed/);
});
