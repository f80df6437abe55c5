"""Configuration: defaults, precedence, file discovery, interpolation and startup errors.

Every test passes its own ``env`` and ``cwd`` (a fresh tmp_path with HOME inside it), so the
developer's real environment, home directory and config files are never read.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from memory_tencentdb.config import (
    NAMED_ENV,
    ConfigError,
    MemorySettings,
    Settings,
    load_settings,
    redacted,
    tzinfo,
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def load(home: Path, cwd: Path, **env: str) -> Settings:
    return load_settings(env={"HOME": str(home), **env}, cwd=cwd)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def error_of(home: Path, cwd: Path, **env: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load(home, cwd, **env)
    return str(caught.value)


# --------------------------------------------------------------------------- defaults


def test_defaults_match_the_original(home: Path, cwd: Path) -> None:
    s = load(home, cwd)
    assert s.config_file is None
    assert s.data_dir == home / ".memory-tencentdb" / "memory-tdai"
    assert (s.server.host, s.server.port, s.server.api_key) == ("127.0.0.1", 8420, None)
    assert s.server.cors_origins == [] and s.server.max_body_bytes == 1048576
    assert s.llm.model_dump() == {
        "base_url": "https://api.openai.com/v1",
        "api_key": "",
        "model": "gpt-4o",
        "max_tokens": 4096,
        "timeout_ms": 120000,
        # Memory work on the hosts' own models (issue 24).
        "daily_call_budget": 300,
        "daily_token_budget": 600000,
        "host_rest_seconds": 30,
    }
    assert not s.llm_configured and not s.llm.configured
    m = s.memory
    assert (m.timezone, m.store_backend) == ("system", "sqlite")
    assert m.capture.model_dump() == {
        "enabled": True,
        "exclude_agents": [],
        "l0l1_retention_days": 0,
        "allow_aggressive_cleanup": False,
        "clean_time": "03:00",
    }
    assert m.capture.retention_days is None
    assert m.extraction.model_dump() == {
        "enabled": True,
        "enable_dedup": True,
        "max_memories_per_session": 20,
        "model": None,
    }
    assert (m.persona.trigger_every_n, m.persona.max_scenes) == (50, 15)
    assert (m.persona.backup_count, m.persona.scene_backup_count) == (3, 10)
    assert m.pipeline.model_dump() == {
        "every_n_conversations": 5,
        "enable_warmup": True,
        "l1_idle_timeout_seconds": 600,
        "l2_delay_after_l1_seconds": 10,
        "l2_min_interval_seconds": 900,
        "l2_max_interval_seconds": 3600,
        "session_active_window_hours": 24,
        "extract_before_recall": True,  # new: not in the original
    }
    assert m.recall.model_dump() == {
        "enabled": True,
        "max_results": 5,
        "max_chars_per_memory": 0,
        "max_total_recall_chars": 0,
        "score_threshold": 0.3,
        "strategy": "hybrid",
        "timeout_ms": 5000,
        "extraction_wait_ms": 1500,  # new: not in the original
    }
    e = m.embedding
    assert (e.provider, e.model, e.enabled, e.active) == ("local", "", True, True)
    assert (e.base_url, e.api_key, e.dimensions, e.send_dimensions) == ("", "", 0, True)
    assert (e.conflict_recall_top_k, e.max_input_chars, e.timeout_ms) == (5, 5000, 10000)
    assert (e.recall_timeout_ms, e.capture_timeout_ms, e.num_threads) == (None, None, 1)
    assert e.effective_recall_timeout_ms == 10000
    assert (m.bm25.enabled, m.bm25.language) == (True, "zh")
    assert (m.tcvdb.username, m.tcvdb.embedding_model, m.tcvdb.timeout) == (
        "root",
        "bge-large-zh",
        10000,
    )
    assert (m.report.enabled, m.report.type) == (False, "local")
    assert (m.llm.enabled, m.llm.model, m.llm.max_tokens) == (False, "gpt-4o", 4096)
    o = m.offload
    assert (o.enabled, o.mode, o.temperature, o.force_trigger_threshold) == (
        False,
        "local",
        0.2,
        4,
    )
    assert (o.default_context_window, o.max_pairs_per_batch, o.l2_null_threshold) == (
        200000,
        20,
        4,
    )
    assert (o.l2_timeout_seconds, o.backend_timeout_ms, o.log_max_size_mb) == (300, 120000, 50)
    assert (o.mild_offload_ratio, o.aggressive_compress_ratio, o.mmd_max_token_ratio) == (
        0.5,
        0.85,
        0.2,
    )
    assert o.offload_retention_days == 0


def test_file_keys_are_the_originals_camel_case() -> None:
    fields = MemorySettings.model_fields
    capture = fields["capture"].annotation.model_fields
    pipeline = fields["pipeline"].annotation.model_fields
    assert capture["l0l1_retention_days"].alias == "l0l1RetentionDays"
    assert pipeline["l2_delay_after_l1_seconds"].alias == "l2DelayAfterL1Seconds"
    assert pipeline["every_n_conversations"].alias == "everyNConversations"
    assert fields["store_backend"].alias == "storeBackend"


def test_settings_can_be_built_directly_for_tests(tmp_path: Path) -> None:
    s = Settings(data_dir=tmp_path, memory={"recall": {"maxResults": 3}})
    assert s.memory.recall.max_results == 3 and s.data_dir == tmp_path


# --------------------------------------------------------------------------- precedence


def test_env_beats_file_beats_default(home: Path, cwd: Path) -> None:
    write(
        cwd / "tdai-gateway.yaml",
        "server:\n  port: 9000\n  host: 0.0.0.0\nllm:\n  model: qwen-plus\n",
    )
    s = load(home, cwd, TDAI_GATEWAY_PORT="9100")
    assert s.server.port == 9100  # env
    assert s.server.host == "0.0.0.0"  # file
    assert s.llm.model == "qwen-plus"  # file
    assert s.llm.max_tokens == 4096  # default
    assert s.config_file == cwd / "tdai-gateway.yaml"


PAIRED_ENV = [(path, names) for path, names in NAMED_ENV.items() if len(names) == 2]


@pytest.mark.parametrize(("path", "names"), PAIRED_ENV)
def test_tdai_name_wins_over_memory_tencentdb_name(
    home: Path, cwd: Path, path: tuple[str, ...], names: tuple[str, ...]
) -> None:
    values = {
        "port": ("9001", "9002"),
        "max_tokens": ("111", "222"),
        "timeout_ms": ("3000", "4000"),
        "data_dir": (str(home / "a"), str(home / "b")),
        "auth": ("off", "on"),
    }.get(path[-1], ("from-tdai", "from-memory-tencentdb"))
    both = load(home, cwd, **{names[0]: values[0], names[1]: values[1]})
    only_second = load(home, cwd, **{names[1]: values[1]})

    def get(s: Settings) -> str:
        node = s
        for part in path:
            node = getattr(node, part)
        return str(node)

    assert get(both) == values[0]
    assert get(only_second) == values[1]


def test_env_values_are_trimmed_and_empty_counts_as_unset(home: Path, cwd: Path) -> None:
    s = load(
        home,
        cwd,
        TDAI_GATEWAY_PORT="   ",
        MEMORY_TENCENTDB_GATEWAY_PORT=" 9300 ",
        TDAI_LLM_MODEL="  qwen-max  ",
        TDAI_GATEWAY_API_KEY="",
        TDAI_CORS_ORIGINS=" http://a.test , ,http://b.test ",
    )
    assert s.server.port == 9300
    assert s.llm.model == "qwen-max"
    assert s.server.api_key is None
    assert s.server.cors_origins == ["http://a.test", "http://b.test"]


def test_generic_nested_env_reaches_any_field(home: Path, cwd: Path) -> None:
    s = load(
        home,
        cwd,
        TDAI_MEMORY__RECALL__MAX_RESULTS="8",
        tdai_memory__pipeline__everyNConversations="7",
        TDAI_MEMORY__CAPTURE__EXCLUDE_AGENTS='["客服-*", "bench-*"]',
        TDAI_MEMORY__OFFLOAD__ENABLED="true",
        TDAI_SERVER__HOST="0.0.0.0",
        TDAI_DATA__BASE_DIR="~/记忆",
    )
    assert s.memory.recall.max_results == 8
    assert s.memory.pipeline.every_n_conversations == 7
    assert s.memory.capture.exclude_agents == ["客服-*", "bench-*"]
    assert s.memory.offload.enabled is True
    assert s.server.host == "0.0.0.0"
    assert s.data_dir == home / "记忆"


def test_named_env_wins_over_generic_form(home: Path, cwd: Path) -> None:
    s = load(home, cwd, TDAI_LLM__MODEL="generic", TDAI_LLM_MODEL="named")
    assert s.llm.model == "named"


def test_convenience_env_names(home: Path, cwd: Path) -> None:
    s = load(
        home,
        cwd,
        TDAI_TIMEZONE="Asia/Shanghai",
        TDAI_EMBEDDING_PROVIDER="OpenAI",
        TDAI_EMBEDDING_MODEL="text-embedding-3-small",
        TDAI_EMBEDDING_BASE_URL="https://api.openai.com/v1",
        TDAI_EMBEDDING_API_KEY="sk-embed",
        TDAI_EMBEDDING_DIMENSIONS="512",
        TDAI_RECALL_STRATEGY="keyword",
        TDAI_RECALL_TIMEOUT_MS="1500",
        TDAI_GATEWAY_MAX_BODY_BYTES="2048",
    )
    assert s.memory.timezone == "Asia/Shanghai"
    assert s.memory.embedding.provider == "openai" and s.memory.embedding.dimensions == 512
    assert s.memory.recall.strategy == "keyword" and s.memory.recall.timeout_ms == 1500
    assert s.server.max_body_bytes == 2048


# --------------------------------------------------------------------------- the file


def test_camel_and_snake_keys_both_work(home: Path, cwd: Path) -> None:
    write(
        cwd / "tdai-gateway.yaml",
        """
