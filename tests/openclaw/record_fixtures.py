"""Record real OpenClaw hook payloads into tests/openclaw/fixtures/ (run by hand, not by pytest).

    .venv/bin/python -m tests.openclaw.record_fixtures

Links the recorder plugin (tests/openclaw/recorder) into a throwaway OpenClaw home, plays a few
scripted turns against the fake LLM, and writes one JSON file per scenario. Temporary paths are
replaced by placeholders so the fixtures hold nothing machine-specific.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.openclaw.harness import (
    FIXTURES,
    OPENCLAW_VERSION,
    RECORDER_DIR,
    OpenClawHome,
    OpenClawInstall,
)
from tests.support.fake_llm import FakeLLM
from tests.support.gateway import free_port

INJECTED = "<relevant-memories>\n- The user's favorite color is teal.\n</relevant-memories>"


def read_records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def sanitize(value, root: str):
    """The run's temporary directory out of every path: its ``home`` (OpenClaw's HOME) becomes
    ``<home>``, the rest of it ``<root>``, so no recorded line names this machine."""
    text = json.dumps(value, ensure_ascii=False)
    text = text.replace(f"{root}/home", "<home>").replace(root, "<root>")
    return json.loads(text)


def trim(record: dict) -> dict:
    """Drop the recording time, and the OpenClaw config copies that tool contexts carry."""
    record = {k: v for k, v in record.items() if k != "at"}
    ctx = record.get("toolCtx")
    if isinstance(ctx, dict):
        record["toolCtx"] = {
            k: "[omitted]" if k in ("config", "runtimeConfig") else v for k, v in ctx.items()
        }
    return record


def save(name: str, description: str, records: list[dict], root: str) -> None:
    doc = {
        "openclaw_version": OPENCLAW_VERSION,
        "description": description,
        "records": [trim(r) for r in records],
    }
    out = FIXTURES / f"{name}.json"
    out.write_text(json.dumps(sanitize(doc, root), indent=1, ensure_ascii=False) + "\n", "utf-8")
    print(f"wrote {out.relative_to(FIXTURES.parent.parent.parent)}: {len(records)} records")


def checked(done: subprocess.CompletedProcess[str]) -> None:
    if done.returncode != 0:
        print(done.stdout[-3000:], done.stderr[-3000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"openclaw exited {done.returncode}")


def main() -> None:
    install = OpenClawInstall.find()
    if install is None:
        raise SystemExit("OpenClaw is not installed: run `make hosts` first")
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="oc-record-") as tmp,
        FakeLLM(default_reply="OK.") as llm,
    ):
        root = Path(tmp)
        out = root / "records.jsonl"
        home = OpenClawHome(install, root / "home", llm.base_url)
        home.install_plugin(
            RECORDER_DIR, "mtdb-hook-recorder", {"outFile": str(out), "inject": INJECTED}
        )

        wanted = set(sys.argv[1:])  # scenario names; none means all

        def scenario(
            name: str, description: str, turns: list[tuple[str, str, list]], fails=False
        ) -> None:
            if wanted and name not in wanted:
                return
            out.unlink(missing_ok=True)
            for session_key, message, replies in turns:
                llm.replies.clear()
                llm.push(*replies)
                done = home.agent(message, session_key)
                if not fails:
                    checked(done)
            save(name, description, read_records(out), str(root))

        scenario(
            "plain_turns",
            "Two plain turns in one session (agent --local); the recorder injects a recall block.",
            [
                ("agent:main:rec-plain", "My favorite color is teal.", ["Noted: teal."]),
                ("agent:main:rec-plain", "I prefer short answers, please.", ["Understood."]),
            ],
        )
        scenario(
            "tool_turn",
            "One turn in which the model calls the recorder's search tool through Tool Search's tool_call.",
            [
                (
                    "agent:main:rec-tool",
                    "What is my favorite color? Check your memory.",
                    [
                        {
                            "tool_calls": [
                                {
                                    "name": "tool_call",
                                    "arguments": {
                                        "id": "recorder_memory_search",
                                        "args": {"query": "favorite color"},
                                    },
                                }
                            ]
                        },
                        "Your favorite color is teal.",
                    ],
                )
            ],
        )
        scenario(
            "failed_turn",
            "A turn whose model call fails (HTTP 400 from the provider).",
            [
                (
                    "agent:main:rec-fail",
                    "This turn will fail.",
                    [{"status": 400, "body": {"error": {"message": "scripted failure"}}}],
                )
            ],
            fails=True,  # the CLI reports the failed turn with exit 1
        )
        if not wanted or "gateway_session" in wanted:
            record_gateway_session(home, out, root)


def record_gateway_session(home: OpenClawHome, out: Path, root: Path) -> None:
    """session_start / session_end only fire under a long-lived OpenClaw Gateway."""
    out.unlink(missing_ok=True)
    port = free_port()
    cfg = home.read_config()
    cfg["gateway"] = {"port": port}  # where `openclaw agent` (no --local) finds the Gateway
    home.write_config(cfg)
    env = {**home.env(), "OPENCLAW_GATEWAY_TOKEN": "test-token"}
    gateway = subprocess.Popen(
        [str(home.install.node), str(home.install.entry), "gateway", "run", "--allow-unconfigured",
         "--port", str(port), "--auth", "token", "--bind", "loopback"],
        env=env, cwd=str(home.root), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        for message in ("Remember that I live in Lisbon.", "/new"):
            for _attempt in range(30):  # the Gateway takes a while to accept clients
                done = subprocess.run(
                    [str(home.install.node), str(home.install.entry), "agent", "--agent", "main",
                     "--session-key", "agent:main:rec-gw", "--message", message, "--json"],
                    env=env, cwd=str(home.root), capture_output=True, text=True, timeout=120,
                    stdin=subprocess.DEVNULL,
                )  # fmt: skip
                if done.returncode == 0:
                    break
                time.sleep(2)
            checked(done)
    finally:
        os.killpg(gateway.pid, signal.SIGTERM)
        try:
            gateway.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(gateway.pid, signal.SIGKILL)
    save(
        "gateway_session",
        "Under `openclaw gateway run`: one turn, then /new (session_end reason new), then SIGTERM.",
        read_records(out),
        str(root),
    )


if __name__ == "__main__":
    main()
