"""The fake LLM as a host's OWN model (issue 24): it answers the host's chat turns and, when the
gateway borrows it, our memory tasks, recognised by their ``X-Memory-Task`` header (the client's
tag; their system prompts are ours too).

Scripted facts: each ``Fact(trigger, content, key)`` becomes one L1 memory when ``trigger`` is in
the new messages of an extraction request; arbitration updates an existing memory containing
``key`` (the rules' reading of the same statement) and stores the rest; scenes and the persona are
written from the memories the request carries, with recognisable markers (``HOST-SCENE``,
``HOST-PERSONA``). ``mode`` makes every memory task fail: ``"429"``, ``"500"``, ``"malformed"``
(a 200 that is not JSON), ``"shape"`` (JSON of the wrong shape), ``"slow"`` (``slow_s`` late).
A chat turn answers ``chat_reply``, or the next of the replies ``push_chat`` queued (a reply, or a
function of the request that makes one: a tool call shaped by the tools the host offers).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support.fake_llm import FakeLLM

TASK_HEADER = "x-memory-task"


@dataclass(frozen=True)
class Fact:
    trigger: str
    content: str
    key: str
    type: str = "persona"


class HostModelFake:
    def __init__(self, fake: FakeLLM, facts: list[Fact], chat_reply: str = "FAKE-REPLY") -> None:
        self.fake = fake
        self.facts = facts
        self.chat_reply = chat_reply
        self.mode: str | None = None
        self.slow_s = 5.0
        self.chat_at: list[float] = []  # time.monotonic() of every chat turn's request
        self._chat_steps: deque[dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]] = (
            deque()
        )
        self._lock = threading.Lock()
        fake.respond = self.respond  # type: ignore[method-assign]

    # ------------------------------------------------------------------ log

    def memory_requests(self, task: str | None = None) -> list[dict[str, Any]]:
        with self.fake._lock:
            reqs = list(self.fake.requests)
        return [
            r
            for r in reqs
            if (t := (r.get("_headers") or {}).get(TASK_HEADER)) and (task is None or t == task)
        ]

    def chat_turns(self) -> list[dict[str, Any]]:
        with self.fake._lock:
            reqs = list(self.fake.requests)
        return [
            r
            for r in reqs
            if r.get("_path", "").endswith("/chat/completions")
            and not (r.get("_headers") or {}).get(TASK_HEADER)
        ]

    # ------------------------------------------------------------------ replies

    def push_chat(
        self, *replies: dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        with self._lock:
            self._chat_steps.extend(replies)

    def chat_pending(self) -> int:
        with self._lock:
            return len(self._chat_steps)

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        task = (body.get("_headers") or {}).get(TASK_HEADER)
        if not task:
            with self._lock:
                self.chat_at.append(time.monotonic())
                step = self._chat_steps.popleft() if self._chat_steps else None
            if step is None:
                return {"content": self.chat_reply}
            return step(body) if callable(step) else step
        mode = self.mode
        if mode == "429":
            return {"status": 429, "body": {"error": {"message": "rate limited"}}}
        if mode == "500":
            return {"status": 500, "body": {"error": {"message": "upstream broke"}}}
        if mode == "malformed":
            return {"content": "Sorry, I can't help with that."}
        if mode == "shape":
            return {"content": '{"unexpected": true}'}
        reply = self._answer(task, _user_text(body))
        if mode == "slow":
            return {"delay": self.slow_s, "content": reply}
        return {"content": reply}

    def _answer(self, task: str, text: str) -> str:
        if task == "l1-extraction":
            new = text.split("=== New messages", 1)[-1]
            memories = [
                {"content": f.content, "type": f.type, "priority": 80, "source_message_ids": []}
                for f in self.facts
                if f.trigger in new
            ]
            if not memories:
                return "[]"
            return json.dumps(
                [{"scene_name": "Host model scene", "message_ids": [], "memories": memories}],
                ensure_ascii=False,
            )
        if task == "l1-dedup":
            existing = _json_after(text, "## Existing memories\n", "\n\n## New memories")
            out = []
            for rid, content in re.findall(r'"record_id": "(n\d+)", "content": "([^"]*)"', text):
                fact = next((f for f in self.facts if f.content == content), None)
                targets = [
                    e["id"]
                    for e in existing
                    if fact is not None
                    and fact.key in e.get("content", "")
                    and e["content"] != content
                ]
                same = [e["id"] for e in existing if e.get("content") == content]
                if same:
                    out.append({"record_id": rid, "action": "skip"})
                elif targets:
                    out.append(
                        {
                            "record_id": rid,
                            "action": "update",
                            "target_ids": targets,
                            "merged_content": content,
                        }
                    )
                else:
                    out.append({"record_id": rid, "action": "store"})
            return json.dumps(out, ensure_ascii=False)
        if task == "l2-scenes":
            contents = re.findall(r'"content": "([^"]*)"', text.split("## Existing scenes")[0])
            body = "## Basics\nHOST-SCENE\n" + "\n".join(f"- {c}" for c in contents)
            action = "update" if "host-model.md" in text else "create"
            return json.dumps(
                {
                    "actions": [
                        {
                            "action": action,
                            "file": "host-model.md",
                            "summary": "HOST-SCENE",
                            "body": body,
                        }
                    ],
                    "persona_update": None,
                },
                ensure_ascii=False,
            )
        if task == "l3-persona":
            lines = [ln[2:] for ln in text.splitlines() if ln.startswith("- ")]
            persona = "# User profile\n> **In one line**: HOST-PERSONA\n" + "\n".join(
                f"- {ln}" for ln in lines[:10]
            )
            return json.dumps({"persona": persona}, ensure_ascii=False)
        return "[]"


def _user_text(body: dict[str, Any]) -> str:
    for m in reversed(body.get("messages") or []):
        if m.get("role") == "user":
            c = m.get("content")
            return c if isinstance(c, str) else json.dumps(c, ensure_ascii=False)
    return ""


def _json_after(text: str, start: str, end: str) -> list[dict[str, Any]]:
    try:
        part = text.split(start, 1)[1].split(end, 1)[0]
        data = json.loads(part)
        return data if isinstance(data, list) else []
    except (IndexError, ValueError):
        return []
