"""passages: notes as the unit of evidence, filled to the reader's word budget.

Stage: evidence (evidence.select calls it whenever a budget is given).
In:  the question, the settled candidates (ranked by rerank, labelled by version.py),
     the index and the query vector, a word budget, the time mode, the days the
     question asks about (harness: as of a day, or a period), a cap on notes, and
     sections that must come first (a "last time" question's latest mention); other
     wordings of the question from the user's model (searchwords.find), whose words
     count in a section's BM25.
Out: one Candidate per chosen note, the note's chosen sections in note order, each
     after the first under its heading trail, labelled as its
     newest included section is (superseded_by/why from version.py): a log passage
     holding the log's newest entry is current.
Not: retrieval, judging relevance (rerank.py), deciding versions (version.py), labels
     from other notes (evidence.label_statements), the builtin reader's own default.

How it chooses, by one model and one fill:
- The pool: every section (chunk) of every note among the candidates that names an
  asked word, was a candidate or opens its note, and the newest dated entries (as many
  as the candidates) of a log whose undated top names an asked word (the top says what
  the entries record, "mileage + anything done to it", and a terse entry is a bare
  "79,815."). A note whose candidates arrive changed by the time stage (as-of cut its
  lines) gives only those.
- Each section gets P(it holds a key fact) from one logistic model over FEATURES: how
  well the section, its heading trail and its note's title match the question (BM25,
  dense, term shares), what the builtin reader reads in it and in its note's best
  section (every section read by code, whichever judge reranked the candidates: a
  model judge's scale is not the one fitted), the note's rank, whether it is current,
  its place in the note. The weights are fitted by tools/fit_evidence.py on the tuning
  splits (never a frozen one) and written below between the FITTED marks; an index
  made with a model embedder is scored by the fit `verso calibrate` made on that
  embedder's pools, when one won held out (ranker).
- The fill: sections in order of P per word (the expected key facts a word buys, words
  raised to WORDS_POWER: a long section that likely answers is not put behind every
  short one; a section longer than the cap below priced at the cap's words, what it
  costs past CAP_SHARE, except for a change question, whose versions come first) while
  the words fit (a short note is one section: chunking merges short sections); a
  section that does not fit is cut to its sentences the builtin reader reads best
  ("Labour: £52/hr" for the hourly rate: a value of the asked kind beside an asked
  word), ties to one stating a day the question asks about (as of a day, the
  newest up to it: a table of month-end balances gives the June row for "at the end
  of June"; a period, any inside it), then to a line marked bold or highlighted (what
  the writer marked to find again), then to those naming the most asked terms (a
  paragraph written as one line gives up its other sentences), when CUT_MIN words
  are left; once CAP_SHARE of the budget is filled, a longer section comes cut so to
  CAP_WORDS, so that more notes fit, and while words are left at the end those cuts
  are widened again (CUT_MIN, WORDS_POWER and the cap's sizes: tools/fit_evidence.py
  --grid); a note not yet chosen comes in only while fewer than `notes` are.
- Versions label and order; they never remove. A change question: a section taken
  brings the best section naming an asked term of every other version of its document
  (a version naming none, "complete by" for "completion date": its best section by P)
  and of every other dated entry of its log (every entry stating a value of the asked
  kind, naming an asked term or not, when the log's top names one: "runs, mostly 5k"
  over "Ashton Court 28:55"; a daily log's "ran 5 km" is no rent), and those sections
  share the words left (each, the section first, gets its part of them, at least
  enough for a cut, and is cut to it): three long versions of a price list at 300
  words are three cut passages, not two whole ones, and a log of thirty entries at 150
  words is the entries that fit.
  Any other question: an older version's section comes after the best section of the
  version that supersedes it.
- Order: notes by their best P ("last time" mention first); the versions of a document
  together, oldest first for a change question, else the current one first; a log's
  older entries a passage of their own after its current part.
"""

from __future__ import annotations

