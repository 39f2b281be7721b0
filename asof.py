"""asof: the point in time a question asks about, as a date in the vault's own years.

In:  a question ("What was my day rate in June?", "as of 1 May", "before September",
     "at the start of the year", "on 2026-05-01", "last autumn", "back in 2025", "at
     the end of 2025", "early 2026"), or a date given outright
     (`--as-of 2026-06-30`, MCP time_mode "as_of"); the dates of the vault's notes.
Out: phrase(question, date_order) -> {"text", "year", "month", "day", "kind"} or None
     (a date in digits, "on 14.07.26", read in the vault's date order), where kind
     says which day of a month is meant ("end": in/during/by the end of June, the 30th;
     "start": at the start of June or of the year, the 1st; "before": the day before
     its 1st; "on": the day named; a season or a year named as a point in time the
     same, by timespans.py, unless the question asks what happened in it or when
     something first or last happened); resolve(spec, dates) -> "YYYY-MM-DD"; parse(text)
     for a date given outright.
     period(question, today, date_order) -> {"text", "start", "end"} or None: the days
     a question about a period asks after ("what happened on 5 January", "my notes from
     March", "what did I write about the kiln last week"); stated(text) -> the days, ranges,
     months and years a passage states (its ISO dates and the brackets timewords.py
     added), each as (first day, last day). ordinal(question) -> "last" | "first" |
     None for "when did I last ...", "the first time ..."; mention_ranker(question,
     today) -> a sort key of a passage as a mention of it (retrieve.py and evidence.py
     hand on the latest or earliest mention).
Not: choosing versions (version.py keeps the version in force on the date) or routing
     (route.py asks phrase() after its change words, period() before it).

A month named without a year is the latest such month that the vault's notes reach: in
a vault whose newest note is from November 2026, "what was it in June" is June 2026 and
"in December" December 2025. A question about the future means the next one ("what
hours are we doing on Sundays in December": December 2026; "what is due in June": June
2027), a date after every note, so nothing is set aside as written after it. Today's
clock is never read.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

from verso import textkit
from verso import timespans
from verso import timewords
from verso import wordforms
from verso.textkit import one_of

M = textkit.MONTH_WORD
PERSON = one_of(textkit.SUBJECT_PRONOUNS)          # "i", "we", "you", "he", "she", "they"
DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
YEAR = r"((?:19|20)\d\d)"
DIGITS = r"(\d{1,2})([./])(\d{1,2})\2((?:19|20)\d\d|\d\d)(?!\d|[./]\d)"   # 14.07.26, 3/10/26
# first match wins; groups: (day, month, year) in the order each pattern names them
PATTERNS = (
    (re.compile(rf"\b(?:as of|as at|on|at)\s+(?:the\s+)?{YEAR}-(\d\d)-(\d\d)\b"), "iso"),
    (re.compile(rf"\b(?:as of|as at|on)\s+(?:the\s+)?{DIGITS}"), "num"),
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

# a month a question names without a year is the latest one past ("what was the rate in
# June", "what is it in March"); asked about the future and in no past tense, the next
# one ("what hours are we doing on Sundays in December", "when is it due in June",
# "what will it be in May": timewords' future words, or these in a question)
PAST_ALSO = ("paid", "spent", "made", "got")   # irregular past forms, beside every "-ed"
PAST_RE = re.compile(rf"\b(?:{one_of(timewords.PAST_WORDS + PAST_ALSO)}|\w{{3,}}ed)\b|"
                     rf"\b{PERSON}'d\b")
FUTURE_ASK_RE = re.compile(rf"\b(?:is|are|am)\s+(?:{PERSON}|it)\s+\w+ing\b|"
                           r"\b(?:due|upcoming|coming up)\b")


# two points in time the question joins ("in March and in May", "between June and
# October", "from 3 May to 10 June", "in 2025 or 2026", "summer 2025 or summer 2026",
# "last year and this year"): it asks across both
_POINT = (rf"(?:\d{{4}}-\d\d(?:-\d\d)?|(?:{DAY}\s+(?:of\s+)?)?{M}(?:\s+\d{{1,2}}"
          rf"(?:st|nd|rd|th)?)?(?:,?\s+{YEAR})?|{YEAR}|(?:the\s+)?{timespans.SEASON_WORD}"
          rf"\s+(?:of\s+)?{YEAR}|last\s+{timespans.SEASON_WORD}|(?:last|this) year)")
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


def phrase(question: str, date_order: str = "ymd") -> dict | None:
    """The point in time a question names, or None; a date in digits is read in the
    vault's date order (textkit.digit_day: "ymd", none known, reads it only when it
    reads one way)."""
    q = " ".join(question.replace("\u2019", "'").lower().split())
    for rx, kind in PATTERNS:
        m = rx.search(q)
        if not m:
            continue
        g = m.groups()
        if kind == "num":
            day = textkit.digit_day(g[0], g[2], g[3], date_order)
            if day is None:
                continue
            spec = {"year": day.year, "month": day.month, "day": day.day, "kind": "on"}
        elif kind == "iso":
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
        ahead = (spec["year"] is None and kind != "year-start" and _future(q))
        back = ({"back": 1} if spec["year"] is None
                and timespans.LAST_YEAR_AFTER.match(q, m.end()) else {})
        return {"text": m.group(), **spec, "ahead": ahead, **back}
    if PERIOD_ASK_RE.search(q) or ordinal(q):   # what happened in it, its first or last
        return None
    return timespans.phrase(q, ahead=_future(q))


def _future(q: str) -> bool:
    """Asked about the future, in no past tense: a month or season is the next one."""
    return not PAST_RE.search(q) and bool(timewords.FUTURE_RE.search(q)
                                          or FUTURE_ASK_RE.search(q))


def _int(x) -> int | None:
    return int(x) if x else None


def real_days(dates: list) -> list[date]:
    """The days among dates written YYYY-MM-DD (not a month, "undated" or None), oldest
    first."""
    return sorted(date.fromisoformat(d) for d in dates
                  if d and re.match(r"\d{4}-\d\d-\d\d$", d))


def _year(month: int, dates: list[str], ahead: bool = False) -> int | None:
    """The latest year whose `month` the vault's notes reach; ahead: the first year
    whose `month` is the newest note's or after it (None: no dated note)."""
    days = real_days(dates)
    if not days:
        return None
    newest = days[-1]
    if ahead:
        return newest.year if month >= newest.month else newest.year + 1
    return newest.year if month <= newest.month else newest.year - 1


