"""Model calls: every embed, judge and write call goes through here, and into the ledger.

In:  texts to embed, passages and claims to judge, chat messages to write from.
Out: float32 L2-normalised vectors, probabilities, answer text; one ledger row per call
     (stage, backend, model, input tokens, output tokens, seconds, dollars).
Not: retrieval, prompts or verdicts (the stage modules own those).

Backends are chosen by name with load_backend(): `builtin` (offline, numpy only),
`ollama` (local server) and `jev` (hosted judge). Importing this module starts nothing.
Sections: text helpers (tokenize, terms, numbers, sentences: shared by ingest, retrieve,
generate and verify), ledger, builtin embedder, builtin reader (the judge), builtin
writer, ollama, jev, selection.
"""

from __future__ import annotations

import functools
import re
import time
import zlib
from array import array
from dataclasses import dataclass, field

import numpy as np

# ---------------------------------------------------------------------------- text

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
# costs a dict lookup per token after the first time. Ids index _TERMS; they hold for
# one call of terms() / term_occurrences() (the tables start over only between calls).
_TOKEN_ID: dict[str, int] = {}
_TERM_ID: dict[str, int] = {}
_TERMS: list[str] = []
_TERM_CODES: list = []   # id -> the builtin embedder's feature codes (bytes), or None


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


def _stem(tok: str) -> str:
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
            term = None if tok in STOPWORDS else _stem(tok)
            if term is not None and term not in _TERM_ID:
                _TERM_ID[term] = len(_TERMS)
                _TERMS.append(term)
                _TERM_CODES.append(None)
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
    if len(_TOKEN_ID) > MEMO_MAX or len(_TERMS) > MEMO_MAX:
        for table in (_TOKEN_ID, _TERM_ID, _TERMS, _TERM_CODES):
            table.clear()


def terms(text: str) -> list[str]:
    """Index terms: tokens without stopwords, plurals folded. BM25, embedder, judge."""
    _start_call()
    names = _TERMS
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
    return np.array(flat, dtype=np.int64), lens, _TERMS


# Month names as people write them; a month is named by its first three letters ("jul").
MONTHS = dict(jan=1, feb=2, mar=3, apr=4, may=5, jun=6, jul=7, aug=8, sep=9, oct=10,
              nov=11, dec=12)
MONTH_WORD = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|"
              r"aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
MONTH_PATTERN = rf"(?<![a-z])({MONTH_WORD})(?![a-z])"
DAY_WORD = r"(?:mon|tues|wednes|thurs|fri|satur|sun)days?"
MONTH_WORD_RE = re.compile(MONTH_PATTERN + r"\Z")
ISO_MONTH_RE = re.compile(r"(?<!\d)(?:19|20)\d\d-(0[1-9]|1[0-2])(?:-\d\d)?(?!\d)")


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


def sentences(text: str) -> list[str]:
    """The one sentence splitter (models, generate, verify): after . ! ? and a space
    (not after "Dr." or "e.g."), and at every line break; pieces as they stand."""
    return SENTENCE_RE.split(text)


def count_tokens(text: str) -> int:
    """A model-free token estimate (about 4 characters a token) for the ledger."""
    return max(1, (len(text) + 3) // 4) if text else 0


# -------------------------------------------------------------------------- ledger


class BackendError(Exception):
    """A model backend failed; the message is one actionable line."""


@dataclass
class Ledger:
    """Every model call of one question (or one run), attributed to a stage."""

    rows: list = field(default_factory=list)

    def record(self, stage, backend, model, input_tokens=0, output_tokens=0,
               seconds=0.0, dollars=0.0):
        self.rows.append({"stage": stage, "backend": backend, "model": model,
                          "input_tokens": int(input_tokens),
                          "output_tokens": int(output_tokens),
                          "seconds": float(seconds), "dollars": float(dollars)})

    def by_stage(self) -> dict:
        out: dict = {}
        for r in self.rows:
            t = out.setdefault(r["stage"], {"calls": 0, "input_tokens": 0,
                                            "output_tokens": 0, "seconds": 0.0,
                                            "dollars": 0.0})
            t["calls"] += 1
            for k in ("input_tokens", "output_tokens", "seconds", "dollars"):
                t[k] += r[k]
        return out


def _record(ledger, stage, backend, model, started, inp=0, out=0, dollars=0.0):
    if ledger is not None:
        ledger.record(stage, backend, model, inp, out, time.perf_counter() - started,
                      dollars)


# ------------------------------------------------------------- builtin embedder

EMBED_DIM = 384          # hashed feature buckets (one float32 row per chunk)
NGRAM_RANGE = (3, 5)     # character n-grams of each term, with boundary marks
NGRAM_WEIGHT = 0.35      # a char n-gram counts this much against a whole term
BUILTIN_EMBEDDER = "builtin-hash-v1"


def _bucket(feature: str) -> tuple[int, float]:
    h = zlib.crc32(feature.encode("utf-8"))
    return h % EMBED_DIM, (1.0 if (h >> 31) & 1 else -1.0)


# A term's features are fixed: its word bucket, then its char n-grams in order, kept
# per interned term as int16 codes bucket * 4 + kind (kind indexes _CODE_VALUE). A
# batch of texts expands its term occurrences into (row, bucket, value) events in text
# order and sums them with one bincount, which adds in that order, exactly as the first
# version's per-text dict did (tests/test_bench_equivalence.py checks it bit for bit).
_CODE_VALUE = np.array([1.0, -1.0, NGRAM_WEIGHT, -NGRAM_WEIGHT])
SMALL_BATCH_TERMS = 64   # fewer term occurrences than this: summed in a Python loop


def _term_codes(term: str) -> bytes:
    """The signed hashed features of one term (word, then 3..5-grams of <term>)."""
    codes = []
    b, s = _bucket("w:" + term)
    codes.append(b * 4 + (0 if s > 0 else 1))
    marked = f"<{term}>"
    lo, hi = NGRAM_RANGE
    for n in range(lo, hi + 1):
        for i in range(len(marked) - n + 1):
            b, s = _bucket(marked[i:i + n])
            codes.append(b * 4 + (2 if s > 0 else 3))
    return np.array(codes, dtype=np.int16).tobytes()


def _codes(i: int) -> bytes:
    c = _TERM_CODES[i]
    if c is None:
        c = _TERM_CODES[i] = _term_codes(_TERMS[i])
    return c


def _counts(texts: list[str]) -> np.ndarray:
    """[n, EMBED_DIM] float32 signed hashed counts of terms and their char n-grams
    (crc32: stable everywhere)."""
    n = len(texts)
    occ, lens, _ = term_occurrences(texts)
    if not occ.size:
        return np.zeros((n, EMBED_DIM), dtype=np.float32)
    if occ.size <= SMALL_BATCH_TERMS:                       # a query: plain Python is faster
        m = np.zeros((n, EMBED_DIM), dtype=np.float32)
        values, at = _CODE_VALUE.tolist(), 0
        for row, k in enumerate(lens.tolist()):
            acc = [0.0] * EMBED_DIM
            for i in occ[at:at + k].tolist():
                for code in array("h", _codes(i)):
                    acc[code >> 2] += values[code & 3]
            m[row] = acc
            at += k
        return m
    uniq, occ = np.unique(occ, return_inverse=True)
    blobs = [_codes(i) for i in uniq.tolist()]
    table = np.frombuffer(b"".join(blobs), dtype=np.int16)  # codes of the batch's terms
    bucket, value = (table >> 2).astype(np.int64), _CODE_VALUE[table & 3]
    sizes = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs)) // 2
    starts = np.cumsum(sizes) - sizes
    per = sizes[occ]                                        # events per occurrence
    ends = np.cumsum(per)                                   # where each one's events end
    pos = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(starts[occ] - ends + per, per)
    flat = np.repeat(np.repeat(np.arange(0, n * EMBED_DIM, EMBED_DIM, dtype=np.int64),
                               lens), per)                  # row offset of every event
    flat += bucket[pos]
    m = np.bincount(flat, weights=value[pos], minlength=n * EMBED_DIM)
    return m.reshape(n, EMBED_DIM).astype(np.float32)  # [n, EMBED_DIM] signed raw counts


