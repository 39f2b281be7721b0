"""Chunking: a note's body -> chunks along its headings, with the dates of dated sections.

In:  the file records read by one ingest (body, title, date, family, privacy, date_order).
Out: chunk dicts (heading trail, section_date, entry_latest, text, and the text to embed),
     and chunk_dict, the one shape of a chunk, for a new build and a loaded index alike.
Not: embedding (ingest.py, models.py), storing chunks (store.py), reading notes
     (vault_walk.py) or dating whole notes (dating.py).

Rules, decided by code:
- Dated sections: a `##`/`###` heading that is or starts with a date is an entry; its
  chunks carry section_date (= date) and entry_latest (true for the file's newest entry).
  A day and month without a year ("Sat 21/03") take the year of the nearest entry above
  that has one, else below, else the note's own date (dating.day_without_year).
- Time words inside a chunk ("yesterday", "next Tuesday") are followed by the day they
  mean, against its entry's date, else its note's (timewords.py); not in an undated note.
- Chunks follow headings (trail "Plan > Week 3"); short sections merge forward within one
  entry, long ones become line-aligned windows; table rows become "Header: value; ...",
  a header of symbols only ("£") left to the value that carries it, and a total row
  "Total: £1,920", its first header ("Item") left out.
  A "word" longer than MAX_WORD_CHARS (base64, minified code) is cut into pieces first.
"""

from __future__ import annotations

import bisect
import re

from verso import dating
from verso import timewords

CHUNK_WORDS = 180                  # most words in one chunk
MAX_WORD_CHARS = 200               # longer "words" (base64, minified code) are cut in pieces
OVERLAP = 40                       # words repeated between windows of a long section
MIN_CHUNK_WORDS = 30               # shorter sections merge into the next (same date)
HEADING_RE = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
SYMBOLS_RE = re.compile(r"^[^\w\s]+$")   # a table header of symbols only: "£", "%", "#"
SUFFIX_SYMBOLS = ("%", "°", "‰")        # written after the number they go with
NUMBER_RE = re.compile(r"^[-+~]?\d[\d,.]*$")
TOTAL_RE = re.compile(r"^(?:sub-?|grand )?totals?\b", re.I)   # a total row's first cell
EMPHASIS_RE = re.compile(r"[*_]{1,3}")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _pair(h: str, v: str) -> str:
    """One cell as "Header: value"; under a header of symbols only ("£", "%", "#") the
    value alone when it carries the symbol ("£1,920"), a number joined to it ("20%",
    "#3")."""
    if not h:
        return v
    if SYMBOLS_RE.match(h):
        if any(ch in v for ch in h):
            return v
        if NUMBER_RE.match(bare := EMPHASIS_RE.sub("", v)):
            return bare + h if h in SUFFIX_SYMBOLS else h + bare
    return f"{h}: {v}"


def _row(head: list[str], cells: list[str]) -> str:
    """A table row -> "Header: value; ..."; a total row, its first header ("Item") left
    out: "Total: £1,920" under a header "£", "Total budget: £7,282; Total spent:
    £3,621" under words."""
    pairs = list(zip(head, cells))
    label = EMPHASIS_RE.sub("", pairs[0][1]).strip() if pairs else ""
    rest = [(h, EMPHASIS_RE.sub("", v)) for h, v in pairs[1:] if v]
    if TOTAL_RE.match(label) and rest:       # its bold said "total": the words say it now
        return "; ".join(f"{label} {h}: {v}" if h and not SYMBOLS_RE.match(h) else
                         f"{label}: {_pair(h, v)}" for h, v in rest)
    return "; ".join(_pair(h, v) for h, v in pairs if v)


def _tables(text: str) -> str:
    """Markdown table rows -> "Header: value; Header: value." lines (_row)."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if "|" in lines[i] and "|" in nxt and TABLE_SEP_RE.match(nxt):
            head, i = _cells(lines[i]), i + 2
            while i < len(lines) and "|" in lines[i]:
                row = _row(head, _cells(lines[i]))
                if row:
                    out.append(row.rstrip(".") + ".")
                i += 1
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)


def _headings(body: str):
    """(line number, level, title) of each heading outside code."""
    fence = False
    for n, line in enumerate(body.split("\n")):
        fence = fence != bool(FENCE_RE.match(line))
        m = None if fence else HEADING_RE.match(line)
        if m:
            yield n, len(m.group(1)), m.group(2).strip()


def _entry_dates(body: str, date_order: str, day: str | None) -> dict:
    """line number -> the date of each `##`/`###` heading that is or opens with one; a
    day and month without a year ("Sat 21/03") read beside the nearest entry above it
    that has a year, else below, else the note's `day` (dating.day_without_year)."""
    entries = [(n, t.lstrip("*_ ")) for n, level, t in _headings(body) if level in (2, 3)]
    dated = {n: dating.find_date(t, True, date_order) for n, t in entries}
    whole = [n for n, _ in entries if dated[n]]          # in line order
    for n, t in entries:
        if not dated[n]:
            at = bisect.bisect(whole, n)                  # the dated entries above it
            near = dated[whole[at - 1]] if at else dated[whole[0]] if whole else day
            dated[n] = dating.day_without_year(t, near, date_order)
    return dated


