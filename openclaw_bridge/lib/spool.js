// Captures that could not be delivered wait here, on disk, until our gateway is back.
//
// One file per capture under `<OpenClaw state dir>/memory-tencentdb/spool/` (directory 0700,
// files 0600, written to a temporary name and renamed, so a crash never leaves half a file that
// looks whole). A replay claims a file by renaming it (two OpenClaw processes sharing a state
// dir never send one twice at once), deletes it once the gateway acknowledged it, and puts it
// back otherwise. The gateway drops messages it already holds (same message id), so a capture
// that timed out after all arrived is not stored twice.
//
// No network code here: `send(entry)` is given by the caller.

import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, readdirSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { canonical } from "./ownership.js";

const VERSION = 1;
const CLAIM = ".sending-";
let sequence = 0;

export class CaptureSpool {
  constructor(stateDir) {
    this.dir = stateDir ? join(stateDir, "memory-tencentdb", "spool") : null;
  }

  #ensureDir(dir) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    chmodSync(dir, 0o700);
  }

  /** Keep one undelivered request; returns the file name, or null if it could not be written. */
  put(route, body, { dataDir, reason, rejected = false } = {}) {
    if (!this.dir) return null;
    const dir = rejected ? join(this.dir, "rejected") : this.dir;
    this.#ensureDir(this.dir);
    this.#ensureDir(dir);
    // Sorted by name = oldest first, also for two captures within one millisecond.
    sequence += 1;
    const name = `${String(Date.now()).padStart(14, "0")}-${process.pid}-${String(sequence).padStart(6, "0")}-${randomBytes(3).toString("hex")}.json`;
    const entry = { v: VERSION, route, body, data_dir: dataDir ? canonical(dataDir) : "", reason: reason ?? "", spooled_at: new Date().toISOString() };
    const tmp = join(dir, `.${name}.tmp`);
    writeFileSync(tmp, JSON.stringify(entry), { mode: 0o600, flag: "wx" });
    renameSync(tmp, join(dir, name));
    return name;
  }

  /** Names of waiting captures, oldest first (claims of dead processes are released first). */
  pending() {
    if (!this.dir) return [];
    let names;
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    for (const name of names) {
      const at = name.indexOf(CLAIM);
      if (at < 0) continue;
      const pid = Number(name.slice(at + CLAIM.length));
      if (!alive(pid)) {
        try {
          renameSync(join(this.dir, name), join(this.dir, name.slice(0, at)));
        } catch {
          // someone else released it
        }
      }
    }
    try {
      names = readdirSync(this.dir);
    } catch {
      return [];
    }
    return names.filter((n) => n.endsWith(".json") && !n.startsWith(".")).sort();
  }

  count() {
    return this.pending().length;
  }

  /**
   * Send waiting captures for `dataDir` in order through `send(entry) -> {ok, status, reason}`
   * until one fails or `deadline` (epoch ms) passes. A capture the gateway refuses as bad input
   * (4xx other than 401/408/429) moves to `rejected/` instead of blocking the queue forever.
   * Returns { sent, rejected, left, stoppedBy }.
   */
  async replay(send, { dataDir, deadline = Infinity } = {}) {
    const out = { sent: 0, rejected: 0, left: 0, stoppedBy: "" };
    const names = this.pending();
    const want = dataDir ? canonical(dataDir) : "";
    for (let i = 0; i < names.length; i += 1) {
      if (Date.now() >= deadline) {
        out.left = names.length - i;
        out.stoppedBy = "deadline";
        break;
      }
      const name = names[i];
      const path = join(this.dir, name);
      const claimed = `${path}${CLAIM}${process.pid}`;
      try {
        renameSync(path, claimed);
      } catch {
        continue; // another process took it
      }
      let entry;
      try {
        entry = JSON.parse(readFileSync(claimed, "utf8"));
      } catch {
        this.#moveToRejected(claimed, name);
        out.rejected += 1;
        continue;
      }
      if (want && entry.data_dir && entry.data_dir !== want) {
        renameSync(claimed, path); // meant for another data directory's gateway
        continue;
      }
      let result;
      try {
        result = await send(entry);
      } catch (error) {
        result = { ok: false, reason: String(error?.message ?? error) };
      }
      if (result?.ok) {
        unlinkSync(claimed);
        out.sent += 1;
        continue;
      }
      const status = result?.status ?? 0;
      if (status >= 400 && status < 500 && ![401, 408, 429].includes(status)) {
        this.#moveToRejected(claimed, name);
        out.rejected += 1;
        continue;
      }
      renameSync(claimed, path);
      out.left = names.length - i;
      out.stoppedBy = result?.reason ?? "failed";
      break;
    }
    return out;
  }

  #moveToRejected(claimed, name) {
    const dir = join(this.dir, "rejected");
    try {
      this.#ensureDir(dir);
      renameSync(claimed, join(dir, name));
    } catch {
      // leave it claimed; the next run releases it
    }
  }
}

function alive(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error?.code === "EPERM";
  }
}
