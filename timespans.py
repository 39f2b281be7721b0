"""timespans: a season or a year a question names as a point in time.

In:  a question, lower-cased and single-spaced (asof.phrase's); whether it asks about
     the future (asof.phrase decides, as for a month).
Out: phrase(q, ahead) -> a spec as asof.phrase gives one for a month ({"text", "year",
     "month", "day", "kind", "ahead"}), with "season": (first month, last month) and
     "last" for a season, "back": 1 for "last year"; None. day(spec, newest) -> the day
     a season spec means in the vault's years.
Not: months and days (asof.PATTERNS), periods (asof.period), the vault's dates
     (asof.resolve reads them and calls day()).

Rules, decided by code:
- A season or a year named as a point ("last autumn", "back in 2025", "at the end of
  2025", "early 2026", "mid-2025", "last year") means the END of what it names, as "in
  June" means June's last day; "the start of" means its first day, "before" the day
  before that. Early, mid and late are a year's first, middle and last four months.
- A season or a year counts only with a word placing it (in, during, over, back in,
  last, the start or end of, early, mid, late, before) or a year, and only where it
  ends its phrase: "the summer house", "2000 words", "2025 money" and "2025/26" are
  none. Never after since, after, from, until or till: that is where a period starts
  or ends, not a point.
- A season without a year is the latest one begun by the vault's newest note ("in the
  spring"); "last autumn" the latest one over (asked in November, the year before's);
  asked about the future, the next one not yet over. A winter runs into January: the
  winter of 2025 is the one 2025's December opens.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

from verso.textkit import STOPWORDS, one_of

SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11),
           "winter": (12, 2)}                # (first month, last month)
SEASON_WORD = one_of(SEASONS)
PARTS = {"early": 4, "mid": 8, "late": 12}   # a year's first, middle and last four months
YEAR = r"(?:19|20)\d\d"
_START = r"(?:at\s+)?(?:the\s+)?(?:start|beginning)\s+of"
_END = r"(?:(?:by|at)\s+)?(?:the\s+)?end\s+of"
_IN = r"in|during|over|through|throughout|back in"
_ENDS = (rf"(?=\s*(?:$|[,.;:?!)\"\u2013\u2014-]|'s\b|"     # punctuation or a function
         rf"{one_of(STOPWORDS | {'last', 'per'})}\b))")     # word: the phrase ended
LAST_YEAR_AFTER = re.compile(r"\s+(?:of\s+)?last year\b")   # "the spring last year",
                                                               # "in June last year" (asof)
_STARTS_OR_ENDS_A_PERIOD = re.compile(r"\b(?:since|after|from|until|till)\s+(?:at\s+)?"
                                      r"(?:the\s+)?$")
PATTERNS = (   # (kind, regex), first match wins
    ("season", re.compile(
        rf"\b(?:(?P<lead>{_START}|{_END}|before|{_IN})\s+)?(?:(?P<last>last|the)\s+)?"
        rf"(?P<season>{SEASON_WORD})(?:\s+(?:of\s+)?(?P<year>{YEAR}))?{_ENDS}")),
    ("year", re.compile(
        rf"\b(?P<lead>{_START}|{_END}|before|early|mid-?|late|{_IN}|as of|as at)"
        rf"(?:\s+|(?<=-))(?P<year>{YEAR})(?![\d/-]){_ENDS}")),
    ("last year", re.compile(
        rf"\b(?:(?P<lead>{_START}|{_END}|before|early|mid-?|late|{_IN})(?:\s+|(?<=-)))?"
        r"last year\b")),
)


def phrase(q: str, ahead: bool = False) -> dict | None:
    """The season or year question q names as a point (PATTERNS), as a spec; None."""
    for kind, rx in PATTERNS:
        for m in rx.finditer(q):
            if _STARTS_OR_ENDS_A_PERIOD.search(q[:m.start()]):
                continue
            g = m.groupdict()
            lead = " ".join((g.get("lead") or "").split())
            at = ("start" if "start" in lead or "beginning" in lead else
                  "before" if lead == "before" else "end")
            spec = {"text": m.group(), "year": int(g["year"]) if g.get("year") else None,
                    "day": None, "kind": at, "ahead": False}
            if kind == "season":
                if not (lead or g["last"] == "last" or g["year"]):
                    continue
                first, last = SEASONS[g["season"]]
                back = not g["year"] and bool(LAST_YEAR_AFTER.match(q, m.end()))
                return {**spec, "month": first if at != "end" else last,
                        "season": (first, last), "last": g["last"] == "last",
                        "ahead": ahead and not g["year"] and g["last"] != "last" and not back,
                        **({"back": 1} if back else {})}
            month = 1 if at != "end" else PARTS.get(lead.rstrip("-"), 12)
            return {**spec, "month": month, **({"back": 1} if kind == "last year" else {})}
    return None


def day(spec: dict, newest: date) -> date:
    """The day a season spec means (see the module's rules), newest the day of the
    vault's newest note."""
    first, last = spec["season"]
    wraps = first > last

    def span(end_year: int) -> tuple[date, date]:
        return (date(end_year - wraps, first, 1),
                date(end_year, last, calendar.monthrange(end_year, last)[1]))
    if spec["year"]:
        start, end = span(spec["year"] + wraps)
    elif spec.get("ahead"):
        year = newest.year
        while span(year)[1] < newest:
            year += 1
        start, end = span(year)
    else:
        year = newest.year + 1
        while (span(year)[1] if spec["last"] else span(year)[0]) > newest:
            year -= 1
        start, end = span(year)
    return {"start": start, "before": start - timedelta(days=1)}.get(spec["kind"], end)
