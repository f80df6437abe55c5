"""``POST /seed``: import a batch of past conversations into a fresh, separate data directory.

As in the original, a seed never touches the live store: it writes a complete data directory
``<data_dir>/seed-YYYYMMDD-HHMMSS`` that can be inspected, then pointed at with
``TDAI_DATA_DIR``. Input is ``{"sessions": [...]}`` or a bare list of sessions, each
``{sessionKey, sessionId?, conversations: [[message, ...], ...]}`` with messages
``{role, content, timestamp?}``. Every problem is collected and reported at once.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_tencentdb.capture import _timestamp_ms, to_l0_inputs
from memory_tencentdb.store.sqlite import Store

if TYPE_CHECKING:
    from memory_tencentdb.engine import Engine
    from memory_tencentdb.gateway.schemas import SeedBody


class SeedValidationError(ValueError):
    def __init__(self, errors: list[dict[str, Any]]) -> None:
        self.errors = errors
        super().__init__(
            f"Seed data is invalid: {len(errors)} problem(s); first: {errors[0]['message']}"
        )


def validate(data: Any, strict_round_role: bool) -> list[dict[str, Any]]:
    """Sessions as a list of dicts, or raise with every problem found."""
    errors: list[dict[str, Any]] = []
    sessions = data.get("sessions") if isinstance(data, dict) else data
    if not isinstance(sessions, list) or not sessions:
        raise SeedValidationError(
            [
                {
                    "stage": "top_level",
                    "message": "data must be {sessions: [...]} or a non-empty list",
                }
            ]
        )
    stamped = unstamped = 0
    for si, sess in enumerate(sessions):
        if not isinstance(sess, dict):
            errors.append({"stage": "session", "sourceIndex": si, "message": "must be an object"})
            continue
        key = sess.get("sessionKey")
        if not isinstance(key, str) or not key.strip():
            errors.append(
                {
                    "stage": "session",
                    "sourceIndex": si,
                    "message": "sessionKey must be a non-empty string",
                }
            )
        rounds = sess.get("conversations")
        if not isinstance(rounds, list):
            errors.append(
                {
                    "stage": "session",
                    "sourceIndex": si,
                    "sessionKey": key,
                    "message": "conversations must be a list",
                }
            )
            continue
        for ri, rnd in enumerate(rounds):
            where = {"sourceIndex": si, "sessionKey": key, "roundIndex": ri}
            if not isinstance(rnd, list) or not rnd:
                errors.append(
                    {"stage": "round", **where, "message": "a round must be a non-empty list"}
                )
                continue
            roles = set()
            for mi, msg in enumerate(rnd):
                at = {**where, "messageIndex": mi}
                if not isinstance(msg, dict):
                    errors.append({"stage": "message", **at, "message": "must be an object"})
                    continue
                role, content = msg.get("role"), msg.get("content")
                if not isinstance(role, str) or not role.strip():
                    errors.append(
                        {"stage": "message", **at, "message": "role must be a non-empty string"}
                    )
                if not isinstance(content, str) or not content.strip():
                    errors.append(
                        {"stage": "message", **at, "message": "content must be a non-empty string"}
                    )
                roles.add(role)
                ts = msg.get("timestamp")
                if ts is None:
                    unstamped += 1
                elif _timestamp_ms(ts, -1) < 0 or isinstance(ts, bool):
                    errors.append(
                        {"stage": "message", **at, "message": f"timestamp unreadable: {ts!r}"}
                    )
                else:
                    stamped += 1
            if strict_round_role and not {"user", "assistant"} <= roles:
                errors.append(
                    {
                        "stage": "round",
                        **where,
                        "message": "strict mode: a round needs a user and an assistant message",
                    }
                )
    if stamped and unstamped:
        errors.append(
            {
                "stage": "timestamp_consistency",
                "message": "timestamps must be on every message or on none",
            }
        )
    if errors:
        raise SeedValidationError(errors)
    return sessions


def run_seed(engine: Engine, body: SeedBody) -> dict[str, Any]:
    started = time.monotonic()
    sessions = validate(body.data, body.strict_round_role)
    scope = next((v for v in (body.scope, body.user_id) if v and v.strip()), "default")
    out_dir = Path(engine.settings.data_dir) / f"seed-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    store = Store(out_dir, engine.tz)
    clock = int(time.time() * 1000)
    counts = {
        "sessions_processed": 0,
        "rounds_processed": 0,
        "messages_processed": 0,
        "l0_recorded": 0,
    }
    try:
        for sess in sessions:
            session_id = sess.get("sessionId") or str(uuid.uuid4())
            for rnd in sess["conversations"]:
                messages = []
                for msg in rnd:
                    m = dict(msg)
                    if m.get("timestamp") is None and body.auto_fill_timestamps:
                        m["timestamp"] = clock
                        clock += 100
                    messages.append(m)
                inputs = to_l0_inputs(messages, scope, sess["sessionKey"], session_id)
                counts["l0_recorded"] += len(store.record_messages(inputs))
                counts["messages_processed"] += len(rnd)
                counts["rounds_processed"] += 1
            counts["sessions_processed"] += 1
    finally:
        store.close()
    return {
        **counts,
        "duration_ms": int((time.monotonic() - started) * 1000),
        "output_dir": str(out_dir),
    }