class BuiltinEmbedder:
    """Hashed word + char n-gram TF-IDF vectors; IDF is fitted once per index."""

    name = "builtin"
    dim = EMBED_DIM

    def __init__(self, idf: np.ndarray | None = None):
        self.idf = (np.ones(EMBED_DIM, dtype=np.float32) if idf is None
                    else np.asarray(idf, dtype=np.float32))
        digest = zlib.crc32(self.idf.tobytes()) if idf is not None else 0
        self.id = f"{BUILTIN_EMBEDDER}-{EMBED_DIM}-{digest:08x}"

    @classmethod
    def fit(cls, texts: list[str]) -> "BuiltinEmbedder":
        """IDF per bucket from document frequencies: log((n + 1) / (df + 1)) + 1.

        The fitted embedder keeps each text's counts until it embeds that text once
        (ingest fits on the chunks, then embeds the same chunks)."""
        df = np.zeros(EMBED_DIM, dtype=np.float64)
        fitted: dict[str, list] = {}          # text -> [counts row, uses left]
        for start in range(0, len(texts), 2048):
            batch = texts[start:start + 2048]
            m = _counts(batch)
            df += (m != 0).sum(axis=0)
            for t, row in zip(batch, m):
                fitted.setdefault(t, [row, 0])[1] += 1
        idf = np.log((len(texts) + 1) / (df + 1)) + 1.0
        emb = cls(idf.astype(np.float32))
        emb._fitted = fitted
        return emb

    def _raw(self, texts: list[str]) -> np.ndarray:
        """_counts(texts), taking the rows fit() kept (each as often as it was fitted)."""
        fitted = getattr(self, "_fitted", None)
        if not fitted:
            return _counts(texts)
        rows = []
        for t in texts:
            kept = fitted.get(t)
            rows.append(kept and kept[0])
            if kept and kept[1] <= 1:
                del fitted[t]
            elif kept:
                kept[1] -= 1
        todo = [i for i, r in enumerate(rows) if r is None]
        if todo:
            for i, r in zip(todo, _counts([texts[i] for i in todo])):
                rows[i] = r
        return np.stack(rows) if rows else _counts(texts)

    def _vectors(self, texts: list[str]) -> np.ndarray:
        m = self._raw(texts)
        m = np.sign(m) * np.log1p(np.abs(m)) * self.idf  # sublinear tf, idf weight
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return (m / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed_documents(self, texts, ledger=None, stage="ingest"):
        started = time.perf_counter()
        out = self._vectors(list(texts))
        _record(ledger, stage, "builtin", self.id, started,
                sum(count_tokens(t) for t in texts))
        return out

    def embed_query(self, text, ledger=None, stage="retrieve"):
        started = time.perf_counter()
        out = self._vectors([text])[0]
        _record(ledger, stage, "builtin", self.id, started, count_tokens(text))
        return out


# ---------------------------------------------------------------- builtin reader
# (the builtin judge and writer; tools/fit_reader.py fits their weights on the dev split)
# One model reads every sentence or table row ("unit") of a passage. Its features are
# ones any vault has: the IDF-weighted share of the asked terms the unit names (in its
# own words, in its heading trail, in its note's title), whether it holds a value of the
# kind the question asks for (money, a date, a name ...), how close that value stands to
# an asked term, and, for the writer, the passage's rerank rank and version status. A
# logistic regression over labelled dev units weighs them (one command:
# `python tools/fit_reader.py`, which prints the block below). The evidence of a unit is
# its score without rank and status. The judge rates a passage by its best unit, so the
# gate abstains only when no kept unit's evidence reaches ABSTAIN_LOGIT (picked from
# the dev curve of false abstentions vs answered refusals); the writer cites the best
# units and abstains only when no unit holds a value of the asked kind near an asked term.

JUDGE_MODEL = "builtin-judge-v2"
WRITER_MODEL = "builtin-writer-v2"
# fitted by tools/fit_reader.py on questions/dev.jsonl (tests/test_fit_reader.py checks)
READER_BIAS = -7.641        # logit of a unit that names nothing asked and holds no value
W_TEXT = 3.493               # share of the asked terms the unit names in its own words
W_HEADING = 1.113           # share named by its heading trail
W_TITLE = 1.481             # share named by its note's path (title)
W_COVER = 1.45             # share named by the unit, its heading and title together
W_TYPE = 2.234              # it holds a value of the asked kind (a bare number: PARTIAL_CREDIT)
W_NEAR = 0.967              # an asked term's weight share / tokens from it to such a value
W_RANK = 0.889              # the passage's rerank rank: 1 / (1 + rank from 0)
W_LATEST = -0.144           # its note is the latest version (not an older one or entry)
ABSTAIN_LOGIT = -3.679      # evidence below this everywhere: the notes lack the answer
# set by hand, with a reason
PARTIAL_CREDIT = 0.6      # a related form ("changes"/"changed", "paying"/"pay") is most of a match
IDF_FLOOR = 0.1           # the commonest asked word still counts a little
PREFIX_LEN = 5            # words sharing 5 leading letters are related forms ("evolv")
FEATURES = ("text", "heading", "title", "cover", "type", "near", "rank", "latest")

# Words that place a question in time, or only ask, rather than name its topic.
TIME_PHRASE_RE = re.compile(r"\b(?:over time|these days|at the moment|right now|so far|"
                            r"as of (?:today|now)|used to|at present)\b")
TIME_WORDS = frozenset("""current currently latest newest recent recently still now
nowadays today anymore change changed changing evolve evolved history historically
originally original previous previously earlier before tell please""".split())
_MONTH, _DAY = MONTH_WORD, DAY_WORD
LOCATIVE = ("at", "in", "on", "near", "by", "behind", "under", "inside", "outside", "from")
# Kinds of value, as they stand in a unit.
VALUE_RES = {
    "money": re.compile(r"[\u00a3$\u20ac][^\d\n]{0,4}\d|"        # "£3", "(£): 340"
                        r"\d\s?(?:gbp|eur|usd|euros?|pounds?|p)\b", re.I),
    "measure": re.compile(r"\d\s?(?:g|kg|mg|ml|l|km|m|mi|miles?|grams?|litres?|kcal|bpm|"
                          r"acres?|ha|metres?|%)\b", re.I),
    "number": re.compile(r"\d"),
    "duration": re.compile(r"\d[\s-]?(?:sec|second|min|minute|hour|hr|h|day|week|month|"
                           r"year)s?\b|\b\d{1,2}:\d{2}\b", re.I),
    "clock": re.compile(r"\b\d{1,2}[:.]\d{2}(?::\d{2})?\b|\b\d{1,2}\s?(?:am|pm)\b", re.I),
    "percent": re.compile(r"\d\s?%|\bper ?cent\b", re.I),
    "date": re.compile(rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)? {_MONTH}\b|"
                       rf"\b{_MONTH} \d{{1,2}}\b|\b{_DAY}\b", re.I),
    # a place: what follows a locative preposition ("at pier 4", "in the shed")
    "place": re.compile(rf"\b(?:{'|'.join(LOCATIVE)}) (?:the |my |a |our )?\w", re.I),
    # a capitalised word inside a sentence: a name ("Physio: Hannah Reyes", "in Clun")
    "name": re.compile(rf"(?<=[\w:,;(\u2014-]\s)(?!(?i:{_DAY}|{_MONTH})\b)[A-Z][\w'\u2019-]+"),
}
# The kinds a question asks for, from its asking words, first cue of each kind.
KIND_CUES = (
    (re.compile(r"\bhow much\b"), ("money", "measure", "percent")),
    (re.compile(r"\bhow many\b|\bnumber\b|\bhow often\b|\bhow old\b"), ("number",)),
    (re.compile(r"\bhow long\b"), ("duration", "measure")),
    (re.compile(r"\bhow (?:far|big|heavy|tall|wide)\b"), ("measure",)),
    (re.compile(r"\b(?:price|cost|fee|rent|salary|wage|charge|paid|pay|paying|spend|spent|"
                r"owe|budget)s?\b"), ("money",)),
    (re.compile(r"\bper ?cent|percentage\b"), ("percent",)),
    (re.compile(r"\bwhen\b|\bwhat (?:date|day)\b|\bwhich (?:date|day|night|week|month)\b|"
                r"\bdeadline\b|\bdue\b"), ("date",)),
    (re.compile(r"\btime\b"), ("clock", "duration")),
    (re.compile(r"\bwho(?:m|se)?\b|name\b|\bwhich\b"), ("name",)),  # which one: a name
    (re.compile(r"\bwhere\b"), ("place",)),
)
# words that ask for a kind of value rather than name the topic
HOW_RE = re.compile(r"\bhow (?:much|many|long|often|old|far|big|heavy|tall|wide)\b|"
                    r"\b(?:what|which) (?:time|date|dates|day|name)\b|\bthe \w*name of\b")
LIST_RE = re.compile(r"\b(?:list|all|what are|which are|what were|which were)\b")
_WH = r"(?:what|which|who|whom|whose|when|where|why|how)"
_AUX = r"(?:is|are|was|were|am|do|does|did|has|have|had|can|could|should|will|would)"
# A question of several parts: split at sentence marks, dashes, and "and" or a comma
# before a wh-word; a piece asking nothing is context of the part after it.
PART_SPLIT_RE = re.compile(rf"[.?!;]+\s+|\s[\u2014\u2013-]+\s|,?\s+and\s+(?={_WH}\b)|"
                           rf",\s+(?={_WH}\b)", re.IGNORECASE)
ASKING_RE = re.compile(rf"^(?:[\w-]+\s+){{0,2}}(?:{_WH}|{_AUX})\b", re.IGNORECASE)
KEY_RE = re.compile(r"^([^:;,.]{1,40}):\s*\S")   # "Status: paid": the key of a key: value line
BULLET_RE = re.compile(r"^\s*(?:[-*+>\u2022]|\d+[.)])\s+")   # a bullet, number or quote mark
EMPHASIS_RE = re.compile(r"\*\*|__|`")
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


@functools.lru_cache(maxsize=1 << 16)
def _base(t: str) -> str:
    """Verb forms folded: "paying" -> "pay", "getting" -> "get", "agreed" -> "agre"."""
    for suffix in ("ing", "ed"):
        if t.endswith(suffix) and len(t) - len(suffix) >= 3:
            t = t[:-len(suffix)]
            return t[:-1] if len(t) >= 4 and t[-1] == t[-2] else t
    return t


def _related(term: str, p: str) -> bool:
    """A shared 5-letter prefix, one word the other's prefix, or one verb form."""
    base = _base(term)
    return ((len(term) >= PREFIX_LEN and p[:PREFIX_LEN] == term[:PREFIX_LEN])
            or (min(len(p), len(term)) >= 4 and (p.startswith(term) or term.startswith(p)))
            or (len(base) >= 3 and _base(p).rstrip("e") == base.rstrip("e")))


# term -> (words tried against it, the ones _related pairs with it): _match then costs
# set operations; a word is tried once per term. Starts over past RELATED_MEMO_MAX words.
_RELATED_SEEN: dict[str, tuple[set, set]] = {}
_RELATED_SIZE = [0]
RELATED_MEMO_MAX = 2_000_000


def _related_words(term: str, words) -> set[str]:
    """A superset of the words of `words` that _related pairs with term, every one of
    them so paired (words tried for this term before, in other calls, may be in it)."""
    seen = _RELATED_SEEN.get(term)
    if seen is None:
        if _RELATED_SIZE[0] > RELATED_MEMO_MAX:
            _RELATED_SEEN.clear()
            _RELATED_SIZE[0] = 0
        seen = _RELATED_SEEN[term] = (set(), set())
    tried, related = seen
    new = (words if isinstance(words, (set, frozenset)) else set(words)) - tried
    if new:
        tried |= new
        _RELATED_SIZE[0] += len(new)
        related.update(p for p in new if _related(term, p))
    return related


def _match(term: str, tset) -> float:
    """1 for the term itself, PARTIAL_CREDIT for a related form, else 0."""
    if term in tset:
        return 1.0
    return PARTIAL_CREDIT if not _related_words(term, tset).isdisjoint(tset) else 0.0


@dataclass(frozen=True)
class Ask:
    """What a question asks: its topic terms, the kinds of value, its parts, a list?"""
    terms: tuple
    kinds: frozenset
    names: frozenset = frozenset()   # terms of its capitalised names
    parts: tuple = ()                # an Ask per part, for a question of several
    is_list: bool = False
    focus: tuple = ()                # the attribute asked about ("phone", "floor")
    owned: tuple = ()                # what of theirs is asked ("Ana's phone number": phone)


def _kinds(q: str) -> frozenset:
    q = TIME_PHRASE_RE.sub(" ", q)                     # "over time" asks for no time
    return frozenset(k for rx, ks in KIND_CUES if rx.search(q) for k in ks)


def _topic(q: str) -> tuple:
    q = HOW_RE.sub(" ", TIME_PHRASE_RE.sub(" ", q.lower()))
    out = [month_term(t) or t for t in terms(q)
           if t not in TIME_WORDS and not t[0].isdigit()]
    return tuple(dict.fromkeys(out))


