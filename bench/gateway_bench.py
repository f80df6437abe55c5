"""Gateway benchmark: /capture, /recall, idle RSS and cold start, over HTTP, on a real process.

Every figure is taken against ``memory-tencentdb serve`` started as a child process on a free
loopback port with its own data dir, exactly as a host would use it (keep-alive HTTP/1.1 JSON
requests from a thin ``http.client`` client, so the client adds as little as possible):

1. ``/capture`` (one turn = 1 user + 1 assistant message, zh/en mixed) latency p50/p95/p99
   sequentially and with 4 concurrent clients (plus captures/s), on an empty store and on a
   store already holding 100k L0 messages (and 100k L1). After each run the gateway is
   SIGKILLed and every capture that got a 200 is looked up in the JSONL files and in
   ``memory.db``: the lost count must be 0.
2. ``/recall`` p50/p95/p99 for the keyword and hybrid strategies at 10k and 100k L1 memories,
   and hybrid at 100k with the L1 vector index in numpy (default) vs sqlite-vec ``vec0``.
3. Idle RSS (``VmRSS`` of the gateway) with the models loaded: empty store, and 100k L1 + 100k L0.
4. Cold start: spawn -> first 200 from ``/health``, and -> ``/health`` ``ready: true`` (models
   loaded), median of 3 on an empty store; also observed on every 100k start.

The seeded data (see ``_synthetic.py``) is built once and cached under ``bench/out/cache``; the
100k vectors are synthetic mixtures of ~2k real embeddings, so only latency is meaningful there.

Run: ``.venv/bin/python bench/gateway_bench.py`` (``--quick`` for a smoke run). Writes
``bench/results/gateway.json`` and prints a summary.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import http.client
import json
import os
import platform
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT))

import _synthetic as syn  # noqa: E402

RESULTS = BENCH / "results"
OUT = BENCH / "out"
LOGS = OUT / "logs"
# The gateways run with auth on, as the product does; one fixed key so every client can send it.
BENCH_KEY = "bench-gateway-key"
SCOPE = syn.SCOPE
TAG = re.compile(r"\[bench-tag ([0-9a-z.-]+)\]")


def log(msg: str) -> None:
    print(msg, flush=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stats_ms(samples: list[float]) -> dict:
    """Latency summary in milliseconds from samples in seconds."""
    if not samples:
        return {"n": 0}
    a = np.asarray(samples) * 1000.0
    return {
        "n": len(samples),
        "p50": round(float(np.percentile(a, 50)), 2),
        "p95": round(float(np.percentile(a, 95)), 2),
        "p99": round(float(np.percentile(a, 99)), 2),
        "mean": round(float(a.mean()), 2),
        "max": round(float(a.max()), 2),
    }


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


# ------------------------------------------------------------------------------ HTTP client


class Client:
    """One keep-alive connection; ``post`` returns (status, json-or-None, seconds)."""

    def __init__(self, port: int, timeout: float = 60.0) -> None:
        self.port = port
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def _connect(self) -> http.client.HTTPConnection:
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        return self.conn

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict | None]:
        data = json.dumps(body, ensure_ascii=False).encode() if body is not None else None
        headers = {"Authorization": f"Bearer {BENCH_KEY}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in (1, 2):
            conn = self._connect()
            try:
                conn.request(method, path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = resp.read()
                try:
                    parsed = json.loads(raw) if raw else None
                except ValueError:
                    parsed = None
                return resp.status, parsed
            except (http.client.HTTPException, ConnectionError, OSError):
                self.close()
                # Retry only a GET on a stale keep-alive; a POST is never sent twice.
                if attempt == 2 or method != "GET":
                    raise
        raise AssertionError("unreachable")

    def post(self, path: str, body: dict) -> tuple[int, dict | None, float]:
        t0 = time.perf_counter()
        status, parsed = self.request("POST", path, body)
        return status, parsed, time.perf_counter() - t0

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None


# ------------------------------------------------------------------------------ gateway


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (its finished threads included), from /proc."""
    parts = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


class Gateway:
    """``memory-tencentdb serve`` as a child process, timed from spawn."""

    def __init__(self, data_dir: Path, env: dict[str, str] | None = None, label: str = "gw"):
        self.data_dir = Path(data_dir).resolve()
        self.extra = dict(env or {})
        self.label = label
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.first_200_s: float | None = None
        self.ready_s: float | None = None
        # CPU seconds (user + sys) the gateway had used at those moments: unlike wall time,
        # barely affected by other load on the machine.
        self.first_200_cpu_s: float | None = None
        self.ready_cpu_s: float | None = None
        self.health: dict = {}

    def start(self, timeout: float = 180.0) -> Gateway:
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("TDAI_", "MEMORY_TENCENTDB_"))
        }
        env.update(
            {
                "TDAI_DATA_DIR": str(self.data_dir),
                "TDAI_GATEWAY_HOST": "127.0.0.1",
                "TDAI_GATEWAY_PORT": str(self.port),
                "TDAI_GATEWAY_API_KEY": BENCH_KEY,
                "PYTHONUNBUFFERED": "1",
                **self.extra,
            }
        )
        LOGS.mkdir(parents=True, exist_ok=True)
        logf = (LOGS / f"{self.label}.log").open("wb")
        # cwd = the data dir's parent, so no tdai-gateway.yaml of the repository is picked up.
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memory_tencentdb", "serve"],
            env=env,
            cwd=str(self.data_dir.parent),
            stdout=logf,
            stderr=subprocess.STDOUT,
        )
        logf.close()
        _LIVE.add(self)
        try:
            return self._wait_ready(t0, timeout)
        except BaseException:
            self.kill()  # never leave a half-started gateway running
            raise

    def _wait_ready(self, t0: float, timeout: float) -> Gateway:
        assert self.proc is not None
        deadline = t0 + timeout
        client = Client(self.port, timeout=5)
        try:
            while time.perf_counter() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.label}: gateway exited with {self.proc.returncode}")
                try:
                    status, body = client.request("GET", "/health")
                except OSError:
                    client.close()
                    time.sleep(0.02)
                    continue
                now = time.perf_counter()
                if status == 200:
                    if self.first_200_s is None:
                        self.first_200_s = now - t0
                        self.first_200_cpu_s = self.cpu_seconds()
                    if body and body.get("ready"):
                        self.ready_s = now - t0
                        self.ready_cpu_s = self.cpu_seconds()
                        self.health = body
                        return self
                time.sleep(0.02)
        finally:
            client.close()
        raise TimeoutError(f"{self.label}: not ready after {timeout}s")

    def get_health(self) -> dict:
        c = Client(self.port)
        try:
            return c.request("GET", "/health")[1] or {}
        finally:
            c.close()

    def rss(self) -> dict:
        """VmRSS / VmHWM of the gateway in MiB (and of any child processes, summed)."""
        assert self.proc is not None
        pids = [self.proc.pid] + _children(self.proc.pid)
        total = 0
        main = hwm = 0
        own: dict[str, int] = {}
        for pid in pids:
            fields = _status(pid)
            rss = fields.get("VmRSS", 0)
            total += rss
            if pid == self.proc.pid:
                main, hwm, own = rss, fields.get("VmHWM", 0), fields
        return {
            "rss_mib": round(main / 1024, 1),
            "hwm_mib": round(hwm / 1024, 1),
            "anon_mib": round(own.get("RssAnon", 0) / 1024, 1),
            "file_mib": round(own.get("RssFile", 0) / 1024, 1),
            "threads": own.get("Threads", 0),
            "tree_rss_mib": round(total / 1024, 1),
            "processes": len(pids),
        }

    def cpu_seconds(self) -> float:
        assert self.proc is not None
        return process_cpu_s(self.proc.pid)

    def wait_quiet(self, timeout: float = 240.0, below: float = 0.05) -> float:
        """Wait until the gateway uses < ``below`` CPU-seconds per second for 2 s in a row
        (start-up scans and index builds done); returns the seconds waited (capped)."""
        t0 = time.perf_counter()
        quiet = 0
        last = self.cpu_seconds()
        while time.perf_counter() - t0 < timeout and quiet < 2:
            time.sleep(1.0)
            now = self.cpu_seconds()
            quiet = quiet + 1 if now - last < below else 0
            last = now
        return round(time.perf_counter() - t0, 1)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        _LIVE.discard(self)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        _LIVE.discard(self)


