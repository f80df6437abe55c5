"""Fixtures for the Hermes provider tests.

The end-to-end tests need the real hermes-agent in its own venv (scripts/test-hosts.d/hermes.sh);
without it they skip, unless MEMORY_TENCENTDB_REQUIRE_HOSTS=1 (CI), where that is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess, free_port

from .harness import HermesHome, hermes_venv


@pytest.fixture
def hermes() -> Path:
    """The Hermes venv, or skip / fail as the environment demands."""
    venv = hermes_venv()
    if not (venv / "bin" / "hermes").exists():
        msg = (
            f"hermes-agent venv missing at {venv}; create it with "
            "`TEST_CACHE=... bash scripts/test-hosts.d/hermes.sh` (or `make hosts`)"
        )
        if os.environ.get("MEMORY_TENCENTDB_REQUIRE_HOSTS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return venv


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM(default_reply="FAKE-REPLY") as fake:
        yield fake


@pytest.fixture
def home(tmp_path: Path, llm: FakeLLM, hermes: Path) -> Iterator[HermesHome]:
    h = HermesHome.create(tmp_path, llm.base_url, free_port())
    yield h
    h.kill_started_gateways()


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[GatewayProcess]:
    """A real gateway the test itself runs, on the data directory ``home`` expects."""
    gw = GatewayProcess(tmp_path / "data").start()
    yield gw
    gw.stop()
