"""DEV-only diagnosis of per-turn recall misses (issue 23): every dev set through an in-process
Engine (the gateway's own retrieve and decision), and for each related message where its gold
memory was lost: not among the candidates (retrieval), ranked below 5 (fusion), or cut by the
relevance decision. Also dumps every candidate's evidence so decisions can be replayed offline.

Run: PYTHONPATH=. .venv/bin/python bench/recall_diag.py [collect|report]
The sets are all in tests/fixtures/ (every one of them now a dev set); nothing is printed of
their text unless ``--show`` is given.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.relevance_dev import sets as dev_sets  # noqa: E402

FIX = ROOT / "tests" / "fixtures"
OUT = ROOT / "bench" / "out" / "recall_diag.json"
DEPTH = 120


def labelled_set(path: Path) -> dict:
    """A set file in the blind sets' layout (memories, cases with expected ids) as
    {memories: [text], queries: [(kind, text, [gold indexes])]}."""
    from bench.blind_issue23 import _cases

    mems, cases = _cases(json.loads(path.read_text("utf-8")))
    sidx = {m["id"]: i for i, m in enumerate(mems)}
    q = [(c["kind"], c["query"], [sidx[g] for g in c["gold"] if g in sidx]) for c in cases]
    return {"memories": [m["text"] for m in mems], "queries": q}


def all_sets() -> dict[str, dict]:
    """name -> {memories: [text], queries: [(kind, text, [gold indexes])]}."""
    out = {}
    for name, s in dev_sets().items():
        out[name] = {
            "memories": s["memories"],
            "queries": [(k, t, [] if g is None else [g]) for k, t, g in s["queries"]],
        }
    b = json.loads((FIX / "blind" / "recall_issue23.json").read_text("utf-8"))
    idx = {m["id"]: i for i, m in enumerate(b["memories"])}
    q = [(c["kind"], c["query"], [idx[g] for g in c["expected"]]) for c in b["cases"]]
    q += [("unrelated", u["query"], []) for u in b["unrelated"]]
    out["issue23"] = {"memories": [m["memory"] for m in b["memories"]], "queries": q}
    # Sessions 11-17's blind sets, each measured (session 14's first two with and without the
    # query adapter) and a dev set since.
    for name, path in (
        ("s11", "recall_issue23_session11.json"),
        ("s12", "recall_issue23_session12.json"),
        ("s13", "recall_issue23_session13.json"),
        ("s13b", "recall_issue23_session13b.json"),
        ("s14", "recall_issue23_session14.json"),
        ("s14b", "recall_issue23_session14b.json"),
        ("s14c", "recall_issue23_session14c.json"),
        ("s14d", "recall_issue23_session14d.json"),
        ("s14e", "recall_issue23_session14e.json"),
        ("s14f", "recall_issue23_session14f.json"),
        ("s15", "recall_issue23_session15.json"),
        ("s16", "recall_issue23_session16.json"),
        ("s17", "recall_issue23_session17.json"),
    ):
        out[name] = labelled_set(FIX / "blind" / path)
    p = json.loads((FIX / "blind" / "paraphrase_pairs.json").read_text("utf-8"))
    mems = [x["memory"] for x in p["pairs"]] + [x["memory"] for x in p["distractors"]]
    q = [("paraphrase", x["query"], [i]) for i, x in enumerate(p["pairs"])]
    out["bparaphrase"] = {"memories": mems, "queries": q}
    g = json.loads((FIX / "blind" / "gate_queries.json").read_text("utf-8"))
    gidx = {m["id"]: i for i, m in enumerate(g["memories"])}
    q = [("related", r["query"], [gidx[r["memory"]]]) for r in g["related"]]
    q += [("world", w["query"], []) for w in g["world"]]
    out["bgate60"] = {"memories": [m["memory"] for m in g["memories"]], "queries": q}
    return out


def _per_model_z(eng, scope: str, hits, query: str) -> dict[str, dict[int, float]]:
    """Each model's z-score of every ranked row against the reference questions."""
    from memory_tencentdb.retrieval import reference_z
    from memory_tencentdb.text.language import is_chinese

    rowids = [r for r, _ in hits.ranked]
    out = {}
    for model, qvec in hits.search_vectors.items():
        z = reference_z(
            eng.store, eng.vectorizer, "l1", scope, model, qvec, rowids, is_chinese(query)
        )
        out[model] = {r: float(v) for r, v in zip(rowids, z.tolist(), strict=True)}
    return out


