"""Offload under stress, through HTTP against real gateways, with no LLM: a gateway SIGKILLed in
the middle of a session, two sessions of one agent, many sessions at once (threads)."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.offload.zh_session import zh_session
from tests.support.agent_sessions import chain, load_sessions, strip_id
from tests.support.gateway import KEYWORD_ONLY, GatewayProcess
from tests.support.mermaid import require_validator
from tests.support.offload_replay import (
    Replay,
    content_tokens,
    read_back_problems,
    replay,
)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    g = GatewayProcess(
        tmp_path_factory.mktemp("offload-resilience") / "data", env=KEYWORD_ONLY
    ).start()
    yield g
    g.stop()


def scope_dir(gw: GatewayProcess, scope: str) -> Path:
    dirs = sorted((gw.data_dir / "offload").glob(f"{scope}-*"))
    assert len(dirs) == 1, dirs
    return dirs[0]


def jsonl_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def rows_by_file(gw: GatewayProcess, scope: str) -> dict[str, list[dict]]:
    return {p.name: jsonl_rows(p) for p in sorted(scope_dir(gw, scope).glob("offload-*.jsonl"))}


def _canvases(c, scope: str, session_key: str) -> dict:
    r = c.get("/offload/canvases", params={"scope": scope, "session_key": session_key})
    assert r.status_code == 200, r.text
    return r.json()


def test_sigkill_mid_session_resumes_with_same_canvas_and_rows(start_gateway, tmp_path: Path):
    gw = start_gateway()
    msgs = chain(load_sessions("swe"))
    half = next(i for i in range(len(msgs) // 2, len(msgs)) if msgs[i]["role"] == "assistant")
    key, scope = "agent:crash:one", "crash"
    with gw.client(timeout=60) as c:
        first = replay(c, msgs[:half], session_key=key, scope=scope, budget=32_000)
        assert not first.problems, first.problems[:10]
        before = _canvases(c, scope, key)
        assert before["active"] is not None
        reads_before = {
            rid: c.post(
                "/offload/read", json={"scope": scope, "session_key": key, "tool_call_id": rid}
            ).json()
            for rid in first.raw_results
        }
    sdir = scope_dir(gw, scope)
    files_before = {
        str(p.relative_to(sdir)): p.read_bytes() for p in sdir.rglob("*") if p.is_file()
    }
    gw.kill()  # SIGKILL: no shutdown hook runs
    gw.start()
    with gw.client(timeout=60) as c:
        after = _canvases(c, scope, key)
        assert after["active"]["file"] == before["active"]["file"]
        assert after["active"]["text"] == before["active"]["text"]
        assert [h["file"] for h in after["history"]] == [h["file"] for h in before["history"]]
        for rid, was in reads_before.items():
            now = c.post(
                "/offload/read", json={"scope": scope, "session_key": key, "tool_call_id": rid}
            ).json()
            assert now["content"] == was["content"] == first.raw_results[rid]
            assert now["row"] == was["row"]
        files_after = {
            str(p.relative_to(sdir)): p.read_bytes() for p in sdir.rglob("*") if p.is_file()
        }
        # Nothing written before the kill is gone or changed (the rows and refs survived).
        for name, data in files_before.items():
            if name.endswith((".jsonl", ".md", ".mmd")):
                assert files_after.get(name) == data, f"{name} changed across the restart"
        # The host goes on: it re-sends the results it had (duplicates, same answers) and the
        # session continues on the same canvas.
        rest = replay(c, msgs, session_key=key, scope=scope, budget=32_000, assemble_from=half)
        assert not rest.problems, rest.problems[:10]
        for rid, ans in first.tool_answers.items():
            again = rest.tool_answers[rid]
            assert again["duplicate"] is True
            assert again["ref"] == ans["ref"]
            assert again["replacement"] == ans["replacement"]
        problems = read_back_problems(c, rest)
        assert not problems, problems[:10]
        # The steps right after the restart (before the next user prompt) go on the same
        # canvas; the later prompts are other SWE-agent tasks with canvases of their own.
        nxt = next(i for i in range(half, len(msgs)) if msgs[i]["role"] == "user")
        going_on = [m["tool_call_id"] for m in msgs[half:nxt] if m["role"] == "tool"]
        assert going_on
        prefix = before["active"]["file"][:3]
        for rid in going_on:
            assert rest.tool_answers[rid]["node_id"].startswith(f"{prefix}-N"), rid
        final = _canvases(c, scope, key)
        grown = next(
            x for x in [final["active"], *final["history"]] if x["file"] == before["active"]["file"]
        )
        assert grown["node_count"] >= before["active"]["node_count"] + len(going_on)
        rows = rows_by_file(gw, scope)
        assert len(rows) == 1
        (only,) = rows.values()
        ids = [r["tool_call_id"] for r in only]
        assert len(ids) == len(set(ids))  # no row written twice (re-sent results, restart)
        # One row per tool call (the others are messages that left the context: msg-...).
        assert sorted(i for i in ids if not i.startswith("msg-")) == sorted(rest.raw_results)


def _run(gw: GatewayProcess, msgs, key: str, scope: str, budget: int, fmt: str) -> Replay:
    system_tokens = 0
    if fmt == "agent":
        system_tokens = content_tokens([m for m in msgs if m["role"] == "system"])
    with gw.client(timeout=120) as c:
        rep = replay(
            c,
            msgs,
            session_key=key,
            scope=scope,
            budget=budget,
            fmt=fmt,
            system_tokens=system_tokens,
        )
        rep.problems.extend(read_back_problems(c, rep))
    return rep


def _texts(msgs) -> list[str]:
    out = []
    for m in msgs:
        c = m.get("content")
        if isinstance(c, list):
            c = "\n".join(b.get("text", "") for b in c if isinstance(b, dict))
        if m["role"] in ("system", "user", "assistant") and c:  # a squeezed system prompt too
            out.append(c)
    return out


def _assert_rows_belong(gw: GatewayProcess, scope: str, reps: list[Replay], msgs_of: dict) -> None:
    """Each session's JSONL holds exactly its own tool calls (none missing, none foreign), and
    the rows of messages that left its context are its own messages (read back to check)."""
    files = rows_by_file(gw, scope)
    assert len(files) == len(reps), sorted(files)
    owner = {}
    for rep in reps:
        for rid in rep.raw_results:
            owner[rid] = rep.session_key
    with gw.client() as c:
        for name, rows in files.items():
            tool_rows = [r for r in rows if not r["tool_call_id"].startswith("msg-")]
            keys = {owner.get(r["tool_call_id"]) for r in tool_rows}
            assert len(keys) == 1 and None not in keys, f"{name} mixes sessions: {keys}"
            (key,) = keys
            rep = next(r for r in reps if r.session_key == key)
            assert sorted(r["tool_call_id"] for r in tool_rows) == sorted(rep.raw_results), name
            own = _texts(msgs_of[key])
            for row in rows:
                if row in tool_rows:
                    continue
                got = c.post(
                    "/offload/read",
                    json={"scope": scope, "session_key": key, "tool_call_id": row["tool_call_id"]},
                ).json()["content"]
                assert any(got == t or (got and got in t) or (t and t in got) for t in own), (
                    f"{name}: message row {row['tool_call_id']} is not this session's: {got[:80]!r}"
                )


def test_two_sessions_of_one_agent_never_mix_rows(gw: GatewayProcess) -> None:
    """Same scope (one agent), two sessions replayed at the same time."""
    swe = load_sessions("swe")
    scope = f"mix-{uuid.uuid4().hex[:6]}"
    keys = [f"agent:mix:a-{uuid.uuid4().hex[:6]}", f"agent:mix:b-{uuid.uuid4().hex[:6]}"]
    msgs_of = {keys[0]: swe[2].messages, keys[1]: swe[7].messages}
    with ThreadPoolExecutor(2) as pool:
        futs = [pool.submit(_run, gw, msgs_of[k], k, scope, 6000, "openai") for k in keys]
        reps = [f.result() for f in futs]
    for rep in reps:
        assert not rep.problems, rep.problems[:10]
    _assert_rows_belong(gw, scope, reps, msgs_of)
    mine = {rep.session_key: {strip_id(r) for r in rep.raw_results} for rep in reps}
    with gw.client() as c:
        for rep in reps:
            # The other session's results never show up in this session's assembled lists.
            other = set().union(*(v for k, v in mine.items() if k != rep.session_key))
            for call in rep.calls:
                text = json.dumps(call.answer["messages"])
                assert not any(f'"{o}"' in text for o in other)
            # The rows behind this session's canvas nodes are this session's.
            canvas = _canvases(c, scope, rep.session_key)["active"]
            assert canvas is not None
            for node in sorted(set(_node_ids(canvas["text"])))[:10]:
                r = c.post(
                    "/offload/read",
                    json={"scope": scope, "session_key": rep.session_key, "node_id": node},
                )
                assert r.status_code == 200, r.text
                for row in r.json()["rows"]:
                    assert strip_id(row["tool_call_id"]) in mine[rep.session_key], node


def _node_ids(text: str) -> list[str]:
    return re.findall(r"\b\d{3}-N\d+\b", text)


def test_concurrent_sessions(gw: GatewayProcess) -> None:
    """Six sessions at once: three of one agent, three of other agents, both formats, zh too."""
    swe, tau = load_sessions("swe"), load_sessions("tau")
    shared = f"conc-{uuid.uuid4().hex[:6]}"
    jobs = [
        (swe[0].messages, shared, 3000, "openai"),
        (tau[0].messages, shared, 3000, "agent"),
        (zh_session(), shared, 5000, "openai"),
        (swe[9].messages, f"conc-x-{uuid.uuid4().hex[:6]}", 5000, "agent"),
        (tau[13].messages, f"conc-y-{uuid.uuid4().hex[:6]}", 3000, "openai"),
        (chain(swe[:4]), f"conc-z-{uuid.uuid4().hex[:6]}", 8000, "openai"),
    ]
    keys = [f"agent:conc:{i}-{uuid.uuid4().hex[:6]}" for i in range(len(jobs))]
    msgs_of = {k: job[0] for k, job in zip(keys, jobs, strict=True)}
    with ThreadPoolExecutor(len(jobs)) as pool:
        futs = [
            pool.submit(_run, gw, msgs, k, sc, b, fmt)
            for k, (msgs, sc, b, fmt) in zip(keys, jobs, strict=True)
        ]
        reps = [f.result() for f in futs]
    for rep in reps:
        assert not rep.problems, (rep.session_key, rep.problems[:10])
    assert sum(len(r.changed_ids) for r in reps) > 10
    _assert_rows_belong(gw, shared, [r for r in reps if r.scope == shared], msgs_of)
    for rep in reps:
        if rep.scope != shared:
            _assert_rows_belong(gw, rep.scope, [rep], msgs_of)


def test_canvas_files_of_these_runs_parse_as_mermaid(gw: GatewayProcess) -> None:
    """Every canvas this module's gateway drew parses as Mermaid: the other tests' and those of
    a Chinese and an English session replayed here, so that run alone it still checks some."""
    validator = require_validator()
    scope = f"canvas-{uuid.uuid4().hex[:6]}"
    with gw.client(timeout=60) as c:
        for i, msgs in enumerate((zh_session(), load_sessions("swe")[0].messages)):
            rep = replay(c, msgs, session_key=f"agent:canvas:{i}", scope=scope, budget=3000)
            assert not rep.problems, rep.problems[:10]
    files = sorted(gw.data_dir.rglob("mmds/*.mmd"))
    assert any(f.is_relative_to(scope_dir(gw, scope)) for f in files), "no canvas drawn here"
    bad = [r for r in validator.check(files) if not r.ok]
    assert not bad, "\n".join(f"{Path(r.file).name}: {r.error}" for r in bad[:10])
