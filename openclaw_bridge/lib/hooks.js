// The four hook handlers. Each forwards to the gateway and degrades to "no memory this turn":
// handlers never throw, and every gateway call is bounded by its own timeout (well below the
// host's hook timeout), so neither a dead nor a slow gateway can hold up a turn for long.

import { isExcludedAgent } from "./config.js";
import { stripInjected, stripMessage } from "./injected.js";
import { TOOL_NAMES } from "./tools.js";
import { agentIdOf, sliceTurn, toGatewayMessages, turnFailed } from "./turns.js";

// Waiting captures sent after a turn's own capture: at most this long per turn.
export const REPLAY_BUDGET_MS = 2_000;

export function createHooks({ config, link, warn, say = () => {}, turns, scopeOf = (agentId) => agentId, spool }) {
  // The gateway's tool guide (in the system part) names the tools the agent can call.
  const toolNames = config.tools.enabled
    ? { memory_search: TOOL_NAMES.memories, conversation_search: TOOL_NAMES.conversations }
    : undefined;

  /** Why this turn is left alone, or null to handle it. */
  function skipReason(ctx, sessionKey) {
    if (!sessionKey) return "no session key";
    if (ctx?.trigger && config.skipTriggers.includes(ctx.trigger)) return `trigger ${ctx.trigger}`;
    if (isExcludedAgent(agentIdOf(ctx, sessionKey), config.excludeAgents)) return "agent excluded";
    return null;
  }

  async function beforePromptBuild(event, ctx) {
    // Note where this turn starts even when recall is off: agent_end needs it to send only this turn.
    turns.begin(ctx?.runId, Array.isArray(event?.messages) ? event.messages.length : undefined);
    if (!config.recall.enabled) return undefined;
    const sessionKey = keyOf(ctx?.sessionKey);
    if (skipReason(ctx, sessionKey)) return undefined;
    const query = stripInjected(queryOf(event)).trim();
    if (!query) return undefined;

    const result = await link.post(
      "/recall",
      {
        query,
        session_key: sessionKey,
        ...sessionIdOf(ctx?.sessionId),
        scope: scopeOf(agentIdOf(ctx, sessionKey)),
        ...(toolNames && { tool_names: toolNames }),
      },
      { timeoutMs: config.recall.timeoutMs, startWaitMs: startWaitMs() },
    );
    if (!result.ok) {
      warn(`recall:${result.reason}`, `recall skipped: ${result.reason}`);
      return undefined;
    }
    const data = result.data && typeof result.data === "object" ? result.data : {};
    const hasSplit = "prepend_context" in data || "append_system_context" in data;
    const prepend = clip(hasSplit ? data.prepend_context : data.context, config.recall.maxChars);
    const system = clip(hasSplit ? data.append_system_context : "", config.recall.maxChars);
    if (!prepend && !system) return undefined;
    // If the host already stopped waiting for us, a late answer must not land in some later turn.
    try {
      ctx?.hookInvocation?.assertActive?.();
    } catch {
      return undefined;
    }
    return placed(prepend, system, config.recall.placement);
  }

  /** The hook's answer: the stable part in the system part, this turn's memories where
   * `recall.placement` puts them (with the user's message, or after the stable part). */
  function placed(prepend, system, placement) {
    const out = {};
    if (placement === "appendSystem") {
      const parts = [system, prepend].filter(Boolean);
      if (parts.length) out.appendSystemContext = parts.join("\n\n");
      return out;
    }
    if (prepend) out.prependContext = prepend;
    if (system) out.appendSystemContext = system;
    return out;
  }

  // Only a turn that may itself start the gateway waits for it.
  function startWaitMs() {
    return config.autoStart.enabled ? config.autoStart.waitMs : 0;
  }

  async function agentEnd(event, ctx) {
    const runId = ctx?.runId ?? event?.runId;
    const start = turns.take(runId);
    if (!config.capture.enabled) return;
    const sessionKey = keyOf(ctx?.sessionKey);
    let delivered = false;
    if (!skipReason(ctx, sessionKey)) delivered = await captureTurn(event, ctx, sessionKey, start, runId);
    if (delivered) await replaySpool();
  }

  /** Send this turn; what cannot be delivered is kept in the spool. True if the gateway took it. */
  async function captureTurn(event, ctx, sessionKey, start, runId) {
    const turn = sliceTurn(event?.messages, start);
    // A failed turn is half a conversation; storing it would teach memory things that never happened.
    if (turnFailed(event, turn)) return false;
    const messages = withIds(toGatewayMessages(turn), runId);
    if (!messages.some((m) => m.role === "user")) return false;

    const agentId = agentIdOf(ctx, sessionKey);
    // The agent's name goes with the turn, so L0 shows which OpenClaw agent answered.
    const body = { session_key: sessionKey, ...sessionIdOf(ctx?.sessionId), scope: scopeOf(agentId), assistant_name: agentId, messages };
    const result = await link.post("/capture", body, { timeoutMs: config.capture.timeoutMs, startWaitMs: startWaitMs() });
    if (result.ok) return true;
    // A 4xx other than 401 is the gateway refusing this content: retrying cannot help, but the
    // turn is still kept (in spool/rejected) rather than dropped.
    const refused = result.status >= 400 && result.status < 500 && result.status !== 401;
    const kept = keep(body, result.reason, refused);
    warn(`capture:${result.reason}`, `capture ${refused ? "refused" : "not delivered"}: ${result.reason}; ${kept}`);
    return false;
  }

  function keep(body, reason, refused) {
    if (!spool) return "not kept (no state directory)";
    try {
      spool.put("/capture", body, { dataDir: link.dataDir, reason, rejected: refused });
      return refused ? `kept in ${spool.dir}/rejected` : `kept in ${spool.dir}, sent when the gateway is back`;
    } catch (error) {
      return `could not be kept (${error?.message ?? error})`;
    }
  }

  /** Captures of earlier runs that could not be delivered then, oldest first, within a budget. */
  async function replaySpool() {
    if (!spool) return;
    const deadline = Date.now() + REPLAY_BUDGET_MS;
    const out = await spool.replay(
      (entry) => link.post(entry.route, entry.body, { timeoutMs: Math.max(200, Math.min(config.capture.timeoutMs, deadline - Date.now())) }),
      { dataDir: link.dataDir, deadline },
    );
    if (out.sent || out.rejected) {
      say(
        out.rejected ? "warn" : "info",
        `sent ${out.sent} capture(s) kept from earlier runs` +
          (out.rejected ? `; ${out.rejected} refused by the gateway, kept in ${spool.dir}/rejected` : "") +
          (out.left ? `; ${out.left} still waiting` : ""),
      );
    }
  }

  async function sessionEnd(event, ctx) {
    if (!config.sessionEnd.enabled) return;
    const sessionKey = keyOf(event?.sessionKey) ?? keyOf(ctx?.sessionKey);
    if (!sessionKey) return;
    const agentId = agentIdOf(ctx, sessionKey);
    if (isExcludedAgent(agentId, config.excludeAgents)) return;
    const scope = scopeOf(agentId);
    const result = await link.post(
      "/session/end",
      // wait: false: the gateway starts the flush and answers at once; extraction can take
      // longer than a session end should hold up OpenClaw (or a CLI that is about to exit).
      { session_key: sessionKey, ...sessionIdOf(event?.sessionId ?? ctx?.sessionId), scope, wait: false },
      { timeoutMs: config.sessionEnd.timeoutMs },
    );
    if (!result.ok) warn(`session_end:${result.reason}`, `session end not sent: ${result.reason}`);
  }

  // Synchronous by contract: the host ignores a returned Promise.
  function beforeMessageWrite(event) {
    const message = event?.message;
    if (message?.role !== "user") return undefined;
    const cleaned = stripMessage(message);
    return cleaned ? { message: cleaned } : undefined;
  }

  return {
    before_prompt_build: guardAsync("before_prompt_build", beforePromptBuild, warn),
    agent_end: guardAsync("agent_end", agentEnd, warn),
    session_end: guardAsync("session_end", sessionEnd, warn),
    before_message_write: guardSync("before_message_write", beforeMessageWrite, warn),
    // Not a hook: the autoStart service sends waiting captures once the gateway is up.
    replay: guardAsync("replay", replaySpool, warn),
  };
}

