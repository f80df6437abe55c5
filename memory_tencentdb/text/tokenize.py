"""Word tokens for full-text search, in Chinese and English.

FTS5's own tokenizers cannot split Chinese into words, so every text is cut with jieba's
``cut_for_search`` (which also emits sub-words: 川菜馆 → 川菜 / 菜馆 / 川菜馆) and stored
space-joined in an FTS5 column with the built-in ``unicode61`` tokenizer. Queries are built
from the same tokens, each one quoted, OR-ed together: nothing a user types can become FTS5
syntax, so a query can never fail to parse or widen beyond its words.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

# rjieba is jieba's algorithm and dictionary in Rust (jieba-rs). Measured here: ready in
# ~0.1 s where Python jieba needs 0.5-4 s to load its dictionary (the gateway's cold start and
# first requests waited on it), 25x faster per text, half the memory. Same tokens except that
# hyphenated words also come out joined, which unicode61 splits again anyway.
TOKENIZER_ID = "rjieba-0.2-cut_for_search-v1"

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
_cut = None


def _load():
    """Import the tokenizer once (its dictionary loads at import)."""
    global _cut
    if _cut is None:
        with _lock:
            if _cut is None:
                import rjieba

                _cut = rjieba.cut_for_search
    return _cut


def warm_up() -> None:
    """Load the dictionary now rather than inside the first request."""
    _load()


def tokens(text: str) -> list[str]:
    """All search tokens of ``text``, lower-cased, in order, punctuation dropped."""
    if not text:
        return []
    out = []
    for tok in _load()(text, True):
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
