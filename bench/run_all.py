"""Run every benchmark present in bench/, one after the other, and say which ones failed.

Known scripts run in a fixed order; any other ``bench/*.py`` (not starting with ``_``, not this
file) runs after them. A script that is missing is skipped, one that fails is reported and the
rest still run. Node scripts (``*.mjs`` / ``*.js``) run with ``node`` when it is on PATH.

    .venv/bin/python bench/run_all.py [--quick] [--only NAME[,NAME...]] [--timeout SECONDS]

``--quick`` is passed on to the scripts that accept it (those whose source mentions
``--quick``). Exit status: 0 if every script that ran succeeded, 1 otherwise.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent

KNOWN = [
    "recall_quality.py",
    "gateway_bench.py",
    "offload_bench.py",
    "hermes_overhead.py",
    "openclaw_overhead.py",
    "openclaw_overhead.mjs",
    "openclaw_overhead.js",
]


def discover() -> list[Path]:
    scripts = [BENCH / name for name in KNOWN if (BENCH / name).is_file()]
    # A Node variant runs only where there is no Python script of the same name (the Python
    # one may drive the Node one itself, as openclaw_overhead.py does).
    py_stems = {p.stem for p in scripts if p.suffix == ".py"}
    scripts = [p for p in scripts if p.suffix == ".py" or p.stem not in py_stems]
    known = {p.name for p in scripts} | set(KNOWN)
    for p in sorted(BENCH.glob("*.py")):
        if p.name in known or p.name.startswith("_") or p.name == Path(__file__).name:
            continue
        scripts.append(p)
    return scripts


def command(script: Path, quick: bool) -> list[str] | None:
    if script.suffix == ".py":
        cmd = [sys.executable, str(script)]
    else:
        node = shutil.which("node")
        if node is None:
            return None
        cmd = [node, str(script)]
    if quick:
        try:
            if "--quick" in script.read_text("utf-8", "replace"):
                cmd.append("--quick")
        except OSError:
            pass
    return cmd


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run every benchmark script in bench/.")
    ap.add_argument("--quick", action="store_true", help="pass --quick where supported")
    ap.add_argument("--only", default="", help="comma-separated script names (with or without .py)")
    ap.add_argument("--timeout", type=float, default=3600, help="per script, seconds")
    ap.add_argument("--list", action="store_true", help="only print what would run")
    args = ap.parse_args(argv)
    wanted = {n.strip().removesuffix(".py") for n in args.only.split(",") if n.strip()}
    scripts = [s for s in discover() if not wanted or s.stem in wanted or s.name in wanted]
    if not scripts:
        print("no benchmark scripts found", file=sys.stderr)
        return 1
    if args.list:
        for script in scripts:
            cmd = command(script, args.quick)
            print(" ".join(cmd) if cmd else f"{script.name}: skipped (node not found)")
        return 0
    summary: list[tuple[str, str, float]] = []
    for script in scripts:
        cmd = command(script, args.quick)
        if cmd is None:
            summary.append((script.name, "skipped (node not found)", 0.0))
            continue
        print(f"=== {script.name}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        try:
            rc = subprocess.run(cmd, cwd=ROOT, timeout=args.timeout).returncode
            status = "ok" if rc == 0 else f"FAILED (exit {rc})"
        except subprocess.TimeoutExpired:
            status = f"FAILED (timeout after {args.timeout:.0f}s)"
        except OSError as e:
            status = f"FAILED ({e})"
        summary.append((script.name, status, time.perf_counter() - t0))
    print("\n=== summary")
    for name, status, secs in summary:
        print(f"  {name:28s} {status:32s} {secs:7.1f}s")
    return 0 if all(s == "ok" or s.startswith("skipped") for _, s, _ in summary) else 1


if __name__ == "__main__":
    raise SystemExit(main())
