// Context offload, part 1: the tool-result middleware (api.registerAgentToolResultMiddleware).
//
// Every tool result goes to POST /offload/tool-result, which writes the raw result to refs/ and
// its JSONL row (fsync'ed) before answering; when the gateway answers a `replacement`, that stub
// is what the model sees from the next model call of the same turn on, and what OpenClaw
// persists. All offload logic lives in the gateway: this module only moves data.
//
// A throw or an invalid return makes OpenClaw replace the output with "Tool output unavailable
// due to post-processing error.", so the handler never throws and answers `undefined` (keep the
// original) on any doubt: gateway down, slow, 5xx, a malformed answer, a stub that is not shorter.

import { isExcludedAgent } from "./config.js";
import { agentIdOf, textOf } from "./turns.js";

export const OFFLOAD_READ_TOOL = "memory_tencentdb_offload_read";

// OpenClaw refuses a middleware text block above 100,000 chars (tool-result-middleware-*.mjs).
const HOST_TEXT_LIMIT = 100_000;

/** The key every offload seam files a session under: OpenClaw's session key, else its id. */
export function offloadSessionKey(sessionKey, sessionId) {
  if (typeof sessionKey === "string" && sessionKey.trim()) return sessionKey;
  if (typeof sessionId === "string" && sessionId.trim()) return sessionId;
  return undefined;
}

/** Whether a tool call is our own read-back (by name, or through Tool Search's `tool_call`). */
export function isOffloadRead(toolName, args) {
  if (toolName === OFFLOAD_READ_TOOL) return true;
  const target = args && typeof args === "object" ? (args.id ?? args.name ?? args.tool) : undefined;
  return target === OFFLOAD_READ_TOOL;
}

export function createToolResultMiddleware({ config, link, warn, scopeOf = (agentId) => agentId, activity }) {
  return async function offloadToolResult(event, ctx) {
    try {
      return await shrink(event, ctx);
    } catch (error) {
      warn("offload:middleware:bug", `offload of a tool result failed (kept the original): ${error?.message ?? error}`);
      return undefined;
    }
  };

  async function shrink(event, ctx) {
    if (!config.offload.enabled || !event || typeof event !== "object") return undefined;
    const sessionKey = offloadSessionKey(ctx?.sessionKey, ctx?.sessionId);
    const toolCallId = typeof event.toolCallId === "string" ? event.toolCallId.trim() : "";
    const toolName = typeof event.toolName === "string" ? event.toolName.trim() : "";
    if (!sessionKey || !toolCallId || !toolName) return undefined;
    // The model reading an original back must get it whole, not a stub of it.
    if (isOffloadRead(toolName, event.args)) return undefined;
    const agentId = agentIdOf(ctx, sessionKey);
    if (isExcludedAgent(agentId, config.excludeAgents)) return undefined;
    const original = event.result;
    const content = original?.content;
    // Only text results: images and other blocks would be lost behind a text stub.
    if (!Array.isArray(content) || content.length === 0) return undefined;
    if (!content.every((b) => b && b.type === "text" && typeof b.text === "string")) return undefined;
    const text = textOf(content).trim();
    if (!text) return undefined;

    const body = {
      session_key: sessionKey,
      scope: scopeOf(agentId),
      tool_call_id: toolCallId,
      tool_name: toolName,
      // One block is sent as its exact text (read-back is byte-exact); several are joined there.
      result: content.length === 1 ? content[0].text : content,
      is_error: event.isError === true,
      timestamp: Date.now(),
      ...(event.args && typeof event.args === "object" && !Array.isArray(event.args) && { arguments: event.args }),
    };
    const answer = await link.post("/offload/tool-result", body, { timeoutMs: config.offload.toolResultTimeoutMs });
    if (!answer.ok) {
      warn(`offload:tool-result:${answer.reason}`, `tool result kept whole (offload unavailable: ${answer.reason})`);
      return undefined;
    }
    activity?.resultSent(sessionKey, toolCallId); // follows the engine's list from now on
    const replacement = answer.data && typeof answer.data === "object" ? answer.data.replacement : undefined;
    if (replacement === null || replacement === undefined) return undefined; // small: kept as is
    if (typeof replacement !== "string" || !replacement.trim() || replacement.length > HOST_TEXT_LIMIT) {
      warn("offload:tool-result:malformed", "tool result kept whole: the gateway's replacement is not a usable stub");
      return undefined;
    }
    if (replacement.length >= text.length) return undefined;
    return { result: { ...original, content: [{ type: "text", text: replacement }] } };
  }
}
