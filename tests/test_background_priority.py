"""Background embedding yields the CPU to the request path (issue 14 part 5).

A backlog of thousands of just-captured messages keeps the fill loop busy for minutes; on a
small machine the captures and queries that arrive meanwhile must not queue behind it for the
CPU. On Linux the fill loop lowers its own thread's priority once the models have loaded (the
load itself stays at full priority: the first queries wait for it), while the threads that
answer requests keep theirs. What it does to latency is measured in bench/backlog_bench.py.
"""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="a per-thread nice value is Linux's"
)


def _nice_by_thread(pid: int) -> dict[int, int]:
    """Thread id -> nice value, from /proc (field 19 of each task's stat)."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(task.name)] = int(fields[16])
    return out


def test_fill_loop_runs_at_lower_priority_and_still_embeds(start_gateway):
    gw = start_gateway()
    assert gw.proc is not None
    pid = gw.proc.pid
    base = _nice_by_thread(pid)[pid]
    lowered: list[int] = []
    deadline = time.monotonic() + 30
    while not lowered and time.monotonic() < deadline:  # lowered right after the models load
        lowered = [t for t, n in _nice_by_thread(pid).items() if n >= base + 10]
        time.sleep(0.05)
    assert lowered and pid not in lowered, _nice_by_thread(pid)
    scope = f"prio-{uuid.uuid4().hex[:8]}"
    with gw.client() as c:
        r = c.post(
            "/capture",
            json={
                "scope": scope,
                "session_key": "s",
                "user_content": "我下周三要去成都出差，顺便看看大熊猫",
                "assistant_content": "Noted: a business trip to Chengdu next Wednesday.",
            },
        )
        assert r.status_code == 200, r.text
        gw.wait_embedded()
        # The main thread kept its priority, and so did most others (the request threads); the
        # loop embedded the capture all the same.
        nice = _nice_by_thread(pid)
        assert nice[pid] == base
        assert sum(n == base for n in nice.values()) > len(nice) // 2, nice
        r = c.post(
            "/search/conversations", json={"query": "去四川看熊猫", "scope": scope, "limit": 3}
        )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["strategy"] in ("hybrid", "embedding"), body
    assert any("成都" in item["content"] for item in body["items"]), body
