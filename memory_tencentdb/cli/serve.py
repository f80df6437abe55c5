"""Run the gateway and look after the running one: ``serve``, ``logs``, ``stop``."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import signal
import socket
import sys
import time
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any

import httpx

from memory_tencentdb.cli.common import (
    NotOurGateway,
    add_gateway_options,
    gateway_client,
    json_of,
    lock_or_none,
    settings_for,
)
from memory_tencentdb.ownership import LOCKED_EXIT_CODE, lock_holder


def cmd_serve(args: argparse.Namespace) -> int:
    # The engine, the web app and uvicorn are imported here, not at the top: they take most of
    # a second to load, which every other command (all of which import this module) would pay.
    import uvicorn

    from memory_tencentdb.engine import Engine
    from memory_tencentdb.gateway.app import create_app
    from memory_tencentdb.gateway.lifecycle import Lifecycle, serving_with_drain
    from memory_tencentdb.gateway.security import log_posture

    settings = settings_for(args)
    log = logging.getLogger("memory_tencentdb.gateway")
    lock = lock_or_none(settings, "gateway", host=settings.server.host, port=settings.server.port)
    if lock is None:
        return LOCKED_EXIT_CODE
    sock = _listen_socket(settings.server.host, settings.server.port)
    if sock is None:
        lock.release()
        return PORT_IN_USE_EXIT_CODE

    attach_gateway_log(settings.data_dir)  # <data_dir>/logs/gateway.log, read by `logs`
    log.info("data directory: %s", settings.data_dir)
    if settings.config_file:
        log.info("config file: %s", settings.config_file)
    engine = Engine(settings)
    lock.update(instance=engine.instance)
    log_posture(
        settings.server.host, engine.auth.token, settings.server.cors_origins, engine.auth.mode
    )
    lifecycle = Lifecycle(engine, settings.server.drain_timeout_s, args.idle_exit)
    app = create_app(engine, lifecycle)
    config = uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = serving_with_drain(uvicorn.Server, lifecycle)(config)
    lifecycle.bind(server)
    log.info("listening on http://%s:%d", settings.server.host, settings.server.port)
    try:
        server.run(sockets=[sock])  # bound above: "listening" is true when it is logged
    finally:
        lock.release()
    return 0 if server.started else 1


# ``serve`` exit codes besides 0/1: 2 bad configuration, 3 data directory locked, 4 port taken.
PORT_IN_USE_EXIT_CODE = 4


def _listen_socket(host: str, port: int) -> Any:
    """Bind the port before anything claims to listen on it; None (said on stderr) if taken."""
    # The same socket uvicorn would make (IPv6 only for an IPv6 literal), bound by us.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        why = "already in use" if e.errno == errno.EADDRINUSE else (e.strerror or str(e))
        print(
            f"memory-tencentdb serve: cannot listen on {host}:{port}: address {why}."
            f" Is a gateway already running there? (`memory-tencentdb status --port {port}`)"
            " Or choose another port with --port / TDAI_GATEWAY_PORT.",
            file=sys.stderr,
        )
        return None
    sock.set_inheritable(True)
    return sock


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 10**7:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


LOG_FILE = Path("logs") / "gateway.log"


def attach_gateway_log(data_dir: Path) -> None:
    """``serve`` also logs to ``<data_dir>/logs/gateway.log`` (rotated, 3 x 5 MB), so
    ``memory-tencentdb logs`` finds it however the gateway was started."""
    path = Path(data_dir) / LOG_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(
            path, maxBytes=5 * 1024 * 1024, backupCount=3, encoding="utf-8"
        )
    except OSError as e:
        logging.getLogger("memory_tencentdb").warning("no log file at %s: %s", path, e)
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger().addHandler(handler)


def cmd_logs(args: argparse.Namespace) -> int:
    settings = settings_for(args)
    path = Path(settings.data_dir) / LOG_FILE
    if not path.exists():
        print(
            f"no gateway log yet at {path} (it is written by `memory-tencentdb serve`)",
            file=sys.stderr,
        )
        return 1
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        lines = fh.readlines()
        sys.stdout.writelines(lines[-args.lines :] if args.lines > 0 else lines)
        sys.stdout.flush()
        if not args.follow:
            return 0
        try:
            while True:
                line = fh.readline()
                if line:
                    sys.stdout.write(line)
                    sys.stdout.flush()
                else:
                    time.sleep(0.3)
        except KeyboardInterrupt:
            return 0


def cmd_stop(args: argparse.Namespace) -> int:
    """Drain and stop the data directory's gateway (``POST /admin/shutdown``); with
    ``--force``, SIGTERM to the pid in ``gateway.lock`` when it does not answer."""
    settings = settings_for(args)
    holder = lock_holder(settings.data_dir)
    try:
        with gateway_client(settings) as c:
            # A live gateway answers this at once (the drain runs after the answer); a
            # frozen one would hold the client's 30 s read timeout for nothing.
            r = c.post("/admin/shutdown", json={"drain_s": args.drain}, timeout=5.0)
        body = json_of(settings, r)
        answered = r.status_code == 202
        if not answered:
            why = body.get("error", body) if isinstance(body, dict) else body
            print(f"the gateway refused to stop: {r.status_code} {why}", file=sys.stderr)
    except NotOurGateway as e:
        answered = False
        print(f"memory-tencentdb: {e}", file=sys.stderr)
    except httpx.HTTPError as e:
        answered = False
        print(
            f"no gateway answers on {settings.server.host}:{settings.server.port} ({e})",
            file=sys.stderr,
        )
    if not answered:
        if holder and holder.get("pid") and args.force:
            os.kill(int(holder["pid"]), signal.SIGTERM)
            print(f"sent SIGTERM to pid {holder['pid']} (holder of {settings.data_dir})")
        elif holder:
            print(
                f"{settings.data_dir} is held by pid {holder.get('pid')}: use --force to"
                " send it SIGTERM",
                file=sys.stderr,
            )
            return 1
        else:
            return 1
    deadline = time.monotonic() + args.drain + 10
    while time.monotonic() < deadline:
        if lock_holder(settings.data_dir) is None:
            print(f"gateway of {settings.data_dir} stopped")
            return 0
        time.sleep(0.2)
    if answered:
        print(
            "the gateway is still running (draining); check `memory-tencentdb logs`",
            file=sys.stderr,
        )
    else:
        print(
            f"pid {(holder or {}).get('pid')} does not answer and has not exited (frozen or stopped?): it"
            " drains when it runs again; check `memory-tencentdb logs`, or kill it yourself",
            file=sys.stderr,
        )
    return 1


def add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the gateway")
    p.add_argument("--host", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default 8420)")
    p.add_argument(
        "--idle-exit",
        type=_positive_seconds,
        metavar="SECONDS",
        help="exit (after finishing pending work) when no request came for this long",
    )
    p.set_defaults(fn=cmd_serve)


def add_logs_and_stop(sub: Any) -> None:
    p = sub.add_parser("logs", help="the gateway's log (<data_dir>/logs/gateway.log)")
    p.add_argument("-n", "--lines", type=int, default=100, help="last N lines (0 = all)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    p.add_argument("--data-dir", help="the data directory (default: the configured one)")
    p.set_defaults(fn=cmd_logs)
    p = sub.add_parser("stop", help="finish pending work and stop the running gateway")
    p.add_argument("--drain", type=float, default=30, help="seconds to finish pending work")
    p.add_argument("--force", action="store_true", help="SIGTERM the lock holder if it is mute")
    add_gateway_options(p)
    p.set_defaults(fn=cmd_stop)
