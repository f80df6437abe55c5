"""DEV-only (issue 23): does a small logistic-regression scorer decide which recall candidates
to inject better than the constant stack in memory_tencentdb/recall.py (``relevant_hits``) when
both are judged on messages they were not fitted on?

Reads bench/out/recall_diag.json (``bench/recall_diag.py collect``: every dev set, every message,
every fused candidate's evidence) and replays both decisions offline over the gateway's own
window: the first 5 passing candidates among the fused top 20 (``candidates`` asks for
max(5 * 3, 20)). No instructions are stored in these sets, so the standing-instruction pass
never fires here.

Scorer: per (message, candidate) the features of ``FEATURES`` below; label = the candidate is one
of the message's expected memories (an unrelated or world message has none). L2 logistic
regression fitted by Newton's method (numpy). A candidate is injected when p >= T with
T = 1 / (1 + C): missing a memory that bears on the answer costs C times one wrong injection
(C = 3, T = 0.25, fixed before looking at any test fold).

Leave-one-set-out: for each dev set the scorer is fitted on the other sets, minus every message
whose text also occurs in the held-out set (several sets share the same unrelated questions or
the same related ones over a larger scope), and judged on the held-out set. The current rule's
constants were chosen on all of these sets, so it is judged on data it was fitted on: the
comparison favours it. Two fairer comparisons follow, each at C = 1, 3, 9: the rule's own shape
with its four constants re-chosen per fold on a small grid (maximising C x related kept - unrelated
messages injecting on the training sets), and a two-stage scorer (a message-level logistic gate,
then the fused top 5).

Run: PYTHONPATH=. .venv/bin/python bench/relevance_loso.py [--c 3] [--json bench/results/...]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DIAG = ROOT / "bench" / "out" / "recall_diag.json"
DEPTH = 20  # the gateway's candidate depth (recall.candidates: max(max_results * 3, 20))
WINDOW = 5  # max_results
CROSS = {"cross", "cross_language"}
L2 = 1.0
NO_Z = -3.0  # a z that could not be measured (keyword-only candidate): below any background

FEATURES = (
    "z_best",
    "z_mean",
    "z_min",
    "coverage",
    "log_rank",
    "other_language",
    "world",
    "how_to",
    "world_x_coverage",
    "world_x_z_best",
    "about_world",
    "about_world_x_coverage",
    "about_world_x_z_best",
)


def features(c: dict, rank: int, world: float, how_to: float) -> list[float]:
    zs = [v for v in (c.get("zm") or {}).values() if v is not None]
    zb = c["zb"] if c["zb"] is not None else NO_Z
    zmin = c["z"] if c["z"] is not None else NO_Z
    zmean = sum(zs) / len(zs) if zs else NO_Z
    cov = float(c["cov"])
    return [
        zb,
        zmean,
        zmin,
        cov,
        math.log(rank),
        1.0 if c["other"] else 0.0,
        world,
        how_to,
        world * cov,
        world * zb,
        # The classifier's own boundary (log-odds > 0), not a fitted constant.
        1.0 if world > 0 else 0.0,
        (1.0 if world > 0 else 0.0) * cov,
        (1.0 if world > 0 else 0.0) * zb,
    ]


def current_rule(q: dict) -> list[int]:
    """recall.relevant_hits with today's constants, replayed on the recorded evidence."""
    from memory_tencentdb.recall import COVERAGE_PASS, FLOOR_Z, WORLD_FLOOR_Z, WORLD_MAX

    world = q["world"]
    about_world = world is not None and world > WORLD_MAX
    how_to = q["howto"] if about_world else None

    def passes(c: dict) -> bool:
        if c["cov"] >= COVERAGE_PASS:
            return True
        z = c["zb"] if c["zb"] is not None else float("-inf")
        if not about_world:
            return z >= FLOOR_Z
        return c["cov"] > 0 and how_to is not None and how_to > 0 and z >= WORLD_FLOOR_Z

    return [c["row"] for c in q["ranked"][:DEPTH] if passes(c)][:WINDOW]


