"""Cutting this turn out of Hermes's cumulative transcript, and shaping it for /capture."""

from __future__ import annotations

import json

from hermes_plugin.turns import chunks, to_capture_messages, tool_record_messages, turn_slice


def convo(n: int) -> list[dict]:
    out: list[dict] = []
    for i in range(n):
        out += [
            {"role": "user", "content": f"question {i}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "t", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "name": "t", "content": f"result {i}"},
            {"role": "assistant", "content": f"answer {i}"},
        ]
    return out


def test_slice_is_only_this_turn_even_if_the_next_one_already_started():
    messages = convo(3) + [{"role": "user", "content": "question 3 (already typed)"}]
    turn = turn_slice(messages, "question 1", "answer 1")
    assert [m.get("content") for m in turn] == ["question 1", "", "result 1", "answer 1"]


def test_slice_uses_the_cleaned_user_text_hermes_hands_over():
    messages = [
        {"role": "user", "content": "[skill body ...]\n\nUser instruction: do it"},
        {"role": "assistant", "content": "ok"},
    ]
    assert turn_slice(messages, "do it", "ok")[0]["content"] == "do it"


def test_capture_messages_strip_recalled_context_and_keep_tool_calls_in_order():
    turn = turn_slice(convo(1), "question 0", "answer 0")
    turn[0] = {
        "role": "user",
        "content": "question 0\n\n<memory-context>\n[System note: ...]\nold fact\n</memory-context>",
    }
    msgs = to_capture_messages(turn, 1000)
    assert msgs[0]["content"] == "question 0"
    assert msgs[1]["tool_calls"][0]["function"]["name"] == "t"
    assert msgs[2] == {
        "role": "tool",
        "content": "result 0",
        "tool_call_id": "c0",
        "name": "t",
        "timestamp": 1002,
    }
    assert [m["timestamp"] for m in msgs] == [1000, 1001, 1002, 1003]


def test_multimodal_content_becomes_text():
    msgs = to_capture_messages(
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            }
        ],
        1,
    )
    assert msgs[0]["content"] == "what is this?\n[image]"


def test_hook_records_fill_in_tool_calls_the_transcript_lacks():
    records = [
        {
            "tool_name": "terminal",
            "args": {"command": "ls"},
            "result": "a.txt",
            "tool_call_id": "x1",
        },
        {"tool_name": "terminal", "args": {}, "result": "dup", "tool_call_id": "known"},
    ]
    out = tool_record_messages(records, {"known"})
    assert [m["role"] for m in out] == ["assistant", "tool"]
    assert out[1]["content"] == "a.txt"


def test_large_turns_are_split_below_the_body_limit_in_order():
    big = [{"role": "tool", "content": "x" * 30_000, "timestamp": i} for i in range(60)]
    batches = chunks(big, 200_000)
    assert len(batches) > 1
    assert [m["timestamp"] for b in batches for m in b] == list(range(60))
    assert all(len(json.dumps(b).encode()) < 200_000 for b in batches)