def collect(names: list[str] | None = None, before_set=None) -> None:
    """``before_set(name, engine)``, when given, runs before each set (e.g. to load weights
    trained without that set)."""
    from memory_tencentdb import recall as recall_mod
    from memory_tencentdb import recall_order, retrieval
    from memory_tencentdb.config import load_settings
    from memory_tencentdb.engine import Engine
    from memory_tencentdb.retrieval import reference_z, retrieve

    seen: dict = {}
    fuse = retrieval.fuse

    def spy(*args, **kwargs):
        seen["args"] = args
        return fuse(*args, **kwargs)

    retrieval.fuse = spy
    from memory_tencentdb.text.language import is_chinese
    from memory_tencentdb.text.query_intent import howto_logit, world_logit

    tmp = Path(tempfile.mkdtemp(prefix="recalldiag-"))
    settings = load_settings({"TDAI_DATA_DIR": str(tmp / "data")}, cwd=tmp)
    eng = Engine(settings)
    eng.start()
    assert eng.vectorizer.wait_loaded(300)
    cfg = settings.memory.recall
    res = {}
    try:
        for name, s in all_sets().items():
            if names and name not in names:
                continue
            if before_set is not None:
                before_set(name, eng)
            rows = [
                eng.write_memory(content=t, type_="persona", session_key="k", scope=name)
                for t in s["memories"]
            ]
            rowids = [r.seq for r in rows]
            assert eng.vectorizer.wait_embedded(name, 600)
            d_text = dict(zip(rowids, s["memories"], strict=True))
            qs = []
            for kind, text, gold in s["queries"]:
                seen.clear()
                hits = retrieve(eng.store, eng.vectorizer, "l1", name, text, "hybrid", depth=DEPTH)
                kw, cover, vecs = seen["args"][:3]
                cand = sorted({r for r, _ in kw} | {r for v in vecs for r, _ in v})
                zall = {}
                for model, qvec in hits.search_vectors.items():
                    for zh in (True, False):
                        z = reference_z(
                            eng.store, eng.vectorizer, "l1", name, model, qvec, cand, zh
                        )
                        zall[f"{model}|{'zh' if zh else 'en'}"] = dict(
                            zip(map(str, cand), z.tolist(), strict=True)
                        )
                # What the gateway injects now (the current decision, k = max_results).
                zm = _per_model_z(eng, name, hits, text)
                got = recall_mod._relevant_in(eng.store, eng.vectorizer, cfg, name, text)[0]
                # Recall's own candidates (k = 20 of 60 per side, not DEPTH), their features for
                # the candidate order (recall_order.py) and which of them pass the decision.
                cand = recall_mod.candidates(eng.store, eng.vectorizer, cfg, name, text)
                passing = recall_mod.decide(cand).passing
                qs.append(
                    {
                        "kind": kind,
                        "query": text,
                        "gold": [rowids[i] for i in gold],
                        "injected": [r for r, _ in got][: cfg.max_results],
                        "world": world_logit(hits.query_vectors),
                        "kw": [r for r, _ in kw],
                        "cover": {str(r): v for r, v in cover.items()},
                        "vecs": [[[r, sim] for r, sim in v] for v in vecs],
                        "models": list(hits.query_vectors),
                        "zall": zall,
                        "qzh": is_chinese(text),
                        "howto": howto_logit(hits.query_vectors),
                        "candidates": {
                            "rows": [r for r, _ in cand.ranked],
                            "x": recall_order.feature_matrix(cand).tolist(),
                            "passing": [r for r, _ in passing],
                            "applies": recall_order.applies(cand),
                        },
                        "ranked": [
                            {
                                "row": r,
                                "f": f,
                                "cov": hits.evidence[r].coverage,
                                "z": hits.evidence[r].relevance,
                                "zb": hits.evidence[r].relevance_best,
                                "mr": hits.evidence[r].model_rank,
                                "sim": hits.evidence[r].similarity,
                                "zm": {m: v.get(r) for m, v in zm.items()},
                                "other": is_chinese(d_text[r]) != is_chinese(text),
                            }
                            for r, f in hits.ranked
                        ],
                    }
                )
            res[name] = {
                "memories": dict(zip(rowids, s["memories"], strict=True)),
                "zh": {str(r): is_chinese(t) for r, t in zip(rowids, s["memories"], strict=True)},
                "queries": qs,
            }
    finally:
        eng.close()
    OUT.parent.mkdir(parents=True, exist_ok=True)
    old = json.loads(OUT.read_text()) if OUT.exists() and names else {}
    old.update(res)
    OUT.write_text(json.dumps(old, ensure_ascii=False))


def report(show: bool = False) -> None:
    data = json.loads(OUT.read_text())
    for name, d in data.items():
        per: dict[str, list[bool]] = defaultdict(list)
        why: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for q in d["queries"]:
            if not q["gold"]:
                per[q["kind"]].append(not q["injected"])
                continue
            ok = any(g in q["injected"] for g in q["gold"])
            per[q["kind"]].append(ok)
            if ok:
                continue
            order = [c["row"] for c in q["ranked"]]
            pos = min((order.index(g) for g in q["gold"] if g in order), default=None)
            if pos is None:
                cause = "absent"
            elif pos >= 5:
                cause = "rank>5" if pos < 10 else "rank>10"
            else:
                cause = "cut"
            why[q["kind"]][cause] += 1
            if show:
                c = next((c for c in q["ranked"] if c["row"] in q["gold"]), None)
                ev = (
                    f"cov={c['cov']:.2f} z={c['z'] if c['z'] is None else round(c['z'], 2)} "
                    f"zb={c['zb'] if c['zb'] is None else round(c['zb'], 2)} mr={c['mr']}"
                    if c
                    else ""
                )
                print(
                    f"  {name} {q['kind']} {cause} pos={pos} world={q['world']:.2f} {ev} "
                    f"| {q['query']} -> {d['memories'][str(q['gold'][0])]}"
                )
        print(
            name,
            " ".join(f"{k}={sum(v)}/{len(v)}" for k, v in per.items()),
            "| misses:",
            {k: dict(v) for k, v in why.items()},
        )


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "report"
    if what == "collect":
        collect(sys.argv[2:] or None)
    else:
        report("--show" in sys.argv)
