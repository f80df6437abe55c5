"""The provider driven directly (no Hermes) against real gateways it starts itself.

These pin down the supervision rules that are hard to provoke through Hermes: one gateway per
port across providers and processes, the last user stops it, a dead gateway comes back, and
an open breaker costs a turn nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from hermes_plugin import supervisor as supervisor_mod
from hermes_plugin.provider import (
    CONVERSATION_SEARCH,
    MEMORY_SEARCH,
    MemoryTencentdbProvider,
    _limit,
)
from hermes_plugin.supervisor import UP
from tests.support.gateway import KEYWORD_ONLY, free_port

from .harness import REPO, answers, wait_dead

GATEWAY_CMD = f"{sys.executable} -m memory_tencentdb serve"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    for key in list(os.environ):
        if key.startswith(("TDAI_", "MEMORY_TENCENTDB_", "HERMES_")):
            monkeypatch.delenv(key)
    port = free_port()
    values = {
        "HERMES_HOME": str(tmp_path / "hermes-home"),
        "TDAI_DATA_DIR": str(tmp_path / "data"),
        "MEMORY_TENCENTDB_GATEWAY_PORT": str(port),
        "MEMORY_TENCENTDB_GATEWAY_CMD": GATEWAY_CMD,
        **KEYWORD_ONLY,  # supervision is under test, not embeddings
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "hermes-home").mkdir()

    def headers() -> dict[str, str]:
        """The zero-config gateway's key, as the provider reads it (from the data directory)."""
        return {
            "Authorization": "Bearer " + (tmp_path / "data" / "gateway.key").read_text().strip()
        }

    yield SimpleNamespace(
        port=port, url=f"http://127.0.0.1:{port}", home=tmp_path / "hermes-home", headers=headers
    )
    # A failed test must not leave its gateway running.
    pid_file = tmp_path / "data" / "run" / f"hermes-gateway-{port}.pid"
    if pid_file.exists():
        pid = json.loads(pid_file.read_text())["pid"]
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def started(provider: MemoryTencentdbProvider, session: str, home: Path) -> MemoryTencentdbProvider:
    provider.initialize(session, hermes_home=str(home), agent_identity="tester")
    return up(provider)


def up(provider: MemoryTencentdbProvider) -> MemoryTencentdbProvider:
    assert provider._gw is not None
    assert provider._gw.supervisor.wait_until_settled(90), provider._gw.supervisor.detail
    return provider


def test_initialize_returns_at_once_and_providers_share_one_gateway(env):
    p1, p2 = MemoryTencentdbProvider(), MemoryTencentdbProvider()
    t0 = time.perf_counter()
    p1.initialize("s1", hermes_home=str(env.home), agent_identity="tester")
    assert time.perf_counter() - t0 < 0.5  # the start runs in the background
    up(p1)
    started(p2, "s2", env.home)
    sup = p1._gw.supervisor
    assert p2._gw.supervisor is sup
    pid = sup.owned_pid
    assert pid and answers(env.url)
    p1.shutdown()
    assert answers(env.url), "one session ending must not stop the gateway others use"
    p2.shutdown()
    assert wait_dead(pid, 10)
    assert not answers(env.url)
    p2.shutdown()  # idempotent


