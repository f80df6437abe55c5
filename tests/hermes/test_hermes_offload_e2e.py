"""Context offload in the real Hermes (hermes-agent 0.19.0, own venv), end to end (issue 10).

Everything here is what a user runs: ``scripts/install-hermes.sh --offload`` on a Hermes home,
one-shot ``hermes chat -Q -q`` runs resuming the same session (``--resume``), our real gateway,
and a scripted tool-using model (tests/support/tool_agent.py) whose tools really run
(``terminal`` printing generated zh / en files of 200 characters to 50 KB, ``read_file``, the
provider's search tools and ``memory_tencentdb_offload_read``). The assertions are on what the
model received (every request body the fake LLM recorded) and on what Hermes stored (state.db).

One gateway serves the whole module; each test has its own Hermes home, hence its own scope.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.fake_llm import FakeLLM
from tests.support.gateway import GatewayProcess, free_port
from tests.support.tool_agent import (
    READ_TOOL,
    ToolAgent,
    call,
    count_tokens,
    prompt_tokens,
    read_back,
    read_file,
    say,
    terminal,
    text_of,
    tool_message,
    tools,
    write_doc,
)

from .harness import REPO, HermesHome, hermes_venv
from .offload_support import (
    FaultProxy,
    assert_clean,
    canvas_messages,
    chat,
    is_background_review,
    is_stub,
    session_of,
    switch_offload,
    tool_names,
    transcript,
)

pytestmark = pytest.mark.hermes

# offload_token_budget: Hermes's own request is ~14k (tool schemas ~12k, system prompt ~2k), so
# the third turn's results cross the engine's compaction point (0.85 x budget) well before its end.
BUDGET = 28_000
KEEP_TOKENS = 1_000  # the gateway's toolResultKeepTokens: larger results become stubs
# What the seams may take in the degraded tests (small on purpose: the bounds derive from them).
DEADLINES = {
    "offload_tool_timeout_s": 1.0,
    "offload_request_timeout_s": 0.5,
    "offload_compress_timeout_s": 2.0,
}

# (name, characters, language): the documents the model's `terminal` calls print. The largest
# are 48 KB (zh: 16,000 characters of 3 bytes), below the point where Hermes's terminal tool
# cuts its output itself (``tool_output.max_bytes``), so the original is the whole file.
DOCS = [
    ("en_200", 200, "en"),
    ("en_800", 800, "en"),
    ("en_2000", 2_000, "en"),
    ("en_3000", 3_000, "en"),
    ("en_5000", 5_000, "en"),
    ("en_12000", 12_000, "en"),
    ("en_30000", 30_000, "en"),
    ("en_48000", 48_000, "en"),
    ("zh_200", 200, "zh"),
    ("zh_800", 800, "zh"),
    ("zh_1000", 1_000, "zh"),
    ("zh_1200", 1_200, "zh"),
    ("zh_3000", 3_000, "zh"),
    ("zh_12000", 12_000, "zh"),
    ("zh_16000", 16_000, "zh"),
]


def require_hermes() -> None:
    if not (hermes_venv() / "bin" / "hermes").exists():
        msg = f"hermes-agent venv missing at {hermes_venv()} (`make hosts`)"
        if os.environ.get("MEMORY_TENCENTDB_REQUIRE_HOSTS") == "1":
            pytest.fail(msg)
        pytest.skip(msg)


def terminal_result(text: str) -> str:
    """The exact string Hermes's ``terminal`` tool returns for a command printing ``text``."""
    return json.dumps({"output": text, "exit_code": 0, "error": None}, ensure_ascii=False)


@dataclass
class Docs:
    root: Path
    paths: dict[str, Path] = field(default_factory=dict)

    def text(self, name: str) -> str:
        return self.paths[name].read_text("utf-8")

    def cat(self, name: str, call_id: str) -> dict[str, Any]:
        return terminal(f"cat {self.paths[name]}", call_id)

    def result(self, name: str) -> str:
        return terminal_result(self.text(name))


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Docs:
    root = tmp_path_factory.mktemp("docs")
    d = Docs(root)
    for seed, (name, chars, lang) in enumerate(DOCS):
        d.paths[name] = write_doc(root, f"{name}.txt", chars, lang, seed)
    return d


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    """One real gateway (bundled embedding models, no LLM) for every test of the module."""
    require_hermes()
    gw = GatewayProcess(tmp_path_factory.mktemp("gw") / "data").start()
    yield gw
    gw.stop()


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    with FakeLLM() as fake:
        yield fake


