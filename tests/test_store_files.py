"""The JSONL appender: concurrent captures share an fsync but never interleave or vanish."""

from __future__ import annotations

import json
import threading

import pytest

from memory_tencentdb.store import files


def test_concurrent_appends_are_whole_and_complete(tmp_path):
    path = tmp_path / "conversations" / "2026-11-30.jsonl"

    def worker(k: int) -> None:
        for i in range(100):
            files.append_lines(
                path, [{"k": k, "i": i, "text": "用户说"}, {"k": k, "i": i, "part": 2}]
            )

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    assert len(lines) == 1200
    for first, second in zip(
        lines[::2], lines[1::2], strict=True
    ):  # one call's lines stay together
        assert (first["k"], first["i"]) == (second["k"], second["i"]) and second["part"] == 2
    for k in range(6):
        assert [row["i"] for row in lines[::2] if row["k"] == k] == list(range(100))


def test_a_failed_write_is_reported_to_the_caller(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(OSError):
        files.append_lines(blocker / "day.jsonl", [{"a": 1}])
    # The appender is not stuck: the next write to a good path works.
    files.append_lines(tmp_path / "ok.jsonl", [{"a": 1}])
    assert (tmp_path / "ok.jsonl").read_text() == '{"a":1}\n'