def question_parts(query: str) -> list[str]:
    """The parts a question asks, each with the context pieces before it:
    "For the test rounds, how many take part and what do they get?" ->
    ["how many take part For the test rounds", "what do they get"]."""
    parts, pending = [], []
    for piece in PART_SPLIT_RE.split(" ".join(query.replace("\u2019", "'").split())):
        piece = piece.strip(" ,.?!;")
        if not piece:
            continue
        if ASKING_RE.match(piece):
            parts.append(" ".join([piece] + pending))
            pending = []
        else:
            pending.append(piece)
    if pending and parts:
        parts[-1] = " ".join([parts[-1]] + pending)
    return parts or [" ".join(query.split())]


# "Ana's phone number", "Hattie's surname": a name and the attribute of theirs asked
# (typed in lower case too: "callum's email"; not a wh-word or pronoun with "is")
POSSESSIVE_RE = re.compile(r"(?<![\w'-])(?!(?:what|who|where|when|how|why|which|that|there|it|"
                           r"he|she|let|here)'s)[^\W\d_][\w-]*'s\s+((?:[\w-]+\s*){1,3})",
                           re.I)
# "which airline", "who's my physio", "what's my blood type": the role or attribute asked
FOCUS_RE = re.compile(r"\b(?:which|what|who|whose|whom)(?:'s)?\s+((?:[\w'-]+\s*){1,4})",
                      re.IGNORECASE)
FOCUS_SKIP = frozenset("is are was were the my her his their our your its a an s".split())


def focus_terms(question: str, names=frozenset()) -> tuple:
    """The words a question asks about right after its wh-word and a copula ("which
    airline", "who's my physio", "what is the fee"; not "what did I run", which asks
    about a verb): the first words up to a stopword, without the question's own names,
    its kind-of-value words (number, name, time, cost ...) and its time words; `names`
    are the terms of the question's own names."""
    q = question.replace("\u2019", "'")
    q = HOW_RE.sub(" ", TIME_PHRASE_RE.sub(" ", q.lower()))
    out = []
    for m in FOCUS_RE.finditer(q):
        words = m.group(1).split()
        while words and words[0].strip("'") in FOCUS_SKIP:
            words.pop(0)
        for w in words:
            if w in STOPWORDS or w in FOCUS_SKIP:
                break
            if _asks_kind(w):
                continue
            out += [t for t in terms(w) if t not in names
                    and t not in TIME_WORDS and not t[0].isdigit()]
    return tuple(dict.fromkeys(out))


def _asks_kind(word: str) -> bool:
    """The word asks for a kind of value ("number", "cost", "time"), not a topic."""
    return any(rx.search(word) for rx, _ in KIND_CUES)


def _owned(q: str) -> tuple:
    """The attribute terms a possessive asks of someone ("Ana's phone number": phone):
    the words after "'s" up to a stopword, less kind and time words. Of one part of a
    question: "Gemma's phone and who runs her diary?" asks the second part no phone."""
    owned = []
    for m in POSSESSIVE_RE.finditer(q):
        for w in m.group(1).split():
            if w.lower() in STOPWORDS:
                break
            if not _asks_kind(w.lower()):
                owned += [t for t in terms(w) if t not in TIME_WORDS]
    return tuple(dict.fromkeys(owned))


@functools.lru_cache(maxsize=4096)
def analyse(question: str) -> Ask:
    """The Ask of a question. Each part asks for its own kinds of value about the
    question's whole topic (a part's own words are often only "their phone number")."""
    q = question.replace("\u2019", "'")
    names = frozenset(t for w in re.findall(r"[^\W\d_][\w'-]*", q)[1:]
                      if w[0].isupper() and not month_term(w) for t in terms(w))
    pieces = question_parts(q)
    whole = _topic(q) + tuple(sorted(number_keys(q) - {""}))
    parts = tuple(Ask(whole, _kinds(p.lower()), names, focus=focus_terms(p, names),
                      owned=_owned(p)) for p in pieces)
    return Ask(whole, _kinds(q.lower()), names, parts if len(parts) > 1 else (),
               bool(LIST_RE.search(q.lower())), focus_terms(q, names),
               _owned(q) if len(parts) < 2 else ())


NUMERIC_KINDS = frozenset({"money", "measure", "number", "duration", "clock", "percent"})
WORD_KINDS = ("name", "date", "place", "clock")   # read in the whole text, digits or not
# Digits that tell when, not how much: a day of the month ("Monday 23 March", "the
# 16th") or a clock time ("5pm", "09:40"). They are no amount, count or
# measure: a question asking one of those is not answered by a date.
DAY_DIGITS_RE = re.compile(VALUE_RES["date"].pattern + r"|\b\d{1,2}(?:st|nd|rd|th)\b", re.I)
# (VALUE_RES["clock"] less "5.50": blanked digits there would unmake the price "£5.50")
CLOCK_DIGITS_RE = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b|\b\d{1,2}\s?(?:am|pm)\b", re.I)


def _when_spans(text: str, kinds) -> list[tuple[int, int]]:
    """Spans of the dates and clock times in text that the kinds do not ask for (a
    date is asked by "date", a clock time by "clock" or "duration": "24:12" run time)."""
    out = []
    if kinds and "date" not in kinds:
        out += [m.span() for m in DAY_DIGITS_RE.finditer(text)]
    if kinds and not kinds & {"clock", "duration"}:
        out += [m.span() for m in CLOCK_DIGITS_RE.finditer(text)]
    return out


def value_tokens(text: str, kinds) -> tuple[tuple[str, ...], frozenset]:
    """The tokens of a text and the indices of those that are values of the kinds
    (no kind asked: numbers and names inside it; digits of an unasked date or clock
    time are none)."""
    return _value_tokens(text, frozenset(kinds))


@functools.lru_cache(maxsize=1 << 16)
def _value_tokens(text: str, kinds: frozenset) -> tuple[tuple[str, ...], frozenset]:
    ms = list(TOKEN_RE.finditer(text))
    toks = [m.group() for m in ms]
    if kinds and not kinds & NUMERIC_KINDS:       # a date asked: "Year 10" is no date
        dates = [m.span() for m in DAY_DIGITS_RE.finditer(text)] if "date" in kinds else []
        starts, ends = [0] + [e for _, e in dates], [b for b, _ in dates] + [len(text)]
        spans = list(zip(starts, ends))           # every digit outside a date
    else:
        spans = _when_spans(text, kinds)
    return tuple(toks), frozenset(
        i for i, m in enumerate(ms) if _value_at(toks, i, kinds) and not (
            m.group()[0].isdigit() and any(a <= m.start() < b for a, b in spans)))


def holds(text: str, kinds) -> float:
    """1 when the text holds a value of one of the kinds (no kind asked: any specific,
    a number, a name inside the sentence or a "key: value"); PARTIAL_CREDIT for a bare
    number when a kind of number was asked ("The rent is 1200" for money); else 0.
    Digits of a date or clock time not asked for are no number here."""
    spans = _when_spans(text, kinds)
    amounts = text
    for a, b in sorted(spans, reverse=True):
        amounts = amounts[:a] + " " * (b - a) + amounts[b:]
    digit = re.search(r"\d", amounts) is not None
    if not kinds:
        return float(digit or bool(VALUE_RES["name"].search(text) or KEY_RE.match(text)))
    if any(VALUE_RES[k].search(text if k in WORD_KINDS else amounts)
           for k in kinds if digit or k in WORD_KINDS):
        return 1.0
    return PARTIAL_CREDIT if digit and kinds & NUMERIC_KINDS else 0.0


def _value_at(toks: list[str], i: int, kinds) -> bool:
    """Token i is a value of one of the kinds (no kind: a number or a name); the
    callers drop digits of unasked dates and clock times (value_tokens)."""
    tok = toks[i]
    if tok[0].isdigit():
        return not kinds or bool(kinds - {"name", "place"})
    if "place" in kinds and i and toks[i - 1].lower() in LOCATIVE:
        return True
    if "date" in kinds and (month_term(tok) or re.fullmatch(_DAY, tok.lower())):
        return True                     # "Friday", "November" as well as "november"
    return tok[0].isupper() and i > 0 and (not kinds or bool(kinds & {"name", "place"}))


def weights_for(ask: Ask, docs, idf=None) -> dict[str, float]:
    """IDF weight per asked term, from the corpus table `idf` when given, else over
    `docs` (term sets); a name no doc uses is dropped (the owner, or someone unknown)."""
    n, out = len(docs), {}
    seen = set().union(*docs) if docs else set()
    for t in ask.terms:
        if t in ask.names and not any(_match(t, d) for d in docs):
            continue
        if idf:
            fam = {p for p in _related_words(t, seen) & seen if p in idf} | ({t} & idf.keys())
            w = min((idf[p] for p in fam), default=max(idf.values(), default=1.0))
        else:
            df = sum(_match(t, d) > 0 for d in docs)
            w = float(np.log(1 + (n + 1) / (df + 1)))
        out[t] = float(w) + IDF_FLOOR
    return out


def term_share(weights: dict, tset) -> float:
    """The weighted share of the terms of `weights` that tset names (related forms count
    PARTIAL_CREDIT)."""
    total = sum(weights.values())
    return sum(w * _match(t, tset) for t, w in weights.items()) / total if total else 0.0


class _Scorer:
    """The features of units for one Ask and its term weights. Each asked term's
    related words (PARTIAL_CREDIT) are found once among `vocab`, the words of every
    text it will score; shares are memoised per term set (units share their heading)."""

    def __init__(self, ask: Ask, weights: dict, vocab=None):
        self.ask, self.weights = ask, weights
        self.total = sum(weights.values()) or 1.0
        self.vocab = frozenset(vocab) if vocab is not None else None
        self.related = {t: frozenset(_related_words(t, vocab) & self.vocab) - {t}
                        for t in weights} if vocab is not None else None
        self.shares: dict = {}

    def _match(self, t: str, tset) -> float:
        if t in tset:
            return 1.0
        if self.related is None or not tset <= self.vocab:
            return _match(t, tset)
        return PARTIAL_CREDIT if not self.related[t].isdisjoint(tset) else 0.0

    def share(self, tset) -> float:
        if tset not in self.shares:
            self.shares[tset] = sum(w * self._match(t, tset)
                                    for t, w in self.weights.items()) / self.total
        return self.shares[tset]

    def credits(self, tset) -> dict:
        """word -> the largest share of the asked weight an asked term gives it, for
        the words of tset that match an asked term (itself or a related form)."""
        out: dict = {}
        for t, w in self.weights.items():
            rel = (self.related[t] & tset if self.related is not None and tset <= self.vocab
                   else _related_words(t, tset) & tset)
            for x in rel | ({t} & tset):
                c = w * (1.0 if x == t else PARTIAL_CREDIT) / self.total
                if c > out.get(x, 0.0):
                    out[x] = c
        return out

    def nearness(self, text: str, tset, head=frozenset()) -> float:
        """max over asked words a and values v of the asked kind in the text:
        (a's share of the asked weight) / (tokens from a to v); 0 if none. The asked
        words of its label stand just before the text: the heading, which labels its
        lines as a table header labels its cells, or in a note of bare bullets without
        one, the title (label_terms)."""
        credit = self.credits(tset)
        top = max(self.credits(head).values(), default=0.0) if head else 0.0
        if not credit and not top:
            return 0.0
        toks, valued = value_tokens(text, self.ask.kinds)
        at = [(i, c) for i, tok in enumerate(toks) if not tok[0].isdigit()
              and (c := credit.get(_stem(tok.lower()), 0.0)) > 0] + ([(-1, top)] if top else [])
        asked = {i for i, _ in at}          # an asked word is no value of itself
        vals = sorted(valued - asked)
        return max((c / abs(i - j) for i, c in at for j in vals), default=0.0)

    def features(self, unit: str, heading: str, title: str) -> list[float]:
        """The six evidence features of a unit (FEATURES without rank and latest)."""
        own, head, path = evidence_terms(unit), evidence_terms(heading), evidence_terms(title)
        return [self.share(own), self.share(head), self.share(path),
                self.share(own | head | path), holds(unit, self.ask.kinds),
                self.nearness(unit, own, evidence_terms(label(heading, title)))]


