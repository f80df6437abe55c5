"""Shared fixtures: real gateway processes on free ports, each with its own data directory."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import postgres
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess


@pytest.fixture(scope="session", autouse=True)
def _test_postgres() -> Iterator[None]:
    """Stop the session's PostgreSQL, if a test started one (``tests/support/postgres.py``)."""
    yield
    postgres.stop()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With ``TDAI_TEST_STORE_BACKEND=postgres``, tests of SQLite-only features are skipped."""
    if postgres.backend_under_test() != "postgres":
        return
    for item in items:
        mark = item.get_closest_marker("sqlite_only")
        if mark is not None:
            why = mark.args[0] if mark.args else "SQLite-only feature"
            item.add_marker(pytest.mark.skip(reason=f"store backend postgres: {why}"))


@pytest.fixture
def start_gateway(tmp_path: Path) -> Iterator[Callable[..., GatewayProcess]]:
    """Factory: ``start_gateway(env={...})`` starts a gateway; all are stopped at teardown."""
    started: list[GatewayProcess] = []

    def _start(
        env: dict[str, str] | None = None, data_dir: Path | None = None, **kw
    ) -> GatewayProcess:
        gw = GatewayProcess(data_dir or tmp_path / f"data-{len(started)}", env=env, **kw)
        started.append(gw)
        return gw.start()

    yield _start
    for gw in started:
        gw.stop()


@pytest.fixture(scope="module")
def shared_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One gateway with the embedded default for a whole module; tests isolate by scope."""
    gw = GatewayProcess(tmp_path_factory.mktemp("shared") / "data").start()
    yield gw
    gw.stop()


@pytest.fixture
def scope() -> str:
    """A fresh scope per test, so tests sharing a gateway never see each other's data."""
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake
