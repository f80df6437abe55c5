"""``hermes_plugin.host_model.resolve()`` on Hermes's real auxiliary client classes (issue 24).

Run in Hermes's own venv (where ``agent.auxiliary_client`` lives), with the classes built directly
and ``get_text_auxiliary_client`` answering them, so no provider or network is involved: native
Anthropic with an API key is handed over with ``"api": "anthropic"`` (sync and async wrappers,
Anthropic-compatible hosts too); an Anthropic OAuth token, Codex and a plain OpenAI endpoint keep
their answers.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .harness import clean_env

pytestmark = pytest.mark.hermes

SCRIPT = r"""
import json
from types import SimpleNamespace

import agent.auxiliary_client as aux
from hermes_plugin import host_model

Anthropic = aux.AnthropicAuxiliaryClient
clients = {
    "anthropic": Anthropic(object(), "m", "sk-ant-api03-KEY", "https://api.anthropic.com/"),
    "async": aux.AsyncAnthropicAuxiliaryClient(
        Anthropic(object(), "m", "mm-KEY", "https://api.minimax.io/anthropic")
    ),
    "oauth": Anthropic(object(), "m", "sk-ant-oat01-TOKEN", "https://api.anthropic.com",
                       is_oauth=True),
    "codex": aux.CodexAuxiliaryClient(
        SimpleNamespace(api_key="k", base_url="https://chatgpt.com/backend-api/codex"), "m"
    ),
    "openai": SimpleNamespace(api_key="sk-or", base_url="https://openrouter.ai/api/v1/"),
}
out = {}
for name, client in clients.items():
    aux.get_text_auxiliary_client = lambda task, c=client: (c, "claude-haiku-4-5")
    out[name] = host_model.resolve()
print(json.dumps(out))
"""


def test_resolve_hands_native_anthropic_over_with_its_protocol(hermes: Path):
    repo = Path(__file__).resolve().parents[2]
    env = {**clean_env(), "PYTHONPATH": str(repo)}
    run = subprocess.run(
        [str(hermes / "bin" / "python"), "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    model = {"source": "hermes", "model": "claude-haiku-4-5", "api": "anthropic"}
    assert got["anthropic"] == {
        **model,
        "base_url": "https://api.anthropic.com",
        "api_key": "sk-ant-api03-KEY",
    }
    assert got["async"] == {
        **model,
        "base_url": "https://api.minimax.io/anthropic",
        "api_key": "mm-KEY",
    }
    assert got["oauth"] == {"source": "hermes", "unusable": "native Anthropic with an OAuth token"}
    assert got["codex"] == {"source": "hermes", "unusable": "Codex OAuth (Responses API)"}
    assert got["openai"] == {
        "source": "hermes",
        "base_url": "https://openrouter.ai/api/v1",
        "api_key": "sk-or",
        "model": "claude-haiku-4-5",
    }