import dataclasses
import json
import math
import zlib
from pathlib import PurePosixPath

import numpy as np

from verso import calibrate
from verso import dating
from verso import embedder
from verso import line_scores
from verso import rerank
from verso import retrieve
from verso import textkit
from verso import version
from verso.retrieve import Candidate

MAX_NOTES = 20          # notes one evidence holds when no cap is given
CUT_MIN = 10            # a section that does not fit is cut only with this many words left
                        # (tools/fit_evidence.py --grid on fourteen tuning splits, with
                        # WORDS_POWER 0.6: 10, 25, 50 hand on 1,354, 1,349, 1,345 key-fact
                        # questions over the three budgets; a note given whole below some
                        # size, 50, 100 or 200 words, handed on no more key facts: left out)
WORDS_POWER = 0.6       # the fill's order: P / words ** WORDS_POWER (the same grid on 14
                        # splits, CUT_MIN 10: 1.0, 0.8, 0.6 hand on 1,351, 1,353, 1,354)
CAP_WORDS = 30          # once CAP_SHARE of the budget is filled, a longer section comes cut
CAP_SHARE = 0.3         # to this many words, its lines the builtin reader reads best, so
                        # that more notes fit (0: never; both by tools/fit_evidence.py
                        # --grid on 23 tuning splits, see its GRID: at 28f405b 30 and 0.3,
                        # held out 719/803/844 key-fact questions against 40's 717/799/844)
ELIDED = "…"            # stands where a cut section leaves sentences out
HEADING_MARK = "## "    # a later section's heading trail inside a note's passage
LOG_HEADER = "log_header"   # chunk key of a log's undated top as a passage of its own

FEATURES = ("bm25", "dense", "terms", "heading", "title", "candidate",
            "note_rank", "note_bm25", "current", "first", "words",
            "later", "bm25_rank", "dense_rank", "reader", "note_reader")
# ---- FITTED: tools/fit_evidence.py --write (raw-scale weights; do not edit by hand)
BIAS = -7.0061
WEIGHTS = {
    "bm25": 0.1572, "dense": 6.1895, "terms": -0.4819, "heading": -0.6478, "title": 0.8949,
    "candidate": 0.37, "note_rank": 1.3619, "note_bm25": 1.7143, "current": 0.0817,
    "first": 0.0429, "words": 0.5105, "later": -0.1639, "bm25_rank": -0.0622,
    "dense_rank": 0.4933, "reader": 4.6626, "note_reader": -2.1098}
# ---- end FITTED
EMBEDDER_FIT = "evidence@"  # calibrations/evidence@<embedder>.json: `verso calibrate`'s
                            # fit for a model embedder (calibrate_model.py)
FORCED = None               # (bias, weights) every index is scored by: a fit measuring
                            # its weights (evidence_fit.weights_in_use), else None
RANKER = "%08x" % zlib.crc32(json.dumps([FEATURES, BIAS, WEIGHTS]).encode())
                            # what an embedder's fit is made for: these features beside
                            # these shipped weights (a refit of either makes it stale)


@dataclasses.dataclass
class Section:
    """One section of the pool: its chunk id, note, position in the note, features."""
    id: int
    path: str
    at: int
    words: int
    features: dict
    chunk: dict
    p: float = 0.0
    records: bool = False   # a dated entry of a log whose undated top names an asked
                            # word, holding a value of the asked kind (line_scores.holds)

    @property
    def trail(self) -> int:
        """The words of its heading trail: what a later section shows above its text."""
        return self.words - len((self.chunk.get("text") or "").split())

    @property
    def names_asked(self) -> bool:
        """It names an asked term, in its text or its heading trail."""
        return self.features["terms"] > 0 or self.features["heading"] > 0


def _asked(question: str) -> set:
    return set(textkit.terms(question))


def _share(asked: set, text: str) -> float:
    return len(asked & set(textkit.terms(text))) / len(asked) if asked else 0.0


