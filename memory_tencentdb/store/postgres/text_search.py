"""PostgreSQL's keyword index: a ``tsvector`` of the same jieba tokens SQLite's FTS5 holds,
built from the token list (no PostgreSQL parser or dictionary changes them), queried as an OR
of exact lexemes, ranked by BM25 with FTS5's constants (``PostgresStore.keyword_search``)."""

from __future__ import annotations

from collections.abc import Iterable

# PostgreSQL's limits on a tsvector: positions 1..16383, 256 per lexeme, 2 KiB per lexeme.
MAX_POS = 16383
MAX_POSITIONS = 255
MAX_LEXEME_BYTES = 2000
# FTS5's bm25() constants, so both backends rank and threshold keyword hits alike.
BM25_K1 = 1.2
BM25_B = 0.75


def tsvector_literal(tokens_text: str) -> str | None:
    """The tsvector of space-joined tokens, positions kept (for ``ts_rank``), as text input."""
    where: dict[str, list[int]] = {}
    for pos, tok in enumerate(tokens_text.split(), start=1):
        if pos > MAX_POS:
            break
        if len(tok.encode()) > MAX_LEXEME_BYTES:
            continue
        spots = where.setdefault(tok, [])
        if len(spots) < MAX_POSITIONS:
            spots.append(pos)
    if not where:
        return None
    return " ".join(
        "'" + tok.replace("\\", "\\\\").replace("'", "''") + "':" + ",".join(map(str, spots))
        for tok, spots in where.items()
    )


def tsquery_literal(terms: Iterable[str]) -> str | None:
    """An OR of the terms as exact lexemes (user-typed operators are just words)."""
    quoted = [
        "'" + t.replace("\\", "\\\\").replace("'", "''") + "'"
        for t in terms
        if t and len(t.encode()) <= MAX_LEXEME_BYTES
    ]
    return " | ".join(quoted) if quoted else None
