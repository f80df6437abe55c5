"""Read-back after ``--no-offload`` in the real Hermes 0.19.0 (issue 21, item 5).

A user runs a session with ``scripts/install-hermes.sh --offload`` (two large ``terminal``
outputs, en and zh, become stubs), switches offload off with ``--no-offload``, and resumes the
session (``hermes chat -Q -q ... --resume <id>``). The resumed transcript still holds the stubs;
the model follows each stub's own instruction and then each page's last line. What must hold:
the read tool is offered, every read-back answer reaches the model uncut (Hermes keeps at most
8,000 characters of a tool result for a window it does not know, so the pages are shorter), the
pages join to the original byte for byte, and no other tool is called (Hermes repairs an
unknown tool name to its nearest neighbour: ``memory_tencentdb_forget``).

The forget tool's refusal of another tool's arguments is checked here too, through the provider.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_llm import FakeLLM
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.tool_agent import (
    READ_TOOL,
    ToolAgent,
    call,
    read_back_arguments,
    say,
    terminal,
    text_of,
    tool_message,
    tools,
    write_doc,
)

from .harness import HermesHome, hermes_venv
from .offload_support import assert_clean, chat, session_of, switch_offload, tool_names

pytestmark = pytest.mark.hermes

HERMES_RESULT_FLOOR = 8_000  # tools/budget_config.py: the smallest per-result limit
PAGE_MARK = f"\n\n[{READ_TOOL} page: characters "  # what precedes it is the page


def require_hermes() -> None:
    if not (hermes_venv() / "bin" / "hermes").exists():
        msg = f"hermes-agent venv missing at {hermes_venv()} (`make hosts`)"
        if os.environ.get("MEMORY_TENCENTDB_REQUIRE_HOSTS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    require_hermes()
    gw = GatewayProcess(tmp_path_factory.mktemp("gw") / "data", env=KEYWORD_ONLY).start()
    yield gw
    gw.stop()


def terminal_result(text: str) -> str:
    """The exact string Hermes's ``terminal`` tool returns for a command printing ``text``."""
    return json.dumps({"output": text, "exit_code": 0, "error": None}, ensure_ascii=False)


class PageReader:
    """A cooperative model reading ``targets`` back: first as each stub says, then as each
    page's last line says, until the last page; then it answers ``done``. One instance is
    pushed as many steps as it may need; ``pages[target]`` collects what it was answered."""

    def __init__(self, targets: list[str], done: str) -> None:
        self.targets = list(targets)
        self.done = done
        self.pages: dict[str, list[str]] = {t: [] for t in targets}
        self.answers: list[str] = []
        self.current: str | None = None
        self.last_read: str | None = None
        self.n = 0

    def __call__(self, request: dict[str, Any]) -> Any:
        args: dict[str, Any] | None = None
        if self.last_read is not None:
            answer = text_of((tool_message(request, self.last_read) or {}).get("content"))
            self.answers.append(answer)
            at = answer.rfind(PAGE_MARK)
            self.pages[self.current].append(answer if at < 0 else answer[:at])
            if at >= 0 and "next page:" in answer[at:]:
                args = read_back_arguments(answer[at:])
            else:
                self.targets.pop(0)
        if args is None:
            if not self.targets:
                self.last_read = None
                return say(self.done)
            self.current = self.targets[0]
            stub = text_of((tool_message(request, self.current) or {}).get("content"))
            args = read_back_arguments(stub) or {"tool_call_id": self.current}
        self.n += 1
        self.last_read = f"call_rb_read{self.n}"
        return tools(call(READ_TOOL, self.last_read, **args))


