// Hand OpenClaw's own model to the gateway, so it distils this agent's memory (issue 24).
//
// Why: an OpenClaw user already configured a model; memory should not need a second one. The
// plugin runtime says which one (api.runtime.modelConfig.resolveDefaultModelForAgent, or the
// plugin config's hostLlm.model as "provider/model") and how to authenticate to it
// (api.runtime.modelAuth.resolveApiKeyForProvider). When that provider is an OpenAI-compatible
// endpoint (api "openai-completions" with a baseUrl) the gateway gets {base_url, api_key, model}
// by POST /llm/host-model, in memory only; Anthropic's Messages API (api "anthropic-messages",
// or the built-in "anthropic" provider, at api.anthropic.com unless a baseUrl says otherwise)
// goes with "api": "anthropic"; otherwise (OpenAI Responses, Google, Bedrock, OAuth-only
// providers) it is told the model is not usable and why, and keeps the rules.
//
// Never in the host's way: resolution and the POST are bounded (HAND_OVER_BUDGET_MS), every
// error is swallowed into one log line, and a turn's capture waits for a hand-over in flight at
// most WAIT_BEFORE_CAPTURE_MS, 1 s (so the turn is extracted with the model, not by the rules).
// hostLlm.enabled: false turns it off (a POST with "unusable": the gateway drops the model).

const HAND_OVER_BUDGET_MS = 5_000;
const WAIT_BEFORE_CAPTURE_MS = 1_000; // inside the agent_end hook's 1.5 s margin
const COMPATIBLE_APIS = new Set(["openai-completions"]);
const ANTHROPIC_API = "anthropic-messages";
const ANTHROPIC_BASE_URL = "https://api.anthropic.com";

/** The body of POST /llm/host-model for this OpenClaw's model. */
export async function resolveHostModel(api, config) {
  const cfg = api?.config ?? {};
  const runtime = api?.runtime ?? {};
  let provider;
  let model;
  const override = (config.hostLlm?.model ?? "").trim();
  if (override.includes("/")) {
    [provider, model] = [override.slice(0, override.indexOf("/")), override.slice(override.indexOf("/") + 1)];
  } else {
    const ref = runtime.modelConfig?.resolveDefaultModelForAgent?.({ cfg });
    provider = ref?.provider;
    model = override || ref?.model;
  }
  if (!provider || !model) return { source: "openclaw", unusable: "no default model configured in OpenClaw" };
  const entry = cfg?.models?.providers?.[provider] ?? {};
  const modelEntry = (entry.models ?? []).find((m) => m?.id === model) ?? {};
  const kind = modelEntry.api ?? entry.api ?? (provider === "anthropic" ? ANTHROPIC_API : "");
  const anthropic = kind === ANTHROPIC_API;
  let baseUrl = typeof entry.baseUrl === "string" ? entry.baseUrl.trim().replace(/\/+$/, "") : "";
  if (anthropic && !baseUrl && provider === "anthropic") baseUrl = ANTHROPIC_BASE_URL;
  if (!COMPATIBLE_APIS.has(kind) && !anthropic) {
    return { source: "openclaw", unusable: `provider ${provider} speaks ${kind || "its own API"}, not OpenAI chat completions or Anthropic messages` };
  }
  if (!/^https?:\/\//.test(baseUrl)) return { source: "openclaw", unusable: `provider ${provider} has no baseUrl` };
  let apiKey = "";
  try {
    const auth = await runtime.modelAuth?.resolveApiKeyForProvider?.({ provider, cfg });
    if (auth?.mode === "oauth") return { source: "openclaw", unusable: `provider ${provider} authenticates by OAuth` };
    // Anthropic's setup tokens are OAuth-like (Bearer plus Claude Code's headers), not an x-api-key.
    if (anthropic && auth?.mode === "token") return { source: "openclaw", unusable: `provider ${provider} authenticates by a setup token` };
    apiKey = typeof auth?.apiKey === "string" ? auth.apiKey : "";
  } catch {
    apiKey = typeof entry.apiKey === "string" ? entry.apiKey : "";
  }
  const body = { source: "openclaw", base_url: baseUrl, api_key: apiKey, model };
  if (anthropic) body.api = "anthropic";
  if (Number.isSafeInteger(modelEntry.contextWindow) && modelEntry.contextWindow > 0) body.max_context = modelEntry.contextWindow;
  return body;
}

/**
 * One hand-over per link and model (OpenClaw registers the plugin several times per process).
 * `kick()` starts it (fire and forget); `settled(ms)` waits for one in flight, bounded.
 */
export function createHostModel({ api, config, link, say }) {
  const state = (link.hostModel ??= { sentKey: "", inFlight: undefined });
  async function handOver() {
    // An OpenClaw without the model runtime (older than 2026.9, test stubs): nothing to hand over.
    if (typeof api?.runtime?.modelConfig?.resolveDefaultModelForAgent !== "function") return;
    const body = config.hostLlm?.enabled === false
      ? { source: "openclaw", unusable: "turned off (hostLlm.enabled: false)" }
      : await resolveHostModel(api, config);
    // Sent every turn (one small local POST, not awaited by the turn): a gateway restarted since
    // (idle exit, crash) holds nothing, and the same body again is a no-op there.
    const key = JSON.stringify(body);
    const result = await link.post("/llm/host-model", body, { timeoutMs: HAND_OVER_BUDGET_MS, startWaitMs: config.autoStart.enabled ? config.autoStart.waitMs : 0 });
    if (!result.ok) return; // the gateway is away: the next turn tries again
    if (key === state.sentKey) return; // said once per process and model
    state.sentKey = key;
    if (body.unusable) say("info", `OpenClaw's model not used for memory: ${body.unusable}`);
    else say("debug", `OpenClaw's model ${body.model} handed to the gateway for memory (${result.data?.used ? "used" : result.data?.reason ?? "not used"})`);
  }
  return {
    kick() {
      if (state.inFlight) return state.inFlight;
      state.inFlight = handOver()
        .catch((error) => say("info", `OpenClaw's model could not be handed over: ${error?.message ?? error}`))
        .finally(() => {
          state.inFlight = undefined;
        });
      return state.inFlight;
    },
    sent() {
      return state.sentKey !== "" || state.inFlight !== undefined;
    },
    async settled(ms = WAIT_BEFORE_CAPTURE_MS) {
      const pending = state.inFlight;
      if (!pending) return;
      await Promise.race([pending, new Promise((resolve) => setTimeout(resolve, ms).unref?.())]);
    },
  };
}

/** Hook wrappers: before a turn's recall, start the hand-over; before its capture, let it land
 * (and start it there when no prompt hook ran, recall off). */
export function withHostModel(hostModel, { beforePrompt, agentEnd }) {
  return {
    beforePrompt: async (event, ctx) => {
      try {
        hostModel.kick();
      } catch {
        // never in the way
      }
      return beforePrompt(event, ctx);
    },
    agentEnd: async (event, ctx) => {
      try {
        if (!hostModel.sent()) hostModel.kick();
        await hostModel.settled();
      } catch {
        // never in the way
      }
      return agentEnd(event, ctx);
    },
  };
}
