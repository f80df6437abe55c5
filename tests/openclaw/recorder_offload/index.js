// Test-only plugin: owns the context-engine slot (pass-through, with the durable-turn contract)
// and a tool-result middleware that changes nothing, and appends every payload they receive,
// plus before_prompt_build's, to the JSONL file named by its `outFile` config.
// tests/openclaw/record_offload_fixtures.py drives it through the real OpenClaw.
import { appendFileSync } from "node:fs";

const ID = "mtdb-offload-recorder";

function plain(value) {
  return JSON.parse(
    JSON.stringify(value ?? null, (key, v) => {
      if (typeof v === "function") return "[function]";
      if (v instanceof Set) return [...v];
      return v;
    }),
  );
}

// A deterministic output of about `chars` characters, English or Chinese lines.
function bigText(chars, lang) {
  const lines = [];
  let size = 0;
  for (let i = 0; size < chars; i += 1) {
    const line = lang === "zh" ? `第${i}行：构建日志，编译模块 ${i % 17} 成功，耗时 ${i * 3} 毫秒。` : `line ${i}: build log, compiled module ${i % 17} ok in ${i * 3} ms`;
    lines.push(line);
    size += line.length + 1;
  }
  return lines.join("\n").slice(0, chars);
}

export default {
  id: ID,
  name: "Offload seam recorder (tests)",
  register(api) {
    const outFile = api.pluginConfig?.outFile;
    if (!outFile || api.registrationMode === "cli-metadata") return;
    const write = (entry) => {
      try {
        appendFileSync(outFile, JSON.stringify({ at: Date.now(), mode: api.registrationMode, ...entry }) + "\n");
      } catch {
        // A recorder must never break the run it observes.
      }
    };
    const engine = () => ({
      info: {
        id: ID,
        name: "Offload seam recorder",
        ownsCompaction: true,
        transcriptSemantics: { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" },
      },
      async assemble(params) {
        write({ hook: "engine.assemble", event: plain(params) });
        return { messages: params.messages, estimatedTokens: 1 };
      },
      async commitTurn(params) {
        write({ hook: "engine.commitTurn", event: plain(params) });
        return { status: "committed" };
      },
      async bootstrap(params) {
        write({ hook: "engine.bootstrap", event: plain(params) });
        return { bootstrapped: true };
      },
      async maintain(params) {
        write({ hook: "engine.maintain", event: plain(params) });
        return { changed: false, bytesFreed: 0, rewrittenEntries: 0 };
      },
      async ingest() {
        return { ingested: false };
      },
      async compact(params) {
        write({ hook: "engine.compact", event: plain(params) });
        return { ok: true, compacted: false, reason: "recorder" };
      },
      async dispose() {
        write({ hook: "engine.dispose" });
      },
    });
    api.registerContextEngine(ID, engine);
    api.registerAgentToolResultMiddleware(
      async (event, ctx) => {
        write({ hook: "tool_result_middleware", event: plain(event), ctx: plain(ctx) });
        return undefined;
      },
      { runtimes: ["openclaw"] },
    );
    api.on("before_prompt_build", (event, ctx) => {
      write({ hook: "before_prompt_build", event: plain(event), ctx: plain(ctx) });
      return undefined;
    });
    api.registerTool(
      () => ({
        name: "recorder_big_output",
        description: "Return a long build log (test recorder).",
        parameters: { type: "object", properties: { chars: { type: "integer" }, lang: { type: "string" } } },
        async execute(toolCallId, params) {
          return { content: [{ type: "text", text: bigText(Number(params?.chars) || 4000, params?.lang) }], details: { chars: Number(params?.chars) || 4000 } };
        },
      }),
      { name: "recorder_big_output" },
    );
  },
};
