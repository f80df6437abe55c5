// The agent's way back from a stub or a canvas node: `memory_tencentdb_offload_read` over
// POST /offload/read. The original of a tool result comes back byte for byte (as the gateway
// stored it: secrets redacted), in pages that OpenClaw passes uncut (openclaw_limits.js).
// Never throws: a failure is a sentence the model can act on.

import { isExcludedAgent } from "./config.js";
import { OFFLOAD_READ_TOOL, offloadSessionKey } from "./offload.js";
import { fittingPrefix, toolResultLimits, windowOf } from "./openclaw_limits.js";
import { agentIdOf } from "./turns.js";

const KEYS = ["tool_call_id", "result_ref", "node_id", "canvas"];
// A page's footer (the next call, names and numbers) stays well under this many units.
const FOOTER_RESERVE = 600;
// Every page answer ends with this marker line; what precedes it is the page, exactly.
export const PAGE_MARK = `\n\n[${OFFLOAD_READ_TOOL} page: characters `;

// A copy of the gateway's memory_tencentdb/offload/guide.py (TOOL_DESCRIPTION and
// HOST_TOOL_PARAMETERS), held equal to it by tests/test_host_adapter_copies.py.
export const DESCRIPTION =
  "Read back what context offload moved out of your context: the full original result of a " +
  "tool call (by tool_call_id or result_ref, exactly as the tool returned it), the steps of a " +
  "task-canvas node (by node_id, e.g. 003-N2), or a task canvas (by canvas file name, or " +
  '"active"). Use it whenever a stub or a canvas node lacks a detail you need. Give exactly ' +
  "one of the four. A long text comes in pages: a page ends by naming the call for the next " +
  "page (the same key with offset); the pages joined are the original exactly.";

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
      description: "where the page starts, in characters (the previous page names it)",
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
  const limits = toolResultLimits(windowOf(toolCtx));
  return {
    name: OFFLOAD_READ_TOOL,
    label: "Offload read",
    description: DESCRIPTION,
    parameters: READ_PARAMETERS,
    // Always in the model's tool list, also under OpenClaw's default Tool Search (which hides
    // plugin tools behind tool_search/tool_call): stubs name this tool, and a model that calls
    // it by that name must find it (local-model-lean-*.mjs `shouldCatalogTool`).
    catalogMode: "direct-only",
    async execute(_toolCallId, params, signal) {
      try {
        const given = KEYS.filter((k) => typeof params?.[k] === "string" && params[k].trim());
        if (given.length !== 1) {
          return text(`Give exactly one of ${KEYS.join(", ")}${given.length ? ` (got ${given.join(", ")})` : ""}.`);
        }
        if (isExcludedAgent(agentId, config.excludeAgents)) return text("Context offload is turned off for this agent.");
        const key = given[0];
        const offset = offsetOf(params?.offset);
        if (offset === null) return text("offset must be a whole number of characters, 0 or more.");
        const body = { [key]: params[key].trim(), scope: scopeOf(agentId), ...(sessionKey && { session_key: sessionKey }) };
        if (key !== "node_id") {
          body.offset = offset;
          // At most what could fit (ASCII at the tighter limit); trimmed to fit below.
          body.length = Math.max(1, Math.min(limits.live - FOOTER_RESERVE, Math.floor((limits.guard - FOOTER_RESERVE) / 2)));
        }
        const result = await link.post("/offload/read", body, { timeoutMs: config.offload.readTimeoutMs, signal });
        if (!result.ok) {
          if (result.status === 404) return text(`Nothing stored under ${key} ${JSON.stringify(params[key].trim())}.`, { error: "not found" });
          if (result.status >= 400 && result.status < 500) return text(`Cannot read that: ${result.reason}`, { error: result.reason });
          warn(`${OFFLOAD_READ_TOOL}:${result.reason}`, `${OFFLOAD_READ_TOOL} failed: ${result.reason}`);
          return text(`The offload store is unavailable right now (${result.reason}); try again later.`, { error: result.reason });
        }
        return answerOf(result.data, limits, offset, { [key]: body[key] });
      } catch (error) {
        return text(`Reading failed (${error?.message ?? error}).`);
      }
    },
  };
}

function offsetOf(value) {
  if (value === undefined || value === null || value === "") return 0;
  const n = Number(value);
  return Number.isInteger(n) && n >= 0 ? n : null;
}

/**
 * A tool result's or a canvas's text as one page that OpenClaw passes uncut: the whole text
 * bare when it fits, else the part that fits and a last line naming the next call.
 */
function pageOf(data, field, limits, asked, askedKey) {
  let got = data[field];
  let offset = data.offset;
  let total = data.total_chars;
  if (!Number.isInteger(offset) || !Number.isInteger(total)) {
    // A gateway from before paging answers the whole text: page it here.
    const points = [...got];
    offset = Math.min(asked, points.length);
    total = points.length;
    got = points.slice(offset).join("");
  }
  const fit = fittingPrefix(got, limits, FOOTER_RESERVE);
  const pageText = got.slice(0, fit.utf16);
  const end = offset + fit.codePoints;
  if (offset === 0 && end >= total) return { text: pageText, offset, end, total };
  // The next page is named by what this one was read from (a canvas file, not "active").
  const again = data.kind === "canvas" && data.canvas ? { canvas: data.canvas } : askedKey.tool_call_id && data.tool_call_id ? { tool_call_id: data.tool_call_id } : askedKey;
  const next = end < total ? `next page: ${OFFLOAD_READ_TOOL} ${JSON.stringify({ ...again, offset: end })}` : "last page";
  return { text: `${pageText}${PAGE_MARK}${offset}-${end} of ${total}; ${next}]`, offset, end, total };
}

function answerOf(data, limits, asked, askedKey) {
  if (!data || typeof data !== "object") return text("The offload store gave an unreadable answer; try again.");
  if (data.kind === "tool_result" && typeof data.content === "string") {
    const page = pageOf(data, "content", limits, asked, askedKey);
    return text(page.text, { kind: data.kind, tool_call_id: data.tool_call_id, tool_name: data.tool_name, result_ref: data.result_ref, path: data.path, encoding: data.encoding, offset: page.offset, end: page.end, total: page.total });
  }
  if (data.kind === "canvas" && typeof data.text === "string") {
    const page = pageOf(data, "text", limits, asked, askedKey);
    return text(page.text, { kind: data.kind, canvas: data.canvas, path: data.path, offset: page.offset, end: page.end, total: page.total });
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
