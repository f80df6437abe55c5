"""Gateway ownership (issue 8): the zero-config key file, /health identity, the data-dir lock.

A gateway of another data directory on our port must answer 401 to our key, a second ``serve`` on
one data directory must refuse to start, and ``reindex`` must refuse while a gateway holds it.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import httpx

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

IDENTITY = ("status", "ready", "version", "instance", "data_dir", "pid", "auth")


def _cli(gw: GatewayProcess, *args: str, env: dict[str, str] | None = None):
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env={**gw.env(), **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_zero_config_creates_a_key_file_and_demands_it(start_gateway, scope: str):
    gw = start_gateway(env=KEYWORD_ONLY)
    key_file = gw.data_dir / "gateway.key"
    token = key_file.read_text("utf-8").strip()
    assert len(token) >= 40 and stat.S_IMODE(key_file.stat().st_mode) == 0o600
    body = {"query": "咖啡", "session_key": "s", "scope": scope}
    health = httpx.get(gw.base_url + "/health", timeout=10).json()  # open, no key
    assert all(k in health for k in IDENTITY), health
    assert health["auth"] == "key-file" and health["pid"] == gw.proc.pid
    assert health["data_dir"] == str(gw.data_dir.resolve())
    assert httpx.post(gw.base_url + "/recall", json=body, timeout=10).status_code == 401
    wrong = {"Authorization": "Bearer " + token[:-1] + "x"}
    assert httpx.post(gw.base_url + "/recall", json=body, headers=wrong).status_code == 401
    with gw.client() as c:
        assert c.post("/recall", json=body).status_code == 200
    assert token not in gw.log()  # the key never appears in the log

    first = health["instance"]
    gw.restart()
    assert key_file.read_text("utf-8").strip() == token  # reused, not replaced
    again = httpx.get(gw.base_url + "/health", timeout=10).json()
    assert again["instance"] != first and again["pid"] == gw.proc.pid


def test_another_data_directory_answers_401_to_our_key(start_gateway, tmp_path, scope: str):
    """The privacy defect: a gateway of another HOME on the port must not accept our turns."""
    ours = start_gateway(env=KEYWORD_ONLY)
    foreign = start_gateway(env=KEYWORD_ONLY, data_dir=tmp_path / "other-home" / "data")
    assert ours.token and foreign.token and ours.token != foreign.token
    turn = {
        "user_content": "My locker code is 4711",
        "assistant_content": "ok",
        "session_key": "s",
        "scope": scope,
    }
    r = httpx.post(foreign.base_url + "/capture", json=turn, headers=ours.headers, timeout=10)
    assert r.status_code == 401
    health = httpx.get(foreign.base_url + "/health", timeout=10).json()
    assert health["counts"]["l0_messages"] == 0
    assert health["data_dir"] != str(ours.data_dir.resolve())
    # The CLI pointed at our data directory but the foreign port says so, and is refused.
    env = {"TDAI_GATEWAY_PORT": str(foreign.port)}
    found = _cli(ours, "search", "locker", "--scope", scope, env=env)
    assert found.returncode == 1 and "refused our key" in found.stderr
    status = _cli(ours, "status", env=env)
    assert "serves another data directory" in status.stdout


def test_auth_off_and_configured_key_make_no_key_file(start_gateway, scope: str):
    body = {"query": "x", "session_key": "s", "scope": scope}
    off = start_gateway(env={**KEYWORD_ONLY, "TDAI_GATEWAY_AUTH": "off"})
    assert not (off.data_dir / "gateway.key").exists() and off.token is None
    assert httpx.post(off.base_url + "/recall", json=body, timeout=10).status_code == 200
    assert httpx.get(off.base_url + "/health").json()["auth"] == "off"
    assert "auth off" in off.log()

    keyed = start_gateway(env={**KEYWORD_ONLY, "TDAI_GATEWAY_API_KEY": "configured-key-123"})
    assert not (keyed.data_dir / "gateway.key").exists()
    assert httpx.get(keyed.base_url + "/health").json()["auth"] == "configured"
    with keyed.client() as c:
        assert c.post("/recall", json=body).status_code == 200


def test_auth_off_from_the_config_file(start_gateway, tmp_path, scope: str):
    data = tmp_path / "cfg-data"
    data.mkdir()
    (data / "tdai-gateway.yaml").write_text("server:\n  auth: off\n", "utf-8")
    gw = start_gateway(env=KEYWORD_ONLY, data_dir=data)
    body = {"query": "x", "session_key": "s", "scope": scope}
    assert httpx.post(gw.base_url + "/recall", json=body, timeout=10).status_code == 200
    assert not (data / "gateway.key").exists()


def test_one_gateway_per_data_directory(start_gateway):
    gw = start_gateway(env=KEYWORD_ONLY)
    lock = json.loads((gw.data_dir / "gateway.lock").read_text("utf-8"))
    assert lock["pid"] == gw.proc.pid and lock["port"] == gw.port
    health = httpx.get(gw.base_url + "/health").json()
    assert lock["instance"] == health["instance"] and lock["started_at"]

    second = GatewayProcess(gw.data_dir, env=KEYWORD_ONLY)
    done = subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "serve"],
        env=second.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert f"pid {gw.proc.pid}" in done.stderr and str(gw.port) in done.stderr
    assert "listening" not in done.stderr
    # The refused start did not disturb the holder's lock details.
    assert json.loads((gw.data_dir / "gateway.lock").read_text("utf-8"))["pid"] == gw.proc.pid
    assert httpx.get(gw.base_url + "/health").status_code == 200


def test_reindex_refused_while_a_gateway_runs(start_gateway, scope: str):
    gw = start_gateway(env=KEYWORD_ONLY)
    with gw.client() as c:
        turn = {"user_content": "我住在成都", "assistant_content": "好", "session_key": "s"}
        assert c.post("/capture", json={**turn, "scope": scope}).status_code == 200
    before = os.stat(gw.data_dir / "memory.db").st_ino
    done = _cli(gw, "reindex")
    assert done.returncode == 3
    assert "in use by gateway" in done.stderr and f"pid {gw.proc.pid}" in done.stderr
    assert "needs the gateway stopped" in done.stderr
    assert os.stat(gw.data_dir / "memory.db").st_ino == before  # nothing was swapped
    with gw.client() as c:
        r = c.post("/search/conversations", json={"query": "成都", "scope": scope})
        assert r.json()["items"]
    gw.stop()
    done = _cli(gw, "reindex")
    assert done.returncode == 0, done.stderr
    assert "2 messages" in done.stdout