def make_home(
    tmp: Path,
    llm: FakeLLM,
    gw: GatewayProcess,
    *,
    offload: bool | None = True,
    port: int | None = None,
    name: str = "hermes-home",
    **settings: Any,
) -> HermesHome:
    """A Hermes home on the module's gateway (or ``port``: a proxy, or nothing listening)."""
    base = tmp / name
    base.mkdir()
    home = HermesHome.create(base, llm.base_url, port or gw.port)
    home.data_dir = gw.data_dir  # the provider checks it talks to the gateway of this directory
    home.extra_env["MEMORY_TENCENTDB_AUTO_START"] = "0"  # the module's gateway, never another
    if offload is not None:
        switch_offload(home, offload, offload_token_budget=BUDGET, **settings)
    return home


def tool_ids(request: dict[str, Any]) -> list[str]:
    return [
        str(m.get("tool_call_id")) for m in request.get("messages") or [] if m.get("role") == "tool"
    ]


def read_original(gw: GatewayProcess, scope: str, call_id: str) -> str:
    r = httpx.post(
        gw.base_url + "/offload/read",
        json={"tool_call_id": call_id, "scope": scope},
        headers=gw.headers,
        timeout=30,
    )
    assert r.status_code == 200, (call_id, r.status_code, r.text[:500])
    body = r.json()
    assert body["kind"] == "tool_result", body
    return body["content"]


# --- the long session ---------------------------------------------------------------------


@dataclass
class Turn:
    prompt: str
    steps: list[Any]
    reply: str


@dataclass
class LongSession:
    """What the module's long offload session produced, for the tests below to check."""

    home: HermesHome
    agent: ToolAgent
    docs: Docs
    session_id: str
    sessions_seen: list[str]
    runs: list[subprocess.CompletedProcess[str]]
    # call id -> the exact original result (only for calls whose original the test knows)
    originals: dict[str, str]
    # read call id -> the call id it reads back
    reads: dict[str, str]
    turn_marks: list[int]  # index in main_requests() where each turn's requests start
    calls: int
    scope: str


def long_session_turns(d: Docs) -> list[Turn]:
    """Four user turns, 36 tool calls: results 200 characters to 48 KB, zh and en, a parallel
    batch, the provider's search tools and read-backs of stubbed results (one after the
    compaction the third turn causes)."""
    small = [
        terminal(f"wc -c {d.paths[n]}", f"call_t4_wc{i}")
        for i, n in enumerate(["en_200", "zh_200"])
    ]
    return [
        Turn(
            "Please look at the build logs in the docs folder and tell me what failed.",
            [
                tools(d.cat("en_200", "call_t1_en200")),
                tools(d.cat("en_800", "call_t1_en800")),
                tools(read_file(d.paths["zh_1000"], "call_t1_readzh")),
                # one parallel batch of three (Hermes runs them concurrently)
                tools(
                    d.cat("en_5000", "call_t1_en5000"),
                    d.cat("zh_3000", "call_t1_zh3000"),
                    d.cat("en_2000", "call_t1_en2000"),
                ),
                tools(
                    call(
                        "memory_tencentdb_conversation_search",
                        "call_t1_csearch",
                        query="build logs",
                    )
                ),
                tools(terminal(f"ls -l {d.root}", "call_t1_ls")),
                say("T1-DONE: the build log shows a failing check."),
            ],
            "T1-DONE",
        ),
        Turn(
            "现在请检查中文日志，找出失败的步骤。",
            [
                tools(d.cat("zh_200", "call_t2_zh200")),
                tools(d.cat("zh_800", "call_t2_zh800")),
                tools(d.cat("zh_12000", "call_t2_zh12000")),
                tools(d.cat("zh_16000", "call_t2_zh16000")),
                read_back("call_t1_zh3000", "call_t2_read_zh3000"),
                tools(d.cat("zh_1200", "call_t2_zh1200")),
                say("T2-DONE：中文日志里有一个失败的检查。"),
            ],
            "T2-DONE",
        ),
        Turn(
            "Now the big English reports and then every medium-sized file; 每个文件都看一下。",
            [
                tools(d.cat("en_12000", "call_t3_en12000")),
                tools(d.cat("en_30000", "call_t3_en30000")),
                tools(d.cat("en_48000", "call_t3_en48000")),
                read_back("call_t3_en12000", "call_t3_read_en12000"),
                tools(
                    call("memory_tencentdb_memory_search", "call_t3_msearch", query="build failure")
                ),
                tools(d.cat("en_3000", "call_t3_en3000")),
                # then the medium-sized files one by one: kept at the source, they fill the
                # context until the engine compacts it
                tools(d.cat("en_3000", "call_t4_en3000a")),
                tools(d.cat("zh_1000", "call_t4_zh1000a")),
                tools(d.cat("en_2000", "call_t4_en2000a")),
                tools(d.cat("zh_1200", "call_t4_zh1200a")),
                tools(d.cat("en_3000", "call_t4_en3000b")),
                tools(d.cat("zh_1000", "call_t4_zh1000b")),
                tools(d.cat("en_2000", "call_t4_en2000b")),
                tools(d.cat("zh_1200", "call_t4_zh1200b")),
                tools(d.cat("en_3000", "call_t4_en3000c")),
                tools(d.cat("zh_1000", "call_t4_zh1000c")),
                tools(d.cat("en_3000", "call_t4_en3000d")),
                tools(d.cat("zh_1200", "call_t4_zh1200d")),
                tools(*small),
                say("T3-DONE: the reports agree and all files are checked."),
            ],
            "T3-DONE",
        ),
        Turn(
            "One last check after all that: the small log again, and the first English report.",
            [
                tools(d.cat("en_200", "call_t5_en200")),
                read_back("call_t1_en5000", "call_t5_read_en5000"),
                say("T5-DONE: everything is consistent."),
            ],
            "T5-DONE",
        ),
    ]