def _notes(cands: list[Candidate], index) -> dict:
    """path -> (rank, {chunk id: candidate}, chunk ids of the note's pool) in order of
    first appearance; a note whose candidates were changed by the time stage keeps
    only those."""
    ids_of = retrieve.chunk_ids_by_path(index)
    notes: dict[str, tuple] = {}
    for c in cands:
        if c.dropped:
            continue
        rank, own, _ = notes.setdefault(c.path, (len(notes), {}, None))
        own.setdefault(c.id, c)
    out = {}
    for path, (rank, own, _) in notes.items():
        changed = any(c.chunk is not index.chunks[c.id] and c.chunk.get("text") !=
                      index.chunks[c.id].get("text") for c in own.values())
        ids = sorted(own) if changed else [int(i) for i in ids_of.get(path, ())] or sorted(own)
        out[path] = (rank, own, ids)
    return out


def _bm25(index, question: str, ids: list[int], also=()) -> np.ndarray:
    """BM25 of the question on the chunks `ids` (the same scores retrieval ranked by);
    with other wordings of it (`also`, searchwords.find), each chunk's best of the
    question's score and theirs, each wording's scaled to the question's top."""
    own = _bm25_of(index, question, ids)
    for text in also:
        other = _bm25_of(index, text, ids)
        if other.size and other.max() > 0:
            own = np.maximum(own, other * ((own.max() or other.max()) / other.max()))
    return own


def _bm25_of(index, question: str, ids: list[int]) -> np.ndarray:
    found, scores = retrieve.bm25_scores(index, question)
    pos = np.searchsorted(found, ids)
    pos = np.minimum(pos, max(len(found) - 1, 0))
    hit = (found[pos] == ids) if len(found) else np.zeros(len(ids), bool)
    return np.where(hit, scores[pos] if len(found) else 0.0, 0.0)


def sections(question: str, cands: list[Candidate], index, qvec,
             also=()) -> tuple[list, dict]:
    """(every Section of the pool with its features and P, the notes table of _notes
    with each note's sections in the pool; `also`: other wordings of the question,
    whose words a section's BM25 counts too). A section naming no asked word that was
    never a candidate is left out, unless it opens its note: a long log's hundred
    entries are not read for a question that names none of their words. A log whose
    undated top names an asked word (what its entries record) is read further: its
    newest dated entries, as many as there are candidates."""
    notes = _notes(cands, index)
    asked = _asked(question)
    kinds = line_scores.analyse(question).kinds
    ids = [i for _, _, note_ids in notes.values() for i in note_ids]
    if not ids:
        return [], notes
    lexical = _bm25(index, question, ids, also)
    top = lexical.max() if lexical.size and lexical.max() > 0 else 1.0
    dense = np.asarray(index.vectors[np.asarray(ids)] @ qvec, dtype=np.float64) \
        if qvec is not None else np.zeros(len(ids))
    dense = dense - dense.max()
    out, at, heads = [], 0, {}
    for path, (rank, own, note_ids) in list(notes.items()):
        title = _share(asked, PurePosixPath(path).stem)
        rows, kept, picks, entries, header = [], [], [], [], False
        for j, cid in enumerate(note_ids):
            at += 1
            c = own.get(cid)
            if lexical[at - 1] > 0 or c is not None or j == 0:
                chunk = c.chunk if c is not None else index.chunks[cid]
                picks.append((j, cid, at - 1, c, chunk))
                if j == 0:              # an undated top: what a log's entries record
                    header = not chunk.get("section_date") and bool(
                        asked & set(textkit.terms(chunk.get("text") or "")))
            elif header and (chunk := index.chunks[cid]).get("section_date"):
                entries.append((j, cid, at - 1, None, chunk))
        entries.sort(key=lambda e: e[4]["section_date"], reverse=True)
        for j, cid, a, c, chunk in sorted(picks + entries[:len(cands)]):
            kept.append(cid)
            text, heading = chunk.get("text") or "", chunk.get("heading") or ""
            n = len(text.split()) + len(heading.split())   # a later section shows its trail
            lexical_hit = lexical[a] > 0    # else no asked term in it: nothing to count
            if lexical_hit and heading not in heads:
                heads[heading] = _share(asked, heading)
            rows.append(Section(cid, path, j, n, {
                "bm25": lexical[a] / top, "dense": float(dense[a]),
                "terms": _share(asked, text) if lexical_hit else 0.0,   # its own words
                "heading": heads[heading] if lexical_hit else 0.0, "title": title,
                "candidate": float(c is not None),
                "note_rank": 1.0 / (1.0 + rank),
                "current": float(not _superseded(c, chunk)),
                "first": float(j == 0), "words": math.log1p(n)}, chunk,
                records=header and bool(chunk.get("section_date"))
                and line_scores.holds(text, kinds) == 1.0))
        notes[path] = (rank, own, kept)
        best = max(r.features["bm25"] for r in rows)
        order = sorted(rows, key=lambda r: (-r.features["bm25"], -r.features["dense"], r.at))
        for k, r in enumerate(order):           # the note's k-th best section by search
            r.features["note_bm25"], r.features["later"] = best, math.log1p(k)
        out += rows
    for key in ("bm25", "dense"):               # its rank in the whole pool, scale-free
        for r, x in enumerate(sorted(out, key=lambda x: -x.features[key])):
            x.features[f"{key}_rank"] = 1.0 / (1.0 + r)
    read, best = _read(question, out, index), {}
    for x, p in zip(out, read):
        x.features["reader"], best[x.path] = p, max(best.get(x.path, 0.0), p)
    for x in out:
        x.features["note_reader"] = best[x.path]
    bias, weights = ranker(index)
    for s in out:
        s.p = probability(s.features, weights, bias)
    return out, notes


