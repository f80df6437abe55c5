"""Hostile and huge tool output over HTTP against a real gateway (issue 21, audit items 6 and 7).

Item 7: one tool result must not freeze the gateway. 150 KB of ``-`` made the path regex of
the extractive summary backtrack for 13-23 s with every route, ``/health`` included, blocked; a
run of ``1,`` did the same to the count regex (40 KB: 108 s), ``eyJ-`` to the JWT redaction.
Each is posted here while another thread asks ``/health``; the post must answer in under a
second (the issue's must-show, with slack for a shared CI machine: the limit is generous) and
``/health`` must keep answering meanwhile.

Item 6: Hermes ``terminal`` answers JSON (``{"output": ..., "exit_code": 0, "error": null}``);
its stub said "1 lines" and showed the JSON's first characters. The summary now reads the text
inside: lines, first, last, error lines, exit code.
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from tests.support.gateway import KEYWORD_ONLY, GatewayProcess

# Generous for a shared 2-core CI machine; measured figures are in bench/results/offload_hostile.json.
ANSWER_LIMIT_S = 3.0
HEALTH_LIMIT_S = 2.0


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    g = GatewayProcess(tmp_path_factory.mktemp("hostile") / "data", env=KEYWORD_ONLY).start()
    with g.client() as c:  # the first offload request loads the tokenizer: not what is timed
        assert c.post("/offload/tool-result", json=_body("call_warm", "warm up")).status_code == 200
        c.post("/offload/read", json={"scope": "hostile", "tool_call_id": "call_warm"})
    yield g
    g.stop()


def _post_watching_health(gw: GatewayProcess, body: dict) -> tuple[httpx.Response, float, float]:
    """Post ``body`` to /offload/tool-result while /health is asked every 50 ms; answers the
    response, its seconds, and the slowest /health answer seen meanwhile."""
    done = threading.Event()
    worst = [0.0]

    def watch() -> None:
        with gw.client(timeout=60) as c:
            while not done.is_set():
                t = time.perf_counter()
                try:
                    ok = c.get("/health").status_code == 200
                except httpx.HTTPError:
                    ok = False
                worst[0] = max(worst[0], time.perf_counter() - t if ok else float("inf"))
                time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with gw.client(timeout=120) as c:
            t = time.perf_counter()
            r = c.post("/offload/tool-result", json=body)
            took = time.perf_counter() - t
    finally:
        done.set()
        watcher.join()
    return r, took, worst[0]


def _body(call_id: str, result, tool="bash", arguments=None, session="hostile") -> dict:
    return {
        "session_key": session,
        "scope": "hostile",
        "tool_call_id": call_id,
        "tool_name": tool,
        "arguments": arguments if arguments is not None else {"command": "cat out.txt"},
        "result": result,
    }


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("dashes-150KB", "-" * 150_000),
        ("dashes-1MB", "-" * 1_000_000),
        ("number-commas-200KB", "1," * 100_000),
        ("jwt-lookalike-400KB", "eyJ-" * 100_000),
        ("path-lookalike-1MB", "a/" * 500_000),
        ("zh-dashes-1MB", "路径/" * 100_000 + "-" * 700_000),
        ("trigger-words-2MB", "password: abcdefgh, api 密码是 " * 70_000),
    ],
)
def test_pathological_output_is_answered_fast_and_health_answers(
    gw: GatewayProcess, name: str, text: str
) -> None:
    r, took, health = _post_watching_health(gw, _body(f"call_{name}", text))
    assert r.status_code == 200, r.text
    assert r.json()["offloaded"] is True
    assert took < ANSWER_LIMIT_S, f"{name}: answered in {took:.2f} s"
    assert health < HEALTH_LIMIT_S, f"{name}: /health took {health:.2f} s meanwhile"
    with gw.client() as c:  # nothing lost: the original reads back whole
        back = c.post(
            "/offload/read", json={"scope": "hostile", "tool_call_id": f"call_{name}"}
        ).json()
    if name.startswith("trigger-words"):  # secrets never reach a file, in any piece
        assert "abcdefgh" not in back["content"] and "[REDACTED:password]" in back["content"]
    else:
        assert back["content"] == text


def test_hermes_terminal_json_is_summarised_by_its_output(gw: GatewayProcess) -> None:
    lines = [f"{i:4d}  def handler_{i}(request):  # src/app/views.py" for i in range(1, 373)]
    lines[200] = " 201  raise ValueError('bad request')  # Error: unhandled"
    output = "\n".join(lines)
    result = json.dumps({"output": output, "exit_code": 0, "error": None})
    with gw.client() as c:
        r = c.post(
            "/offload/tool-result",
            json=_body("call_terminal_ok", result, "terminal", {"command": "cat -n views.py"}),
        )
    assert r.status_code == 200, r.text
    summary = r.json()["summary"]
    assert "372 lines" in summary and "exit 0" in summary, summary
    assert "first:" in summary and "def handler_1(" in summary, summary
    assert "last:" in summary and "handler_372" in summary, summary
    assert "errors:" in summary and "unhandled" in summary, summary
    assert '{"output"' not in summary, summary
    assert "def handler_1(" in r.json()["replacement"]


def test_hermes_terminal_json_failure_names_exit_code_and_error_zh(gw: GatewayProcess) -> None:
    output = "正在编译 模块/订单.c\n第12行：错误：未找到头文件 订单.h\n编译失败"
    result = json.dumps(
        {"output": output, "exit_code": 2, "error": "命令执行失败"}, ensure_ascii=False
    )
    with gw.client() as c:
        r = c.post(
            "/offload/tool-result",
            json=_body("call_terminal_zh", result, "terminal", {"command": "make 订单"}),
        )
    assert r.status_code == 200, r.text
    summary = r.json()["summary"]
    assert "exit 2" in summary and summary.split(";")[1].strip().startswith("error"), summary
    assert "3 lines" in summary and "命令执行失败" in summary, summary
    assert "first: 正在编译" in summary and "last: 编译失败" in summary, summary
    assert "未找到头文件" in summary, summary


def test_a_record_result_is_still_summarised_as_text(gw: GatewayProcess) -> None:
    """A tau-bench booking record has no text field: its JSON stays the summary's first line."""
    record = {"reservation_id": "HATHAT", "origin": "JFK", "destination": "SEA", "cabin": "eco"}
    with gw.client() as c:
        r = c.post(
            "/offload/tool-result",
            json=_body("call_record", json.dumps(record), "get_reservation_details", {}),
        )
    assert r.status_code == 200, r.text
    assert '"reservation_id": "HATHAT"' in r.json()["summary"]


