// Rate-limited warnings: a gateway that is down fails every turn, and the host log should say so
// once a minute, not once per call.

const PREFIX = "[memory-tencentdb]";

export function createWarner(logger, { intervalMs = 60_000, now = Date.now } = {}) {
  const seen = new Map(); // key -> { at, suppressed }
  return function warn(key, message) {
    const t = now();
    const entry = seen.get(key);
    if (entry && t - entry.at < intervalMs) {
      entry.suppressed += 1;
      return false;
    }
    const suffix = entry?.suppressed ? ` (${entry.suppressed} similar suppressed)` : "";
    seen.set(key, { at: t, suppressed: 0 });
    log(logger, "warn", `${message}${suffix}`);
    return true;
  };
}

// The host's logger is outside our control; logging must never be what breaks a turn.
export function log(logger, level, message) {
  try {
    const fn = logger?.[level] ?? logger?.info;
    if (typeof fn === "function") fn.call(logger, `${PREFIX} ${message}`);
  } catch {
    // ignore
  }
}
