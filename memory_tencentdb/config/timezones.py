"""The ``memory.timezone`` setting: ``"system"``, an IANA name, or a fixed ``±HH:MM`` offset.

Dates that name a day (L0/L1 shard files, LLM-facing timestamps, cleanup times) follow this zone;
storage stays UTC.
"""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_OFFSET = re.compile(r"^([+-])(\d{1,2}):(\d{2})$")

TIMEZONE_HELP = (
    'must be "system", an IANA zone name such as "Asia/Shanghai", or an offset like "+08:00"'
)


def parse_timezone(value: str) -> tzinfo:
    """Turn a configured timezone into a tzinfo; raise ValueError with a user-facing message."""
    text = value.strip()
    if text.lower() == "system":
        return system_timezone()
    match = _OFFSET.match(text)
    if match:
        sign, hours, minutes = match.groups()
        if int(hours) > 14 or int(minutes) > 59:
            raise ValueError(f"{TIMEZONE_HELP} (offsets range from -14:00 to +14:00)")
        delta = timedelta(hours=int(hours), minutes=int(minutes))
        return timezone(
            -delta if sign == "-" else delta, name=f"UTC{sign}{int(hours):02d}:{minutes}"
        )
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        if text.upper() in ("UTC", "Z"):  # a Python without tzdata still knows UTC
            return UTC
        raise ValueError(TIMEZONE_HELP) from None


def system_timezone() -> tzinfo:
    """The process's own zone, DST-aware where the platform lets us name it.

    ``$TZ`` first, then the ``/etc/localtime`` link target; failing both, a tzinfo that asks the
    C library for every instant, which still handles DST correctly.
    """
    tz_env = os.environ.get("TZ", "").strip().lstrip(":")
    candidates = [tz_env] if tz_env else []
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            continue
    return _ProcessLocal()


class _ProcessLocal(tzinfo):
    """Local time as the C library sees it (used where no IANA name can be found)."""

    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(seconds=self._local(dt).tm_gmtoff)

    def dst(self, dt: datetime | None) -> timedelta:
        return timedelta(hours=1) if self._local(dt).tm_isdst > 0 else timedelta(0)

    def tzname(self, dt: datetime | None) -> str:
        return self._local(dt).tm_zone

    @staticmethod
    def _local(dt: datetime | None) -> time.struct_time:
        if dt is None:
            return time.localtime()
        naive = dt.replace(tzinfo=None)
        return time.localtime(time.mktime((*naive.timetuple()[:8], -1)))

    def __repr__(self) -> str:
        return "<system local time>"
