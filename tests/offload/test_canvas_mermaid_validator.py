"""The Mermaid validator the canvas tests rely on: it must reject broken flowcharts and accept
good ones, or a passing canvas test would prove nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mermaid import MermaidValidator, require_validator

GOOD = {
    "minimal": 'flowchart TD\n    001-N1["fix-auth-tests"]\n',
    "canvas": (
        '%% {"taskGoal": "Make auth tests pass", "createdTime": "2026-03-25T16:50:02.000+08:00"}\n'
        "flowchart TD\n"
        '    003-N1["Explore: read auth module<br/>status: done<br/>summary: expiry logic in '
        'utils/token.py<br/>Timestamp: 2026-03-25T16:51:10.000+08:00"]\n'
        '    003-N2{{"Test: run auth suite<br/>status: doing<br/>summary: 3 expiry failures"}}\n'
        "    003-N1 -->|located| 003-N2\n"
        "    003-N2 -.->|ref| 003-N1\n"
    ),
    "zh": (
        "flowchart TD\n"
        '    002-N1["探索：阅读 登录 模块<br/>status: done<br/>summary: 过期逻辑在 utils/token.py"]\n'
        '    002-N2["测试：运行 测试 套件<br/>status: blocked<br/>summary: 3 个失败"]\n'
        "    002-N1 --> 002-N2\n"
    ),
    "subgraph_and_class": (
        "flowchart TD\n"
        "    subgraph T1[task one]\n"
        '        004-N1["step 1"] --> 004-N2["step 2"]\n'
        "    end\n"
        "    classDef done fill:#cfc\n"
        "    class 004-N1 done\n"
    ),
}

BAD = {
    "unclosed_bracket": 'flowchart TD\n    001-N1["fix it\n',
    "dangling_arrow": 'flowchart TD\n    001-N1["a"] -->\n',
    "quote_inside_label": 'flowchart TD\n    001-N1["say "hi" now"]\n',
    "stray_end": 'flowchart TD\n    001-N1["a"] --> 001-N2["b"]\n    end\n',
    "bad_direction_keyword": 'flowchart XY\n    001-N1["a"]\n',
    "not_a_flowchart": "sequenceDiagram\n    A->>B: hi\n",
    "empty": "",
    # The original project's metadata line: '%%{' opens a Mermaid directive, which must start
    # with a bare word, so the real parser rejects the whole file.
    "original_metadata_directive": '%%{ "taskGoal": "x", "createdTime": "2026" }%%\nflowchart TD\n    001-N1["a"]\n',
}


@pytest.fixture(scope="module")
def validator() -> MermaidValidator:
    return require_validator()


def test_accepts_good_flowcharts(validator: MermaidValidator, tmp_path: Path) -> None:
    results = validator.check_texts(list(GOOD.values()), tmp_path)
    for name, res in zip(GOOD, results, strict=True):
        assert res.ok, f"{name}: {res.error}"
        assert res.diagram_type and res.diagram_type.startswith("flowchart")


def test_rejects_broken_flowcharts(validator: MermaidValidator, tmp_path: Path) -> None:
    results = validator.check_texts(list(BAD.values()), tmp_path)
    for name, res in zip(BAD, results, strict=True):
        assert not res.ok, f"{name} was accepted"
        assert res.error, name


def test_many_files_one_process_keeps_order(validator: MermaidValidator, tmp_path: Path) -> None:
    texts = [GOOD["minimal"], BAD["dangling_arrow"]] * 25
    results = validator.check_texts(texts, tmp_path)
    assert [r.ok for r in results] == [True, False] * 25
    assert [Path(r.file).name for r in results] == [f"case-{i:03d}.mmd" for i in range(50)]
