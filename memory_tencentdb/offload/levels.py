"""L3: shrink a message list against its budget, the original's way, with nothing lost.

The list is cut into units that must stay together (an assistant message with tool calls and
all their results; any other message alone). Then, by rising pressure:

- always: a result already answered with a stub, or over ``toolResultKeepTokens`` outside the
  newest tool unit, becomes its stub (the host replays its transcript unchanged);
- mild (>= ``mildOffloadRatio`` x budget): results in the oldest ``mildOffloadScanRatio`` of the
  list become stubs, highest score and largest first, until under the mild line;
- aggressive (>= ``aggressiveCompressRatio``): whole units leave from the head, never the last
  user message or what follows it, down to 0.85 x that line; the canvases of the tasks they
  belonged to stand in (history metadata);
- emergency (>= ``emergencyCompressRatio`` or over budget): more units leave, then the largest
  messages are stubbed or truncated, down to ``emergencyTargetRatio``; over budget still, the
  newest turn's tool units leave, oldest first.

The fixed part is never touched by any level: the system messages (the host's prompt) and the
turn's request (the newest user message; during a multi-call turn the same message, while the
turn's tool calls go on). When the fixed part alone exceeds the budget, what is left is the
smallest valid list that keeps it, and ``Outcome.fixed_tokens`` says how large it is.

Before a result or message is stubbed, truncated or removed, ``Recorder`` has written its ref
and JSONL row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from memory_tencentdb.offload.messages import (
    Call,
    Msg,
    compact_call_arguments,
    stub_message,
    synthetic_result,
    token_parts,
    truncated_text_message,
)
from memory_tencentdb.offload.records import OffloadRow, strip_id

OVERHEAD = 4


def norm(text: str) -> str:
    return " ".join(
        text.split()
    )  # tokens per message for role and framing (OpenAI's own estimate: 3-4)


def _starts(unit: Unit, key: str) -> bool:
    m = unit.items[0].msg
    return m is not None and norm(m.body[: len(key) * 2 + 200]).startswith(key)


class Recorder(Protocol):
    def row(self, tool_call_id: str) -> OffloadRow | None: ...
    def record_result(self, msg: Msg, call: Call | None) -> OffloadRow: ...
    def record_message(self, msg: Msg) -> OffloadRow: ...
    def stub(self, row: OffloadRow) -> str: ...
    def count(self, text: str) -> int: ...
    def count_parts(self, parts: list[str]) -> int: ...


@dataclass
class Item:
    msg: Msg | None
    out: dict[str, Any]
    tokens: int
    state: str = "orig"  # orig | stub | truncated | synthetic | compacted


@dataclass
class Unit:
    kind: str  # system | user | plain | tools
    items: list[Item]
    calls: list[Call] = field(default_factory=list)
    results: set[str] = field(default_factory=set)
    protected: bool = False  # never removed by aggressive (the request and what follows it)
    fixed: bool = False  # never removed nor truncated (system prompt, the turn's request)
    removed: bool = False

    @property
    def tokens(self) -> int:
        return sum(i.tokens for i in self.items)


@dataclass
class Thresholds:
    budget: int
    mild: float
    aggressive: float
    emergency: float
    emergency_target: float
    scan_ratio: float
    keep_tokens: int


@dataclass
class Outcome:
    units: list[Unit]
    level: str
    stubbed: list[OffloadRow] = field(default_factory=list)
    removed: list[OffloadRow] = field(default_factory=list)
    truncated: int = 0
    orphans: int = 0
    synthetic: int = 0
    fixed_tokens: int = 0  # the system messages and the request (what no level may cut)


class Shrinker:
    def __init__(
        self,
        rec: Recorder,
        fmt: str,
        th: Thresholds,
        fixed: int,
        task_start: str | None = None,
        turn_prompt: str | None = None,
        request_follows: bool = False,
    ) -> None:
        self.rec, self.fmt, self.th, self.fixed = rec, fmt, th, fixed
        self.task_start = task_start  # the prompt that began the active task (L1.5)
        self.turn_prompt = turn_prompt  # the newest prompt the host named (normalised)
        self.request_follows = request_follows  # the host appends the request after the list
        self.out = Outcome([], "none")
        self.total = 0

    # ---------------------------------------------------------------- building

    def _item(self, m: Msg) -> Item:
        return Item(m, m.raw, self.rec.count_parts(m.parts) + OVERHEAD)

    def _tokens(self, raw: dict[str, Any]) -> int:
        return self.rec.count_parts(token_parts(raw)) + OVERHEAD

    def build(self, msgs: list[Msg]) -> list[Unit]:
        units: list[Unit] = []
        owner: dict[str, Unit] = {}
        for m in msgs:
            if m.role == "tool":
                u = owner.get(m.key or "")
                if u is None or (m.key in u.results):
                    self.rec.record_result(m, None)  # an orphan leaves; its text is kept on disk
                    self.out.orphans += 1
                    continue
                u.items.append(self._item(m))
                u.results.add(m.key or "")
            elif m.role == "assistant" and m.calls:
                u = Unit("tools", [self._item(m)], calls=list(m.calls))
                for c in m.calls:
                    owner[strip_id(c.id)] = u
                units.append(u)
            else:
                kind = {"system": "system", "user": "user"}.get(m.role, "plain")
                units.append(Unit(kind, [self._item(m)]))
        for u in units:
            for c in u.calls:
                if strip_id(c.id) not in u.results:
                    row = self.rec.row(c.id)
                    text = (
                        self.rec.stub(row)
                        if row
                        else "[No result for this tool call is in the context.]"
                    )
                    raw = synthetic_result(c, self.fmt, text)
                    u.items.append(Item(None, raw, self._tokens(raw), "synthetic"))
                    u.results.add(strip_id(c.id))
                    self.out.synthetic += 1
        users = [i for i, u in enumerate(units) if u.kind == "user"]
        last_user = users[-1] if users else None
        # The request: the newest user message, and the one that carries the turn's prompt when
        # the host put another user message after it (Hermes adds a todo snapshot after a
        # compaction); both stay whole. Not in the list when the host appends it itself.
        request = {last_user} if last_user is not None and not self.request_follows else set()
        if self.turn_prompt and not self.request_follows:
            key = self.turn_prompt[:200]
            hit = next((i for i in reversed(users) if _starts(units[i], key)), None)
            if hit is not None:
                request.add(hit)
        first = min(request, default=last_user)
        for i, u in enumerate(units):
            u.fixed = u.kind == "system" or i in request
            u.protected = u.fixed or (first is not None and i >= first)
        self.out.units = units
        self.out.fixed_tokens = sum(u.tokens for u in units if u.fixed)
        self.total = self.fixed + sum(u.tokens for u in units)
        return units

    # ---------------------------------------------------------------- actions

    def _call_of(self, unit: Unit, item: Item) -> Call | None:
        key = item.msg.key if item.msg else None
        return next((c for c in unit.calls if strip_id(c.id) == key), None)

    def stub_item(self, unit: Unit, item: Item, row: OffloadRow | None = None) -> bool:
        if unit.removed or item.msg is None or item.state != "orig" or item.msg.role != "tool":
            return False
        row = row or self.rec.row(item.msg.call_id or "")
        if row is None:
            row = self.rec.record_result(item.msg, self._call_of(unit, item))
        raw = stub_message(item.msg, self.fmt, self.rec.stub(row))
        tokens = self._tokens(raw)
        if tokens >= item.tokens:
            return False
        item.out = raw
        self.total -= item.tokens - tokens
        item.tokens, item.state = tokens, "stub"
        self.out.stubbed.append(row)
        self._compact_calls(unit)
        return True

    def _compact_calls(self, unit: Unit) -> None:
        """Once every result of an assistant's calls is a stub, its large arguments go too."""
        head = unit.items[0]
        if head.state != "orig" or head.msg is None:
            return
        if any(i.state == "orig" for i in unit.items[1:]):
            return
        compact: dict[str, dict[str, Any]] = {}
        for c in unit.calls:
            args = c.arguments if isinstance(c.arguments, str) else str(c.arguments)
            if len(args) > 400:
                row = self.rec.row(c.id)
                compact[c.id] = {
                    "_offloaded": True,
                    "tool_call": row.tool_call if row else c.name,
                    "node_id": row.node_id if row else None,
                }
        if not compact:
            return
        raw = compact_call_arguments(head.msg, self.fmt, compact)
        tokens = self._tokens(raw)
        if tokens < head.tokens:
            head.out = raw
            self.total -= head.tokens - tokens
            head.tokens, head.state = tokens, "compacted"

    def remove_unit(self, unit: Unit) -> None:
        for item in unit.items:
            m = item.msg
            if m is None:
                continue
            if m.role == "tool":
                row = self.rec.row(m.call_id or "") or self.rec.record_result(
                    m, self._call_of(unit, item)
                )
                self.out.removed.append(row)
            elif m.body.strip():
                self.rec.record_message(m)
        unit.removed = True
        self.total -= unit.tokens

    def truncate_item(self, item: Item, keep_tokens: int, system: bool = False) -> bool:
        m = item.msg
        if m is None or item.state in ("stub", "synthetic", "truncated"):
            return False
        if m.role == "system" and not system:
            return False
        text = m.body
        if not text.strip():
            return False
        row = self.rec.record_message(m)
        # Roughly keep_tokens worth of the start, on a character budget.
        keep_chars = max(200, int(len(text) * keep_tokens / max(item.tokens, 1)))
        note = (
            f"\n[Truncated for context: ~{item.tokens} tokens. Full text:"
            f' memory_tencentdb_offload_read {{"tool_call_id": "{row.tool_call_id}"}}]'
        )
        raw = truncated_text_message(m, self.fmt, text[:keep_chars] + note)
        tokens = self._tokens(raw)
        if tokens >= item.tokens:
            return False
        item.out = raw
        self.total -= item.tokens - tokens
        item.tokens, item.state = tokens, "truncated"
        self.out.truncated += 1
        return True

    # ---------------------------------------------------------------- levels

    def baseline(self) -> None:
        tools = [u for u in self.out.units if u.kind == "tools"]
        newest = tools[-1] if tools else None
        for u in tools:
            for item in u.items[1:]:
                if item.msg is None or item.state != "orig":
                    continue
                row = self.rec.row(item.msg.call_id or "")
                if row is None:  # a step the host never reported: row, ref and canvas node now
                    row = self.rec.record_result(item.msg, self._call_of(u, item))
                if (row is not None and row.offloaded is True) or (
                    u is not newest and item.tokens > self.th.keep_tokens
                ):
                    self.stub_item(u, item, row)

    def mild(self) -> bool:
        if self.total < self.th.mild:
            return False
        n = sum(len(u.items) for u in self.out.units)
        limit = int(n * self.th.scan_ratio)
        seen = 0
        cands: list[tuple[float, int, Unit, Item]] = []
        for u in self.out.units:
            for item in u.items:
                seen += 1
                if seen > limit:
                    break
                if u.removed:
                    continue
                if item.msg is not None and item.msg.role == "tool" and item.state == "orig":
                    row = self.rec.row(item.msg.call_id or "")
                    score = row.score if row else 5
                    cands.append((score, item.tokens, u, item))
        # The original's score cascade: for t = 7 .. 1 stub every candidate scoring >= t, and
        # stop after a level once 10 were stubbed (and we are under the mild line). Stubs stay
        # (rows marked offloaded are re-applied), so later calls keep the same, stable prefix.
        hit = 0
        cands.sort(key=lambda c: (-c[0], -c[1]))
        for t in range(7, 0, -1):
            left = []
            for c in cands:
                if c[0] >= t and c[3].state == "orig":
                    if self.stub_item(c[2], c[3]):
                        hit += 1
                    continue  # stubbed, or its stub is no shorter: not tried again
                left.append(c)
            cands = left
            if hit >= 10 and self.total < self.th.mild:
                break
        return hit > 0

    def _remove_head(self, target: float, keep_units: int = 2) -> bool:
        hit = False
        live = [u for u in self.out.units if not u.removed and u.kind != "system"]
        left = len(live)
        for u in live:
            if self.total <= target or left <= keep_units:
                break
            if u.protected:
                break
            self.remove_unit(u)
            left -= 1
            hit = True
        return hit

    def aggressive(self) -> bool:
        if self.total < self.th.aggressive:
            return False
        return self._remove_head(self.th.aggressive * 0.85)

    def emergency(self) -> bool:
        if self.total < self.th.emergency and self.total <= self.th.budget:
            return False
        target = self.th.emergency_target
        hit = self._remove_head(target)
        # Largest first: results to stubs, long texts truncated; never the fixed part (the
        # system prompt, the turn's request). Each item is tried once (sorted once: linear
        # after the sort, where picking the maximum again per step was quadratic).
        live = [
            (item.tokens, n, u, item)
            for n, (u, item) in enumerate(
                (u, item)
                for u in self.out.units
                if not u.removed and not u.fixed
                for item in u.items
            )
            if item.state in ("orig", "compacted") and item.tokens > 150 and item.msg is not None
        ]
        live.sort(key=lambda x: (-x[0], x[1]))
        for _, _, u, item in live:
            if self.total <= target:
                break
            if u.removed or item.msg is None:
                continue
            if item.msg.role == "tool":
                done = self.stub_item(u, item)
            else:
                done = self.truncate_item(item, max(100, int(target / 8)))
            hit = hit or done
        if self.total > self.th.budget:
            # The newest turn itself is too big: its tool units go, oldest first, the newest
            # last; the fixed part (system, the request) stays whatever it costs.
            rest = [u for u in self.out.units if not u.removed and not u.fixed]
            for u in rest:
                if self.total <= self.th.budget:
                    break
                self.remove_unit(u)
                hit = True
        return hit

    def fit(self, limit: float) -> bool:
        """Down to ``limit`` after the levels ran (what the caller adds next did not fit):
        the units that may go leave, oldest first; the fixed part stays."""
        hit = False
        for u in self.out.units:
            if self.total <= limit:
                break
            if u.removed or u.fixed:
                continue
            self.remove_unit(u)
            hit = True
        return hit

    def fold_old_tasks(self) -> bool:
        """Above the mild line, the turns of tasks finished before the active one leave first:
        the canvases of those tasks stand in for them (history metadata), their results and
        texts are on disk. Only turns before the user message that began the active task."""
        if self.total < self.th.mild or not self.task_start:
            return False
        start = None
        for i, u in enumerate(self.out.units):
            m = u.items[0].msg
            if u.kind == "user" and m is not None and norm(m.body)[:300] == self.task_start:
                start = i
        if not start:
            return False
        hit = False
        for u in self.out.units[:start]:
            if u.kind != "system" and not u.removed and not u.protected:
                self.remove_unit(u)
                hit = True
        return hit

    def run(self) -> Outcome:
        self.baseline()
        levels = []
        if self.fold_old_tasks():
            levels.append("aggressive")
        if self.mild():
            levels.append("mild")
        if self.aggressive():
            levels.append("aggressive")
        if self.emergency():
            levels.append("emergency")
        order = ["mild", "aggressive", "emergency"]
        self.out.level = (
            max(levels, key=order.index) if levels else ("mild" if self.out.stubbed else "none")
        )
        return self.out
