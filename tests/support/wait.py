"""Polling for what the gateway, a host or a fake model does in the background."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    fn: Callable[[], T], timeout: float = 20.0, what: str = "condition", every: float = 0.2
) -> T:
    """Call ``fn`` every ``every`` seconds until it returns something truthy, and return that;
    after ``timeout`` seconds fail with ``what`` and the last value (what was seen instead)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}; last value: {last!r}")
