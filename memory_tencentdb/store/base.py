"""``MemoryStore``: the one interface the services hold a store by.

Every backend (``SqliteStore`` in ``store/sqlite/``, ``PostgresStore`` in ``store/postgres/``;
chosen by ``store/backends.py``) implements it on its own: siblings, neither inheriting the
other, each with its SQL and schema. Nothing above ``store/`` names a backend class. The
methods are grouped by concern, in the order of the sections below:

- lifecycle: closing, transactions, the ``meta`` key-value table;
- messages (L0): recording captured messages and reading them back;
- memories (L1): writing, superseding and reading memories;
- keyword search: BM25 over the same jieba tokens on every backend;
- vectors: stored embeddings and the vector index of each layer x model;
- pipeline state: the L1/L2/L3 cursors and counters, and the per-session work claim;
- admin: what the operations a user runs need (list, count, forget, export, purge, retention);
- browse: the Memory Hub page's counts and pages.

Every method takes and returns typed records (``records.py``), sequence numbers and ids, never
a connection or a row. A method declared here with a body is an optional capability: its
default is right for a store that one gateway owns, and a backend overrides it where it can do
better or must do otherwise (as mem0's ``VectorStoreBase`` leaves optional operations to its
subclasses). ``tests/test_store_contract.py`` runs every method on every backend.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from datetime import tzinfo
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from memory_tencentdb.store.records import (
    KeywordHit,
    L0Input,
    L0Message,
    Memory,
    ScopeCounts,
    ScopeState,
    SessionBacklog,
    SessionState,
)
from memory_tencentdb.store.vector_index import VectorIndex

RowListener = Callable[[str, list[int]], None]


class MemoryStore(abc.ABC):
    """What a gateway's services need of a store (see the module docstring for the concerns)."""

    backend: ClassVar[str]  # the registry's name: "sqlite" or "postgres"
    # Several gateways share this store: each claims a session's work (``claim_session``), and
    # one gateway's pipeline also runs the work another left (the scheduler's shared loop).
    shared: ClassVar[bool] = False
    # The one vector index kind the store always uses (None: ``open_index`` picks per layer).
    vector_index_kind: ClassVar[str | None] = None
    data_dir: Path  # the gateway's data directory (its journal files)
    tz: tzinfo  # the day boundaries of the journal files
    db_path: Path  # SQLite's database file (a PostgreSQL store keeps none there)
    binding: Any  # the driver in use and what it can do (``connection.Binding``)

    # ================================================================= lifecycle

    @abc.abstractmethod
    def close(self) -> None:
        """Release every connection (the store is not used afterwards)."""

    @abc.abstractmethod
    def transaction(self) -> AbstractContextManager[None]:
        """Every store write inside the block commits together, or none does (it raises).
        Nested blocks join the outer one; other threads' writes wait until it ends."""

    def problems(self) -> list[str]:
        """What is wrong with the store now, for the gateway's health (its degraded reasons).
        Default: nothing a store can see by itself."""
        return []

    @abc.abstractmethod
    def get_meta(self, key: str) -> str | None: ...

    @abc.abstractmethod
    def set_meta(self, key: str, value: str) -> None: ...

    # ================================================================= messages (L0)

    @abc.abstractmethod
    def record_messages(self, messages: list[L0Input]) -> list[L0Message]:
        """Journal the messages (durable), then index them; returns them as stored."""

    @abc.abstractmethod
    def index_l0_lines(self, rows: list[dict[str, Any]], rel_file: str) -> list[int]:
        """Index L0 journal lines (reindex, import); returns the sequence numbers of new rows."""

    @abc.abstractmethod
    def l0_rows(self, seqs: Iterable[int]) -> dict[int, L0Message]:
        """Messages by sequence number (those that exist)."""

    def l0_with_roles(self, seqs: Iterable[int], roles: tuple[str, ...]) -> set[int]:
        """Those of the messages ``seqs`` whose role is one of ``roles``. Default: read the whole
        rows; a backend may read the role alone (a conversation search asks it of every
        candidate: ``retrieval.retrieve``)."""
        return {seq for seq, m in self.l0_rows(seqs).items() if m.role in roles}

    def l0_sessions(self, seqs: Iterable[int]) -> dict[int, tuple[str, str, str]]:
        """``(scope, session_key, session_id)`` of messages by sequence number. Default: read
        the whole rows; a backend may read the three columns alone."""
        return {
            seq: (m.scope, m.session_key, m.session_id) for seq, m in self.l0_rows(seqs).items()
        }

    @abc.abstractmethod
    def l0_by_ids(self, ids: list[str]) -> list[L0Message]:
        """Messages by record id, in the order they were said."""

    @abc.abstractmethod
    def l0_seq(self, record_id: str) -> int | None:
        """The sequence number of a message now (a rebuild renumbers messages)."""

    @abc.abstractmethod
    def max_l0_seq(self) -> int: ...

    @abc.abstractmethod
    def captured_message_ids(
        self, scope: str, session_key: str, message_ids: list[str]
    ) -> set[str]:
        """Which of the host's message ids this session has stored already."""

    @abc.abstractmethod
    def l0_after(self, scope: str, session_key: str, after_seq: int, limit: int) -> list[L0Message]:
        """Messages of one session after ``after_seq``, in order (what L1 extracts next)."""

    @abc.abstractmethod
    def l0_before(
        self, scope: str, session_key: str, before_seq: int, limit: int
    ) -> list[L0Message]:
        """User and assistant messages of one session before ``before_seq``, newest first."""

    @abc.abstractmethod
    def count_l0_between(self, scope: str, session_key: str, after_seq: int, upto: int) -> int: ...

    @abc.abstractmethod
    def count(self, table: str, scope: str | None = None) -> int:
        """Rows of ``l0_messages`` or ``l1_memories`` (every status), of one scope or all."""

    # ================================================================= memories (L1)

    @abc.abstractmethod
    def write_memory(self, memory: Memory) -> Memory:
        """Journal an upsert (durable), then index it; returns the memory as stored."""

    @abc.abstractmethod
    def set_memory_status(self, memory_id: str, status: str, superseded_by: str = "") -> None:
        """Mark a memory superseded or deleted (journal line, then the index)."""

    @abc.abstractmethod
    def index_l1_line(self, r: dict[str, Any], rel_file: str) -> int:
        """Index an L1 journal upsert line; returns its sequence number."""

    @abc.abstractmethod
    def apply_status_line(self, line: dict[str, Any]) -> None:
        """Index an L1 journal status line (it leaves the search indexes unless active)."""

    @abc.abstractmethod
    def l1_rows(self, seqs: Iterable[int]) -> dict[int, Memory]:
        """Memories by sequence number (those that exist, whatever their status)."""

    @abc.abstractmethod
    def l1_contents(self, seqs: Iterable[int]) -> dict[int, str]:
        """Memories' text by sequence number: what telling a memory's language needs on the
        recall path, without decoding whole rows."""

    @abc.abstractmethod
    def memory_by_id(self, memory_id: str) -> Memory | None: ...

    @abc.abstractmethod
    def memories_by_ids(self, ids: list[str]) -> list[Memory]:
        """Memories by id (those that exist, whatever their status), in no particular order."""

    @abc.abstractmethod
    def memory_history(self, memory_id: str) -> list[Memory]:
        """Memories this one replaced (directly or transitively), newest first."""

    @abc.abstractmethod
    def l1_seq(self, memory_id: str) -> int | None: ...

    @abc.abstractmethod
    def max_l1_seq(self, scope: str) -> int: ...

    @abc.abstractmethod
    def l1_after(self, scope: str, after_seq: int, limit: int) -> list[Memory]:
        """Active memories of a scope stored after ``after_seq``, oldest first (L2's input)."""

    @abc.abstractmethod
    def count_l1_after(self, scope: str, after_seq: int) -> int: ...

    @abc.abstractmethod
    def top_memories(self, scope: str, type_: str, limit: int) -> list[Memory]:
        """Active memories of one type, strongest first (priority, then newest)."""

    @abc.abstractmethod
    def recent_slot_memories(self, scope: str, limit: int) -> list[Memory]:
        """The newest active memories that carry a rules slot (``metadata.slot``)."""

    # ================================================================= keyword search

    @abc.abstractmethod
    def keyword_search(
        self, layer: str, scope: str, terms: list[str], k: int, session_key: str | None = None
    ) -> list[KeywordHit]:
        """BM25 over the jieba tokens within one scope; score in (0, 1), higher is better.
        L1 searches active memories only."""

    @abc.abstractmethod
    def term_stats(self, layer: str, terms: list[str]) -> tuple[int, dict[str, int]]:
        """``(documents, {term: documents containing it})`` over all scopes (for IDF)."""

    @abc.abstractmethod
    def indexed_tokens(self, layer: str, rowids: list[int]) -> dict[int, set[str]]:
        """The keyword-index tokens of rows (which query terms each one matched)."""

    @abc.abstractmethod
    def rebuild_fts(self) -> None:
        """Re-tokenize every row (the tokenizer changed)."""

    # ================================================================= vectors

    @abc.abstractmethod
    def missing_vectors(
        self,
        layer: str,
        model: str,
        limit: int,
        after: int = 0,
        rowids: list[int] | None = None,
        skip_roles: tuple[str, ...] = (),
    ) -> list[tuple[int, str, str, str]]:
        """``(seq, scope, text_hash, text)`` of rows with no vector for ``model``: the next
        ``limit`` after ``after``, or those among ``rowids``; L0 rows of the ``skip_roles`` are
        never among them (the model does not embed them: ``vectorizer.skipped_roles``)."""

    @abc.abstractmethod
    def count_missing_vectors(
        self, layer: str, model: str, skip_roles: tuple[str, ...] = ()
    ) -> int: ...

    @abc.abstractmethod
    def on_rows_written(self, listener: RowListener) -> None:
        """Call ``listener(layer, seqs)`` after rows are written or their text changes."""

    @abc.abstractmethod
    def save_vectors(
        self, layer: str, model: str, items: list[tuple[int, str, str, np.ndarray]]
    ) -> None:
        """Store vectors ``(seq, scope, text_hash, vector)`` and add them to the open index."""

    @abc.abstractmethod
    def stored_vectors(
        self, layer: str, model: str, text_hashes: list[str]
    ) -> dict[str, np.ndarray]:
        """The vectors ``model`` already has for these texts (by ``text_hash``), whichever row
        they were made for: the same text in another scope, or said again, needs no model."""

    @abc.abstractmethod
    def vector_counts(self) -> dict[str, int]:
        """Stored vectors per model id."""

    @abc.abstractmethod
    def open_index(self, layer: str, model: str, dim: int, backend: str) -> VectorIndex:
        """Build (or attach) the vector index of ``layer`` x ``model`` from stored vectors;
        ``backend`` is the configured index kind (a backend may have only one)."""

    @abc.abstractmethod
    def index(self, layer: str, model: str) -> VectorIndex | None:
        """The index ``open_index`` opened, if it did."""

    @abc.abstractmethod
    def numpy_index_bytes(self, layer: str, dim: int) -> int:
        """What an in-memory index of ``layer`` would take for one model of ``dim``."""

    # ================================================================= pipeline state

    @abc.abstractmethod
    def session_state(self, scope: str, session_key: str) -> SessionState: ...

    @abc.abstractmethod
    def scope_state(self, scope: str) -> ScopeState: ...

    @abc.abstractmethod
    def scope_states(self) -> list[ScopeState]: ...

    @abc.abstractmethod
    def update_session_state(self, scope: str, session_key: str, **values: Any) -> None:
        """Set columns (``col=v``) or add to them (``col__add=n``), creating the row if new."""

    @abc.abstractmethod
    def update_scope_state(self, scope: str, **values: Any) -> None: ...

    @abc.abstractmethod
    def complete_chunk(
        self,
        scope: str,
        session_key: str,
        to_seq: int,
        to_id: str,
        stored: int,
        last_scene: str,
        last_active: float,
    ) -> None:
        """Advance the L1 cursor past an applied chunk, with the counters it feeds, atomically."""

    @contextlib.contextmanager
    def claim_session(self, scope: str, session_key: str) -> Iterator[bool]:
        """Hold the right to extract one session's messages; yields whether it is held.
        Default: always held (one gateway owns the store); a shared store locks the session."""
        yield True

    @abc.abstractmethod
    def backlog_sessions(self) -> list[SessionBacklog]:
        """Sessions with messages past their L1 cursor (or a plan left half-applied)."""

    @abc.abstractmethod
    def reconcile_pipeline(self, has_scenes: Callable[[str], bool]) -> list[str]:
        """Make cursors agree with renumbered rows after a rebuild; returns what changed."""

    # ================================================================= admin

    @abc.abstractmethod
    def list_memories(
        self,
        scope: str | None,
        *,
        type_: str | None = None,
        status: str = "active",
        since: str | None = None,
        session_key: str | None = None,
        scene: str | None = None,
        min_priority: int | None = None,
        limit: int = 50,
        before_seq: int | None = None,
    ) -> list[Memory]:
        """Memories newest first; ``status`` "active", "superseded", "deleted", "history"
        (all but deleted) or "all"; optionally of one type, session, scene, or a priority and
        up, or changed since a time; ``before_seq`` continues a previous page (the operations
        API and the Memory Hub page both list through it)."""

    @abc.abstractmethod
    def scope_counts(self) -> list[ScopeCounts]:
        """Every scope that has messages or memories, with its counts."""

    @abc.abstractmethod
    def history_ids(self, ids: list[str]) -> list[str]:
        """Ids of every older version behind ``ids`` (rows they superseded, transitively)."""

    @abc.abstractmethod
    def count_versions(self, memory_id: str) -> int:
        """How many stored older versions (``<id>.vN``) a memory has."""

    @abc.abstractmethod
    def append_tombstones(self, ids: list[str], reason: str) -> None:
        """Mark memories deleted (journal lines, then the index, which they leave at once)."""

    @abc.abstractmethod
    def deleted_memories(self) -> list[Memory]: ...

    @abc.abstractmethod
    def iter_memories(self, scope: str | None, batch: int = 2000) -> Iterator[Memory]:
        """Every memory (history included) in sequence order, for export."""

    @abc.abstractmethod
    def iter_messages(self, scope: str | None, batch: int = 2000) -> Iterator[L0Message]:
        """Every message in sequence order, for export."""

    @abc.abstractmethod
    def existing_ids(self, layer: str, ids: list[str]) -> set[str]: ...

    @abc.abstractmethod
    def memory_fingerprint(self, memory_id: str) -> tuple[str, str, str] | None:
        """``(content, status, updated_at)``: what import compares to stay idempotent."""

    @abc.abstractmethod
    def cited_l0_ids(self) -> set[str]:
        """Message ids that a live memory (active or history) cites as evidence."""

    @abc.abstractmethod
    def delete_orphan_vectors(self) -> int:
        """Drop stored vectors no live row points at (they encode forgotten text)."""

    def vacuum(self) -> None:
        """Rewrite storage so freed pages (which still hold old text) are gone. Default:
        nothing (a server's storage is its administrator's)."""
        return None

    @abc.abstractmethod
    def layer_sizes(self) -> dict[str, int]:
        """Rows per layer: ``l0_messages``, ``l1_active``, ``l1_history``, ``vectors``."""

    @abc.abstractmethod
    def delete_l0(self, record_ids: list[str]) -> int:
        """Remove messages from the index (and its search indexes); returns how many."""

    @abc.abstractmethod
    def delete_l1(self, ids: list[str]) -> int:
        """Remove memories from the index (and its search indexes); returns how many."""

    def drop_vector_indexes(self) -> list[str]:
        """Drop index tables rebuilt from ``vectors`` at the next start (offline purge);
        returns their names. Default: none kept apart from ``vectors``."""
        return []

    @abc.abstractmethod
    def last_message_per_session(
        self, messages: list[dict[str, Any]]
    ) -> dict[tuple[str, str], tuple[int, str]]:
        """``{(scope, session_key): (seq, record id)}`` of the newest of ``messages``."""

    @abc.abstractmethod
    def l0_recorded_before(self, cutoff_iso: str) -> list[tuple[str, int]]:
        """``(record id, seq)`` of messages recorded before ``cutoff_iso`` (retention)."""

    @abc.abstractmethod
    def unextracted_l0_ids(self, ids: list[str]) -> set[str]:
        """Those of ``ids`` that L1 has not read yet (past their session's cursor)."""

    def bulk(self) -> AbstractContextManager[None]:
        """Many writes in one transaction (offline imports). Default: ``transaction()``."""
        return self.transaction()

    @abc.abstractmethod
    def text_in_live_rows(self, text: str) -> bool:
        """Whether a live memory or a message contains ``text`` (purge's check)."""

    # ================================================================= browse (Memory Hub)

    @abc.abstractmethod
    def type_priority_counts(self, scope: str) -> list[tuple[str, int, int]]:
        """``(type, priority, count)`` of the scope's active memories."""

    @abc.abstractmethod
    def conversation_sessions(
        self, scope: str, limit: int, offset: int
    ) -> tuple[int, list[dict[str, Any]]]:
        """How many sessions the scope's messages belong to, and one page of them, the most
        recently recorded first: ``{session_key, messages, first, last}``."""

    @abc.abstractmethod
    def session_messages(
        self, scope: str, session_key: str, after_seq: int | None, limit: int
    ) -> list[L0Message]:
        """One page of a session's messages in the order they were recorded."""

    @abc.abstractmethod
    def memories_with_content(self, scope: str, texts: list[str], limit: int) -> list[Memory]:
        """The scope's active memories whose text is exactly one of ``texts``."""

    @abc.abstractmethod
    def session_count(self, scope: str) -> int: ...

    @abc.abstractmethod
    def l1_fingerprint(self, scope: str) -> tuple[int, int]:
        """``(active count, highest sequence number)`` of a scope's memories."""


def abstract_methods() -> list[str]:
    """The names every backend must implement (what the contract test checks it runs)."""
    return sorted(MemoryStore.__abstractmethods__)
