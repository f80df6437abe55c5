// OpenClaw parity with Hermes (issue 21, item 4), on payloads recorded from OpenClaw 2026.9.6:
// OpenClaw appends the current turn after the engine's list, so the engine names that turn's
// tool results (`pending_tool_call_ids`, fed by the tool-result middleware) on its tool-loop
// calls, and the gateway counts them as in the context (every step on the canvas); and the
// tool guide is in the system prompt from the turn's first call whenever offload is on (OpenClaw
// uses the first call's addition for the whole turn, and the first stub comes later), as
// Hermes's system prompt always has it.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { OFFLOAD_GUIDE } from "../../openclaw_bridge/lib/context_engine.js";
import { bridgeWith, configFor, live, recorded, startStub } from "./helpers.mjs";

const PLUGIN = "memory-tencentdb";
const SLOT = { plugins: { slots: { contextEngine: PLUGIN } } };
const STUB = '[Offloaded tool result: x] ...\nFull result: memory_tencentdb_offload_read {"tool_call_id": "id"}';

let stub;
let guide = ""; // what the gateway answers as system_addition
before(async () => {
  stub = await startStub((req, body) => {
    if (req.url === "/offload/tool-result") return { body: { offloaded: true, replacement: STUB, tool_call_id: body.tool_call_id } };
    if (req.url === "/offload/assemble") return { body: { messages: body.messages, estimated_tokens: 10, system_addition: guide, level: "none", stats: {} } };
    return { body: {} };
  });
});
after(async () => {
  await stub.close();
});

async function bridge() {
  const offload = { enabled: true, toolResultTimeoutMs: 3000, assembleTimeoutMs: 3000, canvasTimeoutMs: 3000 };
  return bridgeWith(configFor(stub.url, { offload, recall: { enabled: false }, capture: { enabled: false } }), { config: SLOT });
}

const assembles = () => stub.requests.filter((r) => r.path === "/offload/assemble").map((r) => r.body);

test("the current turn's results are named on the tool-loop calls, and only there; a new turn starts empty", async () => {
  stub.requests.length = 0;
  guide = "";
  const api = await bridge();
  const engine = api.engines.get(PLUGIN)({});
  const pre = recorded("offload_turns", "engine.assemble", 5).event;
  await engine.assemble(pre); // the turn's pre-prompt call
  const { event, ctx } = recorded("offload_turns", "before_prompt_build", 1);
  await api.fire("before_prompt_build", event, live(ctx)); // the loop calls follow
  const middleware = api.middlewares[0].handler;
  const ids = [];
  for (let n = 0; n < 3; n += 1) {
    const call = recorded("offload_turns", "tool_result_middleware", n);
    ids.push(call.event.toolCallId);
    const out = await middleware(call.event, { ...call.ctx, sessionKey: pre.sessionKey });
    assert.equal(out.result.content[0].text, STUB);
    await engine.assemble({ ...pre, prompt: undefined, messages: pre.messages });
    assert.deepEqual(assembles().at(-1).pending_tool_call_ids, ids, `after result ${n}`);
  }
  assert.equal(assembles()[0].pending_tool_call_ids, undefined, "the pre-prompt call has none");
  await engine.commitTurn({ advancementKey: "t1", sessionKey: pre.sessionKey });
  await engine.assemble(pre); // the next turn's pre-prompt call
  assert.equal(assembles().at(-1).pending_tool_call_ids, undefined);
});

test("the guide is the system addition from the turn's first call on, the gateway's when it sends one", async () => {
  stub.requests.length = 0;
  const api = await bridge();
  const engine = api.engines.get(PLUGIN)({});
  const pre = recorded("offload_turns", "engine.assemble", 5).event;
  guide = "";
  const first = await engine.assemble(pre);
  assert.equal(first.systemPromptAddition, OFFLOAD_GUIDE);
  assert.match(OFFLOAD_GUIDE, /memory_tencentdb_offload_read/);
  guide = "## Context offload\nthe gateway's own, with its data directory";
  assert.equal((await engine.assemble(pre)).systemPromptAddition, guide);
});
