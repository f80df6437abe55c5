"""Finds, starts and stops the local gateway so that Hermes users configure nothing.

Why it looks like this (each point answers a defect of the original provider):

- Nothing happens before ``initialize``; the start runs on a background thread, so
  ``initialize`` returns at once and a slow gateway start never stalls Hermes.
- One supervisor per gateway address per process, reference counted: in Hermes's messaging
  gateway there is one provider per chat session in a single process, and one session ending
  must not kill the gateway the others use.
- Across processes, a lock file serialises starts (never two gateways for one port) and every
  Hermes process using the gateway holds a lease file. A gateway that a provider started is
  recorded in a pid file; the last lease holder to leave stops it, so ``hermes chat -q`` leaves
  no orphan behind, and a gateway orphaned by a crashed Hermes is adopted and later stopped.
  A gateway the user started themselves has no pid file and is never touched.
- If the gateway dies, the next failed call asks for a restart (throttled, single flight).
- A gateway is adopted only if ``/health`` shows it is ours (ownership.py). A port that
  accepts connections but does not answer (a frozen gateway), or a live holder of the data
  directory's ``gateway.lock``, is never a reason to start a second gateway: the breaker opens
  and memory pauses instead, so a turn costs nothing while it lasts.
- The last user stops the gateway with ``POST /admin/shutdown {"drain_s": 30}`` (SIGTERM to its
  pid if that route is missing) and does not wait: the gateway finishes pending L1/L2/persona
  work first. A session that finds our gateway draining cancels the drain and keeps using it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .client import FOREIGN, OURS, UNRESPONSIVE, GatewayClient
from .config import Settings
from .ownership import Verdict

try:  # POSIX only; elsewhere starts are serialised per process only.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]  # checked before each use

log = logging.getLogger("hermes_memory_tencentdb")

RESTART_THROTTLE_S = 10.0  # first retry after a failed start; doubles up to the max
RESTART_THROTTLE_MAX_S = 300.0
STOP_TIMEOUT_S = 5.0
PROBE_TIMEOUT_S = 1.0  # a /health that takes longer than this is a gateway that hangs
DRAIN_S = 30  # how long the gateway may finish pending work after the last Hermes left
READY_POLL_S = 0.15

IDLE = "idle"
STARTING = "starting"
UP = "up"
DOWN = "down"
NOT_OURS = "not_ours"


def checkout_root() -> Path:
    """The repository this plugin folder lives in (through the user's symlink)."""
    return Path(__file__).resolve().parent.parent


def find_gateway_command(settings: Settings) -> tuple[list[str], str] | None:
    """The command that starts a gateway, and where it was found; None if there is none."""
    if settings.gateway_cmd:
        try:
            argv = shlex.split(settings.gateway_cmd)
        except ValueError:
            argv = []
        return (argv, "MEMORY_TENCENTDB_GATEWAY_CMD") if argv else None
    venv = checkout_root() / ".venv"
    for exe in (venv / "bin" / "memory-tencentdb", venv / "Scripts" / "memory-tencentdb.exe"):
        if exe.is_file() and os.access(exe, os.X_OK):
            return [str(exe), "serve"], "checkout .venv"
    on_path = shutil.which("memory-tencentdb")
    if on_path:
        return [on_path, "serve"], "PATH"
    try:
        if importlib.util.find_spec("memory_tencentdb") is not None:
            return [sys.executable, "-m", "memory_tencentdb", "serve"], "importable package"
    except (ImportError, ValueError):
        pass
    return None


def data_dir(settings: Settings | None = None) -> Path:
    """The gateway's data directory we expect (configured, else the gateway's default)."""
    return (settings or Settings.load()).expected_data_dir


def run_dir(settings: Settings | None = None) -> Path:
    """Where lock, pid and lease files live: shared by every Hermes profile using this data."""
    explicit = os.environ.get("MEMORY_TENCENTDB_RUN_DIR", "").strip()
    return Path(explicit).expanduser() if explicit else data_dir(settings) / "run"


def lock_holder(directory: Path) -> dict[str, Any] | None:
    """The live process named in ``<data_dir>/gateway.lock``, if any (read only, never locks).

    Taking the lock to test it could make a gateway that is starting right now fail, so only
    the holder's details are read and its pid checked.
    """
    try:
        info = json.loads((directory / "gateway.lock").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
        return None
    pid = info["pid"]
    if pid == os.getpid() or not pid_alive(pid):
        return None
    cmd = _cmdline(pid)
    if cmd is not None and "memory" not in cmd and "tdai" not in cmd:
        return None  # the pid was reused by something else
    return info


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _cmdline(pid: int) -> str | None:
    """The process's command line on Linux; None where /proc is unavailable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", "replace").strip()


class RunFiles:
    """Lock, pid and lease files for one gateway port."""

    def __init__(self, directory: Path, port: int) -> None:
        self.dir = directory
        self.lock_path = directory / f"hermes-gateway-{port}.lock"
        self.pid_path = directory / f"hermes-gateway-{port}.pid"
        self.leases = directory / f"hermes-gateway-{port}.leases"

    @contextlib.contextmanager
    def locked(self, timeout_s: float) -> Iterator[bool]:
        """Hold the cross-process start lock; yields False if it could not be taken in time."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as fh:
            if fcntl is None:  # pragma: no cover
                yield True
                return
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if time.monotonic() >= deadline:
                        yield False
                        return
                    time.sleep(0.1)
            try:
                yield True
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    def read_pid(self) -> dict[str, Any] | None:
        try:
            data = json.loads(self.pid_path.read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None

    def write_pid(self, record: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.pid_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record), "utf-8")
        tmp.replace(self.pid_path)

    def clear_pid(self, pid: int) -> None:
        record = self.read_pid()
        if record is not None and record.get("pid") == pid:
            with contextlib.suppress(OSError):
                self.pid_path.unlink()

    def add_lease(self) -> None:
        self.leases.mkdir(parents=True, exist_ok=True)
        (self.leases / str(os.getpid())).write_text(str(time.time()), "utf-8")

    def drop_lease(self) -> None:
        with contextlib.suppress(OSError):
            (self.leases / str(os.getpid())).unlink()

    def other_live_leases(self) -> list[int]:
        """Pids of other processes still using the gateway; stale leases are removed."""
        out: list[int] = []
        if not self.leases.is_dir():
            return out
        for entry in self.leases.iterdir():
            try:
                pid = int(entry.name)
            except ValueError:
                continue
            if pid == os.getpid():
                continue
            if pid_alive(pid):
                out.append(pid)
            else:
                with contextlib.suppress(OSError):
                    entry.unlink()
        return out


def _recorded_process_alive(record: dict[str, Any]) -> bool:
    """Is the pid file's process still the gateway we started (not a reused pid)?"""
    pid = int(record.get("pid", 0))
    if not pid_alive(pid):
        return False
    actual = _cmdline(pid)
    expected = record.get("argv") or []
    if actual is None or not expected:
        return True
    return Path(str(expected[0])).name in actual


class GatewaySupervisor:
    """Keeps a gateway running at one address for as long as any provider in this process needs it."""

    def __init__(self, settings: Settings, client: GatewayClient) -> None:
        self.settings = settings
        self.client = client
        self.files = RunFiles(run_dir(settings), settings.gateway_port)
        self.state = IDLE
        self.detail = ""
        self.ready = False  # models loaded, as last seen on /health
        self._warned = ""
        self._lock = threading.Lock()
        self._settled = threading.Event()
        self._refs = 0
        self._closing = False
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._last_start = 0.0
        self._retry_after_s = RESTART_THROTTLE_S
        self._leased = False
        self._atexit_registered = False

    # -- reference counting ------------------------------------------------------------------

    def acquire(self) -> None:
        """A provider starts using the gateway (from ``initialize``)."""
        with self._lock:
            self._refs += 1
            self._closing = False
            if not self._leased:
                try:
                    self.files.add_lease()
                    self._leased = True
                except OSError as exc:
                    log.warning(
                        "memory_tencentdb: cannot write lease in %s: %s", self.files.dir, exc
                    )

    def release(self) -> None:
        """A provider is done (from ``shutdown``); the last one out stops what was started."""
        with self._lock:
            self._refs = max(0, self._refs - 1)
            if self._refs > 0:
                return
            self._closing = True
            thread = self._thread
        if thread is not None and thread.is_alive():
            thread.join(2.0)
        self._stop_if_last()

    # -- starting ----------------------------------------------------------------------------

    def ensure_started(self) -> None:
        """Make sure a gateway answers, starting one in the background if needed. Never blocks."""
        with self._lock:
            if self._closing or (self._thread is not None and self._thread.is_alive()):
                return
            self._last_start = time.monotonic()
            self.state = STARTING
            self._settled.clear()
            self._thread = threading.Thread(
                target=self._start_worker, name="memory-tencentdb-supervisor", daemon=True
            )
            self._thread.start()

    def notice_failure(self) -> None:
        """A call failed to reach the gateway: restart it if we may (throttled, single flight)."""
        if self._closing or self.state == STARTING:
            return
        # 10 s after a gateway that was up died; a gateway that will not start is retried
        # less and less often (the delay doubles after each failed start, up to 5 minutes).
        if time.monotonic() - self._last_start < self._retry_after_s:
            return
        self.ensure_started()

    def wait_until_settled(self, timeout_s: float) -> bool:
        """Wait (bounded) for a start in progress; True if the gateway is up."""
        if self.state == STARTING:
            self._settled.wait(max(0.0, timeout_s))
        return self.state == UP

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait (bounded) until the gateway has loaded its models; True if it has.

        Why: ``/health`` answers about a second after start, the embedding models need a few
        more; a recall in between is keyword-only or empty, which made the first turn of every
        one-shot session recall nothing.
        """
        deadline = time.monotonic() + max(0.0, timeout_s)
        while not self.ready and self.state == UP and not self._closing:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            kind, verdict = self.client.probe(min(PROBE_TIMEOUT_S, max(0.05, left)))
            if kind == OURS and verdict is not None:
                self.ready = verdict.ready
                if self.ready:
                    break
            elif kind == FOREIGN:
                self._settle(NOT_OURS, self.client.paused)
                break
            time.sleep(min(READY_POLL_S, max(0.0, deadline - time.monotonic())))
        return self.ready

    def started_pids(self) -> set[int]:
        """Gateways this host started for this address (they are ours whatever they serve)."""
        out: set[int] = set()
        if self._proc is not None:
            out.add(self._proc.pid)
        record = self.files.read_pid()
        if record is not None:
            out.add(int(record["pid"]))
        return out

    @property
    def owned_pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _settle(self, state: str, detail: str = "") -> None:
        self.state = state
        self.detail = detail
        if state == UP:
            self._retry_after_s = RESTART_THROTTLE_S
            self.client.breaker.reset()
        else:
            self._retry_after_s = min(self._retry_after_s * 2, RESTART_THROTTLE_MAX_S)
        self._settled.set()

    def _start_worker(self) -> None:
        try:
            self._start()
        except Exception as exc:  # never let the thread die silently
            log.exception("memory_tencentdb: gateway supervision failed")
            self._settle(DOWN, f"supervisor error: {exc}")

    def _warn_once(self, message: str) -> None:
        if message != self._warned:
            self._warned = message
            log.warning("memory_tencentdb: %s", message)

    def _start(self, again: bool = True) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None  # reaped: a gateway we started has died
        kind, verdict = self.client.probe(PROBE_TIMEOUT_S)
        if kind == OURS and verdict is not None:
            if verdict.draining and not self._cancel_drain(verdict):
                if again and self._wait_gone(verdict):
                    self._start(again=False)  # it has exited: start a fresh one
                else:
                    self._settle(DOWN, "our gateway is stopping and did not exit in time")
                return
            self.ready = verdict.ready
            self._settle(UP, "already running")
            return
        if kind == FOREIGN:
            self._settle(NOT_OURS, self.client.paused)  # ownership.py logged why, once
            return
        if kind == UNRESPONSIVE:
            # Something holds the port but does not answer (a frozen gateway): a second
            # gateway could not bind it anyway, and the turn must not wait for it.
            self.client.breaker.trip()
            self._settle(DOWN, "the gateway accepts connections but does not answer")
            self._warn_once(
                f"the gateway at {self.settings.base_url} accepts connections but does not"
                " answer; memory paused (turns are kept on disk), not starting another one"
            )
            return
        holder = lock_holder(self.settings.expected_data_dir)
        if holder is not None:
            self.client.breaker.trip()
            self._settle(DOWN, f"gateway pid {holder['pid']} holds the data directory")
            self._warn_once(
                f"gateway pid {holder['pid']} holds {self.settings.expected_data_dir} but does"
                f" not answer at {self.settings.base_url} (port {holder.get('port', '?')});"
                " memory paused, not starting another one"
            )
            return
        if not self.settings.auto_start:
            self._settle(DOWN, "not running and auto start is off")
            return
        found = find_gateway_command(self.settings)
        if found is None:
            self._settle(DOWN, "no gateway command found")
            log.warning(
                "memory_tencentdb: no gateway at %s and none found to start "
                "(set MEMORY_TENCENTDB_GATEWAY_CMD or run scripts/install-hermes.sh)",
                self.settings.base_url,
            )
            return
        argv, source = found
        wait_s = self.settings.start_timeout_s
        with self.files.locked(wait_s + 5.0) as got_lock:
            if not got_lock:
                self._settle(DOWN, "start lock busy")
                return
            kind, verdict = self.client.probe(PROBE_TIMEOUT_S)
            if kind == OURS and verdict is not None:  # another process won the race
                self.ready = verdict.ready
                self._settle(UP, "started by another process")
                return
            if kind != "refused":
                self._settle(DOWN if kind == UNRESPONSIVE else NOT_OURS, f"port taken ({kind})")
                return
            record = self.files.read_pid()
            if record is not None and _recorded_process_alive(record):
                # A gateway started earlier is still booting (or wedged): wait, never start twice.
                if self._wait_up(None, wait_s):
                    self._settle(UP, "adopted a starting gateway")
                else:
                    self._settle(DOWN, f"gateway pid {record['pid']} does not answer")
                return
            if self._closing:
                self._settle(DOWN, "closing")
                return
            proc = self._spawn(argv, source)
            if proc is None:
                return
            if self._wait_up(proc, wait_s):
                self._settle(UP, f"started pid {proc.pid} ({source})")
                log.info(
                    "memory_tencentdb: gateway up at %s (pid %d)", self.settings.base_url, proc.pid
                )
                return
        # Failed or abandoned: do not leave a half-started process behind.
        if proc.poll() is None:
            if self._closing:  # Hermes is exiting: never make it wait for the child
                with contextlib.suppress(OSError):
                    os.kill(proc.pid, signal.SIGTERM)
            else:
                self._terminate(proc.pid, proc)
                self.files.clear_pid(proc.pid)
        else:
            self.files.clear_pid(proc.pid)
        tail = _tail(self.settings.log_dir / "gateway.log")
        reason = (
            "closing" if self._closing else f"gateway did not become healthy (exit {proc.poll()})"
        )
        self._settle(DOWN, reason)
        if not self._closing:
            log.warning("memory_tencentdb: %s; log tail:\n%s", reason, tail)

    def _cancel_drain(self, verdict: Verdict) -> bool:
        """Our gateway is finishing its work before exiting: ask it to stay."""
        out = self.client.admin_shutdown({"cancel": True}, timeout_s=PROBE_TIMEOUT_S)
        if out is not None and out.get("cancelled"):
            log.info("memory_tencentdb: gateway pid %s was stopping; cancelled that", verdict.pid)
            return True
        return False

    def _wait_gone(self, verdict: Verdict) -> bool:
        """Wait (background thread, bounded) for a gateway that is exiting to be gone."""
        deadline = time.monotonic() + DRAIN_S + 5.0
        while time.monotonic() < deadline and not self._closing:
            kind, _ = self.client.probe(PROBE_TIMEOUT_S)
            gone_pid = verdict.pid is None or not pid_alive(verdict.pid)
            if kind == "refused" and gone_pid:
                return True
            time.sleep(0.2)
        return False

    def _spawn(self, argv: list[str], source: str) -> subprocess.Popen[bytes] | None:
        s = self.settings
        env = dict(os.environ)
        env.update(
            {
                "TDAI_GATEWAY_HOST": s.gateway_host,
                "TDAI_GATEWAY_PORT": str(s.gateway_port),
                "MEMORY_TENCENTDB_GATEWAY_HOST": s.gateway_host,
                "MEMORY_TENCENTDB_GATEWAY_PORT": str(s.gateway_port),
                "PYTHONUNBUFFERED": "1",
            }
        )
        if s.api_key and not env.get("TDAI_GATEWAY_API_KEY"):
            env["TDAI_GATEWAY_API_KEY"] = s.api_key
        try:
            s.log_dir.mkdir(parents=True, exist_ok=True)
            logf = open(s.log_dir / "gateway.log", "ab")  # noqa: SIM115 - handed to the child
        except OSError as exc:
            self._settle(DOWN, f"cannot open gateway log: {exc}")
            return None
        # The working directory decides which tdai-gateway.yaml the gateway finds: the Hermes
        # home (per profile) is predictable, the user's shell directory is not.
        cwd = s.home if s.home.is_dir() else None
        try:
            logf.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting {argv}\n".encode())
            logf.flush()
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=logf,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C in the Hermes terminal must not kill it
                close_fds=True,
            )
        except OSError as exc:
            self._settle(DOWN, f"cannot start {argv[0]}: {exc}")
            log.warning("memory_tencentdb: cannot start gateway %r (%s): %s", argv, source, exc)
            return None
        finally:
            logf.close()
        self._proc = proc
        if not self._atexit_registered:
            atexit.register(self._at_exit)
            self._atexit_registered = True
        self.files.write_pid(
            {
                "pid": proc.pid,
                "argv": argv,
                "port": s.gateway_port,
                "host": s.gateway_host,
                "started_by": os.getpid(),
                "started_at": time.time(),
            }
        )
        log.info("memory_tencentdb: starting gateway pid %d: %s (%s)", proc.pid, argv, source)
        return proc

    def _wait_up(self, proc: subprocess.Popen[bytes] | None, timeout_s: float) -> bool:
        """Wait until /health answers and shows our gateway (ready or still loading models)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not self._closing:
            if proc is not None and proc.poll() is not None:
                return False
            kind, verdict = self.client.probe(PROBE_TIMEOUT_S)
            if kind == OURS and verdict is not None:
                self.ready = verdict.ready
                return True
            if kind == FOREIGN:
                return False
            time.sleep(0.1)
        return False

    # -- stopping ----------------------------------------------------------------------------

    def _at_exit(self) -> None:
        """Hermes exited without calling shutdown (crash path): still leave no orphan."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        with self._lock:
            self._refs = 0
            self._closing = True
        with contextlib.suppress(Exception):
            self._stop_if_last()

    def _stop_if_last(self) -> None:
        """Drop our lease; stop the recorded gateway if nobody else uses it."""
        with self._lock:
            if self._refs > 0:
                return
            leased, self._leased = self._leased, False
        try:
            with self.files.locked(2.0):
                if leased:
                    self.files.drop_lease()
                record = self.files.read_pid()
                others = self.files.other_live_leases()
                if record is None:
                    return
                if others:
                    log.info(
                        "memory_tencentdb: leaving gateway pid %s running for pids %s",
                        record.get("pid"),
                        others,
                    )
                    return
                pid = int(record["pid"])
                proc = self._proc if self._proc is not None and self._proc.pid == pid else None
                if proc is not None or _recorded_process_alive(record):
                    # The pid file stays: a session that cancels the drain keeps it ours to stop.
                    self._request_stop(pid)
                else:
                    self.files.clear_pid(pid)
        except OSError as exc:
            log.warning("memory_tencentdb: could not stop gateway cleanly: %s", exc)
        finally:
            self._proc = None
            self.state = IDLE

    def _request_stop(self, pid: int) -> None:
        """Ask our gateway to finish pending work and exit; never wait for it, never SIGKILL."""
        out = None
        if self.client.verified and not self.client.paused:
            out = self.client.admin_shutdown({"drain_s": DRAIN_S}, timeout_s=PROBE_TIMEOUT_S)
        if out is not None:
            log.info(
                "memory_tencentdb: gateway pid %d stops after its pending work (at most %d s)",
                pid,
                DRAIN_S,
            )
            return
        # An older gateway without the route, or one that does not answer: SIGTERM drains
        # too (a stopped process gets it when it continues). Its pid only, not its group.
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
            log.info("memory_tencentdb: sent SIGTERM to gateway pid %d", pid)

    @staticmethod
    def _terminate(pid: int, proc: subprocess.Popen[bytes] | None) -> None:
        """SIGTERM the gateway's process group, SIGKILL it if it is still there after a while."""

        def signal_group(sig: int) -> None:
            try:
                if os.getpgid(pid) == pid:
                    os.killpg(pid, sig)
                else:
                    os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            except OSError:
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)

        def gone(timeout: float) -> bool:
            if proc is not None:
                try:
                    proc.wait(timeout)
                    return True
                except subprocess.TimeoutExpired:
                    return False
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if not pid_alive(pid):
                    return True
                time.sleep(0.05)
            return not pid_alive(pid)

        signal_group(signal.SIGTERM)
        if not gone(STOP_TIMEOUT_S):
            signal_group(signal.SIGKILL)
            gone(2.0)


def _tail(path: Path, limit: int = 2000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
