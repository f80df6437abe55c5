"""One real gateway with zh and en data for the Memory Hub tests, and Debian's Chromium driven by
Playwright (never Playwright's own browser download).

The gateway has a keys file: the data directory's own key is the owner (``memory-tencentdb hub``
sends it), ``bob`` owns the scope ``bob`` and reads the team scope ``team:ops`` (``alice``
writes it). The owner's views look at scope ``alice``: memories extracted by the rules pipeline
from captured zh and en messages (so each has its raw source messages), a persona and a scene
folded from them, and an offload session with a task canvas. Screenshots of each view go to
``tests/artifacts/hub/`` (gitignored).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.gateway import GatewayProcess

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "hub"

KEYS = {"alice": "key-of-alice-0123456789", "bob": "key-of-bob-0123456789ab"}
KEYS_FILE = {
    "principals": {
        "alice": {"key": KEYS["alice"], "scopes": ["alice"]},
        "bob": {"key": KEYS["bob"], "scopes": ["bob"]},
    },
    "scopes": {"team:ops": {"readers": ["bob"], "writers": ["alice"]}},
}
# What the owner's views show (scope alice): captured turns, in both languages.
ALICE_TURNS = [
    ("s-zh", "我对花生过敏，吃了会起疹子。", "好的，我记住了。"),
    ("s-zh", "我每天早上喝两杯咖啡。", "了解。"),
    ("s-en", "I live in Munich with my wife.", "Nice!"),
    ("s-en", "I am training for the Berlin marathon in September.", "Good luck!"),
]
ALICE_SECRET = "Munich"  # a word of alice's that bob must never receive
# Stored text that looks like markup must stay text in the page (never run, never parsed).
XSS_MEMORY = 'Bob 的笔记 <img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
XSS_RESULT = "<script>window.__xss=4</script> build log"
BOB_FACTS = ["Bob prefers green tea to coffee", "鲍勃周末在社区花园种番茄", XSS_MEMORY]
TEAM_FACT = "团队决定：发布周内冻结预发布集群 / staging is frozen during release week"
RAW_LINE = "line 123: test_parser.py::test_case_123 PASSED"


def require_chromium() -> None:
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing = "playwright (pip install -e '.[dev]')"
    else:
        missing = None if CHROMIUM.exists() else f"{CHROMIUM} (scripts/test-hosts.d/chromium.sh)"
    if missing:
        msg = f"Memory Hub browser tests need {missing}; run `make hosts`"
        if os.environ.get("MEMORY_TENCENTDB_REQUIRE_HOSTS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)


def _post(client: httpx.Client, path: str, body: dict[str, Any]) -> Any:
    r = client.post(path, json=body)
    assert r.status_code in (200, 201), (path, r.status_code, r.text)
    return r.json()


def _seed(gw: GatewayProcess) -> dict[str, Any]:
    with gw.client() as owner:
        for session, user, assistant in ALICE_TURNS:
            _post(
                owner,
                "/capture",
                {
                    "scope": "alice",
                    "session_key": session,
                    "user_content": user,
                    "assistant_content": assistant,
                },
            )
        for session in ("s-zh", "s-en"):
            _post(owner, "/session/end", {"scope": "alice", "session_key": session})
        big = "\n".join(f"line {i}: test_parser.py::test_case_{i} PASSED" for i in range(400))
        _post(
            owner,
            "/offload/tool-result",
            {
                "scope": "alice",
                "session_key": "task-1",
                "tool_call_id": "call_pytest",
                "tool_name": "bash",
                "arguments": {"command": "pytest -q tests/test_parser.py"},
                "result": big,
            },
        )
        _post(
            owner,
            "/offload/tool-result",
            {
                "scope": "alice",
                "session_key": "task-1",
                "tool_call_id": "call_read",
                "tool_name": "read_file",
                "arguments": {"path": "src/解析器.py"},
                "result": "def parse(text):\n    return text.split()\n" * 150,
            },
        )
    with gw.client(token=KEYS["bob"]) as bob:
        for fact in BOB_FACTS:
            _post(
                bob,
                "/memories",
                {"content": fact, "type": "persona", "session_key": "b1", "scope": "bob"},
            )
        _post(
            bob,
            "/offload/tool-result",
            {
                "scope": "bob",
                "session_key": "bob-task",
                "tool_call_id": "call_xss",
                "tool_name": "bash",
                "arguments": {"command": 'echo "<img src=x onerror=window.__xss=3>"'},
                "result": "\n".join([XSS_RESULT] * 400),
            },
        )
    with gw.client(token=KEYS["alice"]) as alice:
        _post(
            alice,
            "/memories",
            {"content": TEAM_FACT, "type": "episodic", "session_key": "t1", "scope": "team:ops"},
        )
    # The rules pipeline folds the memories into a scene and the persona within seconds.
    deadline = time.monotonic() + 90
    with gw.client() as owner:
        while time.monotonic() < deadline:
            persona = owner.get("/persona", params={"scope": "alice"}).json()["persona"]
            scenes = owner.get("/scenes", params={"scope": "alice"}).json()["scenes"]
            if persona and scenes and "Munich" in persona and "花生" in persona:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"no persona/scene for alice after 90 s: {persona!r} {scenes!r}")
        items = owner.get("/memories", params={"scope": "alice"}).json()["items"]
    gw.wait_embedded()
    return {"alice": {m["content"]: m for m in items}}


@pytest.fixture(scope="session")
def hub_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    data = tmp_path_factory.mktemp("hub") / "data"
    data.mkdir(parents=True)
    (data / "keys.json").write_text(json.dumps(KEYS_FILE), "utf-8")
    (data / "keys.json").chmod(0o600)
    gw = GatewayProcess(data).start()
    try:
        seeded = _seed(gw)
        yield {"gw": gw, "memories": seeded}
    finally:
        gw.stop()


def login_link(gw: GatewayProcess) -> str:
    """A one-time link, asked for through the real entry point: ``memory-tencentdb hub``."""
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_tencentdb",
            "hub",
            "--data-dir",
            str(gw.data_dir),
            "--port",
            str(gw.port),
            "--host",
            "127.0.0.1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("TDAI_")},
    )
    assert out.returncode == 0, out.stderr
    url = out.stdout.strip().rsplit(" ", 1)[-1]
    assert "/hub/#login=" in url, out.stdout
    return url


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


def shot(page: Any, name: str, full: bool = False) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=full)
