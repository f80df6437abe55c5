"""Shared fixtures: real gateway processes on free ports, each with its own data directory, and
the same gateway app in process (``tests/support/inprocess.py``) for route checks that need no
process."""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import gateway as gateway_support
from tests.support import inprocess, postgres
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess
from tests.support.inprocess import InProcessGateway


@pytest.fixture(scope="session", autouse=True)
def _test_postgres() -> Iterator[None]:
    """Stop the session's PostgreSQL, if a test started one (``tests/support/postgres.py``)."""
    yield
    postgres.stop()


# What makes a test ``slow`` without being marked so: a gateway process (seconds to start, each
# loading the embedding models) or a real host. ``make test-fast`` runs the rest (``-m "not
# slow"``): unit tests and the in-process route tests (``app_gateway``).
PROCESS_FIXTURES = {"start_gateway", "shared_gateway"}
HOST_DIRS = {"hermes", "openclaw"}


def _drives_a_host(item: pytest.Item) -> bool:
    return bool(HOST_DIRS & set(item.path.parts))


def _spawns(module: object) -> bool:
    """A module that can start gateway processes or run commands (``subprocess``)."""
    return hasattr(module, "GatewayProcess") or hasattr(module, "subprocess")


def _starts_processes(item: pytest.Item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    if PROCESS_FIXTURES & names or _drives_a_host(item):
        return True
    if _spawns(getattr(item, "module", None)):
        return True
    # A fixture of a sub-directory's conftest or of the module that starts a gateway.
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    for name in names:
        for fixturedef in defs.get(name, ()):
            module = sys.modules.get(getattr(fixturedef.func, "__module__", ""))
            if module is not None and module.__name__ != __name__ and _spawns(module):
                return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that start gateway processes or hosts are ``slow``. With
    ``TDAI_TEST_STORE_BACKEND=postgres``, tests of SQLite-only features are skipped.

    The order files run in (the Makefile keeps it with ``--no-loadscope-reorder``): the ones that
    drive a real host, then the others that start processes, then the rest, each group as
    collected. A host file takes one to three minutes with few tests, so pytest-xdist's order
    (most tests first) left them to the end, where one alone stretched a parallel run (the last
    ~100 s of 1,005 at ~70% CPU, 3 workers on 2 cores); this order: 890 and 896 s. Longest first
    by measured file durations (985 s) and xdist's order within the middle group (998 s) were
    each run once, within this machine's run-to-run spread (bench/RESULTS.md "Session 23"), so
    the simpler rule stays."""
    for item in items:
        if _starts_processes(item):
            item.add_marker(pytest.mark.slow)
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (not _drives_a_host(item), item.path not in slow_files))
    if postgres.backend_under_test() != "postgres":
        return
    for item in items:
        mark = item.get_closest_marker("sqlite_only")
        if mark is not None:
            why = mark.args[0] if mark.args else "SQLite-only feature"
            item.add_marker(pytest.mark.skip(reason=f"store backend postgres: {why}"))


def _starts() -> Counter[str]:
    return Counter({**gateway_support.STARTS, **inprocess.STARTS})


# What the workers of a parallel run (``pytest -n``, pytest-xdist) counted, summed as they end.
_WORKER_STARTS: Counter[str] = Counter()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker of a parallel run hands its gateway counts to the controller."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["gateway_starts"] = dict(_starts())  # execnet sends plain types only


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    _WORKER_STARTS.update(getattr(node, "workeroutput", {}).get("gateway_starts", {}))


def pytest_terminal_summary(terminalreporter) -> None:
    """How many gateways this run started, by kind: the subprocess ones cost seconds each."""
    starts = _starts() + _WORKER_STARTS
    terminalreporter.write_line(
        f"gateways started: {starts['subprocess']} subprocess, {starts['in_process']} in process"
    )


@pytest.fixture(scope="module")
def app_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessGateway]:
    """One in-process gateway app (embedded default) for a whole module; tests isolate by scope.
    For route checks: shapes, bad input, auth and status codes."""
    gw = InProcessGateway(tmp_path_factory.mktemp("app") / "data").start()
    yield gw
    gw.stop()


@pytest.fixture
def start_app_gateway(tmp_path: Path) -> Iterator[Callable[..., InProcessGateway]]:
    """Factory: ``start_app_gateway(env={...})`` builds an in-process gateway with that
    configuration; all are stopped at teardown."""
    started: list[InProcessGateway] = []

    def _start(env: dict[str, str] | None = None, data_dir: Path | None = None) -> InProcessGateway:
        gw = InProcessGateway(data_dir or tmp_path / f"app-{len(started)}", env=env)
        started.append(gw)
        return gw.start()

    yield _start
    for gw in started:
        gw.stop()


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
