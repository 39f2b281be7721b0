"""Model calls: every embed, judge and write call goes through here, and into the ledger.

In:  texts to embed, passages and claims to judge, chat messages to write from.
Out: float32 L2-normalised vectors, probabilities, answer text; one ledger row per call
     (stage, backend, model, input tokens, output tokens, seconds, dollars).
Not: retrieval, prompts or verdicts (the stage modules own those).

Backends are chosen by name with load_backend(): `builtin` (offline, numpy only),
`ollama` (local server) and `jev` (hosted judge). Importing this module starts nothing.
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


def numbers(text: str) -> list[str]:
    """Numeric mentions, normalised like tokenize(): "£1,550/day" -> ["1550"]."""
    return [t for t in tokenize(text) if t[0].isdigit()]


ABBREV_GUARD = (r"(?<!\bDr\.)(?<!\bMr\.)(?<!\bMs\.)(?<!Mrs\.)(?<!\bSt\.)(?<!\bvs\.)"
                r"(?<!e\.g\.)(?<!i\.e\.)")   # no sentence break after these
SENTENCE_RE = re.compile(ABBREV_GUARD + r"(?<=[.!?])\s+|\n+")


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


# ---------------------------------------------------------------- builtin judge
# (section owned by the pipeline developer: BuiltinJudge)
# A lexical/numeric evidence scorer. Every feature is a share in [0, 1]; a weighted sum
# goes through a logistic to a probability. Deterministic, offline, no model file.

JUDGE_MODEL = "builtin-judge-v1"
# Words and phrases that place a question in time rather than name its topic.
QUERY_NOISE_RE = re.compile(r"\b(?:over time|these days|at the moment|right now|"
                            r"as of (?:today|now)|most recent(?:ly)?|used to|walk me through|"
                            r"from start to finish|keeps? (?=\w+ing\b)|kept (?=\w+ing\b)|"
                            r"(?:over|during|through(?:out)?|in) the "
                            r"(?:last |past )?(?:year|years|months|weeks))\b")
QUERY_NOISE = frozenset("""current currently latest newest recent recently still anymore
nowadays today change changed evolve evolved history originally tell know please
decide decided agree agreed say said mention mentioned discus discussed up down went
get got getting gotten go goe going make made making done put take took taking give gave
giving happen happened one ones""".split())
# A capitalised name in the role of whose ("Maren's rate", "Priya's referral"):
# it qualifies what is asked rather than naming it, and in a personal vault it is often
# the owner, whom the notes call "I". Such a name counts QUALIFIER_WEIGHT of its weight.
QUALIFIER_RE = re.compile(r"\b([A-Z][\w-]+)(?:'s|\u2019s)\b")
QUALIFIER_WEIGHT = 0.5
# The focus of a question: the noun phrase a wh-word asks about ("which BANK is ...",
# "what's Maren's DAY RATE", "how long is my APARTMENT CONTRACT"). A passage that
# answers must name it (writer); in the judge it weighs FOCUS_BOOST times its idf.
_AUX = (r"(?:is|are|was|were|am|be|do|does|did|has|have|had|can|could|should|will|"
        r"would|may|might|must)")
FOCUS_RE = re.compile(
    r"^(?:how (?:much|many|long|far|often|old)|what|which|whose)\b\s*"
    r"(?:(?:'s|is|are|was|were)\b\s*)?"
    r"(?:(?:the|my|our|your|his|her|their|its|a|an|this|that|these|those)\s+|"
    r"[\w-]+'s\s+)*"
    r"(?:(?:name|kind|sort|type) of\s+(?:(?:the|my|our|a|an)\s+)?)?"
    rf"(?!{_AUX}\b|i\b|we\b|you\b|they\b|he\b|she\b)((?:[\w-]+\s+){{0,3}}?[\w-]+?)"
    rf"(?=\s+(?:{_AUX}|of|for|on|in|at|from|to|with|that|which|who|i|we|you|he|she|"
    r"they|and|or)\b|\s*[?,.;:!]|$)")
FOCUS_BOOST = 1.5   # the asked-about phrase counts half again a plain topic word
# A question of several parts ("Who signs off X, and what's their phone number?"):
# split at sentence marks, dashes, and "and" or a comma before a wh-word. A piece that
# asks nothing (no wh-word or auxiliary in its first three words) is context of the
# next part ("For the quarterly test rounds, how many ..."), else of the one before.
_WH = r"(?:what|which|who|whom|whose|when|where|why|how)"
PART_SPLIT_RE = re.compile(rf"[.?!;]+\s+|\s[\u2014\u2013-]+\s|,?\s+and\s+(?={_WH}\b)|,\s+(?={_WH}\b)",
                           re.IGNORECASE)
ASKING_RE = re.compile(rf"^(?:[\w-]+\s+){{0,2}}(?:{_WH}|{_AUX})\b", re.IGNORECASE)
CONTEXT_SHARE = 0.5  # in one part's score the other parts' words count half: they only
                     # set its context ("their phone number": whose)
# Answer-type words: a passage holding a value of the type counts as naming the word
# ("How much ..." is answered by "£3,350"; "goal time" by "3:44:00").
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
VALUE_RES = {
    "money": re.compile(r"[\u00a3$\u20ac]\s?\d|\d\s?(?:gbp|eur|usd|euros?|pounds?)\b", re.I),
    "measure": re.compile(r"\d\s?(?:g|kg|mg|ml|l|km|mi|miles?|grams?|litres?|kcal|bpm|%)\b",
                          re.I),
    "number": re.compile(r"\d"),
    "duration": re.compile(r"\d\s?(?:sec|second|min|minute|hour|hr|h|day|week|month|year)s?\b"
                           r"|\b\d{1,2}:\d{2}\b", re.I),
    "clock": re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?\b"),
    "percent": re.compile(r"\d\s?%|\bper ?cent\b", re.I),
    "date": re.compile(rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)? {_MONTH}\b|"
                       rf"\b{_MONTH} \d{{1,2}}\b", re.I),
    # a capitalised word inside a sentence: a name ("Physio: Hannah Reyes")
    "person": re.compile(r"(?<=[\w:,;(]\s)(?!(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day\b)"
                         r"(?!(?i:" + _MONTH + r")\b)[A-Z][a-z]{2,}"),
}
NO_DIGIT_KINDS = ("percent", "person")   # the kinds a text without a digit may hold
# Answer-type words and the kinds of value that answer them.
ANSWER_TYPES = {"much": ("money", "measure"), "price": ("money",), "cost": ("money",),
                "fee": ("money",), "many": ("number",), "number": ("number",),
                "long": ("duration",), "often": ("number",), "old": ("number",),
                "far": ("measure",), "time": ("clock",), "pace": ("clock",),
                "percent": ("percent",), "percentage": ("percent",), "share": ("percent",),
                "discount": ("percent",), "date": ("date",), "deadline": ("date",),
                "when": ("date",), "who": ("person",)}
WH_TYPES = {"who": "who", "whom": "who", "whose": "who", "when": "when"}  # stopwords
NOT_A_VALUE_RE = re.compile(r"\b\d{4}-\d{2}(?:-\d{2})?\b|\b(?:19|20)\d{2}\b")  # dates, years
ABSENT_VERB_WEIGHT = 0.3  # a verb form ("paying", "aiming") no passage uses as such
ANSWER_WORD_WEIGHT = 0.6  # "much", "time", "price": half a topic word
# A unit "states" something when it has a value or a copula, not just the topic words.
STATE_RE = re.compile(r":\s*[\w\u00a3$\u20ac]|[=\u2192\u00a3$\u20ac%\d]|\b(?:is|are|was|were|"
                      r"be|been|became|becomes|stands|equals?|costs?|set|raised|increased|"
                      r"decreased|reduced|dropped|rose|fell|reached|moved|switched|went|now)\b",
                      re.IGNORECASE)
# ... or when it names a specific the question does not: a capitalised word inside the
# sentence ("Coaches a group at the Aire Valley Striders on Tuesday nights" says where
# and when without a copula); a name the question already gives is only a mention.
NAME_RE = re.compile(r"(?<=[\w,;:(\u2014-]\s)[A-Z][\w'\u2019-]+")
BULLET_RE = re.compile(r"^\s*(?:[-*+>]|\d+[.)])\s+")
EMPHASIS_RE = re.compile(r"\*\*|__|`")
WIKILINK_RE = re.compile(r"\[\[([^\]|]+)(?:\|([^\]]+))?\]\]")
PREFIX_LEN = 5            # terms sharing 5 leading letters ("changes"/"changed") ...
PARTIAL_CREDIT = 0.6      # ... match at this credit
IDF_FLOOR = 0.1
REL_BIAS = -5.0           # all-zero features -> p = 0.007
REL_WEIGHTS = {"coverage": 4.0, "states": 3.0, "phrase": 2.0, "numbers": 1.5,
               "heading": 1.2, "focus": 1.0, "dense": 1.5}
FOCUS_SHARE = 0.75        # focus: share of units (with heading) naming 3/4 of what the best does
DENSE_MID = 0.35          # a dense cosine above this raises the score, below lowers it
SUPPORT_BIAS = -8.0       # support: terms found and numbers found, through a logistic
SUPPORT_W_TERMS = 6.0
SUPPORT_W_NUMBERS = 5.0   # full weight only when ALL numbers are found, else half the share
CHOICE_SHARPNESS = 2.0    # softmax temperature over IDF-weighted option overlaps


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


def split_units(text: str, keep_links: bool = False) -> list[str]:
    """Sentences and table rows of a chunk, as plain text (wikilinks kept with
    keep_links, for states()); markdown headings and fragments dropped."""
    return list(_split_units(text, keep_links))


@functools.lru_cache(maxsize=1 << 14)
def _split_units(text: str, keep_links: bool) -> tuple[str, ...]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "|---", "---")):
            continue
        line = BULLET_RE.sub("", line)
        line = EMPHASIS_RE.sub("", line) if keep_links else plain(line)
        for s in sentences(line):
            s = " ".join(s.split())
            if len(tokenize(s)) >= 2:
                out.append(s)
    return tuple(out)


def evidence_terms(text: str) -> set[str]:
    """Terms (numbers canonical) plus the answer-type words its values answer."""
    return set(_evidence_terms(text))


@functools.lru_cache(maxsize=1 << 16)
def _evidence_terms(text: str) -> frozenset:
    out = {number_key(t) if t[0].isdigit() else t for t in terms(text)}
    if VALUE_RES["number"].search(text):
        kinds = {k for k, rx in VALUE_RES.items() if rx.search(text)}
    else:  # every other kind needs a digit
        kinds = {k for k in NO_DIGIT_KINDS if VALUE_RES[k].search(text)}
    return frozenset(out | {w for w, ks in ANSWER_TYPES.items() if kinds.intersection(ks)})


def query_terms(query: str) -> list[str]:
    """Topic terms of a question, in order, without time-framing words or numbers;
    a leading who/when becomes its answer-type word."""
    q = QUERY_NOISE_RE.sub(" ", query.lower())
    first = tokenize(q)[:1]
    seen, out = set(), [WH_TYPES[first[0]]] if first and first[0] in WH_TYPES else []
    for t in terms(q):
        if t not in QUERY_NOISE and not t[0].isdigit() and t not in seen:
            seen.add(t)
            out.append(t)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _base(t: str) -> str:
    """Verb forms folded: "paying" -> "pay", "getting" -> "get", "agreed" -> "agre"
    (_match also ignores a final silent e: "moving" ~ "move")."""
    for suffix in ("ing", "ed"):
        if t.endswith(suffix) and len(t) - len(suffix) >= 3:
            t = t[:-len(suffix)]
            return t[:-1] if len(t) >= 4 and t[-1] == t[-2] else t
    return t


def _match(term: str, tset) -> float:
    """1 for the term itself, PARTIAL_CREDIT for a shared stem or verb form, else 0."""
    if term in tset:
        return 1.0
    return PARTIAL_CREDIT if not _related_words(term, tset).isdisjoint(tset) else 0.0


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


def _related(term: str, p: str) -> bool:
    """A shared 5-letter prefix, one word the other's prefix, or one verb form."""
    base = _base(term)
    return ((len(term) >= PREFIX_LEN and p[:PREFIX_LEN] == term[:PREFIX_LEN])
            or (min(len(p), len(term)) >= 4 and (p.startswith(term) or term.startswith(p)))
            or (len(base) >= 3 and _base(p).rstrip("e") == base.rstrip("e")))


