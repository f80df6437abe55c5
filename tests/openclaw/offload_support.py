"""OpenClaw-side helpers for the offload end-to-end tests (issue 11).

The model is tests/support/tool_agent.py's ``ToolAgent`` on the fake LLM; what is OpenClaw's own
lives here:

- tool calls to OpenClaw's built-in ``read`` and ``exec``, and to a plugin tool the way OpenClaw's
  default Tool Search offers it (through ``tool_call`` with ``{id, args}``; directly when the
  request lists the tool itself);
- ``read_back``: follow a stub's read-back instruction with ``memory_tencentdb_offload_read``;
- reading requests: tool results by id, stubs, canvas blocks;
- ``FaultyProxy``: a gateway that is slow or answers 500 on the offload routes (everything else
  is forwarded untouched, so ownership checks, recall and capture keep working).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.tool_agent import (
    READ_TOOL,
    Reply,
    call,
    read_back_arguments,
    text_of,
    tool_message,
    tools,
)

CANVAS_MARK = "<current_task_context"
HISTORY_MARK = "<history_task_context"
UNAVAILABLE = "Tool output unavailable"


# --- tool calls -------------------------------------------------------------------------------


def oc_read(path: str, call_id: str) -> dict[str, Any]:
    """OpenClaw's built-in ``read`` tool."""
    return call("read", call_id, path=str(path))


def oc_exec(command: str, call_id: str) -> dict[str, Any]:
    """OpenClaw's built-in ``exec`` tool (a shell command)."""
    return call("exec", call_id, command=command)


def offered_directly(request: dict[str, Any], name: str) -> bool:
    return any((t.get("function") or {}).get("name") == name for t in request.get("tools") or [])


def plugin_call(
    request: dict[str, Any], name: str, call_id: str, args: dict[str, Any]
) -> dict[str, Any]:
    """A call of a plugin tool: direct when offered, else through Tool Search's ``tool_call``."""
    if offered_directly(request, name):
        return call(name, call_id, **args)
    return call("tool_call", call_id, id=name, args=args)


def read_back(target_id: str, call_id: str) -> Callable[[dict[str, Any]], Reply]:
    """A step: call ``memory_tencentdb_offload_read`` as ``target_id``'s stub says to.

    Without an instruction in the request (the result was not stubbed) the model still asks by
    tool call id, as the tool's schema documents.
    """

    def step(request: dict[str, Any]) -> Reply:
        msg = tool_message(request, target_id)
        args = read_back_arguments(text_of(msg.get("content"))) if msg else None
        return tools(plugin_call(request, READ_TOOL, call_id, args or {"tool_call_id": target_id}))

    return step


# --- reading requests -------------------------------------------------------------------------


def tool_text(request: dict[str, Any], call_id: str) -> str | None:
    msg = tool_message(request, call_id)
    return None if msg is None else text_of(msg.get("content"))


def unwrap_tool_call(text: str | None) -> str | None:
    """The inner tool's text when the model called it through Tool Search's ``tool_call``.

    OpenClaw answers ``tool_call`` with a JSON envelope ``{"tool": {...}, "result": {"content":
    [text blocks], ...}}``; a direct call's result is the text itself.
    """
    if text is None:
        return None
    try:
        envelope = json.loads(text)
    except ValueError:
        return text
    if not isinstance(envelope, dict) or "tool" not in envelope or "result" not in envelope:
        return text
    content = (envelope.get("result") or {}).get("content")
    if not isinstance(content, list):
        return text
    return "".join(str(b.get("text", "")) for b in content if isinstance(b, dict))


def user_texts(request: dict[str, Any]) -> list[str]:
    return [text_of(m.get("content")) for m in request.get("messages") or [] if m["role"] == "user"]


# OpenClaw's own background runs: agent runs of their own, each in a session that is not the
# turn's (a hidden ``agent:<id>:internal-session-effects:...`` one, or the agent's main session)
# and goes through the context engine like a turn
# (the gateway keeps a journal and a task canvas for it too), named by their prompt in a user
# message. Not calls of any user's turn:
# - the pre-compaction memory flush of a long session (`agent --local` too; its prompt goes in as
#   it is, after the context);
# - the skill experience review, under `gateway run`, of a session with a turn of 10 or more
#   model calls once the Gateway has been idle 30 s. Its prompt goes in like a turn's: after the
#   turn's timestamp and the memories our recall prepends, so its opening sentence is looked for
#   inside the message (stop 42's CI failed on a `startswith` rule: bench/RESULTS.md, session 27);
# - the heartbeat, under `gateway run`, every 30 minutes at a phase hashed from the home's device
#   id, in the agent's main session (``agent:main:main``), so now and then during a test's few
#   minutes (a CI simulation of session 28 failed when it took a turn's scripted tool calls).
BACKGROUND = (
    "Pre-compaction memory flush.",
    "Skill review. Distill new durable learning",
    "Follow the heartbeat monitor scratch context",
)


