"""A gateway on PostgreSQL opens a bounded number of connections, however many clients it has.

Reads share a pool of at most 8 connections (``store/postgres.py``); besides them the gateway
holds its writer, its vector writer and one connection per pipeline worker with a claim.
Before, every thread kept a reader of its own: with the HTTP thread pool (40 threads) that was
up to ~45 connections per gateway, and a few gateways on one server reached its
``max_connections``. 24 clients at once, zh and en, through HTTP against a real gateway and a
real PostgreSQL; the connections are counted in ``pg_stat_activity``.
"""

from __future__ import annotations

import threading
import time

import httpx
import psycopg

from tests.support import postgres
from tests.support.gateway import KEYWORD_ONLY

CLIENTS = 24
# 8 pooled readers + writer + vector writer + claims of the pipeline's workers (a few).
MAX_CONNECTIONS = 14
TEXTS = ("用户每周三晚上和朋友打羽毛球", "The user keeps a vegetable garden with basil")


def _connections(dsn: str) -> int:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid != pg_backend_pid()"
        ).fetchone()[0]


def test_many_clients_share_a_bounded_number_of_connections(start_gateway, scope: str):
    dsn = postgres.new_database()
    gw = start_gateway(
        env={
            "TDAI_STORE_BACKEND": "postgres",
            "TDAI_POSTGRES_DSN": dsn,
            **KEYWORD_ONLY,
        }
    )
    failures: list[str] = []
    peak = 0
    barrier = threading.Barrier(CLIENTS)

    def client(k: int) -> None:
        text = TEXTS[k % 2]
        with gw.client() as c:
            barrier.wait()
            for i in range(6):
                calls = [
                    (
                        "/capture",
                        {
                            "scope": scope,
                            "session_key": f"s-{k}",
                            "user_content": f"{text} #{k}-{i}",
                            "assistant_content": "好的 / noted",
                        },
                    ),
                    ("/search/memories", {"query": text, "scope": scope}),
                    ("/search/conversations", {"query": text, "scope": scope}),
                    ("/recall", {"query": text, "session_key": f"s-{k}", "scope": scope}),
                ]
                for path, body in calls:
                    try:
                        r = c.post(path, json=body)
                    except httpx.HTTPError as e:
                        failures.append(f"{path}: {type(e).__name__}: {e}")
                        continue
                    if r.status_code != 200:
                        failures.append(f"{path}: {r.status_code} {r.text[:200]}")

    threads = [threading.Thread(target=client, args=(k,)) for k in range(CLIENTS)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak = max(peak, _connections(dsn))
        time.sleep(0.05)
    peak = max(peak, _connections(dsn))
    assert not failures, failures[:5]
    assert peak <= MAX_CONNECTIONS, f"{peak} connections for one gateway"
    # Everything captured is there and searchable (nothing was lost waiting for a connection).
    with gw.client() as c:
        r = c.post("/search/conversations", json={"query": "羽毛球", "scope": scope, "limit": 50})
        assert r.status_code == 200
        assert len([it for it in r.json()["items"] if "羽毛球" in it["content"]]) >= 10
