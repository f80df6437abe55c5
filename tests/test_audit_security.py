"""Audit findings about exposure and recovery, each through HTTP on a real gateway process.

- files under the data directory are 0600 and folders 0700, also ones left 0644 by older versions;
- a Host-header allow-list (loopback names by default) stops DNS rebinding;
- one ``Authorization`` header, exactly ``Bearer <token>``: duplicates and whitespace inside the
  value are 401; whitespace around it is not part of the value (RFC 9110) and is ignored;
- ``/health`` degradations clear once their cause is gone;
- a 500 does not cost the client its pooled keep-alive connection.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
from pathlib import Path

from memory_tencentdb.gateway.access import OWNER, load_policy
from memory_tencentdb.gateway.security import GatewayGuard
from memory_tencentdb.ownership import GatewayAuth

KEY = "audit-key-4c1d9b"


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
    gw = start_gateway(data_dir=data, env={"TDAI_EMBEDDING_PROVIDER": "none"})
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


def _raw_request(port: int, head: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(head.encode("latin-1"))
        chunks = []
        while True:
            data = s.recv(65536)
            if not data:
                break
            chunks.append(data)
            if b"\r\n\r\n" in b"".join(chunks) and b"}" in data:
                break
        return b"".join(chunks)


def test_host_allow_list_stops_dns_rebinding(start_gateway):
    gw = start_gateway(
        env={"TDAI_EMBEDDING_PROVIDER": "none", "TDAI_GATEWAY_ALLOWED_HOSTS": "memory.internal"}
    )
    body = {"query": "x", "session_key": "s"}
    with gw.client() as c:
        for host in (
            "localhost",
            f"localhost:{gw.port}",
            f"127.0.0.1:{gw.port}",
            "[::1]:8420",
            "memory.internal:9000",
            "LOCALHOST",
        ):
            r = c.post("/recall", json=body, headers={"Host": host})
            assert r.status_code == 200, (host, r.text)
        for host in (
            "evil.example.com",
            f"rebind.attacker.net:{gw.port}",
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


def test_one_exact_authorization_header(start_gateway):
    gw = start_gateway(env={"TDAI_EMBEDDING_PROVIDER": "none", "TDAI_GATEWAY_API_KEY": KEY})
    body = '{"query": "x", "session_key": "s"}'

    def post(auth_lines: list[str]) -> bytes:
        head = (
            "POST /recall HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + "".join(f"Authorization: {v}\r\n" for v in auth_lines)
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n{body}"
        )
        return _raw_request(gw.port, head)

    assert post([f"Bearer {KEY}"]).startswith(b"HTTP/1.1 200")
    assert post(["Bearer wrong", f"Bearer {KEY}"]).startswith(b"HTTP/1.1 401")  # not last-wins
    assert post([f"Bearer {KEY}", f"Bearer {KEY}"]).startswith(b"HTTP/1.1 401")
    # Raw bytes: httpx itself refuses to send a header value with trailing whitespace.
    for value in (f"Bearer  {KEY}", f"Bearer\t{KEY}", f"bearer {KEY}", f"Bearer {KEY}x"):
        assert post([value]).startswith(b"HTTP/1.1 401"), repr(value)
    # Whitespace around the value is not part of it (RFC 9110 5.5): the same key.
    for value in (f"Bearer {KEY} ", f"Bearer {KEY}\t", f"Bearer {KEY} \t"):
        assert post([value]).startswith(b"HTTP/1.1 200"), repr(value)
    # ... and the answer says what is wrong with the header, not that it is missing.
    assert b"exactly 'Authorization: Bearer <key>'" in post([f"bearer {KEY}"])


def test_the_guard_reads_the_key_the_same_whatever_the_server_strips(tmp_path: Path):
    """uvicorn >= 0.55 and h11 strip whitespace around a header value, uvicorn < 0.55 with
    httptools passed it on: the guard itself must give one answer for both."""
    policy = load_policy(None, tmp_path, GatewayAuth(KEY, "configured"))  # as ``serve`` does
    guard = GatewayGuard(app=None, policy=policy, cors_origins=[], max_body=1024)

    def answer(*values: bytes) -> object:
        return guard._authorized([(b"authorization", v) for v in values])

    key = KEY.encode()
    assert answer(b"Bearer " + key) == OWNER
    for padded in (b"Bearer " + key + b" ", b"Bearer " + key + b"\t", b" Bearer " + key):
        assert answer(padded) == OWNER, padded
    for wrong in (b"Bearer  " + key, b"Bearer\t" + key, b"bearer " + key, b"Bearer " + key[:-1]):
        assert isinstance(answer(wrong), str), wrong
    assert "more than one" in answer(b"Bearer " + key, b"Bearer " + key)
    assert "missing" in answer(b"  ")


def _day_file(data_dir: Path) -> Path:
    files = sorted((data_dir / "conversations").glob("*.jsonl"))
    assert files, "no day file yet"
    return files[-1]


def test_health_degradation_clears_when_the_cause_is_gone(start_gateway, scope: str):
    gw = start_gateway(env={"TDAI_EMBEDDING_PROVIDER": "none"})
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


def test_a_500_keeps_the_pooled_connection(start_gateway, scope: str):
    gw = start_gateway(env={"TDAI_EMBEDDING_PROVIDER": "none"})
    turn = {"session_key": "s", "scope": scope, "user_content": "hello", "assistant_content": "hi"}
    with gw.client() as c:
        assert c.post("/capture", json=turn).status_code == 200
        day = _day_file(gw.data_dir)
        aside = day.with_name(day.name + ".aside")
        day.rename(aside)
        day.mkdir()
        try:
            for _ in range(3):
                r = c.post("/capture", json=turn)
                assert r.status_code == 500 and "error" in r.json()
                # the same pooled connection serves the next request
                assert c.get("/health").status_code == 200
                assert (
                    c.post(
                        "/recall", json={"query": "hello", "session_key": "s", "scope": scope}
                    ).status_code
                    == 200
                )
        finally:
            shutil.rmtree(day)
            aside.rename(day)


def test_offload_reads_stay_in_the_callers_scope(start_gateway, scope: str):
    """Another scope's offloaded tool result cannot be read by id, by its ref or by a path."""
    gw = start_gateway(env={"TDAI_EMBEDDING_PROVIDER": "none"})
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