def query_entities(query: str) -> set[str]:
    """Terms of the capitalised words after the first: names ("Maren", "Kittiwake")."""
    words = re.findall(r"[^\W\d_][\w'\u2019-]*", query)
    return {t for w in words[1:] if w[0].isupper() for t in terms(w)}


def question_focus(query: str) -> list[str]:
    """Topic terms of the phrase a wh-word asks about: "Which bank is my account
    with?" -> ["bank"]; "What's Maren's day rate?" -> ["day", "rate"]; [] if none."""
    q = " ".join(query.replace("\u2019", "'").lower().split())
    m = FOCUS_RE.match(q)
    if not m:
        return []
    asked = set(query_terms(query))
    return [t for t in terms(m.group(1)) if t in asked]


def question_parts(query: str) -> list[str]:
    """The parts a question asks, each with the context pieces that belong to it:
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


def part_weights(weights: dict, part: str) -> dict[str, float]:
    """Term weights for one part: its own terms (its focus boosted) at full weight,
    the rest of the question's at CONTEXT_SHARE."""
    own = set(query_terms(part))
    focus = set(question_focus(part))
    return {t: w * (FOCUS_BOOST if t in focus else 1.0) if t in own else CONTEXT_SHARE * w
            for t, w in weights.items()}


def qualifier_terms(query: str) -> set[str]:
    """Terms of capitalised names in a possessive (whose) role: "Maren's day rate"."""
    return {t for m in QUALIFIER_RE.finditer(query) for w in m.groups() if w
            for t in terms(w)}


