"""``memory-tencentdb hub``: print a one-time login link to the running gateway's Memory Hub
(``--open`` also opens it in a browser, when there is one).

The link is asked of the gateway with the data directory's key (as every client command does);
it holds a random token good for one login within five minutes, in the URL's fragment, which a
browser never sends to a server, so it shows up in no log.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from typing import Any

import httpx

from memory_tencentdb.cli.common import add_gateway_options, gateway_client, settings_for


def cmd_hub(args: argparse.Namespace) -> int:
    settings = settings_for(args)
    try:
        with gateway_client(settings) as c:
            r = c.post("/hub/api/login-link")
    except httpx.HTTPError as e:
        print(
            f"memory-tencentdb hub: no gateway on {settings.server.host}:{settings.server.port}"
            f" ({e}); start it with `memory-tencentdb serve`",
            file=sys.stderr,
        )
        return 1
    if r.status_code != 200:
        try:
            message = r.json().get("error", r.text)
        except ValueError:
            message = r.text
        print(f"memory-tencentdb hub: error {r.status_code}: {message}", file=sys.stderr)
        return 1
    url = r.json()["url"]
    print(f"Memory Hub (one login, within 5 minutes): {url}")
    if args.open and not webbrowser.open(url):
        print("no browser found here: open the link above yourself", file=sys.stderr)
    return 0


def add_command(sub: Any) -> None:

    p = sub.add_parser("hub", help="print a one-time login link to the Memory Hub web page")
    p.add_argument("--open", action="store_true", help="also open the link in a browser")
    add_gateway_options(p)
    p.set_defaults(fn=cmd_hub)