def message_rows(q: dict) -> tuple[np.ndarray, np.ndarray, list[int]]:
    world = q["world"] if q["world"] is not None else 0.0
    how_to = q["howto"] if q["howto"] is not None else 0.0
    cands = q["ranked"][:DEPTH]
    x = [features(c, i + 1, world, how_to) for i, c in enumerate(cands)]
    y = [1.0 if c["row"] in q["gold"] else 0.0 for c in cands]
    return (
        np.array(x, dtype=float).reshape(-1, len(FEATURES)),
        np.array(y),
        [c["row"] for c in cands],
    )


def fit(
    x: np.ndarray, y: np.ndarray, l2: float = L2
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Standardise, then L2 logistic regression by Newton's method. Returns (mean, scale, bias,
    weights) so that p = sigmoid(bias + ((x - mean) / scale) . weights)."""
    mean = x.mean(0)
    scale = x.std(0)
    scale[scale == 0] = 1.0
    xs = np.hstack([np.ones((len(x), 1)), (x - mean) / scale])
    w = np.zeros(xs.shape[1])
    reg = np.full(xs.shape[1], l2)
    reg[0] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-xs @ w))
        grad = xs.T @ (p - y) + reg * w
        hess = (xs * (p * (1 - p))[:, None]).T @ xs + np.diag(reg)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return mean, scale, float(w[0]), w[1:]


def prob(model: tuple, x: np.ndarray) -> np.ndarray:
    mean, scale, b, w = model
    return 1 / (1 + np.exp(-(b + ((x - mean) / scale) @ w)))


def scorer_pick(model: tuple, q: dict, threshold: float) -> list[int]:
    x, _, rows = message_rows(q)
    if not rows:
        return []
    p = prob(model, x)
    return [r for r, pr in zip(rows, p, strict=True) if pr >= threshold][:WINDOW]


def tally(picks: dict[str, list[tuple[dict, list[int]]]]) -> dict[str, list[int]]:
    """kind -> [good, total] (related: gold injected; no-gold: message injected anything), and
    'all related', 'cross-language', 'unrelated/world', 'injected' (candidates, messages)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for _name, items in picks.items():
        for q, inj in items:
            out["injected per turn"][0] += len(inj)
            out["injected per turn"][1] += 1
            if q["gold"]:
                ok = int(any(g in inj for g in q["gold"]))
                out[q["kind"]][0] += ok
                out[q["kind"]][1] += 1
                out["ALL related"][0] += ok
                out["ALL related"][1] += 1
                if q["kind"] in CROSS:
                    out["ALL cross-language"][0] += ok
                    out["ALL cross-language"][1] += 1
            else:
                bad = int(bool(inj))
                out[q["kind"] + " injecting"][0] += bad
                out[q["kind"] + " injecting"][1] += 1
                out["ALL unrelated/world injecting"][0] += bad
                out["ALL unrelated/world injecting"][1] += 1
    return dict(out)


def stack(data: dict, names: list[str], exclude: set[str]) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for n in names:
        for q in data[n]["queries"]:
            if q["query"] in exclude:
                continue
            x, y, _ = message_rows(q)
            xs.append(x)
            ys.append(y)
    return np.vstack(xs), np.concatenate(ys)


def message_features(q: dict) -> list[float]:
    """The two-stage scorer's first stage: does any memory bear on this message at all? The
    message's world and how-to log-odds and what its fused top 5 show at best."""
    top = q["ranked"][:WINDOW]
    world = q["world"] if q["world"] is not None else 0.0
    how_to = q["howto"] if q["howto"] is not None else 0.0
    zb = max((c["zb"] if c["zb"] is not None else NO_Z for c in top), default=NO_Z)
    zmin = max((c["z"] if c["z"] is not None else NO_Z for c in top), default=NO_Z)
    cov = max((float(c["cov"]) for c in top), default=0.0)
    return [world, how_to, zb, zmin, cov, world * zb, world * cov, 1.0 if world > 0 else 0.0]