# 记忆网关配置
server:
  apiKey: gw-secret
  cors_origins: "http://a.test,http://b.test"
memory:
  timezone: Asia/Shanghai
  recall:
    maxResults: 9
    max_chars_per_memory: 300
  pipeline:
    everyNConversations: 3
    l1_idle_timeout_seconds: 120
  capture:
    excludeAgents: ["客服-*"]
  offload:
    userId: 张三
""",
    )
    s = load(home, cwd)
    assert s.server.api_key == "gw-secret"
    assert s.server.cors_origins == ["http://a.test", "http://b.test"]
    assert s.memory.recall.max_results == 9 and s.memory.recall.max_chars_per_memory == 300
    assert s.memory.pipeline.every_n_conversations == 3
    assert s.memory.pipeline.l1_idle_timeout_seconds == 120
    assert s.memory.capture.exclude_agents == ["客服-*"]
    assert s.memory.offload.user_id == "张三"


def test_variable_substitution(home: Path, cwd: Path) -> None:
    write(
        cwd / "tdai-gateway.yaml",
        """
server:
  apiKey: ${GW_KEY}
  port: ${PORT}
llm:
  apiKey: ${MISSING_KEY}
  baseUrl: http://${LLM_HOST:-localhost}:${LLM_PORT-8000}/v1
  model: ${EMPTY:-qwen2.5}
