"""Operations benchmark: export and import throughput and purge time at 100k L1 + 100k L0.

A data directory is seeded with the synthetic zh+en workload of ``_synthetic.py`` (no vectors:
these operations never touch embeddings, the next ``serve`` computes them), then:

- export: every memory and message of the directory to one JSONL file (``transfer.export``,
  what ``memory-tencentdb export`` runs);
- import: that file into a fresh data directory (``read_export`` + ``import_rows``, what
  ``memory-tencentdb import`` runs: parse and check everything, then files, then the index),
  and the same import again (idempotent: everything skipped);
- purge: 1% of the memories forgotten (tombstones, as ``DELETE /memories/{id}`` writes them),
  then ``purge`` (rewrite ``records/``, delete the rows, VACUUM, scrub every other file).

Run: ``.venv/bin/python bench/ops_bench.py [--quick]`` (quick: 5k + 5k). Writes
``bench/results/ops.json`` (a quick run: ``bench/out/ops-quick.json``) and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from datetime import UTC
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _synthetic as syn  # noqa: E402

RESULTS = ROOT / "bench" / "results"
WORK = ROOT / "bench" / "out" / "ops"


def log(msg: str) -> None:
    print(msg, flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="5k L1 + 5k L0 (smoke run)")
    args = ap.parse_args(argv)
    n = 5_000 if args.quick else 100_000

    from memory_tencentdb.operations import transfer
    from memory_tencentdb.operations.purge import purge
    from memory_tencentdb.store.sqlite.store import Store
    from memory_tencentdb.text import tokenize

    tokenize.warm_up()
    load_start = os.getloadavg()[0]  # the machine may be shared: say how busy it was
    shutil.rmtree(WORK, ignore_errors=True)
    src, dest = WORK / "src", WORK / "dest"
    t0 = time.perf_counter()
    syn._seed(src, n, n, {}, log)  # no models: vectors are not part of these operations
    seed_s = time.perf_counter() - t0
    log(f"seeded {n} L1 + {n} L0 in {seed_s:.0f}s")

    export_file = WORK / "memories.jsonl"
    store = Store(src, UTC)
    try:
        t0 = time.perf_counter()
        with export_file.open("w", encoding="utf-8") as out:
            rep = transfer.export(store, out, None)
        export_s = time.perf_counter() - t0
    finally:
        store.close()
    size_mb = export_file.stat().st_size / 1e6
    log(f"export: {rep.memories} memories + {rep.messages} messages in {export_s:.1f}s")

    t0 = time.perf_counter()
    _, messages, memories = transfer.read_export(export_file)
    parse_s = time.perf_counter() - t0
    store = Store(dest, UTC)
    try:
        t0 = time.perf_counter()
        imp = transfer.import_rows(store, messages, memories)
        import_s = parse_s + time.perf_counter() - t0
        t0 = time.perf_counter()
        again = transfer.import_rows(store, messages, memories)
        again_s = time.perf_counter() - t0
    finally:
        store.close()
    assert imp.memories == n and imp.messages == n, imp
    assert again.memories == 0 and again.messages == 0, again
    log(f"import: {imp.memories} memories + {imp.messages} messages in {import_s:.1f}s")

    store = Store(dest, UTC)
    try:
        ids = [f"m_bench_{j:06d}" for j in range(0, n, 100)]  # 1%
        t0 = time.perf_counter()
        store.append_tombstones(ids, "bench")
        forget_s = time.perf_counter() - t0
    finally:
        store.close()
    db_before = sum(p.stat().st_size for p in dest.glob("memory.db*"))
    t0 = time.perf_counter()
    report = purge(dest, UTC, messages=True)
    purge_s = time.perf_counter() - t0
    db_after = sum(p.stat().st_size for p in dest.glob("memory.db*"))
    assert report.memories == len(ids) and not report.leftovers, report
    log(f"purge: {report.memories} forgotten memories in {purge_s:.1f}s")

    rows = 2 * n
    results = {
        "n_l1": n,
        "n_l0": n,
        "cpu_count": os.cpu_count(),
        "load_avg_1m": [round(load_start, 1), round(os.getloadavg()[0], 1)],  # start, end
        "seed_s": round(seed_s, 1),
        "export": {
            "seconds": round(export_s, 2),
            "memories_per_s": round(n / export_s),
            "rows_per_s": round(rows / export_s),
            "file_mb": round(size_mb, 1),
        },
        "import": {
            "seconds": round(import_s, 2),
            "parse_s": round(parse_s, 2),
            "memories_per_s": round(n / import_s),
            "rows_per_s": round(rows / import_s),
            "again_seconds": round(again_s, 2),
            "again_rows_per_s": round(rows / again_s),
        },
        "forget": {"memories": len(ids), "seconds": round(forget_s, 2)},
        "purge": {
            "memories": report.memories,
            "seconds": round(purge_s, 2),
            "files_rewritten": len(report.files_rewritten),
            "db_mb_before": round(db_before / 1e6, 1),
            "db_mb_after": round(db_after / 1e6, 1),
        },
    }
    # Only a full run writes the recorded figures; a quick one goes to bench/out/.
    target = (syn.OUT / "ops-quick.json") if args.quick else (RESULTS / "ops.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print()
    print(f"{'operation':<28} {'time':>9} {'memories/s':>11} {'rows/s':>9}")
    e, i = results["export"], results["import"]
    print(f"{'export':<28} {e['seconds']:>8.1f}s {e['memories_per_s']:>11} {e['rows_per_s']:>9}")
    print(f"{'import':<28} {i['seconds']:>8.1f}s {i['memories_per_s']:>11} {i['rows_per_s']:>9}")
    print(
        f"{'import again (idempotent)':<28} {i['again_seconds']:>8.1f}s {'':>11} {i['again_rows_per_s']:>9}"
    )
    p = results["purge"]
    print(f"{'purge (' + str(p['memories']) + ' forgotten)':<28} {p['seconds']:>8.1f}s")
    print(f"\nwritten to {target}")
    shutil.rmtree(WORK, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
