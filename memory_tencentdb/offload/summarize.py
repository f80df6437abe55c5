"""L1 without an LLM: an extractive one-row summary of a tool call, in Chinese and English.

It keeps what an agent needs to decide whether to read the original: the command or target,
the size, the first and last lines, error lines, file paths and counts.

Tool output is untrusted and can be any size, so every scan here is linear in what it reads and
reads a bounded part: the line count is one ``str.count``; first/last lines, error lines, paths
and counts come from the first and last ``WINDOW`` characters only (``WINDOW`` = 64 KiB: the
largest tool output of the shared agent sessions, ``datasets/agent-sessions``, is 24,498
characters, so every one of them is read whole; a bigger result is a log or a dump whose head and
tail are what says what it is). No regex here can backtrack more than a constant per position:
single greedy character classes, literal alternations, and lookbehinds that make every match
start only at the beginning of its run (see ``_COUNT``); paths are found by a scan, not a regex.

A JSON object result (Hermes's ``terminal`` answers ``{"output": ..., "exit_code": 0,
"error": null}``) is summarised by the text inside it, see :func:`json_text`.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

WINDOW = 64 * 1024
# json.loads is linear but holds the GIL for the whole parse (~10 ms per MB here): larger
# results are summarised as text. Hermes's terminal output is far below this (it truncates).
JSON_PARSE_MAX = 4 * 1024 * 1024

_ERROR = re.compile(
    r"(error|exception|traceback|failed|failure|fatal|denied|not found|no such file|panic|"
    r"错误|失败|异常|报错|未找到|不存在|拒绝)",
    re.IGNORECASE,
)
# A number starts only where no digit, comma or dot precedes it, and its digits are taken
# possessively (``*+``): "1,1,1,…" (every comma a word boundary) was one backtracking scan of the
# rest of the run per comma (40 KB: 108 s); now each run is read once.
_COUNT = re.compile(
    r"(?<![\w,.])\d[\d,.]*+\s*(?:passed|failed|errors?|warnings?|skipped|files?|lines?|matches|"
    r"results?|tests?|items?|rows?|bytes|KB|MB|ms|s)\b|(?<![第\d])\d++\s*(?:个|条|行|项|处|次|份)",
    re.IGNORECASE,
)
# ``(?<![第\d])``: "第3行" is line 3 (an ordinal), not "3 lines"; a log numbering its lines
# would otherwise summarise as "counts: 0行, 1行, 2行, 3行".
# Path candidates: maximal runs of path characters (one class, greedy, no alternative: linear).
_PATH_RUN = re.compile(r"[\w.@/-]+")
_ARG_KEYS = ("command", "cmd", "query", "q", "path", "file_path", "file", "url", "pattern", "code")
# The text fields of a JSON result, in the order they are preferred when equally long.
_TEXT_KEYS = ("output", "stdout", "content", "result", "text", "data", "stderr", "message")
_EXIT_KEYS = ("exit_code", "returncode", "exit_status", "exitCode", "status_code")
_ERROR_KEYS = ("error", "stderr", "err")


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def describe_call(tool_name: str, arguments: Any, limit: int = 200) -> str:
    """``name: target``: the command/path/query when there is one, else the first plain
    values (no JSON: quotes and braces cost tokens in every stub and canvas that shows it)."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # kept raw: models emit malformed argument strings
            arguments = json.loads(arguments) if len(arguments) <= JSON_PARSE_MAX else arguments
        if isinstance(arguments, str):
            return _clip(
                f"{tool_name}: {arguments[: 4 * limit]}" if arguments.strip() else tool_name, limit
            )
    if isinstance(arguments, dict):
        for key in _ARG_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                return _clip(f"{tool_name}: {value[: 4 * limit]}", limit)
        plain = [
            str(v)[:240]
            for v in arguments.values()
            if isinstance(v, str | int | float) and not isinstance(v, bool) and str(v).strip()
        ]
        if not arguments:
            return tool_name
        if len(plain) == len(arguments) or len(plain) >= 2:
            return _clip(f"{tool_name}: " + ", ".join(_clip(v, 60) for v in plain[:4]), limit)
    try:
        compact = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        compact = str(arguments)
    return _clip(f"{tool_name}({compact[: 4 * limit]})", limit)


