"""The file-first write path both backends share, with no SQL in it: a write goes to the day's
JSONL file (fsync'ed) before the database, so the files alone can rebuild the index
(``reindex``) and a database that lost a commit is caught up from them at start-up.

``JournalWrites`` is mixed into ``sqlite.SqliteStore`` and ``postgres.PostgresStore``: it turns
records into journal lines, appends them, and hands them to the backend's own
``index_l0_lines`` / ``index_l1_line`` / ``apply_status_line``. It also keeps the in-process
side of the vector indexes (listeners told of written rows, the indexes a write leaves)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_tencentdb.store import files
from memory_tencentdb.store.base import RowListener
from memory_tencentdb.store.common import new_id, now_iso, text_hash, utc_iso
from memory_tencentdb.store.records import L0Input, L0Message, Memory
from memory_tencentdb.store.vector_index import VectorIndex
from memory_tencentdb.text.embedding_text import hash_input, l0_text
from memory_tencentdb.text.redact import redact, redact_obj


class JournalWrites:
    """Journal first, then the backend's index; needs ``data_dir``, ``tz``, ``_indexes``,
    ``_row_listeners`` and the backend's ``index_l0_lines``, ``l0_by_ids``, ``index_l1_line``
    and ``apply_status_line``."""

    data_dir: Path
    tz: tzinfo
    _indexes: dict[tuple[str, str], VectorIndex]
    _row_listeners: list[RowListener]

    if TYPE_CHECKING:  # the backend's own, SQL behind them

        def index_l0_lines(self, rows: list[dict[str, Any]], rel_file: str) -> list[int]: ...
        def l0_by_ids(self, ids: list[str]) -> list[L0Message]: ...
        def index_l1_line(self, r: dict[str, Any], rel_file: str) -> int: ...
        def apply_status_line(self, line: dict[str, Any]) -> None: ...

    # ----------------------------------------------------------------- messages

    def record_messages(self, messages: list[L0Input]) -> list[L0Message]:
        """Append messages to the day's JSONL (durable), then index them. Returns them stored."""
        if not messages:
            return []
        recorded = datetime.now(UTC)
        recorded_at = utc_iso(recorded)
        rel = files.day_file("conversations", recorded, self.tz)
        stored = [
            L0Message(
                id=new_id("l0"),
                scope=m.scope,
                session_key=m.session_key,
                session_id=m.session_id,
                role=m.role,
                content=redact(m.content),  # secrets never reach a file
                timestamp=m.timestamp,
                recorded_at=recorded_at,
                message_id=m.message_id,
                speaker=m.speaker,
                extra=redact_obj(m.extra) if m.extra else {},
                file=rel,
            )
            for m in messages
        ]
        stored = [
            replace(m, text_hash=text_hash(hash_input("l0", l0_text(m.content, m.speaker))))
            for m in stored
        ]
        lines = [m.journal_line() for m in stored]
        files.append_lines(self.data_dir / rel, lines)
        seqs = self.index_l0_lines(lines, rel)
        if len(seqs) == len(stored):  # fresh ids: every line was new
            return [replace(m, seq=s) for m, s in zip(stored, seqs, strict=True)]
        return self.l0_by_ids([m.id for m in stored])

    # ----------------------------------------------------------------- memories

    def write_memory(self, memory: Memory) -> Memory:
        """Append an L1 upsert to ``records/`` (durable), then index it. Returns it as stored
        (a memory whose id exists is replaced; the index keeps its first ``created_at``, so an
        update passes the original one)."""
        rel = files.day_file("records", datetime.now(UTC), self.tz)
        now = now_iso()
        memory = replace(
            memory,
            content=redact(memory.content),  # secrets never reach a file
            created_at=memory.created_at or now,
            updated_at=memory.updated_at or now,
            file=rel,
        )
        line = memory.journal_line()
        files.append_lines(self.data_dir / rel, [line])
        seq = self.index_l1_line(line, rel)
        return replace(memory, seq=seq, text_hash=text_hash(hash_input("l1", memory.content)))

    def set_memory_status(self, memory_id: str, status: str, superseded_by: str = "") -> None:
        """Mark a memory superseded or deleted (an append-only log line, then the index)."""
        rel = files.day_file("records", datetime.now(UTC), self.tz)
        line = {
            "op": "status",
            "id": memory_id,
            "status": status,
            "superseded_by": superseded_by,
            "at": now_iso(),
        }
        files.append_lines(self.data_dir / rel, [line])
        self.apply_status_line(line)

    def append_tombstones(self, ids: list[str], reason: str) -> None:
        """Mark memories deleted: one ``status`` line each in ``records/`` (durable), then the index.

        Deleted rows leave the keyword and vector indexes at once, so recall and search stop
        finding them with the answer of the request that deleted them."""
        if not ids:
            return
        at = now_iso()
        lines = [
            {
                "op": "status",
                "id": mid,
                "status": "deleted",
                "superseded_by": "",
                "at": at,
                "reason": reason,
            }
            for mid in ids
        ]
        rel = files.day_file("records", datetime.now(UTC), self.tz)
        files.append_lines(self.data_dir / rel, lines)
        for line in lines:
            self.apply_status_line(line)

    # ----------------------------------------------------------------- vector indexes in process

    def on_rows_written(self, listener: RowListener) -> None:
        """Call ``listener(layer, seqs)`` after rows are written or their text changes."""
        self._row_listeners.append(listener)

    def _written(self, layer: str, seqs: list[int]) -> None:
        for listener in self._row_listeners:
            listener(layer, seqs)

    def index(self, layer: str, model: str) -> VectorIndex | None:
        return self._indexes.get((layer, model))

    def _drop_from_indexes(self, layer: str, seqs: list[int], memory_only: bool = False) -> None:
        """``memory_only``: the indexes kept in tables were cleared in the write's transaction
        already (``_drop_stale_vectors``), only the in-memory ones are left."""
        for (lay, _), index in list(self._indexes.items()):
            if lay == layer and not (memory_only and getattr(index, "table", None)):
                index.remove(seqs)

    def _l1_indexed(self, seq: int, status: str, notify: bool = True) -> None:
        """After an L1 write: an inactive row leaves the vector indexes; an active one is
        reported to the embedder unless ``notify`` is False (see ``common.keeps_index_entry``)."""
        if status != "active":
            self._drop_from_indexes("l1", [seq])
        elif notify:
            self._written("l1", [seq])
