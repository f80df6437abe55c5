"""See and correct memory through the running gateway, with the data directory's key:

memory-tencentdb memories list [--scope S] [--type T] [--since 7d] [--json]
memory-tencentdb memories show ID [--scope S]
memory-tencentdb memories edit ID [--content ...] [--type T] [--priority N]
memory-tencentdb memories delete ID [--scope S]
memory-tencentdb memories forget "..." --scope S [--yes]
memory-tencentdb scopes | persona [--scope S] | scenes [--scope S]
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import httpx

from memory_tencentdb.cli.common import (
    SCOPE_HELP,
    add_gateway_options,
    gateway_client,
    json_of,
    not_our_gateway,
    settings_for,
)


def _call(args: argparse.Namespace, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    """One request to the running gateway; prints why and returns (1, None) when it fails."""
    settings = settings_for(args)
    try:
        with gateway_client(settings) as c:
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
    body = json_of(settings, r)
    if not isinstance(body, dict):
        raise not_our_gateway(settings, r, "an answer that is not a JSON object")
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


def add_commands(sub: Any) -> None:
    """Register ``memories`` (list, show, edit, delete, forget), ``scopes``, ``persona`` and
    ``scenes``."""
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