ORIGINAL_OF = {  # call id -> document it prints (terminal cat)
    "call_t1_en200": "en_200",
    "call_t1_en800": "en_800",
    "call_t1_en5000": "en_5000",
    "call_t1_zh3000": "zh_3000",
    "call_t1_en2000": "en_2000",
    "call_t2_zh200": "zh_200",
    "call_t2_zh800": "zh_800",
    "call_t2_zh12000": "zh_12000",
    "call_t2_zh16000": "zh_16000",
    "call_t2_zh1200": "zh_1200",
    "call_t3_en12000": "en_12000",
    "call_t3_en30000": "en_30000",
    "call_t3_en48000": "en_48000",
    "call_t3_en3000": "en_3000",
    "call_t4_en3000a": "en_3000",
    "call_t4_zh1000a": "zh_1000",
    "call_t4_en2000a": "en_2000",
    "call_t4_zh1200a": "zh_1200",
    "call_t4_en3000b": "en_3000",
    "call_t4_zh1000b": "zh_1000",
    "call_t4_en2000b": "en_2000",
    "call_t4_zh1200b": "zh_1200",
    "call_t4_en3000c": "en_3000",
    "call_t4_zh1000c": "zh_1000",
    "call_t4_en3000d": "en_3000",
    "call_t4_zh1200d": "zh_1200",
    "call_t5_en200": "en_200",
}


@pytest.fixture(scope="module")
def long_session(
    tmp_path_factory: pytest.TempPathFactory, gateway: GatewayProcess, docs: Docs
) -> Iterator[LongSession]:
    tmp = tmp_path_factory.mktemp("long")
    with FakeLLM() as fake:
        agent = ToolAgent(fake, aside=is_background_review)
        home = make_home(tmp, fake, gateway)
        runs: list[subprocess.CompletedProcess[str]] = []
        marks: list[int] = []
        session_id = ""
        seen: list[str] = []
        calls = 0
        for turn in long_session_turns(docs):
            marks.append(agent.mark())
            agent.push(*turn.steps)
            calls += sum(
                len(s.get("tool_calls", [])) if isinstance(s, dict) else 1 for s in turn.steps
            )
            run, _ = chat(home, turn.prompt, resume=session_id or None)
            runs.append(run)
            assert_clean(run, turn.reply)
            assert agent.pending() == 0, f"the model's script was not consumed: {turn.prompt}"
            seen.append(session_of(run))
            session_id = session_id or seen[-1]
        # Kept beside the Hermes home: what the model received, to read when a test fails.
        with (tmp / "requests.jsonl").open("w", encoding="utf-8") as fh:
            for req in agent.main_requests():
                fh.write(json.dumps(req, ensure_ascii=False) + "\n")
        originals = {cid: docs.result(name) for cid, name in ORIGINAL_OF.items()}
        reads = {
            "call_t2_read_zh3000": "call_t1_zh3000",
            "call_t3_read_en12000": "call_t3_en12000",
            "call_t5_read_en5000": "call_t1_en5000",
        }
        yield LongSession(
            home, agent, docs, session_id, seen, runs, originals, reads, marks, calls, home.scope()
        )


