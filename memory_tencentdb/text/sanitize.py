"""Keep our own injected blocks out of what we store, and stored text out of our tags.

Two directions:

- ``clean_captured``: hosts hand us turns that may still contain the memory blocks we injected
  earlier (and host metadata). Storing them would make memories recall themselves, so they are
  stripped from captured text and from recall queries.
- ``escape_tags``: recalled text goes back into a prompt inside ``<relevant-memories>`` and
  friends. A stored memory that contains ``</relevant-memories>`` or ``<system>`` must not be able
  to close our wrapper or forge another, so the angle brackets of those tag names are escaped.
"""

from __future__ import annotations

import re

# Blocks we (or the original) inject into prompts: stripped from anything captured.
INJECTED_BLOCKS = (
    "relevant-memories",
    "user-persona",
    "relevant-scenes",
    "scene-navigation",
    "memory-tools-guide",
    "current_task_context",
    "history_task_context",
    "memory-context",
)
# Any of these in stored text is escaped on the way back into a prompt.
OUR_TAGS = (*INJECTED_BLOCKS, "system", "assistant", "user")

# Only the shape we (and the hosts) inject: the opening tag at the start of a line and alone on
# it, the closing tag alone on a later line. A user who merely mentions ``<user-persona>`` in a
# sentence keeps every word of it.
_STRIP_BLOCKS = [
    re.compile(
        rf"(?:^|(?<=\n))[ \t]*<{tag}(?:\s[^>\n]*)?>[ \t]*\r?\n.*?\n[ \t]*</{tag}\s*>[ \t]*(?=\r?\n|\Z)",
        re.DOTALL | re.IGNORECASE,
    )
    for tag in INJECTED_BLOCKS
]
# An unterminated block at the very start of the text is a truncated injection (prepended, then
# cut by the host): it takes everything after it. Anywhere else an opening tag is just text.
_STRIP_OPEN = re.compile(
    r"\A\s*<(relevant-memories|user-persona|relevant-scenes|scene-navigation|memory-tools-guide)"
    r"(?:\s[^>\n]*)?>[ \t]*\r?\n(?!.*</\1\s*>).*\Z",
    re.DOTALL | re.IGNORECASE,
)
_HERMES_HEADER = re.compile(r"^## memory-tencentdb Memory\s*$", re.MULTILINE)
_UNTRUSTED_META = re.compile(
    r"(?:Conversation info|Sender|Thread starter|Replied message|Forwarded message context|"
    r"Chat history since last reply)\s*\(untrusted[^)]*\):\s*```json.*?```",
    re.DOTALL | re.IGNORECASE,
)
_LEGACY_SESSION_JSON = re.compile(r"```json\s*\{[^`]*?\"session[^`]*?\}\s*```", re.DOTALL)
_REPLY_DIRECTIVE = re.compile(r"\[\[reply_to[^\]]*\]\]")
_LEADING_TIMESTAMP = re.compile(r"^\[[\w/:+\- ]{6,40}\]\s*", re.MULTILINE)
_MEDIA = re.compile(r"\[media attached:[^\]]*\]", re.IGNORECASE)
_SYSTEM_LINES = re.compile(r"^System: \[.*$", re.MULTILINE)
_DATA_URI = re.compile(r"data:image/[a-zA-Z0-9.+-]+;base64,[A-Za-z0-9+/=\s]+")
_MANY_NEWLINES = re.compile(r"\n{3,}")
# Characters a model does not see but that split a tag for a regex: zero-width and other format
# characters (soft hyphen, joiners, direction marks, word joiner, BOM, variation selectors).
_INVISIBLE = "[\u00ad\u034f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f\ufe00-\ufe0f\ufeff]"
_GAP = rf"(?:{_INVISIBLE}|\s)*"
_LT = "[<\uff1c\ufe64\u3008\u27e8\u2039\u02c2]"  # < and its full-width and look-alike forms
_SLASH = "[/\uff0f\u2044\u2215]"


def _lookalike(ch: str) -> str:
    """A character class for ``ch`` and its full-width form (and dash/underscore variants)."""
    if ch == "-":
        return "[-\uff0d\u2010-\u2015\ufe63]"
    if ch == "_":
        return "[_\uff3f]"
    if ch.isascii() and ch.isalpha():
        lo, up = ch.lower(), ch.upper()
        return f"[{lo}{up}{chr(ord(lo) + 0xFEE0)}{chr(ord(up) + 0xFEE0)}]"
    return re.escape(ch)


