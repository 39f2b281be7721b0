"""Property tests (hypothesis): the date parser, family naming, the chunker, citation
parsing and the number rule hold for generated input, not only for worked examples."""

import re
import string
from datetime import date

from hypothesis import example, given, settings, strategies as st

from verso import chunking
from verso import dating
from verso import families
from verso import generate
from verso import textkit

FAST = settings(max_examples=100, deadline=None)

MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
MONTH_WORDS = {w for m in MONTHS for w in (m.lower(), m[:3].lower())} | {"sept", "june",
                                                                           "july"}


def _ordinal(d: int) -> str:
    return f"{d}{'th' if 10 <= d % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(d % 10, 'th')}"


def _mon(d: date, full: bool) -> str:
    name = MONTHS[d.month - 1]
    return name if full else ("Sept" if d.month == 9 else name[:3])


# every written form the parser documents: (format, whether the day is written)
FORMS = {
    "iso": (lambda d: f"{d.year}-{d.month:02}-{d.day:02}", True),
    "underscores": (lambda d: f"{d.year}_{d.month:02}_{d.day:02}", True),
    "dots unpadded": (lambda d: f"{d.year}.{d.month}.{d.day}", True),
    "Month D, YYYY": (lambda d: f"{_mon(d, True)} {d.day}, {d.year}", True),
    "Mon. D YYYY": (lambda d: f"{_mon(d, False)}. {d.day} {d.year}", True),
    "D Month YYYY": (lambda d: f"{d.day} {_mon(d, True)} {d.year}", True),
    "Dth Mon YYYY": (lambda d: f"{_ordinal(d.day)} {_mon(d, False)} {d.year}", True),
    "YYYY-MM": (lambda d: f"{d.year}-{d.month:02}", False),
    "YYYY_M": (lambda d: f"{d.year}_{d.month}", False),
    "Month YYYY": (lambda d: f"{_mon(d, True)} {d.year}", False),
    "(Mon YYYY)": (lambda d: f"({_mon(d, False)} {d.year})", False),
    "monYYYY": (lambda d: f"{_mon(d, False).lower()}{d.year}", False),
}
DATES = st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 31))
CONTEXT = st.sampled_from(["", "rates ", "Handover - ", "plan_", "notes, "])
AFTER = st.sampled_from(["", " final", "_v2", " (1)", ".", " notes"])


@FAST
@given(DATES, st.sampled_from(sorted(FORMS)), CONTEXT, AFTER)
def test_every_written_date_round_trips(day, form, before, after):
    write, has_day = FORMS[form]
    expected = day if has_day else day.replace(day=1)
    assert dating.find_date(before + write(day) + after) == expected.isoformat()


DATE_BITS = st.sampled_from(["2026", "1999", "-", "_", ".", " ", "13", "45", "31", "02",
                             "Feb", "sept", "ſep", "K", "Oct.", "2nd", ",", "(", "٢٠٢٦"])


@FAST
@example("ſep 2026")           # long s: re.I matches it as "s" (once a KeyError crash)
@example("2026-13-45 31 Feb 2026 2026-02-30")
@given(st.lists(st.one_of(st.text(max_size=6), DATE_BITS), max_size=12).map("".join))
def test_garbage_never_raises_and_only_real_dates_come_out(text):
    found = dating.find_date(text)
    assert found is None or 1900 <= date.fromisoformat(found).year <= 2099


TITLE_WORDS = st.sampled_from(["Virgin Media letter ", "copied from whatsapp ", "contacts (export ",
                               "notes, ", "Rates - "])


@FAST
@given(DATES, st.sampled_from(sorted(FORMS)), TITLE_WORDS, st.text(max_size=40))
def test_a_title_line_dates_its_note_by_the_date_it_writes(day, form, words, body):
    """Whatever form the title line writes its date in, after words: that date (its first
    day when no day is written); a day set off at its end by a dash was already "text"."""
    write, has_day = FORMS[form]
    expected = day if has_day else day.replace(day=1)
    got = dating.date_of("note", {}, f"{words}{write(day)}\n\n{body}", 0.0)
    assert got[0] == expected.isoformat()
    assert got[1] == ("text" if words == "Rates - " and has_day else "title")  # set off: "text"


# ------------------------------------------------------------------- families

WEEKDAY_WORD = re.compile(rf"{dating.WEEKDAY}|weds")   # beside a date, it goes with it
WORD = st.text(string.ascii_lowercase, min_size=2, max_size=8).filter(
    lambda w: w not in families.MARKER_WORDS and w not in MONTH_WORDS
    and not WEEKDAY_WORD.fullmatch(w))
MARKS = st.sampled_from(["v2", "v1.2", "V3", "final", "Final", "draft", "copy", "COPY",
                         "backup", "bak", "old", "(1)", "(12)", "copy 2"])
DATE_MARKS = st.builds(lambda d, f: FORMS[f][0](d), DATES, st.sampled_from(sorted(FORMS)))


@FAST
@given(st.lists(WORD, min_size=1, max_size=3), st.lists(MARKS, max_size=3),
       st.one_of(st.none(), DATE_MARKS), st.lists(st.integers(0, 4), min_size=4, max_size=4),
       st.sampled_from([" ", "_", "-"]), st.booleans())
def test_markers_and_dates_leave_the_family_unchanged(words, marks, when, where, sep, title):
    """One date (two dates glued by "_" can read as one: "2026-10_5 Oct 2026")."""
    base = [w.title() if title else w for w in words]
    name = list(base)
    for mark, at in zip(marks + [when] * bool(when), where):   # before, between, after
        name.insert(min(at, len(name)), mark)
    assert families._family_name(sep.join(name)) == " ".join(words)


