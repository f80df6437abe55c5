"""The offline data commands: ``reindex``, ``export``, ``import`` and ``purge``.

    memory-tencentdb export [--scope S] > memories.jsonl
    memory-tencentdb import FILE | --from-original [DIR]
    memory-tencentdb purge [--messages] [--dry-run]
    memory-tencentdb reindex

Export reads the store and works with the gateway running or not; import, purge and reindex
rewrite the data directory, so they refuse (exit 3) while a gateway holds its lock. The
modules that do the work (store backends, transfer, purge, the original's reader) are imported
inside each command: together they take about half a second to load, which the other commands
(all of which build the one parser) should not pay.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from memory_tencentdb.cli.common import lock_or_none, settings_for
from memory_tencentdb.config import tzinfo
from memory_tencentdb.operations import progress
from memory_tencentdb.ownership import LOCKED_EXIT_CODE
from memory_tencentdb.store import files


def cmd_reindex(args: argparse.Namespace) -> int:
    from memory_tencentdb.store.reindex import reindex

    settings = settings_for(args)
    if settings.store_backend != "sqlite":
        print(
            "memory-tencentdb: reindex rebuilds the embedded SQLite index (memory.db); this data"
            f" directory's store is {settings.store_backend} (storeBackend), shared by its"
            " gateways: nothing to rebuild here",
            file=sys.stderr,
        )
        return 2
    lock = lock_or_none(settings, "reindex")
    if lock is None:
        return LOCKED_EXIT_CODE
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


def _offline(args: argparse.Namespace, command: str) -> tuple[Any, Any]:
    """Settings and the data directory's lock for a command that rewrites it (None if held)."""

    settings = settings_for(args)
    return settings, lock_or_none(settings, command)


def _sqlite_only(args: argparse.Namespace, command: str, hint: str) -> int:
    """2 (with the reason on stderr) when the data directory's store is not SQLite, else 0.

    These commands rewrite one data directory's files and its embedded index. On a shared
    PostgreSQL the other gateways' journals would keep (and re-index) what they removed, so
    they refuse rather than do half the work."""

    backend = settings_for(args).store_backend
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
    from memory_tencentdb.operations import transfer
    from memory_tencentdb.store.backends import open_store

    settings = settings_for(args)
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
    from memory_tencentdb.operations import transfer
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
    from memory_tencentdb.operations import original

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
    from memory_tencentdb.operations.purge import purge

    refused = _sqlite_only(
        args,
        "purge",
        "Forgotten memories are already out of every recall and search there; their text"
        " stays in the database's history and in each gateway's journal.",
    )
    if refused:
        return refused
    # A mistyped data directory must not be created (and "purged") as a new, empty one.
    where = settings_for(args).data_dir
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


def add_reindex(sub: Any) -> None:
    p = sub.add_parser("reindex", help="rebuild memory.db from the JSONL files (gateway stopped)")
    p.set_defaults(fn=cmd_reindex)


def add_commands(sub: Any) -> None:
    """Register ``export``, ``import`` and ``purge``."""
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