// The harness may send the request on its own; an explicit empty string means "no text" and must
// not fall back to the prompt, which can hold reconstructed history.
function queryOf(event) {
  if (typeof event?.currentUserMessage === "string") return event.currentUserMessage;
  return typeof event?.prompt === "string" ? event.prompt : "";
}

// Ids the gateway deduplicates on: a capture replayed from the spool after it did arrive (a
// timeout after the write) is not stored twice.
function withIds(messages, runId) {
  if (!runId) return messages;
  return messages.map((m, i) => ({ ...m, id: `openclaw:${runId}:${i}` }));
}

function keyOf(value) {
  return typeof value === "string" && value ? value : undefined;
}

function sessionIdOf(sessionId) {
  return sessionId ? { session_id: String(sessionId) } : {};
}

function clip(text, maxChars) {
  if (typeof text !== "string" || !text.trim()) return "";
  const chars = Array.from(text);
  return chars.length <= maxChars ? text : chars.slice(0, maxChars).join("");
}

function guardAsync(name, fn, warn) {
  return async (...args) => {
    try {
      return await fn(...args);
    } catch (error) {
      warn(`${name}:bug`, `${name} failed: ${error?.message ?? error}`);
      return undefined;
    }
  };
}

function guardSync(name, fn, warn) {
  return (...args) => {
    try {
      return fn(...args);
    } catch (error) {
      warn(`${name}:bug`, `${name} failed: ${error?.message ?? error}`);
      return undefined;
    }
  };
}
