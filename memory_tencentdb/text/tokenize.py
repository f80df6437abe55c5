"""Word tokens for full-text search, in Chinese and English.

FTS5's own tokenizers cannot split Chinese into words, so every text is cut with jieba's
``cut_for_search`` (which also emits sub-words: 川菜馆 → 川菜 / 菜馆 / 川菜馆) and stored
space-joined in an FTS5 column with the built-in ``unicode61`` tokenizer. Queries are built
from the same tokens, each one quoted, OR-ed together: nothing a user types can become FTS5
syntax, so a query can never fail to parse or widen beyond its words.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
import threading
from collections.abc import Iterable
from pathlib import Path

TOKENIZER_ID = "jieba-0.42-cut_for_search-v1"

# Function words that carry no meaning for recall, in both languages. Kept short on purpose:
# every word dropped here can never be matched by keyword search.
STOP_WORDS = frozenset(
    """
    的 了 在 是 我 有 和 就 不 人 都 一 一个 上 也 很 到 说 要 去 你 会 着 没有 看 好 自己 这
    他 她 它 们 那 吗 吧 呢 啊 呀 哦 嗯 什么 怎么 哪 哪里 哪些 为什么 吗 么 给 让 把 被 对 与 或
    我们 你们 他们 她们 这个 那个 这些 那些 还 又 而 及 以及 之 其 此 如何 能 可以 请 帮 帮我 一下
    a an the and or but if of to in on at by for with from as is are was were be been being
    do does did doing have has had having i me my mine we our you your he him his she her it
    its they them their this that these those what which who whom whose how why when where
    can could will would shall should may might must not no so than too very just about into
    over under again then there here any some all each both few more most other such only own
    same up down out off s t don please tell let lets
    """.split()
)

_WORD = re.compile(r"\w", re.UNICODE)
_lock = threading.Lock()
_jieba = None


def _load_jieba():
    """Import and initialise jieba once, with its cache in our own directory."""
    global _jieba
    if _jieba is not None:
        return _jieba
    with _lock:
        if _jieba is None:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            cache_dir = Path(
                os.environ.get("MEMORY_TENCENTDB_CACHE_DIR")
                or Path(tempfile.gettempdir()) / f"memory-tencentdb-{os.getuid()}"
            )
            try:
                cache_dir.mkdir(parents=True, exist_ok=True)
                jieba.dt.tmp_dir = str(cache_dir)
            except OSError:
                pass  # jieba falls back to the shared temp dir; only slower start-up.
            jieba.initialize()
            _jieba = jieba
    return _jieba


def warm_up() -> None:
    """Build jieba's dictionary now (about 0.5 s) rather than on the first request."""
    _load_jieba()


def tokens(text: str) -> list[str]:
    """All search tokens of ``text``, lower-cased, in order, punctuation dropped."""
    if not text:
        return []
    jieba = _load_jieba()
    out = []
    for tok in jieba.cut_for_search(text, HMM=True):
        tok = tok.strip().lower()
        if tok and _WORD.search(tok):
            out.append(tok)
    return out


def index_text(text: str) -> str:
    """The space-joined tokens stored in the FTS5 column for ``text``."""
    return " ".join(tokens(text))


def query_terms(text: str) -> list[str]:
    """Distinct meaningful tokens of a query: stop words and punctuation removed."""
    seen: dict[str, None] = {}
    for tok in tokens(text):
        if tok not in STOP_WORDS:
            seen.setdefault(tok, None)
    return list(seen)


def fts_query(terms: Iterable[str]) -> str | None:
    """An FTS5 MATCH expression that ORs quoted terms; ``None`` when nothing is left.

    Each term is wrapped in double quotes (embedded quotes doubled), so operators such as
    ``AND``, ``NEAR``, ``*``, ``:`` or parentheses typed by a user are matched as words.
    """
    quoted = ['"' + t.replace('"', '""') + '"' for t in terms if t]
    return " OR ".join(quoted) if quoted else None
