"""The pgvector index scores L1 as the SQLite default does (centred cosines), on a real
PostgreSQL: same neighbours and scores as ``NumpyIndex(centre=True)``, and the per-scope sums
behind the mean stay exact through replaced and removed rows, and are rebuilt for a table made
before they existed. (``score_rows`` reads the stored memories' canonical vectors, so it is
covered through the gateway: the recall suites marked ``both_backends``.)"""

from __future__ import annotations

from datetime import UTC

import numpy as np
import pytest

from memory_tencentdb.store.vector_index import NumpyIndex
from tests.support import postgres

pytest.importorskip("psycopg")
pytest.importorskip("pgserver")


def _unit(rng: np.random.Generator, n: int, dim: int, shared: np.ndarray) -> np.ndarray:
    """Vectors in a narrow cone around ``shared``, like a small embedding model's."""
    v = shared + 0.35 * rng.standard_normal((n, dim))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def store(tmp_path):
    from memory_tencentdb.store.postgres import PostgresStore

    s = PostgresStore(tmp_path, UTC, dsn=postgres.new_database())
    yield s
    s.close()


def _index(store, table: str, dim: int):
    from memory_tencentdb.store.postgres.vector import PgVectorIndex

    return PgVectorIndex(store._vector_transaction, store.reader, table, dim, "l1", "m")


def _stats(store, index) -> dict[str, tuple[np.ndarray, int]]:
    rows = store.reader().execute(f"SELECT scope, total::text, n FROM {index.stats}").fetchall()
    return {s: (np.array(t.strip("[]").split(","), dtype=np.float64), int(n)) for s, t, n in rows}


def test_centred_scores_match_the_sqlite_index_and_sums_stay_exact(store):
    dim = 32
    rng = np.random.default_rng(7)
    shared = rng.standard_normal(dim) * 1.5
    vecs = _unit(rng, 120, dim, shared)
    items = [(i + 1, "team" if i < 80 else "solo", vecs[i]) for i in range(120)]
    pg, ref = _index(store, "pgv_test_a", dim), NumpyIndex(dim, centre=True)
    for index in (pg, ref):
        index.add(items[:100])
        index.add(items[100:])
        # A changed text: row 5 gets a new vector; rows 7 and 90 are forgotten.
        index.add([(5, "team", vecs[119])])
        index.remove([7, 90])
    # A corrected text's old vector leaves inside the correction's own transaction.
    store._vector_transaction(lambda conn: pg.remove_in(conn, [11]))
    ref.remove([11])

    queries = _unit(rng, 6, dim, shared)
    for q in queries:
        for scope in ("team", "solo"):
            got, want = pg.search(scope, q, 10), ref.search(scope, q, 10)
            assert [r for r, _ in got] == [r for r, _ in want]
            assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-4)
    # Centring changes the order a plain cosine gives (else this test would prove nothing).
    plain = NumpyIndex(dim, centre=False)
    plain.add(items)
    assert any(
        [r for r, _ in plain.search("team", q, 10)] != [r for r, _ in ref.search("team", q, 10)]
        for q in queries
    )

    live = {r: (s, v) for r, s, v in items if r not in (7, 11, 90)}
    live[5] = ("team", vecs[119])
    for scope, (total, n) in _stats(store, pg).items():
        mine = [v for s, v in live.values() if s == scope]
        assert n == len(mine)
        assert np.allclose(total, np.sum(mine, axis=0), atol=1e-3)


def test_sums_are_built_for_a_table_made_before_them(store):
    dim = 16
    rng = np.random.default_rng(3)
    vecs = _unit(rng, 30, dim, rng.standard_normal(dim))
    first = _index(store, "pgv_test_b", dim)
    first.add([(i + 1, "s", vecs[i]) for i in range(30)])
    store._vector_transaction(lambda conn: conn.execute(f"DROP TABLE {first.stats}"))
    again = _index(store, "pgv_test_b", dim)  # as a gateway of this version finds it
    (total, n) = _stats(store, again)["s"]
    assert n == 30 and np.allclose(total, vecs.sum(axis=0), atol=1e-3)


def test_a_scope_of_a_few_rows_is_scored_plain_on_both_backends(store):
    """Below ``CENTRE_MIN_ROWS`` rows both indexes answer plain cosines (a mean of two or three
    memories centres away what they share); from there on, centred ones."""
    from memory_tencentdb.store.vector_index import CENTRE_MIN_ROWS

    dim = 16
    rng = np.random.default_rng(5)
    shared = rng.standard_normal(dim) * 1.5
    vecs = _unit(rng, 40, dim, shared)
    few = CENTRE_MIN_ROWS - 1
    items = [(i + 1, "few", vecs[i]) for i in range(few)]
    items += [(i + 1, "many", vecs[i]) for i in range(few, 40)]
    pg, ref = _index(store, "pgv_test_c", dim), NumpyIndex(dim, centre=True)
    for index in (pg, ref):
        index.add(items)
    q = _unit(rng, 1, dim, shared)[0]
    plain = vecs[:few] @ q
    for index in (pg, ref):
        got = index.search("few", q, 10)
        assert [r for r, _ in got] == [int(i) + 1 for i in np.argsort(-plain)]
        assert np.allclose([s for _, s in got], np.sort(plain)[::-1], atol=1e-4)
    # The larger scope is centred, alike on both.
    got, want = pg.search("many", q, 10), ref.search("many", q, 10)
    assert [r for r, _ in got] == [r for r, _ in want]
    assert not np.allclose([s for _, s in want], np.sort(vecs[few:] @ q)[::-1][:10], atol=1e-3)