_LIVE: set[Gateway] = set()


@atexit.register
def _kill_leftovers() -> None:
    """A crash or Ctrl-C of the benchmark must not leave gateways running."""
    for gw in list(_LIVE):
        with contextlib.suppress(Exception):
            gw.kill()


def _status(pid: int) -> dict[str, int]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:", "RssAnon:", "RssFile:", "Threads:")):
                key, value = line.split(":", 1)
                out[key] = int(value.split()[0])  # kB (Threads: a count)
    except OSError:
        pass
    return out


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            for c in (task / "children").read_text().split():
                kids.append(int(c))
                kids.extend(_children(int(c)))
    return kids


# ------------------------------------------------------------------------------ capture


def capture_body(rng: random.Random, run: str, client: int, tag: str) -> dict:
    user, answer = syn.gen_turn(rng)
    return {
        "session_key": f"bench-cap-{run}-{client}",
        "scope": SCOPE,
        "user_content": f"{user} [bench-tag {tag}]",
        "assistant_content": f"{answer} [bench-tag {tag}]",
    }


def bench_capture(gw: Gateway, n_seq: int, n_per_client: int, clients: int = 4) -> dict:
    """Sequential then concurrent captures; returns the figures and the acknowledged tags."""
    run = f"{random.getrandbits(32):08x}"
    rng = random.Random(run)
    acked: list[str] = []
    failures: list[str] = []

    def one(c: Client, client_no: int, tag: str) -> float | None:
        try:
            status, body, dt = c.post("/capture", capture_body(rng, run, client_no, tag))
        except Exception as e:  # noqa: BLE001 - a failed request is a figure, not a crash
            failures.append(f"{tag}: {type(e).__name__}: {e}")
            return None
        if status == 200 and body and body.get("l0_recorded") == 2:
            acked.append(tag)
            return dt
        failures.append(f"{tag}: HTTP {status} {str(body)[:200]}")
        return None

    c = Client(gw.port)
    for i in range(20):  # warm-up (connection, jieba, first writes); checked for loss too
        one(c, 0, f"{run}-w-{i}")
    cpu0 = gw.cpu_seconds()
    seq: list[float] = []
    t0 = time.perf_counter()
    for i in range(n_seq):
        dt = one(c, 0, f"{run}-s-{i}")
        if dt is not None:
            seq.append(dt)
    seq_wall = time.perf_counter() - t0
    c.close()

    per_client: list[list[float]] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)

    def worker(k: int) -> None:
        cl = Client(gw.port)
        # one request to open the connection before the clock starts
        cl.request("GET", "/health")
        barrier.wait()
        for i in range(n_per_client):
            dt = one(cl, k + 1, f"{run}-c{k}-{i}")
            if dt is not None:
                per_client[k].append(dt)
        cl.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    conc_wall = time.perf_counter() - t0
    cpu1 = gw.cpu_seconds()
    conc = [x for lst in per_client for x in lst]
    health = gw.get_health()
    return {
        "run": run,
        "sequential": {**stats_ms(seq), "captures_per_s": round(len(seq) / seq_wall, 1)},
        "concurrent": {
            "clients": clients,
            **stats_ms(conc),
            "captures_per_s": round(len(conc) / conc_wall, 1),
        },
        "failed_requests": len(failures),
        "failures_sample": failures[:5],
        "acknowledged": len(acked),
        "gateway_cpu_s": round(cpu1 - cpu0, 2),
        "embedding_pending_after": (health.get("embedding") or {}).get("pending"),
        "_acked": acked,
    }


def verify_captures(data_dir: Path, run: str, acked: list[str]) -> dict:
    """Every acknowledged tag must have its user and assistant line in the files and the DB."""
    prefix = f"bench-cap-{run}-"
    in_files: dict[str, set[str]] = {"user": set(), "assistant": set()}
    for path in sorted((data_dir / "conversations").glob("*.jsonl")):
        with path.open("r", encoding="utf-8") as fh:
            for line in fh:
                if prefix not in line:
                    continue
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                m = TAG.search(str(obj.get("content", "")))
                if m and str(obj.get("sessionKey", "")).startswith(prefix):
                    in_files.setdefault(obj.get("role", ""), set()).add(m.group(1))
    from memory_tencentdb.store.connection import choose_binding

    conn = choose_binding().module.connect(str(data_dir / "memory.db"))
    try:
        rows = conn.execute(
            "SELECT role, content FROM l0_messages WHERE session_key LIKE ?", (prefix + "%",)
        ).fetchall()
        fts_rows = conn.execute(
            "SELECT count(*) FROM l0_fts WHERE rowid IN"
            " (SELECT rowid FROM l0_messages WHERE session_key LIKE ?)",
            (prefix + "%",),
        ).fetchone()[0]
    finally:
        conn.close()
    in_db: dict[str, set[str]] = {"user": set(), "assistant": set()}
    for role, content in rows:
        m = TAG.search(content)
        if m:
            in_db.setdefault(role, set()).add(m.group(1))

    def missing(where: dict[str, set[str]]) -> list[str]:
        return [t for t in acked if t not in where["user"] or t not in where["assistant"]]

    lost_files, lost_db = missing(in_files), missing(in_db)
    return {
        "acknowledged": len(acked),
        "db_rows": len(rows),
        "db_fts_rows": fts_rows,
        "lost_in_files": len(lost_files),
        "lost_in_db": len(lost_db),
        "lost": len(set(lost_files) | set(lost_db)),
        "lost_sample": sorted(set(lost_files) | set(lost_db))[:5],
        "checked_after": "SIGKILL of the gateway",
    }


