"""pytest plugin for ``bench/suite_cpu.py``: each test's wall time and CPU, written per worker.

CPU is the pytest process's own (in-process gateways, fake models) plus its waited-for
children (subprocess gateways, Hermes and OpenClaw runs, install scripts): a module fixture's
gateway is counted when it is reaped, at the module's last teardown, so the figures are meant
to be summed per file. Loaded with ``-p _pytest_cpu`` and ``PYTEST_CPU_OUT`` naming a directory.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path
from typing import Any

import pytest

_out: Any = None


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    global _out
    if _out is None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        path = Path(os.environ["PYTEST_CPU_OUT"]) / f"cpu-{worker}.jsonl"
        _out = path.open("a", encoding="utf-8")
    t0 = time.perf_counter()
    own0, children0 = _cpu()
    yield
    own1, children1 = _cpu()
    row = {
        "id": item.nodeid,
        "wall_s": round(time.perf_counter() - t0, 3),
        "own_cpu_s": round(own1 - own0, 3),
        "children_cpu_s": round(children1 - children0, 3),
    }
    _out.write(json.dumps(row) + "\n")
    _out.flush()