def background_run(body: dict[str, Any]) -> bool:
    """A model call of one of OpenClaw's background runs (BACKGROUND)."""
    return any(opening in t for t in user_texts(body) for opening in BACKGROUND)


def canvas_count(request: dict[str, Any]) -> int:
    """Canvas blocks in a request (user messages, or OpenClaw's prepended context)."""
    return sum(text.count(CANVAS_MARK) for text in user_texts(request))


def is_stub(text: str | None, original: str) -> bool:
    """A stub: short, points at the read tool, and is not the original."""
    return (
        text is not None
        and text != original
        and READ_TOOL in text
        and len(text) < max(1200, len(original) // 3)
    )


def request_text(request: dict[str, Any]) -> str:
    return json.dumps(request.get("messages") or [], ensure_ascii=False)


# --- a faulty gateway ---------------------------------------------------------------------------


class FaultyProxy:
    """Forwards to the real gateway; on ``/offload/*`` routes it is slow or answers 500.

    ``mode``: ``"slow"`` (sleep ``delay`` seconds, then forward), ``"error"`` (HTTP 500 with a
    JSON error body) or ``"pass"`` (forward at once). ``hits`` counts the offload requests it saw,
    by path; ``exchanges`` keeps (path, request body, answer body) of every offload call.
    """

    def __init__(self, upstream_port: int, mode: str, delay: float = 6.0) -> None:
        if mode not in ("slow", "error", "pass"):
            raise ValueError(mode)
        self.upstream_port = upstream_port
        self.mode = mode
        self.delay = delay
        self.hits: Counter[str] = Counter()
        self.exchanges: list[tuple[str, Any, Any]] = []
        self._lock = threading.Lock()
        self.server = _QuietServer(("127.0.0.1", 0), _proxy_handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def __enter__(self) -> FaultyProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a bridge that gave up waiting resets its connection: expected here


def _proxy_handler(proxy: FaultyProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _relay(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            if path.startswith("/offload/"):
                with proxy._lock:
                    proxy.hits[path] += 1
                if proxy.mode == "error":
                    data = b'{"error": "scripted failure of the offload route"}'
                    self._answer(500, data, "application/json")
                    return
                if proxy.mode == "slow":
                    time.sleep(proxy.delay)
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")
            }
            conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port, timeout=60)
            try:
                conn.request(self.command, self.path, body=body or None, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                ctype = answer.getheader("Content-Type", "application/json")
                if path.startswith("/offload/"):
                    with proxy._lock:
                        proxy.exchanges.append((path, _json(body), _json(data)))
                self._answer(answer.status, data, ctype)
            except (OSError, http.client.HTTPException):
                self._answer(502, b'{"error": "upstream unreachable"}', "application/json")
            finally:
                conn.close()

        def _answer(self, status: int, data: bytes, ctype: str) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the bridge gave up waiting and closed the connection

        do_GET = do_POST = do_PUT = do_DELETE = _relay

    return Handler


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw.decode("utf-8", "replace")


def script_offload_config(port: int, data_dir: str | None) -> dict[str, Any]:
    """The entry ``scripts/install-openclaw.sh --offload --port P [--data-dir D]`` writes into a
    home with no slot of its own (test_install_offload.py holds the two equal)."""
    config: dict[str, Any] = {"port": port}
    if data_dir is not None:
        config["dataDir"] = data_dir
    config["offload"] = {"enabled": True, "previousSlot": ""}
    return config


def write_script_offload(home: Any, port: int, data_dir: str | None) -> dict[str, Any]:
    """The load path, the entry and the context-engine slot the script's ``--offload`` writes,
    in one file edit; answers the config."""
    from tests.openclaw.harness import BRIDGE_DIR, BRIDGE_ID

    home.install_plugin(BRIDGE_DIR, BRIDGE_ID, script_offload_config(port, data_dir))
    cfg = home.read_config()
    cfg["plugins"].setdefault("slots", {})["contextEngine"] = BRIDGE_ID
    home.write_config(cfg)
    return cfg


def install_offload(home: Any, gateway: Any, scope: str) -> dict[str, Any]:
    """What ``scripts/install-openclaw.sh --offload`` writes into ``home``, pointed at
    ``gateway``: the load path, the entry and the context-engine slot, in one file edit. The
    script's own run costs ~15 CPU-s (three OpenClaw CLI starts); it runs for real in
    test_install_offload.py, which checks it writes exactly this, and where the installer itself
    is under test (test_e2e_openclaw_offload.py's "on" home, test_e2e_openclaw.py). Checks
    OpenClaw's default (Tool Search on) is kept and sets the bridge's scope. Answers the config,
    for the caller to adjust and write."""
    from tests.openclaw.harness import BRIDGE_ID

    cfg = write_script_offload(home, gateway.port, str(gateway.data_dir))
    assert "toolSearch" not in (cfg.get("tools") or {}), "OpenClaw's default: Tool Search on"
    cfg["plugins"]["entries"][BRIDGE_ID]["config"]["scope"] = scope
    home.write_config(cfg)
    return cfg