def _corpus_idf(t: str, docs, idf: dict, rare: float) -> float:
    """IDF of a term's word family in the corpus table: the lowest idf among the term
    and the candidates' words it matches ("paying" weighs as "pay" does: the family is
    at least as common as its most common form); no form anywhere: the rarest idf."""
    words = set().union(*docs)
    family = {p for p in _related_words(t, words) & words if p in idf}
    family |= {t} & idf.keys()
    return min((float(idf[p]) for p in family), default=rare)


def idf_weights(qterms, docs, idf=None, absent=None, qualifiers=()) -> dict[str, float]:
    """Weight of each query term: IDF from `idf` (the corpus table) when given, else over
    `docs` (term sets), so a word in none of them weighs most (what is asked is not
    there) unless it is a verb form ("paying", "aiming": ABSENT_VERB_WEIGHT) or `absent`
    is given; answer-type words ("much", "time") weigh ANSWER_WORD_WEIGHT; names in
    `qualifiers` count QUALIFIER_WEIGHT of their weight."""
    n, rare = len(docs), max(idf.values()) if idf else 0.0
    w = {}
    for t in qterms:
        df = sum(_match(t, d) > 0 for d in docs)
        if t in ANSWER_TYPES:
            w[t] = ANSWER_WORD_WEIGHT
        elif _base(t) != t and not any(t in d for d in docs):
            w[t] = ABSENT_VERB_WEIGHT   # a verb form only ever matched as another form
        elif absent is not None and df == 0:
            w[t] = absent
        elif idf:
            w[t] = _corpus_idf(t, docs, idf, rare) + IDF_FLOOR
        else:
            w[t] = float(np.log(1 + (n + 1) / (df + 1))) + IDF_FLOOR
        if t in qualifiers:
            w[t] *= QUALIFIER_WEIGHT
    return w


def coverage(qterms, weights, tset) -> float:
    """IDF-weighted share of the query terms found in a term set."""
    total = sum(weights[t] for t in qterms)
    return sum(weights[t] * _match(t, tset) for t in qterms) / total if total else 0.0


def phrase_share(qterms, seq) -> float:
    """Share of the query's adjacent term pairs that stand adjacent in `seq` too."""
    pairs = list(zip(qterms, qterms[1:]))
    if not pairs:
        return 0.0
    have = set(zip(seq, seq[1:]))
    return sum(p in have for p in pairs) / len(pairs)


def states(unit: str, known=frozenset()) -> bool:
    """The unit states a value (number, copula, "key: value") or names a specific
    whose terms are not all `known` (the question's terms), and is no question.
    A link to another note, or a bare date or year, is no value."""
    stated, names = _state_parts(unit)
    return stated or any(not ts <= known for ts in names)


@functools.lru_cache(maxsize=1 << 16)
def _state_parts(unit: str) -> tuple[bool, tuple[frozenset, ...]]:
    """(states a value, the term sets of its names) for states(); (False, ()) for a question."""
    if unit.rstrip().endswith("?"):
        return False, ()
    text = NOT_A_VALUE_RE.sub(" ", WIKILINK_RE.sub(" ", unit))
    return bool(STATE_RE.search(text)), tuple(frozenset(terms(m)) for m in NAME_RE.findall(text))


def _sigmoid(z: float) -> float:
    return float(1.0 / (1.0 + np.exp(-z)))