def evidence(f) -> float:
    """The logit of a unit's evidence features (no rank, no status)."""
    return (READER_BIAS + W_TEXT * f[0] + W_HEADING * f[1] + W_TITLE * f[2]
            + W_COVER * f[3] + W_TYPE * f[4] + W_NEAR * f[5])


def _sigmoid(z: float) -> float:
    return float(1.0 / (1.0 + np.exp(-z)))


def _choice_features(text: str) -> set[str]:
    toks = [_stem(t) for t in tokenize(text)]
    return set(toks) | {f"{a}_{b}" for a, b in zip(toks, toks[1:])}


class BuiltinJudge:
    """Relevance (the reader's best unit), support and choice, without a model."""

    name = "builtin"
    model = JUDGE_MODEL

    def relevance(self, query, passages, stage="rerank", ledger=None, idf=None):
        """P(passage helps answer query) per key: sigmoid(best evidence - ABSTAIN_LOGIT)."""
        return {k: max(ps) for k, ps in
                self.relevance_by_part(query, passages, stage, ledger, idf).items()}

    def evidence(self, query, passages, idf=None) -> dict:
        """Per key: [best evidence logit for the question, for part 1, part 2, ...]."""
        ask = analyse(query)
        docs = {k: evidence_terms(" ".join(str(p.get(f, "")) for f in ("text", "heading",
                                                                        "path")))
                for k, p in passages.items()}
        vocab, out = set().union(*docs.values()) if docs else set(), {}
        for a in (ask,) + ask.parts:
            sc = _Scorer(a, weights_for(a, list(docs.values()), idf), vocab)
            for k, p in passages.items():
                units = split_units(p.get("text", "")) or ("",)
                out.setdefault(k, []).append(max(
                    evidence(sc.features(u, p.get("heading", ""), p.get("path", "")))
                    for u in units))
        return out

    def relevance_by_part(self, query, passages, stage="rerank", ledger=None, idf=None):
        """Per key: [P(whole question), P(part 1), ...] (the parts only when several)."""
        started = time.perf_counter()
        out = {k: [_sigmoid(z - ABSTAIN_LOGIT) for z in zs]
               for k, zs in self.evidence(query, passages, idf).items()}
        text = query + "".join(p.get("text", "") for p in passages.values())
        _record(ledger, stage, "builtin", JUDGE_MODEL, started, count_tokens(text))
        return out

    def support(self, claims, stage="verify", ledger=None):
        """P(the sources state the sentence): the share of its words the sources hold,
        halved by the share of its numbers they lack (every number must be there)."""
        started = time.perf_counter()
        out, size = {}, 0
        for key, c in claims.items():
            sentence = re.sub(r"\[[cC]\d[^\]]*\]", " ", c["sentence"])
            sources = "\n".join(c.get("sources", []))
            size += count_tokens(sentence) + count_tokens(sources)
            sterms = {t for t in terms(sentence) if not t[0].isdigit()}
            tset = set(terms(sources))
            cov = (sum(_match(t, tset) for t in sterms) / len(sterms)) if sterms else 1.0
            nums = number_keys(sentence)
            share = len(nums & number_keys(sources)) / len(nums) if nums else 1.0
            out[key] = cov if share == 1.0 else cov * share / 2
        _record(ledger, stage, "builtin", JUDGE_MODEL, started, size)
        return out

    def choose(self, text, options, stage="route", ledger=None):
        """The option whose description shares most (IDF-weighted) words with text."""
        started = time.perf_counter()
        feats = _choice_features(text)
        opt = {name: _choice_features(desc) for name, desc in options.items()}
        scores = {name: sum(float(np.log(1 + len(opt) / sum(f in o for o in opt.values())))
                            for f in feats & of) for name, of in opt.items()}
        z = np.array(list(scores.values()))
        p = np.exp(z - z.max())
        p /= p.sum()
        probs = {name: float(v) for name, v in zip(scores, p)}
        choice = max(probs, key=lambda k: probs[k])  # first of equals: option order
        _record(ledger, stage, "builtin", JUDGE_MODEL, started,
                count_tokens(text + "".join(options.values())))
        return choice, probs[choice], probs


# --------------------------------------------------------------- builtin writer
# Extractive: reads the prompt generate.build_messages writes (the format constants live
# here so that models never imports a stage module), cites the reader's best units.

ABSTAIN_SENTENCE = "I don't know from my notes."    # generate.ABSTAIN
PROMPT_NOTES = "Notes:"
PROMPT_MODE = "Time mode:"
PROMPT_QUESTION = "Question:"
PROMPT_RULES_HEAD = "Rules:"   # heads the rules after the notes in the "rules-last" form
NOTE_HEADER = "[{id}] path: {path} | section: {section} | date: {date} | {status}"
NOTE_HEADER_RE = re.compile(
    r"^\[c?(\d+)\] path: (.*?) \| section: (.*?) \| date: (\S+) \| (.+)$")
UNDATED = "undated"
STATUS_LATEST = "latest"
STATUS_OLDER = "older version"       # "older version, superseded by PATH" when known
STATUS_OLDER_ENTRY = "older entry"   # an older dated section of a log
SUPERSEDED_MARK = ", superseded by "  # status suffix naming the newer version (generate)
LOG_ENTRY_MARK = " @ "               # "path @ date": a newer entry of the same log
MAX_SENTENCES = 5
REPLACES = "; this replaces the statement in {title} ({date}) [{id}]"


def parse_prompt(prompt: str) -> tuple[str, str, list[dict]]:
    """(question, time mode, notes) from a build_messages user message; the last
    "Question:" and "Time mode:" lines count, notes are everything before them."""
    lines = prompt.splitlines()
    qi = max((i for i, ln in enumerate(lines) if ln.startswith(PROMPT_QUESTION)), default=None)
    mi = max((i for i, ln in enumerate(lines) if ln.startswith(PROMPT_MODE)), default=None)
    question = lines[qi][len(PROMPT_QUESTION):].strip() if qi is not None else ""
    mode = lines[mi][len(PROMPT_MODE):].strip().lower() if mi is not None else "any"
    end = min([i for i in (qi, mi) if i is not None], default=len(lines))
    notes: list[dict] = []
    for line in lines[:end]:
        if line == PROMPT_RULES_HEAD:
            break
        m = NOTE_HEADER_RE.match(line)
        if m:
            section = "" if m.group(3) == "-" else m.group(3)
            notes.append({"id": f"c{m.group(1)}", "path": m.group(2), "section": section,
                          "date": m.group(4), "status": m.group(5), "order": len(notes),
                          "text": ""})
        elif notes:
            notes[-1]["text"] += line + "\n"
    return question, mode, notes


@dataclass(eq=False)
class _Unit:
    note: dict
    text: str
    at: int               # position in its note
    f: list               # the five evidence features
    ev: float             # evidence logit
    score: float          # evidence plus rank and status: the writer's order
    named: frozenset      # asked terms it names (itself or in its label_terms)
    fits: bool = True     # for "Ana's phone number": it or its heading names the phone

    @property
    def answers(self) -> bool:
        """It holds a value of the asked kind near an asked term, and fits the question."""
        return self.f[4] > 0 and self.f[5] > 0 and self.fits


def label(heading: str, title: str) -> str:
    """What labels a line: its heading trail, else (a note without headings) its title."""
    return heading if heading.strip() else title


def label_terms(note: dict) -> frozenset:
    """The terms of what labels a note's lines (label)."""
    return evidence_terms(label(note["section"], note["path"]))


def unit_rows(ask: Ask, notes: list[dict]) -> list[_Unit]:
    """Every unit of every note, scored for `ask` (IDF over the notes, as the judge's
    is over documents: a topic word every kept note shares still weighs)."""
    raw = [(note, i, u) for note in notes for i, u in enumerate(split_units(note["text"]))]
    docs = [evidence_terms(f"{n['text']} {n['section']} {n['path']}") for n in notes]
    w = weights_for(ask, docs)
    sc = _Scorer(ask, w, set().union(*docs) if docs else set())
    out = []
    for note, i, u in raw:
        f = sc.features(u, note["section"], note["path"])
        ev = evidence(f)
        rank = 1.0 / (1 + note["order"])
        latest = float(note["status"] == STATUS_LATEST)
        own = evidence_terms(u) | evidence_terms(note["section"])
        out.append(_Unit(note, u, i, f, ev, ev + W_RANK * rank + W_LATEST * latest,
                         frozenset(t for t in w if _match(t, own | label_terms(note))),
                         all(_match(t, own) for t in ask.owned)))   # a field, not a title
    return out


def _best(units: list[_Unit]) -> _Unit:
    return max(units, key=lambda u: (u.score, -u.note["order"], -u.at))


def _values(u: _Unit, kinds) -> set[str]:
    """The values of the asked kinds a unit states (numbers canonical, names lowercased)."""
    toks, valued = value_tokens(u.text, kinds)
    return {number_key(toks[i]) if toks[i][0].isdigit() else toks[i].lower() for i in valued}


def values(text: str) -> set[str]:
    """What a sentence states: its numbers and the terms of its capitalised names."""
    return number_keys(text) | {t for m in VALUE_RES["name"].findall(text) for t in terms(m)}


def _document(note: dict) -> str:
    """The document a note is a version of: the path its status says supersedes it
    (a log's newer entry: the log itself), else its own path."""
    _, _, newer = note["status"].partition(SUPERSEDED_MARK)
    return newer.split(LOG_ENTRY_MARK)[0].strip() if newer else note["path"]


