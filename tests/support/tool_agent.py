"""A scripted tool-using agent on top of the fake LLM (tests/support/fake_llm.py).

Why a sibling module: the offload tests drive a real host (Hermes, OpenClaw) through long
tool-heavy sessions, so "the model" must call tools turn after turn, sometimes deciding from what
the request holds (follow a stub's read-back instruction, say), and report prompt tokens the way a
real provider does (hosts compact on them). ``ToolAgent`` installs itself on a ``FakeLLM``:

- only requests that offer ``tools`` consume a step; auxiliary calls (titles, summaries) get
  ``aux_reply``, so they can never shift the script;
- ``arrivals`` holds when each of those requests came (for the time a turn spends between
  model calls: tools and the host's own work);
- a step is a fake_llm reply dict, or a function ``request body -> reply`` (``read_back``);
- every request body is still recorded by the fake (``fake.requests``); ``main_requests()``
  gives the agent's own ones, ``served`` what each of them was answered;
- ``usage`` reports ``prompt_tokens`` counted on the request (cl100k via ``bpe-openai``, the
  gateway's tokenizer, else its estimate).

``make_text`` writes deterministic zh / en documents of an exact length, for tool results of
chosen sizes (``terminal`` running ``cat`` on them).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from tests.support.fake_llm import FakeLLM

Reply = dict[str, Any]
Step = Reply | Callable[[dict[str, Any]], Reply]

READ_TOOL = "memory_tencentdb_offload_read"


# --- tool calls ---------------------------------------------------------------------------


def call(name: str, call_id: str | None = None, **arguments: Any) -> dict[str, Any]:
    """One tool call as fake_llm scripts it."""
    return {"id": call_id or "call_" + uuid.uuid4().hex[:10], "name": name, "arguments": arguments}


def terminal(command: str, call_id: str | None = None) -> dict[str, Any]:
    return call("terminal", call_id, command=command)


def read_file(path: str | Path, call_id: str | None = None) -> dict[str, Any]:
    return call("read_file", call_id, path=str(path))


def tools(*calls: dict[str, Any]) -> Reply:
    """One assistant message calling these tools (Hermes runs them as one batch)."""
    return {"tool_calls": list(calls)}


def say(text: str) -> Reply:
    return {"content": text}


# --- reading the requests -----------------------------------------------------------------


def text_of(content: Any) -> str:
    """A message content as text (string, or OpenAI content parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def tool_message(request: dict[str, Any], call_id: str) -> dict[str, Any] | None:
    """The tool message answering ``call_id`` in a request (the last one if repeated)."""
    found = None
    for m in request.get("messages") or []:
        if m.get("role") == "tool" and m.get("tool_call_id") == call_id:
            found = m
    return found


def tool_results(request: dict[str, Any]) -> dict[str, str]:
    """tool_call_id -> result text, for every tool message of a request."""
    return {
        str(m.get("tool_call_id")): text_of(m.get("content"))
        for m in request.get("messages") or []
        if m.get("role") == "tool"
    }


_READ_HINT = re.compile(re.escape(READ_TOOL) + r"\s*(\{[^\n]*\})")


def read_back_arguments(stub: str) -> dict[str, Any] | None:
    """The arguments a stub tells the model to pass to the read tool, if it says so."""
    m = _READ_HINT.search(stub)
    if not m:
        return None
    try:
        args = json.loads(m.group(1))
    except ValueError:
        return None
    return args if isinstance(args, dict) else None


def read_back(call_id: str, read_id: str | None = None) -> Callable[[dict[str, Any]], Reply]:
    """A step: follow the read-back instruction of ``call_id``'s stub, as a cooperative model.

    When the request holds no such instruction (the result was not stubbed), the model still asks
    by tool call id, the way the tool's schema documents it.
    """

    def step(request: dict[str, Any]) -> Reply:
        msg = tool_message(request, call_id)
        args = read_back_arguments(text_of(msg.get("content"))) if msg else None
        return tools(call(READ_TOOL, read_id, **(args or {"tool_call_id": call_id})))

    return step


# --- token counting -----------------------------------------------------------------------


@lru_cache(maxsize=1)
def _encoding() -> Any:
    try:
        import bpe_openai

        return bpe_openai.get_encoding("cl100k_base")
    except Exception:  # noqa: BLE001 - the estimate is good enough for a fake's usage
        return None


_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef]")


def count_tokens(text: str) -> int:
    if not text:
        return 0
    enc = _encoding()
    if enc is not None:
        return len(enc.encode_ordinary(text))
    cjk = len(_CJK.findall(text))
    return math.ceil(cjk * 1.3 + (len(text) - cjk) / 3.6)


def message_tokens(message: dict[str, Any]) -> int:
    """Content + tool calls of one message, plus the 4 tokens of chat framing."""
    n = 4 + count_tokens(text_of(message.get("content")))
    for tc in message.get("tool_calls") or []:
        fn = tc.get("function") or {}
        n += count_tokens(str(fn.get("name", ""))) + count_tokens(str(fn.get("arguments", "")))
    return n


