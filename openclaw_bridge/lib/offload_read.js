// The agent's way back from a stub or a canvas node: `memory_tencentdb_offload_read` over
// POST /offload/read. The original of a tool result comes back byte for byte (as the gateway
// stored it: secrets redacted). Never throws: a failure is a sentence the model can act on.

import { isExcludedAgent } from "./config.js";
import { OFFLOAD_READ_TOOL, offloadSessionKey } from "./offload.js";
import { agentIdOf } from "./turns.js";

const KEYS = ["tool_call_id", "result_ref", "node_id", "canvas"];
// OpenClaw cuts a tool result's text at 100,000 chars; longer originals are read in pages.
export const READ_PAGE_CHARS = 90_000;

const DESCRIPTION =
  "Read back what context offload moved out of your context: the full original result of a " +
  "tool call (by tool_call_id or result_ref, exactly as the tool returned it), the steps of a " +
  "task-canvas node (by node_id, e.g. 003-N2), or a task canvas (by canvas file name, or " +
  '"active"). Use it whenever a stub or a canvas node lacks a detail you need. Give exactly one key.';

export const READ_PARAMETERS = Object.freeze({
  type: "object",
  properties: {
    tool_call_id: { type: "string", description: "id of the tool call whose result to read" },
    result_ref: { type: "string", description: "refs/<file>.md named in a stub" },
    node_id: { type: "string", description: "canvas node id, NNN-N<k>" },
    canvas: { type: "string", description: 'canvas file (NNN-label.mmd) or "active"' },
    offset: {
      type: "integer",
      minimum: 0,
      description: `for results longer than ${READ_PAGE_CHARS} characters: where the next page starts (the previous answer says)`,
    },
  },
  additionalProperties: false,
});

/** { name, factory } for api.registerTool(factory, { name }). */
export function createOffloadReadTool({ config, link, warn, scopeOf = (agentId) => agentId }) {
  return { name: OFFLOAD_READ_TOOL, factory: (toolCtx) => buildReadTool(toolCtx, config, link, warn, scopeOf) };
}

function buildReadTool(toolCtx, config, link, warn, scopeOf) {
  const sessionKey = offloadSessionKey(toolCtx?.sessionKey, toolCtx?.sessionId);
  const agentId = agentIdOf(toolCtx, sessionKey);
  return {
    name: OFFLOAD_READ_TOOL,
    label: "Offload read",
    description: DESCRIPTION,
    parameters: READ_PARAMETERS,
    async execute(_toolCallId, params, signal) {
      try {
        const given = KEYS.filter((k) => typeof params?.[k] === "string" && params[k].trim());
        if (given.length !== 1) {
          return text(`Give exactly one of ${KEYS.join(", ")}${given.length ? ` (got ${given.join(", ")})` : ""}.`);
        }
        if (isExcludedAgent(agentId, config.excludeAgents)) return text("Context offload is turned off for this agent.");
        const key = given[0];
        const body = { [key]: params[key].trim(), scope: scopeOf(agentId), ...(sessionKey && { session_key: sessionKey }) };
        const result = await link.post("/offload/read", body, { timeoutMs: config.offload.readTimeoutMs, signal });
        if (!result.ok) {
          if (result.status === 404) return text(`Nothing stored under ${key} ${JSON.stringify(params[key].trim())}.`, { error: "not found" });
          if (result.status >= 400 && result.status < 500) return text(`Cannot read that: ${result.reason}`, { error: result.reason });
          warn(`${OFFLOAD_READ_TOOL}:${result.reason}`, `${OFFLOAD_READ_TOOL} failed: ${result.reason}`);
          return text(`The offload store is unavailable right now (${result.reason}); try again later.`, { error: result.reason });
        }
        return answerOf(result.data, params?.offset);
      } catch (error) {
        return text(`Reading failed (${error?.message ?? error}).`);
      }
    },
  };
}

function answerOf(data, offsetParam) {
  if (!data || typeof data !== "object") return text("The offload store gave an unreadable answer; try again.");
  if (data.kind === "tool_result" && typeof data.content === "string") {
    const details = { kind: data.kind, tool_call_id: data.tool_call_id, tool_name: data.tool_name, result_ref: data.result_ref, path: data.path, encoding: data.encoding };
    const content = data.content;
    if (content.length <= READ_PAGE_CHARS && !offsetParam) return text(content, details);
    const offset = Math.max(0, Math.min(content.length, Math.trunc(Number(offsetParam) || 0)));
    const end = Math.min(content.length, offset + READ_PAGE_CHARS);
    const more = end < content.length ? `\n[characters ${offset}-${end} of ${content.length}; next page: offset ${end}]` : `\n[characters ${offset}-${end} of ${content.length}; end]`;
    return text(content.slice(offset, end) + more, { ...details, offset, end, total: content.length });
  }
  if (data.kind === "canvas" && typeof data.text === "string") {
    return text(data.text, { kind: data.kind, canvas: data.canvas, path: data.path });
  }
  if (data.kind === "node" && Array.isArray(data.rows)) {
    const lines = [`Node ${data.node_id} of canvas ${data.canvas}: ${data.rows.length} step(s)`, ...data.rows.map((r) => JSON.stringify(r))];
    return text(lines.join("\n"), { kind: data.kind, node_id: data.node_id, canvas: data.canvas });
  }
  return text("The offload store gave an unexpected answer; try again.");
}

function text(value, details = {}) {
  return { content: [{ type: "text", text: value }], details };
}
