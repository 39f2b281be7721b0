"""Text helpers: the one home of tokens, terms, numbers, dates in words, sentences, units.

In:  strings (a note's text, a chunk, a question).
Out: tokens, index terms, canonical numbers, month terms, sentences, the units a reader
     reads (sentences and table rows with wrapped lines joined), plain text; the word lists
     of dates and questions (months, weekdays, question words, subject pronouns) and
     one_of() to match any of a list (the time words are timewords.py's).
Not: any scoring, model call or file access. dating, retrieve, the builtin reader and
     writer, generate and verify all split and count text through these functions.
"""

from __future__ import annotations

import functools
import re
from datetime import date

import numpy as np

TOKEN_RE = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+", re.UNICODE)
THOUSANDS_RE = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if in
into is it its itself just me more most my myself no nor not now of off on once only
or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under
until up very was we were what when where which while who whom why will with would
you your yours yourself yourselves s t d ll m re ve
""".split())


NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)*")  # TOKEN_RE's number tokens, same spans
COMMA_NUMBER_RE = re.compile(r"\d,\d")   # the only way a token can hold a comma
MEMO_MAX = 500_000       # distinct tokens or terms interned before the tables start over

# Interned terms: every token seen gets the id of its term (-1: a stopword), so terms()
# costs a dict lookup per token after the first time. Ids index TERMS; they hold for
# one call of terms() / term_occurrences() (the tables start over only between calls).
_TOKEN_ID: dict[str, int] = {}
_TERM_ID: dict[str, int] = {}
TERMS: list[str] = []
TERM_CODES: list = []   # id -> the builtin embedder's feature codes (bytes), or None


def _norm_number(tok: str) -> str:
    if THOUSANDS_RE.match(tok):
        tok = tok.replace(",", "")
    return tok.rstrip(".,")


def _norm_commas(m: re.Match) -> str:
    """A number token with commas, rewritten so findall() yields its normal form:
    "1,550" -> "1550"; a list like "3,4" that is no thousands group -> "3 4"."""
    return _norm_number(m.group()).replace(",", " ")


def tokenize(text: str) -> list[str]:
    """Lowercase word and number tokens; "1,550" -> "1550", "3.5" stays "3.5"."""
    low = text.lower()
    if COMMA_NUMBER_RE.search(low):  # else every token is already in normal form
        low = NUMBER_RE.sub(_norm_commas, low)
    return TOKEN_RE.findall(low)


def stem(tok: str) -> str:
    if tok[0].isdigit() or len(tok) <= 3:
        return tok
    if tok.endswith("ies") and len(tok) > 4:
        return tok[:-3] + "y"
    if tok.endswith("s") and not tok.endswith(("ss", "us", "is")):
        return tok[:-1]
    return tok


def _intern(toks: list[str]) -> None:
    for tok in toks:
        if tok not in _TOKEN_ID:
            term = None if tok in STOPWORDS else stem(tok)
            if term is not None and term not in _TERM_ID:
                _TERM_ID[term] = len(TERMS)
                TERMS.append(term)
                TERM_CODES.append(None)
            _TOKEN_ID[tok] = -1 if term is None else _TERM_ID[term]


def _ids(text: str) -> list[int]:
    """Interned ids of terms(text), in order."""
    toks, ids = tokenize(text), _TOKEN_ID
    try:
        return [i for tok in toks if (i := ids[tok]) >= 0]
    except KeyError:                     # a token seen for the first time
        _intern(toks)
        return [i for tok in toks if (i := ids[tok]) >= 0]


def _start_call() -> None:
    if len(_TOKEN_ID) > MEMO_MAX or len(TERMS) > MEMO_MAX:
        for table in (_TOKEN_ID, _TERM_ID, TERMS, TERM_CODES):
            table.clear()


def terms(text: str) -> list[str]:
    """Index terms: tokens without stopwords, plurals folded. BM25, embedder, judge."""
    _start_call()
    names = TERMS
    return [names[i] for i in _ids(text)]


def term_occurrences(texts: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(int64 ids of the terms of all texts, in order; int64 terms per text; the id ->
    term list): terms(t) for each t, interned. The ids hold until the next call."""
    _start_call()
    lens = np.zeros(len(texts), dtype=np.int64)
    flat: list[int] = []
    for i, text in enumerate(texts):
        ids = _ids(text)
        lens[i] = len(ids)
        flat += ids
    return np.array(flat, dtype=np.int64), lens, TERMS


# Month names as people write them; a month is named by its first three letters ("jul").
MONTHS = dict(jan=1, feb=2, mar=3, apr=4, may=5, jun=6, jul=7, aug=8, sep=9, oct=10,
              nov=11, dec=12)
MONTH_WORD = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|"
              r"aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
