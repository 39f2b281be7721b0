"""Dating notes: the day a note is of, from its name, frontmatter, a header line, its
first lines or mtime.

In:  a note's file name, frontmatter and body and mtime; a heading; verso.toml's
     date_order.
Out: (ISO date, date_source) of a note (date_of); the first date a text names
     (find_date); a note's frontmatter split from its body; names folded for comparing.
Not: reading notes or the config (vault_walk.py), families and duplicates (families.py),
     chunks and dated sections (chunking.py, which asks find_date of each heading).

Rules, decided by code:
- First hit wins: filename; frontmatter `updated:` > `date:` > `created:`; a header
  line in the first HEADER_LINES body lines (`Updated: 2 July 2026`, `Last edited
  2026-07-02`, `Date: ...`, `# Title - October 10, 2026`); a day written in the note's
  first lines (date_source "text", below); a date its title line writes ("title",
  below); else mtime (date_source "mtime", weak). A month, ISO week (2026-W40) or
  quarter (Q3 2026) alone means its first day, unless the note's frontmatter, header or
  first lines give a day inside it ("filename+text").
  03.10.2026, 3/10/2026 and 03.10.26 are read as the date_order ("dmy"/"mdy") says:
  verso.toml's, else the order the vault's file names show (names_order, asked by
  vault_walk.settle_date_order), else "ymd": only a digit date that reads one way
  (14.07.26). A two-digit year is 20xx up to 68, 19xx from 69. Impossible dates are
  not dates. Names are compared NFKC-folded, case-folded, with every Unicode dash as
  "-".
- First lines ("text"): the title line (the first non-empty line) and the LEAD_LINES
  non-empty lines after it, up to the first heading below the title. A day counts when
  it opens one of them ("28 Aug 2026 — rough first pass", "Fri 2 Oct 2026", "Oct 8,
  2026", "**2026-10-08**"; after `>` or emphasis and a weekday, not after a list bullet
  or a table bar) or stands alone at the end of the title line, set off by a dash, colon,
  bar or parenthesis ("Flat budget — 19 Sept 2026"). Only a whole day counts (a month
  alone does not). A date inside a sentence below the title ("the meeting in Ghent,
  17–20 Nov 2026, takes posters") does not date the note; nor do first lines that open
  with two different days (a log of dated lines: its first entry is not the note's day).
- The title line ("title"): when no day opens a first line, the first date the title
  line writes anywhere, a day or a month, dates the note, as it would in a `# ` heading
  line: a pasted letter, a copied message, an export or a page's "updated" note says
  when it was written there ("Virgin Media letter 2 Feb 2026", "copied from the team
  whatsapp 24/6/26", "contacts (export Mar 2025)", "Nomads 2026 (updated after the
  AGM, 22/02/26)"). Not a title line that is a list item or a table row.
- A log entry's heading with a day and a month but no year ("Sat 21/03", "14 July",
  "Tue 14/07"; day_without_year, asked by chunking.py): the reading nearest the nearest
  entry that has a year (else the note's own date) of a year either side of it; with a
  weekday written, the nearest reading on that weekday within YEAR_REACH years. Never
  without a dated neighbour: the year is not invented.
"""

from __future__ import annotations

import calendar
import re
import unicodedata
from datetime import date, datetime, timedelta

from verso import textkit

HEADER_LINES = 15                  # body lines searched for an "Updated: ..." line
WEAK_SOURCE = "mtime"              # date_source of a note dated by its file's mtime alone
TEXT_SOURCE = "text"               # date_source of a note dated by a day in its first lines
TITLE_SOURCE = "title"             # date_source of a note dated by a date its title writes
LIST_ROW_RE = re.compile(r"(?:[-*+\u2022]|\d+[.)])\s|\|")   # a list item or a table row
LEAD_LINES = 3                     # non-empty lines after the title a day may open