memory:
  capture:
    excludeAgents: ["${AGENT}-*", "literal-$${AGENT}"]
""",
    )
    s = load(home, cwd, GW_KEY=" k-123 ", PORT="9123", LLM_PORT="9999", EMPTY="", AGENT="测试")
    assert s.server.api_key == "k-123" and s.server.port == 9123
    assert s.llm.api_key == ""  # unset -> "" -> the default
    assert s.llm.base_url == "http://localhost:9999/v1"
    assert s.llm.model == "qwen2.5"
    assert s.memory.capture.exclude_agents == ["测试-*", "literal-${AGENT}"]
    assert s.llm_configured  # a local OpenAI-compatible server needs no key


def test_json_file_and_yaml_1_2_scalars(home: Path, cwd: Path) -> None:
    write(cwd / "tdai-gateway.json", json.dumps({"memory": {"recall": {"maxResults": 4}}}))
    assert load(home, cwd).memory.recall.max_results == 4
    write(cwd / "tdai-gateway.yaml", "memory:\n  capture:\n    cleanTime: 4:30\n")
    assert load(home, cwd).memory.capture.clean_time == "04:30"  # not 270 (YAML 1.1 base 60)


def test_discovery_order(home: Path, cwd: Path, tmp_path: Path) -> None:
    data_dir = home / ".memory-tencentdb" / "memory-tdai"
    write(data_dir / "tdai-gateway.json", '{"llm": {"model": "from-data-dir"}}')
    assert load(home, cwd).llm.model == "from-data-dir"
    write(cwd / "tdai-gateway.json", '{"llm": {"model": "from-cwd-json"}}')
    assert load(home, cwd).llm.model == "from-cwd-json"
    write(cwd / "tdai-gateway.yaml", "llm: {model: from-cwd-yaml}")
    assert load(home, cwd).llm.model == "from-cwd-yaml"
    explicit = write(tmp_path / "etc" / "gw.yml", "llm: {model: explicit}")
    s = load(home, cwd, TDAI_GATEWAY_CONFIG=str(explicit))
    assert (s.llm.model, s.config_file) == ("explicit", explicit)


def test_missing_explicit_config_is_an_error(home: Path, cwd: Path) -> None:
    message = error_of(home, cwd, TDAI_GATEWAY_CONFIG=str(cwd / "nope.yaml"))
    assert "TDAI_GATEWAY_CONFIG" in message and "nope.yaml" in message


def test_data_dir_resolution(home: Path, cwd: Path) -> None:
    assert load(home, cwd, MEMORY_TENCENTDB_ROOT="~/root").data_dir == home / "root/memory-tdai"
    config = write(cwd / "conf" / "gw.yaml", "data:\n  baseDir: ./data\n")
    s = load(home, cwd, TDAI_GATEWAY_CONFIG=str(config))
    assert s.data_dir == cwd / "conf" / "data"  # relative to the file that says it
    s = load(home, cwd, TDAI_GATEWAY_CONFIG=str(config), TDAI_DATA_DIR="rel")
    assert s.data_dir == cwd / "rel"  # env beats the file; relative to cwd


def test_config_in_named_data_dir_and_legacy_dir(home: Path, cwd: Path) -> None:
    named = write(home / "mem" / "tdai-gateway.yaml", "llm: {model: from-named-dir}")
    assert load(home, cwd, TDAI_DATA_DIR=str(named.parent)).llm.model == "from-named-dir"
    legacy = home / "memory-tdai"
    legacy.mkdir()
    assert load(home, cwd).data_dir == legacy  # the original's pre-0.3 location, if only it exists
    (home / ".memory-tencentdb" / "memory-tdai").mkdir(parents=True)
    assert load(home, cwd).data_dir == home / ".memory-tencentdb" / "memory-tdai"


def test_unknown_keys_only_warn(home: Path, cwd: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(cwd / "tdai-gateway.yaml", "memory:\n  recall:\n    maxResult: 3\nextra: 1\n")
    with caplog.at_level(logging.WARNING, logger="memory_tencentdb.config"):
        s = load(home, cwd)
    assert s.memory.recall.max_results == 5
    assert "memory.recall.maxResult" in caplog.text and "did you mean maxResults" in caplog.text
    assert "extra" in caplog.text


# --------------------------------------------------------------------------- bad values


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"TDAI_MEMORY__RECALL__MAX_RESULTS": "abc"},
            'memory.recall.maxResults: must be an integer >= 1, got "abc" '
            "(from env TDAI_MEMORY__RECALL__MAX_RESULTS)",
        ),
        ({"TDAI_GATEWAY_PORT": "70000"}, "server.port: must be an integer from 1 to 65535"),
        ({"MEMORY_TENCENTDB_GATEWAY_PORT": "0"}, "MEMORY_TENCENTDB_GATEWAY_PORT"),
        ({"TDAI_RECALL_STRATEGY": "fuzzy"}, 'memory.recall.strategy: must be one of "keyword"'),
        ({"TDAI_TIMEZONE": "Mars/Olympus"}, "memory.timezone"),
        ({"TDAI_MEMORY__CAPTURE__CLEAN_TIME": "24:00"}, "memory.capture.cleanTime"),
        ({"TDAI_MEMORY__OFFLOAD__MILD_OFFLOAD_RATIO": "0"}, "memory.offload.mildOffloadRatio"),
        ({"TDAI_LLM_TIMEOUT_MS": "-5"}, "llm.timeoutMs: must be an integer >= 1"),
        ({"TDAI_MEMORY__RECALL__ENABLED": "maybe"}, "memory.recall.enabled: must be true or false"),
        ({"TDAI_MEMORY__STORE_BACKEND": "postgres"}, "memory.storeBackend"),
        ({"TDAI_EMBEDDING_PROVIDER": "openai"}, "memory.embedding.baseUrl: is required"),
        ({"TDAI_MEMORY__OFFLOAD__OFFLOAD_RETENTION_DAYS": "2"}, "at least 3 days"),
        (
            {"TDAI_MEMORY__PIPELINE__L2_MIN_INTERVAL_SECONDS": "7200"},
            "memory.pipeline.l2MinIntervalSeconds: must not exceed",
        ),
    ],
)
def test_bad_env_values_stop_startup(
    home: Path, cwd: Path, env: dict[str, str], expected: str
) -> None:
    assert expected in error_of(home, cwd, **env)


def test_bad_file_value_names_field_and_file(home: Path, cwd: Path) -> None:
    path = write(cwd / "tdai-gateway.yaml", "memory:\n  recall:\n    scoreThreshold: 高\n")
    message = error_of(home, cwd)
    assert "memory.recall.scoreThreshold: must be a number from 0 to 1" in message
    assert '"高"' in message and str(path) in message


def test_every_problem_is_reported_at_once(home: Path, cwd: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load(home, cwd, TDAI_GATEWAY_PORT="x", TDAI_LLM_MAX_TOKENS="0")
    assert len(caught.value.problems) == 2


def test_aggressive_retention_needs_the_opt_in(home: Path, cwd: Path) -> None:
    message = error_of(home, cwd, TDAI_MEMORY__CAPTURE__L0L1_RETENTION_DAYS="1")
    assert "memory.capture.l0l1RetentionDays" in message
    assert "allowAggressiveCleanup" in message
    s = load(
        home,
        cwd,
        TDAI_MEMORY__CAPTURE__L0L1_RETENTION_DAYS="2",
        TDAI_MEMORY__CAPTURE__ALLOW_AGGRESSIVE_CLEANUP="true",
    )
    assert s.memory.capture.retention_days == 2
    negative = load(home, cwd, TDAI_MEMORY__CAPTURE__L0L1_RETENTION_DAYS="-1")
    assert negative.memory.capture.retention_days is None


@pytest.mark.parametrize(
    ("name", "text", "detail"),
    [
        ("tdai-gateway.yaml", "server:\n  port: [8420\n", "not valid YAML"),
        ("tdai-gateway.json", '{"server": {"port": 8420,}}', "not valid JSON"),
        ("tdai-gateway.yaml", "- just\n- a list\n", "top level must be a mapping"),
    ],
)
def test_malformed_file_names_the_file(
    home: Path, cwd: Path, name: str, text: str, detail: str
) -> None:
    path = write(cwd / name, text)
    message = error_of(home, cwd)
    assert str(path) in message and detail in message


def test_empty_file_means_defaults(home: Path, cwd: Path) -> None:
    write(cwd / "tdai-gateway.yaml", "# nothing yet\n")
    assert load(home, cwd).server.port == 8420


# --------------------------------------------------------------------------- providers, llm


@pytest.mark.parametrize("provider", ["local", "none", "siliconflow", "zeroentropy", "qclaw"])
def test_embedding_providers(home: Path, cwd: Path, provider: str) -> None:
    env = {"TDAI_EMBEDDING_PROVIDER": provider}
    if provider not in ("local", "none"):
        env |= {
            "TDAI_EMBEDDING_BASE_URL": "https://embed.example/v1",
            "TDAI_EMBEDDING_MODEL": "bge-m3",
            "TDAI_EMBEDDING_API_KEY": "k",
            "TDAI_MEMORY__EMBEDDING__PROXY_URL": "http://proxy.example",
        }
    e = load(home, cwd, **env).memory.embedding
    assert e.provider == provider
    assert e.active is (provider != "none")


def test_qclaw_requires_proxy(home: Path, cwd: Path) -> None:
    message = error_of(
        home,
        cwd,
        TDAI_EMBEDDING_PROVIDER="qclaw",
        TDAI_EMBEDDING_BASE_URL="https://embed.example/v1",
        TDAI_EMBEDDING_MODEL="m",
        TDAI_EMBEDDING_API_KEY="k",
    )
    assert "memory.embedding.proxyUrl: is required" in message


def test_llm_configured(home: Path, cwd: Path) -> None:
    assert load(home, cwd, MEMORY_TENCENTDB_LLM_API_KEY="sk-1").llm_configured
    assert load(home, cwd, TDAI_LLM_BASE_URL="http://127.0.0.1:11434/v1").llm_configured
    assert not load(home, cwd, TDAI_LLM_BASE_URL="https://api.openai.com/v1/").llm_configured


# --------------------------------------------------------------------------- tz, redaction


def test_tzinfo(home: Path, cwd: Path) -> None:
    moment = datetime(2025, 1, 15, 12, 0)
    shanghai = load(home, cwd, TDAI_TIMEZONE="Asia/Shanghai")
    assert tzinfo(shanghai).utcoffset(moment) == timedelta(hours=8)
    assert tzinfo("+05:30").utcoffset(moment) == timedelta(hours=5, minutes=30)
    assert tzinfo("-03:00").utcoffset(None) == timedelta(hours=-3)
    assert tzinfo(load(home, cwd)).utcoffset(moment) is not None  # "system"


def test_redacted_hides_secrets(home: Path, cwd: Path) -> None:
    s = load(
        home,
        cwd,
        TDAI_GATEWAY_API_KEY="gw-s3cr3t",
        TDAI_LLM_API_KEY="sk-llm-s3cr3t",
        TDAI_EMBEDDING_API_KEY="sk-embed-s3cr3t",
        TDAI_MEMORY__TCVDB__API_KEY="tc-s3cr3t",
        TDAI_MEMORY__OFFLOAD__BACKEND_URL="https://bob:pw-s3cr3t@offload.example/api",
        TDAI_MEMORY__OFFLOAD__BACKEND_API_KEY="off-s3cr3t",
    )
    view = redacted(s)
    text = json.dumps(view)
    assert "s3cr3t" not in text
    assert view["server"]["apiKey"] == "***" and view["llm"]["apiKey"] == "***"
    assert view["memory"]["embedding"]["apiKey"] == "***"
    assert view["memory"]["offload"]["backendUrl"] == "https://bob:***@offload.example/api"
    assert view["memory"]["llm"]["apiKey"] == ""  # unset stays visibly unset
    assert view["llm"]["configured"] is True
    assert "s3cr3t" not in repr(s)


def test_bad_secret_is_not_echoed(home: Path, cwd: Path) -> None:
    write(cwd / "tdai-gateway.yaml", "llm:\n  apiKey: [sk-very-s3cr3t]\n")
    message = error_of(home, cwd)
    assert "llm.apiKey" in message and "sk-very-s3cr3t" not in message
