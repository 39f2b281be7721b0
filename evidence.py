"""evidence: the passages handed on to every reader (the builtin reader, a model, MCP).

Stage: evidence, after rerank and version.settle; every reader gets what select returns.
In:  the question, the settled candidates (ranked, labelled by version.py), the time
     mode, a word budget (optional), the index and the query vector.
Out: the evidence: Candidate copies in reading order, each one passage of one note,
     labelled with its date, whether it is current, and when not, superseded_by and why
     (a newer version, a newer log entry, or a newer dated statement in another note).
Not: ranking (rerank.py), deciding versions from dates (version.py), choosing sections
     (passages.py), writing. Its tests of what a line states are the builtin reader's
     (line_scores.py, builtin_writer.py), read only.

Rules, decided by code:
- A budget (MCP, a model writer, --budget): notes as the unit, filled to the budget by
  the fitted ranker (passages.py); every version labelled, none left out. Defaults per
  reader: MCP_WORDS for a host, a model writer's from its context (reader_budget).
- No budget: the builtin reader's own, its first KEEP passages whole (PERIOD_KEEP for
  a question about a period, whose notes retrieval already kept inside the period). In
  present and as-of mode an older version is left out of these only when a newer one
  among them restates the asked fact (restates): one line of it answers with a value of
  the asked kind and names, in itself, its heading or its note's title, every asked term
  the older version's answering line names word for word (all but one when that line
  names QUALIFIED or more). The frozen reader takes the line naming the asked terms
  best whatever its label, so a restated older version would mislead it; a model or a
  host, given a budget, reads the labels.
- A newer dated statement in another note (label_statements): a current passage is
  labelled superseded (why: WHY_STATEMENT) when one of its lines and a line of a
  later-dated passage of another document name an asked field and state different
  values (statement_pairs) and one fitted model (STATEMENT_FEATURES: the field both
  name, the values, how each line answers, the two passages' likeness and titles, the
  days between, whether the newer says the value changed, how alike the two lines'
  words mean: word_vectors) gives P(the newer replaces it) >= STATEMENT_CUT;
  tools/fit_statements.py fits it on the tuning splits (at 1,000 words) and picks the
  lowest cut whose held-out labels are right at least twice as often as wrong.
- "When did I last ...", "the first time I ...": the latest (earliest) mention of what
  is asked (the sentence naming most of its words) comes first, whatever its rank
  (retrieval added the latest and earliest mentions it found: retrieve._mentions).
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath

import numpy as np

from verso import asof
from verso import builtin_writer
from verso import generate
from verso import line_scores
from verso import passages
from verso import rerank
from verso import textkit
from verso import timewords
from verso import version
from verso import word_vectors
from verso.retrieve import Candidate
from verso.textkit import INSTRUCTION_RE, evidence_terms

WHY_STATEMENT = builtin_writer.STATEMENT_WHY + " ({})"   # Candidate.why of a statement label
STATEMENT_FEATURES = ("shared", "covered", "old_fields", "new_fields", "changed",
                      "restates", "old_reader", "new_reader", "old_answers",
                      "new_answers", "dense", "title", "days", "undated", "new_revises",
                      "old_revises", "old_rank", "new_rank", "revised_field", "meaning")
# ---- FITTED: tools/fit_statements.py --write (raw-scale weights; do not edit by hand)
STATEMENT_BIAS = -10.2877
STATEMENT_WEIGHTS = {
    "shared": 4.2196, "covered": -0.7808, "old_fields": -0.9571, "new_fields": -1.3853,
    "changed": 0.222, "restates": 0.4693, "old_reader": 0.303, "new_reader": 0.8057,
    "old_answers": 0.45, "new_answers": 0.2063, "dense": 1.4188, "title": 0.8804,
    "days": 0.7047, "undated": 0.6236, "new_revises": 0.9113, "old_revises": -0.1519,
    "old_rank": 1.9561, "new_rank": 2.4858, "revised_field": 0.2695, "meaning": 3.9298}
# ---- end FITTED
STATEMENT_CUT = 0.1     # a pair labels at this P (tools/fit_statements.py --write: of its
                        # CUTS, the lowest whose held-out labels are right at least twice
                        # as often as wrong)
YEAR = 365              # days: a later statement's distance, counted up to a year
QUALIFIED = 3           # a line naming this many asked fields may lose one in a rewrite
KEEP = 5                # the builtin reader's own evidence: the first KEEP passages, whole
BUDGET_WORDS = None     # ask()'s default: the reader's own (reader_budget)
MCP_WORDS = 1000        # a host's default: of 300, 600 and 1,000 words the one handing on
                        # most key facts on the tuning splits (tools/fit_evidence.py), at
                        # most 1,000 (hosts ask for more with budget)
POOL_WORDS = 25         # a budget's candidates: one per this many words, at least
                        # retrieve.DEFAULT_K (tuning, at 1,000 words: k 20, 40, 60 hand
                        # on every key fact for 173, 175, 175 of 181 questions)
WORDS_PER_TOKEN = 0.75  # English prose: about three words to four tokens
NOTES_SHARE = 0.5       # of a model's context left after its reply: half for the notes,
                        # half for the instructions, labels and line numbers around them
PERIOD_KEEP = 10        # no budget, a question about a period: every note of it, to this
MENTION_POOL = 15       # "the last time": the candidates its latest mention is found among


def _note(c: Candidate, order: int, written: bool = False) -> dict:
    """A candidate as the builtin reader reads a note (builtin_writer.parse_prompt's dicts);
    written: its text as written, without the days timewords added."""
    text = c.chunk.get("text", "").strip()
    return {"id": f"c{order + 1}", "path": c.path, "section": c.chunk.get("heading") or "-",
            "date": c.date, "status": generate.note_status(c), "order": order,
            "text": timewords.as_written(text) if written else text}


def _lead(units: list):
    """The unit of one note that answers best, None when none answers."""
    answering = [u for u in units if u.answers]
    return max(answering, key=lambda u: (u.ev, -u.at)) if answering else None


def candidates_for(budget: int) -> int:
    """The candidates retrieval returns for a word budget (POOL_WORDS)."""
    return budget // POOL_WORDS


def reader_budget(writer) -> int | None:
    """The words a reader gets by default: a model writer, NOTES_SHARE of its context
    after its reply (at most MCP_WORDS); the builtin reader None (its own KEEP)."""
    ctx = getattr(writer, "num_ctx", None)
    if not isinstance(ctx, int):
        return None
    reply = getattr(writer, "reply_tokens", 0) or 0
    return max(100, min(MCP_WORDS, int((ctx - reply) * NOTES_SHARE * WORDS_PER_TOKEN)))


def select(question: str, cands: list[Candidate], budget: int | None = None,
           history: bool = False, keep: int | None = None, index=None,
           qvec=None, present: bool = False, also=(), when=None) -> list[Candidate]:
    """The evidence from the ranked candidates: with a budget, notes as the unit
    (passages.choose: each chosen note one passage, filled to `budget` words, `keep`
    notes at most); without one, the builtin reader's own first `keep` candidates
    whole (KEEP; PERIOD_KEEP for a question about a period; in present mode less the
    older versions a newer one restates: _first). A "last time" question's latest
    mention comes first. also: other wordings of the question (searchwords.find), whose
    words a section's BM25 counts too. when: the days the question asks about (first,
    last, in force); of a cut section's lines the reader reads alike, one stating them
    is kept first (passages.dated_fit)."""
    order = getattr(index, "date_order", "ymd")     # the vault's digit dates (store_load)
    period = asof.names_period(question, order)
    first = []
    if not period and asof.ordinal(question):
        cands = _mention_first(question, cands, order)
        first = cands[:1]
    if budget is not None:
        return passages.choose(question, cands, index, qvec, budget, history=history,
                               notes=keep, first=first, also=also, when=when)
    keep = keep or (PERIOD_KEEP if period else KEEP)
    return _first(question, cands, keep) if present else cands[:keep]


def _first(question: str, cands: list[Candidate], keep: int) -> list[Candidate]:
    """The builtin reader's own evidence: the first `keep` candidates, less each older
    version that a newer one among them restates (restates: the frozen reader takes the
    line that names the asked terms best, whatever its label, so a restated older
    version would mislead it; every reader given a budget gets it, labelled)."""
    restated, out = restates(question), []
    for c in cands:
        by = _superseder_in(c, cands)
        if by is None or not _answers(by) or not restated(by, c):
            out.append(c)
        else:
            c.dropped = version.DROP_REASON.format(c.superseded_by)   # shown in the trace
    return out[:keep]


def _answers(c: Candidate) -> bool:
    return c.relevance is None or c.relevance >= rerank.RELEVANCE_THRESHOLD


def _superseder_in(c: Candidate, cands: list[Candidate]) -> Candidate | None:
    """The candidate c's label names (a newer version, or the newer entry of its log)."""
    if not c.superseded_by:
        return None
    path, _, day = c.superseded_by.partition(version.SECTION_MARK)
    return next((x for x in cands if x is not c and x.path == path
                 and (not day or x.chunk.get("section_date") == day)), None)


