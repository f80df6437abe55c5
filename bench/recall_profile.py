"""Where a hybrid ``/recall`` at 10k L1 spends its CPU, step by step, in process, for one code
tree (run it once per tree, then ``--compare A.json B.json``).

On a copy of the cached 10k store (``bench/out/cache/l1-10k``, the store of gateway_bench.py's
"/recall at 10k L1" line) the gateway's own ``Engine`` (models loaded, indexes built, no
background threads) answers ``--n`` recalls (``recall._recall``, what ``/recall`` runs). The
retrieval pool is replaced by one that runs each task at once in the calling thread, so every
side (the two query embeddings, the index searches, the keyword search) is timed in one thread
and the total is the CPU a recall costs, not its wall time with the sides overlapped. Each
function of ``recall`` / ``retrieval`` / ``text.query_intent`` and each method of ``Store``,
the vector indexes and ``Vectorizer`` is wrapped by a timer (thread CPU time, cumulative: a
step includes what it calls; ~1 us per call), matched by name so the trees line up when code
moved. cProfile was tried first: its per-call overhead turned 25 ms of CPU into 184 ms, most
of it inside the models' many small calls, so it misattributes.

The tree is whichever ``memory_tencentdb`` is first on PYTHONPATH:
``PYTHONPATH=<tree> .venv/bin/python bench/recall_profile.py --label before --out X.json``
(the tree is reported as "this checkout" or not, never by its path).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(1, str(BENCH))
# The tree under test first: imported before _synthetic, which puts this checkout first on the
# path (for the benches that run this checkout).
importlib.import_module("memory_tencentdb")
import _synthetic as syn  # noqa: E402


class _Now:
    """An executor that runs each task at once in the calling thread."""

    def submit(self, fn, *args, **kwargs) -> Future:
        f: Future = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the caller, as a pool does
            f.set_exception(e)
        return f


TIMES: dict[str, list[float]] = {}  # name -> [calls, cpu seconds, wall seconds]


def _wrap(name: str, fn):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        c0, w0 = time.thread_time(), time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            t = TIMES.setdefault(name, [0, 0.0, 0.0])
            t[0] += 1
            t[1] += time.thread_time() - c0
            t[2] += time.perf_counter() - w0

    return timed


def _instrument() -> None:
    import inspect

    from memory_tencentdb import recall, retrieval, vectorizer
    from memory_tencentdb.store import vector_index
    from memory_tencentdb.store.sqlite import store as db
    from memory_tencentdb.text import query_intent

    for mod in (recall, retrieval, query_intent):
        for name, fn in list(vars(mod).items()):
            if inspect.isfunction(fn) and fn.__module__ == mod.__name__:
                setattr(mod, name, _wrap(f"{mod.__name__.rsplit('.', 1)[1]}.{name}", fn))
    classes = [db.Store, vectorizer.Vectorizer] + [
        c
        for c in vars(vector_index).values()
        if inspect.isclass(c) and c.__module__ == vector_index.__name__
    ]
    for cls in classes:
        for name, fn in list(vars(cls).items()):
            if inspect.isfunction(fn) and not name.startswith("__"):
                setattr(cls, name, _wrap(f"{cls.__name__}.{name}", fn))
    # recall imports some names from retrieval / query_intent directly: rebind them too.
    for name in list(vars(recall)):
        for mod in (retrieval, query_intent):
            if name in vars(mod) and getattr(vars(mod)[name], "__wrapped__", None) is getattr(
                vars(recall)[name], "__wrapped__", vars(recall)[name]
            ):
                setattr(recall, name, vars(mod)[name])


def _language_from_contents() -> bool:
    """The change this bench recommends for ``retrieval._other_language`` (not made here: that
    file holds the recall decision, another change's), patched in for its figure: the
    candidates' content only (``Store.l1_contents``) instead of whole decoded rows."""
    from memory_tencentdb import retrieval
    from memory_tencentdb.store.sqlite.store import Store

    if not hasattr(retrieval, "_other_language") or not hasattr(Store, "l1_contents"):
        return False
    is_chinese = retrieval.is_chinese

    def _other_language(store, layer: str, query: str, rowids: list[int]) -> set[int]:
        if layer != "l1" or not rowids:
            return set()
        zh = is_chinese(query)
        return {r for r, text in store.l1_contents(rowids).items() if is_chinese(text) != zh}

    retrieval._other_language = _other_language
    return True


def profile(label: str, n: int, warmup: int, contents: bool = False) -> dict:
    import memory_tencentdb
    from memory_tencentdb import recall as recall_service
    from memory_tencentdb import retrieval
    from memory_tencentdb.config import load_settings
    from memory_tencentdb.engine import Engine
    from memory_tencentdb.text import tokenize

    src = syn.dataset("l1-10k", 10_000, 0, print)
    tmp = Path(tempfile.mkdtemp(prefix="recall-prof-", dir=syn.OUT if syn.OUT.exists() else None))
    out: dict = {
        "label": label,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "tree": "this checkout"
        if Path(memory_tencentdb.__file__).resolve().parent.parent == syn.ROOT
        else "another tree (PYTHONPATH)",
        "loadavg_start": list(os.getloadavg()),
        "language_from_contents": _language_from_contents() if contents else False,
    }
    try:
        data = tmp / "data"
        syn.materialise(src, data, print)
        settings = load_settings({"TDAI_DATA_DIR": str(data)})
        engine = Engine(settings)
        tokenize.warm_up()
        engine.vectorizer._load()
        retrieval._pool = _Now()
        store, vec, cfg = engine.store, engine.vectorizer, settings.memory.recall
        queries = syn.gen_queries(warmup + n)

        def run(qs: list[str]) -> float:
            c0 = time.thread_time()
            for q in qs:
                recall_service._recall(store, vec, cfg, engine.tz, q, syn.SCOPE, None)
            return (time.thread_time() - c0) * 1000 / max(1, len(qs))

        run(queries[:warmup])
        out["plain_cpu_ms_per_recall"] = round(run(queries[warmup:]), 2)
        _instrument()
        TIMES.clear()
        out["instrumented_cpu_ms_per_recall"] = round(run(queries[warmup:]), 2)
        out["n"] = n
        out["steps"] = {
            name: {
                "calls_per_recall": round(c / n, 2),
                "cpu_ms_per_recall": round(cpu * 1000 / n, 3),
                "wall_ms_per_recall": round(wall * 1000 / n, 3),
            }
            for name, (c, cpu, wall) in sorted(TIMES.items(), key=lambda kv: -kv[1][1])
        }
        out["loadavg_end"] = list(os.getloadavg())
        engine.store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def compare(a: dict, b: dict, top: int = 30) -> str:
    """Steps whose CPU per recall moved most between two profiles."""
    rows = [
        f"CPU ms per recall, every side in one thread: {a['label']}"
        f" {a['plain_cpu_ms_per_recall']} / {b['label']} {b['plain_cpu_ms_per_recall']}"
        f" (instrumented {a['instrumented_cpu_ms_per_recall']} /"
        f" {b['instrumented_cpu_ms_per_recall']})",
        f"| step | {a['label']} CPU ms (calls) | {b['label']} CPU ms (calls) | difference |",
        "|---|---|---|---|",
    ]
    zero = {"cpu_ms_per_recall": 0.0, "calls_per_recall": 0}
    sa, sb = a["steps"], b["steps"]
    keys = sorted(
        set(sa) | set(sb),
        key=lambda k: (
            -abs(sb.get(k, zero)["cpu_ms_per_recall"] - sa.get(k, zero)["cpu_ms_per_recall"])
        ),
    )
    for k in keys[:top]:
        fa, fb = sa.get(k, zero), sb.get(k, zero)
        rows.append(
            f"| {k} | {fa['cpu_ms_per_recall']} ({fa['calls_per_recall']}) |"
            f" {fb['cpu_ms_per_recall']} ({fb['calls_per_recall']}) |"
            f" {fb['cpu_ms_per_recall'] - fa['cpu_ms_per_recall']:+.3f} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--label", default="tree")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument(
        "--language-from-contents",
        action="store_true",
        help="patch retrieval._other_language to read the candidates' content only",
    )
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (json.loads(p.read_text("utf-8")) for p in args.compare)
        print(compare(a, b))
        return 0
    res = profile(args.label, args.n, args.warmup, args.language_from_contents)
    print(
        f"{args.label} ({res['tree']}): CPU {res['plain_cpu_ms_per_recall']} ms per recall"
        f" (instrumented {res['instrumented_cpu_ms_per_recall']})"
    )
    for k, v in list(res["steps"].items())[:40]:
        print(f"  {k:<45} {v['cpu_ms_per_recall']:>8} ms  x{v['calls_per_recall']}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1, ensure_ascii=False) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