# ---------------------------------------------------------------------- chunks

def _replay(original: list[str], windows: list[list[str]]) -> None:
    """Each window is a run of the original words that starts at most OVERLAP words
    before the previous one ended; together they cover every word once, in order."""
    pos = 0
    for w in windows:
        back = next((k for k in range(min(chunking.OVERLAP, pos, len(w)), -1, -1)
                     if original[pos - k:pos - k + len(w)] == w), None)
        assert back is not None, f"window at word {pos} is not a run of the text: {w[:8]}"
        pos += len(w) - back
    assert pos == len(original)


LINE = st.one_of(st.lists(st.sampled_from(["w", "£1,550", "blob"]), max_size=40),
                 st.integers(150, 450).map(lambda n: ["w"] * n))   # one very long line


def _unique(lines: list[list[str]]) -> str:
    """Lines of distinct words (so a window's place in the text is unambiguous); a
    "blob" is a 250-character word, cut by the chunker into two distinct pieces."""
    n, out = 0, []
    for line in lines:
        words = []
        for kind in line:
            n += 1
            words.append(f"A{n:05d}" + "y" * 194 + f"B{n:05d}" + "z" * 44 if kind == "blob"
                         else f"{kind}{n}")
        out.append(" ".join(words))
    return "\n".join(out)


@FAST
@given(st.lists(LINE, max_size=14))
def test_windows_keep_every_word_once_plus_overlap(lines):
    text = _unique(lines)
    out = chunking._windows(text)
    assert all(len(w.split()) <= chunking.CHUNK_WORDS for w in out)
    assert all(len(w) <= chunking.CHUNK_WORDS * (chunking.MAX_WORD_CHARS + 1) for w in out)
    cut = [p for w in text.split() for p in (w[i:i + chunking.MAX_WORD_CHARS]
                                             for i in range(0, len(w), chunking.MAX_WORD_CHARS))]
    _replay(cut, [w.split() for w in out])


BODY_LINE = st.one_of(
    st.builds(lambda n, words: "#" * n + " " + " ".join(words), st.integers(1, 4),
              st.lists(st.sampled_from(["Plan", "2026-05-02", "Notes", "3 May 2026"]),
                       min_size=1, max_size=2)),
    st.lists(st.sampled_from(["alpha", "beta", "1,550", "gamma", "delta"]), max_size=120)
    .map(" ".join))


@FAST
@given(st.lists(BODY_LINE, max_size=25))
def test_pieces_lose_no_body_word_and_respect_the_limit(lines):
    body = "\n".join(lines)
    pieces = chunking._pieces(body)
    assert all(len(t.split()) <= chunking.CHUNK_WORDS for _, _, t in pieces)
    text_words = {w for line in lines if not line.startswith("#") for w in line.split()}
    assert text_words <= {w for _, _, t in pieces for w in t.split()}
    for heading, sdate, _ in pieces:
        assert sdate is None or date.fromisoformat(sdate)


# ------------------------------------------------------------------- citations

SENT_WORD = st.text(string.ascii_lowercase, min_size=1, max_size=7).filter(
    lambda w: w not in ("vs", "e", "i", "cf") and w not in generate.CITE_WORDS)
# ("cf" before a citation is a lead-in CITE_PHRASE_RE removes, as "see" and "per" are)
SENTENCE = st.lists(SENT_WORD, min_size=1, max_size=8).map(lambda ws: " ".join(ws).capitalize())
IDS = st.lists(st.integers(1, 12), max_size=3, unique=True).map(lambda ns: [f"c{n}" for n in ns])


def _cite(ids: list[str], style: int) -> str:
    if not ids:
        return ""
    return (" " + "".join(f"[{i}]" for i in ids) if style == 0 else
            " [" + ", ".join(ids) + "]" if style == 1 else
            " " + " ".join(f"[{i.upper()}]" for i in ids))


@FAST
@given(st.lists(st.tuples(SENTENCE, IDS, st.integers(0, 2), st.booleans(),
                          st.sampled_from([".", "!", "?"])), min_size=1, max_size=6),
       st.sampled_from([" ", "\n", "  "]))
def test_parse_citations_returns_exactly_the_cited_ids(parts, joiner):
    text = joiner.join(f"{s}{_cite(ids, style)}{end}" if before else
                       f"{s}{end}{_cite(ids, style)}"
                       for s, ids, style, before, end in parts)
    got = generate.parse_citations(text)
    assert [ids for _, ids in got] == [ids for _, ids, *_ in parts]
    assert [s for s, _ in got] == [s + end for s, _, _, _, end in parts]


# --------------------------------------------------------------------- numbers

@FAST
@given(st.integers(0, 10 ** 12), st.sampled_from(["", "£", "$", "€"]),
       st.sampled_from(["", "%", "/day", " a month", ".", "k"]), st.booleans(),
       st.sampled_from(["", "The rent is ", "paid "]))
def test_numbers_drop_thousands_separators_currency_and_units(n, cur, unit, cents, lead):
    shown = f"{n:,.2f}" if cents else f"{n:,}"
    assert textkit.numbers(f"{lead}{cur}{shown}{unit}") == [f"{n}.{shown[-2:]}" if cents
                                                         else str(n)]


@FAST
@given(st.lists(st.integers(0, 10 ** 7), min_size=1, max_size=5))
def test_numbers_keep_order_and_each_mention(ns):
    text = " and ".join(f"£{n:,}" for n in ns) + "."
    assert textkit.numbers(text) == [str(n) for n in ns]
    assert textkit.number_keys(text) == {str(n) for n in ns}
