// Turn bookkeeping and message conversion, pure functions only.
//
// OpenClaw's agent_end carries the whole session history, not just the turn that ended. The
// bridge notes how many messages the session had when the turn began (before_prompt_build, same
// ctx.runId) and sends only what came after, so the gateway never stores a message twice.

import { stripInjected } from "./injected.js";

// Larger tool results are cut before sending: one huge result must not push the whole capture
// over the gateway's request-size limit and lose the turn.
export const MAX_MESSAGE_CHARS = 64_000;

/** Remembers where each run's turn starts. Bounded, so abandoned runs cannot grow it forever. */
export class TurnTracker {
  constructor(limit = 256) {
    this.limit = limit;
    this.starts = new Map();
  }

  begin(runId, priorCount, startedAt = Date.now()) {
    if (!runId) return;
    this.starts.delete(runId);
    this.starts.set(runId, { priorCount, startedAt });
    while (this.starts.size > this.limit) this.starts.delete(this.starts.keys().next().value);
  }

  take(runId) {
    if (!runId) return undefined;
    const start = this.starts.get(runId);
    this.starts.delete(runId);
    return start;
  }
}

/** The messages of the turn that just ended, from the full session history. */
export function sliceTurn(messages, start) {
  if (!Array.isArray(messages) || messages.length === 0) return [];
  const real = (m) => m && typeof m === "object" && m.role !== "custom";
  // 1. The recorded history length, if the message there is the turn's user message.
  if (start && Number.isInteger(start.priorCount) && start.priorCount < messages.length) {
    const turn = messages.slice(start.priorCount);
    if (turn.find(real)?.role === "user") return turn;
  }
  // 2. Compaction can shrink history mid-turn: fall back to timestamps.
  if (start && Number.isFinite(start.startedAt)) {
    const turn = messages.filter((m) => Number.isFinite(m?.timestamp) && m.timestamp >= start.startedAt);
    if (turn.find(real)?.role === "user") return turn;
  }
  // 3. No bookkeeping (e.g. recall was skipped): the last user message onward.
  for (let i = messages.length - 1; i >= 0; i -= 1) {
    if (messages[i]?.role === "user") return messages.slice(i);
  }
  return [];
}

/**
 * Whether a turn failed. OpenClaw 2026.9 reports a failed model call as agent_end with
 * success: true; only the turn's last assistant message (stopReason "error") tells.
 */
export function turnFailed(event, turn) {
  if (event?.success === false || event?.error) return true;
  const last = [...turn].reverse().find((m) => m?.role === "assistant");
  return FAILED_STOPS.has(last?.stopReason) || Boolean(last?.errorMessage);
}

const FAILED_STOPS = new Set(["error", "aborted"]);

/** OpenClaw AgentMessages -> the gateway's /capture message shape. Drops what is not dialogue. */
export function toGatewayMessages(messages) {
  const out = [];
  for (const message of messages) {
    const converted = convert(message);
    if (converted) out.push(converted);
  }
  return out;
}

function convert(message) {
  if (!message || typeof message !== "object") return null;
  const base = {};
  if (Number.isFinite(message.timestamp)) base.timestamp = message.timestamp;
  switch (message.role) {
    case "user": {
      const content = cap(stripInjected(textOf(message.content).trim()));
      return content ? { role: "user", content, ...base } : null;
    }
    case "assistant": {
      const content = cap(textOf(message.content).trim());
      const toolCalls = toolCallsOf(message.content);
      if (!content && toolCalls.length === 0) return null;
      const out = { role: "assistant", content, ...base };
      if (toolCalls.length) out.tool_calls = toolCalls;
      return out;
    }
    case "toolResult":
    case "tool": {
      const out = { role: "tool", content: cap(textOf(message.content).trim()), ...base };
      const callId = message.toolCallId ?? message.tool_call_id;
      const name = message.toolName ?? message.name;
      if (callId) out.tool_call_id = String(callId);
      if (name) out.name = String(name);
      if (message.isError) out.content = `[error] ${out.content}`;
      return out;
    }
    default:
      // "custom" carriers and anything a future host adds are runtime plumbing, not dialogue.
      return null;
  }
}

/**
 * Plain text of a message content (string or content parts): the gateway's rule
 * (memory_tencentdb/capture.py message_text), held equal to it by
 * tests/test_host_adapter_copies.py. Text parts as they are, an image as "[image]", a
 * tool_result part by its own content, non-empty parts joined by newlines.
 */
export function textOf(content) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    const parts = [];
    for (const part of content) {
      if (typeof part === "string") parts.push(part);
      else if (part && typeof part === "object") {
        const kind = part.type;
        if (TEXT_KINDS.has(kind) && typeof part.text === "string") parts.push(part.text);
        else if (IMAGE_KINDS.has(kind)) parts.push("[image]");
        else if (kind === "tool_result" && part.content !== null && part.content !== undefined) {
          parts.push(textOf(part.content));
        }
      }
    }
    return parts.filter((p) => p).join("\n");
  }
  if (typeof content === "object" && typeof content.text === "string") return content.text;
  return pythonJson(content);
}

const TEXT_KINDS = new Set(["text", "input_text", "output_text"]);
const IMAGE_KINDS = new Set(["image_url", "image", "input_image"]);

/** JSON as Python's json.dumps(ensure_ascii=False) writes it (", " and ": " separators). */
function pythonJson(value) {
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(", ")}]`;
  if (value && typeof value === "object") {
    return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pythonJson(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

function toolCallsOf(content) {
  if (!Array.isArray(content)) return [];
  return content
    .filter((part) => part?.type === "toolCall" && part.name)
    .map((part) => ({
      id: String(part.id ?? ""),
      type: "function",
      function: {
        name: String(part.name),
        arguments: typeof part.arguments === "string" ? part.arguments : JSON.stringify(part.arguments ?? {}),
      },
    }));
}

function cap(text) {
  if (text.length <= MAX_MESSAGE_CHARS) return text;
  return `${text.slice(0, MAX_MESSAGE_CHARS)}\n…[truncated ${text.length - MAX_MESSAGE_CHARS} chars]`;
}

/** "agent:<id>:<rest>" -> "<id>": the agent id when a hook's ctx lacks one. */
export function agentIdOf(ctx, sessionKey) {
  if (ctx?.agentId) return String(ctx.agentId);
  const match = /^agent:([^:]+):/.exec(sessionKey ?? "");
  return match ? match[1] : "main";
}
