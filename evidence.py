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
- A newer dated statement in another note (label_statements): a current passage whose
  line states a value of an asked field that a later-dated passage of another document
  states otherwise is labelled superseded (why: WHY_STATEMENT).
- "When did I last ...", "the first time I ...": the latest (earliest) mention of what
  is asked (the sentence naming most of its words) comes first, whatever its rank
  (retrieval added the latest and earliest mentions it found: retrieve._mentions).
"""

from __future__ import annotations

import dataclasses

from verso import asof
from verso import builtin_writer
from verso import generate
from verso import line_scores
from verso import passages
from verso import rerank
from verso import timewords
from verso import version
from verso.retrieve import Candidate
from verso.textkit import INSTRUCTION_RE, evidence_terms

WHY_STATEMENT = builtin_writer.STATEMENT_WHY + " ({})"   # Candidate.why of a statement label
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
           qvec=None, present: bool = False) -> list[Candidate]:
    """The evidence from the ranked candidates: with a budget, notes as the unit
    (passages.choose: each chosen note one passage, filled to `budget` words, `keep`
    notes at most); without one, the builtin reader's own first `keep` candidates
    whole (KEEP; PERIOD_KEEP for a question about a period; in present mode less the
    older versions a newer one restates: _first). A "last time" question's latest
    mention comes first."""
    period = asof.names_period(question)
    first = []
    if not period and asof.ordinal(question):
        cands = _mention_first(question, cands)
        first = cands[:1]
    if budget is not None:
        return passages.choose(question, cands, index, qvec, budget, history=history,
                               notes=keep, first=first)
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


def _mention_first(question: str, cands: list[Candidate]) -> list[Candidate]:
    """cands with the latest mention ("first": the earliest) of what the question asks
    after first: the best among the first POOL by asof.mention_ranker (the sentence
    naming the most of its words, then the day), inside the year or day it names. (The
    judge's relevance is not asked: a when-question names no value, and the builtin
    judge rates every passage of such a question low.)"""
    rank = asof.mention_ranker(question, None)
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


def label_statements(question: str, kept: list[Candidate]) -> list[Candidate]:
    """kept, where a current passage whose statement of an asked field a later-dated
    passage of another document states with another value is a copy labelled superseded
    by it (the newest such; why: WHY_STATEMENT). A value of any kind the question asks
    (line_scores.analyse: an amount, a count, a date, a name, a place...); a question asking
    no kind of value ("why did ...") has no value to replace. Both lines must name the
    same asked field (they share an asked term, in themselves or their headings, and
    every one the older line names the newer names too, or its note's title does), so
    a label never joins two lines sharing no asked term; a newer line that restates
    every old value beside a new one (a record of past values) does not contradict it.
    A log's own later entry labels its undated header (passages.LOG_HEADER) the same
    way."""
    ask = line_scores.analyse(question)
    if len(kept) < 2 or not ask.terms or not ask.kinds:
        return kept                      # no kind of value asked: no value to replace
    stating = {}
    for i, units in enumerate(_units_by_candidate(ask, kept, written=True)):
        own = [(u, f, v) for u in units if not INSTRUCTION_RE.search(u.text)
               and (f := _fields(u, ask)) and (v := _values(u, ask, f))]
        if own:
            stating[i] = own
    out = list(kept)
    for i, x in enumerate(kept):
        if x.superseded_by or not x.is_latest or i not in stating:
            continue
        newer = [j for j in stating if kept[j].date != builtin_writer.UNDATED
                 and (x.date == builtin_writer.UNDATED or kept[j].date > x.date)
                 and (_document(kept[j]) != _document(x) or x.chunk.get(passages.LOG_HEADER))
                 and _contradicts(stating[j], stating[i])]
        if newer:
            by = kept[max(newer, key=lambda j: (kept[j].date, -j))]
            own = by.path == x.path         # a log's own later entry: its header is older
            label = f"{by.path}{version.SECTION_MARK}{by.date}" if own else by.path
            out[i] = dataclasses.replace(x, superseded_by=label, why=version.WHY_ENTRY
                                         if own else WHY_STATEMENT.format(by.date))
    return out


def _values(u, ask, fields) -> frozenset:
    """The values of the asked kinds a line states, less the asked terms themselves."""
    return frozenset(builtin_writer.stated_values(u, ask.kinds)) - fields - frozenset(ask.terms)


def _contradicts(newer: list, older: list) -> bool:
    """Some newer line names the field an older line names and states a value it does
    not, without restating all of the older line's values."""
    return any(f_old & f_new and f_old <= f_new | builtin_writer.label_terms(n.note)
               and not v_new <= v_old
               and not v_old <= v_new
               for _, f_old, v_old in older for n, f_new, v_new in newer)