MONTHS = textkit.MONTHS            # one month table for dating notes and for the reader
_MON = textkit.MONTH_PATTERN + r"\.?"
_YEAR = r"((?:19|20)\d\d)(?!\d)"
DATE_PATTERNS = [  # most specific first; group order in the second field
    (re.compile(r"(?<!\d)((?:19|20)\d\d)[-_.](\d{1,2})[-_.](\d{1,2})(?!\d)"), "ymd"),
    (re.compile(_MON + r"[\s_-]+(\d{1,2})(?:st|nd|rd|th)?,?[\s_-]+" + _YEAR, re.I), "mdy"),
    (re.compile(r"(?<![\da-z])(\d{1,2})(?:st|nd|rd|th)?[\s_-]+" + _MON + r",?[\s_-]+" + _YEAR,
                re.I), "dmy"),
    # 03.10.2026, 3/10/2026, 03.10.26: as the date_order says ("ymd": one reading only)
    (re.compile(r"(?<![\d.vV])(\d{1,2})([./-])(\d{1,2})\2((?:19|20)\d\d|\d\d)(?![\d]|[./-]\d)"),
     "num"),                       # 14.07.26: a two-digit year, 00-68 20xx, 69-99 19xx
    (re.compile(r"(?<![\da-z])((?:19|20)\d\d)[-_\s]?w(\d{1,2})(?![\da-z])", re.I), "yw"),
    (re.compile(r"(?<![\da-z])q([1-4])[\s_-]*((?:19|20)\d\d)(?!\d)", re.I), "qy"),
    (re.compile(r"(?<![\da-z])((?:19|20)\d\d)[\s_-]*q([1-4])(?![\da-z])", re.I), "yq"),
    (re.compile(r"(?<!\d)((?:19|20)\d\d)[-_](\d{1,2})(?!\d|[-_.]\d)"), "ym"),
    (re.compile(_MON + r"[\s_,-]*" + _YEAR, re.I), "my"),
]
DATE_ORDERS = ("ymd", "dmy", "mdy")   # config date_order; "ymd" reads no d/m/y digits
HEADER_RE = re.compile(r"^[\s>*_#-]*(?:last[\s_-]+)?(?:updated|edited|modified|revised|"
                       r"date|dated|created|written)\b", re.I)
FRONT_KEYS = ("updated", "date", "created")    # frontmatter date keys, in preference order
DAY_PATTERNS = DATE_PATTERNS[:4]   # the forms that name a whole day
WEEKDAY = r"(?:mon|tues?|wed(?:nes)?|thu(?:rs?)?|fri|sat(?:ur)?|sun)(?:day)?"
                                   # a weekday, whole or cut: "Fri", "Thurs", "Wednesday"
LEAD_MARK_RE = re.compile(rf"[\s>]*(?:[*_]{{1,2}}(?=\S))?(?:(?P<weekday>{WEEKDAY})\.?,?\s+)?",
                          re.I)
                                   # what may stand before a day that opens a line
SET_OFF_RE = re.compile(r"(?<![\d\s])\s*(?:\s[-\u2013\u2014|]|[:(])\s*")
                                   # what sets a day off at the end of the title line
TITLE_END = " \t)]*_."             # what may follow a day that ends the title line
HEADING_RE = re.compile(r"(#{1,6})\s")   # a markdown heading (a "#tag" is none)
_NO_YEAR = r"(?![\s,._/-]*(?:19|20)?\d)"  # no year (nor another number) after it
YEARLESS_PATTERNS = [   # a day and a month with no year, as a log's heading opens
    (re.compile(r"(\d{1,2})([./])(\d{1,2})" + _NO_YEAR), "num"),
    (re.compile(r"(\d{1,2})(?:st|nd|rd|th)?[\s_-]+" + _MON + r"(?![a-z])" + _NO_YEAR, re.I),
     "dm"),
    (re.compile(_MON + r"[\s_-]+(\d{1,2})(?:st|nd|rd|th)?(?![\d:])" + _NO_YEAR, re.I), "md"),
]
NUM_REST_RE = re.compile(r"\s*(?:$|[-\u2013\u2014:,(|])")   # what may follow 21/03 unnamed
NAMES_ORDER_MIN = 2     # file names read only one way that set a vault's date order
YEAR_REACH = 2          # years either side of the nearest dated day a written weekday picks


def fold(name: str) -> str:
    """A name as it is compared: NFKC, case folded, every Unicode dash or hyphen "-"
    ("Shop stats – April 2026" and "shop-stats-2026-04" then read alike)."""
    name = unicodedata.normalize("NFKC", name).casefold()
    return "".join("-" if unicodedata.category(ch) == "Pd" or ch == "\u2212" else ch
                   for ch in name)


def _span(groups, order: str, date_order: str = "ymd") -> tuple[date, date] | None:
    """(first day, last day) of what a date match names (a day, week, month or
    quarter), or None when it is no real date or its digit order is not known."""
    if order == "num":                      # with no order, a date that reads one way
        day = textkit.digit_day(groups[0], groups[2], groups[3], date_order)
        return (day, day) if day else None
    parts = {}
    for key, value in zip(order, groups):    # casefold: re.I lets "ſep" match "sep"
        parts[key] = int(value) if value.isdigit() else MONTHS.get(value.casefold()[:3])
    if None in parts.values():
        return None
    y = parts["y"]
    try:
        if "w" in parts:
            first = date.fromisocalendar(y, parts["w"], 1)
            return first, first + timedelta(days=6)
        if "q" in parts:
            m = 3 * parts["q"] - 2
            return date(y, m, 1), date(y, m + 2, calendar.monthrange(y, m + 2)[1])
        if "d" in parts:
            day = date(y, parts["m"], parts["d"])
            return day, day
        return date(y, parts["m"], 1), date(y, parts["m"],
                                            calendar.monthrange(y, parts["m"])[1])
    except ValueError:
        return None


