"""Ask a running gateway: ``status`` (health, layers on disk, backlog) and ``search``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
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
from memory_tencentdb.config import Settings, redacted


def cmd_status(args: argparse.Namespace) -> int:
    settings = settings_for(args)
    try:
        with gateway_client(settings) as c:
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


def cmd_search(args: argparse.Namespace) -> int:
    settings = settings_for(args)
    route = "/search/conversations" if args.conversations else "/search/memories"
    scope = args.scope or "default"
    body = {"query": args.query, "limit": args.limit, "scope": scope}
    try:
        with gateway_client(settings) as c:
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


def add_commands(sub: Any) -> None:
    """Register ``status`` and ``search``."""
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
