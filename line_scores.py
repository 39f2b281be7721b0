"""The builtin reader: what a question asks, what a line states, how well a line answers.

In:  a question; passages or note units (sentences, table rows) to read.
Out: an Ask (terms, kinds of value asked, focus), per-unit features and scores, and the
     builtin judge's probabilities (relevance, support) recorded in a ledger.
Not: composing answers (builtin_writer.py), model clients (models.py), or any file access.
The builtin reader is frozen as the offline floor: its weights are refitted only by
`python tools/fit_reader.py`, and no rules are added to it.
"""

from __future__ import annotations

import functools
import re
import time
from dataclasses import dataclass

import numpy as np

from verso import cost_ledger
from verso import timewords
from verso.textkit import (AUX_WORDS, DAY_WORD, KEY_RE, MONTH_WORD, STOPWORDS, TOKEN_RE,
                     WH_WORDS, count_tokens, evidence_terms, month_term, number_keys, one_of,
                     split_units, stem, terms, tokenize)
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
# fitted by tools/fit_reader.py on questions/dev.jsonl (tests/test_fit_reader.py checks)
READER_BIAS = -7.628        # logit of a unit that names nothing asked and holds no value
W_TEXT = 3.478               # share of the asked terms the unit names in its own words
W_HEADING = 1.089           # share named by its heading trail
W_TITLE = 1.496             # share named by its note's path (title)
W_COVER = 1.437             # share named by the unit, its heading and title together
W_TYPE = 2.251              # it holds a value of the asked kind (a bare number: PARTIAL_CREDIT)
W_NEAR = 0.959              # an asked term's weight share / tokens from it to such a value
W_RANK = 0.884              # the passage's rerank rank: 1 / (1 + rank from 0)
W_LATEST = -0.15           # its note is the latest version (not an older one or entry)
ABSTAIN_LOGIT = -3.658      # evidence below this everywhere: the notes lack the answer
# set by hand, with a reason
PARTIAL_CREDIT = 0.6      # a related form ("changes"/"changed", "paying"/"pay") is most of a match
IDF_FLOOR = 0.1           # the commonest asked word still counts a little
PREFIX_LEN = 5            # words sharing 5 leading letters are related forms ("evolv")
FEATURES = ("text", "heading", "title", "cover", "type", "near", "rank", "latest")

# Words that place a question in time, or only ask, rather than name its topic: the time
# words of timewords.py (phrases taken out whole, single words as terms), the reader's
# own ("so far", "recent") and two that only ask ("tell", "please").
_TIME_VOCAB = (timewords.NOW_WORDS + timewords.LATEST_WORDS + timewords.EARLIER_WORDS
               + timewords.CHANGE_WORDS)
TIME_PHRASE_RE = re.compile(rf"\b{one_of([w for w in _TIME_VOCAB if ' ' in w] + ['so far'])}\b")
TIME_WORDS = frozenset([stem(w) for w in _TIME_VOCAB if " " not in w and w not in STOPWORDS]
                       + ["recent", "recently", "tell", "please"])
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
_WH, _AUX = one_of(WH_WORDS), one_of(AUX_WORDS)
# A question of several parts: split at sentence marks, dashes, and "and" or a comma
# before a wh-word; a piece asking nothing is context of the part after it.
PART_SPLIT_RE = re.compile(rf"[.?!;]+\s+|\s[\u2014\u2013-]+\s|,?\s+and\s+(?={_WH}\b)|"
                           rf",\s+(?={_WH}\b)", re.IGNORECASE)
ASKING_RE = re.compile(rf"^(?:[\w-]+\s+){{0,2}}(?:{_WH}|{_AUX})\b", re.IGNORECASE)


def label(heading: str, title: str) -> str:
    """What labels a line: its heading trail, else (a note without headings) its title."""
    return heading if heading.strip() else title


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


# term -> (words tried against it, the ones _related pairs with it): match then costs
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