def _find_span(text: str, at_start: bool = False,
               date_order: str = "ymd") -> tuple[date, date] | None:
    """First valid date in text as (first day, last day), most specific form first;
    impossible ones are masked out so "31 Feb 2026" does not fall back to "Feb 2026"."""
    for rx, order in DATE_PATTERNS:
        for m in rx.finditer(text):
            found = _span(m.groups(), order, date_order)
            if found is None:
                text = text[:m.start()] + " " * (m.end() - m.start()) + text[m.end():]
            elif not at_start or m.start() == 0:
                return found
    return None


def days_in(text: str) -> list[str]:
    """Every day text writes in full, ISO, in the order found by form: 2026-01-09,
    "9 January 2026", "January 9th, 2026" (a month or week alone is no day)."""
    out = []
    for rx, order in DATE_PATTERNS[:3]:
        for m in rx.finditer(text):
            found = _span(m.groups(), order)
            if found:
                out.append(found[0].isoformat())
    return out


def names_order(stems) -> str | None:
    """The order a vault's file names write numeric dates in: "dmy" when at least
    NAMES_ORDER_MIN names hold a date only day-first reads ("14.07.26") and none one only
    month-first reads ("07.14.26"), "mdy" the other way round, else None (unknown)."""
    seen = {"dmy": 0, "mdy": 0}
    for m in DATE_PATTERNS[3][0].finditer("\n".join(stems)):   # one scan of every name
        reads = [o for o in seen if _span(m.groups(), "num", o)]
        if len(reads) == 1:
            seen[reads[0]] += 1
    for order, other in (("dmy", "mdy"), ("mdy", "dmy")):
        if seen[order] >= NAMES_ORDER_MIN and not seen[other]:
            return order
    return None


def find_date(text: str, at_start: bool = False, date_order: str = "ymd") -> str | None:
    """The first day of the first valid date in text, ISO; None if there is none."""
    found = _find_span(text, at_start, date_order)
    return found[0].isoformat() if found else None


def day_without_year(text: str, near: str | None, date_order: str = "ymd") -> str | None:
    """The day a heading that opens with a day and a month but no year names ("Sat 21/03",
    "14 July", "Tue 14/07", "March 3rd"), ISO, read beside `near` (ISO: its note's nearest
    dated entry, else the note's date): of the readings a year before to a year after it,
    the nearest; with a weekday written, of those YEAR_REACH years around it, the nearest
    whose weekday it is. 21/03 is read as date_order says; under "ymd" only as it can be
    read (21/03 a day-month, 03/21 a month-day), 05/06 only by its weekday; a bare 05/06
    must end the heading or be set off ("05/06 - swim"), not open a sentence ("3/4 of
    it"). None without `near`, or when no reading fits."""
    if near is None:
        return None
    lead = LEAD_MARK_RE.match(text)
    rest, weekday = text[lead.end():], lead.group("weekday")
    readings = []
    for rx, form in YEARLESS_PATTERNS:
        m = rx.match(rest)
        if not m:
            continue
        if form == "num":
            if not weekday and not NUM_REST_RE.match(rest[m.end():]):
                return None
            a, b = int(m.group(1)), int(m.group(3))
            readings = {"dmy": [(a, b)], "mdy": [(b, a)]}.get(date_order, [(a, b), (b, a)])
        else:
            day, mon = (m.group(1), m.group(2)) if form == "dm" else (m.group(2), m.group(1))
            readings = [(int(day), MONTHS.get(mon.casefold()[:3]))]
        break
    readings = [(d, mo) for d, mo in readings if mo and 1 <= mo <= 12 and 1 <= d <= 31]
    if not weekday and len({r for r in readings}) > 1:
        return None                           # 05/06 with nothing to tell the order
    try:
        anchor = date.fromisoformat(near[:10])
    except ValueError:
        return None
    reach = YEAR_REACH if weekday else 1
    wanted = ([d[:3] for d in textkit.WEEKDAYS].index(weekday.casefold()[:3])
              if weekday else None)
    days = []
    for y in range(anchor.year - reach, anchor.year + reach + 1):
        for d, mo in readings:
            try:
                day = date(y, mo, d)
            except ValueError:
                continue
            if wanted is None or day.weekday() == wanted:
                days.append(day)
    if not days:
        return None
    return min(days, key=lambda day: (abs((day - anchor).days), day)).isoformat()


