"""asof: the point in time a question asks about, as a date in the vault's own years.

In:  a question ("What was my day rate in June?", "as of 1 May", "before September",
     "at the start of the year", "on 2026-05-01"), or a date given outright
     (`--as-of 2026-06-30`, MCP time_mode "as_of"); the dates of the vault's notes.
Out: phrase(question) -> {"text", "year", "month", "day", "kind"} or None, where kind
     says which day of a month is meant ("end": in/during/by the end of June, the 30th;
     "start": at the start of June or of the year, the 1st; "before": the day before
     its 1st; "on": the day named); resolve(spec, dates) -> "YYYY-MM-DD"; parse(text)
     for a date given outright.
Not: choosing versions (version.py keeps the version in force on the date) or routing
     (route.py asks phrase() after its change words).

A month named without a year is the latest such month that the vault's notes reach: in
a vault whose newest note is from November 2026, "in June" is June 2026 and "in
December" is December 2025. Today's clock is never read.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

from verso import textkit

M = textkit.MONTH_WORD
DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
YEAR = r"((?:19|20)\d\d)"
# first match wins; groups: (day, month, year) in the order each pattern names them
PATTERNS = (
    (re.compile(rf"\b(?:as of|as at|on|at)\s+(?:the\s+)?{YEAR}-(\d\d)-(\d\d)\b"), "iso"),
    (re.compile(rf"\b(?:as of|as at|on)\s+(?:the\s+)?{DAY}\s+(?:of\s+)?({M})(?:\s+{YEAR})?\b"),
     "on"),
    (re.compile(rf"\b(?:as of|as at|on)\s+({M})\s+{DAY}(?:,?\s+{YEAR})?\b"), "on-mdy"),
    (re.compile(rf"\bbefore\s+(?:the\s+)?(?:start of\s+)?({M})(?:\s+{YEAR})?\b"), "before"),
    (re.compile(rf"\b(?:as of|as at|at the (?:start|beginning) of)\s+({M})(?:\s+{YEAR})?\b"),
     "start"),
    (re.compile(r"\bat the (?:start|beginning) of (?:the|this) year\b"), "year-start"),
    (re.compile(rf"\b(?:in|during|by the end of|at the end of|end of)\s+({M})(?:\s+{YEAR})?\b"),
     "end"),
)


# two points in time the question joins ("in March and in May", "between June and
# October", "from 3 May to 10 June", "in 2025 or 2026"): it asks across both
_POINT = (rf"(?:\d{{4}}-\d\d(?:-\d\d)?|(?:{DAY}\s+(?:of\s+)?)?{M}(?:\s+\d{{1,2}}"
          rf"(?:st|nd|rd|th)?)?(?:,?\s+{YEAR})?|{YEAR})")
_LEAD = r"(?:(?:in|on|at|by|the end of|the start of|early|late|mid)\s+)?"
JOINED_RE = re.compile(rf"\b(?:between|from)?\s*{_LEAD}(?P<a>{_POINT})\s*,?\s*(?:and|or|to|"
                       rf"vs\.?|versus|till|until|through)\s+{_LEAD}(?P<b>{_POINT})\b")


def joined_points(question: str) -> tuple[str, str] | None:
    """Two different points in time the question joins, as written, or None."""
    q = " ".join(question.replace("\u2019", "'").lower().split())
    for m in JOINED_RE.finditer(q):
        a, b = " ".join(m.group("a").split()), " ".join(m.group("b").split())
        if a != b:
            return a, b
    return None


def _month(word: str) -> int:
    return textkit.MONTHS[textkit.month_term(word)]


def phrase(question: str) -> dict | None:
    """The point in time a question names, or None."""
    q = " ".join(question.replace("\u2019", "'").lower().split())
    for rx, kind in PATTERNS:
        m = rx.search(q)
        if not m:
            continue
        g = m.groups()
        if kind == "iso":
            spec = {"year": int(g[0]), "month": int(g[1]), "day": int(g[2]), "kind": "on"}
        elif kind == "on":
            spec = {"year": _int(g[2]), "month": _month(g[1]), "day": int(g[0]), "kind": "on"}
        elif kind == "on-mdy":
            spec = {"year": _int(g[2]), "month": _month(g[0]), "day": int(g[1]), "kind": "on"}
        elif kind == "year-start":
            spec = {"year": None, "month": 1, "day": 1, "kind": "start"}
        else:
            spec = {"year": _int(g[1]), "month": _month(g[0]), "day": None, "kind": kind}
        if not 1 <= spec["month"] <= 12 or (spec["day"] and not 1 <= spec["day"] <= 31):
            continue
        return {"text": m.group(), **spec}
    return None


def _int(x) -> int | None:
    return int(x) if x else None


def _year(month: int, dates: list[str]) -> int | None:
    """The latest year whose `month` the vault's notes reach (None: no dated note)."""
    days = sorted(d for d in dates if d and re.match(r"\d{4}-\d\d-\d\d$", d))
    if not days:
        return None
    newest = date.fromisoformat(days[-1])
    return newest.year if month <= newest.month else newest.year - 1


def resolve(spec: dict, dates: list[str]) -> str | None:
    """The date a phrase means, "YYYY-MM-DD", in the vault's years (None: no year)."""
    year = spec["year"] or _year(spec["month"], dates)
    if year is None:
        return None
    month, kind = spec["month"], spec["kind"]
    last = calendar.monthrange(year, month)[1]
    if kind == "on":
        day = date(year, month, min(spec["day"], last))
    elif kind == "start":
        day = date(year, month, 1)
    elif kind == "before":
        day = date(year, month, 1) - timedelta(days=1)
    else:
        day = date(year, month, last)
    return day.isoformat()


def parse(text: str) -> str:
    """A date given outright (YYYY-MM-DD, or YYYY-MM for the end of that month);
    ValueError naming the form otherwise."""
    t = str(text).strip()
    try:
        if re.fullmatch(r"\d{4}-\d\d", t):
            y, m = map(int, t.split("-"))
            return date(y, m, calendar.monthrange(y, m)[1]).isoformat()
        return date.fromisoformat(t).isoformat()
    except ValueError:
        raise ValueError(f"as-of date {text!r}: give YYYY-MM-DD (or YYYY-MM for the end of "
                         f"that month)") from None
