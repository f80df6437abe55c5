"""Relative dates in what users say ("yesterday", "last week", "上周", "三天前"), resolved against
the time the message was sent, so a memory written from it carries a real date.

Used by the no-LLM extractor (the LLM prompt asks the model to do the same): the resolved span
goes into the memory's ``activity_start_time`` / ``activity_end_time``, which recall shows.
Only unambiguous expressions are resolved; anything else is left alone.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

_ZH_NUM = {
    "一": 1,
    "两": 2,
    "二": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
    "十": 10,
}
_EN_NUM = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "a couple of": 2, "a few": 3,
}  # fmt: skip


def _week(d: date, offset: int) -> tuple[date, date]:
    start = d - timedelta(days=d.weekday()) + timedelta(weeks=offset)
    return start, start + timedelta(days=6)


def _month(d: date, offset: int) -> tuple[date, date]:
    y, m = d.year, d.month + offset
    while m < 1:
        y, m = y - 1, m + 12
    while m > 12:
        y, m = y + 1, m - 12
    start = date(y, m, 1)
    nxt = date(y + (m == 12), m % 12 + 1, 1)
    return start, nxt - timedelta(days=1)


def _year(d: date, offset: int) -> tuple[date, date]:
    return date(d.year + offset, 1, 1), date(d.year + offset, 12, 31)


def _day(d: date, offset: int) -> tuple[date, date]:
    x = d + timedelta(days=offset)
    return x, x


_FIXED: list[tuple[re.Pattern[str], object]] = [
    (re.compile(r"大前天"), lambda d: _day(d, -3)),
    (re.compile(r"前天|day before yesterday", re.I), lambda d: _day(d, -2)),
    (re.compile(r"昨天|昨晚|昨日|\byesterday\b|\blast night\b", re.I), lambda d: _day(d, -1)),
    (re.compile(r"后天|day after tomorrow", re.I), lambda d: _day(d, 2)),
    (re.compile(r"明天|明晚|\btomorrow\b", re.I), lambda d: _day(d, 1)),
    (re.compile(r"上上周|上上个?星期|\bthe week before last\b", re.I), lambda d: _week(d, -2)),
    (re.compile(r"上周|上个?星期|上个?礼拜|\blast week\b", re.I), lambda d: _week(d, -1)),
    (re.compile(r"下周|下个?星期|下个?礼拜|\bnext week\b", re.I), lambda d: _week(d, 1)),
    (re.compile(r"上个?月|\blast month\b", re.I), lambda d: _month(d, -1)),
    (re.compile(r"下个?月|\bnext month\b", re.I), lambda d: _month(d, 1)),
    (re.compile(r"前年|\bthe year before last\b", re.I), lambda d: _year(d, -2)),
    (re.compile(r"去年|\blast year\b", re.I), lambda d: _year(d, -1)),
    (re.compile(r"明年|\bnext year\b", re.I), lambda d: _year(d, 1)),
    (re.compile(r"上周末|\blast weekend\b", re.I), None),  # handled below (before 上周)
]
_AGO_ZH = re.compile(r"([一两二三四五六七八九十\d]+)\s*(天|周|个?星期|个?月|年)(?:以?前|之前)")
_AGO_EN = re.compile(
    r"\b(\d+|a couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten)\s+"
    r"(day|week|month|year)s?\s+ago\b",
    re.I,
)
_WEEKEND = re.compile(r"上周末|上个周末|\blast weekend\b", re.I)


def _num(token: str) -> int:
    if token.isdigit():
        return int(token)
    return _ZH_NUM.get(token, _EN_NUM.get(token.lower(), 0))


def resolve(text: str, when: datetime) -> tuple[date, date] | None:
    """The date span a relative expression in ``text`` means, said at ``when``; else None."""
    d = when.date()
    if _WEEKEND.search(text):
        start, _ = _week(d, -1)
        return start + timedelta(days=5), start + timedelta(days=6)
    m = _AGO_ZH.search(text) or _AGO_EN.search(text)
    if m:
        n, unit = _num(m.group(1)), m.group(2).lower()
        if n > 0:
            if unit in ("天", "day"):
                return _day(d, -n)
            if "周" in unit or "星期" in unit or unit == "week":
                x = d - timedelta(weeks=n)
                return x, x
            if "月" in unit or unit == "month":
                return _month(d, -n)[0], _month(d, -n)[1]
            return _year(d, -n)
    for pattern, fn in _FIXED:
        if fn is not None and pattern.search(text):
            return fn(d)  # type: ignore[operator]
    return None
