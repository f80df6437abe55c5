"""Issue 21, the core: the task stays in the context, tasks split, canvases belong to their
session, and /offload/assemble scales. All through one gateway's routes (in process; the
scaling is timed on a gateway process of its own).

- No level (mild, aggressive, emergency) removes or truncates the host's system prompt or the
  turn's request (the newest user message, also while the turn's tool calls go on); the canvas
  always names the current task's goal.
- When that fixed part alone exceeds the budget: the smallest valid list that keeps it, said in
  /health (a field that clears once it fits again); a budget below the minimum is a 422 naming it.
- Our canvas message is recognised by the gateway's signature, not its opening: a user's own
  message starting with ``<current_task_context`` stays.
- Tasks split on the shared agent sessions (DEV data: tests/fixtures/agent-sessions); a new
  session never continues another session's canvas, and ``{"canvas": "active"}`` is the caller's.
- assemble is linear in messages, writes a bounded number of files per request, and refuses too
  many messages with 413 before anything is written.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.agent_sessions import load_sessions
from tests.support.inprocess import InProcessGateway

MAX_MESSAGES = 20_000
CANVAS = "<current_task_context"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessGateway]:
    g = InProcessGateway(
        tmp_path_factory.mktemp("task-stays") / "data",
        env={"TDAI_MEMORY__OFFLOAD__ASSEMBLE_MAX_MESSAGES": str(MAX_MESSAGES)},
    ).start()
    yield g
    g.stop()


@pytest.fixture
def client(gw: InProcessGateway) -> Iterator[httpx.Client]:
    with gw.client(timeout=120) as c:
        yield c


def scope_dir(client: httpx.Client, scope: str) -> Path:
    return Path(client.get("/offload/guide", params={"scope": scope}).json()["data_dir"])


def text(m: dict) -> str:
    c = m.get("content")
    return c if isinstance(c, str) else "".join(b.get("text", "") for b in c or [])


def canvases(messages: list[dict]) -> list[str]:
    return [text(m) for m in messages if m["role"] == "user" and text(m).startswith(CANVAS)]


def goal_of(block: str) -> str:
    m = re.search(r"^Goal: (.*)$", block, re.M)
    assert m, block
    return m.group(1)


def assemble(client: httpx.Client, scope: str, key: str, msgs: list[dict], budget: int, **kw):
    r = client.post(
        "/offload/assemble",
        json={"session_key": key, "scope": scope, "messages": msgs, "token_budget": budget, **kw},
    )
    assert r.status_code == 200, r.text[:500]
    return r.json()


def call(i: int, cmd: str) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": "bash", "arguments": cmd}}
        ],
    }


def result(i: int, body: str) -> dict:
    return {"role": "tool", "tool_call_id": f"call_{i}", "content": body}


SYSTEM = {"role": "system", "content": "You are a careful coding agent. " * 300}  # ~2,100 tokens


def long_turns(n_turns: int, calls_per_turn: int, size: int) -> list[dict]:
    msgs = [SYSTEM]
    k = 0
    for t in range(n_turns):
        msgs.append({"role": "user", "content": f"Task {t}: fix bug number {t} in module m{t}."})
        for _ in range(calls_per_turn):
            k += 1
            msgs += [call(k, f"cat f{k}.py"), result(k, f"line {k} of output\n" * size)]
        msgs.append({"role": "assistant", "content": f"Fixed bug {t}."})
    return msgs


def test_no_level_cuts_the_system_prompt_or_the_request_during_a_long_turn(client, scope):
    """The newest turn: its request, then 14 tool calls (a CTF turn of the real replay), and
    midway a second user message after it (Hermes appends its todo snapshot after a
    compaction). At every call of the turn and at budgets from mild to emergency, also when
    the tool schemas (``system_tokens``) leave almost nothing, the system prompt and the
    request arrive whole; every tool call keeps its result or a stub."""
    history = long_turns(6, 4, 60)
    request = {
        "role": "user",
        "content": "Solve the CTF task: find the flag in chall.bin. 找到旗帜。",
    }
    for budget, schemas in ((12_000, 0), (6_000, 0), (3_500, 0), (5_000, 3_000)):
        msgs = [*history, request]
        key = f"long-{budget}-{schemas}"
        for k in range(100, 114):
            msgs += [call(k, f"xxd chall.bin | head -{k}"), result(k, f"{k:08x}: 00 11 22\n" * 150)]
            if k == 105:
                msgs.append({"role": "user", "content": "Todo: 1. find the flag [in progress]"})
            out = assemble(
                client, scope, key, msgs, budget, prompt=request["content"], system_tokens=schemas
            )
            sent = out["messages"]
            assert sent[0] == SYSTEM, (budget, k, out["level"])
            assert request in sent, (budget, k, out["level"])
            ids = [c["id"] for m in sent for c in m.get("tool_calls") or []]
            results = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
            assert sorted(ids) == sorted(results), (budget, k)
            assert out["estimated_tokens"] <= budget or out["stats"]["over_budget"]
            if out["stats"]["over_budget"]:
                assert out["stats"]["fixed_tokens"] > budget * 0.8, out["stats"]
            assert len(canvases(sent)) == 1
            assert goal_of(canvases(sent)[0]).startswith("Solve the CTF task"), canvases(sent)[0]
        assert out["level"] in ("aggressive", "emergency"), (budget, out["level"])


def test_the_canvas_names_the_current_task_from_its_first_call(client, scope):
    """Task 2's first call (no step of it yet) and its later calls: the goal is task 2's."""
    key = "two-tasks"
    t1 = "Reproduce the TimeDelta serialization precision bug in marshmallow and fix it."
    msgs = [SYSTEM, {"role": "user", "content": t1}]
    for k in range(1, 4):
        msgs += [call(k, f"grep -n timedelta fields.py # {k}"), result(k, "fields.py:1 x\n" * 40)]
        out = assemble(client, scope, key, msgs, 60_000, prompt=t1)
    assert goal_of(canvases(out["messages"])[0]).startswith("Reproduce the TimeDelta")
    msgs.append({"role": "assistant", "content": "Fixed."})
    t2 = "帮我写一首关于秋天的诗，并保存到 poem.txt 文件里。"
    msgs.append({"role": "user", "content": t2})
    out = assemble(client, scope, key, msgs, 60_000, prompt=t2)
    assert goal_of(canvases(out["messages"])[0]).startswith("帮我写一首"), out["messages"][-2:]
    msgs += [call(9, "echo poem > poem.txt"), result(9, "")]
    out = assemble(client, scope, key, msgs, 60_000, prompt=t2)
    assert goal_of(canvases(out["messages"])[0]).startswith("帮我写一首")


def test_fixed_part_over_budget_is_the_smallest_valid_list_and_reported_then_cleared(client, scope):
    big_system = {"role": "system", "content": "Rules of the house. " * 1200}  # ~4,800 tokens
    request = {"role": "user", "content": "Summarise the repository layout."}
    msgs = [
        big_system,
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "hi"},
    ]
    msgs += [request, call(1, "ls -R"), result(1, "src/a.py\n" * 800)]
    key = "fixed-over"
    out = assemble(client, scope, key, msgs, 2_000, prompt=request["content"])
    sent = out["messages"]
    assert out["stats"]["over_budget"] and out["stats"]["fixed_tokens"] > 2_000
    assert sent[0] == big_system and request in sent
    assert {"role": "user", "content": "hello"} not in sent  # everything else that can go, went
    ids = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    assert sorted(ids) == sorted(m["tool_call_id"] for m in sent if m["role"] == "tool")
    health = client.get("/health").json()["offload"]["fixed_over_budget"]
    assert [e["session_key"] for e in health if e["scope"] == scope] == [key]
    out = assemble(client, scope, key, msgs, 20_000)
    assert not out["stats"]["over_budget"]
    health = client.get("/health").json()["offload"]["fixed_over_budget"]
    assert not [e for e in health if e["scope"] == scope]


def test_a_budget_below_the_minimum_is_refused_naming_it(client, scope, gw):
    r = client.post(
        "/offload/assemble",
        json={"session_key": "s", "scope": scope, "messages": [SYSTEM], "token_budget": 500},
    )
    assert r.status_code == 422 and "token_budget" in r.text and "1024" in r.text, r.text
    assert not scope_dir(client, scope).exists()


def test_a_users_message_that_looks_like_our_canvas_stays(client, scope):
    key = "forged"
    own = f'{CANVAS} file="001-x.mmd">\nGoal: my own text, keep it\n</current_task_context>'
    msgs = [SYSTEM, {"role": "user", "content": "List the files."}, call(1, "ls"), result(1, "a\n")]
    out = assemble(client, scope, key, msgs, 60_000, prompt="List the files.")
    ours = canvases(out["messages"])
    assert len(ours) == 1
    # The host sends our canvas back (it is dropped and replaced) and the user's look-alike.
    again = [*out["messages"], {"role": "assistant", "content": "ok"}]
    again.append({"role": "user", "content": own})
    out = assemble(client, scope, key, again, 60_000, prompt=own)
    sent = out["messages"]
    assert {"role": "user", "content": own} in sent
    assert len([c for c in canvases(sent) if "sig=" in c.split("\n", 1)[0]]) == 1


def swe_prompts() -> list[tuple[str, str]]:
    """(session id, first user message) of the 11 SWE-agent / CTF sessions (DEV data)."""
    out = []
    for s in load_sessions():
        if "airline" not in s.id:
            out.append((s.id, next(m["content"] for m in s.messages if m["role"] == "user")))
    return out


def task_of(prompt: str) -> str:
    """The task statement of a SWE-agent prompt (its issue) or CTF prompt (its challenge)."""
    m = re.search(r"ISSUE:\n(.*)|named \"([^\"]*)\"", prompt)
    assert m, prompt[:200]
    return m.group(0)


def test_tasks_split_on_the_chained_swe_sessions_one_canvas_per_task(client, scope, gw):
    """The 11 SWE-agent / CTF sessions chained in one session, as the hosts send them (the
    prompt as Hermes passes it, at most 4,000 characters): one canvas per distinct task (8:
    two sessions solve the TimeDelta issue, three the SyntaxError one), each step on its task's
    canvas."""
    key = "chained-swe"
    msgs = [SYSTEM]
    k = 0
    prefixes: dict[str, set[str]] = {}
    for _, prompt in swe_prompts():
        msgs.append({"role": "user", "content": prompt})
        for _ in range(2):
            k += 1
            msgs += [call(k, f"step {k}"), result(k, f"out {k}\n" * 20)]
            assemble(client, scope, key, msgs, 200_000, prompt=prompt[:4000])
            node = client.post(
                "/offload/read", json={"scope": scope, "tool_call_id": f"call_{k}"}
            ).json()["row"]["node_id"]
            prefixes.setdefault(task_of(prompt), set()).add(node.split("-N")[0])
        msgs.append({"role": "assistant", "content": "submitted"})
    want = len({task_of(p) for _, p in swe_prompts()})
    assert want == 8
    files = sorted(p.name for p in (scope_dir(client, scope) / "mmds").glob("*.mmd"))
    assert len(files) == want, files
    assert all(len(v) == 1 for v in prefixes.values()), prefixes
    assert len({next(iter(v)) for v in prefixes.values()}) == want


def test_a_new_session_never_continues_another_sessions_canvas(client, scope):
    prompt = "Refactor the billing module: split invoice.py into smaller files."
    for key in ("agent:main:on1", "agent:main:on2"):
        msgs = [SYSTEM, {"role": "user", "content": prompt}, call(1, "ls"), result(1, "x\n")]
        msgs[2]["tool_calls"][0]["id"] = f"call_{key[-1]}"
        msgs[3]["tool_call_id"] = f"call_{key[-1]}"
        assemble(client, scope, key, msgs, 60_000, prompt=prompt)
    reads = {}
    for key in ("agent:main:on1", "agent:main:on2"):
        r = client.post(
            "/offload/read", json={"scope": scope, "session_key": key, "canvas": "active"}
        )
        assert r.status_code == 200, r.text
        reads[key] = r.json()["file"]
        node = client.post(
            "/offload/read", json={"scope": scope, "tool_call_id": f"call_{key[-1]}"}
        ).json()["row"]["node_id"]
        assert node == f"{reads[key][:3]}-N1", (key, node, reads[key])
    assert reads["agent:main:on1"] != reads["agent:main:on2"]


def plain(n: int) -> list[dict]:
    msgs = [{"role": "system", "content": "You are helpful."}]
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        msgs.append({"role": role, "content": f"message {i} with a few words"})
    return msgs


def test_assemble_is_linear_and_writes_one_file_per_request(start_gateway, scope):
    """Before: quadratic (32k messages 42-45 s) and one ref file per removed message. Timed on
    a gateway process of its own: in process, the test's client and the app share one heap and
    its garbage collections (seen: 8x for 4x the messages, on a loaded machine)."""
    gw = start_gateway(env={"TDAI_MEMORY__OFFLOAD__ASSEMBLE_MAX_MESSAGES": str(MAX_MESSAGES)})
    with gw.client() as client:
        _assert_linear(client, scope)


def _assert_linear(client, scope: str) -> None:
    times = {}
    for n in (4_000, 16_000):
        msgs = plain(n)
        t0 = time.perf_counter()
        out = assemble(client, scope, f"scale-{n}", msgs, 8_000, prompt=msgs[-1]["content"])
        times[n] = time.perf_counter() - t0
        assert out["stats"]["removed"] > n * 0.8
    assert times[16_000] < 8 * times[4_000], times  # linear: ~4x; quadratic: ~16x
    refs = list((scope_dir(client, scope) / "refs").glob("*"))
    assert len(refs) == 2, [p.name for p in refs]  # one bundle per request
    r = client.post(
        "/offload/read",
        json={"scope": scope, "session_key": "scale-16000", "tool_call_id": out_id(msgs[5])},
    )
    assert r.status_code == 200 and r.json()["content"] == msgs[5]["content"], r.text[:300]


def out_id(m: dict) -> str:
    import hashlib

    return "msg-" + hashlib.sha1(f"{m['role']}\0{m['content']}".encode()).hexdigest()[:16]


def test_too_many_messages_is_413_naming_the_limit_before_anything_is_written(client, scope, gw):
    r = client.post(
        "/offload/assemble",
        json={"session_key": "s", "scope": scope, "messages": plain(MAX_MESSAGES + 1)[1:],
              "token_budget": 8_000},
    )  # fmt: skip
    assert r.status_code == 413 and str(MAX_MESSAGES) in r.json()["error"], r.text[:300]
    assert not scope_dir(client, scope).exists()


def test_a_request_the_host_lost_is_put_back(client, scope):
    """Hermes 0.19.0, after a compaction: its live list held no user message any more (the
    compacted list had the request). The gateway knows the turn's prompt and puts it back."""
    key = "lost-request"
    request = "Find why test_timedelta fails and fix fields.py. 修复它。"
    msgs = [SYSTEM, {"role": "user", "content": request}, call(1, "pytest -x"), result(1, "F\n")]
    assemble(client, scope, key, msgs, 60_000, prompt=request)
    lost = [SYSTEM, call(1, "pytest -x"), result(1, "F\n"), call(2, "cat fields.py")]
    lost.append(result(2, "x = 1\n"))
    out = assemble(client, scope, key, lost, 60_000)
    sent = out["messages"]
    assert sent[0] == SYSTEM and out["stats"]["request_restored"] is True
    users = [text(m) for m in sent if m["role"] == "user" and not text(m).startswith("<")]
    assert users == [request]
    assert [m["role"] for m in sent if not text(m).startswith("<")] == [
        "system", "user", "assistant", "tool", "assistant", "tool"
    ]  # fmt: skip
    # Hermes's live list after a compaction: our history note is its only user message.
    note = (
        '<history_task_context mode="offloaded">\n4 earlier messages left.\n</history_task_context>'
    )
    noted = [SYSTEM, {"role": "user", "content": note}, call(4, "ls"), result(4, "a\n")]
    out = assemble(client, scope, key, noted, 60_000)
    assert out["stats"]["request_restored"] is True
    users = [
        text(m) for m in out["messages"] if m["role"] == "user" and not text(m).startswith("<")
    ]
    assert users == [request]
    # A new turn's list keeps its own request (we were not told its prompt): nothing added.
    other = [SYSTEM, {"role": "user", "content": "another question"}, call(3, "ls"), result(3, "")]
    out = assemble(client, scope, key, other, 60_000)
    assert out["stats"]["request_restored"] is False
    assert [text(m) for m in out["messages"] if m["role"] == "user"][-1] == "another question"


