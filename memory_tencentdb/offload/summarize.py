"""L1 without an LLM: an extractive one-row summary of a tool call, in Chinese and English.

It keeps what an agent needs to decide whether to read the original: the command or target,
the size, the first and last lines, error lines, file paths and counts.
"""

from __future__ import annotations

import json
import re
from typing import Any

_ERROR = re.compile(
    r"(error|exception|traceback|failed|failure|fatal|denied|not found|no such file|panic|"
    r"错误|失败|异常|报错|未找到|不存在|拒绝)",
    re.IGNORECASE,
)
_PATH = re.compile(r"(?<![\w/])(?:\.{0,2}/)?(?:[\w.@-]+/)+[\w.@-]+\.[A-Za-z0-9]{1,8}\b")
_COUNT = re.compile(
    r"\b\d[\d,.]*\s*(?:passed|failed|errors?|warnings?|skipped|files?|lines?|matches|results?|"
    r"tests?|items?|rows?|bytes|KB|MB|ms|s)\b|(?<![第\d])\d+\s*(?:个|条|行|项|处|次|份)",
    re.IGNORECASE,
)
# ``(?<![第\d])``: "第3行" is line 3 (an ordinal), not "3 lines"; a log numbering its lines
# would otherwise summarise as "counts: 0行, 1行, 2行, 3行".
_ARG_KEYS = ("command", "cmd", "query", "q", "path", "file_path", "file", "url", "pattern", "code")


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def describe_call(tool_name: str, arguments: Any, limit: int = 200) -> str:
    """``name: target``: the command/path/query when there is one, else the first plain
    values (no JSON: quotes and braces cost tokens in every stub and canvas that shows it)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:  # kept raw: models do emit malformed argument strings
            return _clip(f"{tool_name}: {arguments}" if arguments.strip() else tool_name, limit)
    if isinstance(arguments, dict):
        for key in _ARG_KEYS:
            value = arguments.get(key)
            if isinstance(value, str) and value.strip():
                return _clip(f"{tool_name}: {value}", limit)
        plain = [
            str(v)
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
    return _clip(f"{tool_name}({compact})", limit)


def summarize(
    tool_name: str, arguments: Any, content: str, is_error: bool, limit: int = 400
) -> str:
    lines = [ln for ln in content.splitlines() if ln.strip()]
    parts = [describe_call(tool_name, arguments, 120)]
    status = "error" if is_error else "ok"
    parts.append(f"{status}, {len(content.splitlines())} lines / {len(content)} chars")
    if lines:
        parts.append("first: " + _clip(lines[0], 100))
    errors = [ln for ln in lines[1:] if _ERROR.search(ln)][:2]
    if errors:
        parts.append("errors: " + " | ".join(_clip(e, 90) for e in errors))
    if len(lines) > 1:
        parts.append("last: " + _clip(lines[-1], 100))
    paths = list(dict.fromkeys(_PATH.findall(content)))[:3]
    if paths:
        parts.append("paths: " + ", ".join(paths))
    counts = list(dict.fromkeys(m.group(0).strip() for m in _COUNT.finditer(content)))[:4]
    if counts:
        parts.append("counts: " + ", ".join(counts))
    return _clip("; ".join(parts), limit)