def _newest(lead: _Unit, units: list[_Unit], ask: Ask) -> tuple[_Unit, _Unit | None]:
    """Present mode: units of other documents that answer, name every asked term the
    lead names and state other values of the asked kind: the newest dated one wins
    (undated never does). A question asking no kind of value ("what worktop are we
    having?") has no value a newer line could replace: a date or sum in a later note is
    no newer worktop. (The answer's unit, the one it replaces or None.)"""
    kinds = ask.kinds
    if not kinds:
        return lead, None
    mine = _values(lead, kinds)
    rivals = [u for u in units if u.answers and holds(u.text, kinds)
              and not INSTRUCTION_RE.search(u.text)     # no newer statement, an injection
              and _document(u.note) != _document(lead.note) and lead.named <= u.named
              and _values(u, kinds) and not _values(u, kinds) <= mine]
    dated = [u for u in rivals + [lead] if u.note["date"] != UNDATED]
    if not dated:
        return lead, None
    win = max(dated, key=lambda u: (u.note["date"], u is lead, u.score))
    return (lead, None) if win is lead else (win, lead)


def _older(w: _Unit, u: _Unit) -> bool:
    """w's note is an older version or entry, or dated before u's note."""
    dated = UNDATED not in (w.note["date"], u.note["date"])
    return w.note["status"] != STATUS_LATEST or dated and w.note["date"] < u.note["date"]


def _without_superseded(u: _Unit, units: list[_Unit], kinds) -> str:
    """Present mode: u's text cut before the first value (of the asked kinds, else a
    number or name) that only older notes (versions, entries, or notes dated before
    u's) naming something asked state, when what stays still states a value: a
    present answer does not repeat a superseded value ("now X instead of Y")."""
    kinds = kinds or frozenset({"number", "name", "date"})
    older = set().union(*(_values(w, kinds) for w in units if _older(w, u) and w.named))
    newer = set().union(*(_values(w, kinds) for w in units
                          if not _older(w, u) and w.note is not u.note))
    stale = older - newer - set(terms(u.note["section"]))
    toks = list(TOKEN_RE.finditer(u.text))
    valued = value_tokens(u.text, kinds)[1]
    for i, m in enumerate(toks):
        key = number_key(m.group()) if m.group()[0].isdigit() else m.group().lower()
        if i and key in stale and i in valued:
            words = [t.group() for t in toks[:i]]
            while words and words[-1].lower() in STOPWORDS:
                words.pop()
            cut = u.text[:toks[len(words) - 1].end()] if words else ""
            return cut if words and holds(cut, kinds) else u.text
    return u.text


def _cite(u: _Unit, replaced: _Unit | None = None, text: str | None = None) -> str:
    out = f"{(text or u.text).strip().rstrip(' .;,')} [{u.note['id']}]"
    if replaced is not None:
        title = replaced.note["path"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
        out += REPLACES.format(title=title, date=replaced.note["date"],
                               id=replaced.note["id"])
    return out + "."


def _current(question: str, mode: str, notes: list[dict]) -> list[str]:
    """present / any: the best unit of each part asked, in order (present: the newest
    statement of it); a list question: every answering line of the best unit's note."""
    ask = analyse(question)
    picked: list = []
    for part in ask.parts or (ask,):
        units = unit_rows(part, notes)
        best, old = _best([u for u in units if u.answers] or units), None
        if mode == "present":
            best, old = _newest(best, units, part)
        said = set().union(*(values(v.text) for v, _ in picked))
        if picked and values(best.text) <= said:         # each part a value of its own
            rest = [u for u in units if u.answers and not values(u.text) <= said]
            best, old = (_best(rest), None) if rest else (best, None)
        if (best.answers or not picked) and best.text not in {u.text for u, _ in picked}:
            picked.append((best, old))
        if ask.is_list and len(picked) == 1:
            lead = picked[0][0]
            picked += [(u, None) for u in units if u.note is lead.note and u is not lead
                       and u.answers]
            picked.sort(key=lambda p: p[0].at)
    cut = (lambda u: _without_superseded(u, unit_rows(ask, notes), ask.kinds)
           if mode == "present" else u.text)
    return [_cite(u, o, cut(u)) for u, o in picked[:MAX_SENTENCES]]


def _key(u: _Unit) -> str:
    """The key of a "key: value" line ("Retainer: £2,400" -> "retainer"), else ""."""
    m = KEY_RE.match(u.text)
    return " ".join(terms(m.group(1))) if m else ""


ROW_DATE_RE = re.compile(r"^(?:[^:;]{1,20}:\s*)?(\d{4}-\d{2}-\d{2})\b")


def _when(u: _Unit) -> str:
    """The date a unit speaks for: a row or line that opens with its own date ("Date:
    2026-04-04; Time: 24:12", "2026-05-02: 16 km") in a table or log, else its note's."""
    m = ROW_DATE_RE.match(u.text)
    return m.group(1) if m else u.note["date"]


def _history(question: str, notes: list[dict]) -> list[str]:
    """One line per version of the document whose versions answer best (the sum over
    its versions of P(best unit); a table row or log line opening with its own date is
    a version of its note, _when), oldest first, each the version's best unit (a line
    with the "key:" most versions have first, then one stating a new value); then, when
    a kind of value is asked, units of other notes that answer, name what the lead names
    and state such a value no line states. Past MAX_SENTENCES: the oldest, the newest
    and the strongest between."""
    ask = analyse(question)
    units = unit_rows(ask, notes)
    docs: dict = {}
    for u in units:
        if u.answers:
            per = docs.setdefault(_document(u.note), {})
            key = (_when(u), u.note["path"])
            per[key] = max(per.get(key, 0.0), _sigmoid(u.score))
    doc = (max(docs, key=lambda d: sum(docs[d].values())) if docs
           else _document(_best(units).note))
    lead = _best([u for u in units if _document(u.note) == doc])
    versions: dict = {}
    for u in units:
        if _document(u.note) == doc and u.named:
            versions.setdefault((_when(u), u.note["path"]), []).append(u)
    counts: dict = {}        # the "key:" most versions state: the line that changed;
    top: dict = {}           # of keys as common, the one whose line answers best
    for us in versions.values():
        for k in {_key(u) for u in us if u.answers and _key(u)}:
            counts[k] = counts.get(k, 0) + 1
            top[k] = max(top.get(k, -np.inf), max(u.score for u in us if _key(u) == k))
    common = max(counts, key=lambda k: (counts[k], top[k], k)) if counts else ""
    lines, seen = [], set()
    for key in sorted(versions):
        best = max(versions[key], key=lambda u: (u.answers, bool(common) and _key(u) == common,
                                                 bool(_values(u, ask.kinds) - seen), u.score))
        lines.append(best)
        seen |= _values(best, ask.kinds)
    others: dict = {}
    for u in units:
        if (_document(u.note) != doc and u.answers and lead.named <= u.named
                and ask.kinds and holds(u.text, ask.kinds) == 1.0
                and u.note["date"] != UNDATED and _values(u, ask.kinds) - seen):
            key = (u.note["path"], u.note["date"])
            if key not in others or u.score > others[key].score:
                others[key] = u
    lines += list(others.values())
    if len(lines) > MAX_SENTENCES:
        lines.sort(key=lambda u: (_when(u), u.note["order"]))
        middle = sorted(lines[1:-1], key=lambda u: -u.score)[:MAX_SENTENCES - 2]
        lines = [lines[0]] + [u for u in lines[1:-1] if u in middle] + [lines[-1]]
    lines.sort(key=lambda u: (_when(u) if _when(u) != UNDATED else "9999", u.note["order"]))
    return [_cite(u) if ROW_DATE_RE.match(u.text) else     # the row states its date
            f"{'Undated' if _when(u) == UNDATED else 'On ' + _when(u)}: {_cite(u)}"
            for u in lines]


def states_asked(question: str, notes: list[dict]) -> bool:
    """Some unit of the notes holds a value of a kind asked (by the question or one of
    its parts) near an asked term: the writer abstains when none does (the gate,
    before it, has weighed the same evidence against ABSTAIN_LOGIT)."""
    ask = analyse(question)
    return any(u.answers for a in (ask,) + ask.parts for u in unit_rows(a, notes))


def extract_answer(question: str, mode: str, notes: list[dict]) -> str:
    """The cited extractive answer, or ABSTAIN_SENTENCE when no unit answers."""
    if not question.strip() or not states_asked(question, notes):
        return ABSTAIN_SENTENCE
    lines = _history(question, notes) if mode == "history" else _current(question, mode,
                                                                         notes)
    return " ".join(lines)


class BuiltinWriter:
    """Extractive writer: cited sentences of the notes, never new facts."""

    name = "builtin"
    model = WRITER_MODEL

    def write(self, messages, stage="generate", ledger=None):
        started = time.perf_counter()
        user = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        question, mode, notes = parse_prompt(user)
        text = extract_answer(question, mode, notes)
        inp = sum(count_tokens(m["content"]) for m in messages)
        out = count_tokens(text)
        _record(ledger, stage, "builtin", WRITER_MODEL, started, inp, out)
        return text, inp, out


# ------------------------------------------------------------------------ ollama
# (section owned by the backends developer: OllamaEmbedder, OllamaJudge, OllamaWriter)
# The `ollama` client does the HTTP (imported on first use); _Ollama.call turns each of its
# failures into one BackendError line naming the fix.

import json  # noqa: E402  (imports of the backend sections)
import os  # noqa: E402

OLLAMA_DEFAULT_HOST = "http://127.0.0.1:11434"  # or $OLLAMA_HOST
OLLAMA_TIMEOUT = 120.0        # seconds per request (a cold model load is slow)
OLLAMA_PROBE_TIMEOUT = 1.0    # seconds for auto selection's look at /api/tags
OLLAMA_CONCURRENCY = 4        # judge requests in flight when each item needs its own
OLLAMA_RETRIES = 1            # extra tries after a 5xx or a connection broken mid-reply
EMBED_MODEL = "nomic-embed-text"  # or $VERSO_EMBED_MODEL
EMBED_BATCH = 32              # inputs per /api/embed request
EMBED_CONTEXT = 2048          # tokens, when /api/show names no <arch>.context_length
EMBED_CHARS_PER_TOKEN = 3     # conservative (English runs ~4): we cut at context * 3 chars
DOC_PREFIX, QUERY_PREFIX = "search_document: ", "search_query: "
WRITE_MODEL = "verso-writer"  # or $VERSO_WRITE_MODEL; built from ./Modelfile
WRITE_SEED = 42
WRITE_NUM_CTX = 8192          # the Modelfile's num_ctx; sent with every chat request
WRITE_MAX_TOKENS = 400        # reply tokens (5 sentences are ~150): num_predict, kept free
WRITE_CHARS_PER_TOKEN = 3.0   # until the server has counted a prompt of ours
DECISION_MODEL = "d1-omni:600m"  # or $VERSO_DECISION_MODEL: System One judge, if pulled
JUDGE_TOP_LOGPROBS = 5
PASSAGE_FIELDS = ("path", "heading", "date", "text")
JUDGE_SYSTEM = "You are a strict judge of notes. Answer with exactly one word."
RELEVANCE_PROMPT = ("Query: {query}\n\nPassage ({path}, {date}) {heading}:\n{text}\n\n"
                    "Does the passage state something that helps answer the query? "
                    "Answer yes or no.")
SUPPORT_PROMPT = ("Sources:\n{sources}\n\nSentence: {sentence}\n\nDo the sources state "
                  "every fact in the sentence (numbers, names, dates)? Answer yes or no.")
CHOICE_PROMPT = "{text}\n\nOptions:\n{options}\n\nAnswer with the letter of the best option."
# The batched judge: one request per stage, the query first (a prefix the server can
# reuse), every item numbered, a 0-10 score per item forced by a JSON schema (`format`).
JUDGE_BATCH = False           # or $VERSO_JUDGE_BATCH=1; default from the README's figures
BATCH_SCALE = 10              # scores 0..10, read as P = score / 10
BATCH_RELEVANCE = ("Query: {query}\n\nRate how much each numbered passage below states "
                   "something that helps answer the query: 0 (nothing) to 10 (it states the "
                   "answer).\n\n{items}\n\nReply with a JSON object giving every passage "
                   "number its score.")
BATCH_SUPPORT = ("Rate how fully the sources of each numbered sentence below state every "
                 "fact in it (numbers, names, dates): 0 (not at all) to 10 (every fact)."
                 "\n\n{items}\n\nReply with a JSON object giving every sentence number its "
                 "score.")
S1_RELEVANCE = 'The passage under key "{key}" in passages helps answer the query.'
S1_SUPPORT = ('The sources of the claim under key "{key}" state every fact in its '
              "sentence (numbers, names, dates).")
S1_CHOICE = "Which option fits the state best?"


def _first_line(e) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:160]