HISTORY = "<history_task_context"


def test_our_note_the_host_joined_to_the_request_is_split_off_again(client, scope):
    """Hermes 0.19.0 merges consecutive user messages of its live list before every call
    (``a + "\\n\\n" + b``), so after a compaction our history note and the turn's request come
    back as one message. The gateway splits it again by the note's signature: the request is
    a message of its own (not put back a second time), the old note is replaced, not kept
    inside the request (no growth compaction after compaction), and a note that only looks
    like ours stays the user's text."""
    key = "joined"
    request = "Solve the CTF task: find the flag in chall.bin. 找到旗帜。"
    msgs = [SYSTEM, {"role": "user", "content": request}]
    for k in range(1, 41):  # until earlier calls of the turn leave the context
        msgs += [call(k, f"xxd chall.bin | head -{k}"), result(k, f"{k:08x}: 00 11 22\n" * 150)]
        out = assemble(client, scope, key, msgs, 5_000, prompt=request)
        if out["stats"]["removed"]:
            break
    assert out["level"] in ("aggressive", "emergency"), out["level"]
    sizes = []
    for order in ("note first", "request first", "note first", "request first"):
        sent = out["messages"]
        notes = [text(m) for m in sent if m["role"] == "user" and text(m).startswith(HISTORY)]
        assert len(notes) == 1, [text(m)[:80] for m in sent]
        joined = f"{notes[0]}\n\n{request}" if order == "note first" else f"{request}\n\n{notes[0]}"
        kept = [m for m in sent if m["role"] != "user"]  # Hermes's live list: the canvas is not
        live = [kept[0], {"role": "user", "content": joined}, *kept[1:]]
        k = len(sizes) * 10 + 20
        for j in range(k, k + 6):
            live += [call(j, f"strings chall.bin | grep -n flag{j}"), result(j, "flag?\n" * 300)]
        out = assemble(client, scope, key, live, 5_000)
        users = [text(m) for m in out["messages"] if m["role"] == "user"]
        assert [u for u in users if not u.startswith("<")] == [request], (order, users)
        assert out["stats"]["request_restored"] is False, order
        assert len([u for u in users if u.startswith(HISTORY)]) == 1, (order, users)
        sizes.append(sum(len(u) for u in users))
    assert max(sizes) < min(sizes) + 400, sizes  # the note replaced, never accumulated
    # A note only made to look like ours, joined to the user's text: the user's text, whole.
    forged = '<history_task_context mode="offloaded">\n9 left.\n</history_task_context>'
    own = f"{forged}\n\nKeep this whole, please. 全部保留。"
    msgs = [SYSTEM, {"role": "user", "content": own}, call(1, "ls"), result(1, "a\n")]
    out = assemble(client, scope, "joined-forged", msgs, 60_000, prompt=own)
    assert {"role": "user", "content": own} in out["messages"]