def test_hermes_terminal_json_with_only_an_error(gw: GatewayProcess) -> None:
    result = json.dumps({"output": "", "exit_code": 127, "error": "bash: foo: command not found"})
    with gw.client() as c:
        r = c.post(
            "/offload/tool-result",
            json=_body("call_terminal_127", result, "terminal", {"command": "foo"}),
        )
    summary = r.json()["summary"]
    assert "exit 127" in summary and "command not found" in summary, summary
    assert "0 lines" in summary and '{"output"' not in summary, summary


def test_a_30_mb_result_does_not_stall_health(gw: GatewayProcess) -> None:
    """A normal (not hostile) 30 MB log stalled /health 4.6 s in the audit (11.6 s measured
    here): one regex or encode call over the whole text held the GIL (redaction trigger,
    token count, the ref's fence). Every such step now works in pieces or by short searches."""
    line = "2026-04-12 17:26:08 INFO worker-3 processed 120 rows from src/jobs/import.py\n"
    text = (line * (30_000_000 // len(line) + 1))[:30_000_000]
    r, took, health = _post_watching_health(gw, _body("call_30mb", text))
    assert r.status_code == 200, r.text
    assert took < 30, took
    assert health < HEALTH_LIMIT_S, f"/health took {health:.2f} s meanwhile (post {took:.1f} s)"
