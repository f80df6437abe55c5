"""Record the real payloads of OpenClaw's offload seams into tests/openclaw/fixtures/offload_turns.json
(run by hand, not by pytest).

    .venv/bin/python -m tests.openclaw.record_offload_fixtures

Links the offload recorder (tests/openclaw/recorder_offload: a pass-through context engine in the
slot, with the durable-turn contract, and a tool-result middleware that changes nothing) into a
throwaway OpenClaw home, plays two turns against the fake LLM (turn 1: three tool calls with
3-6 KB outputs, English and Chinese, one of them the core `read` tool; turn 2: a plain answer),
and writes what the tool-result middleware, the engine and before_prompt_build received.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.openclaw.harness import FIXTURES, OpenClawHome, OpenClawInstall, host_cache
from tests.openclaw.record_fixtures import checked, read_records, save
from tests.support.fake_llm import FakeLLM

RECORDER = Path(__file__).resolve().parent / "recorder_offload"
REPO = Path(__file__).resolve().parents[2]
PLUGIN_ID = "mtdb-offload-recorder"
SESSION = "agent:main:rec-offload"


def main() -> None:
    install = OpenClawInstall.find()
    if install is None:
        raise SystemExit("OpenClaw is not installed: run `make hosts` first")
    with (
        tempfile.TemporaryDirectory(prefix="oc-record-") as tmp,
        FakeLLM(default_reply="OK.") as llm,
    ):
        root = Path(tmp)
        out = root / "records.jsonl"
        big = root / "home" / "build.log"
        home = OpenClawHome(install, root / "home", llm.base_url)
        big.write_text(
            "\n".join(f"step {i:04d}: linking object {i % 13}.o ok" for i in range(160)), "utf-8"
        )
        home.install_plugin(RECORDER, PLUGIN_ID, {"outFile": str(out)})
        cfg = home.read_config()
        cfg["plugins"].setdefault("slots", {})["contextEngine"] = PLUGIN_ID
        cfg["tools"] = {"toolSearch": False}
        home.write_config(cfg)

        llm.push(
            {"tool_calls": [{"id": "call_big_en", "name": "recorder_big_output",
                             "arguments": {"chars": 6000, "lang": "en"}}]},
            {"tool_calls": [{"id": "call_read_log", "name": "read",
                             "arguments": {"path": str(big)}}]},
            {"tool_calls": [{"id": "call_big_zh", "name": "recorder_big_output",
                             "arguments": {"chars": 3000, "lang": "zh"}}]},
            "The build passed; three outputs checked.",
        )  # fmt: skip
        checked(home.agent("Run the build tools and check the logs, please.", SESSION))
        llm.replies.clear()
        llm.push("构建已通过。")
        checked(home.agent("总结一下刚才的结果。", SESSION))
        save(
            "offload_turns",
            "Slot = a pass-through engine with the durable-turn contract (agent --local): turn 1 = "
            "three tool calls (recorder_big_output 6000 en, core read of a 5 KB log, "
            "recorder_big_output 3000 zh) + answer; turn 2 = one answer. Records: "
            "tool_result_middleware, engine.*, before_prompt_build.",
            read_records(out),
            str(root),
        )
        neutralise(FIXTURES / "offload_turns.json")


def neutralise(path: Path) -> None:
    """The skill list in the system prompt names the OpenClaw install; the plugin path this repo."""
    text = path.read_text("utf-8")
    for real, placeholder in ((str(host_cache()), "<host-cache>"), (str(REPO), "<repo>")):
        text = text.replace(real, placeholder)
    path.write_text(text, "utf-8")


if __name__ == "__main__":
    main()
