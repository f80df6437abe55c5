// memory-tencentdb for OpenClaw: a thin bridge to the local memory gateway.
//
//   before_prompt_build -> POST /recall        (memories for this turn, persona for the system part)
//   agent_end           -> POST /capture       (this turn's messages, tool calls included)
//   session_end         -> POST /session/end
//   before_message_write   strips injected memory blocks from what gets persisted
//   tools               -> POST /search/memories, /search/conversations
//
// Context offload (config offload.enabled; see lib/offload*.js, lib/context_engine.js):
//   tool-result middleware -> POST /offload/tool-result   (large results become stubs)
//   context engine (slot)  -> POST /offload/assemble      (before every model call)
//   before_prompt_build    -> POST /offload/assemble      (the canvas once per turn, no slot)
//   memory_tencentdb_offload_read -> POST /offload/read
//
// All memory logic lives in the gateway. Nothing here may break or block an agent run: register()
// and every handler catch their own errors, and every call has a timeout and a circuit breaker.

import { CircuitBreaker } from "./lib/breaker.js";
import { GatewayClient } from "./lib/client.js";
import { baseUrlOf, resolveConfig } from "./lib/config.js";
import { createContextEngineFactory, EngineActivity, runtimeCompaction } from "./lib/context_engine.js";
import { createHooks, REPLAY_BUDGET_MS } from "./lib/hooks.js";
import { createHostModel, withHostModel } from "./lib/host_model.js";
import { GatewayLink } from "./lib/link.js";
import { createToolResultMiddleware } from "./lib/offload.js";
import { createTurnCanvas, FallbackReporter, slotIsOurs } from "./lib/offload_canvas.js";
import { markOffloadUsed, offloadWasUsed } from "./lib/offload_marker.js";
import { createOffloadReadTool } from "./lib/offload_read.js";
import { expectedDataDir, readGatewayKey, scopeResolver, stateDirOf } from "./lib/ownership.js";
import { CaptureSpool } from "./lib/spool.js";
import { createTools } from "./lib/tools.js";
import { TurnTracker } from "./lib/turns.js";
import { createWarner, log } from "./lib/warn.js";

export const PLUGIN_ID = "memory-tencentdb";
const VERSION = "0.1.0";

// OpenClaw calls register() several times per process (a full pass plus discovery passes, and
// again on config reloads). State that must outlive one registration lives here: one link (and
// so one breaker, one ownership verdict, one started gateway) per connection, the turn
// bookkeeping, and which config warnings were shown.
const links = new Map();
const turns = new TurnTracker();
const shownConfigWarnings = new Set();
const loggerRef = { current: undefined };
const warn = createWarner({ warn: (message) => loggerRef.current?.warn?.(message) });
const say = (level, message) => log(loggerRef.current, level, message);
// Offload state of this process: what the engine did per session, one fallback report per
// gateway, one way to reach the runtime's compaction. OpenClaw loads this module more than once
// per process (the engine came from the `full` registration, the hooks from a `discovery` one,
// each its own module instance), so what the engine and the hooks must both see lives on
// globalThis. The middleware is one function per module instance (OpenClaw keeps one
// registration per handler), serving the latest registration's settings.
const SHARED = Symbol.for("memory-tencentdb.offload");
const shared = (globalThis[SHARED] ??= { activity: new EngineActivity(), reporters: new Map() });
const activity = shared.activity;
const delegateCompaction = runtimeCompaction();
const middlewareRef = { current: undefined };
async function toolResultMiddleware(event, ctx) {
  try {
    return await middlewareRef.current?.(event, ctx);
  } catch {
    return undefined;
  }
}

function linkFor(config, stateDir) {
  const baseUrl = baseUrlOf(config);
  const dataDir = expectedDataDir(config);
  const key = JSON.stringify([baseUrl, config.apiKey, config.breaker, dataDir, stateDir, config.autoStart]);
  let link = links.get(key);
  if (!link) {
    const client = new GatewayClient({ baseUrl, breaker: new CircuitBreaker(config.breaker) });
    link = new GatewayLink({ config, client, dataDir, stateDir, readKey: readGatewayKey, say });
    links.set(key, link);
  }
  return link;
}

function setup(api) {
  // Metadata-only passes must not touch the runtime; nothing to register there.
  if (api.registrationMode === "cli-metadata" || api.registrationMode === "setup-only") return;
  loggerRef.current = api.logger;

  const { config, warnings } = resolveConfig(api.pluginConfig);
  for (const warning of warnings) {
    if (shownConfigWarnings.has(warning)) continue;
    shownConfigWarnings.add(warning);
    log(api.logger, "warn", warning);
  }
  const stateDir = stateDirOf(api);
  const link = linkFor(config, stateDir);
  const spool = new CaptureSpool(stateDir);
  const scopeOf = scopeResolver({ template: config.scope, stateDir });

  // Hook timeouts sit just above our own deadlines: the host never has to cut us off, and none
  // of these hooks is one that blocks the run when it times out. With autoStart, the first call
  // of a run may also wait for the gateway it started (autoStart.waitMs, plus one health check).
  const startWait = config.autoStart.enabled ? config.autoStart.waitMs + 1_000 : 0;
  const hooks = createHooks({ config, link, warn, say, turns, scopeOf, spool });
  // Issue 24: OpenClaw's own model distils memory (lib/host_model.js); handed over per turn.
  const host = withHostModel(createHostModel({ api, config, link, say }), { beforePrompt: hooks.before_prompt_build, agentEnd: hooks.agent_end });
  const offload = setupOffload(api, config, link, scopeOf);
  if (config.recall.enabled || config.capture.enabled || offload.canvas) {
    // Recall and the offload canvas run side by side; OpenClaw's hook timeout covers the slower.
    const budget = Math.max(config.recall.timeoutMs, offload.canvas ? offload.canvasBudgetMs : 0);
    api.on("before_prompt_build", promptBuild(host.beforePrompt, offload.canvas), { timeoutMs: budget + startWait + 500 });
  }
  if (config.capture.enabled) {
    api.on("agent_end", host.agentEnd, {
      timeoutMs: config.capture.timeoutMs + startWait + REPLAY_BUDGET_MS + 1_500,
    });
  }
  if (config.sessionEnd.enabled) {
    api.on("session_end", hooks.session_end, { timeoutMs: config.sessionEnd.timeoutMs + 500 });
  }
  api.on("before_message_write", hooks.before_message_write);

  if (config.tools.enabled) {
    for (const tool of createTools({ config, link, warn, scopeOf })) {
      api.registerTool(tool.factory, { name: tool.name });
    }
  }
  // Read-back is registered with offload on, and off too once this state directory ever
  // offloaded: sessions hold stubs naming it, and a model that calls it by that name must
  // find it (not a neighbour).
  if (config.offload.enabled) markOffloadUsed(stateDir);
  if (config.offload.enabled || offloadWasUsed(stateDir)) {
    const readTool = createOffloadReadTool({ config, link, warn, scopeOf });
    api.registerTool(readTool.factory, { name: readTool.name });
  }

  if (config.autoStart.enabled && typeof api.registerService === "function") {
    api.registerService(gatewayService(config, link, hooks));
  }
}

