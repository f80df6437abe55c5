"""Typed records passed between the offload modules and up to the gateway."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


class OffloadInputError(ValueError):
    """Bad input, found before anything was written. ``field`` names what is wrong."""

    def __init__(self, field_name: str, message: str) -> None:
        self.field = field_name
        super().__init__(f"{field_name}: {message}")


class OffloadNotFound(LookupError):
    """Nothing in this scope matches a read."""


def strip_id(tool_call_id: str) -> str:
    """OpenClaw removes underscores from tool-call ids (``call_ab`` -> ``callab``): compare so."""
    return tool_call_id.replace("_", "")


@dataclass
class OffloadRow:
    """One line of ``offload-<session>.jsonl``: one tool call. Key order is the original's."""

    tool_call_id: str
    tool_call: str
    summary: str
    timestamp: str
    score: float
    node_id: str | None
    result_ref: str
    offloaded: bool | str | None = None  # True: stubbed; "deleted": left the context
    tool_name: str = ""
    is_error: bool = False
    tokens: int = 0
    summary_by: str = "rules"  # "rules" (extractive) or "llm"

    def as_json(self) -> dict[str, Any]:
        out = dict(vars(self))  # flat fields: no deep copy (asdict was 1/4 of a large assembly)
        if out["offloaded"] is None:
            del out["offloaded"]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OffloadRow:
        score = data.get("score", 5)
        return cls(
            tool_call_id=str(data["tool_call_id"]),
            tool_call=str(data.get("tool_call") or ""),
            summary=str(data.get("summary") or ""),
            timestamp=str(data.get("timestamp") or ""),
            score=score if isinstance(score, int | float) else 5,
            node_id=data.get("node_id") if isinstance(data.get("node_id"), str) else None,
            result_ref=str(data.get("result_ref") or ""),
            offloaded=data.get("offloaded"),
            tool_name=str(data.get("tool_name") or ""),
            is_error=bool(data.get("is_error", False)),
            tokens=int(data.get("tokens") or 0),
            summary_by=str(data.get("summary_by") or "rules"),
        )


@dataclass
class ToolResult:
    """A tool call and its raw result as a host reported it."""

    tool_call_id: str
    tool_name: str
    arguments: Any
    content: str  # the exact text stored in the ref
    encoding: str = "text"  # "json" when the host sent a non-text value
    is_error: bool = False
    timestamp: str = ""


@dataclass
class CanvasMeta:
    file: str
    path: str
    task_goal: str
    created_time: str
    updated_time: str
    node_count: int
    status: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Boundary:
    """One L1.5 decision: rows from ``row_index`` on belong to ``canvas`` (None: not yet made)."""

    row_index: int
    decision: str  # continue | new | resume
    canvas: str | None
    goal: str
    at: str
    similarity: float | None = None
    by: str = "embedding"  # embedding | lexical | llm | first

    def as_json(self) -> dict[str, Any]:
        return asdict(self)
