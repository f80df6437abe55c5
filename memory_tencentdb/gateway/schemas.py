"""Request bodies. Strict types: a number where text belongs is a 422 naming the field, not a
silent coercion. Unknown fields are ignored so newer hosts keep working with older gateways.

Whatever the route, a body may hold no value we could not write back out: ``NaN``/``Infinity``
(Python's JSON reader accepts them, no JSON writer should) and lone UTF-16 surrogates
(``"\\ud800"`` is valid JSON syntax but no UTF-8 file can hold it). They are refused with the
field's path before anything is stored, wherever they sit, extra fields included."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import Query
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    StringConstraints,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from memory_tencentdb.capture import MAX_TIMESTAMP_MS

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Id = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512)]
OptText = Annotated[str, StringConstraints(max_length=512)] | None
# A query-string parameter (``GET /memories/{id}?scope=``): checked like any other text.
QueryText = Annotated[OptText, Query(max_length=512)]


# Host tool names go into the prompt verbatim: identifiers only.
TOOL_NAME = r"^[A-Za-z0-9_.:-]{1,64}$"


def _unstorable(value: Any) -> tuple[str, str] | None:
    """``(path, why)`` of the first value no JSON line or UTF-8 file can hold, else None."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, v = stack.pop()
        if isinstance(v, str):
            if not v.isascii() and not _is_utf8(v):
                return path, "text contains a lone UTF-16 surrogate (not valid Unicode)"
        elif isinstance(v, float):
            if not math.isfinite(v):
                return (
                    path,
                    f"{v!r} is not a finite number (NaN, Infinity and numbers past 1.8e308 cannot be stored)",
                )
        elif isinstance(v, dict):
            for key, item in v.items():
                if isinstance(key, str) and not key.isascii() and not _is_utf8(key):
                    return path or "body", "a key contains a lone UTF-16 surrogate"
                stack.append((f"{path}.{key}" if path else str(key), item))
        elif isinstance(v, list):
            stack.extend((f"{path}.{i}" if path else str(i), item) for i, item in enumerate(v))
    return None


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        problem = _unstorable(data)
        if problem is not None:
            raise PydanticCustomError(
                "unstorable_value", "{path}: {why}", {"path": problem[0], "why": problem[1]}
            )
        return data


class Scoped(Body):
    user_id: OptText = None
    scope: OptText = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: NonEmpty
    content: Any = None
    timestamp: int | float | str | None = None
    # A host's message id: text or an integer, never a boolean or a float (``false`` would be
    # stored as no id at all and the message deduplicated by content alone).
    id: StrictStr | StrictInt | None = None
    tool_calls: list[Any] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    # Who said it ("Melanie", an agent's name); indexed and shown with the message.
    speaker: OptText = None

    @field_validator("timestamp", mode="before")
    @classmethod
    def _plausible_time(cls, value: Any) -> Any:
        # Epoch seconds or milliseconds, or ISO-8601; anything else would overflow the index
        # (int64) or every date type, or be silently stored as "now", so it is refused here
        # rather than after the line is on disk.
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a time: epoch seconds/milliseconds or ISO-8601")
        if isinstance(value, str) and value.strip():
            text = value.strip()
            try:
                value = float(text)  # "1717000000": a number sent as a string
            except ValueError:
                try:
                    datetime.fromisoformat(text)
                except ValueError:
                    raise ValueError(
                        f"{value!r} is not a time: epoch seconds/milliseconds or ISO-8601"
                    ) from None
                return value
        number = isinstance(value, int | float)
        if number and not (math.isfinite(value) and 0 <= value <= MAX_TIMESTAMP_MS):
            raise ValueError(
                f"{value!r} is not a time: epoch seconds or milliseconds between 0 and"
                f" {MAX_TIMESTAMP_MS} (year 9999) expected"
            )
        return value


class CaptureBody(Scoped):
    session_key: Id
    session_id: OptText = None
    user_content: str | None = None
    assistant_content: str | None = None
    messages: list[Message] | None = Field(default=None, max_length=2000)
    # Speaker names for messages that carry none of their own (the Hermes user's name, an
    # OpenClaw agent's name).
    user_name: OptText = None
    assistant_name: OptText = None

    @model_validator(mode="after")
    def _has_content(self) -> CaptureBody:
        if self.messages:
            return self
        missing = [
            name
            for name in ("user_content", "assistant_content")
            if not (getattr(self, name) or "").strip()
        ]
        if missing:
            raise ValueError(
                "either a non-empty 'messages' list or both 'user_content' and"
                f" 'assistant_content' are required (missing: {', '.join(missing)})"
            )
        return self

    def turn(self) -> list[dict[str, Any]]:
        if self.messages:
            turn = [m.model_dump(exclude_none=True) for m in self.messages]
        else:
            turn = [
                {"role": "user", "content": self.user_content},
                {"role": "assistant", "content": self.assistant_content},
            ]
        names = {"user": self.user_name, "assistant": self.assistant_name}
        for m in turn:
            name = (names.get(str(m.get("role", "")).lower()) or "").strip()
            if name and not m.get("speaker"):
                m["speaker"] = name
        return turn