def _relevance_features(qterms, qnums, weights, passage) -> dict[str, float]:
    """Each feature a share in [0, 1] (numbers and dense may go below 0). states,
    phrase and focus look only at units that state something: a mention scores none."""
    text = passage.get("text", "")
    heading = passage.get("heading", "")
    context = f"{heading} {passage.get('path', '')}"
    ctx = set(terms(context))
    units = split_units(text, keep_links=True)
    stating = [plain(u) for u in units if states(u, set(qterms))]
    cover = [coverage(qterms, weights, evidence_terms(u) | ctx) for u in stating]
    found = number_keys(f"{text} {context} {passage.get('date', '')}")
    dense = passage.get("dense_score")
    n_units = len(units)
    return {
        "coverage": coverage(qterms, weights, evidence_terms(text) | ctx),
        "states": max(cover, default=0.0),
        "phrase": max((phrase_share(qterms, terms(f"{heading} {u}")) for u in stating),
                      default=0.0),
        "numbers": (2 * len(qnums & found) / len(qnums) - 1) if qnums else 0.0,
        "heading": coverage(qterms, weights, ctx),
        "focus": (sum(c >= FOCUS_SHARE * max(cover) for c in cover) / n_units
                  if n_units and max(cover, default=0.0) > 0 else 0.0),
        "dense": 0.0 if dense is None else min(1.0, max(-1.0, float(dense))) - DENSE_MID,
    }


def _choice_features(text: str) -> set[str]:
    toks = [_stem(t) for t in tokenize(text)]
    return set(toks) | {f"{a}_{b}" for a, b in zip(toks, toks[1:])}


class BuiltinJudge:
    """Relevance, support and choice from lexical and numeric evidence (no model)."""

    name = "builtin"
    model = JUDGE_MODEL

    def relevance(self, query, passages, stage="rerank", ledger=None, idf=None):
        """P(passage helps answer query) per key; `idf` (term -> idf) when the caller has
        it. A passage that answers one part of a several-part question answers."""
        return {k: max(ps) for k, ps in
                self.relevance_by_part(query, passages, stage, ledger, idf).items()}

    def relevance_by_part(self, query, passages, stage="rerank", ledger=None, idf=None):
        """Per key: [P(whole question), P(part 1), P(part 2), ...] (question_parts; the
        parts only for a question of several)."""
        started = time.perf_counter()
        qterms, qnums = query_terms(query), number_keys(query)
        docs = [evidence_terms(" ".join(str(p.get(k, "")) for k in ("text", "heading", "path")))
                for p in passages.values()]
        parts = question_parts(query)
        qterms += [t for part in parts[1:] for t in query_terms(part) if t not in qterms]
        weights = idf_weights(qterms, docs, idf, qualifiers=qualifier_terms(query))
        sets = [part_weights(weights, part) for part in parts] if len(parts) > 1 else []
        weights.update({t: FOCUS_BOOST * weights[t] for t in question_focus(query)
                        if t in weights})
        out = {key: [_sigmoid(REL_BIAS + sum(REL_WEIGHTS[k] * v for k, v in
                                             _relevance_features(qterms, qnums, w, p).items()))
                     for w in [weights] + sets] for key, p in passages.items()}
        text = query + "".join(p.get("text", "") for p in passages.values())
        _record(ledger, stage, "builtin", JUDGE_MODEL, started, count_tokens(text))
        return out

    def support(self, claims, stage="verify", ledger=None):
        """P(the sources state every fact of the sentence): terms and ALL numbers found."""
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
            num_score = 1.0 if share == 1.0 else share / 2
            out[key] = _sigmoid(SUPPORT_BIAS + SUPPORT_W_TERMS * cov
                                + SUPPORT_W_NUMBERS * num_score)
        _record(ledger, stage, "builtin", JUDGE_MODEL, started, size)
        return out

    def choose(self, text, options, stage="route", ledger=None):
        """The option whose description shares most (IDF-weighted) words with text."""
        started = time.perf_counter()
        feats = _choice_features(text)
        opt = {name: _choice_features(desc) for name, desc in options.items()}
        n = len(opt)
        scores = {}
        for name, of in opt.items():
            scores[name] = sum(float(np.log(1 + n / sum(f in o for o in opt.values())))
                               for f in feats & of)
        z = np.array([CHOICE_SHARPNESS * s for s in scores.values()])
        p = np.exp(z - z.max())
        p /= p.sum()
        probs = {name: float(v) for name, v in zip(scores, p)}
        choice = max(probs, key=lambda k: probs[k])  # first of equals: option order
        _record(ledger, stage, "builtin", JUDGE_MODEL, started,
                count_tokens(text + "".join(options.values())))
        return choice, probs[choice], probs


# --------------------------------------------------------------- builtin writer
# (section owned by the pipeline developer: BuiltinWriter)
# Extractive: reads the prompt generate.build_messages writes (the format constants live
# here so that models never imports a stage module), picks whole sentences and cites them.

WRITER_MODEL = "builtin-writer-v1"
ABSTAIN_SENTENCE = "I don't know from my notes."    # generate.ABSTAIN
PROMPT_NOTES = "Notes:"
PROMPT_MODE = "Time mode:"
PROMPT_QUESTION = "Question:"
NOTE_HEADER = "[{id}] path: {path} | section: {section} | date: {date} | {status}"
NOTE_HEADER_RE = re.compile(
    r"^\[(c\d+)\] path: (.*?) \| section: (.*?) \| date: (\S+) \| (.+)$")
UNDATED = "undated"
STATUS_LATEST = "latest"
STATUS_OLDER = "older version"       # "older version, superseded by PATH" when known
STATUS_OLDER_ENTRY = "older entry"   # an older dated section of a log
SUPERSEDED_MARK = ", superseded by "  # status suffix naming the newer version (generate)
LOG_ENTRY_MARK = " @ "               # "path @ date": a newer entry of the same log
MAX_SENTENCES = 5
MIN_EVIDENCE = 0.5        # a unit answers when its evidence reaches this, and ...
MIN_COVERAGE = 0.6        # ... with its note's path/section/date covers this much query,
MIN_OWN_COVERAGE = 0.5    # ... names this much of it itself (or in its section heading),
                          # states a value, and holds the kinds of value asked for
