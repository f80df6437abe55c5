"""PostgreSQL connections: psycopg, autocommit, statements in psycopg's own ``%s`` placeholders.

``Conn`` is the one connection shape the store's code calls (``execute``, ``executemany``);
``ReaderPool`` bounds the read connections of a gateway; ``PooledReader`` runs each read
statement on whichever pooled connection is free.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import psycopg


class Conn:
    """A psycopg connection (autocommit; ``BEGIN``/``COMMIT`` are the store's)."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        if params is None:
            return self.raw.execute(sql)  # no parameters: a literal % is sent as it is
        return self.raw.execute(sql, params)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> Any:
        cur = self.raw.cursor()
        cur.executemany(sql, seq)
        return cur

    @property
    def usable(self) -> bool:
        return not (self.raw.closed or self.raw.broken)

    def close(self) -> None:
        self.raw.close()


class ReaderPool:
    """At most ``size`` autocommit connections for reads, shared by every thread.

    A connection is taken for one statement only: psycopg's client-side cursors hold the whole
    result once ``execute`` returns, so the connection goes back at once and the caller reads
    its rows afterwards. Before, each thread kept a connection of its own (the HTTP thread pool
    alone has 40), up to ~45 per gateway; several gateways on one server ran into its
    ``max_connections``. A statement that finds every connection busy waits for one.
    """

    def __init__(self, connect: Callable[[], Conn], size: int) -> None:
        self._connect = connect
        self.size = size
        self._idle: list[Conn] = []
        self._all: list[Conn] = []
        self._cond = threading.Condition()
        self._opening = 0

    def acquire(self) -> Conn:
        with self._cond:
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    if conn.usable:
                        return conn
                    self._all.remove(conn)  # the server restarted or dropped it
                if len(self._all) + self._opening < self.size:
                    self._opening += 1
                    break
                self._cond.wait()
        try:
            conn = self._connect()  # outside the lock: connecting takes milliseconds
        except BaseException:
            with self._cond:
                self._opening -= 1
                self._cond.notify()
            raise
        with self._cond:
            self._opening -= 1
            self._all.append(conn)
        return conn

    def release(self, conn: Conn) -> None:
        with self._cond:
            if conn.usable:
                self._idle.append(conn)
            elif conn in self._all:
                self._all.remove(conn)
            self._cond.notify()

    @contextlib.contextmanager
    def connection(self) -> Iterator[Conn]:
        conn = self.acquire()
        try:
            yield conn
        finally:
            self.release(conn)

    @property
    def opened(self) -> int:
        with self._cond:
            return len(self._all)

    def close(self) -> None:
        with self._cond:
            conns, self._all, self._idle = self._all, [], []
        for conn in conns:
            with contextlib.suppress(psycopg.Error):
                conn.close()


class PooledReader:
    """What ``PostgresStore.reader()`` hands out: ``Conn``'s interface, each statement on
    whichever pooled connection is free."""

    usable = True

    def __init__(self, pool: ReaderPool) -> None:
        self._pool = pool

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        with self._pool.connection() as conn:
            return conn.execute(sql, params)

    def executemany(self, sql: str, seq: Sequence[Sequence[Any]]) -> Any:
        with self._pool.connection() as conn:
            return conn.executemany(sql, seq)
