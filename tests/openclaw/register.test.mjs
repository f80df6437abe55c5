// The plugin's shape as OpenClaw sees it: manifest, package.json, registration.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import { BRIDGE_DIR, bridgeWith, fakeApi, loadBridge } from "./helpers.mjs";

const manifest = JSON.parse(readFileSync(join(BRIDGE_DIR, "openclaw.plugin.json"), "utf8"));
const pkg = JSON.parse(readFileSync(join(BRIDGE_DIR, "package.json"), "utf8"));

test("package.json: ESM, an openclaw block, no dependencies, no build", () => {
  assert.equal(pkg.type, "module");
  assert.deepEqual(pkg.openclaw.extensions, ["./index.js"]);
  assert.ok(pkg.openclaw.compat.pluginApi);
  assert.equal(pkg.dependencies, undefined);
  assert.equal(pkg.scripts, undefined, "no build or install scripts");
});

test("manifest: schema accepts unknown keys and wrong types at every level", () => {
  const objects = [manifest.configSchema, ...Object.values(manifest.configSchema.properties)];
  for (const schema of objects) {
    if (schema.properties) assert.equal(schema.additionalProperties, true);
  }
  for (const [key, schema] of Object.entries(manifest.configSchema.properties)) {
    assert.equal(schema.type, undefined, `${key}: a type would let one bad value invalidate openclaw.json`);
  }
});

test("register: every hook, the prefixed tools of contracts.tools, no service by default", async () => {
  const api = await bridgeWith({});
  assert.deepEqual([...api.hooks.keys()].sort(), [
    "agent_end",
    "before_message_write",
    "before_prompt_build",
    "session_end",
  ]);
  // The offload read tool comes with offload.enabled, and stays once a state dir offloaded
  // (readback.test.mjs).
  const offloadTools = ["memory_tencentdb_offload_read"];
  assert.deepEqual([...api.tools.keys()].sort(), manifest.contracts.tools.filter((t) => !offloadTools.includes(t)).sort());
  const withOffload = await bridgeWith({ offload: { enabled: true } });
  assert.deepEqual([...withOffload.tools.keys()].sort(), [...manifest.contracts.tools].sort());
  for (const name of api.tools.keys()) {
    assert.ok(!["memory_search", "memory_get"].includes(name), "bundled memory-core owns these");
    assert.ok(manifest.toolMetadata[name]);
    const tool = api.tool(name, { agentId: "main", sessionKey: "agent:main:x" });
    assert.equal(tool.name, name);
    if (name === "memory_tencentdb_forget") {
      assert.match(tool.description, /^Forget long-term memories/);
      continue;
    }
    assert.match(tool.description, /^Search (long-term memory|past conversation history)/);
    assert.deepEqual(tool.parameters.required, ["query"]);
  }
  // Host-side timeouts sit above our own call timeouts.
  assert.equal(api.hooks.get("before_prompt_build").opts.timeoutMs, 3000);
  // capture (5000) + replay of spooled captures (2000) + margin.
  assert.equal(api.hooks.get("agent_end").opts.timeoutMs, 8500);
  assert.ok(api.hooks.get("session_end").opts.timeoutMs <= 2000, "fits the 2 s shutdown drain");
  assert.equal(api.services.length, 0);
  assert.deepEqual(api.warnings(), []);
});

test("register: disabled parts are not registered; autoStart adds a service", async () => {
  const api = await bridgeWith({
    recall: { enabled: false },
    capture: { enabled: false },
    tools: { enabled: false },
    sessionEnd: { enabled: false },
    autoStart: { enabled: true },
  });
  assert.deepEqual([...api.hooks.keys()], ["before_message_write"]);
  assert.equal(api.tools.size, 0);
  assert.equal(api.services.length, 1);
  assert.equal(api.services[0].id, "memory-tencentdb-gateway");
});

test("register: never throws, even when the host api does", async () => {
  const bridge = await loadBridge();
  const api = fakeApi();
  api.on = () => {
    throw new Error("host exploded");
  };
  assert.doesNotThrow(() => bridge.register(api));
  assert.match(api.warnings()[0], /plugin disabled: host exploded/);
  assert.doesNotThrow(() => bridge.register(undefined));
  assert.doesNotThrow(() => bridge.register({}));
});

test("register: metadata-only passes register nothing; repeated passes warn about config once", async () => {
  const bridge = await loadBridge();
  const meta = fakeApi({ registrationMode: "cli-metadata" });
  bridge.register(meta);
  assert.equal(meta.hooks.size + meta.tools.size, 0);
  const first = fakeApi({ pluginConfig: { typo: true } });
  const again = fakeApi({ pluginConfig: { typo: true }, registrationMode: "discovery" });
  bridge.register(first);
  bridge.register(again);
  assert.equal(first.warnings().length, 1);
  assert.equal(again.warnings().length, 0);
});
