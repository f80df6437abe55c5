"""The text we embed for a stored row, which is not always the text we store.

L1 memories are written about the user in the third person: "用户每天跑步", "The user is
allergic to penicillin". The shared subject carries no information, yet it pulls every memory
vector toward the same point, so a query about running lands among all "用户…" memories
alike. Embedding the memory without its leading subject measurably sharpens recall (zero-overlap
set, hybrid R@5 0.688 → 0.781 together with centring; bench/results/recall_quality.md). The
stored text, the keyword index and what recall shows keep the original words.

The recipe version is part of the text hash that keys the stored vectors, so changing the rule
below re-embeds affected rows in the background instead of mixing recipes.
"""

from __future__ import annotations

import re

RECIPE = "l1-subject-strip-v2"

# Compounds such as 用户名 / 用户群 or "User ID" / "user interface" are not the subject.
_ZH_SUBJECT = re.compile(
    r"^\s*(?:该|这位|此)?用户(?!名|群|数|量|体验|画像|界面|协议|手册|端|侧|态|码|组)(?:的)?\s*"
)
_EN_SUBJECT = re.compile(
    r"^\s*(?:the\s+|this\s+)?user(?:'s|’s)?\s+(?!(?:interface|name|names|id|ids|base|agent|story|"
    r"stories|group|groups|account|accounts|experience|data|manual|guide|research|testing|input|"
    r"space|mode|session|profile)\b)",
    re.IGNORECASE,
)


def strip_subject(text: str) -> str:
    """``text`` without a leading generic subject ("用户", "The user('s)"); never empty."""
    stripped = _ZH_SUBJECT.sub("", text, count=1)
    if stripped == text:
        stripped = _EN_SUBJECT.sub("", text, count=1)
    return stripped.strip() or text


def l0_text(content: str, speaker: str = "") -> str:
    """An L0 message as it is indexed (keyword and vector): prefixed with its speaker's name when
    the host gave one, so a question naming a person finds that person's turns."""
    return f"{speaker}: {content}" if speaker else content


def for_embedding(layer: str, text: str) -> str:
    """What to embed for a row of ``layer`` ("l0" messages are embedded as they are)."""
    return strip_subject(text) if layer == "l1" else text


def hash_input(layer: str, text: str) -> str:
    """What the vector key hashes: the embedded text plus, for L1, the recipe."""
    return f"{RECIPE}\n{for_embedding(layer, text)}" if layer == "l1" else text
