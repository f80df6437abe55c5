"""The LLM client against the scripted fake: retries, timeouts, tolerant JSON, usage, secrets."""

from __future__ import annotations

import logging

import pytest

from memory_tencentdb.llm import (
    JSONParseError,
    JSONTruncated,
    LLMClient,
    LLMError,
    LLMTimeout,
    parse_json,
)

SECRET = "sk-test-secret-0123456789"


def _client(fake, **kw) -> LLMClient:
    return LLMClient(base_url=fake.base_url, api_key=SECRET, model="fake-model", **kw)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[{"a": 1}]', [{"a": 1}]),
        ('```json\n[{"a": 1}]\n```', [{"a": 1}]),
        ('Sure! Here it is:\n[{"a": 1}]\nAnything else?', [{"a": 1}]),
        ('[{"a": 1,}, {"b": [1, 2,],},]', [{"a": 1}, {"b": [1, 2]}]),
        ('[{"a": "line one\nline two\ttab"}]', [{"a": "line one\nline two\ttab"}]),
        ('[{"a": "x"}]\x00\x07', [{"a": "x"}]),
        ('<think>maybe [1]?</think>[{"a": "]"}]', [{"a": "]"}]),
    ],
)
def test_tolerant_parsing(text, expected):
    assert parse_json(text, list) == expected


def test_truncated_and_garbage_are_clear_failures():
    with pytest.raises(JSONTruncated, match="truncated"):
        parse_json('[{"scene_name": "x", "memories": [{"content": "I li', list)
    with pytest.raises(JSONParseError, match="no JSON"):
        parse_json("I cannot help with that.", list)
    with pytest.raises(JSONParseError, match="no JSON value"):
        parse_json('{"a": 1}', list)


def test_retries_server_errors_and_counts_usage(fake_llm, caplog):
    caplog.set_level(logging.DEBUG)
    fake_llm.push({"status": 503}, {"status": 429}, '```json\n{"ok": true,}\n```')
    client = _client(fake_llm)
    data, reply = client.chat_json("l1-dedup", "system", "user", expect=dict)
    assert data == {"ok": True}
    assert len(fake_llm.chat_requests()) == 3
    req = fake_llm.chat_requests()[-1]
    assert req["_headers"]["x-memory-task"] == "l1-dedup"
    assert req["model"] == "fake-model" and req["max_tokens"] == 4096
    assert client.usage_summary()["l1-dedup"]["completion_tokens"] == 5
    assert "task=l1-dedup" in caplog.text and "completion_tokens=5" in caplog.text
    assert SECRET not in caplog.text


def test_client_errors_are_not_retried_and_hide_the_key(fake_llm, caplog):
    caplog.set_level(logging.DEBUG)
    fake_llm.push({"status": 401, "body": '{"error": "bad key"}'})
    with pytest.raises(LLMError, match="HTTP 401") as err:
        _client(fake_llm).chat("l1-extraction", [{"role": "user", "content": "hi"}])
    assert len(fake_llm.chat_requests()) == 1
    assert SECRET not in str(err.value) and SECRET not in caplog.text


def test_malformed_response_body(fake_llm):
    fake_llm.push({"raw": "<html>oops</html>"})
    with pytest.raises(LLMError, match="malformed"):
        _client(fake_llm).chat("l1-extraction", [{"role": "user", "content": "hi"}])


def test_timeouts_per_task(fake_llm):
    client = _client(fake_llm)
    # Defaults: the original's per-task timeouts.
    assert (client.task_timeout("l1-extraction"), client.task_timeout("l2-scenes")) == (180, 300)
    # An explicitly configured timeout applies to every task.
    quick = _client(fake_llm, timeout_ms=300)
    assert quick.task_timeout("l2-scenes") == 0.3
    fake_llm.push({"delay": 1.5, "content": "[]"})
    with pytest.raises(LLMTimeout, match="no answer within 0.3s"):
        quick.chat("l2-scenes", [{"role": "user", "content": "hi"}])


def test_anthropic_messages_protocol(fake_llm):
    """``api="anthropic"``: POST {base}/v1/messages with x-api-key and anthropic-version, the
    system prompt top-level, text read from the content blocks; 429 and a malformed body fail
    as on the OpenAI path (retryable / LLMError), never showing the key."""
    root = fake_llm.base_url.removesuffix("/v1")  # Hermes and OpenClaw keep it without /v1
    client = LLMClient(base_url=root, api_key=SECRET, model="claude-x", api="anthropic")
    fake_llm.push('{"ok": "是的"}', {"status": 429}, {"raw": "not json"}, {"content": "[]"})
    data, reply = client.chat_json("l1-dedup", "系统 system", "用户 user", expect=dict)
    assert data == {"ok": "是的"} and reply.prompt_tokens == 10 and reply.completion_tokens == 5
    req = fake_llm.requests[-1]
    assert req["_path"] == "/v1/messages"
    assert req["_headers"]["x-api-key"] == SECRET and "authorization" not in req["_headers"]
    assert req["_headers"]["anthropic-version"] == "2023-06-01"
    assert req["system"] == "系统 system"
    assert req["messages"] == [{"role": "user", "content": "用户 user"}]
    assert req["model"] == "claude-x" and req["max_tokens"] == 4096 and req["temperature"] == 0

    once = LLMClient(base_url=root, api_key=SECRET, model="claude-x", api="anthropic", attempts=1)
    with pytest.raises(LLMError, match="HTTP 429"):
        once.chat("l1-dedup", [{"role": "user", "content": "x"}])
    with pytest.raises(LLMError, match="malformed anthropic response") as e:
        once.chat("l1-dedup", [{"role": "user", "content": "x"}])
    assert SECRET not in str(e.value)
    # A base URL already ending in /v1 gets /messages only.
    v1 = LLMClient(base_url=fake_llm.base_url, api_key="", model="m", api="anthropic")
    assert v1.chat("l1-dedup", [{"role": "user", "content": "x"}]).text == "[]"
    assert fake_llm.requests[-1]["_path"] == "/v1/messages"
