"""Scripted replies of the fake LLM for the gateway's offload tasks (L1, L1.5, L2).

The gateway tags each LLM call with an ``X-Memory-Task`` header (``offload-l1``, ``offload-l15``,
``offload-l2``). ``OffloadResponder`` answers each task from what the request itself contains,
the way a cooperative model would (valid JSON naming the tool-call ids it was given), or in a
failure ``mode`` for every offload call: malformed JSON, truncated JSON, a non-JSON HTTP body, an
HTTP 500 or 429, a delay (slow or past the client's timeout). Calls of other tasks get ``"OK"``.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from typing import Any

from tests.support.fake_llm import FakeLLM

OFFLOAD_TASKS = ("offload-l1", "offload-l15", "offload-l2")

# A label an LLM might well write: quotes, brackets, pipes, a bare `end`, Chinese, arrows.
HOSTILE_LABEL = 'Run "pytest" [unit] | end --> 修复 {登录} (a<b>&c)'

# The gateway's prompts list ids as "tool_call_id: <id>" (L1) and "<n>. [<id>] ..." (L2) and
# name the canvas as "MMD prefix: NNN"; any other call_... id is taken as a fallback.
_L1_ID = re.compile(r"^tool_call_id: (\S+)$", re.M)
_L2_ID = re.compile(r"^\d+\. \[([^\]]+)\]", re.M)
_ID = re.compile(r"\b(call_[A-Za-z0-9_\-]+)\b")
_PREFIX = re.compile(r"MMD prefix: (\d{3})|\b(\d{3})-N\d+\b")


def _prompt(request: dict[str, Any]) -> str:
    return "\n".join(
        m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
        for m in request.get("messages") or []
    )


class OffloadResponder:
    """Installs itself as ``fake.next_reply``; ``mode`` may be changed at any time."""

    def __init__(self, fake: FakeLLM, mode: str = "good", delay: float = 0.0) -> None:
        self.fake = fake
        self.mode = mode
        self.delay = delay
        self.hostile = False  # L2 canvases carry HOSTILE_LABEL in their nodes
        self.l15: dict[str, Any] | None = None  # the L1.5 judgement to answer, when set
        self.served: Counter[str] = Counter()
        self._lock = threading.Lock()
        fake.next_reply = self.next_reply  # type: ignore[method-assign]

    def as_host_model(self) -> OffloadResponder:
        """Answer the offload tasks also when the gateway borrowed this fake as a host's own
        model (``X-Memory-Source: host-model``, issue 24), which the plain fake answers with its
        default reply; other tasks keep that default."""
        default = self.fake.respond

        def respond(body: dict[str, Any]) -> dict[str, Any]:
            task = (body.get("_headers") or {}).get("x-memory-task", "")
            if task not in OFFLOAD_TASKS:
                return default(body)
            with self._lock:
                self.served[task] += 1
                mode, delay = self.mode, self.delay
            reply = self._reply(task, mode, body)
            if delay:
                reply["delay"] = delay
            return reply

        self.fake.respond = respond  # type: ignore[method-assign]
        return self

    def requests(self, task: str) -> list[dict[str, Any]]:
        with self.fake._lock:
            return [
                r
                for r in self.fake.requests
                if (r.get("_headers") or {}).get("x-memory-task") == task
            ]

    def next_reply(self) -> dict[str, Any]:
        with self.fake._lock:
            request = self.fake.requests[-1] if self.fake.requests else {}
        task = (request.get("_headers") or {}).get("x-memory-task", "")
        with self._lock:
            self.served[task] += 1
            mode, delay = self.mode, self.delay
        if task not in OFFLOAD_TASKS:
            return {"content": "OK"}
        reply = self._reply(task, mode, request)
        if delay:
            reply["delay"] = delay
        return reply

    def _reply(self, task: str, mode: str, request: dict[str, Any]) -> dict[str, Any]:
        if mode == "malformed":
            return {"content": "Sure! Here is the summary: {tool_call: pytest, summary: 3 fail"}
        if mode == "truncated":
            good = self._good(task, request)
            return {"content": good[: max(1, len(good) // 2)]}
        if mode == "raw":
            return {"raw": "<html><body>502 Bad Gateway</body></html>"}
        if mode == "http500":
            return {"status": 500, "body": {"error": {"message": "scripted failure"}}}
        if mode == "http429":
            return {"status": 429, "body": {"error": {"message": "rate limited"}}}
        return {"content": self._good(task, request)}

    def _good(self, task: str, request: dict[str, Any]) -> str:
        text = _prompt(request)
        listed = _L1_ID.findall(text) if task == "offload-l1" else _L2_ID.findall(text)
        ids = list(dict.fromkeys(listed or _ID.findall(text)))
        if task == "offload-l1":
            return json.dumps(
                [
                    {
                        "tool_call_id": i,
                        "tool_call": f"call {i}",
                        "summary": f"LLM summary of {i}: found the relevant lines",
                        "score": 7,
                    }
                    for i in ids
                ],
                ensure_ascii=False,
            )
        if task == "offload-l15" and self.l15 is not None:
            return json.dumps(self.l15)
        if task == "offload-l15":
            return json.dumps(
                {
                    "taskCompleted": False,
                    "isLongTask": True,
                    "isContinuation": True,
                    "continuationMmdFile": None,
                    "newTaskLabel": "fix-the-issue",
                }
            )
        # offload-l2: a canvas with one node per id, in the prompt's canvas number.
        m = _PREFIX.search(text)
        prefix = (m.group(1) or m.group(2)) if m else "001"
        label = HOSTILE_LABEL if self.hostile else "step"
        lines = [
            '%% {"taskGoal": "fix the issue", "progress": "50"}',
            "flowchart TD",
        ]
        mapping = {}
        for k, i in enumerate(ids, start=1):
            lines.append(f'    {prefix}-N{k}["{label} {k}<br/>status: done<br/>summary: {i}"]')
            if k > 1:
                lines.append(f"    {prefix}-N{k - 1} --> {prefix}-N{k}")
            mapping[i] = f"{prefix}-N{k}"
        return json.dumps(
            {
                "fileAction": "write",
                "mmdContent": "\n".join(lines),
                "replaceBlocks": [],
                "nodeMapping": mapping,
            },
            ensure_ascii=False,
        )