def two_stage(data: dict, names: list[str], threshold: float) -> dict[str, list]:
    """Held out per set: a message-level logistic (label: the message has an expected memory)
    gates; a message with p >= T gets the fused top 5."""
    out: dict[str, list] = {}
    for held in names:
        texts = {q["query"] for q in data[held]["queries"]}
        xs, ys = [], []
        for n in names:
            if n == held:
                continue
            for q in data[n]["queries"]:
                if q["query"] not in texts:
                    xs.append(message_features(q))
                    ys.append(1.0 if q["gold"] else 0.0)
        model = fit(np.array(xs), np.array(ys))
        out[held] = []
        for q in data[held]["queries"]:
            p = prob(model, np.array([message_features(q)]))[0]
            rows = [c["row"] for c in q["ranked"][:WINDOW]]
            out[held].append((q, rows if p >= threshold else []))
    return out


RULE_GRID = {
    "FLOOR_Z": (1.0, 1.5, 2.0, 2.5),
    "COVERAGE_PASS": (0.5, 0.6, 0.8),
    "WORLD_MAX": (0.0, 0.2, 0.4, 0.6, 1.0),
    "WORLD_FLOOR_Z": (3.5, 4.0, 4.5, 5.0),
}


def rule_with(
    q: dict, floor_z: float, cover: float, world_max: float, world_floor: float
) -> list[int]:
    world = q["world"]
    about_world = world is not None and world > world_max
    how_to = q["howto"] if about_world else None
    out = []
    for c in q["ranked"][:DEPTH]:
        z = c["zb"] if c["zb"] is not None else float("-inf")
        if c["cov"] >= cover:
            ok = True
        elif not about_world:
            ok = z >= floor_z
        else:
            ok = c["cov"] > 0 and how_to is not None and how_to > 0 and z >= world_floor
        if ok:
            out.append(c["row"])
            if len(out) == WINDOW:
                break
    return out


def rule_refit(data: dict, names: list[str], cost: float) -> tuple[dict[str, list], list]:
    """The rule's shape held out too: per fold its four constants chosen on the grid above to
    maximise C x related kept - unrelated/world messages injecting on the other sets (minus
    shared texts), then judged on the held-out set."""
    import itertools

    grid = list(itertools.product(*RULE_GRID.values()))
    value: dict[tuple, float] = {}
    for n in names:
        for i, q in enumerate(data[n]["queries"]):
            for g in grid:
                inj = rule_with(q, *g)
                if q["gold"]:
                    value[(n, i, g)] = cost * any(x in inj for x in q["gold"])
                else:
                    value[(n, i, g)] = -float(bool(inj))
    out: dict[str, list] = {}
    chosen = []
    for held in names:
        texts = {q["query"] for q in data[held]["queries"]}
        keep = [
            (n, i)
            for n in names
            if n != held
            for i, q in enumerate(data[n]["queries"])
            if q["query"] not in texts
        ]
        best = max(grid, key=lambda g: sum(value[(n, i, g)] for n, i in keep))
        chosen.append(best)
        out[held] = [(q, rule_with(q, *best)) for q in data[held]["queries"]]
    return out, chosen


