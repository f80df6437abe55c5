"""``POST /offload/read`` in pages (issue 21, item 3): hosts cut long tool results, so an
original of any length is read back as consecutive pages that join to it byte for byte.

One gateway for the module, a scope per test. English, Chinese and text outside the BMP (a
page boundary never splits a character: offsets are code points); the continuation each page
names is followed literally; bad paging input is a 422 naming the field.
"""

from __future__ import annotations

import pytest

from tests.support.inprocess import InProcessGateway

EN = "\n".join(f"line {i}: PASSED tests/test_mod_{i % 17}.py::test_{i}" for i in range(700))
ZH = "\n".join(f"第{i}行：订单处理完成，耗时{i % 9}毫秒；数据库连接正常" for i in range(600))
MIXED = "".join(f"{i}😀𝒜中é-" for i in range(3000))  # astral, CJK, accented, ASCII


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory):
    g = InProcessGateway(tmp_path_factory.mktemp("paging") / "data").start()
    yield g
    g.stop()


@pytest.fixture
def client(gw: InProcessGateway):
    with gw.client() as c:
        yield c


def put(client, scope: str, call_id: str, text: str, session: str = "s1") -> dict:
    r = client.post(
        "/offload/tool-result",
        json={
            "session_key": session,
            "scope": scope,
            "tool_call_id": call_id,
            "tool_name": "bash",
            "arguments": {"command": f"cat {call_id}.log"},
            "result": text,
        },
    )
    assert r.status_code == 200, r.text
    return r.json()


def read_all(client, scope: str, first: dict, length: int) -> tuple[str, list[dict]]:
    """Follow each answer's continuation from the first call until the last page."""
    args = {**first, "length": length}
    pages: list[dict] = []
    while True:
        r = client.post("/offload/read", json={"scope": scope, "session_key": "s1", **args})
        assert r.status_code == 200, r.text
        page = r.json()
        pages.append(page)
        if page["next_offset"] is None:
            assert page["continuation"] is None
            break
        cont = page["continuation"]
        assert cont["tool"] == "memory_tencentdb_offload_read"
        assert cont["arguments"]["offset"] == page["next_offset"] == page["end"]
        args = cont["arguments"]
        assert len(pages) < 500
    field = "content" if pages[0]["kind"] == "tool_result" else "text"
    return "".join(p[field] for p in pages), pages


@pytest.mark.parametrize(("text", "length"), [(EN, 8000), (ZH, 3001), (MIXED, 997)])
def test_pages_join_to_the_original_exactly(client, scope, text, length):
    out = put(client, scope, "call_page_1", text)
    assert out["offloaded"] is True
    stub_last = out["replacement"].splitlines()[-1]
    assert "in pages" in stub_last and '"tool_call_id": "call_page_1"' in stub_last
    joined, pages = read_all(client, scope, {"tool_call_id": "call_page_1"}, length)
    assert joined == text
    assert joined.encode() == text.encode()
    assert len(pages) == -(-len(text) // length)
    for p in pages:
        assert p["total_chars"] == len(text)
        assert len(p["content"]) == p["end"] - p["offset"] <= length
    # Underscore-less ids (OpenClaw's) page the same way and name the stored id.
    again, _ = read_all(client, scope, {"tool_call_id": "callpage1"}, length)
    assert again == text


def test_without_length_the_whole_text_and_where_it_ends(client, scope):
    put(client, scope, "call_whole", ZH)
    r = client.post("/offload/read", json={"scope": scope, "tool_call_id": "call_whole"})
    body = r.json()
    assert body["content"] == ZH
    assert (body["offset"], body["end"], body["total_chars"]) == (0, len(ZH), len(ZH))
    assert body["next_offset"] is None and body["continuation"] is None
    tail = client.post(
        "/offload/read", json={"scope": scope, "tool_call_id": "call_whole", "offset": 100}
    ).json()
    assert tail["content"] == ZH[100:]
    at_end = client.post(
        "/offload/read", json={"scope": scope, "tool_call_id": "call_whole", "offset": len(ZH)}
    ).json()
    assert at_end["content"] == "" and at_end["next_offset"] is None


def test_result_ref_and_canvas_page_too(client, scope):
    out = put(client, scope, "call_ref", EN)
    joined, pages = read_all(client, scope, {"result_ref": out["ref"]}, 5000)
    assert joined == EN
    assert pages[0]["continuation"]["arguments"]["result_ref"] == out["ref"]
    whole = client.post(
        "/offload/read", json={"scope": scope, "session_key": "s1", "canvas": "active"}
    ).json()
    joined, pages = read_all(client, scope, {"canvas": "active"}, 40)
    assert joined == whole["text"] and len(pages) > 1
    # The next page names the file read, not "active" (which may move on between pages).
    assert pages[0]["continuation"]["arguments"]["canvas"] == whole["canvas"]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"offset": -1}, "offset"),
        ({"length": 0}, "length"),
        ({"offset": "10"}, "offset"),
        ({"offset": 10**6}, "offset"),
    ],
)
def test_bad_paging_is_a_422_naming_the_field(client, scope, extra, field):
    put(client, scope, "call_bad", EN)
    r = client.post("/offload/read", json={"scope": scope, "tool_call_id": "call_bad", **extra})
    assert r.status_code == 422, r.text
    assert field in r.text
    ok = client.post("/offload/read", json={"scope": scope, "tool_call_id": "call_bad"})
    assert ok.status_code == 200 and ok.json()["content"] == EN


def test_node_rows_are_not_paged(client, scope):
    out = put(client, scope, "call_node", EN)
    r = client.post("/offload/read", json={"scope": scope, "node_id": out["node_id"], "offset": 5})
    assert r.status_code == 422 and "offset" in r.text
    r = client.post("/offload/read", json={"scope": scope, "node_id": out["node_id"]})
    assert r.status_code == 200 and r.json()["kind"] == "node"