MONTH_PATTERN = rf"(?<![a-z])({MONTH_WORD})(?![a-z])"
# The days of the week, Monday first (date.weekday()'s order); DAY_WORD: one, or its plural
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
DAY_WORD = rf"(?:{'|'.join(WEEKDAYS)})s?"
MONTH_WORD_RE = re.compile(MONTH_PATTERN + r"\Z")
ISO_MONTH_RE = re.compile(r"(?<!\d)(?:19|20)\d\d-(0[1-9]|1[0-2])(?:-\d\d)?(?!\d)")


DIGIT_ORDERS = ("dmy", "mdy")     # the orders a date in digits is read in


def century(yy: int) -> int:
    """A two-digit year as POSIX strptime reads it: 00-68 are 2000-2068, 69-99 1969-1999."""
    return 2000 + yy if yy < 69 else 1900 + yy


def digit_day(first: str, second: str, year: str, order: str = "ymd") -> date | None:
    """The day a date in digits names ("14.07.26", "3/10/2026": its two leading numbers
    and its year, two digits or four) read in `order` ("dmy" or "mdy"); with no order
    ("ymd") only a date that reads one way (14.07.26: there is no month 14); None when
    it is no day or reads two ways unordered."""
    y = int(year) if len(year) == 4 else century(int(year))
    days = set()
    for o in (DIGIT_ORDERS if order not in DIGIT_ORDERS else (order,)):
        d, m = (first, second) if o == "dmy" else (second, first)
        try:
            days.add(date(y, int(m), int(d)))
        except ValueError:
            pass
    return days.pop() if len(days) == 1 else None


@functools.lru_cache(maxsize=1 << 16)
def month_term(word: str) -> str | None:
    """The month a word names, as its first three letters: "Sept" -> "sep"; else None."""
    return word.lower()[:3] if MONTH_WORD_RE.match(word.lower()) else None


def date_terms(text: str) -> set[str]:
    """The months a text names in words or in ISO dates ("2026-07-12" -> "jul"): the
    words a question uses ("in July") for what a note writes in digits."""
    out = {m for w in TOKEN_RE.findall(text) if (m := month_term(w))}
    out.update(list(MONTHS)[int(m) - 1] for m in ISO_MONTH_RE.findall(text))
    return out


def one_of(words) -> str:
    """A regex group matching any of the words or phrases, the longest first (so "before
    that" is taken whole, not "before"): ("now", "at the moment") -> "(?:at the moment|now)".
    Put \\b on both sides to match whole words."""
    return "(?:" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)) + ")"


# Question words: what opens a question ("what", "how") and the verbs that ask ("is", "did")
WH_WORDS = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")
AUX_WORDS = ("is", "are", "was", "were", "am", "do", "does", "did", "has", "have", "had",
             "can", "could", "should", "will", "would")
# who does something, as a sentence's subject: "did I", "we'd", "when she last ..."
SUBJECT_PRONOUNS = ("i", "we", "you", "he", "she", "they")


def numbers(text: str) -> list[str]:
    """Numeric mentions, normalised like tokenize(): "£1,550/day" -> ["1550"]."""
    return [t for t in tokenize(text) if t[0].isdigit()]


ABBREV_GUARD = (r"(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!Mrs\.)(?<!\bSt\.)(?<!\bvs\.)"
                r"(?<!e\.g\.)(?<!i\.e\.)")   # no sentence break after these
# a short lowercase word and a period before a code of letters and digits is an
# abbreviation: "policy no. CGB-448213", "ref. AB12" (not "me. 45 min")
SHORT_ABBREV = (r"(?:(?<!\b[a-z]\.)(?<!\b[a-z]{2}\.)(?<!\b[a-z]{3}\.)|"
                r"(?!\s+(?=\S*\d)(?=\S*[^\W\d_])))")     # next word: a digit and a letter
SENTENCE_RE = re.compile(r"(?<=[.!?])" + ABBREV_GUARD + SHORT_ABBREV + r"\s+|\n+")


INSTRUCTION_RE = re.compile(  # text in a note that addresses the assistant, not the reader
    r"\b(?:ignore|disregard|forget|override)\b[^.!?\n]{0,40}\b(?:instructions?|prompts?|"
    r"rules|above|previous|everything)\b|\b(?:you are now|system prompt|new instructions|"
    r"(?:reply|respond|answer) only with|as an ai)\b", re.IGNORECASE)


REVISION_WORDS = (   # how a note says a value replaced another: written from English usage
    "now", "new", "newly", "no longer", "any more", "anymore", "instead", "instead of",
    "moved", "moves", "changed", "changes", "switched", "swapped", "replaced", "updated",
    "revised", "rescheduled", "postponed", "delayed", "pushed back", "brought forward",
    "rebooked", "cancelled", "called off", "fell through", "was", "were", "used to",
    "previously", "originally", "actually", "correction", "corrected", "turns out",
    "went up", "goes up", "going up", "gone up", "went down", "goes down", "going down",
    "up to", "down to", "increased", "decreased", "raised", "lowered", "reduced",
    "from now on")
