// Test-only plugin: appends every payload of the hooks the bridge uses, plus the tool
// factory context and tool calls, to the JSONL file named by its `outFile` config.
// tests/openclaw/record_fixtures.py drives it through the real OpenClaw.
import { appendFileSync } from "node:fs";

const HOOKS = [
  "session_start",
  "before_prompt_build",
  "before_message_write",
  "agent_end",
  "session_end",
  "gateway_stop",
];

// Functions (hookInvocation.assertActive, abort signals) do not survive JSON; note them.
function plain(value) {
  return JSON.parse(
    JSON.stringify(value ?? null, (key, v) => (typeof v === "function" ? "[function]" : v)),
  );
}

export default {
  id: "mtdb-hook-recorder",
  name: "Hook recorder (tests)",
  register(api) {
    const outFile = api.pluginConfig?.outFile;
    if (!outFile || api.registrationMode === "cli-metadata") return;
    const write = (entry) => {
      try {
        appendFileSync(outFile, JSON.stringify({ at: Date.now(), ...entry }) + "\n");
      } catch {
        // A recorder must never break the run it observes.
      }
    };
    // With `inject` set, recall is imitated so the fixtures show where injected text travels.
    const inject = api.pluginConfig?.inject;
    for (const hook of HOOKS) {
      api.on(hook, (event, ctx) => {
        write({ hook, event: plain(event), ctx: plain(ctx) });
        if (hook === "before_prompt_build" && inject) return { prependContext: inject };
        return undefined;
      });
    }
    api.registerTool(
      (toolCtx) => ({
        name: "recorder_memory_search",
        description: "Search long-term memory (test recorder).",
        parameters: {
          type: "object",
          properties: { query: { type: "string" }, limit: { type: "integer" } },
          required: ["query"],
        },
        async execute(toolCallId, params) {
          write({ hook: "tool_execute", toolCallId, params: plain(params), toolCtx: plain(toolCtx) });
          return { content: [{ type: "text", text: "1. (recorded) the user likes teal" }] };
        },
      }),
      { name: "recorder_memory_search" },
    );
  },
};
