"""Memory Hub benchmark: page load (first paint) and search latency at 100k memories, measured in
the browser (Debian's Chromium driven by Playwright, as in tests/hub/).

The data directory is the synthetic zh+en workload of ``_synthetic.py`` (100k L1 memories and
100k L0 messages in one scope, with vectors for both models), copied and caught up as the
gateway benchmark does. A real gateway serves it; the browser logs in with a one-time link, then:

- page load: a fresh page each time; ``first-contentful-paint`` (the browser's paint timing) and
  the time until the pyramid with its counts is drawn (``#pyramid button``), from navigation
  start; the first load (Mermaid not loaded: it loads only with the Offload view) is reported
  apart from the warm ones;
- the L1 layer: the click until the first page (50) of the 100k memories is listed;
- search: the search form submitted for each query of the synthetic query set (memories, then
  conversations): the time until the results are drawn, and the fetch alone.

Run: ``.venv/bin/python bench/hub_bench.py [--quick]`` (quick: 5k + 5k, to bench/out/). Writes
``bench/results/hub.json`` and prints the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import _synthetic as syn  # noqa: E402

RESULTS = ROOT / "bench" / "results"
WORK = ROOT / "bench" / "out" / "hub"
CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def log(msg: str) -> None:
    print(msg, flush=True)


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    k = max(0, min(len(values) - 1, round(p / 100 * (len(values) - 1))))
    return round(values[k], 1)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50_ms": pct(values, 50),
        "p90_ms": pct(values, 90),
        "max_ms": round(max(values), 1),
        "mean_ms": round(statistics.fmean(values), 1),
    }


def start_gateway(data: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TDAI_", "MEMORY_TENCENTDB_"))}
    env.update(
        {
            "TDAI_DATA_DIR": str(data),
            "TDAI_GATEWAY_HOST": "127.0.0.1",
            "TDAI_GATEWAY_PORT": str(port),
            "PYTHONPATH": str(ROOT),
        }
    )
    logf = (WORK / "gateway.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory_tencentdb", "serve"], env=env, stdout=logf, stderr=logf
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            h = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()
            emb = h.get("embedding", {})
            if h.get("ready") and emb.get("state") == "ready" and emb.get("idle", True):
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("gateway exited; see bench/out/hub/gateway.log")
        time.sleep(0.5)
    proc.terminate()
    raise TimeoutError("gateway not ready in 300 s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="5k L1 + 5k L0 (smoke run)")
    ap.add_argument("--loads", type=int, default=8)
    ap.add_argument("--queries", type=int, default=30)
    args = ap.parse_args(argv)
    n = 5_000 if args.quick else 100_000
    from playwright.sync_api import sync_playwright

    load_start = os.getloadavg()[0]
    src = syn.dataset(f"full-{n // 1000}k", n, n, log)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    syn.materialise(src, WORK / "data", log)
    port = 18000 + os.getpid() % 1000
    proc = start_gateway(WORK / "data", port)
    base = f"http://127.0.0.1:{port}"
    key = (WORK / "data" / "gateway.key").read_text().strip()
    queries = syn.gen_queries(args.queries)
    try:
        link = httpx.post(
            f"{base}/hub/api/login-link", headers={"Authorization": f"Bearer {key}"}
        ).json()["url"]
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            ctx = browser.new_context(viewport={"width": 1280, "height": 860})
            page = ctx.new_page()
            page.goto(link)
            page.wait_for_selector("#pyramid button")
            page.select_option("#scope", syn.SCOPE)
            page.wait_for_selector(f"#pyramid[data-scope='{syn.SCOPE}']")
            counts = page.locator("#pyramid button").all_inner_texts()
            page.close()
            fcp, drawn = [], []
            for _ in range(args.loads):
                pg = ctx.new_page()
                pg.goto(f"{base}/hub/")
                pg.wait_for_selector(f"#pyramid[data-scope='{syn.SCOPE}'] button")
                t = pg.evaluate(
                    """() => ({
                        fcp: (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime,
                        now: performance.now() })"""
                )
                fcp.append(t["fcp"])
                drawn.append(t["now"])
                pg.close()
            page = ctx.new_page()
            page.goto(f"{base}/hub/")
            page.wait_for_selector(f"#pyramid[data-scope='{syn.SCOPE}'] button")
            layer = []
            for _ in range(5):
                t0 = time.perf_counter()
                page.click("[data-layer=persona]")
                page.click("[data-layer=memories]")
                page.wait_for_selector(".memory-list li")
                layer.append((time.perf_counter() - t0) * 1000)
            search: dict[str, dict[str, list[float]]] = {}
            page.click("#tabs [data-view=search]")
            for kind in ("memories", "conversations"):
                page.select_option("#search-kind", kind)
                wall, fetch = [], []
                for q in queries:
                    page.evaluate("() => { delete document.body.dataset.searchMs; }")
                    page.fill("#search-q", q)
                    t0 = time.perf_counter()
                    page.click("#search-form button")
                    page.wait_for_selector("body[data-search-ms]")
                    wall.append((time.perf_counter() - t0) * 1000)
                    fetch.append(float(page.get_attribute("body", "data-search-ms")))
                search[kind] = {"drawn": wall, "fetch": fetch}
            browser.close()
        health = httpx.get(f"{base}/health").json()
        # The gateway's own search routes on the same queries, without the page: what the hub
        # adds on top of them is the difference.
        direct: dict[str, list[float]] = {}
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as c:
            for kind in ("memories", "conversations"):
                direct[kind] = []
                for q in queries:
                    t0 = time.perf_counter()
                    r = c.post(
                        f"/search/{kind}", json={"query": q, "scope": syn.SCOPE, "limit": 20}
                    )
                    direct[kind].append((time.perf_counter() - t0) * 1000)
                    assert r.status_code == 200, r.text
    finally:
        proc.terminate()
        proc.wait(30)
    results = {
        "n_l1": n,
        "n_l0": n,
        "scope_counts_shown": counts,
        "cpu_count": os.cpu_count(),
        "load_avg_1m": [round(load_start, 1), round(os.getloadavg()[0], 1)],
        "store": health.get("store"),
        "strategy": "hybrid",
        "page_load": {
            "first_contentful_paint": summary(fcp),
            "pyramid_drawn": summary(drawn),
            "note": "fresh page each time, logged in; from navigation start",
        },
        "l1_first_page_ms": summary(layer),
        "search": {
            kind: {
                "drawn": summary(v["drawn"]),
                "fetch": summary(v["fetch"]),
                "api_route_alone": summary(direct[kind]),
            }
            for kind, v in search.items()
        },
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip(),
    }
    target = (syn.OUT / "hub-quick.json") if args.quick else (RESULTS / "hub.json")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    pl = results["page_load"]
    log(f"at {n} memories + {n} messages ({target.relative_to(ROOT)}):")
    log(
        f"  first contentful paint p50 {pl['first_contentful_paint']['p50_ms']} ms,"
        f" pyramid drawn p50 {pl['pyramid_drawn']['p50_ms']} ms"
        f" (p90 {pl['pyramid_drawn']['p90_ms']})"
    )
    log(f"  L1 first page p50 {results['l1_first_page_ms']['p50_ms']} ms")
    for kind, v in results["search"].items():
        log(
            f"  search {kind}: drawn p50 {v['drawn']['p50_ms']} ms, p90 {v['drawn']['p90_ms']};"
            f" fetch p50 {v['fetch']['p50_ms']} ms; POST /search/{kind} alone p50"
            f" {v['api_route_alone']['p50_ms']} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