def _tagged(model: str) -> str:
    return model if ":" in model else model + ":latest"


def _bare(model: str) -> str:
    return model.removesuffix(":latest")


def _fix(model: str) -> str:
    return ("ollama create verso-writer -f Modelfile" if _bare(model) == WRITE_MODEL
            else f"ollama pull {model}")


class _Ollama:
    """One ollama.Client with a timeout; the one place its errors become one line."""

    def __init__(self, host=None, timeout=OLLAMA_TIMEOUT):
        import ollama
        self.host = host or os.environ.get("OLLAMA_HOST") or OLLAMA_DEFAULT_HOST
        self.timeout, self.client = timeout, ollama.Client(host=self.host, timeout=timeout)

    def call(self, method, what, passthrough=(), **kw):
        import httpx
        import ollama
        model = kw.get("model", "")
        for attempt in range(OLLAMA_RETRIES + 1):
            last = attempt == OLLAMA_RETRIES
            try:
                return getattr(self.client, method)(**kw)
            except ConnectionError:  # the client's own: nothing listens at host
                raise BackendError(f"Ollama is not answering at {self.host}: start it with "
                                   "`ollama serve`") from None
            except httpx.TimeoutException:
                raise BackendError(f"Ollama at {self.host} sent no {what} reply from {model} "
                                   f"within {self.timeout:g} s: check `ollama ps`") from None
            except ollama.ResponseError as e:
                status, err = e.status_code, _first_line(e.error)
                if status in passthrough:
                    raise
                if status == 404:
                    raise BackendError(f"Ollama has no model {model!r} ({err}): run "
                                       f"`{_fix(model)}`") from None
                if "does not support" in err:
                    raise BackendError(f"Ollama model {model!r} cannot {what} ({err}): name "
                                       f"another model or run `{_fix(model)}`") from None
                if status < 500 or last:
                    raise BackendError(f"Ollama {what} with {model} failed ({status}: "
                                       f"{err})") from None
            except httpx.TransportError as e:  # the connection broke mid-reply
                if last:
                    raise BackendError(f"Ollama at {self.host} broke off the {what} reply "
                                       f"({_first_line(e)}): see the server log") from None
            except ValueError as e:  # invalid JSON, or JSON of the wrong shape
                raise BackendError(f"Ollama sent a malformed {what} reply from {model}: "
                                   f"{_first_line(e)}") from None


def _model_info(api, model) -> tuple[dict, str]:
    """(model_info, parameters) from /api/show: what the server says the model is."""
    r = api.call("show", "show", model=model)
    return dict(r.modelinfo or {}), r.parameters or ""


def _info_int(info: dict, field: str) -> int | None:
    """model_info's "<arch>.<field>" (embedding_length, context_length), if given."""
    v = info.get(f"{info.get('general.architecture', '')}.{field}")
    return int(v) if isinstance(v, (int, float)) and v > 0 else None


class OllamaEmbedder:
    """Vectors from /api/embed in batches; texts cut by us (never by the server) to fit."""

    name = "ollama"

    def __init__(self, model=None, host=None, timeout=OLLAMA_TIMEOUT, dim=None,
                 context=None):
        self.model = model or os.environ.get("VERSO_EMBED_MODEL") or EMBED_MODEL
        self.id, self.api = "ollama:" + _bare(self.model), _Ollama(host, timeout)
        self._dim, self.truncated, self.context = dim, 0, context

    def _show(self) -> None:
        """Dimension and context size as /api/show gives them (asked once)."""
        info, _ = _model_info(self.api, self.model)
        self._dim = self._dim or _info_int(info, "embedding_length")
        self.context = self.context or _info_int(info, "context_length") or EMBED_CONTEXT

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._show()
        if self._dim is None:  # the server does not say: ask the model once
            self._embed([QUERY_PREFIX + "dimension"], None, "probe")
        return self._dim

    @property
    def max_chars(self) -> int:
        if self.context is None:
            self._show()
        return self.context * EMBED_CHARS_PER_TOKEN

    @property
    def note(self) -> str:
        return self.truncated and (f"{self.truncated} text(s) cut to {self.max_chars} "
                                   f"characters to fit {self.model}'s context") or ""

    def _fit(self, prefix: str, text: str) -> str:
        if len(prefix) + len(text) > self.max_chars:
            self.truncated += 1
            text = text[:self.max_chars - len(prefix)]
        return prefix + text

    def _embed(self, texts, ledger, stage) -> np.ndarray:
        started, tokens, rows = time.perf_counter(), 0, []
        for s in range(0, len(texts), EMBED_BATCH):
            batch = texts[s:s + EMBED_BATCH]
            r = self.api.call("embed", "embed", model=self.model, input=batch, truncate=False)
            self._dim = self._dim or len(r.embeddings[0] if r.embeddings else [])
            bad = {len(v) for v in r.embeddings} - {self._dim}
            if len(r.embeddings) != len(batch) or bad:
                raise BackendError(
                    f"Ollama model {self.model} sent {len(r.embeddings)} vectors of "
                    f"{bad.pop() if bad else self._dim} dimensions for {len(batch)} texts, "
                    f"expected {self._dim}: if the model changed, run `python ingest.py "
                    "VAULT --rebuild`")
            rows.extend(r.embeddings)
            tokens += r.prompt_eval_count or 0
        m = np.asarray(rows, dtype=np.float32).reshape(len(texts), self._dim)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        if not norms.all():
            raise BackendError(f"Ollama model {self.model} sent an all-zero vector")
        _record(ledger, stage, "ollama", self.model, started, tokens)
        return m / norms  # [n, dim] float32, L2-normalised

    def embed_documents(self, texts, ledger=None, stage="ingest") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed([self._fit(DOC_PREFIX, t) for t in texts], ledger, stage)

    def embed_query(self, text, ledger=None, stage="retrieve") -> np.ndarray:
        return self._embed([self._fit(QUERY_PREFIX, text)], ledger, stage)[0]


class OllamaWriter:
    """/api/chat with thinking off, temperature 0 and a fixed seed, not streamed; every
    request names num_ctx (the Modelfile's, from /api/show, within the model's context)
    so that the server's default context never cuts a prompt silently."""

    name = "ollama"

    def __init__(self, model=None, host=None, timeout=OLLAMA_TIMEOUT):
        self.model = model or os.environ.get("VERSO_WRITE_MODEL") or WRITE_MODEL
        self.api, self.last_stats, self._ctx = _Ollama(host, timeout), {}, None
        self.chars_per_token = WRITE_CHARS_PER_TOKEN

    @property
    def num_ctx(self) -> int:
        """num_ctx from the model's parameters (its Modelfile), else WRITE_NUM_CTX; never
        above the model's own context_length."""
        if self._ctx is None:
            info, params = _model_info(self.api, self.model)
            m = re.search(r"(?m)^\s*num_ctx\s+(\d+)", params)
            ctx = int(m.group(1)) if m else WRITE_NUM_CTX
            self._ctx = min(ctx, _info_int(info, "context_length") or ctx)
        return self._ctx

    @property
    def prompt_budget(self) -> int:
        """Characters of prompt that fit num_ctx with WRITE_MAX_TOKENS left for the reply,
        at the fewest characters per token the server has counted for our prompts."""
        return int(max(self.num_ctx - WRITE_MAX_TOKENS, 256) * self.chars_per_token)

    def chat(self, messages, what="chat", options=None, **kw):
        opts = {"temperature": 0, "seed": WRITE_SEED, "num_ctx": self.num_ctx,
                "num_predict": WRITE_MAX_TOKENS, **(options or {})}
        r = self.api.call("chat", what, model=self.model, messages=messages, think=False,
                          stream=False, options=opts, **kw)
        chars = sum(len(m.get("content", "")) for m in messages)
        if getattr(r, "prompt_eval_count", None):   # the server's own count of our prompt
            self.chars_per_token = min(self.chars_per_token, chars / r.prompt_eval_count)
        return r

    def write(self, messages, stage="generate", ledger=None):
        started = time.perf_counter()
        r = self.chat(messages)
        if not (text := (r.message.content or "").strip()):
            raise BackendError(f"Ollama model {self.model} sent an empty reply: try "
                               f"`ollama run {self.model}` to see why")
        inp, out = r.prompt_eval_count or 0, r.eval_count or 0
        self.last_stats = {k.replace("duration", "seconds"): (getattr(r, k) or 0) / 1e9
                           for k in ("total_duration", "load_duration",
                                     "prompt_eval_duration", "eval_duration")}  # ns -> s
        _record(ledger, stage, "ollama", self.model, started, inp, out)
        if ledger is not None:
            ledger.rows[-1]["server_seconds"] = self.last_stats["total_seconds"]
        return text, inp, out


# System One (/v1/systemone on Ollama and Jev): yes/no questions over one shared state.

def _s1_questions(keys, template):
    names = {f"q{i}": k for i, k in enumerate(keys)}
    return ({n: {"type": "noul", "instructions": template.format(key=k)}
             for n, k in names.items()}, names)


