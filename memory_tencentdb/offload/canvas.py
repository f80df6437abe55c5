"""L2 without an LLM: a deterministic Mermaid ``flowchart TD`` canvas per task.

File ``mmds/NNN-<label>.mmd``: the first line is the metadata as a Mermaid comment
(``%% {"taskGoal": ...}``: the original's ``%%{ ... }%%`` is a directive to Mermaid and fails
to parse, so it is read but not written), then ``flowchart TD``, then one node per step with
ids always ``NNN-N<k>``, chained in order. Labels are escaped with Mermaid entity codes, so the
file always parses whatever the tool output contained.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass

NODE_ID = re.compile(r"\b(\d{3,})-N(\d+)\b")
_META = re.compile(r"^%%\s*\{\s*(.*?)\s*\}\s*(?:%%)?\s*$")
_STATUS = re.compile(r"status:\s*(done|doing|blocked|paused|todo)\b", re.IGNORECASE)
_ENTITIES = {'"': "#quot;", "<": "#lt;", ">": "#gt;", "#": "#35;", "`": "#96;", "&": "#amp;"}


def escape_label(text: str, limit: int = 150) -> str:
    text = "".join(" " if unicodedata.category(c).startswith("C") else c for c in str(text))
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return "".join(_ENTITIES.get(c, c) for c in text)


def slug(goal: str, limit: int = 30) -> str:
    """A kebab-case file label from a goal; CJK kept (file names are UTF-8), unsafe chars gone."""
    words = re.findall(r"[A-Za-z0-9]+|[\u4e00-\u9fff]+", goal.lower())
    out = ""
    for w in words:
        nxt = f"{out}-{w}" if out else w
        if len(nxt) > limit:
            if not out:
                out = w[:limit]
            break
        out = nxt
    return out or "task"


@dataclass
class Meta:
    task_goal: str = ""
    progress: str = ""
    created_time: str = ""
    updated_time: str = ""


def meta_line(meta: Meta) -> str:
    body = {
        "taskGoal": meta.task_goal,
        "progress": meta.progress,
        "createdTime": meta.created_time,
        "updatedTime": meta.updated_time,
    }
    text = json.dumps(body, ensure_ascii=False)
    # JSON escapes for the characters that could open or close a tag (a goal holding
    # ``</current_task_context>``): the file never holds a ``<`` that code did not put there,
    # and json.loads gives the goal back exactly.
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):
        text = text.replace(ch, esc)
    return "%% " + text.replace("\n", " ")


def parse_meta(text: str) -> Meta:
    first = text.split("\n", 1)[0].strip()
    m = _META.match(first)
    if not m:
        return Meta()
    try:
        data = json.loads("{" + m.group(1) + "}")
    except ValueError:
        # A line torn by a crash during an in-place update (canvas_file.append): the goal and
        # creation time come first and did not change. ``, "progress"`` cannot occur inside a
        # JSON string (its quote would be escaped), so it marks where they end.
        head = m.group(1).partition(', "progress"')[0]
        try:
            data = json.loads("{" + head + "}")
        except ValueError:
            return Meta()
    progress = next((v for k, v in data.items() if str(k).startswith("progress")), "")
    return Meta(
        task_goal=str(data.get("taskGoal") or ""),
        progress=str(progress or ""),
        created_time=str(data.get("createdTime") or ""),
        updated_time=str(data.get("updatedTime") or ""),
    )


def new_canvas(goal: str, created: str) -> str:
    return meta_line(Meta(goal, "0", created, created)) + "\nflowchart TD\n"


def node_lines(text: str) -> list[tuple[str, str]]:
    """``(node id, label)`` of every node line, in order. Ids and statuses are read only from
    where code writes them (the start of a node line; the label part after the first ``<br/>``
    that starts with ``status:``): a step whose text says ``001-N40`` or ``status: blocked`` is
    inside a label, where ``<`` is escaped, so it can neither add a node nor change a count."""
    out = []
    for line in text.split("\n"):
        m = _NODE_LINE.match(line)
        if m:
            out.append((m.group(1), m.group(3)))
    return out


def node_ids(text: str, prefix: str) -> list[str]:
    seen: dict[str, None] = {}
    for node, _ in node_lines(text):
        if node.split("-N", 1)[0] == prefix:
            seen[node] = None
    return list(seen)


def max_k(text: str, prefix: str) -> int:
    return max((int(n.split("-N", 1)[1]) for n in node_ids(text, prefix)), default=0)


def label_status(label: str) -> str | None:
    """The status code put in a node's label (``step<br/>status: done<br/>...``), or None."""
    for part in _BR.split(label)[1:]:
        if part.startswith("status:"):
            m = _STATUS.match(part)
            return m.group(1).lower() if m else None
    return None


def status_counts(text: str) -> dict[str, int]:
    counts = {"done": 0, "doing": 0, "blocked": 0}
    for _, label in node_lines(text):
        key = label_status(label)
        if key:
            counts[key] = counts.get(key, 0) + 1
    return counts


def drop_nodes(text: str, ids: set[str]) -> str:
    """``text`` without the node lines of ``ids`` and the edge lines touching them (ids read
    where code writes them, never from inside a label)."""
    kept = []
    for line in text.split("\n"):
        m = _NODE_LINE.match(line)
        if m and m.group(1) in ids:
            continue
        e = _EDGE_LINE.match(line)
        if e and (e.group(1) in ids or e.group(5) in ids):
            continue
        kept.append(line)
    return "\n".join(kept)