def _sections(body: str, date_order: str = "ymd",
              day: str | None = None) -> list[tuple[str, str | None, str, str]]:
    """(heading trail, section date, last heading, text) per heading outside code;
    `day`: the note's own date, if it has one (a year-less entry's year)."""
    out, trail, lines, sdate, slevel, fence = [], [], [], None, 0, False
    dated = _entry_dates(body, date_order, day)

    def flush():
        out.append((" > ".join(t for _, t in trail), sdate, trail[-1][1] if trail else "",
                    _tables("\n".join(lines)).strip()))

    for n, line in enumerate(body.split("\n")):
        fence = fence != bool(FENCE_RE.match(line))
        m = None if fence else HEADING_RE.match(line)
        if not m:
            lines.append(line)
            continue
        flush()
        lines, level, title = [], len(m.group(1)), m.group(2).strip()
        trail = [(lv, t) for lv, t in trail if lv < level] + [(level, title)]
        if sdate and level <= slevel:
            sdate = None
        found = dated.get(n)
        if found:
            sdate, slevel = found, level
    flush()
    return out


def _windows(text: str) -> list[str]:
    """Whole lines packed into windows of <= CHUNK_WORDS words; each window starts with
    the previous one's last lines (or last words) up to OVERLAP words. A "word" longer
    than MAX_WORD_CHARS is cut into pieces of that size first."""
    units = []                                   # (line, words); blank runs kept once
    for line in text.split("\n"):
        words = line.split()
        if any(len(w) > MAX_WORD_CHARS for w in words):    # no chunk of one 2 MB "word"
            words = [w[i:i + MAX_WORD_CHARS] for w in words
                     for i in range(0, len(w), MAX_WORD_CHARS)]
            line = " ".join(words)
        if len(words) > CHUNK_WORDS:             # a very long line: word windows
            units += [(" ".join(words[i:i + CHUNK_WORDS]), len(words[i:i + CHUNK_WORDS]))
                      for i in range(0, len(words) - OVERLAP, CHUNK_WORDS - OVERLAP)]
        elif words or (units and units[-1][1]):
            units.append((line, len(words)))
    out, cur, count = [], [], 0
    for unit in units:
        if cur and count + unit[1] > CHUNK_WORDS:
            out.append("\n".join(u for u, _ in cur).strip())
            keep, kept = [], 0
            for u in reversed(cur):
                if kept + u[1] > OVERLAP:
                    break
                keep, kept = [u] + keep, kept + u[1]
            if not kept:                         # last line too long: its last words,
                tail = next(u for u, n in reversed(cur) if n).split()[-OVERLAP:]
                if unit[0].split()[:len(tail)] != tail:   # unless the unit repeats them
                    keep, kept = [(" ".join(tail), len(tail))], len(tail)
            cur, count = (keep, kept) if kept + unit[1] <= CHUNK_WORDS else ([], 0)
        cur.append(unit)
        count += unit[1]
    out.append("\n".join(u for u, _ in cur).strip())
    return [w for w in out if w]


def _pieces(body: str, date_order: str = "ymd",
            day: str | None = None) -> list[tuple[str, str | None, str]]:
    """(heading, section_date, text) chunks of one file; `day`: the note's own date."""
    merged = []
    for heading, sdate, last, text in _sections(body, date_order, day):
        prev = merged[-1] if merged else None
        prev_words = len(prev[2].split()) if prev else 0
        if prev and prev[1] == sdate and not prev[2]:
            merged[-1] = (heading, sdate, text)
        elif (prev and prev[1] == sdate and prev_words < MIN_CHUNK_WORDS
              and prev_words + len(f"{last} {text}".split()) <= CHUNK_WORDS):
            merged[-1] = (prev[0], sdate, f"{prev[2]}\n\n{last}\n{text}".strip())
        else:
            merged.append((heading, sdate, text))
    out = [(h, d, w) for h, d, t in merged if t for w in _windows(t)]
    return out or ([("", None, body.strip())] if body.strip() else [])


def chunk_dict(cid: int, r: dict, heading: str, sdate, entry_latest, text: str,
               digest: str) -> dict:
    """A chunk as the pipeline sees it: its own fields plus those of its file's record
    (the one home of this shape: a new build and a loaded index make it here)."""
    return {"id": cid, "path": r["path"], "heading": heading, "section_date": sdate,
            "date": sdate or r["date"],
            "date_source": "section" if sdate else r["date_source"],
            "family": r["family"], "is_latest": r["is_latest"], "entry_latest": entry_latest,
            "private": r["private"], "text": text, "hash": digest}


def as_shown(text: str, mtime: float, stem: str, date_order: str = "ymd") -> str:
    """A note's text with its time words resolved as its chunks show them (each log
    entry against its own date): what a question set's key facts are checked against."""
    meta, body = dating.frontmatter(text)
    day, source = dating.date_of(stem, meta, body, mtime, date_order)
    day = None if source == dating.WEAK_SOURCE else day
    return "\n\n".join(timewords.resolve(t, sd or day)
                       for _, sd, t in _pieces(body, date_order, day))


def _real_date(r: dict) -> str | None:
    """A note's date when it is one (not a file's mtime)."""
    return None if r["date_source"] == dating.WEAK_SOURCE else r["date"]


def chunk_all(recs: list[dict]) -> list[dict]:
    """The chunks of the records read now (duplicates have none), with _embed text. Time
    words in a chunk's text are resolved against its log entry's date, else its note's
    (timewords.py; a note dated only by its file's mtime keeps them as written); what is
    embedded, like what BM25 indexes, is the text as written."""
    chunks = []
    for r in recs:
        if r["duplicate_of"]:
            continue
        pieces = _pieces(r["_body"], r.get("_date_order", "ymd"), _real_date(r))
        newest = max((d for _, d, _ in pieces if d), default=None)
        for heading, sdate, text in pieces:
            shown = timewords.resolve(text, sdate or _real_date(r))
            chunks.append(chunk_dict(len(chunks), r, heading, sdate,
                                     None if sdate is None else sdate == newest, shown, ""))
            chunks[-1]["_embed"] = f"{r['title']}\n{heading}\n{text}"   # as written
    return chunks