def messages_tokens(request: dict[str, Any], *, with_system: bool = True) -> int:
    return sum(
        message_tokens(m)
        for m in request.get("messages") or []
        if with_system or m.get("role") != "system"
    )


def tools_tokens(request: dict[str, Any]) -> int:
    return count_tokens(json.dumps(request.get("tools") or [], ensure_ascii=False))


def prompt_tokens(request: dict[str, Any]) -> int:
    """What a provider would bill as prompt tokens: messages and tool schemas."""
    return messages_tokens(request) + tools_tokens(request)


# --- the agent ----------------------------------------------------------------------------


@dataclass
class ToolAgent:
    """Install on a FakeLLM: ``agent = ToolAgent(fake)``; then ``agent.push(steps...)``."""

    fake: FakeLLM
    aux_reply: str = "aux-ok"
    default_reply: str = "DONE"
    steps: deque[Step] = field(default_factory=deque)
    # (index into fake.requests, reply given) for every request that offered tools.
    served: list[tuple[int, Reply]] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)  # time.monotonic() of each of them
    # Requests answered ``aux_reply`` without taking a step although they offer tools (a host's
    # own background calls, e.g. Hermes's memory/skill review fork after a turn).
    aside: Callable[[dict[str, Any]], bool] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.fake.respond = self.respond  # type: ignore[method-assign]
        self.fake.usage = self.usage

    def push(self, *steps: Step | str) -> None:
        with self._lock:
            for s in steps:
                self.steps.append(say(s) if isinstance(s, str) else s)

    def pending(self) -> int:
        with self._lock:
            return len(self.steps)

    def clear(self) -> None:
        with self._lock:
            self.steps.clear()

    def respond(self, body: dict[str, Any]) -> Reply:
        if not body.get("tools") or (self.aside is not None and self.aside(body)):
            return say(self.aux_reply)
        with self._lock:
            self.arrivals.append(time.monotonic())
            step: Step = self.steps.popleft() if self.steps else say(self.default_reply)
            # This body's own index: a gateway's memory request (issue 24: the offload's tasks
            # on the host's model) may have been recorded after it.
            reqs = self.fake.requests
            index = next((i for i in range(len(reqs) - 1, -1, -1) if reqs[i] is body), -1)
        reply = step(body) if callable(step) else step
        with self._lock:
            self.served.append((index, reply))
        return reply

    @staticmethod
    def usage(body: dict[str, Any]) -> dict[str, int]:
        n = prompt_tokens(body) if body.get("messages") else 10
        return {"prompt_tokens": n, "completion_tokens": 5, "total_tokens": n + 5}

    def main_requests(self) -> list[dict[str, Any]]:
        """The agent's own requests (those that offered tools), in arrival order."""
        with self.fake._lock:
            return [r for r in self.fake.requests if r.get("tools")]

    def mark(self) -> int:
        """A position to slice ``main_requests()`` from (requests after this call)."""
        return len(self.main_requests())


# --- documents of chosen sizes ------------------------------------------------------------

_EN = (
    "The build step compiles every module and writes the artefacts under dist.",
    "A failing check prints the file, the line and the rule that was broken.",
    "Retry the download with a longer timeout when the mirror is slow.",
    "The scheduler keeps one queue per worker and steals work when idle.",
    "Each migration runs inside a transaction and records its version number.",
    "Logs rotate daily; the oldest archive is removed after thirty days.",
    "The parser accepts comments, trailing commas and single-quoted keys.",
    "Integration tests start the service on a free port and stop it afterwards.",
)
_ZH = (
    "构建步骤会编译所有模块，并把产物写到 dist 目录下。",
    "检查失败时会打印文件名、行号以及违反的规则。",
    "镜像很慢的时候，请用更长的超时时间重新下载。",
    "调度器为每个工作线程维护一个队列，空闲时会窃取任务。",
    "每次数据库迁移都在事务中执行，并记录版本号。",
    "日志每天轮转一次，超过三十天的归档会被删除。",
    "解析器支持注释、结尾逗号和单引号键名。",
    "集成测试在空闲端口上启动服务，结束后再关闭它。",
)


def make_text(chars: int, lang: str = "en", seed: int = 0) -> str:
    """A deterministic document of exactly ``chars`` characters (no trailing whitespace).

    Lines are numbered so any slice is recognisable; ``seed`` changes the order and the tag, so
    two documents never share their text.
    """
    pool = _ZH if lang == "zh" else _EN
    tag = f"[{lang}-doc-{seed}]"
    lines: list[str] = []
    size = 0
    i = 0
    while size < chars:
        line = f"{tag} {i:05d} {pool[(i * 3 + seed) % len(pool)]}"
        lines.append(line)
        size += len(line) + 1
        i += 1
    text = "\n".join(lines)[:chars]
    text = text.rstrip()
    while len(text) < chars:  # rstrip took a space or a newline off the end
        text += "。" if lang == "zh" else "."
    return text


def write_doc(directory: Path, name: str, chars: int, lang: str, seed: int) -> Path:
    path = directory / name
    path.write_text(make_text(chars, lang, seed), "utf-8")
    return path
