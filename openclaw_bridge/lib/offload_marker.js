// Whether this OpenClaw state directory ever ran with offload on: from then on some session
// may hold stubs naming memory_tencentdb_offload_read, so the read tool stays registered with
// offload off too (a model calling it by the stub's name must find it). A state directory that
// never offloaded gets exactly the tools it always had.

import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

function markerOf(stateDir) {
  return stateDir ? join(stateDir, "memory-tencentdb", "offload-used") : null;
}

/** Note that offload is on here (best effort: a read-only state dir only loses the note). */
export function markOffloadUsed(stateDir) {
  const path = markerOf(stateDir);
  if (!path || existsSync(path)) return;
  try {
    mkdirSync(join(stateDir, "memory-tencentdb"), { recursive: true, mode: 0o700 });
    writeFileSync(path, "", { mode: 0o600 });
  } catch {
    // nothing to do: the read tool is still registered while offload is on
  }
}

export function offloadWasUsed(stateDir) {
  const path = markerOf(stateDir);
  try {
    return Boolean(path) && existsSync(path);
  } catch {
    return false;
  }
}