def _read(question: str, pool: list, index) -> list[float]:
    """The builtin reader's P(a section answers), its best line's, for every section
    of the pool: a candidate's judge may be a model, and a section that was never a
    candidate was not judged at all; this one reads them all, by code."""
    texts = {str(i): {"text": s.chunk.get("text") or "", "heading": s.chunk.get("heading")
                      or "", "path": s.path} for i, s in enumerate(pool)}
    got = line_scores.BuiltinJudge().relevance(question, texts, idf=rerank.corpus_idf(index))
    return [got[str(i)] for i in range(len(pool))]


def probability(features: dict, weights=None, bias=None) -> float:
    """The fitted model's P(a section holds a key fact)."""
    weights = WEIGHTS if weights is None else weights
    z = (BIAS if bias is None else bias) + sum(w * features.get(k, 0.0)
                                              for k, w in weights.items())
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def stored_key(embedder_id: str) -> str:
    """The name `verso calibrate` keeps an embedder's ranker under in Verso's home."""
    return EMBEDDER_FIT + calibrate.file_name(embedder_id)


def embedder_ranker(embedder_id: str) -> tuple[dict | None, str]:
    """(the fit `verso calibrate` stored for a model embedder, or None; its state):
    "none" (the builtin embedder, or nothing stored), "damaged" (unreadable, or a bias
    or weight that is no number), "stale" (made for another ranker: other features or
    other shipped weights; `verso calibrate --evidence` fits it again), "not used" (it
    lost held out, or was fitted on too little), "used"."""
    if not embedder_id or embedder_id.startswith(embedder.BUILTIN_EMBEDDER):
        return None, "none"
    key = stored_key(embedder_id)
    if not calibrate.stored_path(key).exists():
        return None, "none"
    got = calibrate.load_stored(key)
    if not isinstance(got, dict):
        return None, "damaged"
    if got.get("ranker") != RANKER:
        return got, "stale"
    weights, bias = got.get("weights"), got.get("bias")
    numbers = [bias, *(weights.values() if isinstance(weights, dict) else [None])]
    if not (isinstance(weights, dict) and set(weights) == set(FEATURES) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            for x in numbers)):
        return got, "damaged"
    return got, "used" if got.get("use") == "fitted" else "not used"


