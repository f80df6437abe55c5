"""``hermes memory setup memory_tencentdb``, the real CLI, answers piped in as a user types them.

Hermes's generic wizard stored any text (a port of "abc" went to .env and became the default at
the next start without a word); our ``post_setup`` checks each answer, says what is wrong, asks
again, and saves nothing bad.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from hermes_plugin.config import Settings, save

from .harness import HermesHome, hermes_venv

pytestmark = pytest.mark.hermes


def test_setup_rejects_bad_values_with_a_clear_message_and_saves_good_ones(home: HermesHome):
    answers = [
        "",  # host: keep 127.0.0.1
        "abc",  # port: refused ...
        "8421",  # ... asked again
        "",  # api key: none
        "maybe",  # auto start: refused ...
        "false",
        "99",  # recall budget: out of range ...
        "3",
        "",  # first-turn budget: keep
    ]
    r = subprocess.run(
        [str(hermes_venv() / "bin" / "hermes"), "memory", "setup", "memory_tencentdb"],
        input="\n".join(answers) + "\n",
        env=home.env(),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(home.root),
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "gateway_port: 'abc' is not a whole number between 1 and 65535" in out, out
    assert "auto_start: 'maybe' is not true or false" in out, out
    assert "recall_budget_s: 99 is out of range (0.05 to 5)" in out, out
    saved = json.loads((home.root / "memory_tencentdb.json").read_text("utf-8"))
    assert saved == {"gateway_port": 8421, "auto_start": False, "recall_budget_s": 3.0}, saved
    env_file = home.root / ".env"
    assert not env_file.exists() or "abc" not in env_file.read_text("utf-8")
    assert "provider: memory_tencentdb" in (home.root / "config.yaml").read_text("utf-8")
    # What the provider then reads, with nothing in the environment.
    settings = Settings.load(home.root)
    assert (settings.gateway_port, settings.auto_start, settings.recall_budget_s) == (
        8421,
        False,
        3.0,
    )


def test_save_config_refuses_a_bad_value_and_writes_nothing(tmp_path):
    with pytest.raises(ValueError, match="gateway_port: 'abc' is not a whole number"):
        save({"gateway_port": "abc", "auto_start": "true"}, tmp_path)
    assert not (tmp_path / "memory_tencentdb.json").exists()
    with pytest.raises(ValueError, match="first_turn_budget_s: 9 is out of range"):
        save({"first_turn_budget_s": "9"}, tmp_path)
    save({"gateway_port": " 8500 ", "auto_start": "no"}, tmp_path)
    saved = json.loads((tmp_path / "memory_tencentdb.json").read_text("utf-8"))
    assert saved == {"gateway_port": 8500, "auto_start": False}
