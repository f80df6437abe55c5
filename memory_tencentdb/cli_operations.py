"""The operations' command line: see, correct and forget memories (through the running gateway,
with the data directory's key), and the offline data commands (export, import, purge).

    memory-tencentdb memories list [--scope S] [--type T] [--since 7d] [--json]
    memory-tencentdb memories show ID [--scope S]
    memory-tencentdb memories edit ID [--content ...] [--type T] [--priority N]
    memory-tencentdb memories delete ID [--scope S]
    memory-tencentdb memories forget "..." --scope S [--yes]
    memory-tencentdb scopes | persona [--scope S] | scenes [--scope S]
    memory-tencentdb export [--scope S] > memories.jsonl
    memory-tencentdb import FILE | --from-original [DIR]
    memory-tencentdb purge [--messages] [--dry-run]

Client commands need the gateway running; export reads the files and works either way; import
and purge rewrite the data directory, so they refuse (exit 3) while a gateway holds its lock.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_tencentdb.config import Settings


def _call(args: argparse.Namespace, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    """One request to the running gateway; prints why and returns (1, None) when it fails."""
    import httpx

    from memory_tencentdb import cli

    settings = cli._settings(args)
    try:
        with cli._client(settings) as c:
            r = c.request(method, path, **kw)
    except httpx.HTTPError as e:
        print(
            f"gateway not reachable on {settings.server.host}:{settings.server.port}: {e}"
            " (start it with `memory-tencentdb serve`)",
            file=sys.stderr,
        )
        return 1, None
    if r.status_code == 401:
        print(
            f"the gateway on {settings.server.host}:{settings.server.port} refused our key"
            f" (expected the one of {settings.data_dir}); it is not this data directory's"
            " gateway, or set TDAI_GATEWAY_API_KEY",
            file=sys.stderr,
        )
        return 1, None
    body = cli.json_of(settings, r)
    if not isinstance(body, dict):
        raise cli.not_our_gateway(settings, r, "an answer that is not a JSON object")
    if r.status_code >= 400:
        print(f"error {r.status_code}: {body.get('error', body)}", file=sys.stderr)
        return 1, body
    return 0, body


def _dump(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False, indent=2))


def _line(m: dict[str, Any]) -> str:
    when = (m.get("updated_at") or "")[:19].replace("T", " ")
    status = "" if m.get("status") in (None, "active") else f" [{m['status']}]"
    return f"{m['id']}  {when}  {m['type']:<11} p{m['priority']:<3} {m['content']}{status}"


def cmd_memories_list(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"scope": args.scope, "limit": min(args.limit, 500)}
    for key in ("type", "since", "status"):
        if getattr(args, key):
            params[key] = getattr(args, key)
    items: list[dict[str, Any]] = []
    while len(items) < args.limit:
        rc, body = _call(args, "GET", "/memories", params=params)
        if rc:
            return rc
        items += body["items"]
        if not body.get("next_cursor"):
            break
        params["cursor"] = body["next_cursor"]
    items = items[: args.limit]
    if args.json:
        _dump(items)
    elif not items:
        print(f"no memories in scope {args.scope!r}")
    else:
        for m in items:
            print(_line(m))
    return 0


def cmd_memories_show(args: argparse.Namespace) -> int:
    rc, body = _call(args, "GET", f"/memories/{args.id}", params={"scope": args.scope})
    if rc:
        return rc
    if args.json:
        _dump(body)
        return 0
    print(_line(body))
    trace = body.get("trace", {})
    print(f"  file:    {trace.get('file')}")
    print(f"  session: {body.get('session_key')}  origin: {body.get('origin')}")
    sources = trace.get("source_messages") or []
    print(f"  from {len(sources)} message(s):")
    for s in sources:
        print(f"    [{s['role']}] {s['content'][:200]}  ({s['file']}, {s['id']})")
    history = trace.get("history") or []
    if history:
        print(f"  history ({len(history)}):")
        for h in history:
            print(f"    {h['updated_at']}  {h['status']:<10} {h['content']}  ({h['id']})")
    if trace.get("superseded_by"):
        print(f"  superseded by {trace['superseded_by']}")
    return 0


def cmd_memories_edit(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {"scope": args.scope}
    if args.content is not None:
        body["content"] = args.content
    if args.type:
        body["type"] = args.type
    if args.priority is not None:
        body["priority"] = args.priority
    rc, out = _call(args, "PATCH", f"/memories/{args.id}", json=body)
    if rc:
        return rc
    print(f"updated: {_line(out)}")
    return 0


def cmd_memories_delete(args: argparse.Namespace) -> int:
    rc, out = _call(args, "DELETE", f"/memories/{args.id}", params={"scope": args.scope})
    if rc:
        return rc
    for d in out["deleted"]:
        print(f"forgotten: {d['id']}  {d['content']}")
    return 0


def cmd_memories_forget(args: argparse.Namespace) -> int:
    body = {"query": args.query, "scope": args.scope, "limit": args.limit, "dry_run": True}
    rc, out = _call(args, "POST", "/memories/forget", json=body)
    if rc:
        return rc
    matched = out["matched"]
    if not matched:
        print(f"nothing in scope {args.scope!r} matches {args.query!r}")
        for c in out.get("candidates", []):
            print(f"  close but not matched: {c['id']}  {c['content']}")
        return 0
    verb = "will forget" if not args.yes else "forgetting"
    print(f"{verb} {len(matched)} memor{'y' if len(matched) == 1 else 'ies'}:")
    for m in matched:
        print(f"  {m['id']}  {m['content']}")
    if not args.yes:
        print("(dry run: add --yes to forget them)")
        return 0
    body["dry_run"] = False
    rc, out = _call(args, "POST", "/memories/forget", json=body)
    if rc:
        return rc
    print(f"forgotten: {len(out['forgotten'])}")
    return 0


def cmd_scopes(args: argparse.Namespace) -> int:
    rc, out = _call(args, "GET", "/scopes")
    if rc:
        return rc
    if args.json:
        _dump(out["scopes"])
        return 0
    print(f"{'scope':<32} {'memories':>8} {'history':>8} {'messages':>8} {'scenes':>6}  persona")
    for s in out["scopes"]:
        print(
            f"{s['scope']:<32} {s['memories']:>8} {s['history']:>8} {s['messages']:>8}"
            f" {s['scenes']:>6}  {'yes' if s['persona'] else '-'}"
        )
    return 0


def cmd_persona(args: argparse.Namespace) -> int:
    rc, out = _call(args, "GET", "/persona", params={"scope": args.scope})
    if rc:
        return rc
    if args.json:
        _dump(out)
    else:
        print(out["persona"] or f"(no persona yet for scope {args.scope!r})")
    return 0


def cmd_scenes(args: argparse.Namespace) -> int:
    rc, out = _call(args, "GET", "/scenes", params={"scope": args.scope})
    if rc:
        return rc
    if args.json:
        _dump(out["scenes"])
        return 0
    if not out["scenes"]:
        print(f"(no scenes yet for scope {args.scope!r})")
    for s in out["scenes"]:
        print(f"## {s['filename']}  heat {s['heat']}  updated {s['updated']}")
        print(f"   {s['summary']}")
        if args.full:
            print(s["content"])
        print()
    return 0


def _bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def layer_sizes(data_dir: Path) -> dict[str, int]:
    """Bytes on disk per layer of a data directory (every scope's derived files included)."""
    scenes = sum(_bytes(p) for p in data_dir.glob("**/scene_blocks") if ".backup" not in p.parts)
    personas = sum(
        p.stat().st_size for p in data_dir.glob("**/persona.md") if ".backup" not in p.parts
    )
    db = sum(_bytes(p) for p in data_dir.glob("memory.db*"))
    return {
        "l0": _bytes(data_dir / "conversations"),
        "l1": _bytes(data_dir / "records"),
        "l2": scenes,
        "l3": personas,
        "offload": _bytes(data_dir / "offload"),
        "index": db,
        "backups": sum(_bytes(p) for p in data_dir.glob("**/.backup")),
    }


def print_layers(settings: Settings, health: dict[str, Any]) -> None:
    """``status``: rows and bytes per layer (read from the data directory), redaction, retention."""
    data_dir = Path(settings.data_dir)
    if not data_dir.is_dir():
        return
    sizes = layer_sizes(data_dir)
    counts = health.get("counts") or {}
    scenes = sum(1 for p in data_dir.glob("**/scene_blocks/*.md") if ".backup" not in p.parts)
    print(
        f"layers:      L0 {counts.get('l0_messages', '?')} messages ({_size(sizes['l0'])}),"
        f" L1 {counts.get('l1_memories', '?')} memories incl. history ({_size(sizes['l1'])}),"
        f" L2 {scenes} scenes ({_size(sizes['l2'])}), L3 persona {_size(sizes['l3'])}"
    )
    print(
        f"disk:        index {_size(sizes['index'])}, offload {_size(sizes['offload'])},"
        f" backups {_size(sizes['backups'])}"
    )
    red = health.get("redaction") or {}
    if red:
        print(
            f"redaction:   {'on' if red.get('enabled') else 'OFF'},"
            f" {red.get('redacted', 0)} secrets replaced since start"
        )
    ret = health.get("retention") or {}
    if ret:
        if not ret.get("enabled"):
            print("retention:   off (memory.retention.l0Days, offload.offloadRetentionDays)")
        else:
            last = ret.get("last") or {}
            print(
                f"retention:   L0 {ret.get('l0_days') or 'forever'} days, offload"
                f" {ret.get('offload_days') or 'forever'} days; last run"
                f" {last.get('ran_at', 'not yet')}: {last.get('l0_deleted', 0)} messages,"
                f" {sum((last.get('offload_deleted') or {}).values())} offload files removed"
            )


LOG_FILE = Path("logs") / "gateway.log"


def attach_gateway_log(data_dir: Path) -> None:
    """``serve`` also logs to ``<data_dir>/logs/gateway.log`` (rotated, 3 x 5 MB), so
    ``memory-tencentdb logs`` finds it however the gateway was started."""
    import logging
    from logging.handlers import RotatingFileHandler

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
    import time

    from memory_tencentdb import cli

    settings = cli._settings(args)
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
    import os
    import signal
    import time

    import httpx

    from memory_tencentdb import cli
    from memory_tencentdb.ownership import lock_holder

    settings = cli._settings(args)
    holder = lock_holder(settings.data_dir)
    try:
        with cli._client(settings) as c:
            # A live gateway answers this at once (the drain runs after the answer); a
            # frozen one would hold the client's 30 s read timeout for nothing.
            r = c.post("/admin/shutdown", json={"drain_s": args.drain}, timeout=5.0)
        body = cli.json_of(settings, r)
        answered = r.status_code == 202
        if not answered:
            why = body.get("error", body) if isinstance(body, dict) else body
            print(f"the gateway refused to stop: {r.status_code} {why}", file=sys.stderr)
    except cli.NotOurGateway as e:
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


def _offline(args: argparse.Namespace, command: str) -> tuple[Any, Any]:
    """Settings and the data directory's lock for a command that rewrites it (None if held)."""
    from memory_tencentdb import cli

    settings = cli._settings(args)
    return settings, cli._lock_or_none(settings, command)


def _sqlite_only(args: argparse.Namespace, command: str, hint: str) -> int:
    """2 (with the reason on stderr) when the data directory's store is not SQLite, else 0.

    These commands rewrite one data directory's files and its embedded index. On a shared
    PostgreSQL the other gateways' journals would keep (and re-index) what they removed, so
    they refuse rather than do half the work."""
    from memory_tencentdb import cli

    backend = cli._settings(args).store_backend
    if backend == "sqlite":
        return 0
    print(
        f"memory-tencentdb {command}: works on the embedded SQLite store only; this data"
        f" directory's store is {backend} (storeBackend), shared by its gateways. {hint}",
        file=sys.stderr,
    )
    return 2


def cmd_export(args: argparse.Namespace) -> int:
    """Reads the index directly: works with the gateway running (SQLite WAL readers, or the
    shared PostgreSQL database, whose export holds what every gateway on it captured)."""
    from memory_tencentdb import cli
    from memory_tencentdb.config import tzinfo
    from memory_tencentdb.operations import progress, transfer
    from memory_tencentdb.store.backends import open_store

    settings = cli._settings(args)
    if settings.store_backend == "sqlite" and not (settings.data_dir / "memory.db").exists():
        print(f"nothing to export: no memory.db in {settings.data_dir}", file=sys.stderr)
        return 1
    store = open_store(settings, tzinfo(settings))
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    try:
        with progress.bar("export", unit="rows") as bar:
            report = transfer.export(store, out, args.scope, tick=bar.update)
    finally:
        store.close()
        if args.output:
            out.close()
    print(
        f"exported {report.memories} memories and {report.messages} messages"
        f"{f' of scope {args.scope}' if args.scope else ''}",
        file=sys.stderr,
    )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from memory_tencentdb.config import tzinfo
    from memory_tencentdb.operations import progress, transfer
    from memory_tencentdb.ownership import LOCKED_EXIT_CODE
    from memory_tencentdb.store.backends import open_store

    if args.from_original is not None:
        return cmd_import_original(args)
    if not args.file:
        print("import: give an export file, or --from-original [DIR]", file=sys.stderr)
        return 2
    try:
        _, messages, memories = transfer.read_export(Path(args.file))
    except transfer.ImportError_ as e:
        print(f"import: {e}; nothing was imported", file=sys.stderr)
        return 1
    settings, lock = _offline(args, "import")
    if lock is None:
        return LOCKED_EXIT_CODE
    with lock:
        # On PostgreSQL the rows go to this data directory's journal and into the shared
        # database, where every gateway on it finds them.
        store = open_store(settings, tzinfo(settings))
        try:
            total = len(messages) + len(memories)
            with progress.bar("import", total=total, unit="rows") as bar:
                report = transfer.import_rows(store, messages, memories, tick=bar.update)
        finally:
            store.close()
    print(
        f"imported {report.memories} memories ({report.updated_memories} updated,"
        f" {report.skipped_memories} already present) and {report.messages} messages"
        f" ({report.skipped_messages} already present) into {settings.data_dir}"
    )
    if report.other_scope_memories or report.other_scope_messages:
        print(
            f"skipped {report.other_scope_memories} memories and {report.other_scope_messages}"
            " messages whose id belongs to another scope (an import never moves or overwrites"
            " another scope's records)"
        )
    print("embeddings are computed in the background by the next `memory-tencentdb serve`.")
    return 0


def cmd_import_original(args: argparse.Namespace) -> int:
    from memory_tencentdb.config import tzinfo
    from memory_tencentdb.operations import original, progress
    from memory_tencentdb.ownership import LOCKED_EXIT_CODE

    refused = _sqlite_only(
        args,
        "import --from-original",
        "Import the original's data into a SQLite data directory, `export` it from there and"
        " `import` the file here.",
    )
    if refused:
        return refused
    source = original.find_source(args.from_original or None)
    if source.path is None:
        print(f"import --from-original: {source.note}", file=sys.stderr)
        return 1
    print(source.note)
    try:
        plan = original.read_original(source.path, args.scope)
    except original.OriginalError as e:
        print(f"import --from-original: {e}; nothing was imported", file=sys.stderr)
        return 1
    settings, lock = _offline(args, "import")
    if lock is None:
        return LOCKED_EXIT_CODE
    with lock, progress.bar("import", total=plan.size, unit="rows") as bar:
        report = original.apply(plan, settings.data_dir, tzinfo(settings), tick=bar.update)
    print(report.summary())
    print("embeddings are computed in the background by the next `memory-tencentdb serve`.")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    from memory_tencentdb import cli
    from memory_tencentdb.config import tzinfo
    from memory_tencentdb.operations import progress
    from memory_tencentdb.operations.purge import purge
    from memory_tencentdb.ownership import LOCKED_EXIT_CODE

    refused = _sqlite_only(
        args,
        "purge",
        "Forgotten memories are already out of every recall and search there; their text"
        " stays in the database's history and in each gateway's journal.",
    )
    if refused:
        return refused
    # A mistyped data directory must not be created (and "purged") as a new, empty one.
    where = cli._settings(args).data_dir
    if not (where / "memory.db").exists():
        print(f"nothing to purge: no memory.db in {where}", file=sys.stderr)
        return 1
    settings, lock = _offline(args, "purge")
    if lock is None:
        return LOCKED_EXIT_CODE
    offload_dir = settings.memory.offload.data_dir
    with lock, progress.bar("purge", unit="steps") as bar:
        report = purge(
            settings.data_dir,
            tzinfo(settings),
            messages=args.messages,
            progress=lambda stage, n: (bar.set_description(f"purge: {stage}"), bar.update(n)),
            dry_run=args.dry_run,
            offload_dir=Path(offload_dir).expanduser() if offload_dir else None,
        )
    if not report.memories and not report.versions and not report.messages:
        print("nothing to purge: no forgotten memories")
        return 0
    what = (
        f"{report.memories} forgotten memories ({report.versions} older versions)"
        + (f" and {report.messages} source messages" if args.messages else "")
        + f" of scope(s) {', '.join(report.scopes)}"
    )
    if args.dry_run:
        print(
            f"would purge {what}; would delete their rows from memory.db and change"
            f" {len(report.changes)} files:"
        )
        for change in report.changes:
            if change.whole_file:
                print(f"{change.rel}: the whole file (not text)")
            for n, preview in change.lines:
                print(f"{change.rel}:{n}: {preview}")
        print("(dry run: nothing was changed; run without --dry-run to purge)")
        return 0
    print(
        f"purged {what}; {len(report.files_rewritten)} files rewritten,"
        f" {len(report.backups_removed)} database backups removed"
    )
    for rel in report.files_rewritten:
        print(f"  rewritten: {rel}")
    print("  database:  memory.db (their rows deleted, vector tables dropped, VACUUM)")
    for rel in report.backups_removed:
        print(f"  removed:   {rel}")
    if report.messages_kept:
        print(
            f"kept {report.messages_kept} source messages that memories you did not forget"
            " still cite"
        )
    if report.leftovers:
        print(f"WARNING: forgotten text still found in: {', '.join(report.leftovers)}")
        return 1
    return 0


def add_commands(sub: Any) -> None:
    """Register the operations' subcommands on the main parser."""
    from memory_tencentdb.cli import SCOPE_HELP, add_gateway_options

    p = sub.add_parser("memories", help="list, show, edit and forget memories (gateway running)")
    msub = p.add_subparsers(dest="memories_command", required=True)
    q = msub.add_parser("list", help="memories of a scope, newest first")
    q.add_argument("--scope", default="default", help=SCOPE_HELP)
    q.add_argument("--type", choices=("persona", "episodic", "instruction"))
    q.add_argument("--since", help="a date, date-time or age such as 7d or 12h")
    q.add_argument("--status", choices=("active", "superseded", "deleted", "all"))
    q.add_argument("--limit", type=int, default=100)
    q.add_argument("--json", action="store_true")
    add_gateway_options(q)
    q.set_defaults(fn=cmd_memories_list)
    q = msub.add_parser("show", help="one memory with its source messages and history")
    q.add_argument("id")
    q.add_argument("--scope", default="default", help=SCOPE_HELP)
    q.add_argument("--json", action="store_true")
    add_gateway_options(q)
    q.set_defaults(fn=cmd_memories_show)
    q = msub.add_parser("edit", help="correct a memory (the old text is kept as history)")
    q.add_argument("id")
    q.add_argument("--scope", default="default", help=SCOPE_HELP)
    q.add_argument("--content")
    q.add_argument("--type", choices=("persona", "episodic", "instruction"))
    q.add_argument("--priority", type=int)
    add_gateway_options(q)
    q.set_defaults(fn=cmd_memories_edit)
    q = msub.add_parser("delete", help="forget one memory by id")
    q.add_argument("id")
    q.add_argument("--scope", default="default", help=SCOPE_HELP)
    add_gateway_options(q)
    q.set_defaults(fn=cmd_memories_delete)
    q = msub.add_parser("forget", help="forget the memories a query names (dry run unless --yes)")
    q.add_argument("query")
    q.add_argument("--scope", default="default", help=SCOPE_HELP)
    q.add_argument("--limit", type=int, default=10)
    q.add_argument("--yes", action="store_true", help="really forget them")
    add_gateway_options(q)
    q.set_defaults(fn=cmd_memories_forget)
    p = sub.add_parser("scopes", help="every scope with its counts (gateway running)")
    p.add_argument("--json", action="store_true")
    add_gateway_options(p)
    p.set_defaults(fn=cmd_scopes)
    p = sub.add_parser("persona", help="the persona of a scope (gateway running)")
    p.add_argument("--scope", default="default", help=SCOPE_HELP)
    p.add_argument("--json", action="store_true")
    add_gateway_options(p)
    p.set_defaults(fn=cmd_persona)
    p = sub.add_parser("scenes", help="the scene blocks of a scope (gateway running)")
    p.add_argument("--scope", default="default", help=SCOPE_HELP)
    p.add_argument("--full", action="store_true", help="print each scene's text")
    p.add_argument("--json", action="store_true")
    add_gateway_options(p)
    p.set_defaults(fn=cmd_scenes)
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
    p = sub.add_parser("export", help="memories, history and source messages as JSONL")
    p.add_argument("--scope", help="only this scope (default: all)")
    p.add_argument("-o", "--output", help="file to write (default: standard output)")
    p.add_argument("--data-dir", help="the data directory (default: the configured one)")
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("import", help="an export file, or the original's data (gateway stopped)")
    p.add_argument("file", nargs="?", help="a file written by `export`")
    p.add_argument(
        "--from-original",
        nargs="?",
        const="",
        metavar="DIR",
        help="the original TencentDB-Agent-Memory data directory (found if not given)",
    )
    p.add_argument("--scope", help="--from-original: the scope for the default agent")
    p.add_argument("--data-dir", help="the data directory (default: the configured one)")
    p.set_defaults(fn=cmd_import)
    p = sub.add_parser("purge", help="remove forgotten memories' text for good (gateway stopped)")
    p.add_argument(
        "--messages",
        action="store_true",
        help="also the raw messages they were drawn from and the lines of the scope's offload"
        " files quoting them",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="list every file and line it would change"
    )
    p.add_argument("--data-dir", help="the data directory (default: the configured one)")
    p.set_defaults(fn=cmd_purge)
