"""The real Hermes (hermes-agent 0.19.0, own venv) with our provider, the fake LLM and our gateway.

What a user relies on: symlink + one config line and memory just works; what was said or
remembered in one session comes back in the next; tool calls are captured; a dying gateway
never reaches the user; and no gateway process outlives the Hermes that started it.
"""

from __future__ import annotations

import re
import signal
import time

import httpx
import pytest

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess, free_port

from .harness import Driver, HermesHome, answers, last_user_text, main_requests, wait_dead

pytestmark = pytest.mark.hermes


def search_conversations(base_url: str, query: str, scope: str, headers: dict) -> dict:
    r = httpx.post(
        base_url + "/search/conversations",
        json={"query": query, "scope": scope, "limit": 20},
        headers=headers,
        timeout=30,
    )
    r.raise_for_status()
    return r.json()


def test_zero_config_chat_starts_gateway_captures_tool_calls_and_leaves_nothing(
    home: HermesHome, llm, tmp_path
):
    llm.push(
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "echo hello-from-tool"}}]}
    )
    r = home.chat("Please run the echo for me, my project is called quartz-lantern")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "FAKE-REPLY" in r.stdout
    session = re.search(r"session_id:\s*(\S+)", r.stdout + r.stderr).group(1)

    # The provider found the checkout's gateway on its own and started it ...
    pids = home.started_gateway_pids()
    assert len(pids) == 1, home.provider_log()
    assert "gateway up" in home.provider_log()
    gateway_log = (home.log_dir / "gateway.log").read_text("utf-8", "replace")
    scope = home.scope()
    assert f"session end: scope={scope} session={session}" in gateway_log
    # ... and stopped it when Hermes exited (a drain: it finished its pending work first):
    # no orphan, nothing on the port.
    assert wait_dead(pids[0], 35), f"gateway pid {pids[0]} outlived hermes"
    assert not answers(f"http://127.0.0.1:{home.port}")
    assert "stops after its pending work" in home.provider_log()

    # The turn, the tool call and its result are in the data directory.
    gw = GatewayProcess(home.data_dir, env=KEYWORD_ONLY).start()
    try:
        hits = search_conversations(gw.base_url, "hello-from-tool", scope, gw.headers)["items"]
        assert any(h["role"] == "tool" and "hello-from-tool" in h["content"] for h in hits), hits
        assert all(h["session_key"] == session for h in hits)
        hits = search_conversations(gw.base_url, "quartz-lantern", scope, gw.headers)["items"]
        assert any(h["role"] == "user" for h in hits), hits
    finally:
        gw.stop()


def test_memory_written_in_session_a_is_recalled_in_session_b(home: HermesHome, llm):
    # Keyword recall keeps this test about the Hermes path, not about the embedding model
    # (the auto-started gateway inherits the variable from Hermes's environment).
    drv = Driver(home, **KEYWORD_ONLY)
    try:
        assert drv.ready["state"]["active"], drv.ready
        # Session A: the model stores a preference with Hermes's built-in memory tool; the
        # provider mirrors it to POST /memories.
        llm.push(
            {
                "tool_calls": [
                    {
                        "name": "memory",
                        "arguments": {
                            "action": "add",
                            "target": "user",
                            "content": "User prefers jasmine tea over coffee",
                        },
                    }
                ]
            }
        )
        a = drv.turn("Remember: I like jasmine tea much more than coffee.")
        assert "FAKE-REPLY" in a["reply"]
        assert a["state"]["tool_calls_seen"] == 1  # the post_tool_call hook reached us
        drv.send("flush")
        new = drv.send("new_session")  # what /new does in the CLI
        assert new["ok"], new
        before = len(main_requests(llm))
        b = drv.turn("Tea or coffee this afternoon?")
        assert "FAKE-REPLY" in b["reply"]
        req = main_requests(llm)[before]
        user_text = last_user_text(req)
        assert "<memory-context>" in user_text, user_text
        context = user_text.split("<memory-context>", 1)[1]
        assert "jasmine tea" in context
        assert b["state"]["session_key"] == new["new"]

        # The tool call of session A was captured, under session A's key.
        drv.send("flush")
        scope = b["state"]["scope"]
        hits = search_conversations(home_url(home), "jasmine", scope, home.headers())["items"]
        calls = [h for h in hits if "[tool call] memory(" in h["content"]]
        assert calls and calls[0]["session_key"] == new["old"], hits
        hits = search_conversations(home_url(home), "Entry added", scope, home.headers())["items"]
        assert any(h["role"] == "tool" and h["session_key"] == new["old"] for h in hits), hits
        owned = drv.send("state")["state"]["owned_pid"]
        assert owned
        out = drv.exit()
        assert out["ok"], out
    finally:
        drv.kill()
    gateway_log = (home.log_dir / "gateway.log").read_text("utf-8", "replace")
    assert f"session end: scope={scope} session={new['old']}" in gateway_log
    assert f"session end: scope={scope} session={new['new']}" in gateway_log
    assert gateway_log.count(f"session={new['old']}") == 1  # idempotent: ended once
    assert wait_dead(owned, 35)


