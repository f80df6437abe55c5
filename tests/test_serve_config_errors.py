"""``serve`` refuses to start on a bad configuration and names what is wrong (exit code 2):
a bad value, an unreadable config file, a bad or missing keys file. Through the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess, free_port

TEAM = "team:research"


def test_bad_config_stops_startup_naming_the_field(tmp_path):
    gw = GatewayProcess(tmp_path / "d", env={"TDAI_MEMORY__RECALL__MAX_RESULTS": "lots"})
    done = subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "serve"],
        env=gw.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "memory.recall.maxResults" in done.stderr
    assert "TDAI_MEMORY__RECALL__MAX_RESULTS" in done.stderr

    (tmp_path / "tdai-gateway.yaml").write_text("server:\n  port: [oops\n", "utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "serve", "--port", str(free_port())],
        env={**gw.env(), "TDAI_GATEWAY_CONFIG": str(tmp_path / "tdai-gateway.yaml")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "tdai-gateway.yaml" in done.stderr


BAD_FILES = [
    ("{not json", "not valid JSON"),
    ('{"principals": {"x": {"key": "short"}}}', "principals.x.key"),
    (
        json.dumps({"principals": {"x": {"key": "k" * 20}}, "scopes": {TEAM: {"readers": ["y"]}}}),
        "'y' is not a principal",
    ),
    (json.dumps({"principals": {"x": {"key": "k" * 20, "admin": True}}}), "principals.x.admin"),
    (
        json.dumps({"principals": {"x": {"key": "k" * 20}, "y": {"key": "k" * 20}}}),
        "the same key as 'x'",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_bad_keys_file_stops_startup_with_a_clear_error(tmp_path: Path, text, message):
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
    assert "keys.json" in run.stderr and message in run.stderr, run.stderr


def test_missing_explicit_keys_file_is_an_error(tmp_path: Path):
    gw = GatewayProcess(
        tmp_path / "data",
        env={**KEYWORD_ONLY, "TDAI_GATEWAY_KEYS_FILE": "nope.json"},
    )
    gw.data_dir.mkdir(parents=True)
    run = subprocess.run(
        [sys.executable, "-m", "memory_tencentdb", "serve"],
        env=gw.env(),
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "server.keysFile" in run.stderr, run.stderr