def test_long_session_has_30_tool_calls_over_turns_and_one_session(long_session: LongSession):
    s = long_session
    assert s.calls >= 30
    assert len(s.turn_marks) >= 4
    # Every one-shot run resumed the same Hermes session (also after the compaction).
    assert set(s.sessions_seen) == {s.session_id}, s.sessions_seen
    # The switch did what it says: the engine is ours and the read tool is offered.
    cfg = yaml.safe_load((s.home.root / "config.yaml").read_text("utf-8"))
    assert cfg["context"]["engine"] == "memory_tencentdb", cfg
    assert READ_TOOL in tool_names(s.agent.main_requests()[0])


def test_every_request_stays_within_the_budget(long_session: LongSession):
    over = []
    for i, req in enumerate(long_session.agent.main_requests()):
        n = prompt_tokens(req)
        if n > BUDGET:
            over.append((i, n, len(req.get("messages") or [])))
    assert not over, f"requests over the {BUDGET}-token budget (index, tokens, messages): {over}"


def test_large_results_arrive_as_stubs_small_ones_verbatim(long_session: LongSession):
    s = long_session
    reqs = s.agent.main_requests()
    first_seen: dict[str, str] = {}
    for req in reqs:
        for m in req.get("messages") or []:
            cid = str(m.get("tool_call_id"))
            if m.get("role") == "tool" and cid not in first_seen:
                first_seen[cid] = text_of(m.get("content"))
    stubbed = 0
    for cid, original in s.originals.items():
        assert cid in first_seen, f"{cid}: its result never reached the model"
        got = first_seen[cid]
        tokens = count_tokens(original)
        if tokens > KEEP_TOKENS:
            assert got != original and is_stub(got), (cid, tokens, got[:300])
            assert count_tokens(got) < 400, (cid, got)
            assert cid in got  # the stub names the call it stands for
            stubbed += 1
        elif tokens <= KEEP_TOKENS // 2:
            assert got == original, (cid, got[:300])
    assert stubbed >= 7
    # A large original never reaches the model, in any request.
    for req in reqs:
        for m in req.get("messages") or []:
            cid = str(m.get("tool_call_id"))
            big = cid in s.originals and count_tokens(s.originals[cid]) > KEEP_TOKENS
            if m.get("role") == "tool" and big:
                assert text_of(m.get("content")) != s.originals[cid], cid


def test_exactly_one_canvas_message_per_request(long_session: LongSession):
    every = long_session.agent.main_requests()
    assert max(len(canvas_messages(r)) for r in every) <= 1
    # The calls of the user's turns; Hermes's background review fork (its own prompt, after a
    # busy turn, when it gets to run before the process exits) is held to the budget only.
    reqs = [r for r in every if not is_background_review(r)]
    counts = [len(canvas_messages(r)) for r in reqs]
    # From the first tool result of the session on, the model sees the task canvas every call.
    first = next(i for i, r in enumerate(reqs) if tool_ids(r))
    missing = [i for i, c in enumerate(counts) if i >= first and c != 1]
    assert not missing, f"requests without the canvas message: {missing} of {len(reqs)}"
    for r in reqs[first:]:
        msgs = r["messages"]
        canvas = canvas_messages(r)[0]
        last_user = max(
            i for i, m in enumerate(msgs) if m.get("role") == "user" and m is not canvas
        )
        # near the end: just before the newest user message, or after it (later in the turn)
        assert msgs.index(canvas) >= last_user - 1, [m.get("role") for m in msgs]


def test_read_tool_gives_the_byte_exact_original(long_session: LongSession):
    s = long_session
    reqs = s.agent.main_requests()
    for read_id, target in s.reads.items():
        answered = [tool_message(r, read_id) for r in reqs if tool_message(r, read_id)]
        assert answered, f"{read_id}: the read call never got an answer"
        content = text_of(answered[0]["content"])
        assert content == s.originals[target], (read_id, content[:300])
        # The model followed the stub: it asked with the arguments the stub gave.
        served = [rep for _, rep in s.agent.served if rep.get("tool_calls")]
        asked = [c for rep in served for c in rep["tool_calls"] if c["id"] == read_id]
        assert asked, read_id
        args = asked[0]["arguments"]
        assert len(args) == 1 and args.get("tool_call_id", target) == target, args