def resolve(spec: dict, dates: list[str]) -> str | None:
    """The date a phrase means, "YYYY-MM-DD", in the vault's years (None: no year). A
    season without a year is the latest one begun by the vault's newest note ("in the
    spring"), or ended by it ("last autumn": in November the one a year before); "last
    year" the year before the newest note's."""
    if spec.get("season") or spec.get("back"):
        days = real_days(dates)
        if not days:
            return None
        if spec.get("back"):
            spec = {**spec, "year": days[-1].year - spec["back"]}
        if spec.get("season"):
            return timespans.day(spec, days[-1]).isoformat()
    year = spec["year"] or _year(spec["month"], dates, spec.get("ahead", False))
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


# ------------------------------------------------------------------------- periods

# A question about a period asks what happened, or what was written, in it: "what
# happened on 5 January", "what did I do / write / note / discuss ... in March", "what
# notes did I make ...", "what's in my journal for ...", "my notes from ...". A question
# about a value in a month ("what was my rent in June") names a point in time instead:
# the value in force then, often stated in a note written long before (phrase()).
PERIOD_ASK_RE = re.compile(
    r"\bwhat (?:happened|went on)\b|\bwhat notes\b|"
    r"\bwhat (?:did|have|had) i (?:do|done|get up to|got up to|write|written|note|noted|"
    r"jot|log|logged|record|recorded|discuss|discussed|talk about|talked about)\b|"
    r"\bwhat (?:i|i've) (?:did|wrote|noted|discussed)\b|"
    r"\bwhat(?:'s| is| was) in my (?:journal|diary|notes|log)\b|"
    r"\bmy (?:notes|journal|diary|entries|log entries|meetings)\s+(?:from|for|of|in|on|"
    r"during|over)\b")
ORDINAL_WEEK = {"first": 0, "1st": 0, "second": 1, "2nd": 1, "third": 2, "3rd": 2,
                "fourth": 3, "4th": 3, "last": -1}
# days named in many calendars' years; "Christmas" alone is Christmas Eve to Boxing Day
NAMED_DAYS = {"christmas eve": ((12, 24), (12, 24)), "christmas day": ((12, 25), (12, 25)),
              "boxing day": ((12, 26), (12, 26)), "christmas": ((12, 24), (12, 26)),
              "new year's eve": ((12, 31), (12, 31)), "new year's day": ((1, 1), (1, 1))}
