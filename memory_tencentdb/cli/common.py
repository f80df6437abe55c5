"""What every ``memory-tencentdb`` command shares: logging, settings from the command line and
the environment, the data directory's lock, and a checked HTTP client for the running gateway.

The command modules import from here and never from each other or from ``cli/__init__``, so the
package's imports go one way: ``common`` <- command modules <- ``__init__`` (the parser).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from memory_tencentdb.config import Settings, load_settings
from memory_tencentdb.ownership import DataDirLock, DataDirLocked, client_token, describe_holder


def setup_logging(verbose: bool = False) -> None:
    level = os.environ.get("TDAI_LOG_LEVEL", "DEBUG" if verbose else "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def settings_for(args: argparse.Namespace) -> Any:
    env = dict(os.environ)
    if getattr(args, "data_dir", None):
        env["TDAI_DATA_DIR"] = str(Path(args.data_dir).expanduser().resolve())
    if getattr(args, "host", None):
        env["TDAI_GATEWAY_HOST"] = args.host
    if getattr(args, "port", None):
        env["TDAI_GATEWAY_PORT"] = str(args.port)
    return load_settings(env)


def add_gateway_options(p: argparse.ArgumentParser) -> None:
    """Where a client command finds its gateway: address, port and the data directory whose
    ``gateway.key`` it sends (each defaults to the configuration)."""
    p.add_argument("--host", help="gateway address (default: server.host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="gateway port (default: server.port, 8420)")
    p.add_argument(
        "--data-dir", help="the gateway's data directory (its gateway.key is sent as the key)"
    )


SCOPE_HELP = (
    "which memories: the scope a host writes to. Hermes: hermes:<profile> (hermes:default for"
    " ~/.hermes), hermes:<profile>@<8 hex> for another HERMES_HOME; OpenClaw: the agent id"
    " (main) for ~/.openclaw, <agent>@<8 hex> for another state directory; direct HTTP callers:"
    " their scope or user_id, else default. `memory-tencentdb scopes` lists them all."
    " Default: default (and, when it has no match, the scopes that do have data are named)"
)


def lock_or_none(settings: Settings, command: str, **info: Any) -> DataDirLock | None:
    """Take the data directory's lock, or say who holds it (on stderr) and return None."""
    try:
        return DataDirLock(settings.data_dir).acquire(command=command, **info)
    except DataDirLocked as e:
        print(
            f"memory-tencentdb {command if command != 'gateway' else 'serve'}: data directory"
            f" {e.data_dir} is in use by {describe_holder(e.holder)}.",
            file=sys.stderr,
        )
        if command == "gateway":
            print("Only one gateway may serve a data directory.", file=sys.stderr)
        else:
            print(
                f"`{command}` needs the gateway stopped: stop it first with"
                " `memory-tencentdb stop` (or POST /admin/shutdown, or SIGTERM to that pid).",
                file=sys.stderr,
            )
        return None


class NotOurGateway(Exception):
    """Something answers on the gateway's address, but not as a memory-tencentdb gateway (a
    web server's HTML page, another service's JSON): said in one line, exit 1, no traceback."""


def is_gateway_health(body: Any) -> bool:
    """Whether a ``/health`` body has our gateway's shape (what every version answers)."""
    return (
        isinstance(body, dict)
        and body.get("status") in ("ok", "degraded")
        and isinstance(body.get("instance"), str)
        and isinstance(body.get("version"), str)
        and isinstance(body.get("embedding"), dict)
    )


def _describe_answer(r: Any) -> str:
    kind = (r.headers.get("content-type") or "no content type").split(";")[0].strip()
    return f"HTTP {r.status_code}, {kind}"


def not_our_gateway(settings: Settings, r: Any, what: str = "") -> NotOurGateway:
    return NotOurGateway(
        f"something answers on {settings.server.host}:{settings.server.port} but it is not a"
        f" memory-tencentdb gateway ({what or _describe_answer(r)}); is another program using"
        " the port? Choose the gateway's with --port / TDAI_GATEWAY_PORT"
    )


def json_of(settings: Settings, r: Any) -> Any:
    """The JSON body of a gateway answer; ``NotOurGateway`` when it is not JSON (every answer
    of ours is, errors included)."""
    try:
        return r.json()
    except ValueError:
        raise not_our_gateway(settings, r) from None


@contextlib.contextmanager
def gateway_client(settings: Settings) -> Iterator[Any]:
    """An HTTP client for the gateway (``with gateway_client(s) as c``), after checking that what
    answers on its address is one: ``GET /health`` must have our shape (its body is kept as
    ``c.health``). Connection errors are raised as ``httpx.HTTPError`` (each command says "not
    reachable"); ``NotOurGateway`` when something else answers."""
    host = settings.server.host
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    token = client_token(settings.server, settings.data_dir)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(
        base_url=f"http://{host}:{settings.server.port}", headers=headers, timeout=30
    ) as client:
        r = client.get("/health", timeout=10)
        body = json_of(settings, r)
        if not is_gateway_health(body):
            raise not_our_gateway(
                settings, r, f"{_describe_answer(r)}, /health without a gateway's fields"
            )
        client.health = body  # type: ignore[attr-defined]  # the checked /health body, for callers
        yield client
