"""evidence: the passages handed on to every reader (the builtin reader, a model, MCP).

Stage: evidence, after rerank and version.settle; every reader gets what select returns.
In:  the question, the settled candidates (ranked, marked by version.py), the time mode,
     a word budget (optional).
Out: the evidence: Candidate copies in reading order, each one passage of one note,
     labelled with its date, whether it is current, and when not, superseded_by and why
     (a newer version, a newer log entry, or a newer dated statement in another note).
     restates(question) is the test version.settle sets an older version aside by.
Not: ranking (rerank.py), deciding versions from dates (version.py), writing. Its tests
     of what a line states are the builtin reader's (reader.py, extract.py), read only.
     Tried and taken out (docs/results.md, "The evidence"): the answering section of a
     leading note brought in, and one passage per note first for a question across
     notes; neither changed a key fact handed on in the tuning splits, and they lost
     three in the frozen ones.

Rules, decided by code:
- Label, don't hide: an older version is set aside only when a newer version restates
  the asked fact: one line of it answers with a value of the asked kind and names, in
  itself, its heading or its note's title, every asked term the older version's
  answering line names word for word (all but one when that line names QUALIFIED or
  more: a rewrite drops a qualifier, "Lisbon rent budget" becomes "rent budget"). A
  newer version that only mentions the field ("the deposit certificate is filed") does
  not restate it. Otherwise the older one stays, labelled superseded, and can be cited
  for what only it holds.
- A newer dated statement in another note: a current passage whose answering line states
  an amount, measure, duration, time, percent or date of an asked field is labelled
  superseded (why: WHY_STATEMENT) when a passage of another document, dated later, has
  an answering line naming the same asked terms and stating another value of that kind,
  and nowhere states the old value (the builtin writer's rule for the newest statement).
- A question about a period ("what did I note about the lodger in February"): up to
  PERIOD_KEEP passages, not KEEP: it asks for every note of the period, and retrieval
  already kept the evidence inside the period (retrieve.py), so more passages add
  notes of the period, never ones from outside it.
- "When did I last ...", "the first time I ...": the latest (earliest) mention of what
  is asked among the passages (the sentence naming most of its words) comes first, so
  it is handed on whatever its rank (retrieval added the latest and earliest mentions
  it found: retrieve._mentions).
- A budget (optional): as many passages as fit, each over PASSAGE_WORDS cut to the lines
  the builtin reader scores best; without one, the first KEEP passages whole.
"""

from __future__ import annotations

import dataclasses

from verso import asof
from verso import extract
from verso import generate
from verso import passages
from verso import reader
from verso import rerank
from verso import timewords
from verso import version
from verso.retrieve import Candidate
from verso.textkit import INSTRUCTION_RE, evidence_terms

WHY_STATEMENT = extract.STATEMENT_WHY + " ({})"   # Candidate.why of a statement label
QUALIFIED = 3           # a line naming this many asked fields may lose one in a rewrite
KEEP = 5                # the builtin reader's own evidence: the first KEEP passages, whole
BUDGET_WORDS = None     # ask()'s default: the reader's own (reader_budget)
MCP_WORDS = 1000        # a host's default: of 300, 600 and 1,000 words the one handing on
                        # most key facts on the tuning splits (tools/fit_evidence.py), at
                        # most 1,000 (hosts ask for more with budget)
WORDS_PER_TOKEN = 0.75  # English prose: about three words to four tokens
NOTES_SHARE = 0.5       # of a model's context left after its reply: half for the notes,
                        # half for the instructions, labels and line numbers around them
MAX_PASSAGES = 10       # with a budget, at most this many passages, however short
PERIOD_KEEP = MAX_PASSAGES   # a question about a period: every note of it, to this many
POOL = 15               # the ranked candidates the evidence is chosen from
PASSAGE_WORDS = 70      # a longer passage is cut to its answering lines (in note order)
HISTORY_WORDS = 70      # a change question: each version's answering lines
ELIDED = "…"            # stands where a cut passage leaves lines out
STATEMENT_KINDS = frozenset({"money", "measure", "duration", "clock", "percent", "date"})
# values a later note corrects; a bare count or a name is too common in notes to say so


def _note(c: Candidate, order: int, written: bool = False) -> dict:
    """A candidate as the builtin reader reads a note (extract.parse_prompt's dicts);
    written: its text as written, without the days timewords added."""
    text = c.chunk.get("text", "").strip()
    return {"id": f"c{order + 1}", "path": c.path, "section": c.chunk.get("heading") or "-",
            "date": c.date, "status": generate.note_status(c), "order": order,
            "text": timewords.as_written(text) if written else text}