def frontmatter(text: str) -> tuple[dict, str]:
    """(metadata, body) for a leading --- block of `key: value` lines; else ({}, text)."""
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, min(len(lines), 200)) if lines[i].strip() in ("---", "...")), 0)
    if not end:
        return {}, text
    meta, key = {}, None
    for line in lines[1:end]:
        m = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if m:
            key, value = m.group(1).lower(), m.group(2).strip()
            if value.startswith("[") and value.endswith("]"):
                value = [v.strip().strip("'\"") for v in value[1:-1].split(",") if v.strip()]
            meta[key] = value.strip("'\"") if isinstance(value, str) else value
        elif key and line.strip().startswith("- "):
            meta[key] = (meta[key] if isinstance(meta[key], list) else []) + [
                line.strip()[2:].strip().strip("'\"")]
    return meta, "\n".join(lines[end + 1:])


def _opening_day(text: str, date_order: str) -> tuple[date, int] | None:
    """(day, where it ends in text) of a whole day that opens text, after `>`,
    emphasis and a weekday ("**Fri 2 Oct 2026**"); None when text opens otherwise."""
    at = LEAD_MARK_RE.match(text).end()
    for rx, order in DAY_PATTERNS:
        m = rx.match(text[at:])
        found = _span(m.groups(), order, date_order) if m else None
        if found and found[0] == found[1]:
            return found[0], at + m.end()
    return None


def _title_day(line: str, date_order: str) -> date | None:
    """The day of a title line: one that opens it, or ends it set off by a dash, colon,
    bar or parenthesis ("Flat budget — 19 Sept 2026"); never one inside a sentence."""
    line = line.lstrip("#").strip()
    found = _opening_day(line, date_order)
    if found:
        return found[0]
    for m in SET_OFF_RE.finditer(line):
        found = _opening_day(line[m.end():], date_order)
        if found and not line[m.end() + found[1]:].strip(TITLE_END):
            return found[0]
    return None


def _lead_lines(body: str) -> tuple[str, list[str]]:
    """(the title line, the LEAD_LINES non-empty lines after it up to a heading). A
    heading of level 2 or more opens a section, whose dates are its own: it is no title."""
    lines = [x.strip() for x in body.split("\n", HEADER_LINES + 1)[:HEADER_LINES]]
    lines = [x for x in lines if x]
    first = HEADING_RE.match(lines[0]) if lines else None
    if not lines or (first and len(first.group(1)) > 1):
        return "", []
    after = []
    for line in lines[1:1 + LEAD_LINES]:
        if HEADING_RE.match(line):
            break
        after.append(line)
    return lines[0], after


def _text_day(body: str, date_order: str):
    """(span, source) of the date the note's first lines give (see the module's rules),
    else None: the title line's day, or one opening a line after it (TEXT_SOURCE; two
    different days, none); with no day opening any, the first date the title line
    writes anywhere (TITLE_SOURCE), unless it is a list item or a table row."""
    title, after = _lead_lines(body)
    days = {_title_day(title, date_order)} if title else set()
    days |= {(_opening_day(x, date_order) or (None,))[0] for x in after}
    days.discard(None)
    if len(days) > 1:
        return None
    if days:
        day = days.pop()
        return (day, day), TEXT_SOURCE
    found = None if LIST_ROW_RE.match(title) else _find_span(title, date_order=date_order)
    return (found, TITLE_SOURCE) if found else None


def _inner_date(meta: dict, body: str, date_order: str):
    """(span, source) of the note's own date: frontmatter, else a header line, else a
    day in its first lines; or None."""
    for key in FRONT_KEYS:
        value = meta.get(key)
        found = _find_span(value, date_order=date_order) if isinstance(value, str) else None
        if found:
            return found, "frontmatter"
    for line in body.split("\n")[:HEADER_LINES]:
        if HEADER_RE.match(line) or line.startswith("# "):
            found = _find_span(line, date_order=date_order)
            if found:
                return found, "header"
    return _text_day(body, date_order)


def date_of(stem: str, meta: dict, body: str, mtime: float,
            date_order: str = "ymd") -> tuple[str, str]:
    """(ISO date, date_source). The file name wins; when it names only a period (a
    month, week or quarter) and the note itself gives a day inside it, that day
    ("filename+header" / "filename+frontmatter" / "filename+text"); a day outside it
    does not count."""
    named = _find_span(fold(stem), date_order=date_order)
    inner = _inner_date(meta, body, date_order)
    if named:
        if named[0] != named[1] and inner and inner[0][0] == inner[0][1] \
                and named[0] <= inner[0][0] <= named[1]:
            return inner[0][0].isoformat(), f"filename+{inner[1]}"
        return named[0].isoformat(), "filename"
    if inner:
        return inner[0][0].isoformat(), inner[1]
    return datetime.fromtimestamp(mtime).date().isoformat(), WEAK_SOURCE
