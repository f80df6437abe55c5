"""Where the offload's own messages go in the list an assemble answers with.

The levels (``levels.Shrinker``) decide which of the host's messages stay; this places the two
messages the offload adds among them. The history head (a task's history blocks or the
"messages left" note) goes right after the system prompt, so the list starts with a user
message; the task canvas goes just before the newest user message, so the prompt stays last,
or at the very end when the host appends the current turn (its prompt) after the list.
"""

from __future__ import annotations

from typing import Any

from memory_tencentdb.offload.levels import Unit
from memory_tencentdb.offload.messages import user_message


def answer_list(
    units: list[Unit], head: str, canvas: str, fmt: str, follows: bool
) -> list[dict[str, Any]]:
    """The kept units' messages in order, with ``head`` and ``canvas`` (when not empty) placed
    as above, each as a user message of the list's format."""
    last_user = max(
        (i for i, u in enumerate(units) if u.kind == "user" and not u.removed),
        default=None,
    )
    lead = 0
    while lead < len(units) and units[lead].kind == "system":
        lead += 1
    # Messages to insert after unit i (-1: before the first).
    inserts: dict[int, list[dict[str, Any]]] = {}
    if head:
        inserts.setdefault(lead - 1, []).append(user_message(head, fmt))
    if canvas:
        at = lead - 1 if last_user is None else max(last_user - 1, lead - 1)
        if follows:
            at = len(units) - 1
        inserts.setdefault(at, []).append(user_message(canvas, fmt))
    out = list(inserts.get(-1, []))
    for i, u in enumerate(units):
        if not u.removed:
            out.extend(item.out for item in u.items)
        out.extend(inserts.get(i, []))
    return out