def _lead(units: list):
    """The unit of one note that answers best, None when none answers."""
    answering = [u for u in units if u.answers]
    return max(answering, key=lambda u: (u.ev, -u.at)) if answering else None


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
    """The evidence from the ranked candidates: without a budget the first `keep` (KEEP)
    candidates whole (the builtin reader's own); with one, notes as the unit
    (passages.choose: each chosen note one passage, filled to `budget` words, `keep`
    notes at most). A question about a period keeps up to PERIOD_KEEP passages when
    `keep` is not given; a "last time" question's latest mention comes first."""
    first = []
    if keep is None and asof.names_period(question):
        keep = PERIOD_KEEP
    elif asof.ordinal(question):
        cands = _mention_first(question, cands)
        first = cands[:1] if cands else []
    if budget is None:
        return _first(question, cands, keep or KEEP) if present else cands[:keep or KEEP]
    return passages.choose(question, cands, index, qvec, budget, history=history,
                           notes=keep, first=first)


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
    keyed = [(key, -i) for i, c in enumerate(cands[:POOL])
             if (key := rank(c.chunk.get("text", ""),
                             None if c.date == extract.UNDATED else c.date))]
    if not keyed:
        return cands
    i = -max(keyed)[1]
    return [cands[i], *cands[:i], *cands[i + 1:]]


def _units_by_candidate(ask, cands, written: bool = False) -> list[list]:
    """The builtin reader's scored lines of each candidate, scored together (IDF over
    them all), in the candidates' order; written: of the text as written (what a note
    states, not the days resolved from its time words)."""
    units = extract.unit_rows(ask, [_note(c, i, written) for i, c in enumerate(cands)])
    out: list[list] = [[] for _ in cands]
    for u in units:
        out[u.note["order"]].append(u)
    return out


def _cut(c: Candidate, units: list, cap: int) -> str:
    """The passage's text, or when longer than cap words its best lines (answering
    first, then by evidence) up to cap words, in note order, ELIDED where lines are left
    out."""
    text = c.chunk.get("text", "")
    if len(text.split()) <= cap or not units:
        return text
    ranked = sorted(units, key=lambda u: (not u.answers, -u.ev, u.at))
    keep, words = set(), 0
    for u in ranked:
        n = len(u.text.split())
        if keep and words + n > cap:
            continue
        keep.add(u.at)
        words += n
    lines, last = [], -1
    for u in sorted((u for u in units if u.at in keep), key=lambda u: u.at):
        if u.at != last + 1:
            lines.append(ELIDED)
        lines.append(u.text)
        last = u.at
    if last != len(units) - 1:
        lines.append(ELIDED)
    return "\n\n".join(lines)     # blank lines: no two lines read as one wrapped line


def _fields(u, ask) -> frozenset:
    """The asked terms a line names word for word, in itself or its heading: the field
    it states (a related form, "pay" for "paying", is no field of its own)."""
    return frozenset(ask.terms) & (evidence_terms(u.text) | evidence_terms(u.note["section"]))


def restates(question: str):
    """The test of version.settle: restated(newer, older) is True when the newer
    candidate restates the fact the older one states for this question (see the module's
    rules), so the older one may leave the evidence; an older one that states nothing
    asked leaves whenever a newer one answers."""
    ask = reader.analyse(question)

    def restated(newer: Candidate, older: Candidate) -> bool:
        old, new = _units_by_candidate(ask, [older, newer], written=True)
        lead = _lead(old)
        if lead is None:
            return True
        fields = _fields(lead, ask)
        allowed = 1 if len(fields) >= QUALIFIED else 0
        return any(u.answers and reader.holds(u.text, ask.kinds) and len(
            fields - _fields(u, ask) - extract.label_terms(u.note)) <= allowed for u in new)
    return restated


def _document(c: Candidate) -> str:
    return c.chunk.get("family") or c.path


def label_statements(question: str, kept: list[Candidate]) -> list[Candidate]:
    """kept, where a current passage whose statement of an asked field a later-dated
    passage of another document states with another value is a copy labelled superseded
    by it (the newest such; why: WHY_STATEMENT). A value of any kind: of the kinds the
    question asks (reader.analyse), else any number or name. Both lines must name the
    same asked field (they share an asked term, in themselves or their headings, and
    every one the older line names the newer names too, or its note's title does), so
    a label never joins two lines sharing no asked term; a newer line that restates every old value beside a new one
    (a record of past values) does not contradict it."""
    ask = reader.analyse(question)
    if len(kept) < 2 or not ask.terms:
        return kept
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
        newer = [j for j in stating if kept[j].date != extract.UNDATED
                 and (x.date == extract.UNDATED or kept[j].date > x.date)
                 and _document(kept[j]) != _document(x)
                 and _contradicts(stating[j], stating[i])]
        if newer:
            by = kept[max(newer, key=lambda j: (kept[j].date, -j))]
            out[i] = dataclasses.replace(x, superseded_by=by.path,
                                         why=WHY_STATEMENT.format(by.date))
    return out


def _values(u, ask, fields) -> frozenset:
    """The values a line states: of the asked kinds, else its numbers and names, less
    the asked terms themselves."""
    got = (extract.stated_values(u, ask.kinds) if ask.kinds else extract.values(u.text))
    return frozenset(got) - fields - frozenset(ask.terms)


def _contradicts(newer: list, older: list) -> bool:
    """Some newer line names the field an older line names and states a value it does
    not, without restating all of the older line's values."""
    return any(f_old & f_new and f_old <= f_new | extract.label_terms(n.note)
               and not v_new <= v_old
               and not v_old <= v_new
               for _, f_old, v_old in older for n, f_new, v_new in newer)
