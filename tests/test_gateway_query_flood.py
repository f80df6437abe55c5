"""A flood of huge queries cannot starve an ordinary recall, on a real gateway process (the
models' fair share between requests; many clients at once)."""

from __future__ import annotations

import threading
import time

import httpx


def _recall(c: httpx.Client, scope: str, query: str, **extra) -> dict:
    r = c.post("/recall", json={"session_key": "s", "scope": scope, "query": query, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def test_huge_queries_do_not_starve_an_ordinary_recall(start_gateway, scope: str):
    # A roomy deadline so a loaded test machine does not decide; without the fair share the
    # flood keeps the models busy for ~24 s (8 x 3 s) and every ordinary recall times out.
    gw = start_gateway(env={"TDAI_RECALL_TIMEOUT_MS": "10000"})
    with gw.client() as c:
        c.post(
            "/memories",
            json={
                "content": "用户对花生过敏 (peanut allergy)",
                "type": "instruction",
                "session_key": "s",
                "scope": scope,
            },
        )
    gw.wait_embedded()
    huge = ("请帮我看看这段日志 error timeout retry connection refused " * 2000)[:100_000]
    errors: list[str] = []

    def flood(route: str) -> None:
        try:
            with gw.client(timeout=120) as fc:
                r = fc.post(
                    route, json={"session_key": "s", "scope": scope + "-flood", "query": huge}
                )
                if r.status_code not in (200, 413, 422):
                    errors.append(f"{r.status_code} {r.text[:200]}")
        except httpx.HTTPError as e:
            errors.append(repr(e))

    # Eight huge recalls, and the model's search tools sending huge queries too.
    routes = ["/recall"] * 8 + ["/search/memories", "/search/conversations"] * 3
    threads = [threading.Thread(target=flood, args=(route,)) for route in routes]
    for t in threads:
        t.start()
    time.sleep(1.0)  # the huge queries are in the gateway's hands
    try:
        with gw.client() as c:
            answers = [_recall(c, scope, "我对什么过敏？peanut") for _ in range(3)]
    finally:
        for t in threads:
            t.join(180)
    assert all(a["memory_count"] >= 1 for a in answers), [a["strategy"] for a in answers]
    assert not errors, errors