def test_offload_then_no_offload_then_resume_reads_back_whole(
    tmp_path: Path, gateway: GatewayProcess
) -> None:
    with FakeLLM() as llm:
        agent = ToolAgent(llm)
        home = HermesHome.create(tmp_path, llm.base_url, gateway.port)
        home.data_dir = gateway.data_dir
        home.extra_env["MEMORY_TENCENTDB_AUTO_START"] = "0"
        docs = tmp_path / "docs"
        docs.mkdir()
        en = write_doc(docs, "report-en.txt", 30_000, "en", 7)
        zh = write_doc(docs, "报告-zh.txt", 16_000, "zh", 8)
        originals = {
            "call_rb_en": terminal_result(en.read_text("utf-8")),
            "call_rb_zh": terminal_result(zh.read_text("utf-8")),
        }

        # 1. --offload: both outputs become stubs.
        switch_offload(home, True)
        agent.push(
            tools(terminal(f"cat {en}", "call_rb_en")),
            tools(terminal(f"cat {zh}", "call_rb_zh")),
            say("OFFLOADED-DONE"),
        )
        run, _ = chat(home, "Please read both reports. 请阅读两份报告。")
        assert_clean(run, "OFFLOADED-DONE")
        sid = session_of(run)
        last = agent.main_requests()[-1]
        for cid, original in originals.items():
            seen = text_of((tool_message(last, cid) or {}).get("content"))
            assert READ_TOOL in seen and len(seen) < len(original) / 5, (cid, seen[:300])

        # 2. --no-offload, 3. the same session resumed: the model reads both back.
        switch_offload(home, False)
        start = agent.mark()
        reader = PageReader(list(originals), "READBACK-DONE")
        agent.push(*[reader] * 20)
        run, _ = chat(home, "Read both reports back in full. 把两份报告完整读回来。", resume=sid)
        agent.clear()
        assert_clean(run, "READBACK-DONE")
        resumed = agent.main_requests()[start:]

    # The read tool is offered after --no-offload (the stubs in the transcript name it).
    for request in resumed:
        assert READ_TOOL in tool_names(request)
    # Every tool call of the resumed run is the read tool: nothing repaired to a neighbour.
    called = {
        tc.get("id"): tc["function"]["name"]
        for m in resumed[-1]["messages"]
        if m.get("role") == "assistant"
        for tc in m.get("tool_calls") or []
        if tc.get("id") not in originals
    }
    assert len(called) == reader.n and set(called.values()) == {READ_TOOL}, called
    # Every answer reached the model uncut, within Hermes's per-result limit.
    for answer in reader.answers:
        assert len(answer) <= HERMES_RESULT_FLOOR, len(answer)
        assert "<persisted-output>" not in answer
    # The pages join to the original, byte for byte (and equal what the gateway stored).
    for cid, original in originals.items():
        joined = "".join(reader.pages[cid])
        assert joined.encode("utf-8") == original.encode("utf-8"), (cid, len(joined))
        assert len(reader.pages[cid]) == -(-len(original) // (HERMES_RESULT_FLOOR - 400))
    print(
        "\n  real Hermes, offload off, resumed: "
        + ", ".join(
            f"{c}: {len(o)} chars in {len(reader.pages[c])} pages" for c, o in originals.items()
        )
    )


class _NoGateway:
    """Stands in for the provider's gateway: any use of it fails the test."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the gateway was used ({name})")


def test_forget_refuses_another_tools_arguments_and_removes_nothing() -> None:
    from hermes_plugin.provider import FORGET, MemoryTencentdbProvider

    provider = MemoryTencentdbProvider()
    provider._gw = _NoGateway()  # type: ignore[assignment]
    provider._closed = False
    for args in ({"tool_call_id": "call_rb_en"}, {"query": "teal", "tool_call_id": "x"}):
        answer = json.loads(provider.handle_tool_call(FORGET, args))
        assert "nothing was removed" in answer["error"], answer
        assert "tool_call_id" in answer["error"] and READ_TOOL in answer["error"]
    answer = json.loads(provider.handle_tool_call(FORGET, {"canvas": "active", "offset": 3}))
    assert "not canvas, offset" in answer["error"]


def test_read_offsets_models_send() -> None:
    """Models send offsets as 7600, 7600.0 or "7600"; anything else is refused before a call."""
    from hermes_plugin import offload

    calls: list[dict[str, Any]] = []
    text = "第一行 line\n" * 2000

    class Client:
        @staticmethod
        def post(path: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
            calls.append(body)
            o, n = body["offset"], body["length"]
            return {
                "kind": "tool_result",
                "tool_call_id": "c1",
                "content": text[o : o + n],
                "offset": o,
                "end": min(len(text), o + n),
                "total_chars": len(text),
            }

    class Gw:
        client = Client

    target = offload.Route(Gw, "s", "scope")  # type: ignore[arg-type]
    for given in (7600, 7600.0, "7600"):
        page = offload.read_back(target, {"tool_call_id": "c1", "offset": given})
        assert page.startswith(text[7600:7700]) and PAGE_MARK in page, given
    for bad in (-1, True, 1.5, "x"):
        before = len(calls)
        answer = json.loads(offload.read_back(target, {"tool_call_id": "c1", "offset": bad}))
        assert "offset" in answer["error"] and len(calls) == before, bad
