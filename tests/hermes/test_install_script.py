"""scripts/install-hermes.sh in a temporary HOME: install, install again, uninstall."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from .harness import PLUGIN_DIR, REPO, clean_env, hermes_venv

SCRIPT = REPO / "scripts" / "install-hermes.sh"

USER_CONFIG = """\
# my hermes settings
model:
  default: some-model   # keep this comment
memory:
  memory_enabled: true
  provider: ""
display:
  skin: dark
"""


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    env["HOME"] = str(home)
    r = subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def backups(hermes_home: Path) -> list[Path]:
    return sorted(hermes_home.glob("config.yaml.bak-*"))


@pytest.fixture
def fake_home(tmp_path: Path) -> Path:
    if not (REPO / ".venv" / "bin" / "memory-tencentdb").exists():
        pytest.skip("the gateway venv (.venv) is missing; run `make install`")
    hermes_home = tmp_path / ".hermes"
    hermes_home.mkdir()
    (hermes_home / "config.yaml").write_text(USER_CONFIG, "utf-8")
    return tmp_path


def test_install_twice_then_uninstall(fake_home: Path):
    hermes_home = fake_home / ".hermes"
    link = hermes_home / "plugins" / "memory_tencentdb"

    run(fake_home)
    assert link.is_symlink() and link.resolve() == PLUGIN_DIR.resolve()
    text = (hermes_home / "config.yaml").read_text("utf-8")
    cfg = yaml.safe_load(text)
    assert cfg["memory"] == {"memory_enabled": True, "provider": "memory_tencentdb"}
    assert cfg["display"] == {"skin": "dark"}
    assert "# keep this comment" in text and "# my hermes settings" in text
    assert len(backups(hermes_home)) == 1
    assert backups(hermes_home)[0].read_text("utf-8") == USER_CONFIG

    second = run(fake_home)
    assert "already" in second.stdout
    assert (hermes_home / "config.yaml").read_text("utf-8") == text
    assert len(backups(hermes_home)) == 1  # nothing changed, so no new backup

    run(fake_home, "--uninstall")
    assert not link.exists() and not link.is_symlink()
    cfg = yaml.safe_load((hermes_home / "config.yaml").read_text("utf-8"))
    assert cfg["memory"] == {"memory_enabled": True, "provider": ""}
    assert cfg["model"] == {"default": "some-model"}
    assert PLUGIN_DIR.is_dir()  # the checkout itself is untouched

    again = run(fake_home, "--uninstall")
    assert "no symlink" in again.stdout


def test_install_without_config_and_hermes_finds_the_provider(fake_home: Path):
    hermes_home = fake_home / "profiles" / "work"
    run(fake_home, "--hermes-home", str(hermes_home))
    cfg = yaml.safe_load((hermes_home / "config.yaml").read_text("utf-8"))
    assert cfg == {"memory": {"provider": "memory_tencentdb"}}
    assert not backups(hermes_home)
    venv = hermes_venv()
    if not (venv / "bin" / "python").exists():
        return  # the Hermes-side check below needs the real Hermes
    env = clean_env()
    env.update(HOME=str(fake_home), HERMES_HOME=str(hermes_home))
    probe = (
        "from plugins.memory import find_provider_dir, load_memory_provider\n"
        "print(find_provider_dir('memory_tencentdb'))\n"
        "print(load_memory_provider('memory_tencentdb').name)\n"
    )
    r = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.fspath(fake_home),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [
        str(hermes_home / "plugins" / "memory_tencentdb"),
        "memory_tencentdb",
    ]