MIN_OWN_PARTIAL = 0.34    # a unit naming this much may complete another's answer
EVIDENCE_WEIGHTS = {"cover": 0.55, "states": 0.2, "keyed": 0.15, "phrase": 0.1}
KEY_WINDOW = 4            # keyed: a number within this many tokens after an asked term
WRITER_ABSENT_WEIGHT = 1.0  # a word in no note: it cannot tell sentences apart, but counts
SECTION_CREDIT = 0.8      # a query term found only in the unit's section heading
HEAD_CREDIT = 0.6         # a query term found only in the note's path or date
NOTE_CREDIT = 0.4         # a query term found only elsewhere in the same note
SAME_NOTE_MARGIN = 0.1    # more units of the lead's note, this close to it, restating it
PART_SHARE = 0.5          # a unit answers one part of a question naming half its words
RESTATE_SHARE = 0.6       # a newer unit restates the best one: names this much of it
# "Which shoes ...": an answer names a specific: a number or a capitalised word that does
# not open the sentence ("racing in the Pacewell Tempo X"); "Changing shoes was right" not.
SPECIFIC_RE = re.compile(r"\d|(?<=[\w,;:(\u2014-]\s)[A-Z]")
# Present mode: a contrast clause names the value a correction replaces; it is cut.
CONTRAST_RE = re.compile(r"\s*[,;(\u2014-]*\s*\b(?:instead of|rather than|in place of|"
                         r"replacing)\b.*$", re.IGNORECASE)
RANK_PRIOR = 0.1          # evidence bonus of the first note (0.1 * (n - i) / n for note i)
# History: the line that changed between versions is worded like a line of the
# neighbouring version but holds other values ("Status: not started" -> "Status: booked").
DIFF_WEIGHT = 0.35        # evidence bonus of a changed line, times its similarity (0..1)
OTHER_SIMILARITY = 0.2    # another note joins a history only as a changed line of the
                          # document: a fifth of its words shared with one of its lines
KEY_RE = re.compile(r"^([^:;,.]{1,40}):\s*\S")   # "Status: paid": the key of a key: value line


def _seq(text: str) -> list[str]:
    return [number_key(t) if t[0].isdigit() else t for t in terms(text)]


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
        m = NOTE_HEADER_RE.match(line)
        if m:
            section = "" if m.group(3) == "-" else m.group(3)
            notes.append({"id": m.group(1), "path": m.group(2), "section": section,
                          "date": m.group(4), "status": m.group(5), "order": len(notes),
                          "text": ""})
        elif notes:
            notes[-1]["text"] += line + "\n"
    return question, mode, notes


@dataclass(eq=False)
class _Unit:
    note: dict
    text: str
    evidence: float
    answers: bool         # enough evidence to answer the question on its own
    partial: bool         # states a value about part of the question
    named: frozenset      # query terms the unit names (a name also by path or section)
    prior: float = 0.0    # the notes come most relevant first: a small bonus for rank
    said: frozenset = frozenset()   # query terms it names itself or in its section
    stated: bool = False  # states a value (states()) or holds the kinds asked for


def _keyed(qterms, unit: str) -> bool:
    """A value follows an asked term closely: "goal: 3:44:00", "rate is now 600"."""
    toks = tokenize(unit)
    asked = [i for i, t in enumerate(toks) if not t[0].isdigit() and _match(_stem(t), qterms)]
    return any(toks[j][0].isdigit() for i in asked for j in range(i + 1, i + 1 + KEY_WINDOW)
               if j < len(toks))


def _said_focus(question: str, qterms: list, unit_terms: list) -> list[str]:
    """The question's focus terms, when some unit names one in its own words (then a
    unit must name one, itself or in its section heading, to answer); [] when none
    does (the focus is only in titles and paths)."""
    focus = [t for t in question_focus(question) if t in qterms]
    if any(_match(t, ts) for ts in unit_terms for t in focus):
        return focus
    return []


def _units(question: str, notes: list[dict]) -> tuple[list[_Unit], dict]:
    """Every sentence/row of every note, scored against the question."""
    qterms = query_terms(question)
    qterms += [t for part in question_parts(question)[1:] for t in query_terms(part)
               if t not in qterms]
    qterms += [n for n in sorted(number_keys(question)) if n not in qterms]
    raw = []
    for note in notes:
        ctx = (evidence_terms(note["section"]),
               evidence_terms(f"{note['path']} {note['date']}"), evidence_terms(note["text"]))
        raw += [(note, u, evidence_terms(plain(u)), ctx)
                for u in split_units(note["text"], keep_links=True)]
    seen = set().union(*(r[2] | r[3][0] | r[3][1] for r in raw)) if raw else set()
    names = query_entities(question) & seen
    qterms = [t for t in qterms if t in seen or t not in query_entities(question)]
    kinds = {t for t in qterms if t in ANSWER_TYPES}   # the question asks for these values
    asks = [kinds & set(query_terms(p)) for p in question_parts(question)]  # ... per part
    weights = idf_weights(qterms, [evidence_terms(plain(r[1])) for r in raw],
                          absent=WRITER_ABSENT_WEIGHT)  # df over the units' own words
    focus = _said_focus(question, qterms, [r[2] for r in raw])
    known = set(qterms)
    # a note with a line naming the focus itself: its lines naming it only in the
    # section heading do not answer (the NIF line of "NIF and bank" for "which bank")
    says_focus = {id(note) for note, u, ts, _ in raw
                  if any(_match(t, ts) for t in focus) and states(u, known)}
    total = sum(weights.values()) or 1.0
    out = []
    for note, u, ts, (section, head, body) in raw:
        credit = {t: max(_match(t, ts), SECTION_CREDIT * _match(t, section),
                         (1.0 if t in names else HEAD_CREDIT) * _match(t, head))
                  for t in qterms}  # a name in the path counts fully
        own = sum(weights[t] * credit[t] for t in qterms) / total
        cover = sum(weights[t] * max(credit[t], NOTE_CREDIT * _match(t, body))
                    for t in qterms) / total
        named = frozenset(t for t in qterms if credit[t] > 0)
        stated = own > 0 and (states(u, known) or any(k and k <= ts for k in asks))
        keyed = "who" not in kinds and _keyed(qterms, plain(u))        # a number after a term
        ev = (EVIDENCE_WEIGHTS["cover"] * cover + EVIDENCE_WEIGHTS["states"] * stated
              + EVIDENCE_WEIGHTS["keyed"] * keyed
              + EVIDENCE_WEIGHTS["phrase"] * phrase_share(qterms, _seq(u)))
        partial = stated and own >= MIN_OWN_PARTIAL
        answers = (partial and own >= MIN_OWN_COVERAGE and ev >= MIN_EVIDENCE
                   and cover >= MIN_COVERAGE and any(k <= named for k in asks)
                   and (not focus or any(_match(t, ts) for t in focus)
                        or id(note) not in says_focus
                        and any(_match(t, section) for t in focus))
                   and (not focus or bool(kinds) or bool(SPECIFIC_RE.search(plain(u)))))
        prior = RANK_PRIOR * (len(notes) - note["order"]) / len(notes)
        said = frozenset(t for t in qterms if max(_match(t, ts), _match(t, section)) > 0)
        out.append(_Unit(note, plain(u), ev, answers, partial, named, prior, said, stated))
    return out, weights


