"""What the gateway exposes and how it recovers, through its routes (in process, but for the
file modes, which ``serve`` sets up):

- files under the data directory are 0600 and folders 0700, also ones left 0644 by older versions;
- a Host-header allow-list (loopback names by default) stops DNS rebinding;
- another scope's offloaded tool result cannot be read by id, ref or path;
- ``/health`` degradations clear once their cause is gone.

What needs a real server on the wire (raw headers, keep-alive): ``test_gateway_http_wire.py``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.support.gateway import KEYWORD_ONLY


def _modes(root: Path) -> dict[str, int]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = stat.S_IMODE(p.lstat().st_mode)
    return out


def test_data_files_are_private_including_old_ones(start_gateway, tmp_path: Path, scope: str):
    data = tmp_path / "data"
    # What an older version (or a careless copy) left behind: world-readable files and folders.
    (data / "scene_blocks").mkdir(parents=True)
    (data / "persona.md").write_text("# 用户画像\n- likes tea\n", "utf-8")
    (data / "scene_blocks" / "tea.md").write_text("scene", "utf-8")
    os.chmod(data, 0o755)
    os.chmod(data / "scene_blocks", 0o755)
    os.chmod(data / "persona.md", 0o644)
    os.chmod(data / "scene_blocks" / "tea.md", 0o644)
    # A gateway process: the file modes come from ``serve``'s umask (``cli.main``).
    gw = start_gateway(data_dir=data, env=KEYWORD_ONLY)
    with gw.client() as c:
        assert (
            c.post(
                "/capture",
                json={
                    "session_key": "s",
                    "scope": scope,
                    "user_content": "我住在杭州",
                    "assistant_content": "好的",
                },
            ).status_code
            == 200
        )
        assert (
            c.post(
                "/memories",
                json={
                    "content": "Lives in Hangzhou",
                    "type": "persona",
                    "session_key": "s",
                    "scope": scope,
                },
            ).status_code
            == 201
        )
        offloaded = c.post(  # offload files (refs, journal) too
            "/offload/tool-result",
            json={
                "session_key": "s",
                "scope": scope,
                "tool_call_id": "c1",
                "tool_name": "bash",
                "arguments": {},
                "result": "build output " * 200,
            },
        )
        assert offloaded.status_code == 200, offloaded.text
    modes = _modes(data)
    assert "memory.db" in modes and any(k.startswith("conversations/") for k in modes)
    assert any(k.endswith("-wal") for k in modes), modes  # the WAL is there while running
    assert any("refs/" in k for k in modes), modes  # the offloaded result's file
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    loose = {}
    for rel, mode in modes.items():
        want = 0o700 if (data / rel).is_dir() else 0o600
        if mode != want:
            loose[rel] = oct(mode)
    assert not loose, loose


def test_host_allow_list_stops_dns_rebinding(start_app_gateway):
    gw = start_app_gateway(env={**KEYWORD_ONLY, "TDAI_GATEWAY_ALLOWED_HOSTS": "memory.internal"})
    body = {"query": "x", "session_key": "s"}
    with gw.client() as c:
        for host in (
            "localhost",
            "localhost:8420",
            "127.0.0.1:8420",
            "[::1]:8420",
            "memory.internal:9000",
            "LOCALHOST",
        ):
            r = c.post("/recall", json=body, headers={"Host": host})
            assert r.status_code == 200, (host, r.text)
        for host in (
            "evil.example.com",
            "rebind.attacker.net:8420",
            "localhost.evil.com",
            "127.0.0.1.nip.io",
        ):
            for route in ("/recall", "/health"):
                r = (
                    c.post(route, json=body, headers={"Host": host})
                    if route == "/recall"
                    else c.get(route, headers={"Host": host})
                )
                assert r.status_code == 403, (host, route, r.status_code)
                assert "Host" in r.json()["error"] and "allowedHosts" in r.json()["error"]


def _day_file(data_dir: Path) -> Path:
    files = sorted((data_dir / "conversations").glob("*.jsonl"))
    assert files, "no day file yet"
    return files[-1]


def test_health_degradation_clears_when_the_cause_is_gone(start_app_gateway, scope: str):
    gw = start_app_gateway(env=KEYWORD_ONLY)
    turn = {
        "session_key": "s",
        "scope": scope,
        "user_content": "记住：周五去北京",
        "assistant_content": "好",
    }
    with gw.client() as c:
        assert c.post("/capture", json=turn).status_code == 200
        day = _day_file(gw.data_dir)
        aside = day.with_name(day.name + ".aside")
        day.rename(aside)
        day.mkdir()  # the day file is now a directory: appends fail, as on a broken disk
        try:
            r = c.post("/capture", json=turn)
            assert r.status_code >= 500, r.text
            health = c.get("/health").json()
            assert any("capture" in d for d in health["degraded"]), health["degraded"]
        finally:
            day.rmdir()
            aside.rename(day)
        assert c.post("/capture", json=turn).status_code == 200
        health = c.get("/health").json()
        assert not any("capture" in d for d in health["degraded"]), health["degraded"]


def test_offload_reads_stay_in_the_callers_scope(start_app_gateway, scope: str):
    """Another scope's offloaded tool result cannot be read by id, by its ref or by a path."""
    gw = start_app_gateway(env=KEYWORD_ONLY)
    other = scope + "-other"
    secret = "机密 secret build log: token=abc123 " * 40
    with gw.client() as c:
        mine = c.post(
            "/offload/tool-result",
            json={
                "session_key": "s",
                "scope": scope,
                "tool_call_id": "call_secret",
                "tool_name": "bash",
                "arguments": {"cmd": "make"},
                "result": secret,
            },
        )
        assert mine.status_code == 200, mine.text
        theirs = c.post(
            "/offload/tool-result",
            json={
                "session_key": "s",
                "scope": other,
                "tool_call_id": "call_other",
                "tool_name": "bash",
                "arguments": {},
                "result": "other output " * 40,
            },
        )
        assert theirs.status_code == 200, theirs.text
        ref, ref_path = mine.json()["ref"], mine.json()["ref_path"]
        other_root = Path(theirs.json()["ref_path"]).parent.parent
        attempts = [
            {"tool_call_id": "call_secret"},
            {"result_ref": ref},
            {"result_ref": ref_path},
            {"result_ref": os.path.relpath(ref_path, other_root)},
            {"result_ref": "refs/" + os.path.relpath(ref_path, other_root / "refs")},
        ]
        for key in attempts:
            r = c.post("/offload/read", json={"session_key": "s", "scope": other, **key})
            assert r.status_code == 404, (key, r.status_code, r.text[:200])
            assert "abc123" not in r.text
        ok = c.post(
            "/offload/read",
            json={"session_key": "s", "scope": scope, "tool_call_id": "call_secret"},
        )
        assert ok.status_code == 200 and "abc123" in ok.text
