"""The Memory Hub page in a real headless Chromium against a real gateway with zh and en data.

Each test drives the page as a user would (clicks, forms, the confirm dialog) and checks what it
shows, and where it matters also the gateway's own answer over HTTP (a forgotten memory is gone
from ``POST /recall``, an edit is in ``GET /memories/{id}``). Screenshots of each view are kept
in tests/artifacts/hub/.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

import pytest

from tests.hub.conftest import (
    ALICE_SECRET,
    KEYS,
    RAW_LINE,
    TEAM_FACT,
    XSS_MEMORY,
    XSS_RESULT,
    login_link,
    shot,
)

pytestmark = pytest.mark.slow

VIEWPORT = {"width": 1280, "height": 860}


@pytest.fixture(scope="module")
def owner(hub_gateway: dict[str, Any], browser: Any) -> Iterator[dict[str, Any]]:
    """The owner's page, logged in by the link ``memory-tencentdb hub`` printed, scope alice.
    Every URL the page asked for is recorded (memory text must never be in one)."""
    gw = hub_gateway["gw"]
    context = browser.new_context(viewport=VIEWPORT)
    urls: list[str] = []
    context.on("request", lambda r: urls.append(r.url))
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(login_link(gw))
    page.wait_for_selector("#pyramid button")
    assert "#login=" not in page.url  # the token leaves the address bar at once
    page.select_option("#scope", "alice")
    page.wait_for_selector("#pyramid[data-scope=alice]")
    yield {"page": page, "gw": gw, "urls": urls, "errors": errors, "hub": hub_gateway}
    assert not errors, errors
    context.close()


def tab(page: Any, view: str) -> None:
    page.click(f"#tabs [data-view={view}]")


def explain(page: Any, message: str) -> None:
    tab(page, "recall")
    page.fill("#recall-q", message)
    page.click("#recall-form button")
    page.wait_for_selector("#recall-verdict")


def test_pyramid_and_trace_from_persona_down_to_raw_messages(owner: dict[str, Any]) -> None:
    page = owner["page"]
    tab(page, "pyramid")
    page.wait_for_selector("#pyramid[data-scope=alice]")
    layers = page.locator("#pyramid button").all_inner_texts()
    assert layers[0].startswith("L3 persona · 1")
    assert layers[1].startswith("L2 scenes · 1")
    assert "L1 memories · 4" in layers[2]
    assert "2 sessions, 8 messages" in layers[3]
    # Persona (L3) -> the scene it was built from (L2) -> a memory (L1) -> its raw messages (L0).
    page.click("[data-layer=persona]")
    persona = page.inner_text("#persona-text")
    assert "Munich" in persona and "花生" in persona
    page.click("#scene-list li >> nth=0")
    page.wait_for_selector("#scene-memories li")
    assert page.locator("#scene-memories li").count() == 4
    page.click("#scene-memories li:has-text('花生')")
    page.wait_for_selector("#trace .msg")
    trace = page.inner_text("#trace")
    assert "我对花生过敏，吃了会起疹子。" in trace and "user · s-zh" in trace
    shot(page, "pyramid-trace")
    # L0: the sessions, then one session's raw messages.
    page.click("[data-layer=conversations]")
    page.wait_for_selector("#session-list li")
    assert page.locator("#session-list li").count() == 2
    page.click("#session-list li:has-text('s-en')")
    page.wait_for_selector("#detail .msg")
    assert "I am training for the Berlin marathon in September." in page.inner_text("#detail")
    shot(page, "conversations")


def test_search_memories_and_conversations_with_filters(owner: dict[str, Any]) -> None:
    page = owner["page"]
    tab(page, "search")
    page.fill("#search-q", "咖啡")
    page.click("#search-form button")
    page.wait_for_selector("#search-meta")
    assert "用户每天早上喝两杯咖啡。" in page.inner_text("#search-list")
    shot(page, "search")
    page.select_option("#search-kind", "conversations")
    page.fill("#search-q", "marathon")
    page.fill("#search-session", "s-en")
    page.click("#search-form button")
    page.locator("#search-list li", has_text="marathon").first.wait_for()
    # A session filter that matches nothing, and a time filter in the future: no results.
    page.fill("#search-session", "no-such-session")
    page.click("#search-form button")
    page.locator("#search-meta", has_text=re.compile("^0 results")).wait_for()
    page.fill("#search-session", "")
    page.select_option("#search-kind", "memories")
    page.fill("#search-q", "咖啡")
    page.fill("#search-since", "2999-01-01")
    page.click("#search-form button")
    page.locator("#search-meta", has_text=re.compile("^0 results")).wait_for()
    page.fill("#search-since", "")


def test_recall_explained_for_a_query_that_injects_and_one_that_does_not(
    owner: dict[str, Any],
) -> None:
    page = owner["page"]
    explain(page, "我能吃花生酱吗？")
    assert page.inner_text("#recall-verdict").startswith("1 memory injected")
    assert "花生" in page.inner_text("#recall-prepend")
    injected = page.locator(".cand[data-verdict=injected]")
    assert injected.count() == 1 and "花生" in injected.inner_text()
    assert "injected: stands out from its background: relevance" in injected.inner_text()
    cut = page.locator(".cand[data-verdict=cut]")
    assert cut.count() == 3 and "cut: relevance" in cut.first.inner_text()
    tokens = re.findall(r"(\d+) tokens", page.inner_text("#recall-out"))
    assert len(tokens) == 2 and all(int(t) > 0 for t in tokens)
    assert "<user-persona>" in page.inner_text("#recall-system")
    shot(page, "recall-injects", full=True)

    explain(page, "What year did the Berlin Wall fall?")
    assert page.inner_text("#recall-verdict").startswith("nothing injected")
    assert page.inner_text("#recall-prepend") == "(empty)"
    assert page.locator(".cand[data-verdict=injected]").count() == 0
    assert page.locator(".cand[data-verdict=cut]").count() == 4
    assert "cut: a question about the world" in page.locator(".cand").first.inner_text()
    shot(page, "recall-cut", full=True)


def _open_memory(page: Any, text: str) -> None:
    tab(page, "pyramid")
    page.click("[data-layer=memories]")
    page.wait_for_selector(f".memory-list li:has-text('{text}')")
    page.click(f".memory-list li:has-text('{text}') >> span >> nth=2")
    page.wait_for_selector("#memory-content")


def test_edit_then_history_then_restore(owner: dict[str, Any]) -> None:
    page, gw = owner["page"], owner["gw"]
    memory = owner["hub"]["memories"]["alice"]["用户每天早上喝两杯咖啡。"]
    _open_memory(page, "两杯咖啡")
    page.click("#edit")
    page.fill("#edit-text", "我每天早上只喝一杯咖啡。")
    page.click("#save")
    page.locator("#memory-content", has_text="一杯").wait_for()
    history = page.inner_text("#history")
    assert "用户每天早上喝两杯咖啡。" in history and "superseded" in history
    shot(page, "edit-history")
    with gw.client() as c:
        now = c.get(f"/memories/{memory['id']}", params={"scope": "alice"}).json()
    assert now["content"] == "我每天早上只喝一杯咖啡。"
    assert [h["content"] for h in now["trace"]["history"]] == ["用户每天早上喝两杯咖啡。"]
    # Restore the old text: a new version again, the edited one kept in the history.
    page.click("#history li:has-text('两杯') .restore")
    page.locator("#memory-content", has_text="两杯").wait_for()
    assert "一杯" in page.inner_text("#history")


def test_forget_removes_the_memory_from_recall_at_once(owner: dict[str, Any]) -> None:
    page, gw = owner["page"], owner["gw"]
    explain(page, "Where do I live?")
    assert "Munich" in page.inner_text("#recall-prepend")
    _open_memory(page, "Munich")
    page.click("#forget")
    page.wait_for_selector("#confirm[open] #forget-preview li")
    assert "The user lives in Munich" in page.inner_text("#forget-preview")
    shot(page, "forget-preview")
    page.click("#confirm-ok")
    page.wait_for_selector("#forgotten")
    explain(page, "Where do I live?")
    assert "Munich" not in page.inner_text("#recall-out")
    with gw.client() as c:
        r = c.post(
            "/recall", json={"query": "Where do I live?", "session_key": "x", "scope": "alice"}
        ).json()
    assert "Munich" not in json.dumps(r)


def test_canvas_is_an_svg_diagram_whose_node_shows_the_raw_result(owner: dict[str, Any]) -> None:
    page = owner["page"]
    tab(page, "offload")
    page.wait_for_selector("#offload-list li")
    assert "task-1" in page.inner_text("#offload-list")
    bars = page.locator("#token-chart rect")
    assert bars.count() == 2  # verbatim and sent, one session
    sent, verbatim = (
        int(x) for x in re.findall(r"(\d+) / (\d+)", page.locator("#token-chart").text_content())[0]
    )
    assert 0 < sent < verbatim
    page.click(".canvas-link >> nth=0")
    page.wait_for_selector("#canvas-svg svg g.node", timeout=20000)
    assert page.locator("#canvas-svg svg g.node").count() == 2
    page.click("#canvas-svg g.node >> nth=0")
    page.wait_for_selector("#node-raw")
    assert RAW_LINE in page.inner_text("#node-raw")
    assert "bash" in page.inner_text(".node-row")
    page.locator("#toast.show").wait_for(state="hidden")  # the last test's "forgot 1"
    page.wait_for_timeout(500)  # and its fade-out
    shot(page, "offload-canvas", full=True)


def test_health_and_team_scopes(owner: dict[str, Any]) -> None:
    page = owner["page"]
    tab(page, "health")
    page.wait_for_selector("#health-status")
    text = page.inner_text("#health-out")
    with owner["gw"].client() as c:
        backend = c.get("/health").json()["store"]["backend"]  # sqlite, or postgres in CI's 2nd run
    assert "Status:" in text and backend in text and "embedding backlog" in text
    shot(page, "health")
    tab(page, "teams")
    page.wait_for_selector("#teams-table")
    row = page.inner_text("#teams-table")
    assert "team:ops" in row and "alice" in row and "bob" in row
    shot(page, "teams")


def test_mutation_without_the_csrf_token_is_refused(owner: dict[str, Any]) -> None:
    page, gw = owner["page"], owner["gw"]
    memory = owner["hub"]["memories"]["alice"]["用户对花生过敏，吃了会起疹子。"]
    call = """async ([id, token]) => {
        const headers = {"Content-Type": "application/json"};
        if (token) headers["X-CSRF-Token"] = token;
        const r = await fetch(`/memories/${id}`, {method: "PATCH", headers,
            body: JSON.stringify({content: "hacked", scope: "alice"})});
        return [r.status, (await r.json()).error];
    }"""
    for token in (None, "wrong-token"):
        status, error = page.evaluate(call, [memory["id"], token])
        assert status == 403 and "CSRF" in error
    forget = page.evaluate(
        """async (id) => (await fetch("/memories/forget", {method: "POST",
            headers: {"Content-Type": "application/json"},
            body: JSON.stringify({ids: [id], scope: "alice", dry_run: false})})).status""",
        memory["id"],
    )
    assert forget == 403
    with gw.client() as c:
        now = c.get(f"/memories/{memory['id']}", params={"scope": "alice"}).json()
    assert now["content"] == memory["content"] and now["status"] == "active"


def test_forget_a_selection_shows_what_goes_first(owner: dict[str, Any]) -> None:
    page, gw = owner["page"], owner["gw"]
    tab(page, "pyramid")
    page.click("[data-layer=memories]")
    page.wait_for_selector(".memory-list li:has-text('marathon')")
    page.check(".memory-list li:has-text('marathon') input[type=checkbox]")
    page.check(".memory-list li:has-text('咖啡') input[type=checkbox]")
    page.click("#forget-selected")
    page.wait_for_selector("#confirm[open] #forget-preview li")
    preview = page.inner_text("#forget-preview")
    assert page.locator("#forget-preview li").count() == 2
    assert "marathon" in preview and "咖啡" in preview and "花生" not in preview
    page.click("#confirm-ok")
    page.wait_for_selector("#forgotten")
    with gw.client() as c:
        left = c.get("/memories", params={"scope": "alice"}).json()["items"]
    assert [m["content"] for m in left] == ["用户对花生过敏，吃了会起疹子。"]


def test_principal_without_read_permission_sees_none_of_another_scope(
    hub_gateway: dict[str, Any], browser: Any, owner: dict[str, Any]
) -> None:
    """bob logs in with his key (the form) and walks every view; neither the page nor any JSON
    it loaded holds alice's data, and asking for her scope directly is a 403."""
    gw = hub_gateway["gw"]
    context = browser.new_context(viewport=VIEWPORT)
    bodies: list[str] = []

    def keep(response: Any) -> None:
        if "json" in (response.headers.get("content-type") or ""):
            with contextlib.suppress(Exception):  # a body the browser already dropped
                bodies.append(response.text())

    context.on("response", keep)
    page = context.new_page()
    page.goto(f"{gw.base_url}/hub/")
    page.wait_for_selector("#login-form")
    page.fill("#login-key", KEYS["bob"])
    page.click("#login-form button")
    page.wait_for_selector("#pyramid button")
    assert page.inner_text("#who") == "bob"
    options = page.locator("#scope option").evaluate_all("os => os.map(o => o.value)")
    assert sorted(options) == ["bob", "team:ops"]
    for view in ("pyramid", "offload", "health", "teams"):
        tab(page, view)
        page.wait_for_timeout(300)
    tab(page, "pyramid")
    page.click("[data-layer=memories]")
    page.wait_for_selector(".memory-list li")
    # Text that looks like markup is shown as text: in a list, a memory, a canvas, a raw result.
    assert XSS_MEMORY in page.inner_text(".memory-list")
    page.click(".memory-list li:has-text('Bob 的笔记') >> span >> nth=2")
    page.wait_for_selector("#memory-content")
    assert page.inner_text("#memory-content") == XSS_MEMORY
    tab(page, "offload")
    page.click(".canvas-link >> nth=0")
    page.wait_for_selector("#canvas-svg svg g.node", timeout=20000)
    assert "onerror" in page.inner_text("#canvas-svg") or "img src" in page.inner_text(
        "#canvas-svg"
    )
    page.click("#canvas-svg g.node >> nth=0")
    page.wait_for_selector("#node-raw")
    assert XSS_RESULT in page.inner_text("#node-raw")
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("#canvas-svg img, #detail img, #node-raw script").count() == 0
    tab(page, "search")
    page.fill("#search-q", "where does the user live, allergies, drinks")
    page.click("#search-form button")
    page.wait_for_selector("#search-meta")
    explain(page, "Where do I live? What am I allergic to?")
    page.select_option("#scope", "team:ops")
    explain(page, "staging frozen release week")
    assert TEAM_FACT in page.inner_text("#recall-out")  # bob reads the team scope
    shot(page, "principal-bob")
    direct = page.evaluate(
        """async () => {
            const me = await (await fetch("/hub/api/me")).json();
            const h = {"Content-Type": "application/json", "X-CSRF-Token": me.csrf};
            const get = async (u) => (await fetch(u)).status;
            const post = async (u, b) => (await fetch(u, {method: "POST", headers: h,
                body: JSON.stringify(b)})).status;
            return {
                pyramid: await get("/hub/api/pyramid?scope=alice"),
                memories: await get("/memories?scope=alice"),
                hub_memories: await get("/hub/api/memories?scope=alice"),
                conversations: await get("/hub/api/conversations?scope=alice"),
                offload: await get("/hub/api/offload/sessions?scope=alice"),
                search: await post("/hub/api/search", {query: "Munich", scope: "alice"}),
                explain: await post("/hub/api/recall-explain", {query: "Munich", scope: "alice"}),
                read: await post("/offload/read", {canvas: "001", scope: "alice"}),
                forget: await post("/memories/forget", {query: "Munich", scope: "alice"}),
            };
        }"""
    )
    assert direct == dict.fromkeys(direct, 403), direct
    everything = "\n".join(bodies) + page.content()
    for text in ("花生", "咖啡", ALICE_SECRET, "marathon", "test_parser", "s-zh"):
        assert text not in everything, text
    context.close()


def test_no_memory_text_in_urls_or_the_gateway_log(owner: dict[str, Any]) -> None:
    gw = owner["gw"]
    urls = unquote("\n".join(owner["urls"]))
    assert urls, "no request recorded"
    for text in ("花生", "咖啡", "Munich", "marathon", "Berlin", "Where"):
        assert text not in urls, text
    log = gw.log()
    for text in ("Where do I live", "花生酱", "Berlin Wall"):
        assert text not in log, text