def json_text(content: str) -> tuple[str, str, Any, str] | None:
    """The text inside a JSON object result: ``(text, its key, exit code or None, error text)``.

    Rule: the text is the longest string among the top-level ``_TEXT_KEYS`` (ties: their
    order), even empty; without any, the longest top-level string value if it holds a newline
    or at least 80 characters; the exit code is the first of ``_EXIT_KEYS`` that is a number; the
    error is the first non-empty string of ``_ERROR_KEYS`` other than the text itself. None for
    anything else (a list, a record like a booking, text that is not JSON, over
    ``JSON_PARSE_MAX``): those are summarised as text."""
    head = content.lstrip()[:1]
    if head != "{" or len(content) > JSON_PARSE_MAX:
        return None
    try:
        data = json.loads(content)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    rank = {k: i for i, k in enumerate(_TEXT_KEYS)}
    named = [(k, data[k]) for k in _TEXT_KEYS if isinstance(data.get(k), str)]
    strings = named or [(k, v) for k, v in data.items() if isinstance(v, str)]
    if not strings:
        return None
    key, text = max(strings, key=lambda kv: (len(kv[1]), -rank.get(kv[0], len(rank))))
    if not named and "\n" not in text and len(text) < 80:
        return None
    code = next(
        (
            data[k]
            for k in _EXIT_KEYS
            if isinstance(data.get(k), int | float) and not isinstance(data.get(k), bool)
        ),
        None,
    )
    error = next(
        (
            data[k]
            for k in _ERROR_KEYS
            if k != key and isinstance(data.get(k), str) and data[k].strip()
        ),
        "",
    )
    return text, key, code, error


def _windows(content: str) -> list[str]:
    """The parts of ``content`` that are scanned: all of it, or its first and last WINDOW."""
    if len(content) <= 2 * WINDOW:
        return [content]
    return [content[:WINDOW], content[-WINDOW:]]


def _line_count(text: str) -> int:
    """What ``len(text.splitlines())`` says for ``\\n`` text, in one C-speed count."""
    if not text:
        return 0
    return text.count("\n") + (not text.endswith("\n"))


def paths_in(text: str, limit: int = 3) -> list[str]:
    """File paths (``a/b.py``, ``./x/y.txt``, ``/etc/hosts.conf``): runs of path characters
    with a ``/`` whose last part has an extension of 1-8 letters or digits."""
    out: dict[str, None] = {}
    for m in _PATH_RUN.finditer(text):
        run = m.group(0).rstrip(".-")
        if "/" not in run or run.endswith("/"):
            continue
        stem, dot, ext = run.rpartition("/")[2].rpartition(".")
        if not (dot and stem and 1 <= len(ext) <= 8 and ext.isascii() and ext.isalnum()):
            continue
        out[run] = None
        if len(out) >= limit:
            break
    return list(out)


def summarize(
    tool_name: str, arguments: Any, content: str, is_error: bool, limit: int = 400
) -> str:
    parts = [describe_call(tool_name, arguments, 120)]
    status = "error" if is_error else "ok"
    inner = json_text(content)
    exit_code, error_text, where = None, "", ""
    if inner is not None:
        text, key, exit_code, error_text = inner
        where = f" in {key!r}"
        if exit_code:
            status = "error"
    else:
        text = content
    size = f"{_line_count(text)} lines / {len(text)} chars{where}"
    if inner is not None and len(text) != len(content):
        size += f" (JSON {len(content)} chars)"
    head = f"{status}, {size}"
    if exit_code is not None:
        head = f"{status}, exit {exit_code}, {size}"
    parts.append(head)
    windows = _windows(text)
    first_lines = [ln for ln in windows[0].splitlines() if ln.strip()]
    last_lines = [ln for ln in windows[-1].splitlines() if ln.strip()]
    if len(windows) > 1:  # a window's edge may cut a line: the cut pieces are not first/last
        first_lines, last_lines = first_lines[:-1] or first_lines, last_lines[1:] or last_lines
    if error_text:
        parts.append("error: " + _clip(error_text[:WINDOW], 120))
    if first_lines:
        parts.append("first: " + _clip(first_lines[0][:WINDOW], 100))
    scanned = first_lines[1:] + (last_lines if len(windows) > 1 else [])
    errors = [ln for ln in scanned if _ERROR.search(ln)][:2]
    if errors:
        parts.append("errors: " + " | ".join(_clip(e, 90) for e in errors))
    if len(first_lines) > 1 or len(windows) > 1:
        parts.append("last: " + _clip(last_lines[-1], 100) if last_lines else "")
    paths = list(dict.fromkeys(p for w in windows for p in paths_in(w)))[:3]
    if paths:
        parts.append("paths: " + ", ".join(paths))
    counts: dict[str, None] = {}
    for w in windows:
        for m in _COUNT.finditer(w):
            counts[m.group(0).strip()] = None
            if len(counts) >= 4:
                break
    if counts:
        parts.append("counts: " + ", ".join(list(counts)[:4]))
    return _clip("; ".join(p for p in parts if p), limit)
