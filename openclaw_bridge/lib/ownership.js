// Which gateway is ours, and whose memory a turn belongs to.
//
// A zero-config gateway keeps a random key in `<data dir>/gateway.key` (0600). The bridge reads
// the key of the data directory it expects, so a gateway of another user or another data
// directory that happens to answer on the port rejects us (401) and is treated as down. The data
// directory is resolved exactly as the gateway resolves its own default.
//
// Scope: the agent id within its OpenClaw state directory. Installs that use the default state
// directory (~/.openclaw) keep the plain agent id they always had; any other state directory gets
// `<agent>@<8 hex of its path's SHA-256>`, so two state directories never share memory unless the
// user configures one `scope` for both.
//
// This module reads files and the environment and never talks to the network (OpenClaw's install
// scanner flags the two together).

import { createHash } from "node:crypto";
import { readFileSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";

export const KEY_FILE = "gateway.key";
const DATA_SUBDIR = "memory-tdai";
const DEFAULT_ROOT = "~/.memory-tencentdb";
const STATE_DIR_NAMES = [".openclaw", ".clawdbot"]; // OpenClaw's default and its legacy name

/** The environment the bridge runs in (one place, so tests and the scanner see it). */
export function hostEnv() {
  return process.env;
}

function text(value) {
  return typeof value === "string" ? value.trim() : "";
}

function homeOf(env) {
  return text(env.HOME) || text(env.USERPROFILE) || homedir();
}

/** `~` and `~/x` with the environment's HOME, then made absolute. */
export function expandHome(path, env = hostEnv()) {
  if (path === "~") return homeOf(env);
  if (path.startsWith("~/") || path.startsWith("~\\")) return join(homeOf(env), path.slice(2));
  return resolve(path);
}

function isDir(path) {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function exists(path) {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * The data directory of our gateway: config `dataDir`, else TDAI_DATA_DIR (or
 * MEMORY_TENCENTDB_DATA_DIR), else `${MEMORY_TENCENTDB_ROOT:-~/.memory-tencentdb}/memory-tdai`
 * (or the original project's `~/memory-tdai` when only that exists, as the gateway does).
 */
export function expectedDataDir(config, env = hostEnv()) {
  const named = text(config?.dataDir) || text(env.TDAI_DATA_DIR) || text(env.MEMORY_TENCENTDB_DATA_DIR);
  if (named) return expandHome(named, env);
  const root = text(env.MEMORY_TENCENTDB_ROOT);
  const current = join(expandHome(root || DEFAULT_ROOT, env), DATA_SUBDIR);
  if (!root && !exists(current)) {
    const legacy = expandHome("~/memory-tdai", env);
    if (isDir(legacy)) return legacy;
  }
  return current;
}

/** A path with symlinks resolved as far as it exists (the gateway reports a resolved path). */
export function canonical(path) {
  const absolute = resolve(path);
  try {
    return realpathSync(absolute);
  } catch {
    const parent = dirname(absolute);
    return parent === absolute ? absolute : join(canonical(parent), basename(absolute));
  }
}

export function sameDir(a, b) {
  return Boolean(a) && Boolean(b) && canonical(a) === canonical(b);
}

/** The token in `<dataDir>/gateway.key`, or "" when there is none yet. */
export function readGatewayKey(dataDir) {
  try {
    return readFileSync(join(dataDir, KEY_FILE), "utf8").trim();
  } catch {
    return "";
  }
}

/** OpenClaw's state directory: what the host says, else OPENCLAW_STATE_DIR, else ~/.openclaw. */
export function stateDirOf(api, env = hostEnv()) {
  try {
    const dir = api?.runtime?.state?.resolveStateDir?.();
    if (typeof dir === "string" && dir) return resolve(dir);
  } catch {
    // metadata passes have no runtime; fall back below
  }
  const override = text(env.OPENCLAW_STATE_DIR);
  if (override) return expandHome(override, env);
  return join(text(env.OPENCLAW_HOME) || homeOf(env), ".openclaw");
}

/** True for ~/.openclaw (or the legacy ~/.clawdbot): the state dir existing users have. */
export function isDefaultStateDir(stateDir, env = hostEnv()) {
  const homes = [text(env.OPENCLAW_HOME), homeOf(env)].filter(Boolean);
  return homes.some((home) => STATE_DIR_NAMES.some((name) => sameDir(join(home, name), stateDir)));
}

/** `<agent>` for the default state dir, `<agent>@<8 hex>` for any other one. */
export function defaultScope(agentId, stateDir, env = hostEnv()) {
  if (!stateDir || isDefaultStateDir(stateDir, env)) return agentId;
  const digest = createHash("sha256").update(canonical(stateDir)).digest("hex").slice(0, 8);
  return `${agentId}@${digest}`;
}

/**
 * The scope function the hooks and tools use. A configured `scope` wins: `{agent}` in it is
 * replaced by the agent id ("{agent}" alone shares one agent's memory across state dirs, "team"
 * puts every agent of every install that says so in one scope).
 */
export function scopeResolver({ template = "", stateDir, env = hostEnv() }) {
  const cache = new Map();
  return (agentId) => {
    if (template) return template.includes("{agent}") ? template.split("{agent}").join(agentId) : template;
    let scope = cache.get(agentId);
    if (scope === undefined) {
      scope = defaultScope(agentId, stateDir, env);
      cache.set(agentId, scope);
    }
    return scope;
  };
}
