"""Request bodies. Strict types: a number where text belongs is a 422 naming the field, not a
silent coercion. Unknown fields are ignored so newer hosts keep working with older gateways."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Id = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512)]
OptText = Annotated[str, StringConstraints(max_length=512)] | None


class Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore")


class Scoped(Body):
    user_id: OptText = None
    scope: OptText = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: NonEmpty
    content: Any = None
    timestamp: int | float | str | None = None
    id: str | int | None = None
    tool_calls: list[Any] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class CaptureBody(Scoped):
    session_key: Id
    session_id: OptText = None
    user_content: str | None = None
    assistant_content: str | None = None
    messages: list[Message] | None = Field(default=None, max_length=2000)

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
            return [m.model_dump(exclude_none=True) for m in self.messages]
        return [
            {"role": "user", "content": self.user_content},
            {"role": "assistant", "content": self.assistant_content},
        ]


class ToolNames(Body):
    memory_search: OptText = None
    conversation_search: OptText = None


class RecallBody(Scoped):
    query: NonEmpty
    session_key: Id
    session_id: OptText = None
    tool_names: ToolNames | None = None


class SearchMemoriesBody(Scoped):
    query: NonEmpty
    limit: int = Field(5, ge=1, le=50)
    type: Literal["persona", "episodic", "instruction"] | None = None
    scene: OptText = None
    session_key: OptText = None


class SearchConversationsBody(Scoped):
    query: NonEmpty
    limit: int = Field(5, ge=1, le=50)
    session_key: OptText = None


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
