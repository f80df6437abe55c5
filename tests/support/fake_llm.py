"""A scripted OpenAI-compatible chat server: the only fake our tests allow.

Tests push *replies* onto a queue; each incoming ``/chat/completions`` request takes the
next one (or the default reply when the queue is empty). Every request body is recorded, so a
test can assert on exactly what a host agent sent to "the LLM".

A reply is a dict:

- ``{"content": "text"}``                    a normal assistant message
- ``{"tool_calls": [{"name": n, "arguments": {...}}]}``   the model calls tools
- ``{"status": 500, "body": "..."}``        an HTTP error
- ``{"raw": "not json"}``                   a 200 whose body is exactly this text (malformed)
- ``{"delay": 2.5, ...}``                   sleep first (combine with any of the above)
- ``{"embedding": true}`` is never needed: ``/embeddings`` answers deterministic vectors
  (``fake.embedding_failure`` makes it fail, ``fake.embedding_delay`` makes it slow).

``/v1/messages`` answers the same replies in Anthropic's Messages shape (``content`` text blocks,
``stop_reason``, ``usage.input_tokens``), for a host model that speaks Anthropic (issue 24);
tool calls and streaming are not served there.

Streaming (``"stream": true``) is answered with server-sent events, as real servers do.

A test that must answer from what the request holds (a tool-using agent that reads a stub's id
back, say) replaces ``fake.respond(body)``; tests/support/tool_agent.py does. ``fake.usage`` (a
function of the request body) sets the reported ``usage`` (default: a constant 10/5/15).

Run standalone (for Node tests): ``python tests/support/fake_llm.py --port 0 --script FILE``
prints ``PORT <n>`` on stdout; ``FILE`` is a JSON list of replies, reread on each request.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class FakeLLM:
    """Owns the server thread, the reply queue and the request log."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, default_reply: str = "OK") -> None:
        self.replies: deque[dict[str, Any]] = deque()
        self.requests: list[dict[str, Any]] = []
        self.default_reply = default_reply
        self.script_file: Path | None = None
        self._script_used = 0
        # Set to an HTTP status to make /embeddings fail (an embedding service outage).
        self.embedding_failure: int | None = None
        # Seconds /embeddings sleeps before it answers (a slow embedding service or model).
        self.embedding_delay: float = 0.0
        # request body -> usage dict reported back (hosts compact on the prompt tokens they see).
        self.usage: Callable[[dict[str, Any]], dict[str, int]] | None = None
        self._lock = threading.Lock()
        handler = _make_handler(self)
        self.server = ThreadingHTTPServer((host, port), handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def embedding_env(self, dimensions: int = 32) -> dict[str, str]:
        """A gateway's environment for embedding with this server (the OpenAI-compatible
        provider): a remote embedder whose speed and failures the test decides."""
        return {
            "TDAI_EMBEDDING_PROVIDER": "openai",
            "TDAI_EMBEDDING_BASE_URL": self.base_url,
            "TDAI_EMBEDDING_MODEL": "fake-embed",
            "TDAI_EMBEDDING_DIMENSIONS": str(dimensions),
        }

    def start(self) -> FakeLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def push(self, *replies: dict[str, Any] | str) -> None:
        """Queue replies; a bare string is shorthand for ``{"content": s}``."""
        with self._lock:
            for r in replies:
                self.replies.append({"content": r} if isinstance(r, str) else r)

    def next_reply(self) -> dict[str, Any]:
        with self._lock:
            if self.script_file is not None:
                try:
                    script = json.loads(self.script_file.read_text("utf-8"))
                except (OSError, ValueError):
                    script = []
                # Consume from the file in order; the file may grow between requests.
                if self._script_used < len(script):
                    r = script[self._script_used]
                    self._script_used += 1
                    return {"content": r} if isinstance(r, str) else r
            if self.replies:
                return self.replies.popleft()
        return {"content": self.default_reply}

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply to one chat request; replaced by responders that read the request.

        Memory work a gateway borrowed the host's model for (issue 24; ``X-Memory-Source:
        host-model``) never takes a queued reply: it gets the default reply (not JSON, so the
        gateway keeps its rule-based result), and a test's script stays the host's own."""
        if _host_model_task(body):
            return {"content": self.default_reply}
        return self.next_reply()

    def usage_for(self, body: dict[str, Any]) -> dict[str, int]:
        if self.usage is not None:
            return self.usage(body)
        return {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}

    def chat_requests(self) -> list[dict[str, Any]]:
        """The host's own chat requests (not the memory work a gateway borrowed it for:
        ``memory_requests``)."""
        return [
            r
            for r in self.requests
            if r.get("_path", "").endswith("/chat/completions") and not _host_model_task(r)
        ]

    def memory_requests(self) -> list[dict[str, Any]]:
        """Requests of a gateway that borrowed this model as the host's own (issue 24)."""
        return [r for r in self.requests if _host_model_task(r)]

    def all_prompt_text(self) -> str:
        """Every message text of every chat request, joined: for 'did X reach the LLM'."""
        parts: list[str] = []
        for req in self.chat_requests():
            parts.append(json.dumps(req.get("messages", []), ensure_ascii=False))
            for key in ("system", "instructions"):
                if key in req:
                    parts.append(json.dumps(req[key], ensure_ascii=False))
        return "\n".join(parts)