def test_turns_are_captured_in_order_and_session_end_is_sent_once(env):
    p = started(MemoryTencentdbProvider(), "sess-order", env.home)
    try:
        transcript: list[dict] = []
        for i in range(3):
            user = f"step {i}: deploy the walrus-{i} service"
            transcript += [
                {"role": "user", "content": user},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call_{i}",
                            "type": "function",
                            "function": {"name": "terminal", "arguments": '{"command": "ls"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": f"call_{i}", "content": f"walrus-{i}.yaml"},
                {"role": "assistant", "content": f"done {i}"},
            ]
            # Hermes hands over the whole transcript; only this turn may be captured.
            p.sync_turn(user, f"done {i}", messages=list(transcript))
        for _ in range(3):
            p.on_session_end(transcript)
        assert p._worker is not None and p._worker.flush(30)
        r = httpx.post(
            env.url + "/search/conversations",
            json={"query": "walrus", "scope": p._scope, "limit": 50},
            headers=env.headers(),
            timeout=30,
        ).json()
        items = sorted(r["items"], key=lambda h: h["timestamp"])
        users = [h["content"] for h in items if h["role"] == "user"]
        assert users == [f"step {i}: deploy the walrus-{i} service" for i in range(3)]
        assert [h["content"] for h in items if h["role"] == "tool"] == [
            f"walrus-{i}.yaml" for i in range(3)
        ]
        assert p._worker.sent == 4  # three captures, one session end

        # A turn far larger than the gateway's 1 MiB body limit still arrives, in batches.
        before = httpx.get(env.url + "/health", timeout=10).json()["counts"]["l0_messages"]
        big = [{"role": "user", "content": "read all the logs"}]
        for i in range(40):
            call = {"id": f"big{i}", "type": "function", "function": {"name": "read_file"}}
            big += [
                {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": f"big{i}", "content": f"log {i} " + "x" * 30_000},
            ]
        big.append({"role": "assistant", "content": "all read"})
        p.sync_turn("read all the logs", "all read", messages=big)
        assert p._worker.flush(30)
        after = httpx.get(env.url + "/health", timeout=10).json()["counts"]["l0_messages"]
        assert after - before == len(big)
        assert p._worker.failed == 0
    finally:
        p.shutdown()
    log = (env.home / "logs" / "memory_tencentdb" / "gateway.log").read_text("utf-8")
    assert log.count(f"session end: scope={p._scope} session=sess-order") == 1


def test_the_hermes_user_name_is_stored_as_the_speaker(env):
    """Hermes passes ``user_name`` on platforms that know it; L0 then says who spoke."""
    p = MemoryTencentdbProvider()
    p.initialize(
        "sess-name", hermes_home=str(env.home), agent_identity="tester", user_name="Melanie"
    )
    up(p)
    try:
        p.sync_turn("I painted a sunrise over the lake yesterday", "Lovely!")
        assert p._worker is not None and p._worker.flush(30)
        r = httpx.post(
            env.url + "/search/conversations",
            json={"query": "painted sunrise lake", "scope": p._scope, "limit": 10},
            headers=env.headers(),
            timeout=30,
        ).json()
        speakers = {h["role"]: h.get("speaker") for h in r["items"]}
        assert speakers.get("user") == "Melanie", r["items"]
    finally:
        p.shutdown()


def test_tools_coerce_limits_and_report_errors_as_json(env):
    assert [_limit(v) for v in ("999", -4, "abc", None, 7.9, "3")] == [20, 1, 5, 5, 7, 3]
    p = started(MemoryTencentdbProvider(), "sess-tools", env.home)
    try:
        for name in (MEMORY_SEARCH, CONVERSATION_SEARCH):
            out = json.loads(p.handle_tool_call(name, {"query": "anything", "limit": "999"}))
            assert "error" not in out and "results" in out, out
        assert "error" in json.loads(p.handle_tool_call(MEMORY_SEARCH, {"limit": 3}))
        assert "error" in json.loads(p.handle_tool_call("nope", {"query": "x"}))
    finally:
        p.shutdown()


def test_open_breaker_makes_prefetch_free(env, monkeypatch):
    monkeypatch.setenv("MEMORY_TENCENTDB_GATEWAY_CMD", "/nonexistent/gateway")
    p = MemoryTencentdbProvider()
    p.initialize("sess-down", hermes_home=str(env.home))
    try:
        p._gw.supervisor.wait_until_settled(10)
        for _ in range(5):
            assert p.prefetch("what do I like?") == ""
        assert p._gw.breaker.state == "open"
        times = []
        for _ in range(200):
            t0 = time.perf_counter()
            assert p.prefetch("what do I like?") == ""
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        # p95, not max: one scheduler hiccup on a loaded CI box is not the provider's doing.
        assert times[189] < 5, f"p95 prefetch {times[189]:.2f} ms with the breaker open"
        assert times[100] < 1
    finally:
        t0 = time.perf_counter()
        p.shutdown()
        assert time.perf_counter() - t0 < 3


def test_a_crashing_gateway_command_degrades_to_no_memory(env, monkeypatch):
    monkeypatch.setenv("MEMORY_TENCENTDB_GATEWAY_CMD", f"{sys.executable} -c 'raise SystemExit(3)'")
    p = MemoryTencentdbProvider()
    assert p.is_available()  # a command is configured: Hermes activates the provider
    p.initialize("sess-crash", hermes_home=str(env.home))
    try:
        assert not p._gw.supervisor.wait_until_settled(30)
        assert "did not become healthy" in p._gw.supervisor.detail
        assert p.system_prompt_block().startswith("## Long-term memory")  # the static guide
        assert p.prefetch("hello") == ""
        p.sync_turn("hello", "hi there")  # queued, never raises
        assert "error" in json.loads(p.handle_tool_call(MEMORY_SEARCH, {"query": "x"}))
        p.on_session_end([])
    finally:
        t0 = time.perf_counter()
        p.shutdown()
        assert time.perf_counter() - t0 < 3
    assert not (env.home.parent / "data" / "run" / f"hermes-gateway-{env.port}.pid").exists()


def test_is_available_without_any_way_to_reach_a_gateway_is_false(env, monkeypatch):
    monkeypatch.setenv("MEMORY_TENCENTDB_AUTO_START", "0")
    assert not MemoryTencentdbProvider().is_available()
    monkeypatch.setenv("MEMORY_TENCENTDB_AUTO_START", "1")
    assert MemoryTencentdbProvider().is_available()


def test_a_gateway_it_started_is_restarted_after_it_dies(env, monkeypatch):
    monkeypatch.setattr(supervisor_mod, "RESTART_THROTTLE_S", 0.0)
    p = started(MemoryTencentdbProvider(), "sess-restart", env.home)
    try:
        sup = p._gw.supervisor
        first = sup.owned_pid
        os.killpg(first, 9)
        assert wait_dead(first, 10)
        deadline = time.monotonic() + 90
        while not (sup.state == UP and sup.owned_pid not in (None, first)):
            assert time.monotonic() < deadline, sup.detail
            p.prefetch("anyone there?")  # each failure may trigger the (throttled) restart
            time.sleep(0.3)
        assert answers(env.url)
        second = sup.owned_pid
    finally:
        p.shutdown()
    assert wait_dead(second, 10)


OWNER_SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from hermes_plugin.provider import MemoryTencentdbProvider
    p = MemoryTencentdbProvider()
    p.initialize(sys.argv[2], hermes_home=sys.argv[3])
    sup = p._gw.supervisor
    up = sup.wait_until_settled(90)
    print(json.dumps({"up": up, "owned": sup.owned_pid, "detail": sup.detail}), flush=True)
    sys.stdin.readline()
    p.shutdown()
    print(json.dumps({"closed": True}), flush=True)
    """
)


def test_two_hermes_processes_start_one_gateway_and_the_last_one_out_stops_it(env):
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OWNER_SCRIPT, str(REPO), f"proc-{i}", str(env.home)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    try:
        reports = [json.loads(p.stdout.readline()) for p in procs]
        assert all(r["up"] for r in reports), reports
        owners = [i for i, r in enumerate(reports) if r["owned"]]
        assert len(owners) == 1, reports  # never two gateways for one port
        pid = reports[owners[0]]["owned"]
        owner, other = procs[owners[0]], procs[1 - owners[0]]
        owner.stdin.write("\n")
        owner.stdin.flush()
        assert json.loads(owner.stdout.readline())["closed"]
        owner.wait(10)
        assert answers(env.url), "the owner left, but another Hermes still uses the gateway"
        other.stdin.write("\n")
        other.stdin.flush()
        assert json.loads(other.stdout.readline())["closed"]
        other.wait(10)
        assert wait_dead(pid, 10), "the last Hermes out must stop the gateway"
        assert not answers(env.url)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_a_hermes_that_exits_without_shutdown_still_leaves_no_gateway(env):
    script = textwrap.dedent(
        """
        import json, sys
        sys.path.insert(0, sys.argv[1])
        from hermes_plugin.provider import MemoryTencentdbProvider
        p = MemoryTencentdbProvider()
        p.initialize("crashy", hermes_home=sys.argv[2])
        sup = p._gw.supervisor
        print(json.dumps({"up": sup.wait_until_settled(90), "owned": sup.owned_pid}), flush=True)
        raise SystemExit(0)  # no shutdown(): only the interpreter's exit hooks run
        """
    )
    r = subprocess.run(
        [sys.executable, "-c", script, str(REPO), str(env.home)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(r.stdout.splitlines()[0])
    assert report["up"] and report["owned"], r.stdout + r.stderr
    assert wait_dead(report["owned"], 10)
    assert not answers(env.url)


def test_a_gateway_that_rejects_our_key_gets_no_turns_and_memory_pauses(env, monkeypatch, caplog):
    # A gateway with its own configured key on our port; ours is another key (a configured
    # key identifies a gateway without a data-directory check, so only the 401 tells).
    from tests.support.gateway import GatewayProcess

    gw = GatewayProcess(
        env.home.parent / "foreign",
        env={"TDAI_GATEWAY_API_KEY": "their-key", **KEYWORD_ONLY},
        port=env.port,
    ).start()
    monkeypatch.setenv("MEMORY_TENCENTDB_GATEWAY_API_KEY", "our-key")
    monkeypatch.delenv("TDAI_DATA_DIR")  # no data directory configured, only the key
    monkeypatch.setenv("MEMORY_TENCENTDB_ROOT", str(env.home.parent / "root"))
    p = MemoryTencentdbProvider()
    p.initialize("sess-401", hermes_home=str(env.home))
    try:
        assert p.prefetch("what is my wifi password?") == ""
        p.sync_turn("my wifi password is hunter2", "noted")
        out = json.loads(p.handle_tool_call(MEMORY_SEARCH, {"query": "wifi"}))
        assert "paused" in out["error"], out
        p.on_turn_start(2, "again")  # a re-check must not send it anything either
        assert p.prefetch("and now?") == ""
        assert p._worker is not None
        p._worker.flush(3)
    finally:
        p.shutdown()
    with gw.client() as c:
        counts = c.get("/health").json()["counts"]
    gw.stop()
    assert counts == {"l0_messages": 0, "l1_memories": 0}
    warnings = [r.getMessage() for r in caplog.records if "not our gateway" in r.getMessage()]
    assert len(warnings) == 1, warnings  # said once, with what we expected
    assert "rejects the configured key" in warnings[0] and "foreign" in warnings[0]
    # The turn is kept on disk for our own gateway, not dropped.
    assert list((env.home / "memory-tencentdb" / "spool").glob("*.json"))


def test_a_new_session_cancels_the_drain_of_our_gateway(env, monkeypatch):
    from tests.support.fake_llm import FakeLLM

    with FakeLLM() as slow:
        # The gateway's L1 extraction waits on a slow LLM: its drain has work to finish.
        slow.push({"delay": 5, "content": "[]"})
        monkeypatch.setenv("TDAI_LLM_BASE_URL", slow.base_url)
        monkeypatch.setenv("TDAI_LLM_API_KEY", "sk-fake")
        monkeypatch.setenv("TDAI_LLM_MODEL", "fake-model")
        p1 = started(MemoryTencentdbProvider(), "sess-drain-1", env.home)
        pid = p1._gw.supervisor.owned_pid
        p1.sync_turn("I always take the night train to Vienna", "noted")
        p1.on_session_end([])
        assert p1._worker is not None and p1._worker.flush(10)
        t0 = time.perf_counter()
        p1.shutdown()
        assert time.perf_counter() - t0 < 3  # asked to drain, not waited for
        with httpx.Client(timeout=5) as c:
            assert c.get(env.url + "/health").json()["draining"] is True
        # The same process again (a new Hermes session): the draining gateway is kept.
        p2 = started(MemoryTencentdbProvider(), "sess-drain-2", env.home)
        try:
            assert p2._gw.supervisor.detail == "already running"
            with httpx.Client(timeout=5) as c:
                health = c.get(env.url + "/health").json()
            assert health["draining"] is False and health["pid"] == pid
            time.sleep(1.0)
            assert answers(env.url)
        finally:
            p2.shutdown()
        assert wait_dead(pid, 40), "the last session out must still stop it"


def test_memory_search_tool_on_a_starting_gateway_waits_for_its_models(env, monkeypatch):
    # Real embedding models: the point is the semantic answer while they load.
    monkeypatch.delenv("TDAI_EMBEDDING_PROVIDER")
    p1 = started(MemoryTencentdbProvider(), "sess-seed", env.home)
    p1.on_memory_write("add", "user", "我对花生过敏")
    assert p1._worker is not None and p1._worker.flush(30)
    pid = p1._gw.supervisor.owned_pid
    p1.shutdown()
    assert wait_dead(pid, 40)
    # A fresh process view of the same gateway address: nothing runs. As in a Hermes turn, the
    # prefetch comes first (it may give up at its budget on a slow box), then the model's tool
    # call, which waits for the models within its own 10 s.
    from hermes_plugin.state import shared

    shared().gateways.clear()
    p2 = MemoryTencentdbProvider()
    p2.initialize("sess-tool", hermes_home=str(env.home), agent_identity="tester")
    try:
        p2.prefetch("零食")
        out = json.loads(p2.handle_tool_call(MEMORY_SEARCH, {"query": "买零食要避开什么"}))
        assert "error" not in out, out
        assert any("花生" in item["content"] for item in out["items"]), out
        assert "embedding" in str(out.get("strategy")), out  # by meaning, not keyword-only
        assert p2._gw.supervisor.ready
    finally:
        p2.shutdown()


def test_a_late_recall_keeps_the_stable_part_in_the_rebuilt_system_prompt(env, monkeypatch):
    """Hermes rebuilds its system prompt after every compaction: a recall that comes back late
    (a loaded machine, measured in the real-Hermes replay) keeps the last stable part instead
    of dropping the persona and the tool guide from the prompt."""
    from hermes_plugin.client import GatewayUnavailable

    p = started(MemoryTencentdbProvider(), "sess-stable", env.home)
    try:
        body = {"content": "用户不喝咖啡 / The user does not drink coffee", "type": "persona",
                "session_key": "sess-stable", "scope": p._scope}  # fmt: skip
        r = httpx.post(f"{env.url}/memories", json=body, headers=env.headers(), timeout=30)
        assert r.status_code in (200, 201), r.text
        first = p.system_prompt_block()
        assert "<memory-tools-guide>" in first, first

        def late(*_a, **_k):
            raise GatewayUnavailable("ReadTimeout: timed out")

        monkeypatch.setattr(p._gw.client, "recall", late)
        assert p.system_prompt_block() == first
    finally:
        p.shutdown()