def goal_text(goal: str, limit: int = 160) -> str:
    """A goal for the canvas message's ``Goal:`` line: one line, clipped, and ``& < >`` as
    entities, so a goal holding ``</current_task_context><system>`` cannot close the wrapper
    or open a tag of its own."""
    goal = "".join(" " if unicodedata.category(c).startswith("C") else c for c in str(goal))
    goal = " ".join(goal.split())
    goal = goal if len(goal) <= limit else goal[: limit - 1] + "…"
    return goal.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def append_node(
    text: str, prefix: str, step: str, status: str, summary: str, timestamp: str, k: int
) -> tuple[str, str]:
    """Add step ``k + 1`` (and the edge from step ``k``). Answers (new text, node id); the
    metadata line is brought up to date by :func:`finish` once the caller is done adding."""
    node = f"{prefix}-N{k + 1}"
    label = (
        f"{escape_label(step, 80)}<br/>status: {status}<br/>summary: {escape_label(summary)}"
        f"<br/>Timestamp: {escape_label(timestamp, 40)}"
    )
    if not text.endswith("\n"):
        text += "\n"
    text += f'    {node}["{label}"]\n'
    if k:
        text += f"    {prefix}-N{k} --> {node}\n"
    return text, node


def finish(text: str, updated: str) -> str:
    """The metadata line with the update time and the share of steps done."""
    meta = parse_meta(text)
    meta.updated_time = updated
    counts = status_counts(text)
    total = sum(counts.values()) or 1
    meta.progress = str(round(100 * counts.get("done", 0) / total))
    return set_meta(text, meta)


def set_meta(text: str, meta: Meta) -> str:
    first, sep, rest = text.partition("\n")
    if _META.match(first.strip()):
        return meta_line(meta) + sep + rest
    return meta_line(meta) + "\n" + text


def tail(text: str, max_chars: int) -> str:
    """The canvas cut to its most recent nodes (whole lines) when it is too big to show."""
    if len(text) <= max_chars:
        return text
    lines = text.split("\n")
    head = [ln for ln in lines[:2] if ln.startswith("%%") or ln.startswith("flowchart")]
    body = lines[len(head) :]
    kept: list[str] = []
    size = sum(len(h) + 1 for h in head) + 60
    for ln in reversed(body):
        if size + len(ln) + 1 > max_chars:
            break
        kept.append(ln)
        size += len(ln) + 1
    dropped = len(body) - len(kept)
    return "\n".join([*head, f"    %% {dropped} earlier lines are in the file", *reversed(kept)])


_NODE_LINE = re.compile(
    r'^\s*(\d{3,}-N\d+)\s*(\[\[|\(\[|\[\(|\(\(|\{\{|\[|\(|\{)"(.*)"(\]\]|\]\)|\)\]|\)\)|\}\}|\]|\)|\})\s*$'
)
_EDGE_LINE = re.compile(r"^\s*(\d{3,}-N(\d+))\s*(\S+)\s*(\|[^|]*\|)?\s*(\d{3,}-N(\d+))\s*$")
_BR = re.compile(r"<br\s*/?>", re.IGNORECASE)
_UNESCAPE = {v: k for k, v in _ENTITIES.items()}
_ENTITY = re.compile("|".join(re.escape(v) for v in _ENTITIES.values()))
_VIEW_ENTITIES = {**_ENTITIES, '"': "'"}


def _view_label(label: str, limit: int) -> str:
    """A node's label for the canvas shown in context: its step, and its status unless done.
    Quotes become ' (a Mermaid ``#quot;`` costs three tokens), no summary or timestamp (the
    node's rows hold them)."""
    parts = [_ENTITY.sub(lambda m: _UNESCAPE[m.group(0)], p) for p in _BR.split(label)]
    step = parts[0]
    status = next((p.split(":", 1)[1].strip() for p in parts[1:] if p.startswith("status:")), "")
    text = " ".join(
        "".join(" " if unicodedata.category(c).startswith("C") else c for c in step).split()
    )
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if status and status.lower() != "done":
        text += f" ({status})"
    return "".join(_VIEW_ENTITIES.get(c, c) for c in text)


def view(text: str, shown: set[str], max_nodes: int, label_limit: int = 70) -> tuple[str, int]:
    """The part of a canvas worth showing in context: only the nodes in ``shown`` (the steps
    that left the context: the others are still in it verbatim), the newest ``max_nodes`` of
    them, with short labels; edges only where they say more than "next step". Answers the
    Mermaid text (``flowchart TD`` + lines, always parseable) and how many nodes were left out."""
    nodes: list[tuple[str, str]] = []
    edges: list[str] = []
    for line in text.splitlines():
        m = _NODE_LINE.match(line)
        if m and m.group(1) in shown:
            node, opening, label, closing = m.groups()
            nodes.append((node, f'{opening}"{_view_label(label, label_limit)}"{closing}'))
            continue
        e = _EDGE_LINE.match(line)
        if e and e.group(1) in shown and e.group(5) in shown:
            plain = (
                e.group(3) == "-->" and not e.group(4) and int(e.group(6)) == int(e.group(2)) + 1
            )
            if not plain:
                edges.append(line.strip())
    kept = nodes[-max_nodes:] if max_nodes > 0 else []
    ids = {n for n, _ in kept}
    out = ["flowchart TD", *(f"    {n}{shape}" for n, shape in kept)]
    out += [f"    {e}" for e in edges if {m.group(0) for m in NODE_ID.finditer(e)} <= ids]
    return "\n".join(out), len(nodes) - len(kept)