_NAMED = "|".join(sorted(map(re.escape, NAMED_DAYS), key=len, reverse=True))
_YR = rf"(?:,?\s+{YEAR})?"
PERIOD_PATTERNS = (   # (kind, regex), first match wins: the most precise form first
    ("named", re.compile(rf"\b({_NAMED}){_YR}\b")),
    ("week", re.compile(rf"\bthe ({'|'.join(ORDINAL_WEEK)}) week (?:of|in) ({M}){_YR}\b")),
    ("iso", re.compile(r"\b((?:19|20)\d\d)-(\d\d)-(\d\d)\b")),
    ("num", re.compile(rf"\b(?:on|from|dated|for)\s+(?:the\s+)?{DIGITS}")),
    ("isomonth", re.compile(r"\b((?:19|20)\d\d)-(\d\d)\b(?!-)")),
    ("dmy", re.compile(rf"\b{DAY}(?!\d)\s+(?:of\s+)?({M}){_YR}\b")),
    ("mdy", re.compile(rf"\b({M})\s+{DAY}(?![\d:]){_YR}\b")),
    ("month", re.compile(rf"\b(?:in|during|from|for|of|over|throughout|since)\s+(?:early\s+|"
                         rf"late\s+|mid-?\s*)?({M})(?:\s+{YEAR})?\b|\b({M})\s+{YEAR}\b")),
    ("year", re.compile(rf"\b(?:in|during|from|for|of|over|throughout)\s+{YEAR}\b")),
)
# what timewords.resolve adds, read back: a day, a range of days, a month or a year
LABEL_RE = re.compile(r"\[(\d{4}(?:-\d\d){0,2})(?:\.\.(\d{4}-\d\d-\d\d))?\]")
ISO_DAY_RE = re.compile(r"(?<![\d-])((?:19|20)\d\d-\d\d-\d\d)(?![\d-])")
STATEMENT_DAYS = 7     # a statement of a week or less that touches a period is about it
ANY_DAY = "2000-01-01"   # names_period: a day to resolve relative words against


def names_period(question: str, date_order: str = "ymd") -> bool:
    """Does the question ask about a period it names? (Whether it names one does not
    depend on today, so any day will do to resolve its relative words.)"""
    return period(question, ANY_DAY, date_order) is not None


def period(question: str, today: str | None, date_order: str = "ymd") -> dict | None:
    """The period a question about a period names, {"text", "start", "end"} (ISO days),
    or None (no period question, or no period found). A day or month written without
    its year is the latest one on or before today (the as-of date, or the day of the
    vault's newest note); relative words ("last week", "yesterday", "two months ago")
    count from today with timewords.py's rules. None without today for those. A date
    in digits is read in the vault's date_order (phrase())."""
    q = _norm(question)
    if not PERIOD_ASK_RE.search(q):
        return None
    now = date.fromisoformat(today) if today else None
    for kind, rx in PERIOD_PATTERNS:
        for m in rx.finditer(q):
            span = _period_span(kind, m.groups(), now, date_order)
            if span:
                return {"text": m.group(), "start": span[0].isoformat(),
                        "end": span[1].isoformat()}
    if now is None:
        return None
    m = LABEL_RE.search(timewords.resolve(q, now.isoformat()))
    if not m:
        return None
    lo, hi = _label_span(m.group(1), m.group(2))
    return {"text": m.group(), "start": lo, "end": hi}


def named_span(question: str, today: str | None,
               date_order: str = "ymd") -> tuple[str, str] | None:
    """(first day, last day) of the first year, month, week or day a question names in
    words or digits ("in 2026", "in March", "on 5 January"), whatever it asks; None."""
    now = date.fromisoformat(today) if today else None
    for kind, rx in PERIOD_PATTERNS:
        for m in rx.finditer(_norm(question)):
            span = _period_span(kind, m.groups(), now, date_order)
            if span:
                return span[0].isoformat(), span[1].isoformat()
    return None


def _norm(question: str) -> str:
    return " ".join(question.replace("\u2019", "'").lower().split())


def _latest_year(month: int, day: int, now: date | None) -> int | None:
    """The year putting month/day on or before now (None: no today to count from)."""
    if now is None:
        return None
    return now.year if (month, day) <= (now.month, now.day) else now.year - 1


def _period_span(kind: str, g: tuple, now: date | None,
                 date_order: str = "ymd") -> tuple[date, date] | None:
    """(first day, last day) of one matched period form, None when it is no date."""
    if kind == "num":
        day = textkit.digit_day(g[0], g[2], g[3], date_order)
        return (day, day) if day else None
    try:
        if kind == "named":
            (m1, d1), (m2, d2) = NAMED_DAYS[g[0]]
            year = _int(g[1]) or _latest_year(m1, d1, now)
            return (date(year, m1, d1), date(year, m2, d2)) if year else None
        if kind == "iso":
            day = date(int(g[0]), int(g[1]), int(g[2]))
            return day, day
        if kind in ("isomonth", "month", "week"):
            if kind == "isomonth":
                year, month = int(g[0]), int(g[1])
            else:
                word, yr = (g[1], g[2]) if kind == "week" else (g[0] or g[2], g[1] or g[3])
                if word == "may" and not yr and kind == "month" and not g[0]:
                    return None
                month = _month(word)
                year = _int(yr) or _latest_year(month, 1, now)
            if not year:
                return None
            last = calendar.monthrange(year, month)[1]
            if kind != "week":
                return date(year, month, 1), date(year, month, last)
            nth = ORDINAL_WEEK[g[0]]     # the first week of a month is its days 1 to 7
            first = last - 6 if nth < 0 else 1 + 7 * nth
            return date(year, month, first), date(year, month, min(first + 6, last))
        if kind in ("dmy", "mdy"):
            day, word = (g[0], g[1]) if kind == "dmy" else (g[1], g[0])
            month, day = _month(word), int(day)
            year = _int(g[2]) or _latest_year(month, day, now)
            return (date(year, month, day),) * 2 if year else None
        if kind == "year":
            return date(int(g[0]), 1, 1), date(int(g[0]), 12, 31)
    except ValueError:          # 31 February, month 13: no such day
        return None
    return None


