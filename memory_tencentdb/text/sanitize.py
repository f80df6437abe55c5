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

_STRIP_BLOCKS = [
    re.compile(rf"<{tag}\b[^>]*>.*?</{tag}\s*>", re.DOTALL | re.IGNORECASE)
    for tag in INJECTED_BLOCKS
]
# An unterminated opening tag (a truncated injection) takes everything after it.
_STRIP_OPEN = re.compile(
    r"<(relevant-memories|user-persona|relevant-scenes|scene-navigation|memory-tools-guide)\b[^>]*>.*\Z",
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
_TAG_ESCAPE = re.compile(
    r"<(/?)\s*(" + "|".join(re.escape(t) for t in OUR_TAGS) + r")\b", re.IGNORECASE
)

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
    """Neutralise any of our tag names in stored text (``<`` becomes ``&lt;``)."""
    return _TAG_ESCAPE.sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)
