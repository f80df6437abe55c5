"""Secrets never reach a file: API keys, tokens, private keys and stated passwords are replaced
by a marker before anything is written (L0, L1, offload refs).

The patterns look for shapes that are secrets by construction (a provider's key prefix and
length, a JWT's three base64url parts, a PEM private-key block) or for a value stated as a
password ("my password is ...", "密码是..."), so ordinary text that merely looks similar is kept: a
commit hash, a UUID, "the password policy". The marker names the kind, ``[REDACTED:api-key]``, so
a reader knows something was there.

One process-wide redactor: ``configure()`` is called by the engine from the settings
(``memory.redaction``); ``redact()`` is what writers call; ``stats()`` feeds ``/health``.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

# Values that follow "password is" in ordinary sentences ("the password is wrong").
_ORDINARY = frozenset(
    "wrong correct incorrect strong weak required expired changed invalid valid missing empty"
    " too not the a an same different set reset secure insecure long short ok fine here there"
    " below above unknown forgotten hidden".split()
)
_VALUE = r"[\"'“‘]?(?P<value>[^\s\"'“”‘’，。,;；、)）]{3,})"

# (kind, pattern). Order matters: wider shapes (PEM blocks, JWTs) before key prefixes.
_PATTERNS: list[tuple[str, str]] = [
    (
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    ),
    # A JWT starts only where no base64url character precedes it: with ``\b`` every "-eyJ" of
    # a long run was a new start scanning the rest of the run ("eyJ-" * 100k: ~55 s).
    ("jwt", r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}"),
    ("api-key", r"(?<![A-Za-z0-9])sk-(?:proj-|ant-(?:api\d\d-)?|live-)?[A-Za-z0-9_-]{20,}"),
    ("api-key", r"(?<![A-Za-z0-9])(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("github-token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("aws-key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"),
    ("api-key", r"\bAIza[0-9A-Za-z_-]{35}\b"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("bearer-token", r"(?i:\bbearer)\s+(?P<value>[A-Za-z0-9._~+/-]{20,}=*)"),
    (
        "secret",
        r"(?i:\b(?:api[_-]?key|apikey|secret(?:[_-]?key)?|access[_-]?token|auth[_-]?token"
        r"|client[_-]?secret|aws_secret_access_key|token))\s*[:=]\s*" + _VALUE,
    ),
    (
        "password",
        r"(?i:\b(?:password|passwd|passcode|passphrase|pwd|pin(?:\s+code)?)"
        r"(?:\s+(?:is|was|will\s+be|=)\s*|\s*[:=]\s*))" + _VALUE,
    ),
    (
        "password",
        r"(?:密码|口令|密钥|秘钥|支付密码|登录密码|验证码|暗号)\s*(?:是|为|改成了?|改为|设为|设置为|：|:|=)\s*"
        + _VALUE,
    ),
]


# Every pattern above needs one of these words, at or near its start: whether any occurs decides
# whether the patterns run at all (most text has none, and capture pays for this on every
# message). Found with ``str`` searches, not a regex: an alternation regex tried every position
# (30 MB of log: 15.9 s holding the GIL, so no other request was answered meanwhile).
_TRIGGER_WORDS = (
    "-----BEGIN", "eyJ", "sk-", "sk_", "rk_", "pk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
    "github_pat_", "AKIA", "ASIA", "ABIA", "ACCA", "AIza", "xox",
    "密码", "口令", "密钥", "秘钥", "验证码", "暗号",
)  # fmt: skip
_TRIGGER_FOLDED = ("bearer", "api", "key", "secret", "token", "pass", "pwd", "pin")
# Text longer than PIECE is redacted piece by piece (pieces end at a line end,
# or after a separator in a very long line): each regex call
# then holds the GIL for one piece only (~10-70 ms), other requests are answered between them,
# and pieces without a trigger word are not scanned. PEM blocks span lines, so that pattern
# (found by its literal start, fast) runs over the whole text first. What this gives up: a
# secret cut by a piece boundary (name and value on two lines, or a line of more than 256 KB
# without a separator, exactly there).
PIECE = 256 * 1024


def _has_trigger(text: str) -> bool:
    if any(w in text for w in _TRIGGER_WORDS):
        return True
    low = text.lower()
    return any(w in low for w in _TRIGGER_FOLDED)


def _soft_cut(text: str, end: int) -> int:
    """Where to cut one long line near ``end``: after a separator (``, `` ``; `` ``. `` or two
    spaces) in the 4 KB before it, so a ``name: value`` pair is not cut; else ``end``."""
    best = max(text.rfind(sep, end - 4096, end) for sep in (", ", "; ", ". ", "  "))
    return best + 2 if best > 0 else end


def _pieces(text: str) -> list[tuple[int, int]]:
    """``[start, end)`` spans of about PIECE characters covering ``text``, cut after a newline
    when there is one within 2 * PIECE (else at PIECE)."""
    spans, start, n = [], 0, len(text)
    while start < n:
        end = start + PIECE
        if end >= n:
            spans.append((start, n))
            break
        nl = text.find("\n", end, end + PIECE)
        end = nl + 1 if nl >= 0 else _soft_cut(text, end)
        spans.append((start, end))
        start = end
    return spans


class Redactor:
    def __init__(self, enabled: bool = True, extra_patterns: Iterable[str] = ()) -> None:
        self.enabled = enabled
        self.patterns = [(k, re.compile(p)) for k, p in _PATTERNS]
        self.extra = [("custom", re.compile(p)) for p in extra_patterns]
        self.patterns += self.extra
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def redact(self, text: str) -> str:
        if not self.enabled or not text or not isinstance(text, str):
            return text
        found: Counter[str] = Counter()
        if len(text) > PIECE:
            text = self._redact_pieces(text, found)
        elif self.extra or _has_trigger(text):
            text = self._redact_all(text, self.patterns, found)
        if found:
            with self._lock:
                self.counts.update(found)
        return text

    def _redact_all(self, text: str, patterns: list, found: Counter[str]) -> str:
        for kind, pattern in patterns:
            text = pattern.sub(lambda m, k=kind: self._replace(m, k, found), text)
        return text

    def _redact_pieces(self, text: str, found: Counter[str]) -> str:
        """Large text (see PIECE): PEM blocks over the whole text, the rest piece by piece."""
        text = self._redact_all(text, self.patterns[:1], found)
        out = []
        for start, end in _pieces(text):
            piece = text[start:end]
            if self.extra or _has_trigger(piece):
                piece = self._redact_all(piece, self.patterns[1:], found)
            out.append(piece)
        return "".join(out)

    @staticmethod
    def _replace(m: re.Match[str], kind: str, found: Counter[str]) -> str:
        marker = f"[REDACTED:{kind}]"
        if "value" not in (m.re.groupindex or {}):
            found[kind] += 1
            return marker
        value = m.group("value")
        if kind == "password" and value.lower().strip(".!") in _ORDINARY:
            return m.group(0)
        if kind == "secret" and len(value) < 8:  # "token: 5" is a number, not a secret
            return m.group(0)
        if value.startswith("[REDACTED:"):
            return m.group(0)
        found[kind] += 1
        start, end = m.span("value")
        base = m.start(0)
        whole = m.group(0)
        return whole[: start - base] + marker + whole[end - base :]

    def redact_obj(self, obj: Any) -> Any:
        """Every string inside a JSON-like value (tool-call arguments and the like), object
        keys included."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, list):
            return [self.redact_obj(v) for v in obj]
        if isinstance(obj, dict):
            # Keys too: a model can put a key where a name goes ({"sk-proj-…": "x"}). Two keys
            # redacted alike stay two entries (``[REDACTED:api-key]#2``): nothing is dropped.
            out: dict[Any, Any] = {}
            for k, v in obj.items():
                key = self.redact(k) if isinstance(k, str) else k
                if key != k and key in out:
                    n = 2
                    while f"{key}#{n}" in out:
                        n += 1
                    key = f"{key}#{n}"
                out[key] = self.redact_obj(v)
            return out
        return obj

    def stats(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self.counts)
        return {"enabled": self.enabled, "redacted": sum(counts.values()), "by_kind": counts}


_active = Redactor()


def configure(enabled: bool = True, extra_patterns: Iterable[str] = ()) -> Redactor:
    """Replace the process-wide redactor (the engine calls this once from its settings)."""
    global _active
    _active = Redactor(enabled, extra_patterns)
    return _active


def redact(text: str) -> str:
    """``text`` with secrets replaced by ``[REDACTED:<kind>]`` markers (counted for /health)."""
    return _active.redact(text)


def redact_obj(obj: Any) -> Any:
    return _active.redact_obj(obj)


def stats() -> dict[str, Any]:
    return _active.stats()