/**
 * The offload seams. The engine is registered whatever offload.enabled says, so a slot naming
 * it never dangles (disabled, it passes the messages through); the middleware and the per-turn
 * canvas only with offload.enabled (the read tool: see setup). Each registration failure is logged and
 * leaves the rest of the plugin working.
 */
function setupOffload(api, config, link, scopeOf) {
  const out = { canvas: undefined, canvasBudgetMs: 0 };
  if (typeof api.registerContextEngine === "function") {
    try {
      const factory = createContextEngineFactory({ pluginId: PLUGIN_ID, version: VERSION, config, link, warn, say, scopeOf, activity, delegateCompaction });
      api.registerContextEngine(PLUGIN_ID, factory);
    } catch (error) {
      say("warn", `context engine not registered: ${error?.message ?? error}`);
    }
  }
  if (!config.offload.enabled) return out;
  middlewareRef.current = createToolResultMiddleware({ config, link, warn, scopeOf, activity });
  if (typeof api.registerAgentToolResultMiddleware === "function") {
    try {
      api.registerAgentToolResultMiddleware(toolResultMiddleware, { runtimes: ["openclaw"] });
    } catch (error) {
      say("warn", `tool results are not offloaded: ${error?.message ?? error}`);
    }
  } else {
    say("warn", "tool results are not offloaded: this OpenClaw has no registerAgentToolResultMiddleware (2026.9.6 or later has)");
  }
  let fallback = shared.reporters.get(link.baseUrl);
  if (!fallback) {
    fallback = new FallbackReporter({ pluginId: PLUGIN_ID, link, say });
    shared.reporters.set(link.baseUrl, fallback);
  }
  out.canvas = createTurnCanvas({
    pluginId: PLUGIN_ID,
    config,
    link,
    warn,
    scopeOf,
    activity,
    slotOurs: () => slotIsOurs(api.config, PLUGIN_ID),
    fallback,
  });
  out.canvasBudgetMs = config.offload.canvasTimeoutMs + fallback.timeoutMs;
  return out;
}

/** One before_prompt_build for recall and the offload canvas: both at once, results merged. */
function promptBuild(recall, canvas) {
  if (!canvas) return recall;
  return async (event, ctx) => {
    const [memory, task] = await Promise.all([recall(event, ctx), canvas(event, ctx).catch(() => undefined)]);
    if (!task) return memory;
    if (!memory) return task;
    const out = { ...memory };
    for (const key of ["prependContext", "appendSystemContext"]) {
      const parts = [memory[key], task[key]].filter((p) => typeof p === "string" && p);
      if (parts.length) out[key] = parts.join("\n\n");
    }
    return out;
  };
}

// Inside a long-lived OpenClaw Gateway the service starts our gateway with OpenClaw (without
// making OpenClaw's start wait) and asks it to drain and stop at shutdown. One-shot CLI runs
// never start services: there the first hook call starts the gateway (see lib/link.js).
function gatewayService(config, link, hooks) {
  return {
    id: `${PLUGIN_ID}-gateway`,
    async start() {
      try {
        const how = await link.warmUp();
        if (how === "spawned" || how === "starting" || how === "existing") {
          // In the background: say when it is up, then send what earlier runs could not.
          link
            .waitUp(Date.now() + config.autoStart.readyTimeoutMs)
            .then(async (up) => {
              if (!up.ok) {
                say("warn", `the gateway is not answering yet (${up.reason}); memory pauses until it does`);
                return;
              }
              if (how !== "existing") say("info", `the gateway at ${link.baseUrl} is up`);
              await hooks.replay();
            })
            .catch(() => {});
        }
      } catch (error) {
        say("warn", `autoStart failed: ${error?.message ?? error}`);
      }
    },
    async stop() {
      try {
        await link.stopOwn();
      } catch (error) {
        say("warn", `stopping the gateway failed: ${error?.message ?? error}`);
      }
    },
  };
}

export default {
  id: PLUGIN_ID,
  name: "memory-tencentdb",
  description: "Long-term memory for OpenClaw agents from the local memory-tencentdb gateway.",
  register(api) {
    try {
      setup(api);
    } catch (error) {
      // A throwing register() fails `openclaw agent --local` outright; memory is not worth that.
      log(api?.logger, "error", `plugin disabled: ${error?.message ?? error}`);
    }
  },
};