def _mention_first(question: str, cands: list[Candidate],
                   date_order: str = "ymd") -> list[Candidate]:
    """cands with the latest mention ("first": the earliest) of what the question asks
    after first: the best among the first POOL by asof.mention_ranker (the sentence
    naming the most of its words, then the day), inside the year or day it names. (The
    judge's relevance is not asked: a when-question names no value, and the builtin
    judge rates every passage of such a question low.)"""
    rank = asof.mention_ranker(question, None, date_order)
    keyed = [(key, -i) for i, c in enumerate(cands[:MENTION_POOL])
             if (key := rank(c.chunk.get("text", ""),
                             None if c.date == builtin_writer.UNDATED else c.date))]
    if not keyed:
        return cands
    i = -max(keyed)[1]
    return [cands[i], *cands[:i], *cands[i + 1:]]


def _units_by_candidate(ask, cands, written: bool = False) -> list[list]:
    """The builtin reader's scored lines of each candidate, scored together (IDF over
    them all), in the candidates' order; written: of the text as written (what a note
    states, not the days resolved from its time words)."""
    units = builtin_writer.unit_rows(ask, [_note(c, i, written) for i, c in enumerate(cands)])
    out: list[list] = [[] for _ in cands]
    for u in units:
        out[u.note["order"]].append(u)
    return out