def capture_suite(data_dir: Path, label: str, n_seq: int, n_per_client: int) -> dict:
    gw = Gateway(data_dir, label=label).start()
    gw.wait_quiet()
    return capture_on(gw, label, n_seq, n_per_client)


def capture_on(gw: Gateway, label: str, n_seq: int, n_per_client: int) -> dict:
    """Capture figures on a running gateway, then SIGKILL it and look for lost captures."""
    try:
        counts = gw.get_health().get("counts", {})
        log(f"  {label}: store holds {counts}")
        res = bench_capture(gw, n_seq, n_per_client)
        # Resident memory right after the capture run (the embedding backlog it left is
        # still running: RSS under write load, not idle).
        res["rss_after_capture"] = gw.rss()
    finally:
        gw.kill()  # a crash: what was acknowledged must be on disk
    acked = res.pop("_acked")
    res["loss_check"] = verify_captures(gw.data_dir, res["run"], acked)
    res["store_counts_before"] = counts
    s, c, lc = res["sequential"], res["concurrent"], res["loss_check"]
    log(
        f"  {label}: seq p50 {s['p50']} p95 {s['p95']} p99 {s['p99']} ms | 4 clients p50"
        f" {c['p50']} p95 {c['p95']} ms, {c['captures_per_s']}/s | lost {lc['lost']} of"
        f" {lc['acknowledged']} | failed {res['failed_requests']}"
    )
    return res


# ------------------------------------------------------------------------------ direct writes

DIRECT_TEXTS = (
    "用户偏好在周末早上去爬山，然后喝一杯手冲咖啡",
    "The user prefers dark roast coffee and dislikes oat milk",
    "用户的女儿在杭州读大学，专业是建筑设计",
    "The user is allergic to shellfish and avoids sushi bars",
    "用户每周三晚上和朋友打羽毛球",
    "The user keeps a vegetable garden with tomatoes and basil",
)


EMBED_WAIT_S = 120


def fsync_latency(data_dir: Path, n: int = 50) -> dict:
    """What one durable append costs on this disk right now (the floor of a direct write)."""
    path = data_dir / "fsync-probe.tmp"
    samples = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, b"x" * 200 + b"\n")
            os.fdatasync(fd)
            samples.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return stats_ms(samples)


def memory_body(rng: random.Random, run: str, client: int, tag: str) -> dict:
    text = rng.choice(DIRECT_TEXTS)
    return {
        "content": f"{text} (#{rng.randrange(10**6)}) [bench-tag {tag}]",
        "type": "episodic",
        "scope": SCOPE,
        "session_key": f"bench-mem-{run}-{client}",
    }


def bench_corrections(c: Client, rng: random.Random, ids: list[str], failures: list[str]) -> dict:
    """``PATCH /memories/{id}`` with a new text, one after the other, on memories just written
    (their embedding still running behind, as in real use)."""
    samples: list[float] = []
    t0 = time.perf_counter()
    for mid in ids:
        body = {"scope": SCOPE, "content": f"{rng.choice(DIRECT_TEXTS)} (corrected {mid})"}
        t1 = time.perf_counter()
        try:
            status, parsed = c.request("PATCH", f"/memories/{mid}", body)
        except Exception as e:  # noqa: BLE001 - a failed request is a figure, not a crash
            failures.append(f"patch {mid}: {type(e).__name__}: {e}")
            continue
        if status == 200:
            samples.append(time.perf_counter() - t1)
        else:
            failures.append(f"patch {mid}: HTTP {status} {str(parsed)[:200]}")
    wall = time.perf_counter() - t0
    return {**stats_ms(samples), "writes_per_s": round(len(samples) / wall, 1) if wall else None}


