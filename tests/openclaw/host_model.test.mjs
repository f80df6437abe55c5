// resolveHostModel: which OpenClaw models the gateway gets, and in which protocol (issue 24).

import assert from "node:assert/strict";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

import { BRIDGE_DIR } from "./helpers.mjs";

const { resolveHostModel } = await import(pathToFileURL(join(BRIDGE_DIR, "lib", "host_model.js")).href);

function stubApi(provider, model, providers, auth = { mode: "api-key", apiKey: "sk-KEY" }) {
  return {
    config: { models: { providers } },
    runtime: {
      modelConfig: { resolveDefaultModelForAgent: () => ({ provider, model }) },
      modelAuth: { resolveApiKeyForProvider: async () => auth },
    },
  };
}

test("an anthropic-messages provider is handed over with api anthropic", async () => {
  const api = stubApi("kimi", "k2", { kimi: { api: "anthropic-messages", baseUrl: "https://api.kimi.test/anthropic/" } });
  assert.deepEqual(await resolveHostModel(api, {}), {
    source: "openclaw", base_url: "https://api.kimi.test/anthropic", api_key: "sk-KEY", model: "k2", api: "anthropic",
  });
});

test("the built-in anthropic provider, without a providers entry, goes to api.anthropic.com", async () => {
  const api = stubApi("anthropic", "claude-sonnet-4-5", {});
  const body = await resolveHostModel(api, {});
  assert.equal(body.base_url, "https://api.anthropic.com");
  assert.equal(body.api, "anthropic");
  assert.equal(body.api_key, "sk-KEY");
});

test("anthropic by OAuth or setup token, and other protocols, stay unusable; openai stays openai", async () => {
  const oauth = await resolveHostModel(stubApi("anthropic", "c", {}, { mode: "oauth" }), {});
  assert.match(oauth.unusable, /OAuth/);
  const token = await resolveHostModel(stubApi("anthropic", "c", {}, { mode: "token", apiKey: "sk-ant-oat01" }), {});
  assert.match(token.unusable, /setup token/);
  const responses = await resolveHostModel(stubApi("openai", "g", { openai: { api: "openai-responses", baseUrl: "https://x" } }), {});
  assert.match(responses.unusable, /openai-responses/);
  const plain = await resolveHostModel(stubApi("local", "m", { local: { api: "openai-completions", baseUrl: "http://127.0.0.1:1/v1" } }), {});
  assert.equal(plain.api, undefined);
  assert.equal(plain.base_url, "http://127.0.0.1:1/v1");
});
