"""``POST /llm/host-model``: a host adapter hands the gateway its host's own model (issue 24).

The key that sends it is the principal it serves: its model gets the LLM tasks of the scopes
that principal may write, and no other (llm/host_models.py). Kept in memory only. The body:

- ``{"source": "hermes"|"openclaw", "base_url", "api_key", "model", "max_context"?, "api"?}``:
  an OpenAI-compatible chat endpoint (``"api": "openai"``, the default) or Anthropic's Messages
  API (``"api": "anthropic"``: ``{base_url}/v1/messages`` with ``x-api-key``);
- ``{"source", "unusable": "<provider kind>"}``: the host's model speaks another protocol
  (Codex OAuth, Bedrock); ``/health`` says so and the rules serve;
- ``DELETE /llm/host-model``: withdraw this principal's model (the host's off switch).

Answers ``{"used": true|false, "reason"?}``; ``used`` is false when the gateway has its own
``llm`` configured (that one serves; the hand-over is ignored).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from pydantic import Field, StringConstraints, model_validator

from memory_tencentdb.engine import Engine
from memory_tencentdb.gateway import access
from memory_tencentdb.gateway.schemas import Body

Url = Annotated[
    str,
    StringConstraints(strip_whitespace=True, max_length=2048, pattern=r"^https?://[^\s]+$"),
]
Short = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]


class HostModelBody(Body):
    source: Literal["hermes", "openclaw"]
    base_url: Url | None = None
    api_key: Annotated[str, StringConstraints(max_length=8192)] = Field("", repr=False)
    model: Short | None = None
    max_context: Annotated[int, Field(ge=1, le=100_000_000)] | None = None
    api: Literal["openai", "anthropic"] = "openai"
    unusable: Short | None = None

    @model_validator(mode="after")
    def _endpoint_or_reason(self) -> HostModelBody:
        if self.unusable is None and (self.base_url is None or self.model is None):
            raise ValueError(
                "give base_url and model (an OpenAI or Anthropic endpoint), or unusable"
            )
        return self


def host_model_router(engine: Engine) -> APIRouter:
    router = APIRouter()

    @router.post("/llm/host-model")
    def hand_over(body: HostModelBody, request: Request) -> dict[str, Any]:
        who = access.caller(request)
        hm = engine.host_models
        if body.unusable is not None:
            hm.not_usable(who, body.source, body.unusable)
            return {"used": False, "reason": f"host model not usable: {body.unusable}"}
        assert body.base_url is not None and body.model is not None
        hm.hand_over(
            who, body.source, body.base_url, body.api_key, body.model, body.max_context, body.api
        )
        if engine.settings.llm_configured:
            return {"used": False, "reason": "the gateway's own llm is configured and serves"}
        return {"used": True}

    @router.delete("/llm/host-model")
    def withdraw(request: Request) -> dict[str, Any]:
        return {"withdrawn": engine.host_models.withdraw(access.caller(request))}

    return router


def wire_policy(engine: Engine, policy: access.LivePolicy) -> None:
    """The host models ask the live access policy at every task: who may write a scope, and
    whether the principal still has a key (a revoked key's model serves nothing)."""

    def can_write(principal: Any, scope: str) -> bool:
        return policy.current().can_write(principal, scope)

    def alive(principal: Any) -> bool:
        current = policy.current()
        if not current.enforced or principal == access.OWNER:
            return True
        return principal in current.by_digest.values()

    engine.host_models.can_write = can_write
    engine.host_models.alive = alive