def brief(t: dict) -> str:
    r, c, u, pt = (
        t["ALL related"],
        t["ALL cross-language"],
        t["ALL unrelated/world injecting"],
        t["injected per turn"],
    )
    return f"{r[0]}/{r[1]}  {c[0]}/{c[1]}  {u[0]}/{u[1]}  {pt[0] / pt[1]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--c", type=float, default=3.0, help="cost of a miss / cost of a wrong injection"
    )
    ap.add_argument("--json", help="write the table here too")
    a = ap.parse_args()
    threshold = 1 / (1 + a.c)
    data = json.loads(DIAG.read_text("utf-8"))
    names = list(data)
    cur: dict[str, list] = {}
    sc: dict[str, list] = {}
    probs: dict[str, list] = {}
    for held in names:
        texts = {q["query"] for q in data[held]["queries"]}
        x, y = stack(data, [n for n in names if n != held], texts)
        model = fit(x, y)
        qs = data[held]["queries"]
        sc[held] = [(q, scorer_pick(model, q, threshold)) for q in qs]
        probs[held] = []
        for q in qs:
            xq, _, rows_q = message_rows(q)
            probs[held].append((q, rows_q, prob(model, xq) if rows_q else np.zeros(0)))
        cur[held] = [(q, current_rule(q)) for q in qs]
    tc, ts = tally(cur), tally(sc)
    print(f"leave-one-set-out, C = {a.c:g}, T = {threshold:.3f}, depth {DEPTH}, window {WINDOW}")
    print(f"{'':34}{'current rule':>16}{'LOSO scorer':>16}")
    rows = {}
    for k in sorted(tc):
        c, s = tc[k], ts[k]
        if k == "injected per turn":
            cs, ss = f"{c[0] / c[1]:.2f}", f"{s[0] / s[1]:.2f}"
        else:
            cs, ss = f"{c[0]}/{c[1]}", f"{s[0]}/{s[1]}"
        rows[k] = {"current": c, "scorer": s}
        print(f"{k:34}{cs:>16}{ss:>16}")
    print("per held-out set (related kept, unrelated/world injecting): current | scorer")
    for n in names:
        a1, b1 = tally({n: cur[n]}), tally({n: sc[n]})
        r = lambda t: (  # noqa: E731
            f"{t.get('ALL related', [0, 0])[0]}/{t.get('ALL related', [0, 0])[1]} "
            f"{t.get('ALL unrelated/world injecting', [0, 0])[0]}/"
            f"{t.get('ALL unrelated/world injecting', [0, 0])[1]}"
        )
        print(f"  {n:16} {r(a1):>16} | {r(b1)}")
    # Not a choice of T (that stays 1 / (1 + C)): the whole curve, to see whether any cost
    # ratio would have beaten the current rule's point on the held-out sets.
    print("trade-off over T (held-out probabilities; related, cross-language, unrelated/world):")
    curve = []
    for t in (0.02, 0.03, 0.05, 0.07, 0.1, 0.15, 0.2, 0.25, 0.35, 0.5):
        picks = {
            held: [
                (q, [r for r, pr in zip(rows, p, strict=True) if pr >= t][:WINDOW])
                for q, rows, p in probs[held]
            ]
            for held in names
        }
        tt = tally(picks)
        line = (
            tt["ALL related"][0],
            tt["ALL cross-language"][0],
            tt["ALL unrelated/world injecting"][0],
            tt["injected per turn"][0] / tt["injected per turn"][1],
        )
        curve.append(
            {
                "T": t,
                "related": line[0],
                "cross": line[1],
                "unrelated": line[2],
                "per_turn": line[3],
            }
        )
        print(
            f"  T {t:5.2f} (C {1 / t - 1:5.1f}): {line[0]:4} {line[1]:4} {line[2]:4}  per turn {line[3]:.2f}"
        )
    x, y = stack(data, names, set())
    model = fit(x, y)
    print("fitted on all sets (standardised weights):")
    for f, w in zip(FEATURES, model[3], strict=True):
        print(f"  {f:20} {w:+.3f}")
    print(f"  {'bias':20} {model[2]:+.3f}")
    print("all held out (related, cross-language, unrelated/world injecting, injected per turn):")
    print(f"  {'current rule (fitted on all sets)':44} {brief(tc)}")
    extra = {}
    for cost in (1.0, 3.0, 9.0):
        t = 1 / (1 + cost)
        refit, chosen = rule_refit(data, names, cost)
        cand = tally(
            {
                h: [
                    (q, [r for r, pr in zip(rw, p, strict=True) if pr >= t][:WINDOW])
                    for q, rw, p in probs[h]
                ]
                for h in names
            }
        )
        rows_c = {
            "rule refit per fold": tally(refit),
            "candidate scorer": cand,
            "two-stage (message gate, top 5)": tally(two_stage(data, names, t)),
        }
        for k, v in rows_c.items():
            print(f"  C {cost:g}: {k:36} {brief(v)}")
        print(f"       rule constants chosen per fold: {sorted(set(chosen))}")
        extra[f"C{cost:g}"] = {
            k: {
                kk: v[kk]
                for kk in (
                    "ALL related",
                    "ALL cross-language",
                    "ALL unrelated/world injecting",
                    "injected per turn",
                )
            }
            for k, v in rows_c.items()
        } | {"rule constants chosen": sorted(set(chosen))}
    if a.json:
        Path(a.json).write_text(
            json.dumps(
                {"c": a.c, "threshold": threshold, "rows": rows, "curve": curve, "held_out": extra},
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