def _label_span(a: str, b: str | None) -> tuple[str, str]:
    """(first day, last day) of a timewords label: a day, a range, a month or a year."""
    if b:
        return a, b
    if len(a) == 10:
        return a, a
    if len(a) == 7:
        y, m = map(int, a.split("-"))
        return f"{a}-01", date(y, m, calendar.monthrange(y, m)[1]).isoformat()
    return f"{a}-01-01", f"{a}-12-31"


ORDINALS = ("last", "first", "most recent", "latest", "earliest")
ORDINAL_RES = (   # "the last time I ...", "when did I first ...": the latest or earliest mention
    re.compile(rf"\b(?:the\s+)?({one_of(ORDINALS)})\s+time\b"),
    re.compile(rf"\b{PERSON}\s+(last|first)\b"
               r"(?!\s+(?:week|weekend|month|year|night|time)\b)"))
ORDINAL_WORDS = frozenset(" ".join(ORDINALS + ("time",)).split())


def ordinal(question: str) -> str | None:
    """"last" for a question after the latest time something happened ("when did I last
    see the dentist", "the most recent time"), "first" for the earliest; else None."""
    q = _norm(question)
    for rx in ORDINAL_RES:
        m = rx.search(q)
        if m:
            return "first" if m.group(1) in ("first", "earliest") else "last"
    return None


def mention_terms(question: str) -> tuple[frozenset, ...]:
    """The words a mention of what the question asks after names: each of its terms but
    the ordinal words, as the set of its forms ("swim": swim, swam, swum, swimming)."""
    asked = dict.fromkeys(t for t in textkit.terms(question) if t not in ORDINAL_WORDS)
    return tuple(frozenset({t, *wordforms.related(t)}) for t in asked)


def mention(words: tuple, text: str, written: str | None) -> tuple[int, str | None]:
    """(how many of the asked words (mention_terms) the passage's sentence naming the
    most of them names, in any form; the day of that mention: the first day its sentence
    states (the brackets timewords added, an ISO day), else the day the passage was
    written (None: undated))."""
    best, day = 0, written
    for sentence in textkit.sentences(text or ""):
        have = set(textkit.terms(sentence))
        n = sum(1 for forms in words if not forms.isdisjoint(have))
        if n > best:
            spans = stated(sentence)
            best, day = n, min(lo for lo, _ in spans) if spans else written
    return best, day


def mention_ranker(question: str, today: str | None, date_order: str = "ymd"):
    """For a question after the last or first time: a function (passage text, day it was
    written or None) -> its sort key as a mention, the greatest best (more asked words
    named in one sentence, then the later day for "last", the earlier for "first"), or
    None when it names none or has no day, or its day lies outside the year, month or
    day the question names."""
    which, words = ordinal(question), mention_terms(question)
    inside = named_span(question, today, date_order)

    def rank(text: str, written: str | None) -> tuple | None:
        named, day = mention(words, text, written)
        if not (named and day) or (inside and not inside[0] <= day <= inside[1]):
            return None
        return named, day if which == "last" else tuple(-ord(ch) for ch in day)
    return rank


def stated(text: str) -> list[tuple[str, str]]:
    """The days a passage states, as (first day, last day): each ISO day written in it
    and each day, range, month or year timewords.py added in brackets."""
    out = [_label_span(m.group(1), m.group(2)) for m in LABEL_RE.finditer(text or "")]
    return out + [(d, d) for d in ISO_DAY_RE.findall(LABEL_RE.sub(" ", text or ""))]


def touches(spans, start: str, end: str) -> bool:
    """Does one of the stated spans lie in start..end, or, a week or less long, touch
    it ("Christmas last week" for Christmas Day; a month stated is not about each of
    its days)?"""
    for lo, hi in spans:
        if start <= lo and hi <= end:
            return True
        if lo <= end and start <= hi and (date.fromisoformat(hi) - date.fromisoformat(lo)
                                          ).days < STATEMENT_DAYS:
            return True
    return False