def _s1_relevance(query, passages):
    state = {"query": query, "passages": {k: {f: p.get(f) for f in PASSAGE_FIELDS}
                                          for k, p in passages.items()}}
    return (state, *_s1_questions(passages, S1_RELEVANCE))


def _s1_support(claims):
    return ({"claims": {k: {"sentence": c["sentence"], "sources": list(c["sources"])}
                        for k, c in claims.items()}}, *_s1_questions(claims, S1_SUPPORT))


def _s1_nouls(answers, names, who) -> dict:
    try:
        return {k: float(answers[n]["noul"]) for n, k in names.items()}
    except (KeyError, TypeError, ValueError) as e:
        raise BackendError(f"{who} sent a malformed answer set ({_first_line(e)})") from None


def _s1_choice(a, who):
    try:
        return a["choice"], float(a["confidence"]), {k: float(v) for k, v in
                                                     a["probabilities"].items()}
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise BackendError(f"{who} sent a malformed choice ({_first_line(e)})") from None


def _label_probs(top, labels, norm):
    """Softmax over labels of one token's top log-probabilities; a label missing from the
    top gets the smallest logprob seen (its upper bound). None if no label is there."""
    lps: dict = {}
    for tok, lp in top:
        if (key := norm(tok)) in labels:
            lps[key] = float(np.logaddexp(lps.get(key, -np.inf), lp))
    if not lps:
        return None
    v = np.array([lps.get(lab, min(lp for _, lp in top)) for lab in labels])
    p = np.exp(v - v.max())
    return dict(zip(labels, (p / p.sum()).tolist()))


class OllamaJudge:
    """System One on the server when it has it (found out once: a 404 means no), else the
    writer model's one-token yes/no (or option letter) log-probabilities, one request per
    item; with batch, one request per stage (_batch) and per-item requests only for what
    its reply left out."""

    name = "ollama"

    def __init__(self, writer=None, decision_model=None, host=None, timeout=OLLAMA_TIMEOUT,
                 systemone=None, batch=None):
        self.writer = writer or OllamaWriter(host=host, timeout=timeout)
        self.batch = (batch if batch is not None else
                      os.environ.get("VERSO_JUDGE_BATCH", "1" if JUDGE_BATCH else "0") == "1")
        self.decision_model = (decision_model or os.environ.get("VERSO_DECISION_MODEL")
                               or DECISION_MODEL)
        self.systemone, self.note = systemone, ""  # None: not found out yet

    def _s1(self, state, questions, stage, ledger):
        """Answers from /v1/systemone, or None when this server cannot give them."""
        import ollama
        if self.systemone is False:
            return None
        started = time.perf_counter()
        try:
            r = self.writer.api.call("systemone", "judge", model=self.decision_model,
                                     passthrough=(400, 404) if self.systemone is None else (),
                                     state=state, questions=questions)
        except ollama.ResponseError as e:
            self.systemone, self.note = False, (
                f"yes/no logprobs of {self.writer.model}; no System One "
                f"({e.status_code}: {_first_line(e.error)})")
            return None
        self.systemone, self.note = True, f"System One with {self.decision_model}"
        _record(ledger, stage, "ollama", self.decision_model, started,
                r.usage.input_tokens, r.usage.output_tokens)
        return {k: a.model_dump() for k, a in r.answers.items()}

    def _top(self, prompt, n=JUDGE_TOP_LOGPROBS):
        """The first reply token's top log-probabilities [(token, logprob)], what was
        said, and the token counts."""
        r = self.writer.chat([{"role": "system", "content": JUDGE_SYSTEM},
                              {"role": "user", "content": prompt}], what="judge",
                             options={"num_predict": 1}, logprobs=True, top_logprobs=n)
        if not r.logprobs:
            raise BackendError(f"Ollama sent no logprobs for {self.writer.model}: the judge "
                               "needs Ollama >= 0.12.11 (or use --judge builtin)")
        first = r.logprobs[0]
        top = [(t.token, t.logprob) for t in (first.top_logprobs or [first])]
        return top, r.message.content, r.prompt_eval_count or 0, r.eval_count or 0

    def _yes(self, prompt):
        top, said, inp, out = self._top(prompt)
        p = _label_probs(top, ("yes", "no"), lambda t: t.strip().strip(".!").lower())
        if p is None:
            raise BackendError(f"Ollama model {self.writer.model} answered {said!r}, not yes "
                               "or no: use the Modelfile's model or --judge builtin")
        return p["yes"], inp, out

    def _nouls(self, s1, prompts: dict, stage, ledger) -> dict:
        if not prompts:
            return {}
        if s1 is not None and (answers := self._s1(s1[0], s1[1], stage, ledger)) is not None:
            return _s1_nouls(answers, s1[2], "Ollama System One")
        from concurrent.futures import ThreadPoolExecutor   # here: not on the builtin path
        started, keys = time.perf_counter(), list(prompts)
        pool = ThreadPoolExecutor(OLLAMA_CONCURRENCY)  # one request per item, 4 at a time
        try:
            got = list(pool.map(lambda k: self._yes(prompts[k]), keys))
        finally:
            pool.shutdown(cancel_futures=True)
        _record(ledger, stage, "ollama", self.writer.model, started,
                sum(g[1] for g in got), sum(g[2] for g in got))
        return {k: g[0] for k, g in zip(keys, got)}

    def _batch(self, prompt: str, keys: list, stage, ledger) -> dict:
        """One request scoring every key 0..BATCH_SCALE through a JSON schema; a key the
        reply leaves out, or scores out of range, is None (judged one by one instead)."""
        started = time.perf_counter()
        schema = {"type": "object", "required": [str(i) for i in range(1, len(keys) + 1)],
                  "properties": {str(i): {"type": "integer", "minimum": 0,
                                          "maximum": BATCH_SCALE}
                                 for i in range(1, len(keys) + 1)}}
        r = self.writer.chat([{"role": "user", "content": prompt}], what="judge",
                             options={"num_predict": 8 * len(keys) + 16}, format=schema)
        _record(ledger, stage, "ollama", self.writer.model, started,
                r.prompt_eval_count or 0, r.eval_count or 0)
        try:
            got = json.loads(r.message.content or "{}")
        except ValueError:
            got = {}
        out = {}
        for i, k in enumerate(keys, 1):
            v = got.get(str(i)) if isinstance(got, dict) else None
            ok = isinstance(v, (int, float)) and 0 <= v <= BATCH_SCALE
            out[k] = float(v) / BATCH_SCALE if ok else None
        return out

    def _batched(self, prompt, keys, single: dict, stage, ledger) -> dict:
        got = self._batch(prompt, keys, stage, ledger)
        missing = {k: single[k] for k, v in got.items() if v is None}
        return {**got, **self._nouls(None, missing, stage, ledger)}

    def relevance(self, query, passages, stage="rerank", ledger=None) -> dict:
        single = {k: RELEVANCE_PROMPT.format(
            query=query, **{f: p.get(f) or "" for f in PASSAGE_FIELDS})
            for k, p in passages.items()}
        if self.batch and passages and self.systemone is not True:
            items = "\n\n".join(f"[{i}] ({p.get('path') or ''}, {p.get('date') or ''}) "
                                 f"{p.get('heading') or ''}:\n{p.get('text') or ''}"
                                 for i, p in enumerate(passages.values(), 1))
            return self._batched(BATCH_RELEVANCE.format(query=query, items=items),
                                 list(passages), single, stage, ledger)
        return self._nouls(_s1_relevance(query, passages), single, stage, ledger)

    def support(self, claims, stage="verify", ledger=None) -> dict:
        single = {k: SUPPORT_PROMPT.format(
            sentence=c["sentence"], sources="\n".join(f"- {s}" for s in c["sources"]))
            for k, c in claims.items()}
        if self.batch and claims and self.systemone is not True:
            items = "\n\n".join(f"[{i}] Sentence: {c['sentence']}\nSources:\n" + "\n".join(
                f"- {s}" for s in c["sources"]) for i, c in enumerate(claims.values(), 1))
            return self._batched(BATCH_SUPPORT.format(items=items), list(claims), single,
                                 stage, ledger)
        return self._nouls(_s1_support(claims), single, stage, ledger)

    def choose(self, text, options, stage="route", ledger=None):
        q = {"choice": {"type": "choice", "instructions": S1_CHOICE, "criteria": options}}
        if (answers := self._s1(text, q, stage, ledger)) is not None:
            return _s1_choice(answers.get("choice"), "Ollama System One")
        started, keys = time.perf_counter(), list(options)
        letters = [chr(65 + i) for i in range(len(keys))]
        top, said, inp, out = self._top(CHOICE_PROMPT.format(text=text, options="\n".join(
            f"{c}) {k}: {options[k] or k}" for c, k in zip(letters, keys))),
            min(20, max(JUDGE_TOP_LOGPROBS, len(keys))))
        if (p := _label_probs(top, letters, lambda t: t.strip(" ).:").upper())) is None:
            raise BackendError(f"Ollama model {self.writer.model} answered {said!r}, not an "
                               "option letter")
        _record(ledger, stage, "ollama", self.writer.model, started, inp, out)
        probs = {k: p[c] for c, k in zip(letters, keys)}
        best = max(keys, key=probs.get)
        return best, probs[best], probs


CASCADE_TOP = 5   # the passages the writer would read (rerank.KEEP), judged by the model


class CascadeJudge:
    """The builtin judge ranks every passage; the local model judges only the CASCADE_TOP
    it ranks first (the ones the writer would read; one request each, the query first, a
    prefix the server reuses), which take the model's probability: it orders them and
    decides the gate. The rest stay at or below the lowest of them. Claims (verify) go
    to the model. A local judge of every passage costs 20 requests a question; on a CPU
    that is most of a minute (README "Measured with real models")."""

    name = "cascade"

    def __init__(self, model_judge, top: int = CASCADE_TOP):
        self.cheap, self.model, self.top = BuiltinJudge(), model_judge, top

    @property
    def note(self) -> str:
        return self.model.note

    def relevance_by_part(self, query, passages, stage="rerank", ledger=None, idf=None):
        table = self.cheap.relevance_by_part(query, passages, idf=idf)
        first = sorted(table, key=lambda k: -table[k][0])[:self.top]
        got = self.model.relevance(query, {k: passages[k] for k in first}, stage, ledger)
        floor = min(got.values(), default=1.0)
        return {k: [got[k] if k in got else min(v[0], floor)] + list(v[1:])
                for k, v in table.items()}

    def relevance(self, query, passages, stage="rerank", ledger=None, idf=None):
        table = self.relevance_by_part(query, passages, stage, ledger, idf)
        return {k: v[0] for k, v in table.items()}

    def support(self, claims, stage="verify", ledger=None):
        return self.model.support(claims, stage, ledger)


