"""timewords: time words inside sentences, resolved against the day they were written.

In:  a chunk's text and the day it was written (a log entry's date, else its note's;
     None for an undated note, whose time words stay unresolved).
Out: the text with each time expression kept as written and its day, range, month or
     year added in brackets: "yesterday [2026-05-07]", "last week [2026-04-27..2026-05-03]",
     "last month [2026-04]", "last year [2025]", "on Friday [2026-05-01]".
Not: dating notes (dating.py) or the point in time a question names (asof.py); no guess
     from the topic: only the words and the calendar (the standard library's).

Rules, decided by code (d is the day written; weeks run Monday to Sunday):
- today, yesterday, tomorrow, the day before yesterday, the day after tomorrow.
- N days / weeks / months / years ago (N in digits or words, "a", "a couple of"), a
  fortnight ago; in N days / weeks / months (N at least two: "in a week" is as often
  "within a week"), N days / weeks from now: that day.
- last / this / next week, weekend, month, year: the week, weekend, month or year before
  d's, d's own, or after it; two weekends ago, two weeks ago likewise; the week before
  is last week.
- last X (a weekday): the latest X before d; this X: the X of d's week; next X: the X of
  the week after; by / until X: the first X on or after d; on X: the latest X on or
  before d in a sentence written in the past, the first X after d in one about the
  future (will, going to, is coming, is due, plan to, comes, I'm doing ...; else the
  past), and
  for X (booked for Friday) likewise: written on a Friday, "on Friday" about the
  future is the next one (that day itself is "today").
- A day and month without a year ("14 March", "March 14th", "since 1 Sept", "by 3
  June"), or "until / by the end of March": the nearest such day to d, on or before it
  after "since", on or after it after "until" or "by"; with a weekday ("Sunday 11
  October"), the year whose day is that weekday.
- A text already followed by a bracket, and a date with its year, is left as it is.

Also the one home of the time words a question is asked in (NOW_WORDS, LATEST_WORDS,
EARLIER_WORDS, CHANGE_WORDS, PAST_WORDS; FUTURE_RE): route.py, followup.py, asof.py and
the builtin reader build their rules from them.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

from verso import textkit

RULES = 6                      # bump when a rule changes: ingest reads every note again
NUMBER_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
                "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
                "twelve": 12, "a couple of": 2, "couple of": 2}
# The kinds of time word people write, each named once: route, followup, asof and the
# reader build their rules from these (tests/test_vocabulary.py: what each must match
# and must not). Match them as whole words: rf"\b{textkit.one_of(NOW_WORDS)}\b".
NOW_WORDS = ("now", "right now", "nowadays", "currently", "presently", "still", "today",
             "anymore", "any more", "these days", "at the moment", "at present",
             "as of today", "as of now")                       # the present
LATEST_WORDS = ("current", "latest", "newest", "most recent", "most recently")  # the newest
EARLIER_WORDS = ("earlier", "previously", "formerly", "previous", "before", "before that",
                 "prior to that")                              # the time before
CHANGE_WORDS = ("changed", "changes", "changing", "evolve", "evolved", "evolves", "evolving",
                "history", "historically", "original", "originally", "over time",
                "used to")        # change over time; not "change" alone: "the change fee"
PAST_WORDS = ("did", "was", "were", "had", "went", "used to")  # asking in the past tense
FUTURE_RE = re.compile(r"\b(?:will|won't|shall|going to|gonna|(?:is|are|am)\s+(?:coming|"
                       r"due|booked|on)|plan(?:ning)? to|hope to|want to|need to|have to|"
                       r"comes|arrives)\b|'ll\b|"
                       r"(?:\bam|\bis|\bare|'m|'re)\s+(?:now\s+|also\s+|still\s+)?\w+ing\b",
                       re.I)   # a sentence about the future; "I'm doing his shift on
                               # Friday": an arrangement is a present progressive
_N = rf"(?P<n>\d{{1,3}}|{textkit.one_of(NUMBER_WORDS)})"
# "in a week" is as often "within a week" ("the most I have run in a week") as a week
# from now: after "in", a number of two or more written as one word
_N2 = (r"(?P<n>\d{1,3}|"
       + textkit.one_of(w for w, n in NUMBER_WORDS.items() if n > 1 and " " not in w) + ")")
_WD = rf"(?P<wd>{'|'.join(textkit.WEEKDAYS)})s?"
_M = rf"(?P<mon>{textkit.MONTH_WORD})"
_DAYNUM = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
PATTERNS = (   # (kind, regex); tried in this order, the first match of a span wins (a
               # date with its weekday before the weekday alone)
    ("day", re.compile(r"\bthe day (?P<rel>before yesterday|after tomorrow)\b", re.I)),
    ("day", re.compile(r"\b(?P<rel>today|yesterday|tomorrow)\b", re.I)),
    ("ago", re.compile(rf"\b{_N}\s+(?P<unit>day|week|month|year|fortnight)s?\s+ago\b", re.I)),
    ("ago", re.compile(r"\b(?P<n>a)\s+(?P<unit>fortnight)\s+ago\b", re.I)),
    ("ahead", re.compile(rf"\bin\s+{_N2}\s+(?P<unit>day|week|month)s?(?:'? time)?\b", re.I)),
    ("ahead", re.compile(rf"\b{_N}\s+(?P<unit>day|week|month)s?\s+from now\b", re.I)),
    ("span", re.compile(r"\b(?P<rel>last|this|next)\s+(?P<unit>week|weekend|month|year)\b",
                        re.I)),
    ("spanago", re.compile(rf"\b{_N}\s+(?P<unit>weekend)s?\s+ago\b", re.I)),
    ("span", re.compile(r"\bthe (?P<unit>week) (?P<rel>before)\b", re.I)),
    ("monthend", re.compile(rf"\b(?P<rel>until|till|by)\s+the end of\s+{_M}(?!\s*,?\s*\d)",
                            re.I)),
    ("daymonth", re.compile(rf"\b(?P<rel>since|until|till|by|on|from)?\s*(?:{_WD},?\s+)?"
                            rf"{_DAYNUM}\s+(?:of\s+)?{_M}(?!\s*,?\s*(?:19|20)\d\d)\b", re.I)),
    ("daymonth", re.compile(rf"\b(?P<rel>since|until|till|by|on|from)?\s*(?:{_WD},?\s+)?"
                            rf"{_M}\s+{_DAYNUM}(?!\s*,?\s*(?:19|20)\d\d)(?![\d:])\b", re.I)),
    ("weekday", re.compile(rf"\b(?P<rel>last|this|next)\s+{_WD}\b", re.I)),
    ("weekday", re.compile(rf"\b(?P<rel>on|by|until|till|for)\s+{_WD}\b", re.I)),
)
BRACKET_RE = re.compile(r"\s*\[")
SENTENCE_ENDS = (".", "!", "?", "\n")
ADDED_RE = re.compile(r" \[(?:\d{4}(?:-\d\d){0,2})(?:\.\.\d{4}-\d\d-\d\d)?\]")   # what resolve adds


def resolve(text: str, written: str | None) -> str:
    """text with every time expression followed by what it means on the day written
    (YYYY-MM-DD); text unchanged when written is None (an undated note)."""
    if not written or not text:
        return text
    d = date.fromisoformat(written)
    out, at = [], 0
    for start, end, label in _found(text, d):
        out += [text[at:end], f" [{label}]"]
        at = end
    return "".join(out) + text[at:]


def as_written(text: str) -> str:
    """text without what resolve added: the statement as its writer wrote it."""
    return ADDED_RE.sub("", text)


def _found(text: str, d: date) -> list[tuple[int, int, str]]:
    """(start, end, label) of each expression, in text order, none overlapping."""
    spans: list[tuple[int, int, str]] = []
    for kind, rx in PATTERNS:
        for m in rx.finditer(text):
            s, e = m.span()
            s += len(m.group()) - len(m.group().lstrip())
            if any(s < e2 and s2 < e for s2, e2, _ in spans):
                continue
            if BRACKET_RE.match(text, e):
                continue                      # already says what it means
            label = _label(kind, m, d, _sentence(text, s))
            if label:
                spans.append((s, e, label))
    return sorted(spans)


def _sentence(text: str, at: int) -> str:
    """The sentence (or line) that holds position at."""
    start = max(text.rfind(mark, 0, at) for mark in SENTENCE_ENDS) + 1
    ends = [i for i in (text.find(mark, at) for mark in SENTENCE_ENDS) if i != -1]
    return text[start:min(ends) if ends else len(text)]


def _n(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else NUMBER_WORDS[word]


def _week(d: date, shift: int) -> tuple[date, date]:
    monday = d - timedelta(days=d.weekday()) + timedelta(weeks=shift)
    return monday, monday + timedelta(days=6)


def _add_months(d: date, n: int) -> date:
    y, m = divmod(d.month - 1 + n, 12)
    year, month = d.year + y, m + 1
    return date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


def _range(a: date, b: date) -> str:
    return f"{a.isoformat()}..{b.isoformat()}"


def _label(kind: str, m: re.Match, d: date, sentence: str) -> str | None:
    g = {k: (v.lower() if isinstance(v, str) else v) for k, v in m.groupdict().items()}
    future = bool(FUTURE_RE.search(sentence))
    if kind == "day":
        shift = {"today": 0, "yesterday": -1, "tomorrow": 1, "before yesterday": -2,
                 "after tomorrow": 2}[g["rel"]]
        return (d + timedelta(days=shift)).isoformat()
    if kind in ("ago", "ahead"):
        n, unit = _n(g["n"]) * (-1 if kind == "ago" else 1), g["unit"]
        if unit == "year":
            return str(d.year + n)
        if unit == "month":
            return _add_months(d.replace(day=1), n).isoformat()[:7]
        return (d + timedelta(days=n * {"day": 1, "week": 7, "fortnight": 14}[unit])).isoformat()
    if kind in ("span", "spanago"):
        shift = (-_n(g["n"]) if kind == "spanago" else
                 {"last": -1, "this": 0, "next": 1, "before": -1}[g["rel"]])
        unit = g["unit"]
        if unit == "week":
            return _range(*_week(d, shift))
        if unit == "weekend":
            saturday = _week(d, shift)[0] + timedelta(days=5)
            return _range(saturday, saturday + timedelta(days=1))
        if unit == "month":
            return _add_months(d.replace(day=1), shift).isoformat()[:7]
        return str(d.year + shift)
    if kind == "weekday":
        return _weekday(g["rel"], textkit.WEEKDAYS.index(g["wd"]), d, future).isoformat()
    if m.group("mon") == "may":
        return None                   # "2 may be": the verb, not the month (May is written so)
    month = textkit.MONTHS[textkit.month_term(g["mon"])]
    rel = g.get("rel")
    if kind == "monthend":
        year = _year(month, 1, d, ahead=True)
        return date(year, month, calendar.monthrange(year, month)[1]).isoformat()
    day = int(g["day"])
    if not 1 <= day <= 31:
        return None
    ahead = True if rel in ("until", "till", "by") else False if rel == "since" else None
    year = _year(month, day, d, ahead=ahead, weekday=g.get("wd"))
    if day > calendar.monthrange(year, month)[1]:
        return None
    return date(year, month, day).isoformat()


def _weekday(rel: str, wd: int, d: date, future: bool) -> date:
    if rel == "last":
        return d - timedelta(days=(d.weekday() - wd - 1) % 7 + 1)
    if rel in ("this", "next"):
        return _week(d, 0 if rel == "this" else 1)[0] + timedelta(days=wd)
    if rel in ("by", "until", "till"):
        return d + timedelta(days=(wd - d.weekday()) % 7)
    if future or rel == "for":
        return d + timedelta(days=(wd - d.weekday() - 1) % 7 + 1)
    return d - timedelta(days=(d.weekday() - wd) % 7)


def _year(month: int, day: int, d: date, ahead: bool | None, weekday=None) -> int:
    """The year that puts month/day nearest d; on or after d when ahead is True, on or
    before it when False; on the weekday named with it ("Sunday 11 October"), if one of
    the years has it (a year without 29 February is passed over)."""
    years = [y for y in (d.year - 1, d.year, d.year + 1)
             if day <= calendar.monthrange(y, month)[1]
             and (ahead is None or (date(y, month, day) >= d) == ahead
                  or date(y, month, day) == d)]
    named = [y for y in years if weekday and date(y, month, day).weekday() ==
             textkit.WEEKDAYS.index(weekday)]
    years = named or years
    return min(years, key=lambda y: abs((date(y, month, day) - d).days), default=d.year)