def home_url(home: HermesHome) -> str:
    return f"http://127.0.0.1:{home.port}"


def test_gateway_killed_mid_session_chat_goes_on_and_recall_resumes(tmp_path, llm, hermes):
    port = free_port()
    home = HermesHome.create(tmp_path, llm.base_url, port)
    # The gateway this Hermes home expects: its data directory, on its port.
    gw = GatewayProcess(home.data_dir, env=KEYWORD_ONLY, port=port).start()
    with gw.client() as c:
        c.post(
            "/memories",
            json={
                "content": "User's favourite editor is helix",
                "type": "persona",
                "session_key": "seed",
                # Hermes calls a temporary HERMES_HOME "default"; the provider adds its hash.
                "scope": home.default_scope(),
            },
        ).raise_for_status()
    # The test owns this gateway: the provider must adopt it, never start its own.
    drv = Driver(
        home,
        MEMORY_TENCENTDB_AUTO_START="0",
        MEMORY_TENCENTDB_BREAKER_THRESHOLD="2",
        MEMORY_TENCENTDB_BREAKER_COOLDOWN_S="1",
    )
    try:
        first = drv.turn("Which editor do I like? helix or vim")
        assert "helix" in last_user_text(main_requests(llm)[-1]).split("<memory-context>")[1]
        assert first["state"]["owned_pid"] is None

        gw.proc.send_signal(signal.SIGKILL)
        gw.proc.wait(10)
        down = [drv.turn(f"Still there? editor question {i}") for i in range(3)]
        for t in down:
            assert "FAKE-REPLY" in t["reply"]
            assert t["elapsed"] < 5.0, t  # no 8 s prefetch stall, no retry storm
        assert down[-1]["state"]["breaker"]["state"] == "open"
        assert "<memory-context>" not in last_user_text(main_requests(llm)[-1])
        # While open, prefetch answers without touching the network.
        assert down[-1]["state"]["last_prefetch_ms"] < 5

        gw.start()
        # No restart signal reaches the provider: its breaker finds out by itself (a
        # half-open probe after the cooldown, made by a retried capture or by a recall).
        deadline = time.monotonic() + 30
        while drv.send("state")["state"]["breaker"]["state"] != "closed":
            assert time.monotonic() < deadline, "breaker never closed again"
            time.sleep(0.3)
        back = drv.turn("And now, which editor do I like?")
        assert "FAKE-REPLY" in back["reply"]
        assert "helix" in last_user_text(main_requests(llm)[-1]).split("<memory-context>")[1]
        assert back["state"]["breaker"]["state"] == "closed"
        drv.exit()
    finally:
        drv.kill()
        gw.stop()
    assert "Traceback" not in "".join(drv.output)