def _fields(u, ask) -> frozenset:
    """The asked terms a line names word for word, in itself or its heading: the field
    it states (a related form, "pay" for "paying", is no field of its own)."""
    return frozenset(ask.terms) & (evidence_terms(u.text) | evidence_terms(u.note["section"]))


def restates(question: str):
    """The test of version.settle: restated(newer, older) is True when the newer
    candidate restates the fact the older one states for this question (see the module's
    rules), so the older one may leave the evidence; an older one that states nothing
    asked leaves whenever a newer one answers."""
    ask = line_scores.analyse(question)

    def restated(newer: Candidate, older: Candidate) -> bool:
        old, new = _units_by_candidate(ask, [older, newer], written=True)
        lead = _lead(old)
        if lead is None:
            return True
        fields = _fields(lead, ask)
        allowed = 1 if len(fields) >= QUALIFIED else 0
        return any(u.answers and line_scores.holds(u.text, ask.kinds) and len(
            fields - _fields(u, ask) - builtin_writer.label_terms(u.note)) <= allowed for u in new)
    return restated


def _document(c: Candidate) -> str:
    return c.chunk.get("family") or c.path


def label_statements(question: str, kept: list[Candidate], index=None) -> list[Candidate]:
    """kept, where a current passage one of whose lines a later-dated passage of another
    document replaces (statement_pairs, scored by replaces) is a copy labelled
    superseded by it (the newest such; why: WHY_STATEMENT). A log's own later entry
    labels its undated header (passages.LOG_HEADER) the same way. `index` gives the
    passages' vectors (the pair's dense likeness; 0 without it)."""
    newer: dict[int, set] = {}
    for i, j, _, _, features in statement_pairs(question, kept, index):
        if replaces(features) >= STATEMENT_CUT:
            newer.setdefault(i, set()).add(j)
    out = list(kept)
    for i, js in newer.items():
        x, by = kept[i], kept[max(js, key=lambda j: (kept[j].date, -j))]
        own = by.path == x.path         # a log's own later entry: its header is older
        label = f"{by.path}{version.SECTION_MARK}{by.date}" if own else by.path
        out[i] = dataclasses.replace(x, superseded_by=label, why=version.WHY_ENTRY
                                     if own else WHY_STATEMENT.format(by.date))
    return out