def _date_key(note: dict) -> str:
    return "" if note["date"] == UNDATED else note["date"]


def _weight(ts, weights: dict) -> float:
    return sum(weights[t] for t in ts)


def _restates(u: _Unit, best: _Unit, weights: dict) -> bool:
    """u names (almost) what the best answer names, with the same kinds of value: a
    version of the same statement."""
    kinds = {t for t in best.named if t in ANSWER_TYPES}
    return kinds <= u.named and (_weight(u.named & best.named, weights)
                                 >= RESTATE_SHARE * _weight(best.named, weights))


def _best_per_version(units: list[_Unit]) -> list[_Unit]:
    best: dict = {}
    for u in units:
        key = (u.note["path"], u.note["date"])
        if key not in best or u.evidence > best[key].evidence:
            best[key] = u
    return list(best.values())


def _strongest(units: list[_Unit]) -> _Unit:
    return max(units, key=lambda u: (round(u.evidence + u.prior, 2), _date_key(u.note),
                                     -u.note["order"]))


def _select_current(units: list[_Unit], pool: list[_Unit], weights: dict,
                    mode: str, question: str = "") -> list[_Unit]:
    """any: the strongest unit leads; present: the newest unit restating it does (a
    later correction in another note wins). Then more rows of the lead's note; then a
    unit of `pool` for each part of the question still unanswered (_answer_parts)."""
    tops = _best_per_version(units)
    lead = _strongest(tops)
    if mode == "present":
        lead = max((u for u in tops if _restates(u, lead, weights)),
                   key=lambda u: (_date_key(u.note), u.note["status"] == STATUS_LATEST,
                                  u.evidence, -u.note["order"]))
    chosen = [lead] + [u for u in units if u.note is lead.note and u is not lead
                       and u.evidence >= lead.evidence - SAME_NOTE_MARGIN
                       and _restates(u, lead, weights)]
    chosen = chosen[:MAX_SENTENCES]

    def allowed(u):  # present: no older unit that restates what the lead answers
        older = _date_key(u.note) < _date_key(lead.note)
        return not (mode == "present" and older and _weight(u.named & lead.named, weights)
                    >= 0.5 * _weight(u.named, weights))

    return _answer_parts(chosen, pool, question, weights, allowed)


def _values(text: str) -> set[str]:
    """What a sentence states: its numbers and the terms of its capitalised names."""
    return number_keys(text) | {t for m in NAME_RE.findall(text) for t in terms(m)}


def _said_share(u: _Unit, weights: dict) -> float:
    """Weighted share of `weights`' terms the unit names itself or in its section."""
    total = sum(weights.values())
    return sum(w for t, w in weights.items() if t in u.said) / total if total else 0.0


def _answer_parts(chosen: list[_Unit], pool: list[_Unit], question: str, weights: dict,
                  allowed) -> list[_Unit]:
    """Each part of the question (question_parts) that no chosen unit answers (names
    PART_SHARE of the part's own words and holds its kinds of value) gets the unit of
    `pool` that does and names most of the part in context (part_weights), stating a
    value no chosen unit states; a part naming nothing of its own ("what do they get
    for it?") takes the best such unit."""
    for part in question_parts(question):
        own = {t: weights[t] for t in query_terms(part) if t in weights}
        kinds = {t for t in own if t in ANSWER_TYPES}
        if len(chosen) >= MAX_SENTENCES or own and any(
                kinds <= u.said and _said_share(u, own) >= PART_SHARE for u in chosen):
            continue
        have = set().union(*(_values(u.text) for u in chosen))
        fits = [u for u in pool if u not in chosen and u.stated and allowed(u)
                and kinds <= u.said and _values(u.text) - have
                and (not own or _said_share(u, own) >= PART_SHARE)]
        context = part_weights(weights, part)
        if fits:
            chosen.append(max(fits, key=lambda u: (round(_said_share(u, context) + u.prior, 2),
                                                   u.evidence)))
    return chosen


def _family(note: dict) -> str:
    """The document a note is a version of: the path its status says supersedes it
    (a log's newer entry: the log itself), else its own path."""
    _, _, newer = note["status"].partition(SUPERSEDED_MARK)
    return newer.split(LOG_ENTRY_MARK)[0].strip() if newer else note["path"]


def _history_order(u: _Unit) -> tuple:
    return (_date_key(u.note) or "9999", u.note["order"])


def _line_key(text: str) -> str:
    m = KEY_RE.match(text)
    return " ".join(terms(m.group(1))) if m else ""


