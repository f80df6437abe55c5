"""Drives a real Hermes ``AIAgent`` turn by turn; runs inside the Hermes venv, not ours.

Why a separate process speaking JSON lines: Hermes reads HERMES_HOME at import time and must
live in its own venv, while the test needs to act between turns (kill the gateway, restart
it, inspect the provider). Each command on stdin gets one ``@@DRIVER@@ {json}`` line back.

Commands: ``{"op": "turn", "text": ...}``, ``{"op": "state"}``, ``{"op": "flush"}``,
``{"op": "new_session"}``, ``{"op": "exit"}`` (what the CLI does at exit).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
import uuid
from typing import Any

PREFIX = "@@DRIVER@@ "


def say(obj: dict[str, Any]) -> None:
    sys.__stdout__.write(PREFIX + json.dumps(obj, default=str) + "\n")
    sys.__stdout__.flush()


def provider_of(agent: Any) -> Any:
    mm = getattr(agent, "_memory_manager", None)
    if mm is None:
        return None
    for p in mm.providers:
        if p.name == "memory_tencentdb":
            return p
    return None


def state(agent: Any) -> dict[str, Any]:
    p = provider_of(agent)
    if p is None:
        return {"active": False}
    gw = p._gw
    out: dict[str, Any] = {"active": True, "session_key": p._session_key, "scope": p._scope}
    if gw is not None:
        out["breaker"] = gw.breaker.snapshot()
        out["supervisor"] = gw.supervisor.state
        out["supervisor_detail"] = gw.supervisor.detail
        out["owned_pid"] = gw.supervisor.owned_pid
    if p._worker is not None:
        w = p._worker
        out["worker"] = {"sent": w.sent, "failed": w.failed, "dropped": w.dropped}
    out["last_prefetch_ms"] = p.last_prefetch_ms
    out["tool_calls_seen"] = p.tool_calls_seen
    return out


def main() -> None:
    base_url = sys.argv[1]
    from run_agent import AIAgent

    agent = AIAgent(
        base_url=base_url,
        api_key="sk-fake",
        provider="custom",
        model="fake-model",
        quiet_mode=True,
        platform="cli",
        skip_context_files=True,
        max_iterations=5,
    )
    history: list[dict[str, Any]] = []
    say({"ready": True, "state": state(agent)})
    for line in sys.stdin:
        if not line.strip():
            continue
        cmd = json.loads(line)
        op = cmd.get("op")
        try:
            if op == "turn":
                t0 = time.monotonic()
                result = agent.run_conversation(cmd["text"], conversation_history=history)
                history = result.get("messages") or history
                say(
                    {
                        "ok": True,
                        "reply": result.get("final_response"),
                        "elapsed": time.monotonic() - t0,
                        "state": state(agent),
                    }
                )
            elif op == "state":
                say({"ok": True, "state": state(agent)})
            elif op == "flush":
                mm = agent._memory_manager
                if mm is not None:
                    mm.flush_pending(10)
                p = provider_of(agent)
                if p is not None and p._worker is not None:
                    p._worker.flush(float(cmd.get("timeout", 15)))
                say({"ok": True, "state": state(agent)})
            elif op == "new_session":
                old = agent.session_id
                new = time.strftime("%Y%m%d_%H%M%S_") + uuid.uuid4().hex[:6]
                agent.session_id = new
                mm = agent._memory_manager
                if mm is not None:
                    mm.commit_session_boundary_async(
                        list(history), new_session_id=new, parent_session_id=old
                    )
                    mm.flush_pending(10)
                history = []
                say({"ok": True, "old": old, "new": new, "state": state(agent)})
            elif op == "exit":
                mm = agent._memory_manager
                if mm is not None:
                    mm.flush_pending(10)
                final = state(agent)
                agent.shutdown_memory_provider(history)
                agent.close()
                say({"ok": True, "state": final})
                return
            else:
                say({"ok": False, "error": f"unknown op {op}"})
        except BaseException as exc:  # report everything: the test asserts nothing leaks
            say({"ok": False, "error": repr(exc), "trace": traceback.format_exc()})


if __name__ == "__main__":
    main()