def statement_pairs(question: str, kept: list[Candidate], index=None) -> list[tuple]:
    """(i, j, older line, newer line, features) for every pair of lines that could be
    a value and its replacement: the older line in a current passage kept[i], the newer
    in kept[j], a later-dated passage of another document (or of the log whose undated
    header kept[i] is), not one as of a date set aside; each line names an asked term
    (in itself or its heading) and states a value of a kind the question asks
    (line_scores.analyse: an amount, a count, a date, a name, a place...; asking none, a
    number or a name), the two share an asked term, and the newer states a value the
    older does not. Lines addressing the assistant are never read."""
    ask = line_scores.analyse(question)
    if len(kept) < 2 or not ask.terms:
        return []
    stating = {}
    for i, units in enumerate(_units_by_candidate(ask, kept, written=True)):
        own = [(u, f, v) for u in units if not INSTRUCTION_RE.search(u.text)
               and (f := _fields(u, ask)) and (v := _values(u, ask, f))]
        if own:
            stating[i] = own
    lines = _line_reads(ask, kept, stating)
    likeness = _likeness(index, kept)
    out = []
    for i, x in enumerate(kept):
        if x.superseded_by or not x.is_latest or i not in stating:
            continue
        for j in stating:
            y = kept[j]
            if y.chunk.get(builtin_writer.SET_ASIDE) or not (y.date != builtin_writer.UNDATED
                    and (x.date == builtin_writer.UNDATED or y.date > x.date)
                    and (_document(y) != _document(x) or x.chunk.get(passages.LOG_HEADER))):
                continue
            pair = _passage_pair(x, y, likeness[i, j])
            out.extend((i, j, old[0], new[0], _pair_features(pair, lines, old, new))
                       for old in stating[i] for new in stating[j]
                       if old[1] & new[1] and not new[2] <= old[2])
    return out


def replaces(features: dict) -> float:
    """P(the newer line replaces the older line's value): the fitted model."""
    z = STATEMENT_BIAS + sum(STATEMENT_WEIGHTS[k] * features[k] for k in STATEMENT_FEATURES)
    return line_scores.sigmoid(z)


