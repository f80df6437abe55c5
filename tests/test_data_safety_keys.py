"""The key policy fails closed (issue 22): a keys file the JSON reader rejects (nesting deep
enough for a ``RecursionError``), a key with whitespace around it, a bare ``"*"`` scope. At start
each stops ``serve`` with exit 2 naming the file (no traceback); at run time the last good keys
stay in force, no request gets a 5xx, ``/health`` names the problem, and fixing the file (a
revocation in it) takes effect within about a second."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

ALICE = "alice-key-0123456789abcdef"
BOB = "bob-key-0123456789abcdef"
GOOD = {"principals": {"alice": {"key": ALICE}, "bob": {"key": BOB}}}
DEEP = '{"principals": ' + "[" * 200_000 + "]" * 200_000 + "}"

BAD_AT_START = [
    (DEEP, "nested too deeply"),
    (json.dumps({"principals": {"x": {"key": " " + "k" * 20 + " "}}}), "principals.x.key"),
    (json.dumps({"principals": {"x": {"key": "k" * 20 + "\n"}}}), "principals.x.key"),
    (json.dumps({"principals": {"x": {"key": "k" * 15}}}), "principals.x.key"),
    (json.dumps({"principals": {"x": {"key": "k" * 20, "scopes": ["*"]}}}), '"owner": true'),
    (json.dumps({"principals": {"x": {"key": "k" * 20, "scopes": [" * "]}}}), '"owner": true'),
]


@pytest.mark.parametrize(("text", "says"), BAD_AT_START)
def test_a_bad_keys_file_at_start_exits_2_naming_it(tmp_path: Path, text: str, says: str):
    data = tmp_path / "data"
    data.mkdir()
    (data / "keys.json").write_text(text, "utf-8")
    gw = GatewayProcess(data, env=KEYWORD_ONLY)
    run = subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "serve"],
        env=gw.env(),
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr, run.stderr
    assert str(data / "keys.json") in run.stderr and says in run.stderr, run.stderr


def _status(gw: GatewayProcess, key: str) -> int:
    with gw.client(token=key) as c:
        return c.get("/scopes").status_code


def _health(gw: GatewayProcess) -> dict:
    return httpx.get(gw.base_url + "/health", timeout=10).json()


def _write(data: Path, text: str) -> None:
    path = data / "keys.json"
    path.write_text(text, "utf-8")
    path.chmod(0o600)


def _eventually(check, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


@pytest.mark.parametrize(
    "bad",
    [
        DEEP,
        json.dumps({"principals": {"bob": {"key": BOB + " "}}}),
        json.dumps({"principals": {"bob": {"key": BOB, "scopes": ["*"]}}}),
    ],
    ids=["deep-nesting", "key-whitespace", "star-scope"],
)
def test_a_bad_keys_file_at_run_time_keeps_the_last_good_keys(start_gateway, tmp_path, bad):
    data = tmp_path / "data"
    data.mkdir()
    _write(data, json.dumps(GOOD))
    gw = start_gateway(env=KEYWORD_ONLY, data_dir=data)
    assert _status(gw, ALICE) == 200 and _status(gw, BOB) == 200
    # A file that revokes alice but cannot be used: nothing changes, nothing answers 5xx.
    _write(data, bad)
    health = _eventually(lambda: (h := _health(gw))["keys_file"]["error"] and h)
    assert health, "the bad keys file never showed in /health"
    assert "keys.json" in health["keys_file"]["error"]
    assert health["status"] == "degraded"
    assert any("keys file not used" in d for d in health["degraded"])
    for _ in range(15):  # over more than one reload check
        assert _status(gw, ALICE) == 200 and _status(gw, BOB) == 200
        assert _status(gw, "nobody-0123456789abcdef") == 401
        time.sleep(0.1)
    # Fixed (and alice revoked in it): in force within about a second, the error gone.
    _write(data, json.dumps({"principals": {"bob": {"key": BOB}}}))
    assert _eventually(lambda: _status(gw, ALICE) == 401), "the revocation never took effect"
    assert _status(gw, BOB) == 200
    assert _eventually(lambda: _health(gw)["keys_file"]["error"] is None)
