// Context offload, part 3: the task canvas once per turn through before_prompt_build, for when
// the context engine is not in use: the slot names another engine (or none), or it names ours
// and OpenClaw fell back to `legacy` for this turn. The latter is said once in OpenClaw's log and
// reported to the gateway's /health (POST /offload/host-status), and cleared there when the
// engine runs again.
//
// The call is POST /offload/assemble with the history before this turn and the new prompt: it
// runs the gateway's task-boundary decision and records results it has not seen; only its canvas
// message and its tool guide are used (a hook cannot change the history).

import { isExcludedAgent } from "./config.js";
import { guideOf, splitForGateway } from "./context_engine.js";
import { offloadSessionKey } from "./offload.js";
import { agentIdOf } from "./turns.js";

// The history is only read here, never cut: a budget no session reaches.
const READ_ONLY_BUDGET = 10_000_000;
const CANVAS_MARK = "<current_task_context";

/** Whether OpenClaw's config puts our engine in the context-engine slot. */
export function slotIsOurs(openclawConfig, pluginId) {
  return openclawConfig?.plugins?.slots?.contextEngine === pluginId;
}

/**
 * The fallback report: one log line per process and cause, and the gateway's /health field, set
 * while the engine is bypassed and cleared when it runs again.
 */
export class FallbackReporter {
  constructor({ pluginId, link, say, timeoutMs = 1_500 }) {
    this.pluginId = pluginId;
    this.link = link;
    this.say = say;
    this.timeoutMs = timeoutMs;
    this.said = new Set();
    // What /health was last told, per scope (the gateway keeps a report per scope the caller may
    // write, so each agent's scope is reported under its own name): a reason, or null.
    this.reported = new Map();
    this.pending = new Set();
  }

  async fellBack(reason, scope) {
    if (!this.said.has(reason)) {
      this.said.add(reason);
      this.say(
        "warn",
        `context engine "${this.pluginId}" is not in use: ${reason}. OpenClaw runs its legacy engine instead ` +
          "(see its [context-engine] line); offload goes on with the tool-result stubs and one canvas per turn.",
      );
    }
    await this.#report(reason, scope);
  }

  async running(scope) {
    if ((this.reported.get(scope ?? "") ?? null) !== null) {
      this.say("info", `context engine "${this.pluginId}" is in use again`);
      await this.#report(null, scope);
    }
  }

  async #report(reason, scope) {
    const key = scope ?? "";
    if ((this.reported.get(key) ?? null) === reason || this.pending.has(key)) return;
    this.pending.add(key);
    try {
      const body = { host: "openclaw", engine: this.pluginId, fallback: reason };
      if (scope) body.scope = scope;
      const result = await this.link.post("/offload/host-status", body, { timeoutMs: this.timeoutMs });
      // Retried next turn when it did not arrive (a 404 is an older gateway: not worth retrying).
      if (result.ok || result.status === 404) this.reported.set(key, reason);
    } finally {
      this.pending.delete(key);
    }
  }
}

export function createTurnCanvas({ pluginId, config, link, warn, scopeOf = (agentId) => agentId, activity, slotOurs, fallback }) {
  return async function canvasForTurn(event, ctx) {
    if (!config.offload.enabled) return undefined;
    const sessionKey = offloadSessionKey(ctx?.sessionKey, ctx?.sessionId);
    if (!sessionKey) return undefined;
    // Noted for every turn: the engine's next calls of this turn are its tool-loop calls.
    const engineUsed = activity.promptBuilt(sessionKey);
    if (ctx?.trigger && config.skipTriggers.includes(ctx.trigger)) return undefined;
    const agentId = agentIdOf(ctx, sessionKey);
    if (isExcludedAgent(agentId, config.excludeAgents)) return undefined;

    if (slotOurs()) {
      if (engineUsed) {
        await fallback.running(scopeOf(agentId));
        return undefined; // the engine adds the canvas before every model call
      }
      await fallback.fellBack("OpenClaw did not call it before this turn's prompt", scopeOf(agentId));
    }

    const prompt = typeof event?.prompt === "string" ? event.prompt : "";
    const { dialogue } = splitForGateway(event?.messages);
    const body = {
      session_key: sessionKey,
      scope: scopeOf(agentId),
      messages: dialogue,
      token_budget: READ_ONLY_BUDGET,
      format: "agent",
      current_turn_follows: true, // the prompt comes after the history (and the canvas before it)
      ...(prompt.trim() && { prompt }),
    };
    const result = await link.post("/offload/assemble", body, { timeoutMs: config.offload.canvasTimeoutMs });
    if (!result.ok) {
      warn(`offload:canvas:${result.reason}`, `task canvas skipped this turn: ${result.reason}`);
      return undefined;
    }
    const data = result.data && typeof result.data === "object" ? result.data : {};
    if (!Array.isArray(data.messages)) {
      warn("offload:canvas:malformed", "task canvas skipped this turn: the gateway's answer is malformed");
      return undefined;
    }
    const canvas = data.messages.map(textOfMessage).find((t) => t.trimStart().startsWith(CANVAS_MARK));
    const out = {};
    if (canvas) out.prependContext = canvas;
    out.appendSystemContext = guideOf(data); // for the whole turn, whose stubs come later
    return out;
  };
}

function textOfMessage(message) {
  if (!message || message.role !== "user") return "";
  if (typeof message.content === "string") return message.content;
  if (!Array.isArray(message.content)) return "";
  const block = message.content.find((b) => b?.type === "text" && typeof b.text === "string");
  return block ? block.text : "";
}
