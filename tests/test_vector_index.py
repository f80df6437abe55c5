"""The in-memory L1 index keeps a small scope exact and codes a large one in int8: rankings and
scores must stay those of exact float32 cosine search (to within the coding error), through
adds, moves and removals, whatever order the rows came in."""

from __future__ import annotations

import numpy as np
import pytest

from memory_tencentdb.store.vector_index import BLOCK_ROWS, SCAN_ROWS, NumpyIndex


def _cone(n: int, dim: int, seed: int = 7) -> np.ndarray:
    """Unit vectors in a narrow cone, like a small embedding model's (cosines ~0.8-0.9)."""
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal(dim).astype(np.float32)
    m = rng.standard_normal((n, dim)).astype(np.float32) * 0.35 + shared / np.linalg.norm(shared)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _exact(mat: np.ndarray, q: np.ndarray, centre: np.ndarray | None) -> np.ndarray:
    if centre is None:
        return mat @ q
    mc, qc = mat - centre, q - centre
    return (mc @ qc) / (np.linalg.norm(mc, axis=1) * np.linalg.norm(qc))


@pytest.mark.parametrize("centre", [False, True])
def test_rankings_and_scores_match_exact_float32(centre: bool):
    n, dim = BLOCK_ROWS + 2 * SCAN_ROWS + 17, 384  # two storage blocks, a ragged last scan
    mat = _cone(n, dim)
    index = NumpyIndex(dim, centre=centre)
    for start in range(0, n, 1000):  # in several batches
        index.add([(i + 1, "s", mat[i]) for i in range(start, min(n, start + 1000))])
    assert len(index) == n
    rng = np.random.default_rng(3)
    mu = mat.astype(np.float64).mean(axis=0).astype(np.float32)
    shared = []
    for _ in range(30):
        q = mat[rng.integers(n)] + 0.2 * rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        want = _exact(mat, q, mu if centre else None)
        got = index.search("s", q, 10)
        # Scores within the int8 error of the exact cosine.
        for rowid, score in got:
            assert abs(score - want[rowid - 1]) < 0.01
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        shared.append(len({r - 1 for r, _ in got} & set(np.argsort(-want)[:10].tolist())))
    assert np.mean(shared) >= 9.5, shared  # near-ties may swap at the 10th place, no more


def test_removed_and_moved_rows_leave_the_ranking():
    dim = 64
    mat = _cone(200, dim, seed=11)
    index = NumpyIndex(dim, centre=True)
    index.add([(i + 1, "a", mat[i]) for i in range(200)])
    q = mat[5]
    assert index.search("a", q, 1)[0][0] == 6
    index.remove([6])
    assert 6 not in {r for r, _ in index.search("a", q, 200)}
    # A changed text re-embedded into another scope: gone from the old one, found in the new.
    index.add([(7, "b", mat[6])])
    assert 7 not in {r for r, _ in index.search("a", q, 200)}
    assert [r for r, _ in index.search("b", mat[6], 5)] == [7]
    assert len(index) == 199
    assert len(index.search("a", q, 500)) == 198  # never more than the live rows


def test_score_rows_agree_with_search():
    dim = 128
    mat = _cone(500, dim, seed=5)
    index = NumpyIndex(dim, centre=True)
    index.add([(i + 1, "s", mat[i]) for i in range(500)])
    q = mat[42]
    top = index.search("s", q, 20)
    scores = index.score_rows("s", q[None, :], [r for r, _ in top] + [9999])[0]
    assert np.allclose(scores[:-1], [s for _, s in top], atol=1e-4)
    # A small scope is exact: the scores are float32 cosines of the centred vectors.
    mu = mat.astype(np.float64).mean(axis=0).astype(np.float32)
    want = _exact(mat, q, mu)
    assert np.allclose([s for _, s in top], [want[r - 1] for r, _ in top], atol=1e-5)
    assert np.isnan(scores[-1])  # a row that is not there
    index.add([(9999, "other", mat[0])])
    assert np.isnan(index.score_rows("s", q[None, :], [9999])[0][0])  # nor one of another scope


def test_a_rowid_added_again_keeps_only_its_last_vector():
    dim = 32
    mat = _cone(300, dim, seed=2)
    index = NumpyIndex(dim)
    index.add([(i + 1, "s", mat[i]) for i in range(300)])
    index.add([(1, "s", mat[299]), (1, "s", mat[298])])  # twice in one batch: the last wins
    hits = index.search("s", mat[298], 300)
    assert [r for r, _ in hits].count(1) == 1 and len(hits) == 300 == len(index)
    assert hits[0][0] in (1, 299)  # the same vector as row 299
    index.remove([1, 1, 12345, 0])  # repeated and unknown rowids are ignored
    assert len(index) == 299 and 1 not in {r for r, _ in index.search("s", mat[298], 300)}


def test_scores_do_not_depend_on_insertion_order():
    """An export and its import hold the same rows, added in another order and batching: they
    must rank alike (near-ties included), as exact float32 search did."""
    dim, n = 384, BLOCK_ROWS + 500  # past the exact block: int8 codes
    mat = _cone(n, dim, seed=9)
    a, b = NumpyIndex(dim, centre=True), NumpyIndex(dim, centre=True)
    a.add([(i + 1, "s", mat[i]) for i in range(n)])
    order = np.random.default_rng(4).permutation(n)
    for start in range(0, n, 700):
        b.add([(int(i) + 1, "s", mat[i]) for i in order[start : start + 700]])
    for q in mat[:20]:
        got_a, got_b = a.search("s", q, 60), b.search("s", q, 60)
        assert [r for r, _ in got_a] == [r for r, _ in got_b]
        assert np.allclose([s for _, s in got_a], [s for _, s in got_b], atol=1e-5)