def test_transcript_holds_stubs_and_no_result_is_lost(long_session: LongSession, gateway):
    s = long_session
    rows = transcript(s.home, s.session_id)
    tool_rows: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row["role"] == "tool":
            tool_rows.setdefault(str(row["tool_call_id"]), []).append(row)
    for cid, original in s.originals.items():
        assert cid in tool_rows, f"{cid}: no tool row in state.db"
        stored = tool_rows[cid][0]["content"]
        if count_tokens(original) > KEEP_TOKENS:
            assert stored != original and is_stub(stored), (cid, stored[:300])
            # never lost: the gateway gives the original back, byte for byte
            assert read_original(gateway, s.scope, cid) == original, cid
        else:
            assert stored == original or is_stub(stored), (cid, stored[:300])
    # The read-backs are kept whole in the transcript (never offloaded themselves).
    for read_id, target in s.reads.items():
        assert tool_rows[read_id][0]["content"] == s.originals[target], read_id


COMPACTION_LINE = re.compile(
    r"offload compaction of session (\S+): (\d+) -> (\d+) messages \(level (\w+), ~(\S+) tokens"
)


def test_compaction_through_the_engine_keeps_session_and_budget(long_session: LongSession):
    s = long_session
    rows = transcript(s.home, s.session_id)
    compacted = [r for r in rows if r.get("compacted")]
    assert compacted, "no compaction happened in the session (no compacted rows in state.db)"
    # It was our engine (the gateway's /offload/assemble list); it folded older turns at least
    # once, and never compacted for nothing: a compaction at level "none" (the gateway shortened
    # nothing) or the same answer twice in a row still makes Hermes rewrite the whole transcript
    # into state.db and cross a compression boundary.
    done = COMPACTION_LINE.findall(s.home.provider_log())
    assert done, s.home.provider_log()[-3000:]
    assert all(sid == s.session_id for sid, *_ in done), done
    assert any(int(after) < int(before) for _, before, after, _, _ in done), done
    assert all(level != "none" for *_, level, _ in done), done
    assert all(a != b for a, b in zip(done, done[1:], strict=False)), done
    # The live transcript is the engine's list: the session's own messages (kept or stubbed),
    # no summary written by Hermes's built-in compressor, every tool row one the model asked for.
    active = [r for r in rows if r.get("active")]
    asked = {c["id"] for _, rep in s.agent.served for c in rep.get("tool_calls") or []}
    for r in active:
        text = r["content"] or ""
        assert "[CONTEXT COMPACTION" not in text and "[CONTEXT SUMMARY]" not in text, text[:300]
        if r["role"] == "tool":
            assert r["tool_call_id"] in asked, r["tool_call_id"]
    # The request after the compaction and every later one fit the budget, and later turns ran.
    reqs = s.agent.main_requests()
    # "After" = the first turn's request is no longer a message of its own. Not a search for
    # its words: the task canvas names its goal with them ("Goal: Please look at ..."), and
    # where the canvas sits (index 1 after a fold, further down otherwise) depends on whether
    # the last turn folded again, which the load on the machine decides (stop 37).
    first_user = "Please look at the build logs"
    after = [i for i, r in enumerate(reqs) if not has_user_message(r, first_user)]
    assert after, "no request after the compaction"
    assert all(prompt_tokens(reqs[i]) <= BUDGET for i in after)
    before_last_turn = [i for i in range(s.turn_marks[-1], len(reqs)) if i not in after]
    assert not before_last_turn, before_last_turn
    assert "T5-DONE" in s.runs[-1].stdout
    # The turn after the compaction still used its tools and read back an old result.
    assert any(tool_message(r, "call_t5_read_en5000") for r in reqs[s.turn_marks[-1] :])


def has_user_message(request: dict[str, Any], start: str) -> bool:
    """Whether a user message of ``request`` begins with ``start`` (the canvas block and the
    history note are user messages too, but begin with their tags)."""
    return any(
        m.get("role") == "user" and text_of(m.get("content")).startswith(start)
        for m in request.get("messages") or []
    )


