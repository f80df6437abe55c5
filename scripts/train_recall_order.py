"""Train recall's candidate order (memory_tencentdb/recall_order.py).

Data: every recall dev set (bench/recall_diag.py ``all_sets``), each message's candidates as
recall finds them (``recall.candidates``: the fused top 20), with their features and whether
they pass the relevance decision. Each set's candidates are found with a query adapter trained
without that set (on the other dev sets and the training-only sets, as
scripts/train_query_adapter.py trains the shipped one), so the scorer learns how much to trust
the adapted evidence on data the adapter never saw, which is what it meets on a user's data.
``--collect`` gathers them (about 20 minutes on 2 cores, 22 sets) into bench/out/recall_order_loso.json.

Fit: ``w`` maximising, over the related messages, the log of the softmax probability of the
memories each bears on among its candidates (split evenly when several), with an L2 penalty of
PENALTY; features standardised on the training rows; Adam, STEPS full-batch steps from zero:
the same data gives the same weights.

    .venv/bin/python scripts/train_recall_order.py --collect  # the candidates (slow)
    .venv/bin/python scripts/train_recall_order.py            # fit on every set, write weights
    .venv/bin/python scripts/train_recall_order.py --loso     # each set left out in turn

``--loso`` prints, per kind, the related messages with a memory they bear on among the first 5
passing candidates: in the fused order and in the scorer's (fitted without that set).
Unrelated messages are not scored: the order never decides whether anything is injected.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WEIGHTS = ROOT / "memory_tencentdb" / "recall_order_weights.py"
DATA = ROOT / "bench" / "out" / "recall_order_loso.json"
PENALTY = 1.0
STEPS = 400
LEARNING_RATE = 0.05
WINDOW = 5

# A message's candidates: (feature rows, target distribution over them, passing mask, fused
# order is the row order).
Group = tuple[np.ndarray, np.ndarray, np.ndarray]


def collect(out: Path) -> None:
    """bench/recall_diag.py's collect over every dev set, each with the adapter trained
    without it."""
    import scripts.train_query_adapter as adapter_script
    from bench import recall_diag
    from memory_tencentdb.text import query_adapter

    sets = adapter_script.training_sets()
    embedders, vecs = adapter_script.embed_sets(sets)
    chosen = [e.model_id for e in embedders if e.model_id.startswith(adapter_script.ADAPT)]  # type: ignore[attr-defined]

    def without(name: str, engine) -> None:
        names = [n for n in sets if n != name]
        weights = {
            m: adapter_script.fit([adapter_script._labelled(sets[n], vecs[n], m) for n in names])
            for m in chosen
        }
        query_adapter._weights.cache_clear()
        query_adapter._weights = lambda: weights  # type: ignore[assignment]
        query_adapter._weights.cache_clear = lambda: None  # type: ignore[attr-defined]
        refs = engine.vectorizer
        for m in chosen:
            refs.adapted_references[m] = query_adapter.adapt(m, refs.references[m])
        print(f"adapter trained without {name}", flush=True)

    recall_diag.OUT = out
    recall_diag.collect(None, before_set=without)


def groups(data: dict, names: list[str]) -> dict[str, list[tuple[str, Group]]]:
    """Per set, (kind, group) for each related message whose candidates the scorer can read."""
    out: dict[str, list[tuple[str, Group]]] = {}
    for name in names:
        out[name] = []
        for q in data[name]["queries"]:
            c = q.get("candidates")
            if not q["gold"] or not c or not c["applies"] or not c["rows"]:
                continue
            rows = c["rows"]
            target = np.array([1.0 if r in q["gold"] else 0.0 for r in rows])
            passing = np.array([r in c["passing"] for r in rows])
            out[name].append((q["kind"], (np.array(c["x"], float), target, passing)))
    return out


def fit(train: list[Group]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, scale, w) from the groups with a target among their candidates."""
    usable = [(x, t / t.sum()) for x, t, _ in train if 0 < t.sum() < len(t)]
    rows = np.vstack([x for x, _ in usable])
    mean, scale = rows.mean(axis=0), rows.std(axis=0) + 1e-9
    zs = [((x - mean) / scale, t) for x, t in usable]
    w = np.zeros(rows.shape[1])
    m1, m2 = np.zeros_like(w), np.zeros_like(w)
    for step in range(1, STEPS + 1):
        grad = PENALTY * w / len(zs)
        for z, t in zs:
            s = z @ w
            p = np.exp(s - s.max())
            p /= p.sum()
            grad += z.T @ (p - t) / len(zs)
        m1 = 0.9 * m1 + 0.1 * grad
        m2 = 0.999 * m2 + 0.001 * grad * grad
        w -= LEARNING_RATE * (m1 / (1 - 0.9**step)) / (np.sqrt(m2 / (1 - 0.999**step)) + 1e-8)
    return mean, scale, w


