// Plugin config: defaults, gentle coercion and warnings. OpenClaw validates the user's config
// against the manifest schema and one violation makes the whole openclaw.json invalid, so the
// schema accepts anything and this module decides: a bad or unknown value is a warning and the
// default, never an error.

export const DEFAULTS = Object.freeze({
  host: "127.0.0.1",
  port: 8420,
  apiKey: "",
  // Where our gateway keeps its data (and its key, gateway.key): default as the gateway's own,
  // TDAI_DATA_DIR or ${MEMORY_TENCENTDB_ROOT:-~/.memory-tencentdb}/memory-tdai.
  dataDir: "",
  // Memory scope; "" = the agent id within this state directory (see lib/ownership.js).
  scope: "",
  // placement: where this turn's memories go. "prepend" (with the user's message; the system
  // part keeps only what changes with the persona or scenes, so the host's prompt cache holds)
  // or "appendSystem" (after the stable part, in the system part: the system part then changes
  // whenever the memories do). Default chosen by bench/injection_bench.py (bench/RESULTS.md).
  recall: { enabled: true, timeoutMs: 2_500, maxChars: 8_000, placement: "prepend" },
  capture: { enabled: true, timeoutMs: 5_000 },
  tools: { enabled: true, timeoutMs: 8_000 },
  sessionEnd: { enabled: true, timeoutMs: 1_500 },
  breaker: { failureThreshold: 3, cooldownMs: 30_000 },
  // Turns started by these triggers are neither recalled nor captured: they are not the user talking.
  skipTriggers: ["cron", "heartbeat", "memory", "overflow"],
  excludeAgents: [],
  // Short-term context offload (issue 11): large tool results become stubs, a task canvas rides
  // along with every model call. Off unless enabled (scripts/install-openclaw.sh --offload).
  offload: {
    enabled: false,
    // POST /offload/tool-result, inside the tool loop: the model waits for it.
    toolResultTimeoutMs: 3_000,
    // POST /offload/assemble, before every model call when the context-engine slot is ours.
    assembleTimeoutMs: 4_000,
    // The once-per-turn canvas through before_prompt_build (no slot, or the slot fell back).
    canvasTimeoutMs: 3_000,
    readTimeoutMs: 8_000,
    // Written by install-openclaw.sh --offload: the slot to restore with --no-offload.
    previousSlot: "",
  },
  // Issue 24: the gateway borrows OpenClaw's own model for memory (lib/host_model.js); model
  // "provider/model" overrides the agent's default model for memory work only.
  hostLlm: { enabled: true, model: "" },
  autoStart: {
    enabled: false,
    command: "memory-tencentdb",
    args: ["serve"],
    cwd: "",
    readyTimeoutMs: 20_000,
    // How long the first call of a turn waits for a gateway being started (models loaded). In
    // `agent --local` OpenClaw loads the plugin only just before the turn, so a cold start
    // (3-4 s on 2 busy cores, more under heavy load) falls inside that first call.
    waitMs: 10_000,
    // The started gateway exits after this long without a request (0 = never).
    idleExitSeconds: 900,
  },
});

/** The values of `recall.placement` (the names the original's bridge used). */
export const PLACEMENTS = Object.freeze(["prepend", "appendSystem"]);

/** Returns { config, warnings }: config is complete and typed, warnings are human sentences. */
export function resolveConfig(raw) {
  const warnings = [];
  const input = isObject(raw) ? raw : {};
  if (raw !== undefined && raw !== null && !isObject(raw)) {
    warnings.push("plugin config is not an object; using defaults");
  }
  const config = merge(DEFAULTS, input, "", warnings);
  if (!PLACEMENTS.includes(config.recall.placement)) {
    warnings.push(
      `config "recall.placement" should be one of ${PLACEMENTS.map((p) => JSON.stringify(p)).join(", ")};` +
        ` using ${JSON.stringify(DEFAULTS.recall.placement)}`,
    );
    config.recall.placement = DEFAULTS.recall.placement;
  }
  return { config, warnings };
}

export function baseUrlOf(config) {
  const host = config.host.includes(":") && !config.host.startsWith("[") ? `[${config.host}]` : config.host;
  return `http://${host}:${config.port}`;
}

function merge(defaults, input, prefix, warnings) {
  const out = {};
  for (const [key, fallback] of Object.entries(defaults)) {
    const path = prefix + key;
    const value = input[key];
    if (value === undefined || value === null) {
      out[key] = clone(fallback);
    } else if (isObject(fallback)) {
      if (isObject(value)) {
        out[key] = merge(fallback, value, `${path}.`, warnings);
      } else {
        warnings.push(`config "${path}" should be an object; using defaults`);
        out[key] = clone(fallback);
      }
    } else {
      out[key] = coerce(value, fallback, path, warnings);
    }
  }
  for (const key of Object.keys(input)) {
    if (!(key in defaults)) warnings.push(`unknown config key "${prefix}${key}" ignored`);
  }
  return out;
}

function coerce(value, fallback, path, warnings) {
  const bad = (expected) => {
    warnings.push(`config "${path}" should be ${expected}; using ${JSON.stringify(fallback)}`);
    return clone(fallback);
  };
  if (typeof fallback === "boolean") {
    if (typeof value === "boolean") return value;
    if (value === "true" || value === "false") return value === "true";
    return bad("true or false");
  }
  if (typeof fallback === "number") {
    const n = typeof value === "string" && value.trim() !== "" ? Number(value) : value;
    if (typeof n === "number" && Number.isFinite(n) && n >= 0) return n;
    return bad("a non-negative number");
  }
  if (typeof fallback === "string") {
    if (typeof value === "string") return value.trim();
    if (typeof value === "number") return String(value);
    return bad("a string");
  }
  if (Array.isArray(fallback)) {
    if (Array.isArray(value) && value.every((v) => typeof v === "string")) return [...value];
    if (typeof value === "string") return [value];
    return bad("a list of strings");
  }
  return clone(fallback);
}

function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function clone(value) {
  if (Array.isArray(value)) return [...value];
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clone(v)]));
  return value;
}

/** Agent ids to leave alone: exact ids or simple `*` globs. */
export function isExcludedAgent(agentId, patterns) {
  if (!agentId) return false;
  return patterns.some((pattern) => {
    if (!pattern.includes("*")) return pattern === agentId;
    const escaped = pattern.split("*").map((part) => part.replace(/[.+?^${}()|[\]\\]/g, "\\$&"));
    return new RegExp(`^${escaped.join(".*")}$`).test(agentId);
  });
}
