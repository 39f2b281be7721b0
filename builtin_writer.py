"""The builtin writer: the writer protocol, the note-prompt format, and extractive
answers cited line by line.

In:  a WriteRequest (generate.request writes it): the messages a model is sent (numbered,
     dated notes; the time mode; the question) and beside them the structure they were
     written from: the question, the time mode, the notes as this reader reads them.
Out: a Written: an answer whose sentences are the reader's best units with their [cN]
     citations, or the abstain sentence; one ledger row per call.
Not: scoring lines (line_scores.py) or calling a model; reading the prompt text back (only
     parse_prompt does, for prompts recorded in runs). The protocol and the prompt format
     live here so that generate (which writes requests) and every writer (this one,
     choosing_writer.py, models.py) share one home and models.py imports no stage.

The writer protocol: every writer (builtin, choosing, model, registry, the tests' fakes)
has `write(request: WriteRequest, stage="generate", ledger=None) -> Written`. What a
writer needs for one question goes in with the request (a chooser's calibrated policy
too); what it did comes back in the Written (its trace). Nothing is set on a writer or
read off it between questions.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

import numpy as np

from verso import cost_ledger
from verso.line_scores import (VALUE_RES, W_LATEST, W_RANK, Ask, analyse, doc_terms, evidence,
                               holds, label, match, scorer, sigmoid, value_tokens)
from verso.textkit import (INSTRUCTION_RE, KEY_RE, STOPWORDS, TOKEN_RE, count_tokens,
                     evidence_terms, number_key, number_keys, split_units, terms)
WRITER_MODEL = "builtin-writer-v2"
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
STATEMENT_WHY = "a newer dated statement in another note"   # evidence.py's label: no version
SET_ASIDE = "set_aside"   # chunk key of a passage as-of set aside, handed on labelled
STATUS_SET_ASIDE = "not in force on the day asked"   # its status: "... (not yet written on
                                                     # DAY ...)"; the builtin reader skips it
MAX_SENTENCES = 5
REPLACES = "; this replaces the statement in {title} ({date}) [{id}]"


@dataclass(frozen=True)
class WriteRequest:
    """What a writer is handed for one question."""
    messages: list                # exactly what a model is sent: system rules, one user
    #                               message (numbered, dated notes, time mode, question)
    question: str = ""            # the question as the messages state it
    mode: str = "any"             # the time mode it is written in: present/history/any
    notes: list = field(default_factory=list)   # the notes the messages show, as the
    # builtin reader reads them: {"id", "path", "section", "date", "status", "order", "text"}
    policy: dict | None = None    # a model's calibrated policy (calibrate.policy), for the
    #                               choosing writer; None: its own or the uncalibrated one
    reply_tokens: int | None = None   # a model's reply cap (num_predict); None: the writer's


@dataclass(frozen=True)
class Written:
    """What a writer returns: the answer, its tokens, and how it came about."""
    text: str
    writer: str                   # who wrote: builtin, ollama, choose, generate (a free-
    #                               text writer a chooser handed a question to), registry
    input_tokens: int = 0
    output_tokens: int = 0
    trace: dict = field(default_factory=dict)   # the chooser's (choosing_writer.py):
    # offered, chosen, builtin, agree, model_p, shown, policy, alternate, model_answer,
    # again, why


def parse_prompt(prompt: str) -> tuple[str, str, list[dict]]:
    """(question, time mode, notes) from a build_messages user message recorded in a run
    (the pipeline hands the structure on in a WriteRequest and never parses its own
    prompt); the last "Question:" and "Time mode:" lines count, notes are everything
    before them."""
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


def label_terms(note: dict) -> frozenset:
    """The terms of what labels a note's lines (label)."""
    return evidence_terms(label(note["section"], note["path"]))