def found(group: Group, weights: tuple[np.ndarray, np.ndarray, np.ndarray] | None) -> bool:
    """A memory the message bears on is among the first WINDOW passing candidates."""
    x, target, passing = group
    if weights is None:
        order = np.arange(len(x))
    else:
        mean, scale, w = weights
        order = np.argsort(-(((x - mean) / scale) @ w), kind="stable")
    kept = [i for i in order if passing[i]][:WINDOW]
    return bool(target[kept].sum() > 0) if kept else False


def loso(per_set: dict[str, list[tuple[str, Group]]]) -> None:
    fused: Counter = Counter()
    scored: Counter = Counter()
    total: Counter = Counter()
    for held in per_set:
        weights = fit([g for n, gs in per_set.items() if n != held for _, g in gs])
        for kind, g in per_set[held]:
            total[kind] += 1
            fused[kind] += found(g, None)
            scored[kind] += found(g, weights)
    for kind in sorted(total):
        print(f"  {kind:15} fused {fused[kind]:4} -> scorer {scored[kind]:4} of {total[kind]}")


def render(models: tuple[str, ...], mean, scale, w, sizes: str) -> str:
    from memory_tencentdb.recall_order import FEATURES

    def tup(name: str, kind: str, items: list[str]) -> list[str]:
        # One item a line with a trailing comma: the layout ruff format keeps.
        return [f"{name}: tuple[{kind}, ...] = (", *(f"    {i}," for i in items), ")"]

    def floats(a) -> list[str]:
        return [repr(round(float(v), 6)) for v in a]

    return "\n".join(
        [
            '"""Weights of recall\'s candidate order (recall_order.py): generated by',
            f"scripts/train_recall_order.py ({sizes}); do not edit by hand.",
            "",
            "Feature order: " + ", ".join(FEATURES) + ".",
            '"""',
            "",
            *tup("MODELS", "str", [json.dumps(m) for m in models]),
            *tup("MEAN", "float", floats(mean)),
            *tup("SCALE", "float", floats(scale)),
            *tup("WEIGHTS", "float", floats(w)),
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collect", action="store_true", help="gather the candidates (slow)")
    ap.add_argument("--loso", action="store_true", help="each dev set left out in turn")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--out", type=Path, default=WEIGHTS)
    args = ap.parse_args(argv)
    if args.collect:
        collect(args.data)
        return 0
    data = json.loads(args.data.read_text("utf-8"))
    per_set = groups(data, list(data))
    if args.loso:
        loso(per_set)
        return 0
    train = [g for gs in per_set.values() for _, g in gs]
    mean, scale, w = fit(train)
    models = next(tuple(q["models"]) for d in data.values() for q in d["queries"])
    sizes = f"{len(per_set)} sets, {len(train)} related messages"
    args.out.write_text(render(models, mean, scale, w, sizes), "utf-8")
    print(f"wrote {args.out.name} ({sizes})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