def match(term: str, tset) -> float:
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
        if t in ask.names and not any(match(t, d) for d in docs):
            continue
        if idf:
            fam = {p for p in _related_words(t, seen) & seen if p in idf} | ({t} & idf.keys())
            w = min((idf[p] for p in fam), default=max(idf.values(), default=1.0))
        else:
            df = sum(match(t, d) > 0 for d in docs)
            w = float(np.log(1 + (n + 1) / (df + 1)))
        out[t] = float(w) + IDF_FLOOR
    return out


def term_share(weights: dict, tset) -> float:
    """The weighted share of the terms of `weights` that tset names (related forms count
    PARTIAL_CREDIT)."""
    total = sum(weights.values())
    return sum(w * match(t, tset) for t, w in weights.items()) / total if total else 0.0


class Scorer:
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

    def match(self, t: str, tset) -> float:
        if t in tset:
            return 1.0
        if self.related is None or not tset <= self.vocab:
            return match(t, tset)
        return PARTIAL_CREDIT if not self.related[t].isdisjoint(tset) else 0.0

    def share(self, tset) -> float:
        if tset not in self.shares:
            self.shares[tset] = sum(w * self.match(t, tset)
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
              and (c := credit.get(stem(tok.lower()), 0.0)) > 0] + ([(-1, top)] if top else [])
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


def doc_terms(text: str, heading: str, path: str) -> frozenset:
    """A passage's terms, its text, heading and path: what an asked term's weight and
    related words are found among (scorer)."""
    return evidence_terms(f"{text} {heading} {path}")


def scorer(ask: Ask, docs: list, idf=None) -> Scorer:
    """The Scorer of `ask` over passages whose terms are `docs` (doc_terms): each term's
    weight (weights_for) and related words found once among them all."""
    return Scorer(ask, weights_for(ask, docs, idf), set().union(*docs) if docs else set())


def best_evidence(sc: Scorer, text: str, heading: str, path: str) -> float:
    """The evidence logit of a text's best unit (sentence or table row), under its
    heading and note path."""
    return max(evidence(sc.features(u, heading, path)) for u in split_units(text) or ("",))


def sigmoid(z: float) -> float:
    return float(1.0 / (1.0 + np.exp(-z)))


class BuiltinJudge:
    """Relevance (the reader's best unit) and support, without a model."""

    name = "builtin"
    model = JUDGE_MODEL

    def relevance(self, query, passages, stage="rerank", ledger=None, idf=None):
        """P(passage helps answer query) per key: sigmoid(best evidence - ABSTAIN_LOGIT)."""
        return {k: max(ps) for k, ps in
                self.relevance_by_part(query, passages, stage, ledger, idf).items()}

    def evidence(self, query, passages, idf=None) -> dict:
        """Per key: [best evidence logit for the question, for part 1, part 2, ...]."""
        ask, out = analyse(query), {}
        parts = {k: [str(p.get(f, "")) for f in ("text", "heading", "path")]
                 for k, p in passages.items()}
        docs = [doc_terms(*x) for x in parts.values()]
        for a in (ask,) + ask.parts:
            sc = scorer(a, docs, idf)
            for k, (text, heading, path) in parts.items():
                out.setdefault(k, []).append(best_evidence(sc, text, heading, path))
        return out

    def relevance_by_part(self, query, passages, stage="rerank", ledger=None, idf=None):
        """Per key: [P(whole question), P(part 1), ...] (the parts only when several)."""
        started = time.perf_counter()
        out = {k: [sigmoid(z - ABSTAIN_LOGIT) for z in zs]
               for k, zs in self.evidence(query, passages, idf).items()}
        text = query + "".join(p.get("text", "") for p in passages.values())
        cost_ledger.record(ledger, stage, "builtin", JUDGE_MODEL, started, count_tokens(text))
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
            cov = (sum(match(t, tset) for t in sterms) / len(sterms)) if sterms else 1.0
            nums = number_keys(sentence)
            share = len(nums & number_keys(sources)) / len(nums) if nums else 1.0
            out[key] = cov if share == 1.0 else cov * share / 2
        cost_ledger.record(ledger, stage, "builtin", JUDGE_MODEL, started, size)
        return out