HostToolName = Annotated[str, StringConstraints(pattern=TOOL_NAME)] | None


class ToolNames(Body):
    memory_search: HostToolName = None
    conversation_search: HostToolName = None


# The team scopes a recall or search also looks in: absent = every one the caller's key may
# read, a list = exactly those (each readable, else 403), [] = only the request's own scope.
TeamScopes = list[Id] | None


class RecallBody(Scoped):
    query: NonEmpty
    session_key: Id
    session_id: OptText = None
    tool_names: ToolNames | None = None
    team_scopes: TeamScopes = Field(None, max_length=50)


class SearchMemoriesBody(Scoped):
    query: NonEmpty
    limit: int = Field(5, ge=1, le=50)
    type: Literal["persona", "episodic", "instruction"] | None = None
    scene: OptText = None
    session_key: OptText = None
    team_scopes: TeamScopes = Field(None, max_length=50)


class SearchConversationsBody(Scoped):
    query: NonEmpty
    limit: int = Field(5, ge=1, le=50)
    session_key: OptText = None
    team_scopes: TeamScopes = Field(None, max_length=50)


class SessionEndBody(Scoped):
    session_key: Id
    session_id: OptText = None
    # False: start the flush and answer at once (hosts that are exiting need not wait).
    wait: bool = True


class MemoryBody(Scoped):
    content: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20000)
    ]
    type: Literal["persona", "episodic", "instruction"]
    priority: int = Field(50, ge=-1, le=100)
    scene_name: Annotated[str, StringConstraints(max_length=200)] = ""
    session_key: Id
    session_id: OptText = None
    metadata: dict[str, Any] | None = None


class SeedBody(Body):
    data: Any
    session_key: OptText = None
    strict_round_role: bool = False
    auto_fill_timestamps: bool = True
    user_id: OptText = None
    scope: OptText = None


# ---------------------------------------------------------------------- offload (issue 9)

ToolName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]


class OffloadToolResultBody(Scoped):
    session_key: Id
    session_id: OptText = None
    tool_call_id: Id
    tool_name: ToolName
    arguments: Any = None
    result: Any
    is_error: bool = False
    timestamp: str | int | float | None = None

    @model_validator(mode="after")
    def _has_result(self) -> OffloadToolResultBody:
        if self.result is None:
            raise ValueError("result: must not be null (send an empty string for no output)")
        return self


class OffloadAssembleBody(Scoped):
    session_key: Id
    session_id: OptText = None
    messages: list[Any]  # its length is checked by the route (413 naming the limit)
    token_budget: int = Field(ge=1, le=100_000_000)  # the route names the minimum
    prompt: str | None = None
    system_tokens: int = Field(0, ge=0, le=100_000_000)
    format: Literal["auto", "openai", "agent"] = "auto"
    current_turn_follows: bool = False  # the host appends the current turn after the answer
    # With current_turn_follows: the tool calls of that turn whose results (sent to
    # /offload/tool-result) follow the list: they count as in the context (canvas, guide).
    pending_tool_call_ids: list[Id] = Field(default_factory=list, max_length=1000)


HostName = Annotated[str, StringConstraints(strip_whitespace=True, pattern=TOOL_NAME)]


class OffloadHostStatusBody(Scoped):
    """A host adapter's report on its own seams (e.g. OpenClaw's engine slot fell back), for
    the scope it works in (the caller must be allowed to write it)."""

    host: HostName
    engine: HostName
    fallback: Annotated[str, StringConstraints(max_length=2000)] | None = None


class OffloadReadBody(Scoped):
    session_key: OptText = None
    tool_call_id: OptText = None
    result_ref: Annotated[str, StringConstraints(max_length=4096)] | None = None
    node_id: OptText = None
    canvas: OptText = None
    # A page of a tool result's or a canvas's text, in characters (Unicode code points):
    # hosts cut long tool results (OpenClaw 2026.9.6 from 8,000 ASCII characters on), so an
    # original of any length comes back whole as consecutive pages. No length: to the end.
    offset: int = Field(0, ge=0, le=1_000_000_000)
    length: int | None = Field(None, ge=1, le=1_000_000_000)

    @model_validator(mode="after")
    def _one_key(self) -> OffloadReadBody:
        given = [
            k
            for k in ("tool_call_id", "result_ref", "node_id", "canvas")
            if (getattr(self, k) or "").strip()
        ]
        if len(given) != 1:
            raise ValueError(
                "exactly one of tool_call_id, result_ref, node_id, canvas is required"
                + (f" (got {', '.join(given)})" if given else "")
            )
        if given == ["node_id"] and (self.offset or self.length is not None):
            raise ValueError(
                "offset and length page a tool result or a canvas; a node's rows come whole"
            )
        return self
