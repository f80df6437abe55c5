"""A Hermes offload budget below what any request needs is refused where it is set, naming the
minimum (the gateway answers 422 under 1024 tokens: system prompt, request and canvas)."""

from __future__ import annotations

import logging

import pytest

from hermes_plugin.config import OFFLOAD_MIN_BUDGET, Settings, check


def test_setup_refuses_a_budget_under_the_minimum_naming_it() -> None:
    with pytest.raises(ValueError, match="offload_token_budget: 500 is below 1024"):
        check({"offload_token_budget": 500})
    assert check({"offload_token_budget": 0}) == {"offload_token_budget": 0}
    assert check({"offload_token_budget": 1024}) == {"offload_token_budget": 1024}


def test_a_budget_under_the_minimum_at_start_is_logged_and_not_used(
    tmp_path, monkeypatch, caplog
) -> None:
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("MEMORY_TENCENTDB_OFFLOAD_TOKEN_BUDGET", "300")
    with caplog.at_level(logging.WARNING):
        settings = Settings.load(tmp_path)
    assert settings.offload_token_budget == 0  # the model's context length, not 300
    assert any(str(OFFLOAD_MIN_BUDGET) in r.getMessage() for r in caplog.records)
