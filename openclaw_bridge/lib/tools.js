// Two agent tools over the gateway's search routes. Names carry a prefix because OpenClaw's
// bundled memory-core already owns `memory_search`. Under Tool Search (the 2026.9 default) the
// model finds tools by their description, so each description opens with what it searches.

import { isExcludedAgent } from "./config.js";
import { agentIdOf } from "./turns.js";

export const TOOL_NAMES = Object.freeze({
  memories: "memory_tencentdb_memory_search",
  conversations: "memory_tencentdb_conversation_search",
  forget: "memory_tencentdb_forget",
});

const LIMIT_DEFAULT = 5;
const LIMIT_MAX = 20;

const SPECS = [
  {
    name: TOOL_NAMES.memories,
    label: "Memory search",
    route: "/search/memories",
    description:
      "Search long-term memory: facts, preferences, instructions and past events the user shared " +
      "in earlier sessions. Use it when an answer may depend on what you were told before " +
      "(\"what do I like\", \"what did we decide\"). Returns the best-matching memories.",
    empty: "No matching memories.",
    extraParams: {},
    body: () => ({}),
  },
  {
    name: TOOL_NAMES.conversations,
    label: "Conversation search",
    route: "/search/conversations",
    description:
      "Search past conversation history: the verbatim messages of earlier sessions (user, " +
      "assistant and tool results). Use it to find exact earlier wording, decisions or outputs " +
      "that long-term memory summarises.",
    empty: "No matching messages.",
    extraParams: {
      current_session_only: {
        type: "boolean",
        description: "Only search this session's messages (default: all sessions of this agent).",
      },
    },
    body: (params, sessionKey) => (params?.current_session_only && sessionKey ? { session_key: sessionKey } : {}),
  },
];

/** [{ name, factory }] for api.registerTool(factory, { name }). */
export function createTools({ config, link, warn, scopeOf = (agentId) => agentId }) {
  return [
    ...SPECS.map((spec) => ({ name: spec.name, factory: (toolCtx) => buildTool(spec, toolCtx, config, link, warn, scopeOf) })),
    { name: TOOL_NAMES.forget, factory: (toolCtx) => buildForgetTool(toolCtx, config, link, warn, scopeOf) },
  ];
}

// "Forget that I said ...": POST /memories/forget (not a dry run: the user asked). The answer
// names what was removed and the close memories that were kept, with ids for a second call.
function buildForgetTool(toolCtx, config, link, warn, scopeOf) {
  const agentId = agentIdOf(toolCtx, toolCtx?.sessionKey);
  const scope = scopeOf(agentId);
  return {
    name: TOOL_NAMES.forget,
    label: "Forget memories",
    description:
      "Forget long-term memories when the user asks (\"forget that I said ...\", \"忘掉我说过的...\"). " +
      "Removes the memories that contain what `query` names and says what it removed; close memories " +
      "it kept are listed with ids: call again with `ids` to remove one of those.",
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: "What to forget, in a few words." },
        ids: { type: "array", items: { type: "string" }, description: "Memory ids to forget (from an earlier answer)." },
      },
      additionalProperties: false,
    },
    async execute(_toolCallId, params, signal) {
      try {
        const foreign = foreignKeys(params, ["query", "ids"]);
        if (foreign.length) return text(refusal(foreign), { error: "unexpected arguments", refused: foreign });
        const query = typeof params?.query === "string" ? params.query.trim() : "";
        const ids = Array.isArray(params?.ids) ? params.ids.map(String).filter((i) => i.trim()).slice(0, 100) : [];
        if (!query && !ids.length) return text("Say what to forget (query) or give memory ids.");
        if (isExcludedAgent(agentId, config.excludeAgents)) return text("Memory is turned off for this agent.");
        const result = await link.post(
          "/memories/forget",
          { scope, dry_run: false, ...(ids.length ? { ids } : { query }) },
          { timeoutMs: config.tools.timeoutMs, signal },
        );
        if (!result.ok) {
          warn(`${TOOL_NAMES.forget}:${result.reason}`, `${TOOL_NAMES.forget} failed: ${result.reason}`);
          return text(`Memory is unavailable (${result.reason}); nothing was removed.`, { error: result.reason });
        }
        const matched = Array.isArray(result.data?.matched) ? result.data.matched : [];
        const forgotten = Array.isArray(result.data?.forgotten) ? result.data.forgotten : [];
        const candidates = Array.isArray(result.data?.candidates) ? result.data.candidates : [];
        const lines = forgotten.length
          ? [`Forgot ${forgotten.length} memor${forgotten.length === 1 ? "y" : "ies"}:`, ...matched.map((m) => `- ${m.content} (${m.id})`)]
          : ["Nothing matched; nothing was removed."];
        if (candidates.length) lines.push("Kept (similar, not removed):", ...candidates.map((m) => `- ${m.content} (${m.id})`));
        return text(lines.join("\n"), { forgotten, candidates: candidates.map((m) => m.id) });
      } catch (error) {
        return text(`Forgetting failed (${error?.message ?? error}); nothing was removed.`);
      }
    },
  };
}

