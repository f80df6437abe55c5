"""One real gateway for all OpenClaw bridge tests: starting one costs seconds, and the tests keep
out of each other's way by session key and scope."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.gateway import GatewayProcess


@pytest.fixture(scope="package")
def bridge_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    gw = GatewayProcess(tmp_path_factory.mktemp("openclaw-bridge") / "data").start()
    yield gw
    gw.stop()