RANKER_STATES = {      # what each state of embedder_ranker means, for the user
    "none": "none fitted (`verso calibrate --evidence` fits it)",
    "damaged": "its file is damaged, the shipped one is used (`verso calibrate "
               "--evidence` fits it again)",
    "stale": "fitted for another ranker, the shipped one is used (`verso "
             "calibrate --evidence` fits it again)",
    "not used": "the shipped one (its own fit lost held out or had too little)",
    "used": "its own fit"}


def ranker(index) -> tuple[float, dict]:
    """(bias, weights) the index's sections are scored by: the fit `verso calibrate`
    stored for its model embedder when that fit is in use (embedder_ranker), else the
    shipped fit, made on the builtin embedder's pools."""
    if FORCED is not None:
        return FORCED
    emb = getattr(getattr(index, "embedder", None), "id", None) or ""
    got, state = embedder_ranker(emb)
    return (got["bias"], got["weights"]) if state == "used" else (BIAS, WEIGHTS)


def _superseded(c, chunk) -> bool:
    """An older version, an older entry of its log, or labelled superseded."""
    older = not chunk.get("is_latest", True) or chunk.get("entry_latest") is False
    return older or c is not None and (bool(c.superseded_by) or not c.is_latest)


def choose(question: str, cands: list[Candidate], index, qvec, budget: int,
           history: bool = False, notes: int | None = None, first=(),
           also=(), when=None) -> list[Candidate]:
    """The evidence: one passage per chosen note, filled to `budget` words (see the
    module's rules); `notes` caps the notes (MAX_NOTES); `first`: candidates whose
    sections go in before any other (a latest mention); `when`: the days the question
    asks about (dated_fit), None for none."""
    pool, table = sections(question, cands, index, qvec, also)
    if not pool:
        return []
    most = notes or MAX_NOTES
    by_id = {s.id: s for s in pool}
    groups = _groups(pool, index)
    chosen: dict[str, dict] = {}        # path -> {section id: text}
    capped: set = set()                 # sections cut to CAP_WORDS (widened if words are left)
    used = 0
    asked = _asked(question)
    reader = None                       # the cuts' line scorer, made at the first cut
    date_order = getattr(index, "date_order", "ymd")

    def dated(pieces: list[str]) -> list[int]:
        return dated_fit(pieces, when, date_order)

    def take(s: Section, forced: bool = False, share: int = 1, widen: bool = False) -> None:
        nonlocal used, reader
        if s.path not in chosen and len(chosen) >= most:
            return
        got = chosen.setdefault(s.path, {})
        if s.id in got and not (widen and s.id in capped):
            return
        text, trail = s.chunk.get("text") or "", s.trail
        if s.id in got:                              # capped: its words back, taken again
            capped.discard(s.id)
            used -= trail + len(got.pop(s.id).split())
        left = budget - used
        if share > 1:               # its share of what is left, at least a cut's worth
            left = min(left, max(left // share, trail + 2 + CUT_MIN))
        limited = (CAP_WORDS > 0 and not (forced or widen) and used >= CAP_SHARE * budget
                   and left > trail + CAP_WORDS)
        if limited:                                  # past its share: at most a cap's words
            left = trail + CAP_WORDS
        room = left - trail                          # a cut's words, its ELIDED marks too
        if s.words <= left or (forced and not used):
            got[s.id] = text
            used += s.words
        elif room - 2 >= CUT_MIN:                    # 2: a cut's ELIDED marks, at least
            reader = reader or _line_reader(question, pool, index)
            got[s.id] = _cut(text, asked, room, lambda pieces: reader(s, pieces), dated)
            used += trail + len(got[s.id].split())
            if limited:
                capped.add(s.id)
        if not got:
            del chosen[s.path]

    for c in first:
        if c.id in by_id:
            take(by_id[c.id], forced=True)
    order = sorted(pool, key=lambda s: (-s.p / max(_cost(s, history), 1) ** WORDS_POWER,
                                        table[s.path][0], s.at))
    for widen in (False, True):     # capped sections widened while words are left
        for s in order:
            if used >= budget:
                break
            if not history:
                newer = _newer(s, groups)
                if newer is not None:
                    take(newer, widen=widen)
            versions = _versions(s, groups) if history else []
            take(s, share=1 + len(versions), widen=widen)
            if history and s.path in chosen:
                for n, x in enumerate(versions):
                    take(x, share=len(versions) - n, widen=widen)
    lead = {by_id[c.id].path for c in first if c.id in by_id}
    best = {path: max(by_id[i].p for i in got) for path, got in chosen.items()}
    order = sorted(chosen, key=lambda path: (path not in lead, -best[path]))
    return _passages({path: chosen[path] for path in order}, table, by_id, index, history)


def _cost(s: Section, history: bool = False) -> int:
    """The words a section costs in the fill's order: a longer one at what it costs cut
    to CAP_WORDS (under its heading trail), as most of the budget takes it; for a change
    question its own words, so that cheap long notes do not crowd out the versions and
    log entries it brings."""
    if not CAP_WORDS or history:
        return s.words
    return min(s.words, s.trail + CAP_WORDS)


def _groups(pool: list, index) -> dict:
    """The pool by what supersedes what: ("family", family) -> its versions' sections,
    ("log", path) -> a log's dated sections; ("latest", key) -> the current version's
    (newest entry's) best section by P."""
    families, out = version.family_paths(index), {}
    for x in pool:
        family = x.chunk.get("family") or x.path
        if len(families.get(family, ())) > 1:
            out.setdefault(("family", family), []).append(x)
            if x.chunk.get("is_latest", True):
                _keep_best(out, ("latest", ("family", family)), x)
        if x.chunk.get("section_date"):
            out.setdefault(("log", x.path), []).append(x)
            if x.chunk.get("entry_latest"):
                _keep_best(out, ("latest", ("log", x.path)), x)
    return out


def _keep_best(out: dict, key, x: Section) -> None:
    if key not in out or (x.p, -x.at) > (out[key].p, -out[key].at):
        out[key] = x


def _newer(s: Section, groups: dict) -> Section | None:
    """The best section (by P) of what supersedes s: its log's newest entry, or the
    latest version of its document; None when s is current."""
    if s.chunk.get("entry_latest") is False:
        return groups.get(("latest", ("log", s.path)))
    if not s.chunk.get("is_latest", True):
        return groups.get(("latest", ("family", s.chunk.get("family") or s.path)))
    return None


def _versions(s: Section, groups: dict) -> list:
    """A change question: the other versions of s's document, and the other dated
    entries of s's log, each by its best section (by P) naming an asked term (a version
    naming none by its best section; an entry stating a value of the asked kind in a
    log whose top names an asked term, Section.records, whether it names one or not),
    oldest first."""
    best: dict = {}
    family = groups.get(("family", s.chunk.get("family") or s.path), [])
    entries = groups.get(("log", s.path), []) if s.chunk.get("section_date") else []
    for key_of, group in ((lambda x: x.path, family),
                          (lambda x: x.chunk.get("section_date"), entries)):
        for x in group:         # another version may come by a section naming nothing
            if x.id != s.id and (x.names_asked or x.records
                                 or group is family and x.path != s.path):
                key = key_of(x)
                if key not in best or (x.names_asked, x.p) > (best[key].names_asked,
                                                              best[key].p):
                    best[key] = x
    return sorted(best.values(), key=_day)


def _day(s: Section) -> tuple:
    weak = s.chunk.get("date_source") == version.WEAK_SOURCE
    return (weak, s.chunk.get("section_date") or s.chunk.get("date") or "", s.path)


def _line_reader(question: str, pool: list, index):
    """How well the builtin reader reads each piece of a section as answering: a
    function (section, its pieces) -> each piece's evidence logit under the section's
    heading and note title, "Labour: £52/hr" for the hourly rate (a value of the asked
    kind beside an asked word). One scorer a question, its term weights and related
    words found once among the words of the whole pool, not once a cut section."""
    sc = line_scores.scorer(line_scores.analyse(question), [line_scores.doc_terms(
        s.chunk.get("text") or "", s.chunk.get("heading") or "", s.path) for s in pool],
        idf=rerank.corpus_idf(index))

    def reads(s: Section, pieces: list[str]) -> list[float]:
        head = s.chunk.get("heading") or ""
        return [line_scores.best_evidence(sc, p, head, s.path) for p in pieces]
    return reads


def dated_fit(pieces: list[str], when, date_order: str = "ymd") -> list[int]:
    """How well each piece's first day (dating.find_date) fits the days the question
    asks about, `when` (first, last, in force; ISO days, "" open): 1 for a day from
    first to last, 2 for the newest of those when in force ("the balance at the end of
    June" in a table of month-end rows: the June row before May's, both before an
    undated line), else 0. A table or log of dated lines kept in one note is read by
    its dates where the reader reads its rows alike. All 0 when `when` is None."""
    if not when:
        return [0] * len(pieces)
    first, last, in_force = when
    days = [dating.find_date(p, date_order=date_order) for p in pieces]
    inside = [d for d in days if d and first <= d <= last]
    newest = max(inside) if inside and in_force else None
    return [2 if d and d == newest else 1 if d in inside else 0 for d in days]


def _cut(text: str, asked: set, words: int, reads, dated=None) -> str:
    """text cut to `words` words, its ELIDED marks counted: the sentences `reads` (their
    texts -> a score each: _line_reader) scores best, ties to those `dated` (their texts
    -> how each states a day the question asks about: dated_fit) ranks first, then to
    those marked to stand out (bold or highlighted: "rent goes up to **£795**", what
    the writer meant to find again), then to those naming the most asked terms, in note
    order (a paragraph written as one line, an email's, gives up its other sentences,
    not the one that answers; adjacent sentences of a line stay on one line; a table
    row is one piece). The best sentence alone too long: its first words."""
    lines = [x for x in text.splitlines() if x.strip()]
    pieces = [(n, p) for n, line in enumerate(lines) for p in _sentences(line)]
    named = [len(asked & set(textkit.terms(p))) for _, p in pieces]
    score = reads([p for _, p in pieces]) if pieces else []
    fit = dated([p for _, p in pieces]) if dated and pieces else [0] * len(pieces)
    marked = [bool(textkit.BOLD_RE.search(p)) for _, p in pieces]
    ranked = sorted(range(len(pieces)),
                    key=lambda i: (-score[i], -fit[i], -marked[i], -named[i], i))
    keep: dict[int, str] = {}
    n = 0
    for i in ranked:
        w, marks = len(pieces[i][1].split()), _gaps(set(keep) | {i}, len(pieces))
        if n + w + marks <= words:
            keep[i], n = pieces[i][1], n + w
        elif not keep and named[i] and words - marks > 1:
            keep[i] = " ".join(pieces[i][1].split()[:words - marks - 1] + [ELIDED])
            n = words - marks
    if not keep:
        return " ".join(text.split()[:max(words - 1, 0)] + [ELIDED])
    out, last = [], -1
    for i in sorted(keep):
        if i != last + 1:
            out.append(ELIDED)
        if 0 <= last == i - 1 and pieces[i][0] == pieces[last][0]:
            out[-1] += " " + keep[i]
        else:
            out.append(keep[i])
        last = i
    if last != len(pieces) - 1:
        out.append(ELIDED)
    return "\n".join(out)


def _sentences(line: str) -> list[str]:
    """A line's sentences for a cut, the first with its indentation; a table row whole,
    a list number ("1.") with the sentence it numbers."""
    if line.lstrip().startswith("|"):
        return [line.rstrip()]
    out: list[str] = []
    for p in textkit.sentences(line):
        if not p.strip():
            continue
        if out and textkit.BULLET_RE.fullmatch(out[-1] + " "):   # "1." alone: a number
            out[-1] = f"{out[-1].rstrip()} {p.strip()}"
        else:
            out.append(p.strip() if out else p.rstrip())
    return out


def _gaps(keep: set, n: int) -> int:
    """The ELIDED marks a cut keeping the pieces `keep` of n shows: one per run left out."""
    return sum(1 for i in range(n) if i not in keep and (i == 0 or i - 1 in keep))


def _passages(chosen: dict, table: dict, by_id: dict, index, history: bool) -> list:
    """One Candidate per chosen note, in reading order (see the module's rules). A log
    is up to three: its undated top (a header people keep "Meetings: fortnightly"),
    dated as its first entry so that a later entry stating otherwise can label it; its
    newest entry; its older entries, labelled as the older versions they are."""
    out = []
    for path, got in chosen.items():
        own, note_ids = table[path][1], table[path][2]
        ids = [i for i in note_ids if i in got]
        days = [by_id[i].chunk["section_date"] for i in note_ids
                if i in by_id and by_id[i].chunk.get("section_date")]
        older = [i for i in ids if by_id[i].chunk.get("section_date")
                 and by_id[i].chunk.get("entry_latest") is False]
        top = [i for i in ids if days and not by_id[i].chunk.get("section_date")]
        for part in (top, [i for i in ids if i not in older and i not in top], older):
            if part:
                c = _passage([by_id[i] for i in part], got, own, index)
                if part is top:
                    c = dataclasses.replace(c, chunk={**c.chunk, LOG_HEADER: True,
                                                      "date": min(days)})
                out.append(c)
    return _order(out, history)


def _passage(parts: list, got: dict, own: dict, index) -> Candidate:
    """The sections `parts` of one note as one Candidate: each after the first under its
    heading trail, labelled as its representative is."""
    texts = []
    for j, s in enumerate(parts):
        head = s.chunk.get("heading") or ""
        texts.append(got[s.id] if j == 0 or not head else f"{HEADING_MARK}{head}\n{got[s.id]}")
    rep = _representative(parts, own, index)
    relevance = [c.relevance for c in own.values() if c.relevance is not None]
    return dataclasses.replace(
        rep, chunk={**rep.chunk, "heading": parts[0].chunk.get("heading") or "",
                    "text": "\n\n".join(texts), "id": rep.id},
        relevance=max(relevance) if relevance else rep.relevance,
        fused=max(c.fused for c in own.values()))


def _representative(parts: list, own: dict, index) -> Candidate:
    """The candidate whose labels the passage carries: its newest dated entry, else its
    best-ranked candidate; a section never a candidate is marked by version.py."""
    dated = [s for s in parts if s.chunk.get("section_date")]
    if dated:
        rep = max(dated, key=lambda s: s.chunk["section_date"])
    else:
        rep = next((s for s in parts if s.id in own), parts[0])
    if rep.id in own:
        return own[rep.id]
    c = Candidate(rep.chunk, added_by=next(iter(own.values())).added_by)
    version.mark(index, [c])
    return c


def _order(passages: list, history: bool) -> list:
    """The versions of one document together, at the place of the first chosen: a
    change question's oldest first, else the current one first."""
    out: list = []
    for p in passages:
        if p in out:
            continue
        family = p.chunk.get("family") or p.path
        group = [q for q in passages if (q.chunk.get("family") or q.path) == family]
        if history:
            group.sort(key=lambda q: (q.date == retrieve.UNDATED, q.date, q.path))
        else:
            group.sort(key=lambda q: (not q.is_latest or bool(q.superseded_by),
                                      q.date == retrieve.UNDATED, _neg(q.date)))
        out += group
    return out


def _neg(day: str) -> tuple:
    return tuple(-ord(ch) for ch in day)
