"""What the real server does on the wire (a gateway process, raw sockets):

- one ``Authorization`` header, exactly ``Bearer <token>``: duplicates and whitespace inside the
  value are 401; whitespace around it is not part of the value (RFC 9110) and is ignored;
- a 500 does not cost the client its pooled keep-alive connection.
"""

from __future__ import annotations

import shutil
import socket
from pathlib import Path

from memory_tencentdb.gateway.access import OWNER, load_policy
from memory_tencentdb.gateway.security import GatewayGuard
from memory_tencentdb.ownership import GatewayAuth
from tests.support.gateway import KEYWORD_ONLY

KEY = "audit-key-4c1d9b"


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


def test_one_exact_authorization_header(start_gateway):
    gw = start_gateway(env={**KEYWORD_ONLY, "TDAI_GATEWAY_API_KEY": KEY})
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


def test_a_500_keeps_the_pooled_connection(start_gateway, scope: str):
    gw = start_gateway(env=KEYWORD_ONLY)
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