# --- offload off: nothing changes ---------------------------------------------------------

PRE_FEATURE_COMMIT = "321b0b9"  # hermes_plugin/ before the offload seams (issue 10)


def short_script(d: Docs) -> list[Any]:
    return [
        tools(d.cat("en_200", "call_off_en200")),
        tools(d.cat("zh_16000", "call_off_zh16000"), d.cat("en_12000", "call_off_en12000")),
        say("OFF-DONE"),
    ]


# The memory tools guide goes to the system prompt when the gateway answers the prompt's recall
# within a second, else to the first turn's recalled context (hermes_plugin/provider.py): a loaded
# machine decides which, offload or not (seen once in a three-worker run).
TOOL_GUIDE = re.compile(r"\n\n<memory-tools-guide>.*?</memory-tools-guide>", re.S)
EMPTY_CONTEXT = re.compile(r"\n\n<memory-context>\n\[System note:[^\n]*\]\n</memory-context>")


def without_tool_guide(text: str) -> str:
    return EMPTY_CONTEXT.sub("", TOOL_GUIDE.sub("", text))


def normalise(request: dict[str, Any], home: HermesHome) -> str:
    """A request body without what differs between two runs by nature (paths, ids, times, where
    the tool guide landed)."""
    body = {k: v for k, v in request.items() if not k.startswith("_")}
    body["messages"] = [
        {**m, "content": without_tool_guide(m["content"])}
        if isinstance(m.get("content"), str)
        else m
        for m in body.get("messages", [])
    ]
    text = json.dumps(body, ensure_ascii=False, sort_keys=True)
    text = text.replace(str(home.root), "<HOME>")
    text = re.sub(r"\d{8}_\d{6}_[0-9a-f]{6}", "<SESSION>", text)
    text = re.sub(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?(\.\d+)?", "<TIME>", text)
    text = re.sub(r"hermes:[A-Za-z0-9_.:-]+", "<SCOPE>", text)
    return text


def old_plugin(tmp: Path) -> Path:
    """The provider as it was before the offload seams (git), or skip when not in a checkout."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: cannot compare with the provider before offload")
    out = tmp / "old"
    out.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PRE_FEATURE_COMMIT, "hermes_plugin"],
        capture_output=True,
        check=True,
    )
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive.stdout, check=True)
    return out / "hermes_plugin"


def run_short(home: HermesHome, agent: ToolAgent, d: Docs) -> list[dict[str, Any]]:
    start = agent.mark()
    agent.push(*short_script(d))
    run, _ = chat(home, "Check the logs, please. 请检查日志。")
    assert_clean(run, "OFF-DONE")
    return agent.main_requests()[start:]


def test_offload_off_sends_what_hermes_sent_before(tmp_path, gateway, docs, llm):
    agent = ToolAgent(llm)
    # A user who had switched offload on, then off again. The same home directory serves both
    # runs below, so paths in the system prompt are the same.
    home = make_home(tmp_path, llm, gateway, offload=True)
    switch_offload(home, False)
    off = run_short(home, agent, docs)
    cfg = yaml.safe_load((home.root / "config.yaml").read_text("utf-8"))
    assert (cfg.get("context") or {}).get("engine") != "memory_tencentdb", cfg
    for req in off:
        assert not canvas_messages(req)
        assert READ_TOOL not in tool_names(req)
        for cid, name in (
            ("call_off_en200", "en_200"),
            ("call_off_zh16000", "zh_16000"),
            ("call_off_en12000", "en_12000"),
        ):
            m = tool_message(req, cid)
            if m is not None:
                assert text_of(m["content"]) == docs.result(name), cid
        assert "memory_tencentdb_offload_read" not in json.dumps(
            req["messages"], ensure_ascii=False
        )

    # The provider before the feature, same home, fresh transcript: the very same requests.
    plugin = home.root / "plugins" / "memory_tencentdb"
    plugin.unlink()
    plugin.symlink_to(old_plugin(tmp_path))
    (home.root / "state.db").unlink()
    before = run_short(home, agent, docs)
    assert len(before) == len(off)
    for a, b in zip(off, before, strict=True):
        assert normalise(a, home) == normalise(b, home)


# --- the gateway down, slow, broken -------------------------------------------------------


def degraded_script(d: Docs) -> list[Any]:
    return [
        tools(d.cat("en_12000", "call_dg_en12000")),
        tools(d.cat("zh_3000", "call_dg_zh3000"), d.cat("en_200", "call_dg_en200")),
        say("DEGRADED-DONE"),
    ]


DEGRADED_CALLS = {
    "call_dg_en12000": "en_12000",
    "call_dg_zh3000": "zh_3000",
    "call_dg_en200": "en_200",
}


def run_degraded(
    home: HermesHome, agent: ToolAgent, d: Docs, **env: str
) -> tuple[list[dict], float]:
    start = agent.mark()
    agent.push(*degraded_script(d))
    run, wall = chat(home, "Check two logs. 看两个日志。", **env)
    assert_clean(run, "DEGRADED-DONE")
    return agent.main_requests()[start:], wall


def assert_originals(reqs: list[dict[str, Any]], d: Docs) -> None:
    for cid, name in DEGRADED_CALLS.items():
        got = [tool_message(r, cid) for r in reqs if tool_message(r, cid)]
        assert got, cid
        assert all(text_of(m["content"]) == d.result(name) for m in got), cid


def seam_bound(reqs: list[dict[str, Any]]) -> float:
    """What the seams may add to one run at most: each call waits at most its deadline."""
    api_calls = len(reqs)
    tool_calls = len(DEGRADED_CALLS)
    return (
        tool_calls * DEADLINES["offload_tool_timeout_s"]
        + api_calls * DEADLINES["offload_request_timeout_s"]
        + api_calls * DEADLINES["offload_compress_timeout_s"]
    )


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, gateway, docs) -> float:
    """Wall time of the degraded script with the gateway up and offload on."""
    tmp = tmp_path_factory.mktemp("baseline")
    with FakeLLM() as fake:
        agent = ToolAgent(fake)
        home = make_home(tmp, fake, gateway, **DEADLINES)
        reqs, wall = run_degraded(home, agent, docs)
        assert any(
            is_stub(text_of((tool_message(r, "call_dg_en12000") or {}).get("content")))
            for r in reqs
        ), "offload was not on in the baseline run"
        return wall


# Recall and capture have their own budgets; keep them short so they do not hide the seams.
FAST_RECALL = {
    "MEMORY_TENCENTDB_RECALL_BUDGET_S": "0.5",
    "MEMORY_TENCENTDB_FIRST_TURN_BUDGET_S": "1",
}
SLACK_S = 20.0  # process start-up and a loaded 2-core machine: generous on purpose


def test_gateway_down_turns_complete_with_original_results(tmp_path, gateway, docs, llm, baseline):
    agent = ToolAgent(llm)
    home = make_home(tmp_path, llm, gateway, port=free_port(), **DEADLINES)
    reqs, wall = run_degraded(home, agent, docs, **FAST_RECALL)
    assert_originals(reqs, docs)
    assert not any(canvas_messages(r) for r in reqs)
    assert wall <= baseline + seam_bound(reqs) + 1.0 + SLACK_S, (wall, baseline)


def test_gateway_slow_past_every_deadline(tmp_path, gateway, docs, llm, baseline):
    agent = ToolAgent(llm)
    # 15 s: far past every deadline, so a seam that waited for the answer would cost 15 s a call
    with FaultProxy(gateway.base_url, mode="slow", delay_s=15.0) as proxy:
        home = make_home(tmp_path, llm, gateway, port=proxy.port, **DEADLINES)
        reqs, wall = run_degraded(home, agent, docs, **FAST_RECALL)
        assert_originals(reqs, docs)
        # the seams did try the gateway (and gave up at their deadlines)
        assert proxy.tried("/offload/"), proxy.arrivals
    # Recall 1 s (first turn) + each seam at most its deadline, on top of the baseline.
    assert wall <= baseline + seam_bound(reqs) + 1.0 + SLACK_S, (wall, baseline, seam_bound(reqs))


def test_gateway_answering_500(tmp_path, gateway, docs, llm, baseline):
    agent = ToolAgent(llm)
    with FaultProxy(gateway.base_url, mode="error") as proxy:
        home = make_home(tmp_path, llm, gateway, port=proxy.port, **DEADLINES)
        reqs, wall = run_degraded(home, agent, docs, **FAST_RECALL)
        assert_originals(reqs, docs)
        assert any(status == 500 for _, _, status in proxy.posts("/offload/")), proxy.seen
    assert wall <= baseline + seam_bound(reqs) + SLACK_S, (wall, baseline)
