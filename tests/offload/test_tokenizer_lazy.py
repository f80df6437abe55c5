"""The offload token encoding loads with the first /offload/* request, not at gateway start.

It is ~90 MiB of resident memory (issue 14, idle RSS) and offload is off by default in both
hosts. A gateway that was never asked to offload has not even imported it; the first offload
request starts loading it in the background (the hosts report their seams at start), and a
count needed before it is loaded waits for it: the counts stay exact.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/<pid>/maps"
)


def _imported(gw) -> bool:
    """Whether the gateway process has the encoding's native library mapped."""
    return "bpe_openai" in Path(f"/proc/{gw.proc.pid}/maps").read_text()


def _tokenizer(c) -> dict:
    return c.get("/health").json()["offload"]["tokenizer"]


def _wait_loaded(c, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tok = _tokenizer(c)
        if tok["loaded"]:
            return tok
        time.sleep(0.1)
    raise TimeoutError("the offload tokenizer did not load")


def test_not_loaded_at_start_loaded_by_the_first_offload_request(start_gateway):
    gw = start_gateway()
    with gw.client() as c:
        c.post(
            "/capture", json={"session_key": "s", "user_content": "hi", "assistant_content": "x"}
        )
        c.post("/recall", json={"session_key": "s", "query": "我喜欢什么"})
        tok = _tokenizer(c)
        assert tok["loaded"] is False and not _imported(gw), "loaded without an offload request"
        # Before it loads, /health already says what the counts will be.
        assert tok["exact"] is True and tok["name"] == "bpe-openai:cl100k_base"
        body = {"host": "openclaw", "engine": "memory-tencentdb", "fallback": None}
        assert c.post("/offload/host-status", json=body).status_code == 200
        tok = _wait_loaded(c)  # in the background: the report did not wait for it
        assert tok["exact"] is True and tok["error"] is None and _imported(gw)


def test_a_count_before_the_load_waits_for_it_and_is_exact(start_gateway, scope):
    import bpe_openai

    from memory_tencentdb.offload.tokens import estimate

    enc = bpe_openai.get_encoding("cl100k_base")
    # 1500 tokens, which the character estimate puts at ~830: under the 1000-token stub limit.
    result = "结果 " + " ".join(["a"] * 1500)
    exact = len(enc.encode_ordinary(result))
    assert exact > 1000 > estimate(result)
    gw = start_gateway()
    with gw.client() as c:
        assert not _imported(gw)
        body = {
            "session_key": "s",
            "scope": scope,
            "tool_call_id": "call_lazy_1",
            "tool_name": "bash",
            "arguments": {"command": "yes a | head -1500"},
            "result": result,
        }
        r = c.post("/offload/tool-result", json=body)  # the first offload request
        assert r.status_code == 200, r.text
        assert r.json()["tokens"] == exact and r.json()["offloaded"] is True
        assert _tokenizer(c)["loaded"] is True