def _host_model_task(body: dict[str, Any]) -> bool:
    return (body.get("_headers") or {}).get("x-memory-source") == "host-model"


def _fake_vector(text: str, dim: int) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    raw = [(digest[i % len(digest)] - 128) / 128.0 for i in range(dim)]
    norm = sum(x * x for x in raw) ** 0.5 or 1.0
    return [x / norm for x in raw]


def _make_handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # keep test output quiet
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                body = {"object": "list", "data": [{"id": "fake-model", "object": "model"}]}
                self._send(200, json.dumps(body).encode())
            else:
                self._send(404, b'{"error":{"message":"not found"}}')

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparseable": raw.decode("utf-8", "replace")}
            body["_path"] = self.path
            body["_headers"] = {k.lower(): v for k, v in self.headers.items()}
            with fake._lock:
                fake.requests.append(body)
            if self.path.rstrip("/").endswith("/embeddings"):
                self._embeddings(body)
                return
            anthropic = self.path.rstrip("/").endswith("/v1/messages")
            if not anthropic and not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, b'{"error":{"message":"not found"}}')
                return
            reply = fake.respond(body)
            if reply.get("delay"):
                time.sleep(float(reply["delay"]))
            if "status" in reply:
                payload = reply.get("body", {"error": {"message": "scripted failure"}})
                data = payload if isinstance(payload, str) else json.dumps(payload)
                self._send(int(reply["status"]), data.encode())
                return
            if "raw" in reply:
                self._send(200, str(reply["raw"]).encode())
                return
            if anthropic:
                self._send(200, json.dumps(_anthropic_message(body, reply, fake)).encode())
            elif body.get("stream"):
                self._stream(body, reply)
            else:
                out = _completion(body, reply)
                out["usage"] = fake.usage_for(body)
                self._send(200, json.dumps(out).encode())

        def _embeddings(self, body: dict[str, Any]) -> None:
            if fake.embedding_delay:
                time.sleep(fake.embedding_delay)
            if fake.embedding_failure:
                self._send(fake.embedding_failure, b'{"error":{"message":"embeddings down"}}')
                return
            inputs = body.get("input", [])
            if isinstance(inputs, str):
                inputs = [inputs]
            dim = int(body.get("dimensions") or 64)
            data = [
                {"object": "embedding", "index": i, "embedding": _fake_vector(str(t), dim)}
                for i, t in enumerate(inputs)
            ]
            out = {"object": "list", "data": data, "model": body.get("model", "fake")}
            self._send(200, json.dumps(out).encode())

        def _stream(self, body: dict[str, Any], reply: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            cid = "chatcmpl-" + uuid.uuid4().hex[:12]
            model = body.get("model", "fake-model")

            def chunk(delta: dict[str, Any], finish: str | None = None) -> None:
                event = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()

            chunk({"role": "assistant", "content": ""})
            calls = _tool_calls(reply)
            if calls:
                for i, call in enumerate(calls):
                    chunk({"tool_calls": [{"index": i, **call}]})
                chunk({}, "tool_calls")
            else:
                text = str(reply.get("content", ""))
                step = max(1, len(text) // 3)
                for i in range(0, len(text), step):
                    chunk({"content": text[i : i + step]})
                chunk({}, "stop")
            usage = fake.usage_for(body)
            final = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [],
                "usage": usage,
            }
            self.wfile.write(f"data: {json.dumps(final)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

    return Handler


def _tool_calls(reply: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for call in reply.get("tool_calls") or []:
        args = call.get("arguments", {})
        out.append(
            {
                "id": call.get("id") or "call_" + uuid.uuid4().hex[:10],
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return out


def _completion(body: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    calls = _tool_calls(reply)
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if calls else reply.get("content", ""),
    }
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def _anthropic_message(body: dict[str, Any], reply: dict[str, Any], fake: FakeLLM) -> dict:
    usage = fake.usage_for(body)
    return {
        "id": "msg_" + uuid.uuid4().hex[:12],
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake-model"),
        "content": [{"type": "text", "text": str(reply.get("content", ""))}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", type=Path, help="JSON list of replies, consumed in order")
    parser.add_argument("--log", type=Path, help="append every request body here as JSON lines")
    args = parser.parse_args()
    fake = FakeLLM(port=args.port)
    fake.script_file = args.script
    if args.log:
        original = fake.requests

        class _Logged(list):
            def append(self, item: Any) -> None:
                super().append(item)
                with args.log.open("a", encoding="utf-8") as fh:
                    fh.write(json.dumps(item, ensure_ascii=False) + "\n")

        fake.requests = _Logged(original)
    fake.start()
    print(f"PORT {fake.port}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        fake.stop()


if __name__ == "__main__":
    main()
