"""Where the test suite's CPU goes, per test file: the figure that decides CI time on this
2-core machine, where the suite is CPU-bound (wall time ~ CPU / 2).

Runs pytest as ``make test`` does (two workers, ``--dist loadfile``) with the plugin
``bench/_pytest_cpu.py``, which records each test's wall time and CPU (pytest's own plus its
waited-for children: gateways, Hermes, OpenClaw, install scripts), then sums them per file and
per area (the real hosts, offload, pipeline, the rest).

    .venv/bin/python bench/suite_cpu.py [pytest args...]    # default: the whole SQLite run
    .venv/bin/python bench/suite_cpu.py --table FILE        # print a results file again

Writes bench/results/suite_cpu.json for the whole run; with pytest arguments (a part of the
suite), bench/out/suite_cpu-partial.json, so the recorded figures are not overwritten.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
OUT = BENCH / "results" / "suite_cpu.json"
PARTIAL = BENCH / "out" / "suite_cpu-partial.json"
AREAS = (
    ("tests/openclaw/", "real OpenClaw"),
    ("tests/hermes/", "real Hermes"),
    ("tests/offload/", "offload"),
    ("tests/pipeline/", "pipeline"),
)


def area(path: str) -> str:
    return next((name for prefix, name in AREAS if path.startswith(prefix)), "the rest")


def summarise(rows: list[dict]) -> dict:
    files: dict[str, dict] = defaultdict(lambda: {"tests": 0, "wall_s": 0.0, "cpu_s": 0.0})
    for r in rows:
        f = files[r["id"].split("::", 1)[0]]
        f["tests"] += 1
        f["wall_s"] += r["wall_s"]
        f["cpu_s"] += r["own_cpu_s"] + r["children_cpu_s"]
    areas: dict[str, dict] = defaultdict(lambda: {"tests": 0, "wall_s": 0.0, "cpu_s": 0.0})
    for path, f in files.items():
        a = areas[area(path)]
        for k in ("tests", "wall_s", "cpu_s"):
            a[k] += f[k]
    order = sorted(files.items(), key=lambda kv: -kv[1]["cpu_s"])
    return {
        "cpu_s": round(sum(f["cpu_s"] for f in files.values()), 1),
        "areas": {k: {n: round(x, 1) for n, x in v.items()} for k, v in areas.items()},
        "files": {k: {n: round(x, 1) for n, x in v.items()} for k, v in order},
    }


def table(result: dict, top: int = 20) -> str:
    lines = [
        f"pytest wall {result.get('pytest_wall_s')} s, CPU {result['cpu_s']} s",
        "| area | tests | CPU s | wall s (sum of tests) |",
        "|---|---|---|---|",
    ]
    for name, a in sorted(result["areas"].items(), key=lambda kv: -kv[1]["cpu_s"]):
        lines.append(f"| {name} | {a['tests']} | {a['cpu_s']:.0f} | {a['wall_s']:.0f} |")
    lines += ["", "| file | tests | CPU s | wall s |", "|---|---|---|---|"]
    for path, f in list(result["files"].items())[:top]:
        lines.append(f"| {path} | {f['tests']} | {f['cpu_s']:.0f} | {f['wall_s']:.0f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--table"]:
        print(table(json.loads(Path(argv[1]).read_text("utf-8"))))
        return 0
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as tmp:
        env = {
            **os.environ,
            "PYTEST_CPU_OUT": tmp,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(BENCH), os.environ.get("PYTHONPATH")])),
        }
        cmd = [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile"]
        cmd += ["-p", "_pytest_cpu", *argv]
        t0 = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env=env)
        wall = time.perf_counter() - t0
        rows = [
            json.loads(line)
            for path in Path(tmp).glob("cpu-*.jsonl")
            for line in path.read_text("utf-8").splitlines()
        ]
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "command": " ".join(["pytest", *cmd[3:]]),
        "exit_code": done.returncode,
        "pytest_wall_s": round(wall, 1),
        **summarise(rows),
    }
    out = PARTIAL if argv else OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", "utf-8")
    print(table(result))
    print(f"wrote {out}")
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