def _line_reads(ask, kept: list[Candidate], stating: dict) -> dict:
    """What a pair's features read of each stating line, once a line: "weight" -> the
    IDF share of a set of asked terms (over the evidence), and id(unit) -> (the reader's
    P, whether it answers, whether it says a value changed, 1 / (1 + its rank among the
    stating lines by the reader's score), the terms labelling it, its words' unit vector
    (word_vectors: "insurance now £39.80" is near "Insurance: Admiral, £46.20"))."""
    idf = line_scores.weights_for(ask, [evidence_terms(
        f"{c.chunk.get('text') or ''} {c.chunk.get('heading') or ''} {c.path}") for c in kept])
    total, seen = sum(idf.values()) or 1.0, {}

    def weight(terms: frozenset) -> float:
        if terms not in seen:
            seen[terms] = sum(idf.get(t, 0.0) for t in terms) / total
        return seen[terms]
    units = [u for own in stating.values() for u, _, _ in own]
    meant = word_vectors.vectors([u.text for u in units]) if units else None
    rank: dict[float, int] = {}
    for k, ev in enumerate(sorted((u.ev for u in units), reverse=True)):
        rank.setdefault(ev, k)
    return {"weight": weight, **{id(u): (
        line_scores.sigmoid(u.ev), float(u.answers),
        float(bool(textkit.REVISION_RE.search(u.text))), 1.0 / (1 + rank[u.ev]),
        builtin_writer.label_terms(u.note), meant[k]) for k, u in enumerate(units)}}


def _passage_pair(x: Candidate, y: Candidate, dense: float) -> dict:
    """The features of a pair that its passages decide, x older than y."""
    undated = x.date == builtin_writer.UNDATED
    return {"dense": float(dense), "title": _title_share(x.path, y.path),
            "days": 0.0 if undated else min(_days(x.date, y.date), YEAR) / YEAR,
            "undated": float(undated)}


def _days(a: str, b: str) -> int:
    """Days from date a to date b (YYYY-MM-DD, or a month or year); 0 when either is
    no date."""
    try:
        return max(0, int((np.datetime64(b[:10], "D") - np.datetime64(a[:10], "D"))
                          .astype(int)))
    except ValueError:
        return 0


def _pair_features(pair: dict, lines: dict, old: tuple, new: tuple) -> dict:
    """STATEMENT_FEATURES of one older line and one newer line, each (unit, the asked
    terms it names, the values it states), `pair` their passages' (_passage_pair),
    `lines` what _line_reads read of each."""
    (o, f_old, v_old), (n, f_new, v_new) = old, new
    weight = lines["weight"]
    o_p, o_answers, o_revises, o_rank, _, o_vec = lines[id(o)]
    n_p, n_answers, n_revises, n_rank, n_labels, n_vec = lines[id(n)]
    shared = weight(f_old & f_new)
    return {**pair, "shared": shared, "covered": float(f_old <= f_new | n_labels),
            "old_fields": weight(f_old), "new_fields": weight(f_new),
            "changed": len(v_new - v_old) / len(v_new | v_old),
            "restates": float(v_old <= v_new),
            "old_reader": o_p, "new_reader": n_p, "old_answers": o_answers,
            "new_answers": n_answers, "new_revises": n_revises, "old_revises": o_revises,
            "old_rank": o_rank, "new_rank": n_rank,
            "revised_field": n_revises * shared,   # a change said of the field
            "meaning": float(o_vec @ n_vec)}


def _likeness(index, kept: list[Candidate]) -> np.ndarray:
    """Cosine of every two passages' vectors (their chunks'); zeros without an index."""
    n = len(kept)
    vectors = getattr(index, "vectors", None)
    if vectors is None or n == 0:
        return np.zeros((n, n))
    m = word_vectors.unit(np.asarray(vectors[np.asarray([c.id for c in kept])],
                                     dtype=np.float64))
    return m @ m.T


def _title_share(a: str, b: str) -> float:
    """The terms two notes' titles (file names) share, of those either has."""
    ta, tb = (set(textkit.terms(PurePosixPath(p).stem)) for p in (a, b))
    return len(ta & tb) / len(ta | tb) if ta | tb else 0.0


def _values(u, ask, fields) -> frozenset:
    """The values of the asked kinds a line states, less the asked terms themselves."""
    return frozenset(builtin_writer.stated_values(u, ask.kinds)) - fields - frozenset(ask.terms)