REVISION_RE = re.compile(rf"\b{one_of(REVISION_WORDS)}\b", re.IGNORECASE)


def sentences(text: str) -> list[str]:
    """The one sentence splitter (models, generate, verify): after . ! ? and a space
    (not after "Dr." or "e.g."), and at every line break; pieces as they stand."""
    return SENTENCE_RE.split(text)


def count_tokens(text: str) -> int:
    """A model-free token estimate (about 4 characters a token) for the ledger."""
    return max(1, (len(text) + 3) // 4) if text else 0



def columns(header, rows) -> list[str]:
    """A table as aligned text lines (the header first), two spaces between columns."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
            for r in [header, *rows]]


KEY_RE = re.compile(r"^([^:;,.]{1,40}):\s*\S")   # "Status: paid": the key of a key: value line
BULLET_RE = re.compile(r"^\s*(?:[-*+>\u2022]|\d+[.)])\s+")   # a bullet, number or quote mark
EMPHASIS_RE = re.compile(r"\*\*|__|`")
BOLD_RE = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__|==[^=\n]+==")   # words marked to
                                     # stand out: **bold**, __bold__, ==highlight==
WIKILINK_RE = re.compile(r"\[\[([^\]|]+)(?:\|([^\]]+))?\]\]")


def number_key(tok: str) -> str:
    """Canonical number for comparison: "04" -> "4", "550.00" -> "550"."""
    whole, _, frac = tok.partition(".")
    frac = frac.rstrip("0")
    return (whole.lstrip("0") or "0") + ("." + frac if frac else "")


def number_keys(text: str) -> set[str]:
    return {number_key(n) for n in numbers(text)}


@functools.lru_cache(maxsize=1 << 16)
def plain(text: str) -> str:
    """Markdown emphasis and wikilink brackets removed: [[a|b]] -> b, **x** -> x."""
    return EMPHASIS_RE.sub("", WIKILINK_RE.sub(lambda m: m.group(2) or m.group(1), text))


# A line goes on with the sentence of the line before (a hard-wrapped paragraph or list
# item) when it is indented under a list item ("1. Eden Camp: the mocks moved and the" /
# "   13 November date clashes"), or when the line before ends inside a clause (a
# lowercase word, a comma or a colon), this one opens in lowercase or a digit and is no
# bullet or "key: value" field, and the line before stops where no sentence can
# (_unfinished) or is as long as a wrapped line and no field. A short line or a field is
# whole: "settled on £1,240 from 1 Nov" / "i repaint the front".
CONTINUES_RE = re.compile(r"[a-z,:]$")
WRAP_MIN = 60     # editors wrap at 72-80 columns: a shorter line ended where its writer did
OPENS_LOW_RE = re.compile(r"^[a-z0-9(]")


def _unfinished(line: str) -> bool:
    """The line stops where no sentence can: on a comma, a colon or a function word
    ("... moves to the")."""
    words = line.rsplit(None, 1)
    return line.endswith((",", ":")) or bool(words) and words[-1].lower() in STOPWORDS


def _logical_lines(text: str) -> list[str]:
    """The lines of a text with wrapped sentences joined (CONTINUES_RE)."""
    out: list[str] = []
    item = False                       # the line before is (part of) a list item
    for raw in text.splitlines():
        line = raw.strip()
        bullet = bool(BULLET_RE.match(raw))
        if out and line and not bullet and not line.startswith(("#", "|")) and (
                (item and raw[:1].isspace()) or (
                    CONTINUES_RE.search(out[-1]) and OPENS_LOW_RE.match(line)
                    and not KEY_RE.match(line) and (_unfinished(out[-1]) or (
                        len(out[-1]) >= WRAP_MIN and not KEY_RE.match(out[-1]))))):
            out[-1] += " " + line
            continue
        out.append(line)
        item = bullet or (item and bool(line))
    return out


@functools.lru_cache(maxsize=1 << 14)
def split_units(text: str) -> tuple[str, ...]:
    """Sentences and table rows of a chunk, as plain text; headings and rules dropped."""
    out = []
    for line in _logical_lines(text):
        if not line or line.startswith(("#", "|---", "---")):
            continue
        for s in sentences(plain(BULLET_RE.sub("", line))):
            s = " ".join(s.split())
            if len(tokenize(s)) >= 2:
                out.append(s)
    return tuple(out)


@functools.lru_cache(maxsize=1 << 16)
def evidence_terms(text: str) -> frozenset:
    """Terms of a text, numbers canonical, with the months it names (date_terms)."""
    return frozenset([number_key(t) if t[0].isdigit() else t for t in terms(text)]
                     + list(date_terms(text)))