def _changed(u: _Unit, other: list[_Unit]) -> float:
    """How much u reads as an edited line of another version (`other`, its units):
    0 when u holds no value (number, else word) that version lacks; 1 for the same
    "key:" with another value; else the best word overlap (Jaccard) with one of its lines."""
    mine = number_keys(u.text) or set(terms(u.text))
    theirs = set().union(*(number_keys(w.text) or set(terms(w.text)) for w in other))
    if not other or mine <= theirs:
        return 0.0
    key, words = _line_key(u.text), {t for t in terms(u.text) if not t[0].isdigit()}
    best = 0.0
    for w in other:
        if key and key == _line_key(w.text):
            return 1.0
        ws = {t for t in terms(w.text) if not t[0].isdigit()}
        best = max(best, len(words & ws) / (len(words | ws) or 1))
    return best


def _version_lines(units: list[_Unit], family: str, kinds=frozenset()) -> list[_Unit]:
    """One line per version (path, date) of `family`, oldest first: its unit naming
    something asked with the most evidence plus DIFF_WEIGHT times how much it reads as
    the changed line against the previous version (the first: against the next); a
    unit holding the kinds of value asked for (`kinds`: "date" for "what dates") first,
    since a version's line that answers states such a value."""
    versions: dict = {}
    for u in units:
        if _family(u.note) == family:
            versions.setdefault((u.note["path"], u.note["date"]), []).append(u)
    keys = sorted(versions, key=lambda k: _history_order(versions[k][0]))
    out = []
    for i, k in enumerate(keys):
        near = versions[keys[i - 1]] if i else (versions[keys[1]] if len(keys) > 1 else [])
        named = [u for u in versions[k] if u.named]
        if named:
            out.append(max(named, key=lambda u: (kinds <= u.said,
                                                 u.evidence + DIFF_WEIGHT * _changed(u, near))))
    return out


def _select_history(units: list[_Unit], answering: list[_Unit], weights: dict) -> list[_Unit]:
    """Every version of the strongest answer's document (file versions or dated log
    entries) gets a line (_version_lines); then one line per version of other notes
    restating the strongest answer and reading as a changed line of the document
    (_changed >= OTHER_SIMILARITY); oldest first, identical text once. Past
    MAX_SENTENCES the document's own versions go first, then the others."""
    best = _strongest(_best_per_version(answering))
    family = _family(best.note)
    own = _version_lines(units, family, {t for t in weights if t in ANSWER_TYPES})
    mine = [u for u in units if _family(u.note) == family]
    change = {id(u): _changed(u, mine) for u in answering if _family(u.note) != family}
    fit = [u for u in answering if change.get(id(u), 0.0) >= OTHER_SIMILARITY
           and _restates(u, best, weights)]
    per: dict = {}
    for u in fit:  # one line per version of each other note
        key = (u.note["path"], u.note["date"])
        if key not in per or (u.evidence + DIFF_WEIGHT * change[id(u)]
                              > per[key].evidence + DIFF_WEIGHT * change[id(per[key])]):
            per[key] = u
    others = sorted(per.values(), key=lambda u: -u.evidence)
    seen, out = set(), []
    for u in own + others:
        key = " ".join(tokenize(u.text))
        if key not in seen:
            seen.add(key)
            out.append(u)
    if len(out) > MAX_SENTENCES:
        own = _span([u for u in out if u in own], MAX_SENTENCES)
        out = own + _span([u for u in out if u not in own], MAX_SENTENCES - len(own))
    return sorted(out, key=_history_order)


def _span(lines: list[_Unit], n: int) -> list[_Unit]:
    """At most n lines: the oldest and the newest, then the strongest in between."""
    lines = sorted(lines, key=_history_order)
    if len(lines) <= n or n < 2:
        return lines[:n] if n < 2 else lines
    middle = sorted(lines[1:-1], key=lambda u: -u.evidence)[:n - 2]
    return [lines[0]] + [u for u in lines[1:-1] if u in middle] + [lines[-1]]


def _clean(unit: str) -> str:
    return unit.strip().rstrip(" .;,")


def extract_answer(question: str, mode: str, notes: list[dict]) -> str:
    """The cited extractive answer, or ABSTAIN_SENTENCE when no unit answers."""
    units, weights = _units(question, notes)
    answering = [u for u in units if u.answers]
    if not question.strip() or not answering:
        return ABSTAIN_SENTENCE
    if mode == "history":
        picked = _select_history(units, answering, weights)
        return " ".join(
            f"{'Undated' if u.note['date'] == UNDATED else 'On ' + u.note['date']}: "
            f"{_clean(u.text)} [{u.note['id']}]." for u in picked)
    picked = _select_current(answering, [u for u in units if u.partial], weights, mode,
                             question)
    return " ".join(f"{_clean(_present(u.text, mode))} [{u.note['id']}]." for u in picked)


def _present(text: str, mode: str) -> str:
    """Present mode: the sentence without a contrast clause naming the replaced value
    ("racing in X now instead of Y" -> "racing in X now"), unless nothing would stay."""
    cut = CONTRAST_RE.sub("", text) if mode == "present" else text
    return cut if len(tokenize(cut)) >= 2 else text


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
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

OLLAMA_DEFAULT_HOST = "http://127.0.0.1:11434"  # or $OLLAMA_HOST
OLLAMA_TIMEOUT = 120.0        # seconds per request (a cold model load is slow)
OLLAMA_PROBE_TIMEOUT = 1.0    # seconds for auto selection's look at /api/tags
OLLAMA_CONCURRENCY = 4        # judge requests in flight when each item needs its own
OLLAMA_RETRIES = 1            # extra tries after a 5xx or a connection broken mid-reply
EMBED_MODEL = "nomic-embed-text"  # or $VERSO_EMBED_MODEL
EMBED_BATCH = 32              # inputs per /api/embed request
EMBED_CONTEXT = 2048          # tokens nomic-embed-text takes as Ollama serves it
EMBED_CHARS_PER_TOKEN = 3     # conservative (English runs ~4): we cut at 2048 * 3 chars
DOC_PREFIX, QUERY_PREFIX = "search_document: ", "search_query: "
WRITE_MODEL = "verso-writer"  # or $VERSO_WRITE_MODEL; built from ./Modelfile
WRITE_SEED = 42
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


