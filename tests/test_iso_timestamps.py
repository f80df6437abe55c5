"""ISO-8601 times with a ``Z`` are read as UTC everywhere a time comes in (Python >= 3.11's
``datetime.fromisoformat`` reads ``Z`` itself; the package requires 3.11, so no module rewrites
it to ``+00:00`` any more). In process: each reader that used to carry the workaround, with
the forms hosts and exports send, and the unreadable ones each refuses or replaces as before.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memory_tencentdb.capture import _timestamp_ms
from memory_tencentdb.gateway.schemas import Message
from memory_tencentdb.offload.service import _iso as offload_iso
from memory_tencentdb.operations import transfer
from memory_tencentdb.operations.browse import BadRequest, parse_since
from memory_tencentdb.pipeline.l1 import normalise_time
from memory_tencentdb.pipeline.scheduler import _epoch

SHANGHAI = timezone(timedelta(hours=8))
Z_FORMS = ["2024-05-29T16:26:40Z", "2024-05-29T16:26:40.000Z", "2024-05-29 16:26:40Z"]
EPOCH_MS = 1717000000000  # 2024-05-29T16:26:40Z


@pytest.mark.parametrize("text", Z_FORMS)
def test_every_reader_takes_z_as_utc(text):
    assert _timestamp_ms(text, fallback=0) == EPOCH_MS
    assert _epoch(text) == EPOCH_MS / 1000
    assert normalise_time(text, SHANGHAI) == "2024-05-30T00:26:40+08:00"
    assert offload_iso(text, SHANGHAI) == "2024-05-29T16:26:40.000+00:00"
    assert parse_since(text) == "2024-05-29T16:26:40.000Z"
    transfer._iso({"at": text}, 1, "at")  # accepted: no exception
    day = transfer._day_file({}, "conversations", text, SHANGHAI)
    assert day == "conversations/2024-05-30.jsonl"
    Message(role="user", content="你好 hello", timestamp=text)


@pytest.mark.parametrize("text", ["yesterday 10:00", "2024-13-01T00:00:00Z", "Z"])
def test_unreadable_times_are_refused_or_replaced_as_before(text):
    assert _timestamp_ms(text, fallback=7) == 7
    assert _epoch(text) == 0.0
    assert normalise_time(text, SHANGHAI) == ""
    assert offload_iso(text, SHANGHAI) is None
    with pytest.raises(BadRequest):
        parse_since(text)
    with pytest.raises(transfer.ImportError_):
        transfer._iso({"at": text}, 1, "at")
    with pytest.raises(ValueError):
        Message(role="user", content="x", timestamp=text)


def test_an_export_line_without_a_time_goes_to_todays_file():
    today = datetime.now(UTC).astimezone(UTC)
    for when in (None, "", "not a time"):
        day = transfer._day_file({}, "records", when, UTC)  # type: ignore[arg-type]
        assert day in {
            f"records/{today:%Y-%m-%d}.jsonl",
            f"records/{(today + timedelta(seconds=5)):%Y-%m-%d}.jsonl",
        }