function buildTool(spec, toolCtx, config, link, warn, scopeOf) {
  const sessionKey = toolCtx?.sessionKey;
  const agentId = agentIdOf(toolCtx, sessionKey);
  const scope = scopeOf(agentId);
  return {
    name: spec.name,
    label: spec.label,
    description: spec.description,
    parameters: {
      type: "object",
      properties: {
        query: { type: "string", description: "What to look for, in natural language or keywords." },
        limit: { type: "integer", minimum: 1, maximum: LIMIT_MAX, description: `How many results (default ${LIMIT_DEFAULT}).` },
        ...spec.extraParams,
      },
      required: ["query"],
      additionalProperties: false,
    },
    // Never throws: a failed search is a sentence the model can read and carry on without.
    async execute(_toolCallId, params, signal) {
      try {
        const query = typeof params?.query === "string" ? params.query.trim() : "";
        if (!query) return text("Give a non-empty query.");
        if (isExcludedAgent(agentId, config.excludeAgents)) return text("Memory is turned off for this agent.");
        const result = await link.post(
          spec.route,
          { query, limit: limitOf(params?.limit), scope, ...spec.body(params, sessionKey) },
          { timeoutMs: config.tools.timeoutMs, signal },
        );
        if (!result.ok) {
          warn(`${spec.name}:${result.reason}`, `${spec.name} failed: ${result.reason}`);
          return text(`Memory is temporarily unavailable (${result.reason}); continue without it.`, {
            error: result.reason,
          });
        }
        const total = Number(result.data?.total ?? 0);
        const body = typeof result.data?.results === "string" ? result.data.results.trim() : "";
        return text(total > 0 && body ? body : spec.empty, { total });
      } catch (error) {
        return text(`Memory search failed (${error?.message ?? error}); continue without it.`);
      }
    },
  };
}

/** Argument names a call gave that the tool does not take (a model mixing up two tools). */
export function foreignKeys(params, allowed) {
  if (!params || typeof params !== "object" || Array.isArray(params)) return [];
  return Object.keys(params).filter((k) => !allowed.includes(k));
}

// A destructive tool acts only on its own argument shape: a host's name repair or a confused
// model can send it another tool's arguments (the read-back's tool_call_id, say).
function refusal(foreign) {
  const readHint = foreign.some((k) => ["tool_call_id", "result_ref", "node_id", "canvas", "offset"].includes(k))
    ? ' To read an offloaded result back, call memory_tencentdb_offload_read with {"tool_call_id": "..."}.'
    : "";
  return `${TOOL_NAMES.forget} takes only query or ids, not ${foreign.join(", ")}; nothing was removed.${readHint}`;
}

function limitOf(value) {
  const n = Math.trunc(Number(value));
  if (!Number.isFinite(n) || n < 1) return LIMIT_DEFAULT;
  return Math.min(n, LIMIT_MAX);
}

function text(value, details = {}) {
  return { content: [{ type: "text", text: value }], details };
}
