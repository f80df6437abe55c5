"""The plugin keeps the turn's request in every call once the gateway had to put it back.

Hermes 0.19.0 can drop the turn's user message from its live list after a compaction (the list
then holds only our notes). The gateway puts it back (``stats.request_restored``); the plugin
remembers it and re-inserts it on the calls that do not ask the gateway (nothing changed, or
the gateway did not answer in time), and stops once Hermes's own list holds a request again.
"""

from __future__ import annotations

from hermes_plugin import offload

SYSTEM = {"role": "system", "content": "You are Hermes."}
REQUEST = {"role": "user", "content": "修复 fields.py 里的 TimeDelta 精度问题 (fix it)."}
NOTE = {
    "role": "user",
    "content": '<history_task_context mode="offloaded" sig="0123456789abcdef">\n3 left.\n</history_task_context>',
}
CALL = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "terminal", "arguments": "{}"}}]}  # fmt: skip
RESULT = {"role": "tool", "tool_call_id": "c1", "content": "ok"}


def test_a_restored_request_is_put_back_on_calls_without_the_gateway() -> None:
    view = offload.View()
    answer = {"level": "mild", "messages": [SYSTEM, REQUEST, NOTE, CALL, RESULT],
              "stats": {"request_restored": True}}  # fmt: skip
    offload.learn(view, [SYSTEM, NOTE, CALL, RESULT], answer)
    sent = offload.apply(view, [SYSTEM, NOTE, CALL, RESULT])
    assert [m.get("content") for m in sent if m["role"] == "user"][:1] == [REQUEST["content"]]
    assert sent[0] == SYSTEM and sent[1] == REQUEST
    # Hermes's list holds a request of its own again: nothing is added.
    other = {"role": "user", "content": "a new question"}
    sent = offload.apply(view, [SYSTEM, other])
    assert [m["content"] for m in sent if m["role"] == "user"] == ["a new question"]
    # The gateway answered without a restore: forgotten.
    offload.learn(
        view, [SYSTEM, other], {"level": "none", "messages": [SYSTEM, other], "stats": {}}
    )
    assert offload.apply(view, [SYSTEM, NOTE, CALL, RESULT])[1] == NOTE


def test_a_users_own_message_that_starts_like_a_canvas_stays() -> None:
    """Only the gateway's signed blocks are ours: a look-alike the user typed is the request."""
    view = offload.View()
    mine = {"role": "user", "content": "<current_task_context> 这是我自己的文字 / my own words"}
    sent = offload.apply(view, [SYSTEM, mine])
    assert sent == [SYSTEM, mine]
    assert not offload.is_canvas(mine)
    signed = {"role": "user", "content": '<current_task_context sig="0123456789abcdef">x'}
    assert offload.is_canvas(signed)


def hermes_merges_users(messages: list[dict]) -> list[dict]:
    """What Hermes 0.19.0's repair_message_sequence does to its live list before every call:
    consecutive user messages become one (``a + "\\n\\n" + b``)."""
    out: list[dict] = []
    for m in messages:
        if out and m["role"] == "user" and out[-1]["role"] == "user":
            out[-1] = {**out[-1], "content": out[-1]["content"] + "\n\n" + m["content"]}
        else:
            out.append(dict(m))
    return out


def test_the_compacted_list_keeps_the_request_first_when_hermes_merges_it_with_our_note():
    """The gateway puts its history note first; Hermes then merges it with the request into one
    message that started with our note (its background review and the next turn read the
    request inside our note). After ``note_after_request`` the merged message starts with the
    request, and the note follows it."""
    compacted = [NOTE, REQUEST, CALL, RESULT]
    live = hermes_merges_users(offload.note_after_request(compacted))
    assert live[0]["content"].startswith(REQUEST["content"])
    assert live[0]["content"].endswith(NOTE["content"])
    assert live[1:] == [CALL, RESULT]
    # No request of the host's right after the note: nothing moves (the note keeps the list
    # from starting with an assistant).
    assert offload.note_after_request([NOTE, CALL, RESULT]) == [NOTE, CALL, RESULT]
    later = [NOTE, CALL, RESULT, REQUEST]
    assert offload.note_after_request(later) == later
    assert offload.note_after_request([REQUEST, CALL, RESULT]) == [REQUEST, CALL, RESULT]