def unit_rows(ask: Ask, notes: list[dict]) -> list[_Unit]:
    """Every unit of every note, scored for `ask` (IDF over the notes, as the judge's
    is over documents: a topic word every kept note shares still weighs)."""
    raw = [(note, i, u) for note in notes for i, u in enumerate(split_units(note["text"]))]
    sc = scorer(ask, [doc_terms(n["text"], n["section"], n["path"]) for n in notes])
    w = sc.weights
    out = []
    for note, i, u in raw:
        f = sc.features(u, note["section"], note["path"])
        ev = evidence(f)
        rank = 1.0 / (1 + note["order"])
        latest = float(note["status"] == STATUS_LATEST)
        own = evidence_terms(u) | evidence_terms(note["section"])
        out.append(_Unit(note, u, i, f, ev, ev + W_RANK * rank + W_LATEST * latest,
                         frozenset(t for t in w if match(t, own | label_terms(note))),
                         all(match(t, own) for t in ask.owned)))   # a field, not a title
    return out


def _best(units: list[_Unit]) -> _Unit:
    return max(units, key=lambda u: (u.score, -u.note["order"], -u.at))


def stated_values(u: _Unit, kinds) -> set[str]:
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
    mine = stated_values(lead, kinds)
    rivals = [u for u in units if u.answers and holds(u.text, kinds)
              and not INSTRUCTION_RE.search(u.text)     # no newer statement, an injection
              and _document(u.note) != _document(lead.note) and lead.named <= u.named
              and stated_values(u, kinds) and not stated_values(u, kinds) <= mine]
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
    older = set().union(*(stated_values(w, kinds) for w in units if _older(w, u) and w.named))
    newer = set().union(*(stated_values(w, kinds) for w in units
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
            per[key] = max(per.get(key, 0.0), sigmoid(u.score))
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
                                                 bool(stated_values(u, ask.kinds) - seen), u.score))
        lines.append(best)
        seen |= stated_values(best, ask.kinds)
    others: dict = {}
    for u in units:
        if (_document(u.note) != doc and u.answers and lead.named <= u.named
                and ask.kinds and holds(u.text, ask.kinds) == 1.0
                and u.note["date"] != UNDATED and stated_values(u, ask.kinds) - seen):
            key = (u.note["path"], u.note["date"])
            if key not in others or u.score > others[key].score:
                others[key] = u
    lines += list(others.values())
    if len(lines) > MAX_SENTENCES:
        lines.sort(key=lambda u: (_when(u), u.note["order"]))
        middle = sorted(lines[1:-1], key=lambda u: -u.score)[:MAX_SENTENCES - 2]
        lines = [lines[0]] + [u for u in lines[1:-1] if u in middle] + [lines[-1]]
    lines.sort(key=lambda u: (_when(u) if _when(u) != UNDATED else "9999", u.note["order"]))
    return [dated_line(u) for u in lines]


def dated_line(u: _Unit) -> str:
    """A history line: the unit cited, after its note's date unless it states its own."""
    if ROW_DATE_RE.match(u.text):
        return _cite(u)
    return f"{'Undated' if _when(u) == UNDATED else 'On ' + _when(u)}: {_cite(u)}"


def states_asked(question: str, notes: list[dict]) -> bool:
    """Some unit of the notes holds a value of a kind asked (by the question or one of
    its parts) near an asked term: the writer abstains when none does (the gate,
    before it, has weighed the same evidence against ABSTAIN_LOGIT)."""
    ask = analyse(question)
    return any(u.answers for a in (ask,) + ask.parts for u in unit_rows(a, notes))


def extract_answer(question: str, mode: str, notes: list[dict]) -> str:
    """The cited extractive answer, or ABSTAIN_SENTENCE when no unit answers. A note
    not in force on the day asked (STATUS_SET_ASIDE) is never read."""
    notes = [n for n in notes if not n["status"].startswith(STATUS_SET_ASIDE)]
    if not question.strip() or not states_asked(question, notes):
        return ABSTAIN_SENTENCE
    lines = _history(question, notes) if mode == "history" else _current(question, mode,
                                                                         notes)
    return " ".join(lines)


class BuiltinWriter:
    """Extractive writer: cited sentences of the notes, never new facts."""

    name = "builtin"
    model = WRITER_MODEL

    def write(self, request: WriteRequest, stage="generate", ledger=None) -> Written:
        started = time.perf_counter()
        text = extract_answer(request.question, request.mode, request.notes)
        inp = sum(count_tokens(m["content"]) for m in request.messages)
        out = count_tokens(text)
        cost_ledger.record(ledger, stage, "builtin", WRITER_MODEL, started, inp, out)
        return Written(text, self.name, inp, out)