# --------------------------------------------------------------------------- jev
# (section owned by the backends developer: JevJudge)
# Private passages and claims never leave the machine (the local judge takes them); the
# rest go as ONE request per stage over one shared state, split only past the budget.

JEV_URL = "https://api.typesafe.ai"   # or $JEV_URL
JEV_MODEL = "jev-latest"
JEV_KEY_FILE = "~/.config/typesafe/key"  # or $TYPESAFE_API_KEY; the file must be chmod 600
JEV_TIMEOUT = 30.0           # seconds per request
JEV_STATE_BUDGET = 32_000    # bytes of JSON state per request; split only above it
JEV_RETRIES = 4              # retries after 408 / 429 / 5xx / no answer
JEV_RETRY_BUDGET = 60.0      # seconds for one request, all tries, timeouts and waits together
JEV_BACKOFF = 0.5            # first wait when the server names none; doubles
PRICE_PER_INPUT_TOKEN = 0.042 / 1e6  # dollars (Jev, at the time of writing)


def _jev_key(key_file=None) -> str:
    if key := os.environ.get("TYPESAFE_API_KEY", "").strip():
        return key
    path = os.path.expanduser(key_file or JEV_KEY_FILE)
    if not os.path.exists(path):
        raise BackendError(f"no Jev API key: set TYPESAFE_API_KEY or save it in {path} "
                           "(chmod 600)")
    if os.stat(path).st_mode & 0o077:
        raise BackendError(f"refusing the Jev key file {path}: others can read it; run "
                           f"`chmod 600 {path}`")
    with open(path, encoding="utf-8") as f:
        if key := f.read().strip():
            return key
    raise BackendError(f"the Jev key file {path} is empty")


def _retry_after(r):
    """Seconds the server asks us to wait (retry-after-ms, else retry-after), or None."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            return max(0.0, float(r.headers[name]) * scale)
        except (KeyError, ValueError, TypeError, AttributeError):
            continue
    return None


def _error_text(r) -> str:
    try:
        e = r.json()
    except ValueError:
        return r.text[:160]
    e = e.get("error", e) if isinstance(e, dict) else e
    return str(e.get("message", e) if isinstance(e, dict) else e)[:160]


class JevJudge:
    """TypeSafe's Jev over POST /v1/systemone; `local` judges whatever is private
    (.last_routing shows which keys went where; local ledger rows get a routed_local note)."""

    name = "jev"

    def __init__(self, local, api_key=None, url=None, model=JEV_MODEL, key_file=None,
                 timeout=JEV_TIMEOUT, retries=JEV_RETRIES, retry_budget=JEV_RETRY_BUDGET,
                 budget=JEV_STATE_BUDGET):
        self.local, self.key = local, api_key or _jev_key(key_file)
        self.url = (url or os.environ.get("JEV_URL") or JEV_URL).rstrip("/") + "/v1/systemone"
        self.model, self.timeout, self.retries = model, timeout, retries
        self.retry_budget, self.budget, self.last_routing = retry_budget, budget, {}

    def _post(self, state, questions, stage, ledger) -> dict:
        import requests
        body = {"model": self.model, "state": state, "questions": questions}
        started = time.perf_counter()
        for attempt in range(self.retries + 1):
            try:
                r = requests.post(self.url, json=body, timeout=self.timeout,
                                  headers={"Authorization": f"Bearer {self.key}"})
            except (requests.ConnectionError, requests.Timeout) as e:
                r, why = None, f"no answer from {self.url}: {type(e).__name__}"
            else:
                if r.status_code == 200:
                    break
                why = f"{r.status_code} {_error_text(r)}"
                if r.status_code in (401, 403):
                    raise BackendError(f"Jev refused the API key ({why}): check "
                                       f"TYPESAFE_API_KEY or {JEV_KEY_FILE}")
                if r.status_code not in (408, 429) and r.status_code < 500:
                    raise BackendError(f"Jev rejected the request ({why})")
            wait = _retry_after(r)
            wait = JEV_BACKOFF * 2 ** attempt if wait is None else wait
            spent = time.perf_counter() - started   # tries that timed out count too
            if attempt == self.retries or spent + wait > self.retry_budget:
                raise BackendError(f"Jev failed after {attempt + 1} tries ({why}): try "
                                   "later, or use --judge builtin")
            time.sleep(wait)
        try:
            data = r.json()
            answers, usage = data["answers"], data.get("usage") or {}
            inp, out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise BackendError(f"Jev sent a malformed reply ({_first_line(e)})") from None
        _record(ledger, stage, "jev", data.get("model", self.model), started, inp, out,
                inp * PRICE_PER_INPUT_TOKEN)
        return answers

    def _judge(self, items, stage, ledger, build, local_fn) -> dict:
        """Private (or unmarked) items to the local judge, the rest to Jev in groups whose
        JSON stays under the budget: one group unless the budget is passed."""
        local = [k for k, v in items.items() if v.get("private") is not False]
        groups, size = [[]], 0
        for k in (k for k in items if k not in local):
            n = len(json.dumps(items[k], default=str))
            if groups[-1] and size + n > self.budget:
                groups, size = groups + [[]], 0
            groups[-1].append(k)
            size += n
        out, n_rows = {}, len(ledger.rows) if ledger is not None else 0
        if local:
            out.update(local_fn({k: items[k] for k in local}))
            for row in (ledger.rows[n_rows:] if ledger is not None else []):
                row["note"] = f"routed_local: {len(local)} private"
        for g in filter(None, groups):
            state, questions, names = build({k: items[k] for k in g})
            out.update(_s1_nouls(self._post(state, questions, stage, ledger), names, "Jev"))
        self.last_routing = {"stage": stage, "local": local,
                             "jev": [k for g in groups for k in g]}
        return out

    def relevance(self, query, passages, stage="rerank", ledger=None) -> dict:
        return self._judge(passages, stage, ledger, lambda s: _s1_relevance(query, s),
                           lambda s: self.local.relevance(query, s, stage, ledger))

    def support(self, claims, stage="verify", ledger=None) -> dict:
        return self._judge(claims, stage, ledger, _s1_support,
                           lambda s: self.local.support(s, stage, ledger))

    def choose(self, text, options, stage="route", ledger=None, private=False):
        if private:
            return self.local.choose(text, options, stage, ledger)
        q = {"choice": {"type": "choice", "instructions": S1_CHOICE, "criteria": options}}
        return _s1_choice(self._post(text, q, stage, ledger).get("choice"), "Jev")


# --------------------------------------------------------------------- selection


@dataclass
class Backend:
    name: str
    embedder: object
    judge: object
    writer: object
    note: str = ""


def _listening(host: str, timeout) -> bool:
    """A bare TCP connect: tells "nothing runs there" without importing the client,
    whose import alone costs about half a second of every offline run."""
    import socket
    import urllib.parse
    u = urllib.parse.urlsplit(host if "://" in host else "http://" + host)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 11434),
                                      timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def _ollama_unready(host, needs: list, timeout) -> str | None:
    """None when Ollama answers and has each (model, capability), else why not."""
    where = host or os.environ.get("OLLAMA_HOST") or OLLAMA_DEFAULT_HOST
    if not _listening(where, timeout):
        return f"Ollama is not answering at {where}: start it with `ollama serve`"
    api = _Ollama(host, timeout)
    try:
        have = {m.model for m in api.call("list", "list models").models}
        for model, cap in needs:
            if _tagged(model) not in have:
                return f"Ollama at {api.host} has no {model}: run `{_fix(model)}`"
            caps = api.call("show", "show", model=model).capabilities
            if caps is not None and cap not in caps:
                return f"Ollama model {model} cannot do {cap} (it has {', '.join(caps)})"
    except BackendError as e:
        return str(e)
    return None


JUDGES = ("builtin", "ollama", "cascade", "jev")   # the --judge choices
# Why auto pairs an Ollama writer with the builtin judge (README "Measured with real models")
AUTO_JUDGE_WHY = ("on dev a 1.5B local judge gave no more right answers and took 24 s a "
                  "question more: --judge cascade or ollama to use one")


def load_backend(name: str = "auto", judge: str | None = None, idf=None, embed_model=None,
                 write_model=None, index=None, host=None, timeout=OLLAMA_TIMEOUT,
                 probe_timeout=OLLAMA_PROBE_TIMEOUT) -> Backend:
    """The embed/judge/write trio for a backend name; `idf` restores a builtin index and
    `index` (an ingest.Index) brings the embedder its vectors were made with.
    auto: Ollama when it answers and has the models, else builtin (the note says why).
    A backend or judge named explicitly never falls back: BackendError instead."""
    if name not in ("auto", "builtin", "ollama"):
        raise BackendError(f"unknown backend {name!r}: use auto, builtin or ollama")
    if judge not in (None,) + JUDGES:
        raise BackendError(f"unknown judge {judge!r}: use {', '.join(JUDGES)}")
    em = embed_model or os.environ.get("VERSO_EMBED_MODEL") or EMBED_MODEL
    wm = write_model or os.environ.get("VERSO_WRITE_MODEL") or WRITE_MODEL
    emb, note, auto_judge = getattr(index, "embedder", None), "", False
    if name != "builtin":
        needs = [(wm, "completion")] + ([] if emb else [(em, "embedding")])
        if (why := _ollama_unready(host, needs, probe_timeout)) and name == "ollama":
            raise BackendError(why)
        auto_judge = name == "auto" and judge is None and not why
        name = "builtin" if why else "ollama"
        note = (f"auto chose builtin: {why}" if why else f"ollama: {wm} writes"
                + ("" if auto_judge or judge else " and judges") + ", "
                + (f"vectors from the index ({emb.id})" if emb else f"{em} embeds"))
        judge = "builtin" if auto_judge else judge
    if name == "builtin":
        b = Backend("builtin", emb or BuiltinEmbedder(idf), BuiltinJudge(), BuiltinWriter(),
                    note or "builtin backend (offline)")
    else:
        w = OllamaWriter(wm, host, timeout)
        b = Backend("ollama", emb or OllamaEmbedder(em, host, timeout), OllamaJudge(w), w, note)
    if judge == "builtin":
        b.judge = BuiltinJudge()
    elif judge in ("ollama", "cascade"):
        if not isinstance(b.judge, OllamaJudge):
            if why := _ollama_unready(host, [(wm, "completion")], probe_timeout):
                raise BackendError(why)
            b.judge = OllamaJudge(OllamaWriter(wm, host, timeout))
        b.judge = CascadeJudge(b.judge) if judge == "cascade" else b.judge
    elif judge == "jev":
        b.judge = JevJudge(local=b.judge)
    if judge:
        b.note += f"; judge: {judge}" + (f" (private text judged locally by "
                                         f"{b.judge.local.name})" if judge == "jev" else "")
        b.note += f" ({AUTO_JUDGE_WHY})" if auto_judge else ""
    return b
