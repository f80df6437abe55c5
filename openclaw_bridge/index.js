// memory-tencentdb for OpenClaw: a thin bridge to the local memory gateway.
//
//   before_prompt_build -> POST /recall        (memories for this turn, persona for the system part)
//   agent_end           -> POST /capture       (this turn's messages, tool calls included)
//   session_end         -> POST /session/end
//   before_message_write   strips injected memory blocks from what gets persisted
//   tools               -> POST /search/memories, /search/conversations
//
// All memory logic lives in the gateway. Nothing here may break or block an agent run: register()
// and every handler catch their own errors, and every call has a timeout and a circuit breaker.

import { CircuitBreaker } from "./lib/breaker.js";
import { GatewayClient } from "./lib/client.js";
import { baseUrlOf, resolveConfig } from "./lib/config.js";
import { createHooks } from "./lib/hooks.js";
import { createTools } from "./lib/tools.js";
import { TurnTracker } from "./lib/turns.js";
import { createWarner, log } from "./lib/warn.js";

export const PLUGIN_ID = "memory-tencentdb";

// OpenClaw calls register() several times per process (a full pass plus discovery passes, and
// again on config reloads). State that must outlive one registration lives here: one client (and
// so one breaker) per connection, the turn bookkeeping, and which config warnings were shown.
const clients = new Map();
const turns = new TurnTracker();
const shownConfigWarnings = new Set();
const loggerRef = { current: undefined };
const warn = createWarner({ warn: (message) => loggerRef.current?.warn?.(message) });

function clientFor(config) {
  const baseUrl = baseUrlOf(config);
  const key = JSON.stringify([baseUrl, config.apiKey, config.breaker]);
  let client = clients.get(key);
  if (!client) {
    const breaker = new CircuitBreaker(config.breaker);
    client = new GatewayClient({ baseUrl, apiKey: config.apiKey, breaker });
    clients.set(key, client);
  }
  return client;
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
  const client = clientFor(config);

  // Hook timeouts sit just above our own call timeouts: the host never has to cut us off, and
  // none of these hooks is one that blocks the run when it times out.
  const hooks = createHooks({ config, client, warn, turns });
  if (config.recall.enabled || config.capture.enabled) {
    api.on("before_prompt_build", hooks.before_prompt_build, { timeoutMs: config.recall.timeoutMs + 500 });
  }
  if (config.capture.enabled) {
    api.on("agent_end", hooks.agent_end, { timeoutMs: config.capture.timeoutMs + 500 });
  }
  if (config.sessionEnd.enabled) {
    api.on("session_end", hooks.session_end, { timeoutMs: config.sessionEnd.timeoutMs + 500 });
  }
  api.on("before_message_write", hooks.before_message_write);

  if (config.tools.enabled) {
    for (const tool of createTools({ config, client, warn })) {
      api.registerTool(tool.factory, { name: tool.name });
    }
  }

  if (config.autoStart.enabled && typeof api.registerService === "function") {
    api.registerService(gatewayService(config, client, api.logger));
  }
}

// Services run only inside a long-lived OpenClaw Gateway, which is where starting a memory
// gateway makes sense; one-shot CLI runs connect to whatever is already running.
function gatewayService(config, client, logger) {
  let supervisor = null;
  return {
    id: `${PLUGIN_ID}-gateway`,
    async start(ctx) {
      try {
        const { GatewaySupervisor } = await import("./lib/supervisor.js");
        supervisor = new GatewaySupervisor({ config, client, logger: ctx?.logger ?? logger, stateDir: ctx?.stateDir });
        await supervisor.ensureRunning();
      } catch (error) {
        log(logger, "warn", `autoStart failed: ${error?.message ?? error}`);
      }
    },
    async stop() {
      try {
        await supervisor?.stop();
      } catch (error) {
        log(logger, "warn", `stopping the gateway failed: ${error?.message ?? error}`);
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