# ``<`` + optional ``/`` + one of our tag names, each part possibly full-width and split by
# invisible characters: a model reads all of these as our tag, so all are escaped.
_TAG_ESCAPE = re.compile(
    rf"{_LT}{_GAP}({_SLASH}?){_GAP}(?:"
    + "|".join(
        f"(?P<t{i}>" + f"{_INVISIBLE}*".join(_lookalike(c) for c in tag) + ")"
        for i, tag in enumerate(OUR_TAGS)
    )
    + r")(?![A-Za-z0-9_-])",
)
# Chat-template control tokens (``<|im_start|>``, DeepSeek's ``<｜end▁of▁sentence｜>``): the
# bracket-bar pairs are broken so no tokenizer reads them as its special tokens.
_TEMPLATE_OPEN = re.compile(rf"{_LT}{_GAP}[|\uff5c]")
_TEMPLATE_CLOSE = re.compile(rf"[|\uff5c]{_GAP}[>\uff1e\ufe65\u3009\u27e9\u203a\u02c3]")
_LINE_BREAKS = re.compile(r"\s*[\r\n\v\f\x85\u2028\u2029]+\s*")

_NOISE_PREFIXES = (
    "A new session was started via",
    "✅ New session started",
    "Pre-compaction memory flush",
)
_NOISE_EXACT = {"(session bootstrap)", "NO_REPLY", "HEARTBEAT_OK"}


def clean_captured(text: str) -> str:
    """Text as it should be stored or searched: our blocks and host metadata removed."""
    if not text:
        return ""
    for pattern in _STRIP_BLOCKS:
        text = pattern.sub("", text)
    text = _STRIP_OPEN.sub("", text)
    text = _HERMES_HEADER.sub("", text)
    text = _UNTRUSTED_META.sub("", text)
    text = _LEGACY_SESSION_JSON.sub("", text)
    text = _REPLY_DIRECTIVE.sub("", text)
    text = _LEADING_TIMESTAMP.sub("", text)
    text = _MEDIA.sub("", text)
    text = _SYSTEM_LINES.sub("", text)
    text = _DATA_URI.sub("[image]", text)
    text = text.replace("\x00", "")
    text = _MANY_NEWLINES.sub("\n\n", text)
    return text.strip()


def is_noise(text: str) -> bool:
    """Framework chatter and slash commands: never worth remembering."""
    t = text.strip()
    if not t or t in _NOISE_EXACT or t.startswith("/"):
        return True
    return t.startswith(_NOISE_PREFIXES)


def escape_tags(text: str) -> str:
    """Neutralise our tag names and chat-template tokens in stored text before it goes back
    into a prompt: ``<`` becomes ``&lt;`` (full-width and zero-width-split forms included)."""
    text = _TAG_ESCAPE.sub(_escaped_tag, text)
    text = _TEMPLATE_OPEN.sub("&lt;|", text)
    return _TEMPLATE_CLOSE.sub("|&gt;", text)


def _escaped_tag(m: re.Match[str]) -> str:
    name = next(OUR_TAGS[int(k[1:])] for k, v in m.groupdict().items() if v is not None)
    return "&lt;" + ("/" if m.group(1) else "") + name


def one_line(text: str) -> str:
    """``text`` on one line: a line break inside a recalled memory must not be able to start
    what reads as another memory line of our block."""
    return _LINE_BREAKS.sub(" ", text).strip()


# Longest query text searched (code points). Embedding cost grows with length up to the models'
# input limit (measured on two cores: 0.05 s for 100 characters, 0.5 s for 1,000, 1.2 s for
# 2,000, 3 s at the limit), and the models read at most 512 tokens (~500 Chinese characters)
# anyway. Longer queries keep their head and their tail (the question is usually at one end).
MAX_QUERY_CHARS = 1000


def clip_query(text: str, limit: int = MAX_QUERY_CHARS) -> str:
    """``text`` cut to ``limit`` code points: the first and the last half of it."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + "\n…\n" + text[-half:]
