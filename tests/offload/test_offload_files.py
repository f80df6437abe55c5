"""Offload files through the gateway's routes (in process) (issue 21, item 11).

- Session keys map to distinct files: ``x/`` and ``x-<sha1[:8]>`` shared one journal; the
  mapping is an escape now (injective), and a data directory written by the older rule is read
  where it is (a session's old files are kept using, never another key's).
- A ref name is always found: the 10,001st result with the same timestamp failed (names were
  probed ``-1`` … ``-9999``).
- Appending a step does not rewrite the canvas (same file, not a new one each step), which
  stays valid Mermaid, its metadata up to date.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.support.inprocess import InProcessGateway
from tests.support.mermaid import require_validator


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    g = InProcessGateway(tmp_path_factory.mktemp("files") / "data").start()
    yield g
    g.stop()


def _post(c, scope: str, session: str, call_id: str, result: str, **extra) -> dict:
    body = {"session_key": session, "scope": scope, "tool_call_id": call_id,
            "tool_name": "bash", "arguments": {"command": f"run {call_id}"}, "result": result,
            **extra}  # fmt: skip
    r = c.post("/offload/tool-result", json=body)
    assert r.status_code == 200, r.text
    return r.json()


def _root(c, scope: str) -> Path:
    return Path(c.get("/offload/guide", params={"scope": scope}).json()["data_dir"])


def test_colliding_session_keys_get_distinct_journals(gw: InProcessGateway) -> None:
    scope = "keys"
    twin = "x-" + hashlib.sha1(b"x/").hexdigest()[:8]
    with gw.client() as c:
        for key, text in (("x/", "slash 会话\n" * 300), (twin, "twin 会话\n" * 300)):
            _post(c, scope, key, f"call_{text[:4]}", text)
        root = _root(c, scope)
        journals = sorted(p.name for p in root.glob("offload-*.jsonl"))
        assert len(journals) == 2, journals
        for key, call in (("x/", "call_slas"), (twin, "call_twin")):
            got = c.get("/offload/canvases", params={"scope": scope, "session_key": key}).json()
            assert got["active"] is not None
            rows = [json.loads(ln) for ln in (root / journals[0]).read_text().splitlines()]
            rows += [json.loads(ln) for ln in (root / journals[1]).read_text().splitlines()]
            assert sum(r["tool_call_id"] == call for r in rows) == 1
        states = {json.loads(p.read_text())["session_key"] for p in root.glob("sessions/*.json")}
        assert states == {"x/", twin}


def test_files_of_the_older_naming_are_still_read(tmp_path: Path) -> None:
    """A data directory where ``agent:main:main`` has its files under the older name
    (``agent_main_main-<sha1[:8]>``): read-back works and new rows join the same journal."""
    g = InProcessGateway(tmp_path / "data").start()
    key, scope = "agent:main:main", "legacy"
    old = "agent_main_main-" + hashlib.sha1(key.encode()).hexdigest()[:8]
    try:
        with g.client() as c:
            _post(c, scope, key, "call_old", "旧的结果 old result\n" * 300)
            root = _root(c, scope)
        g.stop()
        (root / "offload-agent%3Amain%3Amain.jsonl").rename(root / f"offload-{old}.jsonl")
        (root / "sessions" / "agent%3Amain%3Amain.json").rename(root / "sessions" / f"{old}.json")
        g.start()
        with g.client() as c:
            back = c.post(
                "/offload/read",
                json={"scope": scope, "session_key": key, "tool_call_id": "call_old"},
            )
            assert back.status_code == 200 and back.json()["content"].startswith("旧的结果")
            _post(c, scope, key, "call_new", "new result\n" * 300)
            active = c.get("/offload/canvases", params={"scope": scope, "session_key": key}).json()
            assert active["active"]["node_count"] == 2  # the session's task continues
        assert sorted(p.name for p in root.glob("offload-*.jsonl")) == [f"offload-{old}.jsonl"]
        ids = [json.loads(ln)["tool_call_id"] for ln in (root / f"offload-{old}.jsonl").open()]
        assert ids == ["call_old", "call_new"]
    finally:
        g.stop()


def test_ten_thousand_results_in_one_millisecond_still_get_a_ref(gw: InProcessGateway) -> None:
    scope, stamp = "same-ms", "2026-04-12T17:26:08.123+08:00"
    with gw.client() as c:
        first = _post(c, scope, "s", "call_ms_0", "first\n" * 300, timestamp=stamp)
        refs = _root(c, scope) / "refs"
        stem = Path(first["ref"]).stem
        for n in range(1, 10_000):  # as if 9,999 more had come in the same millisecond
            (refs / f"{stem}-{n}.md").touch()
        later = [
            _post(c, scope, "s", f"call_ms_{i}", f"结果 {i}\n" * 300, timestamp=stamp)
            for i in (1, 2)
        ]
        for i, out in zip((1, 2), later, strict=True):
            assert out["ref"].startswith(f"refs/{stem}-") and out["ref"] != first["ref"]
            back = c.post("/offload/read", json={"scope": scope, "tool_call_id": f"call_ms_{i}"})
            assert back.json()["content"] == f"结果 {i}\n" * 300
        assert later[0]["ref"] != later[1]["ref"]


def test_a_step_appends_to_the_canvas_without_rewriting_it(
    gw: InProcessGateway, tmp_path: Path
) -> None:
    scope = "append"
    with gw.client() as c:
        first = _post(c, scope, "s", "call_ap_0", "第一步 done\n" * 300)
        mmd = next((_root(c, scope) / "mmds").glob("*.mmd"))
        inode, created = os.stat(mmd).st_ino, mmd.read_text("utf-8")
        for i in range(1, 60):
            _post(c, scope, "s", f"call_ap_{i}", f"步骤 {i} <b>\"x\"</b> status: blocked\n" * 50,
                  is_error=i % 10 == 0)  # fmt: skip
            assert os.stat(mmd).st_ino == inode, f"step {i} replaced the canvas file"
        text = mmd.read_text("utf-8")
        assert text.startswith(created.split("\n", 1)[0][:20]) and text.count("\n") > 100
        info = c.post("/offload/read", json={"scope": scope, "canvas": mmd.name}).json()
    assert info["node_count"] == 60 and info["status"]["blocked"] == 5, info["status"]
    assert info["meta"]["progress"] == str(round(100 * 55 / 60)), info["meta"]
    assert info["meta"]["updated_time"] > info["meta"]["created_time"]
    assert first["node_id"].endswith("-N1")
    validator = require_validator()
    bad = [r for r in validator.check([mmd]) if not r.ok]
    assert not bad, [r.error for r in bad]
