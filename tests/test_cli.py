"""The `memory-tencentdb` command: client commands against a running gateway (status, search,
what a refusal says) and `serve`'s start-up errors, through the real command."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from memory_tencentdb import __version__
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess, free_port


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TDAI_", "MEMORY_TENCENTDB_"))}
    env.update(extra)
    return env


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", *args],
        env=env if env is not None else _clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def test_version():
    r = _cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"memory-tencentdb {__version__}", r


@pytest.fixture(scope="module")
def keyed_gateway(tmp_path_factory: pytest.TempPathFactory):
    """A zero-config gateway (its own gateway.key) holding many long memories in one scope."""
    gw = GatewayProcess(tmp_path_factory.mktemp("cli") / "data", env=KEYWORD_ONLY).start()
    with gw.client() as c:
        for i in range(30):
            r = c.post(
                "/memories",
                json={
                    "content": f"长记忆 long memory {i}: " + "用户喜欢爬山 hiking " * 150,
                    "type": "episodic",
                    "session_key": "s",
                    "scope": "hermes:default",
                },
            )
            assert r.status_code == 201, r.text
    yield gw
    gw.stop()


def test_status_and_search_take_host_port_and_data_dir(keyed_gateway: GatewayProcess, tmp_path):
    gw = keyed_gateway
    assert (gw.data_dir / "gateway.key").exists()
    where = ("--host", "127.0.0.1", "--port", str(gw.port), "--data-dir", str(gw.data_dir))
    # No TDAI_* in the environment, another working directory: only the options say where.
    status = _cli("status", *where, cwd=tmp_path)
    assert status.returncode == 0, status.stdout + status.stderr
    assert "status:" in status.stdout and "another data directory" not in status.stdout
    found = _cli(
        "search", "爬山", "--scope", "hermes:default", "--limit", "2", *where, cwd=tmp_path
    )
    assert found.returncode == 0, found.stderr
    assert "long memory" in found.stdout
    # Without the data directory, the default one's key is not this gateway's: a clear refusal.
    other = _cli("search", "爬山", "--port", str(gw.port), env=_clean_env(HOME=str(tmp_path)))
    assert other.returncode == 1 and "refused our key" in other.stderr, other.stderr


def test_search_help_names_the_hosts_scopes():
    out = _cli("search", "--help").stdout
    assert "hermes:default" in out and "OpenClaw" in out


def test_search_into_a_closed_pipe_is_quiet(keyed_gateway: GatewayProcess, tmp_path):
    gw = keyed_gateway
    err = tmp_path / "stderr.txt"
    cmd = (
        f"{sys.executable} -m memory_tencentdb search 爬山 --scope hermes:default --limit 30"
        f" --port {gw.port} --data-dir {gw.data_dir} 2>{err} | head -c 20 >/dev/null;"
        " echo ${PIPESTATUS[0]}"
    )
    r = subprocess.run(
        ["bash", "-c", cmd], env=_clean_env(), capture_output=True, text=True, timeout=60
    )
    stderr = err.read_text()
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert r.stdout.strip() == "0", (r.stdout, stderr)


def test_port_in_use_fails_clearly_without_claiming_to_listen(tmp_path):
    port = free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        env = _clean_env(
            TDAI_DATA_DIR=str(tmp_path / "data"),
            TDAI_GATEWAY_PORT=str(port),
            TDAI_EMBEDDING_PROVIDER="none",
        )
        r = _cli("serve", env=env, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode not in (0, None), out
    assert "listening on" not in out, out
    assert f"127.0.0.1:{port}" in out and "already in use" in out, out
    assert not (tmp_path / "data" / "gateway.lock").exists() or "Traceback" not in out


def test_unset_variable_for_the_gateway_key_is_a_startup_error(tmp_path):
    data = tmp_path / "data"
    config = tmp_path / "tdai-gateway.yaml"
    config.write_text("server:\n  apiKey: ${MEMORY_API_KEY_FOR_TEST}\n", "utf-8")
    env = _clean_env(
        TDAI_DATA_DIR=str(data),
        TDAI_GATEWAY_CONFIG=str(config),
        TDAI_GATEWAY_PORT=str(free_port()),
        TDAI_EMBEDDING_PROVIDER="none",
    )
    r = _cli("serve", env=env, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "server.apiKey" in r.stderr and "MEMORY_API_KEY_FOR_TEST is not set" in r.stderr
    assert "listening on" not in r.stderr


def test_search_without_scope_points_at_the_scopes_that_have_memories(
    keyed_gateway: GatewayProcess,
):
    where = ("--port", str(keyed_gateway.port), "--data-dir", str(keyed_gateway.data_dir))
    r = _cli("search", "爬山", *where)
    assert r.returncode == 0, r.stderr
    assert "No matching memories found." in r.stdout
    # The memories are in the Hermes scope: say so instead of a bare "nothing".
    assert "hermes:default" in r.stderr and "--scope" in r.stderr, r.stderr


def test_cli_messages_point_at_the_cli(keyed_gateway: GatewayProcess):
    """An offline command refused while the gateway runs names the command that stops it, and
    a refused search prints the gateway's message, not its raw JSON."""
    refused = _cli("reindex", env=keyed_gateway.env())
    assert refused.returncode == 3, refused.stderr
    assert "memory-tencentdb stop" in refused.stderr
    empty = _cli("search", "", env=keyed_gateway.env())
    assert empty.returncode == 1
    assert "query: String should have at least 1 character" in empty.stderr
    assert '{"error"' not in empty.stderr