def bench_direct_writes(gw: Gateway, n_seq: int, n_per_client: int, clients: int = 4) -> dict:
    """``POST /memories``: sequential then 4 clients; then how long the background embedding
    needs to catch up; then SIGKILL and every acknowledged id looked up in ``records/``."""
    run = f"{random.getrandbits(32):08x}"
    rng = random.Random(run)
    acked: list[str] = []
    failures: list[str] = []
    fsync_ms = fsync_latency(gw.data_dir)

    def one(c: Client, client_no: int, tag: str) -> float | None:
        try:
            status, body, dt = c.post("/memories", memory_body(rng, run, client_no, tag))
        except Exception as e:  # noqa: BLE001 - a failed request is a figure, not a crash
            failures.append(f"{tag}: {type(e).__name__}: {e}")
            return None
        if status == 201 and body and body.get("id"):
            acked.append(body["id"])
            return dt
        failures.append(f"{tag}: HTTP {status} {str(body)[:200]}")
        return None

    c = Client(gw.port)
    for i in range(10):
        one(c, 0, f"{run}-w-{i}")
    seq: list[float] = []
    t0 = time.perf_counter()
    for i in range(n_seq):
        dt = one(c, 0, f"{run}-s-{i}")
        if dt is not None:
            seq.append(dt)
    seq_wall = time.perf_counter() - t0
    patch = bench_corrections(c, rng, acked[10 : 10 + min(100, n_seq)], failures)
    c.close()
    per_client: list[list[float]] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients + 1)

    def worker(k: int) -> None:
        cl = Client(gw.port)
        cl.request("GET", "/health")
        barrier.wait()
        for i in range(n_per_client):
            dt = one(cl, k + 1, f"{run}-c{k}-{i}")
            if dt is not None:
                per_client[k].append(dt)
        cl.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    conc_wall = time.perf_counter() - t0
    conc = [x for lst in per_client for x in lst]
    # Until the background embedding has a vector per model for every memory written (at most
    # EMBED_WAIT_S; the rate is what it embedded meanwhile).
    t_written = time.perf_counter()
    health = gw.get_health()
    start_vectors = min((health.get("embedding") or {}).get("vectors", {}).values(), default=0)
    done = False
    while time.perf_counter() - t_written < EMBED_WAIT_S:
        health = gw.get_health()
        emb = health.get("embedding") or {}
        if emb.get("state") != "ready" or (emb.get("idle") and not emb.get("pending")):
            done = True
            break
        time.sleep(0.2)
    caught_up = round(time.perf_counter() - t_written, 2)
    end_vectors = min((health.get("embedding") or {}).get("vectors", {}).values(), default=0)
    gw.kill()
    in_files: set[str] = set()
    for path in sorted((gw.data_dir / "records").glob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            with contextlib.suppress(ValueError):
                in_files.add(str(json.loads(line).get("id")))
    lost = [i for i in acked if i not in in_files]
    return {
        "run": run,
        "sequential": {**stats_ms(seq), "writes_per_s": round(len(seq) / seq_wall, 1)},
        "concurrent": {
            "clients": clients,
            **stats_ms(conc),
            "writes_per_s": round(len(conc) / conc_wall, 1),
        },
        "patch": patch,
        "embedding_caught_up_s": caught_up if done else None,
        "embedding_rows_per_s_after_writes": round((end_vectors - start_vectors) / caught_up, 1),
        "fsync_ms": fsync_ms,
        "embedding_after": health.get("embedding"),
        "failed_requests": len(failures),
        "failures_sample": failures[:5],
        "loss_check": {
            "acknowledged": len(acked),
            "lost": len(lost),
            "checked_after": "SIGKILL of the gateway, ids looked up in records/*.jsonl",
        },
    }


def direct_write_suite(data_dir: Path, n_seq: int, n_per_client: int) -> dict:
    gw = Gateway(data_dir, label="direct-writes").start()
    try:
        gw.wait_quiet()
        res = bench_direct_writes(gw, n_seq, n_per_client)
    finally:
        gw.kill()
    s, c = res["sequential"], res["concurrent"]
    log(
        f"  direct writes: seq p50 {s['p50']} p95 {s['p95']} ms | PATCH p50"
        f" {res['patch']['p50']} p95 {res['patch']['p95']} ms | 4 clients p50 {c['p50']}"
        f" p95 {c['p95']} ms, {c['writes_per_s']}/s | embedded {res['embedding_caught_up_s']}s"
        f" after the last write ({res['embedding_rows_per_s_after_writes']} rows/s) | fsync p50"
        f" {res['fsync_ms']['p50']} ms | lost {res['loss_check']['lost']} of"
        f" {res['loss_check']['acknowledged']}"
    )
    return res


# ------------------------------------------------------------------------------ backlog


def backlog_suite(data_dir: Path, n_turns: int, query_s: float = 30.0) -> dict:
    """Queries while an embedding backlog runs: ``n_turns`` turns (2 L0 messages each) captured
    by 4 clients as fast as they go, then ``/search/conversations`` and ``/recall`` one after the
    other for ``query_s`` seconds while the background loop embeds; then how long the backlog
    takes to finish (at most EMBED_WAIT_S more)."""
    gw = Gateway(data_dir, label="backlog").start()
    try:
        gw.wait_quiet(timeout=60)
        rng = random.Random(7)
        bodies = [capture_body(rng, "backlog", k % 4, f"b{k}") for k in range(n_turns)]
        t0 = time.perf_counter()

        def worker(k: int) -> None:
            c = Client(gw.port)
            for body in bodies[k::4]:
                c.post("/capture", body)
            c.close()

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        captured_s = time.perf_counter() - t0
        queries = syn.gen_queries(200)
        c = Client(gw.port)
        search: list[float] = []
        recall: list[float] = []
        t_q = time.perf_counter()
        i = 0
        while time.perf_counter() - t_q < query_s:
            q = queries[i % len(queries)]
            i += 1
            _, _, dt = c.post("/search/conversations", {"query": q, "scope": SCOPE, "limit": 5})
            search.append(dt)
            _, _, dt = c.post("/recall", {"query": q, "scope": SCOPE, "session_key": "bq"})
            recall.append(dt)
        c.close()
        during = gw.get_health().get("embedding") or {}
        done = False
        while time.perf_counter() - t0 < captured_s + query_s + EMBED_WAIT_S:
            emb = gw.get_health().get("embedding") or {}
            if emb.get("idle") and not emb.get("pending"):
                done = True
                break
            time.sleep(0.5)
        total = time.perf_counter() - t0
        vectors = min(
            (gw.get_health().get("embedding") or {}).get("vectors", {}).values(), default=0
        )
    finally:
        gw.kill()
    res = {
        "l0_messages": 2 * n_turns,
        "capture_s": round(captured_s, 1),
        "search_conversations_during_backlog": stats_ms(search),
        "recall_during_backlog": stats_ms(recall),
        "embedding_when_queries_ended": during,
        "backlog_embedded_s_from_first_capture": round(total, 1) if done else None,
        "vectors_per_model_at_end": vectors,
        "embedding_rows_per_s": round(vectors / total, 1),
    }
    s_, r_ = res["search_conversations_during_backlog"], res["recall_during_backlog"]
    log(
        f"  backlog: {2 * n_turns} L0 captured in {res['capture_s']}s; during the backlog"
        f" search p50 {s_['p50']} p95 {s_['p95']} ms, recall p50 {r_['p50']} p95 {r_['p95']} ms;"
        f" embedded {res['backlog_embedded_s_from_first_capture']}s ({res['embedding_rows_per_s']}"
        " rows/s per model)"
    )
    return res


# ------------------------------------------------------------------------------ recall


def bench_recall(
    gw: Gateway, queries: list[str], n: int, warmup: int = 10, budget_s: float = 60.0
) -> dict:
    """``n`` sequential recalls (at least 50, and no more once ``budget_s`` is spent)."""
    c = Client(gw.port)
    for q in queries[:warmup]:
        c.post("/recall", {"query": q, "session_key": "bench-recall", "scope": SCOPE})
    lat: list[float] = []
    strategies: dict[str, int] = {}
    returned = 0
    errors = 0
    top10: dict[str, list[str]] = {}  # query -> ids of the first 10 memories, for comparisons
    t_end = time.perf_counter() + budget_s
    cpu0 = gw.cpu_seconds()
    for i in range(n):
        if i >= 50 and time.perf_counter() > t_end:
            break
        q = queries[warmup + (i % (len(queries) - warmup))]
        status, body, dt = c.post(
            "/recall", {"query": q, "session_key": "bench-recall", "scope": SCOPE}
        )
        if status != 200 or body is None:
            errors += 1
            continue
        lat.append(dt)
        strategies[body.get("strategy", "?")] = strategies.get(body.get("strategy", "?"), 0) + 1
        returned += int(body.get("memory_count") or 0)
        top10[q] = [str(m.get("id")) for m in (body.get("memories") or [])[:10]]
    c.close()
    cpu = gw.cpu_seconds() - cpu0
    return {
        **stats_ms(lat),
        # The gateway's CPU time per recall (all its threads): on a loaded machine wall-clock
        # latency mostly measures the wait for a core; this barely moves with the load.
        "cpu_ms_per_recall": round(cpu * 1000 / max(1, len(lat) + errors), 2),
        "strategies_answered": strategies,
        "mean_memories_returned": round(returned / max(1, len(lat)), 2),
        "errors": errors,
        "_top10": top10,
    }


def recall_suite(
    data_dir: Path, label: str, env: dict, queries: list[str], n: int, then=None
) -> dict:
    """Recall figures, then idle RSS and CPU; ``then(gw)`` runs on the same process after."""
    gw = Gateway(data_dir, env=env, label=label).start()
    try:
        # Steady state: ready flips before the background start-up work (scanning for rows
        # without vectors, pipeline recovery) is done; how long that takes is reported apart.
        settle = gw.wait_quiet()
        res = bench_recall(gw, queries, n)
        res["settle_after_ready_s"] = settle
        time.sleep(2.0)
        cpu0 = gw.cpu_seconds()
        time.sleep(8.0)
        idle_cpu = (gw.cpu_seconds() - cpu0) / 8.0 * 100
        res["rss_after_idle"] = gw.rss()
        res["idle_cpu_percent"] = round(idle_cpu, 1)
        res["embedding_at_idle"] = gw.get_health().get("embedding")
        res["first_200_s"] = round(gw.first_200_s or 0, 3)
        res["ready_s"] = round(gw.ready_s or 0, 3)
        res["ready_cpu_s"] = gw.ready_cpu_s
        res["vector_index"] = gw.health.get("vector_index")
        res["counts"] = gw.health.get("counts")
        res["env"] = env
        if then is not None:
            res["_then"] = then(gw)
    finally:
        gw.stop()
    log(
        f"  {label}: p50 {res['p50']} p95 {res['p95']} p99 {res['p99']} ms"
        f" ({res['strategies_answered']}, {res['mean_memories_returned']} memories)"
        f" | RSS {res['rss_after_idle']['rss_mib']} MiB | idle CPU {res['idle_cpu_percent']}%"
        f" | ready {res['ready_s']}s, then {res['settle_after_ready_s']}s to quiet"
    )
    return res


def top10_agreement(a: dict[str, list[str]], b: dict[str, list[str]]) -> dict:
    """How far two runs' top-10 answers agree, over the queries both answered."""
    common = [q for q in a if q in b]
    if not common:
        return {"queries": 0}
    overlap = [
        len(set(a[q]) & set(b[q])) / len(set(a[q]) | set(b[q])) if a[q] or b[q] else 1.0
        for q in common
    ]
    return {
        "queries": len(common),
        "identical_lists": sum(a[q] == b[q] for q in common),
        "same_sets": sum(set(a[q]) == set(b[q]) for q in common),
        "jaccard_mean": round(float(np.mean(overlap)), 4),
        "jaccard_min": round(float(min(overlap)), 4),
        "shared_of_10_mean": round(float(np.mean([len(set(a[q]) & set(b[q])) for q in common])), 2),
    }


def recall_100k_suite(
    data_dir: Path,
    trees: list[tuple[str, str | None]],
    queries,
    n,
    tree_env: dict[str, dict[str, str]] | None = None,
    capture: tuple[Path, tuple[int, int]] | None = None,
) -> dict:
    """Keyword and hybrid /recall, then idle RSS, at 100k L1 + 100k L0 with the default numpy
    L1 index, for each code tree in turn on the same copy of the data (one run, side by side).

    A tree is a directory holding a ``memory_tencentdb`` package (e.g. an export of an older
    commit), put first on the gateway's PYTHONPATH; None is the installed working tree. The
    first tree's top-10 answers are the reference the others are compared with.
    ``tree_env`` adds environment variables to a tree's gateways (e.g. ``MALLOC_ARENA_MAX``).
    With ``capture`` (the cached 100k source, (sequential, per-client) counts) each tree's
    hybrid gateway runs on a fresh copy of its own and the capture run follows on the same
    process (it adds rows), with its RSS right after.
    """
    out: dict = {"order": [name for name, _ in trees], "variants": {}}
    for name, path in trees:
        env = {"PYTHONPATH": path} if path else {}
        extra_env = dict((tree_env or {}).get(name, {}))
        env.update(extra_env)
        v: dict = {"loadavg_start": loadavg(), "tree_env": extra_env}
        for strategy, extra in (("keyword", {"TDAI_RECALL_STRATEGY": "keyword"}), ("hybrid", {})):
            d, then, own = data_dir, None, None
            if capture is not None and strategy == "hybrid":
                own = data_dir.parent.parent / f"r100k-capture-{name}" / "data"
                syn.materialise(capture[0], own, log)
                d = own

                def then(gw, label=f"capture-100k-{name}"):
                    return capture_on(gw, label, *capture[1])

            v[strategy] = recall_suite(
                d, f"recall-100k-{strategy}-{name}", {**env, **extra}, queries, n, then
            )
            v[strategy]["env"] = {k: x for k, x in extra.items()}  # no local paths in results
            if "_then" in v[strategy]:
                v["capture_100k"] = v[strategy].pop("_then")
            if own is not None:
                shutil.rmtree(own.parent, ignore_errors=True)
        v["loadavg_end"] = loadavg()
        out["variants"][name] = v
    ref = out["order"][0]
    for name in out["order"][1:]:
        for strategy in ("keyword", "hybrid"):
            out["variants"][name][strategy]["top10_vs_" + ref] = top10_agreement(
                out["variants"][ref][strategy]["_top10"], out["variants"][name][strategy]["_top10"]
            )
    for v in out["variants"].values():
        for strategy in ("keyword", "hybrid"):
            v[strategy].pop("_top10", None)
    return out


def recall_100k_table(r: dict) -> str:
    rows = [
        "| tree | keyword p50 / p95 (CPU) | hybrid p50 / p95 (CPU) | idle RSS (anon)"
        " | top-10 vs first | load |"
    ]
    rows.append("|---|---|---|---|---|---|")
    for name in r["order"]:
        v = r["variants"][name]
        kw, hy = v["keyword"], v["hybrid"]
        agree = hy.get("top10_vs_" + r["order"][0])
        agree_s = (
            f"hybrid {agree['identical_lists']}/{agree['queries']} identical,"
            f" {agree['shared_of_10_mean']} of 10 shared"
            if agree
            else "reference"
        )
        rss = hy["rss_after_idle"]
        cap = (v.get("capture_100k") or {}).get("rss_after_capture")
        if cap:
            rss = {**rss, "anon_mib": f"{rss['anon_mib']}; {cap['rss_mib']} after capture"}
        rows.append(
            f"| {name} | {kw['p50']} / {kw['p95']} ms ({kw.get('cpu_ms_per_recall')})"
            f" | {hy['p50']} / {hy['p95']} ms ({hy.get('cpu_ms_per_recall')})"
            f" | {rss['rss_mib']} MiB ({rss['anon_mib']}) | {agree_s}"
            f" | {v['loadavg_start'][:1]} -> {v['loadavg_end'][:1]} |"
        )
    return "\n".join(rows)


# ------------------------------------------------------------------------------ cold start


def cold_start_suite(tmp: Path, runs: int = 3) -> dict:
    starts = []
    for i in range(runs):
        d = tmp / f"cold-{i}" / "data"
        d.mkdir(parents=True)
        gw = Gateway(d, label=f"cold-{i}").start()
        try:
            c = Client(gw.port)
            for q in ("我有什么忌口吗", "which editor do I like", "周末一般安排什么活动"):
                c.post("/recall", {"query": q, "session_key": "bench-cold", "scope": SCOPE})
            c.close()
            time.sleep(2.0)
            starts.append(
                {
                    "first_200_s": round(gw.first_200_s or 0, 3),
                    "ready_s": round(gw.ready_s or 0, 3),
                    "first_200_cpu_s": gw.first_200_cpu_s,
                    "ready_cpu_s": gw.ready_cpu_s,
                    "rss_idle": gw.rss(),
                    "models": (gw.health.get("embedding") or {}).get("models"),
                }
            )
        finally:
            gw.stop()
        log(
            f"  cold start {i + 1}: first 200 {starts[-1]['first_200_s']}s, ready"
            f" {starts[-1]['ready_s']}s (CPU {gw.first_200_cpu_s} / {gw.ready_cpu_s} s), idle RSS"
            f" {starts[-1]['rss_idle']['rss_mib']} MiB"
        )
    return {
        "runs": starts,
        "first_200_s_median": float(np.median([s["first_200_s"] for s in starts])),
        "ready_s_median": float(np.median([s["ready_s"] for s in starts])),
        "first_200_cpu_s_median": float(np.median([s["first_200_cpu_s"] for s in starts])),
        "ready_cpu_s_median": float(np.median([s["ready_cpu_s"] for s in starts])),
        "rss_idle_empty_mib_median": float(np.median([s["rss_idle"]["rss_mib"] for s in starts])),
    }


# ------------------------------------------------------------------------------ diagnostics


def diagnose(data_dir: Path) -> dict:
    """In-process timings of store calls behind the figures (on the 100k store).

    The index builds that run at start-up between the first ``/health`` 200 and ``ready``, and
    one full ``missing_vectors`` scan per (layer, model), the query the background embedder
    runs to find rows without a vector. Each step is timed on its own; an API change in the
    store is reported, not fatal.
    """
    from datetime import UTC

    from memory_tencentdb.store.sqlite.store import Store

    store = Store(data_dir, UTC)
    out: dict = {}

    def timed(name: str, fn) -> None:
        t0 = time.perf_counter()
        try:
            fn()
            out[name] = round(time.perf_counter() - t0, 3)
        except Exception as e:  # noqa: BLE001
            out[name] = f"error: {type(e).__name__}: {e}"

    try:
        models = store.reader().execute("SELECT model, max(dim) FROM vectors GROUP BY model")
        models = dict(models.fetchall())
        for layer, backend in (("l1", "numpy"), ("l0", "vec0"), ("l1", "vec0")):

            def build(layer=layer, backend=backend) -> None:
                for m, dim in models.items():
                    store._indexes.pop((layer, m), None)
                    store.open_index(layer, m, int(dim), backend)

            timed(f"open_index_{layer}_{backend}_all_models_s", build)
        for layer in ("l1", "l0"):
            for m in models:
                short = m.split(":")[1].split("-")[0]
                timed(
                    f"missing_vectors_full_scan_{layer}_{short}_s",
                    lambda layer=layer, m=m: store.missing_vectors(layer, m, 32),
                )
    finally:
        store.close()
    return out


# ------------------------------------------------------------------------------ main


def code_version() -> dict:
    """The commit measured, and whether memory_tencentdb/ had uncommitted changes."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    dirty = git("status", "--porcelain", "--", "memory_tencentdb")
    return {"commit": git("rev-parse", "--short", "HEAD"), "dirty": dirty.splitlines()}


def machine() -> dict:
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError):
        mem = Path("/proc/meminfo").read_text().splitlines()[0].split(":", 1)[1].strip()
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "memory": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def _get(d: dict, *path: str) -> object:
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return None
        d = d[key]
    return d


def summary_table(r: dict) -> str:
    """The markdown table of RESULTS.md: metric | ours | target | original."""
    rows = [
        ("/capture p50, empty store, sequential", ("capture_empty", "sequential", "p50"), " ms", "<= 5 ms", "4.5 ms"),
        ("/capture p95 / p99, empty store, sequential", ("capture_empty", "sequential"), "", "", ""),
        ("/capture p50, 100k L0, sequential", ("capture_100k", "sequential", "p50"), " ms", "<= 5 ms, flat", "85 ms"),
        ("/capture p95 / p99, 100k L0, sequential", ("capture_100k", "sequential"), "", "", ""),
        ("/capture p50 / p95, empty, 4 clients", ("capture_empty", "concurrent"), "", "", ""),
        ("/capture p50 / p95, 100k L0, 4 clients", ("capture_100k", "concurrent"), "", "", ""),
        ("captures/s, 4 clients, empty", ("capture_empty", "concurrent", "captures_per_s"), "/s", ">= 300/s", "~145/s"),
        ("captures/s, 4 clients, 100k L0", ("capture_100k", "concurrent", "captures_per_s"), "/s", ">= 300/s", ""),
        ("acknowledged captures lost (empty)", ("capture_empty", "loss_check"), "", "0", "1.9%"),
        ("acknowledged captures lost (100k L0)", ("capture_100k", "loss_check"), "", "0", "1.9%"),
        ("keyword /recall p50 / p95, 10k L1", ("recall", "recall-10k-keyword"), "", "", "2.4 ms (p50)"),
        ("keyword /recall p50 / p95, 100k L1", ("recall", "recall-100k-keyword"), "", "p50 <= 6.5 ms", "6.5 ms (p50)"),
        ("hybrid /recall p50 / p95, 10k L1", ("recall", "recall-10k-hybrid"), "", "", ""),
        ("hybrid /recall p50 / p95, 100k L1, numpy L1 index", ("recall", "recall-100k-hybrid-numpy"), "", "p50 <= 40 ms", ""),
        ("hybrid /recall p50 / p95, 100k L1, vec0 L1 index", ("recall", "recall-100k-hybrid-vec0"), "", "", ""),
        ("idle RSS, empty store, models loaded", ("cold_start", "rss_idle_empty_mib_median"), " MiB", "<= 400 MiB", "523 MiB"),
        ("idle RSS, 100k L1 + 100k L0, numpy L1", ("recall", "recall-100k-hybrid-numpy", "rss_after_idle", "rss_mib"), " MiB", "<= 400 MiB", ""),
        ("idle RSS, 100k L1 + 100k L0, vec0 L1", ("recall", "recall-100k-hybrid-vec0", "rss_after_idle", "rss_mib"), " MiB", "", ""),
        ("cold start -> first /health 200 (median of 3)", ("cold_start", "first_200_s_median"), " s", "<= 3 s", "2.2 s"),
        ("cold start -> ready: true (median of 3)", ("cold_start", "ready_s_median"), " s", "", ""),
        ("gateway CPU time to first 200 / to ready", ("cold_start",), "", "", ""),
        ("start -> ready, 100k store, numpy L1", ("recall", "recall-100k-hybrid-numpy", "ready_s"), " s", "", ""),
        ("100k store: ready -> background start-up work done", ("recall", "recall-100k-hybrid-numpy", "settle_after_ready_s"), " s", "", ""),
        ("idle CPU after that, 100k store", ("recall", "recall-100k-hybrid-numpy", "idle_cpu_percent"), " % of a core", "", ""),
        ("POST /memories p50, sequential", ("direct_writes", "sequential", "p50"), " ms", "<= 10 ms", "at once"),
        ("POST /memories p95 / p99, sequential", ("direct_writes", "sequential"), "", "", ""),
        ("POST /memories p50 / p95, 4 clients", ("direct_writes", "concurrent"), "", "", ""),
        ("PATCH /memories/{id} p50 / p95, sequential", ("direct_writes", "patch"), "", "", ""),
        ("direct writes/s, 4 clients", ("direct_writes", "concurrent", "writes_per_s"), "/s", ">= 500/s", ""),
        ("direct writes: all embedded, s after the last write", ("direct_writes", "embedding_caught_up_s"), " s", "", ""),
        ("background embedding after the writes, rows/s (both models)", ("direct_writes", "embedding_rows_per_s_after_writes"), "/s", "", ""),
        ("fdatasync p50 / p95 on the data dir's disk", ("direct_writes", "fsync_ms"), "", "", ""),
        ("acknowledged direct writes lost (SIGKILL)", ("direct_writes", "loss_check"), "", "0", ""),
        ("/search/conversations p50 / p95 during a 10k L0 backlog", ("backlog", "search_conversations_during_backlog"), "", "p95 <= 50 ms", "1.6-2.5 / 6 ms"),
        ("/recall p50 / p95 during a 10k L0 backlog", ("backlog", "recall_during_backlog"), "", "p95 <= 50 ms", ""),
        ("10k L0 backlog embedded, s from the first capture", ("backlog", "backlog_embedded_s_from_first_capture"), " s", "<= 60 s", ""),
    ]  # fmt: skip
    out = ["| metric | ours | target | original |", "|---|---|---|---|"]
    for name, path, unit, target, orig in rows:
        v = _get(r, *path)
        if v is None and path[0] not in r:
            continue  # a part this run did not measure (--only)
        if isinstance(v, dict) and "first_200_cpu_s_median" in v:
            text = f"{v['first_200_cpu_s_median']} / {v['ready_cpu_s_median']} s"
        elif isinstance(v, dict) and "lost" in v:
            text = f"{v['lost']} of {v['acknowledged']}"
        elif isinstance(v, dict) and "p50" in v:
            text = f"{v['p50']} / {v['p95']} ms"
            if "sequential" in path and "p50" not in path:
                text = f"{v['p95']} / {v['p99']} ms"
        elif v is None:
            text = "n/a"
        else:
            text = f"{v}{unit}"
        out.append(f"| {name} | {text} | {target} | {orig} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    ap.add_argument(
        "--out",
        type=Path,
        help="results file (default bench/results/gateway.json; with --quick or --only,"
        " bench/out/gateway-partial.json so the recorded figures are not overwritten)",
    )
    ap.add_argument("--table", type=Path, help="only print the summary table of a results file")
    ap.add_argument(
        "--only",
        default="cold,capture,recall",
        help="comma-separated subset of: cold, capture, recall, and the optional attribute"
        " (capture with background embedding / extraction switched off), direct"
        " (POST /memories: sequential, 4 clients, time until embedded, loss after SIGKILL),"
        " backlog (queries while 10k captured L0 embed)"
        " and diagnose"
        " (in-process timings of the store's start-up index builds and scans, slow at 100k),"
        " recall100k (keyword + hybrid /recall and idle RSS at 100k only, for each --tree)",
    )
    ap.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="recall100k: also run the gateway from DIR (a directory holding a"
        " memory_tencentdb package, first on PYTHONPATH), labelled NAME; repeat to compare"
        " trees side by side, the first is the reference; NAME alone = the installed tree",
    )
    ap.add_argument(
        "--tree-env",
        action="append",
        default=[],
        metavar="NAME:K=V",
        help="recall100k: set K=V in the environment of tree NAME's gateways (repeatable)",
    )
    ap.add_argument(
        "--capture100k",
        action="store_true",
        help="recall100k: after each tree's hybrid run, the capture run on the same gateway"
        " (a fresh copy of the 100k store per tree) and its RSS",
    )
    args = ap.parse_args(argv)
    if args.table:
        print(summary_table(json.loads(args.table.read_text("utf-8"))))
        return 0
    parts = set(args.only.split(","))
    quick = args.quick
    if args.out is None:
        full = not quick and parts >= {"cold", "capture", "recall"}
        args.out = RESULTS / "gateway.json" if full else OUT / "gateway-partial.json"
    n_seq, n_conc = (100, 50) if quick else (500, 250)
    n_recall = 40 if quick else 200
    started = time.time()
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "loadavg_start": loadavg(),
        "method": {
            "transport": "HTTP/1.1 keep-alive over loopback, http.client, JSON bodies",
            "gateway": "python -m memory_tencentdb serve (one process, default config)",
            "capture_turn": "1 user + 1 assistant message, zh/en mixed, ~60-600 chars",
            "capture_counts": {"sequential": n_seq, "concurrent": f"4 x {n_conc}"},
            "recall_queries": n_recall,
            "synthetic_vectors": f"{syn.N_BASE} real embeddings per model; other rows are"
            " normalised mixtures of two of them plus noise (latency only, not quality)",
            "loss_check": "gateway SIGKILLed after the run; tags of all 200 answers looked up"
            " in conversations/*.jsonl and in memory.db",
        },
        "quick": quick,
        "code": code_version(),
    }
    tmp = Path(tempfile.mkdtemp(prefix="gw-bench-", dir=OUT if OUT.exists() else None))
    try:
        log("datasets (cached under bench/out/cache):")
        t0 = time.perf_counter()
        d10k = syn.dataset("l1-10k", 10_000, 0, log) if "recall" in parts else None
        d100k = (
            syn.dataset("full-100k", 100_000, 100_000, log)
            if parts & {"recall", "capture", "diagnose", "recall100k"}
            else None
        )
        result["dataset_prep_s"] = round(time.perf_counter() - t0, 1)
        queries = syn.gen_queries(400)

        if "cold" in parts:
            log("cold start + idle RSS, empty store:")
            result["cold_start"] = cold_start_suite(tmp)

        if "capture" in parts:
            log("capture, empty store:")
            empty = tmp / "cap-empty" / "data"
            empty.mkdir(parents=True)
            result["capture_empty"] = capture_suite(empty, "capture-empty", n_seq, n_conc)
            shutil.rmtree(empty.parent, ignore_errors=True)

        if parts & {"recall", "capture"}:
            assert d10k is not None and d100k is not None
            log("recall (and capture at 100k, on the last gateway):")
            c10k, c100k = tmp / "r10k" / "data", tmp / "r100k" / "data"
            kw = {"TDAI_RECALL_STRATEGY": "keyword"}
            configs = []
            if "recall" in parts:
                syn.materialise(d10k, c10k, log)
                configs += [
                    ("recall-10k-keyword", c10k, kw),
                    ("recall-10k-hybrid", c10k, {}),
                    ("recall-100k-keyword", c100k, kw),
                    ("recall-100k-hybrid-vec0", c100k, {"TDAI_VECTOR_INDEX_L1": "vec0"}),
                ]
            # Last: hybrid with the default numpy index; the 100k capture run follows on the
            # same process (it adds rows, so nothing may run on this copy after it).
            configs.append(("recall-100k-hybrid-numpy", c100k, {}))
            result["copy_100k"] = syn.materialise(d100k, c100k, log)
            result["recall"] = {}
            for label, d, env in configs:
                then = None
                if label == "recall-100k-hybrid-numpy" and "capture" in parts:

                    def then(gw):
                        return capture_on(gw, "capture-100k-L0", n_seq, n_conc)

                res = recall_suite(d, label, env, queries, n_recall, then)
                res.pop("_top10", None)
                if "_then" in res:
                    result["capture_100k"] = res.pop("_then")
                if "recall" in parts:
                    result["recall"][label] = res
                if label == "recall-10k-hybrid":
                    shutil.rmtree(c10k.parent, ignore_errors=True)

        if "recall100k" in parts and d100k is not None:
            log("keyword + hybrid /recall and idle RSS at 100k, per code tree:")
            trees = [
                (t.split("=", 1)[0], str(Path(t.split("=", 1)[1]).resolve()) if "=" in t else None)
                for t in args.tree
            ] or [("installed", None)]
            c = tmp / "r100k-trees" / "data"
            result["copy_100k_trees"] = syn.materialise(d100k, c, log)
            tree_env: dict[str, dict[str, str]] = {}
            for spec in args.tree_env:
                tname, _, kv = spec.partition(":")
                key, _, value = kv.partition("=")
                tree_env.setdefault(tname, {})[key] = value
            result["recall_100k_trees"] = recall_100k_suite(
                c,
                trees,
                queries,
                n_recall,
                tree_env,
                (d100k, (n_seq, n_conc)) if args.capture100k else None,
            )
            log("\n" + recall_100k_table(result["recall_100k_trees"]) + "\n")
            shutil.rmtree(c.parent, ignore_errors=True)

        if "backlog" in parts:
            log("queries while an embedding backlog runs, empty store + 10k L0:")
            d = tmp / "backlog" / "data"
            d.mkdir(parents=True)
            result["backlog"] = backlog_suite(d, 1000 if quick else 5000)
            shutil.rmtree(d.parent, ignore_errors=True)

        if "direct" in parts:
            log("direct writes (POST /memories), empty store:")
            d = tmp / "direct" / "data"
            d.mkdir(parents=True)
            n_dseq, n_dconc = (100, 100) if quick else (500, 500)
            result["direct_writes"] = direct_write_suite(d, n_dseq, n_dconc)
            shutil.rmtree(d.parent, ignore_errors=True)

        if "attribute" in parts:
            log("capture attribution (empty store; background work switched off in turn):")
            variants = [
                ("default", {}),
                ("no-embedding", {"TDAI_EMBEDDING_PROVIDER": "none"}),
                ("no-extraction", {"TDAI_MEMORY__EXTRACTION__ENABLED": "false"}),
                (
                    "neither",
                    {
                        "TDAI_EMBEDDING_PROVIDER": "none",
                        "TDAI_MEMORY__EXTRACTION__ENABLED": "false",
                    },
                ),
            ]
            result["capture_attribution"] = {}
            for name, env in variants:
                d = tmp / f"attr-{name}" / "data"
                d.mkdir(parents=True)
                gw = Gateway(d, env=env, label=f"attr-{name}").start()
                gw.wait_quiet()
                res = capture_on(gw, f"attr-{name}", n_seq // 2, n_conc // 2)
                res["env"] = env
                result["capture_attribution"][name] = res
                shutil.rmtree(d.parent, ignore_errors=True)

        if "diagnose" in parts and d100k is not None:
            c = tmp / "diag" / "data"
            syn.materialise(d100k, c, log)
            result["diagnostics_100k"] = diagnose(c)
            log(f"  diagnostics: {result['diagnostics_100k']}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    result["loadavg_end"] = loadavg()
    result["code_end"] = code_version()  # differs from "code" if the code moved during the run
    result["elapsed_s"] = round(time.time() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", "utf-8")
    log(f"wrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out}")
    log("\n" + summary_table(result) + "\n")
    log(
        f"total {result['elapsed_s']}s, loadavg {result['loadavg_start']} -> {result['loadavg_end']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
