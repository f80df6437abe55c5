"""Is the gateway on our port ours? Which key do we send? Which scope is this Hermes home?

Why: with zero configuration every Hermes user of a machine points at 127.0.0.1:8420. A gateway
started by another user, or for another data directory, may be the one answering there, and it
must never receive (or answer) our turns. A zero-config gateway writes a random key into its data
directory (``gateway.key``, 0600) and demands it on every route but ``GET /health``; ``/health``
says which data directory it serves. So a gateway is ours when it serves the data directory we
expect (or is the very process we started), and we authenticate with that directory's key. The
verdict is judged from ``/health`` alone, which carries no user data, before any turn is sent.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("hermes_memory_tencentdb")

KEY_FILE = "gateway.key"


def real(path: str | Path) -> str:
    """A path as the kernel sees it (symlinks resolved), for comparing directories."""
    try:
        return os.path.realpath(os.path.expanduser(str(path)))
    except (OSError, ValueError):
        return str(path)


def read_key(directory: str | Path | None) -> str:
    """The token in ``<directory>/gateway.key``; "" when there is none."""
    if not directory:
        return ""
    try:
        return (Path(directory) / KEY_FILE).read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def standard_hermes_home() -> Path:
    """Where Hermes keeps its home when HERMES_HOME is not set."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA", "").strip()
        return (Path(base) if base else Path.home() / "AppData" / "Local") / "hermes"
    return Path.home() / ".hermes"


def default_scope(home: str | Path, profile: str, user_id: str = "") -> str:
    """The zero-config scope of one Hermes home.

    ``~/.hermes`` and its ``profiles/<name>`` keep ``hermes:<profile>`` (what existing users'
    memories are stored under). Any other home gets ``hermes:<profile>@<8 hex>`` from the hash of
    its real path, because Hermes calls every such home profile "default" and two of them must
    not share memory. ``MEMORY_TENCENTDB_SCOPE`` overrides all of this.
    """
    profile = profile or "default"
    home_real = real(home)
    std = real(standard_hermes_home())
    if home_real == std or os.path.dirname(home_real) == os.path.join(std, "profiles"):
        base = f"hermes:{profile}"
    else:
        digest = hashlib.sha256(home_real.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        base = f"hermes:{profile}@{digest}"
    return f"{base}:{user_id}" if user_id else base


@dataclass(frozen=True)
class Verdict:
    """What one ``/health`` answer says about the gateway behind it."""

    ours: bool
    reason: str = ""
    ready: bool = True
    draining: bool = False
    pid: int | None = None
    data_dir: str | None = None
    instance: str | None = None


class Ownership:
    """Judges ``/health`` answers and supplies the token; logs each change of verdict once."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        expected_dir: Path,
        check_dir: bool,
        started_pids: Callable[[], set[int]] | None = None,
    ) -> None:
        self.base_url = base_url
        self.api_key = api_key
        self.expected_dir = expected_dir
        self.check_dir = check_dir
        # Callable -> set of pids this host started for this address (the supervisor's record).
        self.started_pids = started_pids or (lambda: set())
        self._lock = threading.Lock()
        self._served_dir: str | None = None  # the directory whose key we send
        self._last_foreign = ""
        # (instance, token, reason) of a gateway process that answered 401 to that token: it
        # stays "not ours" until it restarts or our key changes, so no re-probe sends it a turn.
        self._rejected: tuple[str, str, str] | None = None

    def token(self) -> str:
        """The configured key, else the key file of the directory the gateway serves."""
        if self.api_key:
            return self.api_key
        return read_key(self._served_dir or self.expected_dir)

    def judge(self, health: dict[str, Any]) -> Verdict:
        if not isinstance(health, dict) or "status" not in health:
            return Verdict(False, f"{self.base_url} answers, but not as a memory-tencentdb gateway")
        served = health.get("data_dir")
        pid = health.get("pid") if isinstance(health.get("pid"), int) else None
        verdict = Verdict(
            ours=True,
            ready=bool(health.get("ready", True)),
            draining=bool(health.get("draining", False)),
            pid=pid,
            data_dir=str(served) if served else None,
            instance=str(health.get("instance") or "") or None,
        )
        rejected = self._rejected
        if rejected is not None and rejected[0] == verdict.instance and rejected[1] == self.token():
            return Verdict(False, rejected[2], pid=pid, data_dir=verdict.data_dir)
        other_dir = self.check_dir and served and real(served) != real(self.expected_dir)
        if other_dir and (pid is None or pid not in self.started_pids()):
            return Verdict(
                False,
                f"the gateway at {self.base_url} (pid {pid}) serves data directory {served},"
                f" we expected {self.expected_dir} (if that gateway is yours, set TDAI_DATA_DIR"
                " or data_dir in memory_tencentdb.json to its directory)",
                pid=pid,
                data_dir=str(served),
            )
        # A gateway we started may serve another directory (a tdai-gateway.yaml in the Hermes
        # home can say so): its key is in the directory it reports.
        with self._lock:
            self._served_dir = str(served) if served else None
        return verdict

    def rejected(self, health: dict[str, Any] | None) -> Verdict:
        """The gateway answered 401 to our key: not ours, whatever it serves."""
        served = (health or {}).get("data_dir") or "an unknown data directory"
        source = "the configured key" if self.api_key else f"the key in {self.expected_dir}"
        reason = (
            f"the gateway at {self.base_url} rejects {source} (it serves {served},"
            f" we expected {self.expected_dir})"
        )
        instance = str((health or {}).get("instance") or "") or None
        if instance:
            self._rejected = (instance, self.token(), reason)
        return Verdict(False, reason, data_dir=(health or {}).get("data_dir"), instance=instance)

    def note(self, verdict: Verdict) -> None:
        """Log a change to "not ours" once (and the way back), never per request."""
        with self._lock:
            if verdict.ours:
                was, self._last_foreign = self._last_foreign, ""
            else:
                was = self._last_foreign
                self._last_foreign = verdict.reason
        if not verdict.ours and was != verdict.reason:
            log.warning(
                "memory_tencentdb: not our gateway: %s; memory paused, no turn is sent to it",
                verdict.reason,
            )
        elif verdict.ours and was:
            log.info("memory_tencentdb: the gateway at %s is ours again", self.base_url)