class OllamaEmbedder:
    """Vectors from /api/embed in batches; texts cut by us (never by the server) to fit."""

    name = "ollama"

    def __init__(self, model=None, host=None, timeout=OLLAMA_TIMEOUT, dim=None,
                 context=EMBED_CONTEXT):
        self.model = model or os.environ.get("VERSO_EMBED_MODEL") or EMBED_MODEL
        self.id, self.api = "ollama:" + _bare(self.model), _Ollama(host, timeout)
        self._dim, self.truncated = dim, 0
        self.max_chars = context * EMBED_CHARS_PER_TOKEN

    @property
    def dim(self) -> int:
        if self._dim is None:  # ask the model once
            self._embed([QUERY_PREFIX + "dimension"], None, "probe")
        return self._dim

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
    """/api/chat with thinking off, temperature 0 and a fixed seed, not streamed."""

    name = "ollama"

    def __init__(self, model=None, host=None, timeout=OLLAMA_TIMEOUT):
        self.model = model or os.environ.get("VERSO_WRITE_MODEL") or WRITE_MODEL
        self.api, self.last_stats = _Ollama(host, timeout), {}

    def chat(self, messages, what="chat", options=None, **kw):
        return self.api.call("chat", what, model=self.model, messages=messages, think=False,
                             stream=False, options={"temperature": 0, "seed": WRITE_SEED,
                                                    **(options or {})}, **kw)

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
    writer model's one-token yes/no (or option letter) log-probabilities."""

    name = "ollama"

    def __init__(self, writer=None, decision_model=None, host=None, timeout=OLLAMA_TIMEOUT,
                 systemone=None):
        self.writer = writer or OllamaWriter(host=host, timeout=timeout)
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
        if (answers := self._s1(s1[0], s1[1], stage, ledger)) is not None:
            return _s1_nouls(answers, s1[2], "Ollama System One")
        started, keys = time.perf_counter(), list(prompts)
        pool = ThreadPoolExecutor(OLLAMA_CONCURRENCY)  # one request per item, 4 at a time
        try:
            got = list(pool.map(lambda k: self._yes(prompts[k]), keys))
        finally:
            pool.shutdown(cancel_futures=True)
        _record(ledger, stage, "ollama", self.writer.model, started,
                sum(g[1] for g in got), sum(g[2] for g in got))
        return {k: g[0] for k, g in zip(keys, got)}

    def relevance(self, query, passages, stage="rerank", ledger=None) -> dict:
        return self._nouls(_s1_relevance(query, passages), {k: RELEVANCE_PROMPT.format(
            query=query, **{f: p.get(f) or "" for f in PASSAGE_FIELDS})
            for k, p in passages.items()}, stage, ledger)

    def support(self, claims, stage="verify", ledger=None) -> dict:
        return self._nouls(_s1_support(claims), {k: SUPPORT_PROMPT.format(
            sentence=c["sentence"], sources="\n".join(f"- {s}" for s in c["sources"]))
            for k, c in claims.items()}, stage, ledger)

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


def load_backend(name: str = "auto", judge: str | None = None, idf=None, embed_model=None,
                 write_model=None, index=None, host=None, timeout=OLLAMA_TIMEOUT,
                 probe_timeout=OLLAMA_PROBE_TIMEOUT) -> Backend:
    """The embed/judge/write trio for a backend name; `idf` restores a builtin index and
    `index` (an ingest.Index) brings the embedder its vectors were made with.
    auto: Ollama when it answers and has the models, else builtin (the note says why).
    A backend or judge named explicitly never falls back: BackendError instead."""
    if name not in ("auto", "builtin", "ollama"):
        raise BackendError(f"unknown backend {name!r}: use auto, builtin or ollama")
    if judge not in (None, "builtin", "ollama", "jev"):
        raise BackendError(f"unknown judge {judge!r}: use builtin, ollama or jev")
    em = embed_model or os.environ.get("VERSO_EMBED_MODEL") or EMBED_MODEL
    wm = write_model or os.environ.get("VERSO_WRITE_MODEL") or WRITE_MODEL
    emb, note = getattr(index, "embedder", None), ""
    if name != "builtin":
        needs = [(wm, "completion")] + ([] if emb else [(em, "embedding")])
        if (why := _ollama_unready(host, needs, probe_timeout)) and name == "ollama":
            raise BackendError(why)
        name = "builtin" if why else "ollama"
        note = (f"auto chose builtin: {why}" if why else f"ollama: {wm} writes and judges, "
                + (f"vectors from the index ({emb.id})" if emb else f"{em} embeds"))
    if name == "builtin":
        b = Backend("builtin", emb or BuiltinEmbedder(idf), BuiltinJudge(), BuiltinWriter(),
                    note or "builtin backend (offline)")
    else:
        w = OllamaWriter(wm, host, timeout)
        b = Backend("ollama", emb or OllamaEmbedder(em, host, timeout), OllamaJudge(w), w, note)
    if judge == "builtin":
        b.judge = BuiltinJudge()
    elif judge == "ollama" and not isinstance(b.judge, OllamaJudge):
        if why := _ollama_unready(host, [(wm, "completion")], probe_timeout):
            raise BackendError(why)
        b.judge = OllamaJudge(OllamaWriter(wm, host, timeout))
    elif judge == "jev":
        b.judge = JevJudge(local=b.judge)
    if judge:
        b.note += f"; judge: {judge}" + (f" (private text judged locally by "
                                         f"{b.judge.local.name})" if judge == "jev" else "")
    return b
