"""Retention in a real gateway: old raw messages and offload files go on schedule, never what a
newer layer still cites; ``status`` shows rows and bytes per layer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

OLD = "2020-01-01T08:00:00.000Z"


def cli(env, *args):
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def old_data(tmp_path: Path) -> Path:
    """An export with year-2020 messages: one cited by a memory, one not (zh and en)."""
    rows = [
        {"kind": "memory-tencentdb-export", "version": 1},
        {
            "kind": "message",
            "record_id": "l0_old_cited",
            "scope": "default",
            "sessionKey": "s",
            "recordedAt": OLD,
            "id": "",
            "role": "user",
            "content": "我在2019年搬到了成都",
            "timestamp": 1577865600000,
        },
        {
            "kind": "message",
            "record_id": "l0_old_plain",
            "scope": "default",
            "sessionKey": "s",
            "recordedAt": OLD,
            "id": "",
            "role": "user",
            "content": "What a rainy Tuesday in Leeds",
            "timestamp": 1577865601000,
        },
        {
            "kind": "memory",
            "id": "m_old",
            "scope": "default",
            "content": "用户2019年搬到了成都",
            "type": "episodic",
            "source_message_ids": ["l0_old_cited"],
            "updated_at": OLD,
        },
    ]
    path = tmp_path / "old.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def offload_files(data: Path) -> dict[str, Path]:
    root = data / "offload" / "default"
    (root / "mmds").mkdir(parents=True)
    (root / "refs").mkdir()
    f = {
        "old_canvas": root / "mmds" / "001-old-task.mmd",
        "new_canvas": root / "mmds" / "002-new-task.mmd",
        "old_journal": root / "offload-s1.jsonl",
        "cited_journal": root / "offload-s2.jsonl",
        "ref_of_old": root / "refs" / "a.md",
        "ref_uncited": root / "refs" / "b.md",
        "ref_cited": root / "refs" / "c.md",
    }
    f["old_canvas"].write_text('%% {"taskGoal": "old"}\nflowchart TD\n  001-N1["x"]\n')
    f["new_canvas"].write_text('%% {"taskGoal": "new"}\nflowchart TD\n  002-N1["y"]\n')
    f["old_journal"].write_text(
        json.dumps({"tool_call_id": "t1", "node_id": "001-N1", "result_ref": "refs/a.md"}) + "\n"
    )
    f["cited_journal"].write_text(
        json.dumps({"tool_call_id": "t2", "node_id": "002-N1", "result_ref": "refs/c.md"}) + "\n"
    )
    for key in ("ref_of_old", "ref_uncited", "ref_cited"):
        f[key].write_text("raw tool output\n")
    ten_days = time.time() - 10 * 86400
    for key, path in f.items():
        if key != "new_canvas":
            os.utime(path, (ten_days, ten_days))
    return f


def test_retention_drops_only_what_nothing_cites(tmp_path):
    data = tmp_path / "data"
    gw = GatewayProcess(
        data,
        env={
            "TDAI_MEMORY__RETENTION__L0_DAYS": "30",
            "TDAI_MEMORY__RETENTION__FIRST_RUN_DELAY_SECONDS": "0.5",
            "TDAI_MEMORY__OFFLOAD__OFFLOAD_RETENTION_DAYS": "3",
            **KEYWORD_ONLY,
        },
    )
    out = cli(gw.env(), "import", str(old_data(tmp_path)))
    assert out.returncode == 0, out.stderr
    f = offload_files(data)
    gw.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            last = gw.wait_healthy()["retention"]["last"]
            if last:
                break
            time.sleep(0.2)
        assert last and last["l0_deleted"] == 1 and last["l0_kept_cited"] == 1, last
        assert last["offload_deleted"] == {"canvases": 1, "journals": 1, "refs": 2}, last
        with gw.client() as c:
            found = c.post("/search/conversations", json={"query": "成都 Leeds"}).json()["results"]
            assert "成都" in found and "Leeds" not in found
            trace = c.get("/memories/m_old").json()["trace"]["source_messages"]
            assert [m["id"] for m in trace] == ["l0_old_cited"]
        day = (data / "conversations" / "2020-01-01.jsonl").read_text("utf-8")
        assert "成都" in day and "Leeds" not in day
        assert not f["old_canvas"].exists() and f["new_canvas"].exists()
        assert not f["old_journal"].exists() and f["cited_journal"].exists()
        assert not f["ref_of_old"].exists() and not f["ref_uncited"].exists()
        assert f["ref_cited"].exists()
        status = cli(gw.env(), "status")
        assert status.returncode == 0, status.stderr
        assert "layers:      L0 1 messages" in status.stdout, status.stdout
        assert "retention:   L0 30 days, offload 3 days" in status.stdout
        assert "redaction:   on" in status.stdout
    finally:
        gw.stop()
    # Survives a rebuild of the index from the files.
    assert cli(gw.env(), "reindex").returncode == 0
    gw.start()
    try:
        with gw.client() as c:
            assert (
                "Leeds"
                not in c.post("/search/conversations", json={"query": "Leeds"}).json()["results"]
            )
    finally:
        gw.stop()
