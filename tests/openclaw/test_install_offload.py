"""scripts/install-openclaw.sh --offload / --offload-no-slot / --no-offload with the real OpenClaw
2026.9.6 CLI (no agent turn: tests/openclaw/test_e2e_openclaw_offload.py runs those).

One throwaway OpenClaw home whose slot starts as "legacy" (a user's choice the script must give
back): --offload puts our engine in the slot, turns the flag on and keeps "legacy" as the
previous slot; a second --offload changes nothing; --no-offload restores "legacy" and turns the
flag off. A home with no slot key gets it removed again (--offload-no-slot). Each script run
costs 20-75 s (plugin link plus one validated config write), so the two homes play their steps
side by side once, in a module fixture, and the tests read what each step left.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.openclaw.harness import BRIDGE_DIR, OpenClawHome, require_openclaw
from tests.openclaw.offload_support import write_script_offload

REPO = Path(__file__).resolve().parents[2]
PLUGIN_ID = "memory-tencentdb"


def install(home: OpenClawHome, *flags: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "install-openclaw.sh"), "--port", "18999", *flags],
        env={**home.env(), "OPENCLAW": home.cli_command()},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def state(home: OpenClawHome) -> tuple[str | None, dict, dict]:
    cfg = home.read_config()
    plugins = cfg.get("plugins", {})
    entry = plugins.get("entries", {}).get(PLUGIN_ID, {})
    return plugins.get("slots", {}).get("contextEngine"), entry, entry.get("config", {})


def load_paths(home: OpenClawHome) -> list[str]:
    return home.read_config().get("plugins", {}).get("load", {}).get("paths", [])


# What the script printed, what it left (slot, entry, entry config), the plugin load paths, the
# whole plugins section.
Step = tuple[subprocess.CompletedProcess[str], tuple[str | None, dict, dict], list[str], dict]


def play(home: OpenClawHome, steps: list[tuple[str, ...]]) -> list[Step]:
    return [
        (install(home, *flags), state(home), load_paths(home), home.read_config()["plugins"])
        for flags in steps
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[Step]]]:
    installed = require_openclaw()
    root = tmp_path_factory.mktemp("oc-install-offload")
    chosen = OpenClawHome(installed, root / "chosen", "http://127.0.0.1:9/v1")
    cfg = chosen.read_config()
    cfg["plugins"] = {"slots": {"contextEngine": "legacy"}}
    chosen.write_config(cfg)
    plain = OpenClawHome(installed, root / "plain", "http://127.0.0.1:9/v1")
    with ThreadPoolExecutor(max_workers=2) as pool:
        a = pool.submit(play, chosen, [("--offload",), ("--offload",), ("--no-offload",)])
        b = pool.submit(play, plain, [("--offload",), ("--offload-no-slot",)])
        yield {"chosen": a.result(), "plain": b.result()}


def test_offload_sets_slot_entry_and_flag_and_keeps_the_previous_slot(runs) -> None:
    done, (slot, entry, config), *_ = runs["chosen"][0]
    assert "Context offload is on" in done.stdout
    assert slot == PLUGIN_ID
    assert entry["enabled"] is True
    assert entry["hooks"]["allowConversationAccess"] is True
    assert config["offload"] == {"enabled": True, "previousSlot": "legacy"}
    assert config["port"] == 18999, "other settings still written"


def test_offload_again_changes_nothing(runs) -> None:
    assert runs["chosen"][1][1] == runs["chosen"][0][1], "previousSlot not overwritten by our id"
    # Linked once: the switches after it start OpenClaw twice, not three times.
    assert "linking " in runs["chosen"][0][0].stdout
    for done, *_ in [*runs["chosen"][1:], runs["plain"][1]]:
        assert "already linked: " in done.stdout and "linking " not in done.stdout


def test_no_offload_restores_the_previous_slot(runs) -> None:
    done, (slot, entry, config), *_ = runs["chosen"][2]
    assert "back to legacy" in done.stdout
    assert slot == "legacy"
    assert config["offload"] == {"enabled": False, "previousSlot": ""}
    assert entry["enabled"] is True, "the plugin itself stays installed"


def test_without_a_slot_before_the_slot_key_goes_away_again(runs) -> None:
    (_, first, *_), (_, (slot, _entry, config), *_) = runs["plain"]
    assert first[0] == PLUGIN_ID
    assert config["offload"] == {"enabled": True, "previousSlot": ""}
    assert slot is None, "no slot key before, none after"


def test_offload_writes_what_the_harness_writes(runs, tmp_path: Path) -> None:
    """tests/openclaw/offload_support.install_offload writes the script's result itself (no CLI
    start) for the homes of the offload tests: the same plugins section, key for key."""
    _done, _state, _paths, plugins = runs["plain"][0]
    home = OpenClawHome(require_openclaw(), tmp_path / "harness", "http://127.0.0.1:9/v1")
    assert write_script_offload(home, 18999, None)["plugins"] == plugins


def test_the_link_is_the_load_path_the_harness_writes(runs) -> None:
    """tests/openclaw/harness.py links plugins by writing this path itself (no CLI start)."""
    for name, steps in runs.items():
        for _done, _state, paths, _plugins in steps:
            assert paths == [str(BRIDGE_DIR)], (name, paths)
