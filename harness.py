"""The pipeline: a question in, a cited and checked answer out, timed stage by stage.

In:  a question, an index (built from the vault on first use), a backend name.
Out: an Answer: text, citations, kept sources, the candidates of every stage with their
     scores, per-stage milliseconds / tokens / dollars, and the verify verdict.
Not: any ranking, filtering or writing logic of its own; each stage lives in its module.

    python harness.py "What is my current day rate?" [--vault DIR] [--index DIR]
        [--no-rerank] [--no-search-words] [--mode present|history|any]
        [--backend auto|builtin|ollama] [--json]
        [--judge builtin|ollama|cascade|jev] [--html FILE]
"""

from __future__ import annotations

# A program: numpy's BLAS on one thread unless the user set it (read when numpy loads;
# OpenBLAS starts a thread per core, about 0.07 s of CPU a process, and of wall when the
# other core is busy; docs/performance.md). A face started from here (_face_program)
# gets the user's setting back. In a checkout (not -m), `verso` is this folder.
BLAS_SET_HERE = False
if __name__ == "__main__":
    import os
    BLAS_SET_HERE = "OPENBLAS_NUM_THREADS" not in os.environ
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if not __package__:
        import _checkout  # noqa: F401

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import verso
from verso import asof
from verso import calibrate
from verso import choosing_writer
from verso import generate
from verso import textkit
from verso import ingest
from verso import backends
from verso import models
from verso import line_scores
from verso import passages
from verso import cost_ledger
from verso import evidence
from verso import builtin_writer
from verso import rerank as rerank_stage
from verso import retrieve
from verso import searchwords
from verso import route as route_stage
from verso import store
from verso import registry
from verso import store_load
from verso import unsure
from verso import vault_walk
from verso import verify as verify_stage
from verso import version

SAMPLE_VAULT = verso.data_path("sample-vault").resolve()
SAMPLE_NOTICE = ("answering from the bundled sample vault, not your notes: index yours with "
                 "`verso ingest NOTES`")
STAGES = ("route", "retrieve", "version-filter", "rerank", "evidence", "generate", "verify",
          "calibrate")
MAX_REGISTRY_ROWS = 12   # rows one registry answer cites (the writer's notes are 5)
MAX_QUESTION_CHARS = 4000   # longer questions are cut here (embedding and prompts stay bounded)
WHERE_FROM = ("The vault: --vault, else the vault the index was built from, else (no index "
              "yet) the bundled sample vault. The index: --index, else the one ingested "
              "last (in Verso's home, $VERSO_HOME or the user data folder). Verso never "
              "writes inside the vault. `verso --help` lists the other commands: ingest, "
              "chat, mcp (and mcp check), projects, evaluate.")
NO_RETRIEVAL = {
    "small_talk": "this reads as small talk, not a question about the notes",
    "live_data": "this needs live data (weather, prices, news) that notes cannot hold",
}


@dataclass
class Answer:
    question: str
    answer: str = ""
    abstained: bool = False
    abstain_reason: str | None = None
    time_mode: str = "any"
    route: dict = field(default_factory=dict)
    citations: list = field(default_factory=list)
    sources: list = field(default_factory=list)
    ranking: list = field(default_factory=list)
    retrieved: list = field(default_factory=list)
    candidates: dict = field(default_factory=dict)
    stages: list = field(default_factory=list)
    verdict: str = "ABSTAIN"
    checks: dict = field(default_factory=dict)
    backend: str = ""
    backend_note: str = ""
    messages: list = field(default_factory=list)   # what the writer was sent
    reply: str = ""                                # what it said, before parsing
    calls: list = field(default_factory=list)      # the ledger: one row per model call
    shown: str = ""                                # what a person reads (unsure.py)
    look_at: list = field(default_factory=list)    # the notes to open when unsure
    as_of: str | None = None                       # the date of time mode as_of
    confidence: float | None = None                # calibrate's p(right); None: abstained
    alternate: dict | None = None                  # the other reader's answer (choosing_writer.py)
    sample_vault: bool = False                     # answered from the bundled sample vault
    index_config: dict = field(default_factory=dict)   # the config the index was built with
    search_words: list = field(default_factory=list)   # other wordings searched (searchwords.py)

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return render(self)

    def to_html(self, gold=()) -> str:
        """A self-contained HTML page of every stage (html_report.py)."""
        from verso import html_report
        return html_report.trace_page(self.to_dict(), gold=gold)

    def _repr_html_(self) -> str:
        from verso import html_report
        return html_report.trace_fragment(self.to_dict())


class _Clock:
    """Times each stage and folds in the ledger rows that stage wrote."""

    def __init__(self, ledger: cost_ledger.Ledger):
        self.ledger, self.ms = ledger, {}

    def run(self, name, fn, *args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - started) * 1000

    def rows(self) -> list[dict]:
        costs = self.ledger.by_stage()
        out = []
        for name in STAGES:
            c = costs.get(name, {})
            out.append({"name": name, "ms": round(self.ms.get(name, 0.0), 2),
                        "input_tokens": c.get("input_tokens", 0),
                        "output_tokens": c.get("output_tokens", 0),
                        "dollars": c.get("dollars", 0.0)})
        return out


def _trace(cands) -> list[dict]:
    keys = ("dense_rank", "dense_score", "bm25_rank", "bm25_score", "fused", "via",
            "added_by", "relevance", "superseded_by", "why", "dropped")
    return [dict(id=c.id, path=c.path, heading=c.chunk.get("heading", ""), date=c.date,
                 is_latest=_current(c), family=c.chunk.get("family"),
                 private=bool(c.chunk.get("private")),
                 **{k: getattr(c, k) for k in keys}) for c in cands]


def _current(c) -> bool:
    """Latest version of its file, and not an older dated entry of a log."""
    return c.is_latest and c.chunk.get("entry_latest") is not False


def _score(c) -> float:
    return c.relevance if c.relevance is not None else c.fused


def resolve(index=None, vault=None) -> tuple[Path, Path | None, list[str]]:
    """(the index dir; the vault to refresh it from, or None to answer from the index as
    it is; one-line notes for stderr). The index: `index`, else the default (the one
    ingested last: store.find_index). The vault: `vault`, else the one the index was
    built from; else, when no index exists at all, the sample vault, indexed apart in
    home/sample, and a note saying so. An `index` folder that holds no index, with no
    `vault`, is an error (ValueError). The sample vault given as `vault` is indexed in
    home/sample too."""
    sample = index is None and vault is not None and Path(vault).resolve() == SAMPLE_VAULT
    d, note = ((Path(index).expanduser(), None) if index is not None else
               (store.home() / store.SAMPLE_NAME, None) if sample else store.find_index())
    notes = [note] if note else []
    if vault is not None:
        return d, Path(vault), notes
    built = store_load.built_from(d)
    if built is None:
        if index is not None:
            raise ValueError(f"no index in {index}: build one with `verso ingest NOTES "
                             f"--index {index}`, or pass --vault NOTES")
        return store.home() / store.SAMPLE_NAME, SAMPLE_VAULT, notes + [SAMPLE_NOTICE]
    folder, created = built
    if Path(folder).is_dir():
        return d, Path(folder), notes + ([SAMPLE_NOTICE] if Path(folder) == SAMPLE_VAULT
                                         else [])
    return d, None, notes + [f"vault {folder} not found: answering from the index built "
                             f"on {created[:10]}"]


def from_sample(idx) -> bool:
    """Whether the index was built from the bundled sample vault."""
    return Path(idx.manifest.get("vault", "")) == SAMPLE_VAULT


def load(index=None, vault=None, backend="auto", judge=None, rebuild=False, writer=None,
         config=None):
    """(Index, Backend) for a question; the index is brought up to date from its vault
    first (see resolve for which index and vault), with `config` (a verso.toml of the
    user's) when given, else the one the index keeps.

    The backend is chosen first, so the index is built with its embedder; queries are
    then always embedded by the embedder the index was built with."""
    d = folder = None
    if not isinstance(index, store_load.Index):
        d, folder, notes = resolve(index, vault)
        for note in notes:
            print(note, file=sys.stderr)
    be = backend if isinstance(backend, backends.Backend) else backends.load_backend(
        backend, judge=judge, timeout=_config_timeout(d, folder), writer=writer)
    if isinstance(index, store_load.Index):
        idx = index
    else:
        if folder is None:
            idx = store_load.load_index(d, None if be.name == "builtin" else be)
        else:
            if vault is not None and not rebuild:   # a vault read from the index is its own
                _same_vault(d, folder)
            rebuilt: list[str] = []
            idx = ingest.refresh(folder, index_dir=d, config=config, rebuild=rebuild,
                                 backend=be, notes=rebuilt)
            for note in rebuilt:          # a first question after an upgrade takes longer
                print(f"index {d}: {note}", file=sys.stderr)
    be.embedder = idx.embedder
    state = passages.embedder_ranker(idx.embedder.id)[1]
    if state == "used":
        be.note += f"; evidence ranked by the fit `verso calibrate` made for " \
            f"{idx.embedder.id}"
    elif state in ("stale", "damaged"):     # say so: the user ran calibrate for it
        be.note += f"; the evidence ranker for {idx.embedder.id}: " \
            f"{passages.RANKER_STATES[state]}"
    return idx, be


def _config_timeout(index_dir, folder) -> float | None:
    """`timeout` of the vault's config (the one its index keeps), unless --timeout or
    $VERSO_OLLAMA_TIMEOUT set one: those come first."""
    if folder is None or os.environ.get(models.TIMEOUT_ENV):
        return None
    d = Path(index_dir).expanduser().resolve()
    folder = Path(folder).expanduser().resolve()
    cfg, _ = vault_walk.load_config(folder, ingest.kept_config(d, folder))
    return cfg.get("timeout")


def _same_vault(index_dir: Path, vault) -> None:
    """An index answers for the vault it was built from; another vault never replaces
    it silently (ingest.py --rebuild, or another --index, does that on purpose)."""
    try:
        built = store_load.built_from(index_dir)
    except store.IndexProblem:
        return      # a damaged index: ingest decides and says why
    if built and Path(built[0]) != Path(vault).resolve():
        raise ValueError(f"index {index_dir} was built from {built[0]}, not {vault}: give "
                         f"this vault an index of its own with --index DIR (or VERSO_HOME="
                         f"DIR), or leave out --vault to ask {built[0]}")


def ask(question: str, *, index=None, vault=None, backend="auto", method="hybrid",
        use_version=True, rerank=True, expand_links=True, mode=None, k=20,
        keep=None, budget=evidence.BUDGET_WORDS, include_private=True, write=True,
        as_of=None, context=None, search_words=None) -> Answer:
    """Route, retrieve, filter by time, rerank and gate, choose the evidence, write,
    verify; every stage timed. The evidence (evidence.select): with a `budget`, notes
    ranked and filled to that many words, one passage a note (`keep` caps the notes);
    without one, the reader's own (evidence.reader_budget: a model writer's from its
    context; the builtin reader's first evidence.KEEP passages). Without version rules
    (use_version=False, the baselines) it is the plain top `keep` (default 5).
    include_private=False searches shareable folders only; write=False stops at the
    evidence (sources and the version trace), before the answer is written (mcp_server).
    as_of ("YYYY-MM-DD", or "YYYY-MM") asks about the notes as they stood on that date.
    context: words searched and reranked beside the question (a chat follow-up's
    previous subject); the router, the verify judge and the writer read the question
    alone. search_words: also search other wordings of the question: None, those the
    writer's model writes when it is a model (searchwords.find; one short request, made
    even when write=False or the gate then abstains); a list, these; False, none. None
    for a question about a period (its notes are every note of the period)."""
    question = " ".join(str(question).split())[:MAX_QUESTION_CHARS]
    if not question:
        raise ValueError("the question is empty: ask something about your notes")
    idx, be = load(index, vault, backend)
    ledger = cost_ledger.Ledger()
    clock = _Clock(ledger)
    out = Answer(question=question, backend=be.name, backend_note=be.note,
                 sample_vault=from_sample(idx), index_config=ingest.config_of(idx.manifest))
    out.route = clock.run("route", route_stage.route, question, idx.date_order)
    when = _choose_time(out.route, mode, as_of, idx)
    out.time_mode, out.as_of = when.mode, when.as_of
    want = registry.asks(question, _projects(idx, include_private)) if write else None
    if want is not None:
        return _from_registry(out, idx, be, clock, want, include_private)
    if not out.route["needs_retrieval"]:
        return _abstain(out, clock, NO_RETRIEVAL.get(out.route["intent"], "no retrieval"))

    searched = f"{question} {' '.join(str(context).split())[:MAX_QUESTION_CHARS]}" \
        if context else question
    if budget is None and write:        # the reader's own: a model's from its context
        budget = evidence.reader_budget(be.writer)
    if budget is not None and use_version:     # more words read from more candidates
        k = max(k, evidence.candidates_for(budget))
    today = _today(out, idx)            # the day a period the question names counts from
    period = asof.period(searched, today, idx.date_order)     # None: it names no period
    given = search_words if isinstance(search_words, (list, tuple)) else None
    asks = given is None and search_words is not False \
        and models.model_of(be.writer) is not None
    if (given or asks) and not period:
        problems: list[str] = []
        out.search_words = searchwords.cleaned(given) if given is not None else clock.run(
            "retrieve", searchwords.find, searched, be.writer, ledger, problems=problems)
        out.backend_note = "; ".join(filter(None, [out.backend_note, *problems]))
    qvec, cands = clock.run("retrieve", _retrieve, out, idx, searched, k, method,
                            expand_links, include_private, ledger, today)
    if use_version:
        cands = clock.run("version-filter", version.apply, idx, cands, out.time_mode, qvec,
                          out.as_of)
    out.retrieved = [c.path for c in cands]
    if rerank:
        cands = clock.run("rerank", _rerank, searched, cands, be.judge, idx, ledger)
        out.candidates["rerank"] = _trace(cands)
    threshold = rerank_stage.RELEVANCE_THRESHOLD if rerank else None
    out.ranking = [c.path for c in cands]
    if use_version:
        kept, versioned = clock.run("evidence", _evidence, out, searched, cands, budget,
                                    keep, idx, qvec, threshold, _asked_days(out, period))
        out.time_mode = when.written_in(versioned)
    else:
        kept = cands[:keep or rerank_stage.KEEP]
    out.sources = _sources(kept)
    reason = rerank_stage.gate(kept) if rerank else (None if kept else "nothing retrieved")
    if reason:
        return _abstain(out, clock, reason, kept)
    if write:                           # else the evidence only: no writer, no verify
        _write_and_verify(out, kept, be, clock)
    out.stages, out.calls = clock.rows(), list(ledger.rows)
    return out


def _retrieve(out: Answer, idx, searched, k, method, expand_links, include_private, ledger,
              today):
    """(the query vector, the candidates): search, the question and its other wordings,
    with a period counted from `today` (_today)."""
    qvec = idx.embedder.embed_query(searched, ledger=ledger, stage="retrieve")
    also = [(text, idx.embedder.embed_query(text, ledger=ledger, stage="retrieve"))
            for text in out.search_words]
    cands = retrieve.search(idx, searched, qvec, k=k, method=method,
                            expand_links=expand_links, include_private=include_private,
                            today=today, also=also)
    out.candidates["retrieve"] = _trace(cands)
    return qvec, cands


def _asked_days(out: Answer, period: dict | None) -> tuple[str, str, bool] | None:
    """The days the question asks about, for the evidence's cuts (passages.dated_fit):
    (first, last, in force) with in force True for a point in time (as of a day: of the
    days up to it, the newest), False for a period (`period`, asof.period's: every day
    inside it); None when it names no time."""
    if out.time_mode == "as_of" and out.as_of:
        return "", out.as_of, True
    return (period["start"], period["end"], False) if period else None


def _today(out: Answer, idx) -> str | None:
    """The day a period the question names counts from: the as-of date when one was
    asked, else the vault's newest real-dated note's."""
    return out.as_of if out.time_mode == "as_of" else retrieve.vault_today(idx)


def _rerank(searched, cands, judge, idx, ledger):
    """rerank.rerank, with the corpus IDF for the judges that read it (the builtin)."""
    idf = (rerank_stage.corpus_idf(idx)
           if isinstance(judge, (line_scores.BuiltinJudge, models.CascadeJudge)) else None)
    return rerank_stage.rerank(searched, cands, judge, keep=rerank_stage.KEEP,
                               ledger=ledger, idf=idf)


def _evidence(out: Answer, question, cands, budget, keep, idx, qvec,
              threshold, when=None) -> tuple[list, bool]:
    """The evidence stage in out.time_mode: the versions labelled (version.settle), the
    passages handed on (evidence.select; `when`, the days asked about: _asked_days),
    statements a later note contradicts labelled.
    (The passages, whether what answers can hold versions: version.versions_answer.)"""
    mode = out.time_mode
    cands, dropped = version.settle(cands, mode, threshold, index=idx)
    if budget is not None:          # versions label, never remove: set aside, handed on
        cands, dropped = cands + version.labelled(dropped, idx), []
    kept = evidence.select(question, cands, budget, history=mode == "history", keep=keep,
                           index=idx, qvec=qvec, present=mode in ("present", "as_of"),
                           also=out.search_words, when=when)
    if mode in ("present", "as_of") or (budget is not None and mode == "any"):
        kept = evidence.label_statements(question, kept, idx)    # not how it changed
    out.candidates["version"] = _trace(cands + dropped)    # with what evidence set aside
    return kept, version.versions_answer(idx, kept, threshold)


def _sources(kept: list) -> list[dict]:
    """The evidence handed on, as every reader gets it: each passage with its date,
    whether it is current, and when not, what supersedes it and why."""
    return [{"id": c.id, "path": c.path, "heading": c.chunk.get("heading", ""),
             "date": c.date, "is_latest": _current(c), "score": round(float(_score(c)), 4),
             "superseded_by": c.superseded_by, "why": c.why,
             "set_aside": bool(c.chunk.get(builtin_writer.SET_ASIDE)),
             "found_by": c.added_by or "search", "private": bool(c.chunk.get("private")),
             "text": c.chunk.get("text", "")}
            for c in kept]


@dataclass(frozen=True)
class _Time:
    """The time decision (_choose_time): the mode the evidence is gathered in, the day of
    an as_of, and whether that mode is a present the rules presumed (a plain question:
    no time named, no mode given), which the evidence may still turn to "any"."""
    mode: str
    as_of: str | None = None
    presumed: bool = False

    def written_in(self, versions_answer: bool) -> str:
        """The mode the answer is written and reported in: a presumed present is "any"
        where what answers holds no versions (version.versions_answer). The filter was
        the same, and the reported mode says so instead of claiming a current-versus-
        outdated choice was made. Any other mode stands."""
        return "any" if self.presumed and not versions_answer else self.mode


def _choose_time(route: dict, mode, as_of, idx) -> _Time:
    """The time decision, made once from the router and the caller: a date given
    outright (as_of); else the mode given or the router's, a point in time the router
    found read in the vault's own years (none found: "any"); the router's present for a
    message that names no time is presumed (_Time.written_in)."""
    if as_of is not None:
        return _Time("as_of", asof.parse(as_of))
    chosen = mode or route["time_mode"]
    if chosen == "as_of":
        spec = route.get("as_of")
        if spec is None and mode == "as_of":
            raise ValueError("time mode as_of needs a date: pass --as-of YYYY-MM-DD")
        day = asof.resolve(spec, retrieve.real_dates(idx)) if spec else None
        return _Time("as_of", day) if day else _Time("any")
    return _Time(chosen, presumed=not mode and chosen == "present" and not route["time_cue"])


def _projects(idx, include_private=True) -> list[dict]:
    """The registry ingest built, less the private notes' rows when asked to."""
    rows = idx.manifest.get("projects") or []
    return rows if include_private else shareable_projects(idx)


def shareable_projects(idx) -> list[dict]:
    """The registry's rows whose notes are in shareable folders (MCP)."""
    return [p for p in idx.manifest.get("projects") or []
            if (idx.by_path.get(p["path"]) or {}).get("private") is False]


class _RegistryWriter:
    """Writes the registry's rows as cited sentences (no model call)."""

    name, model = "registry", "registry"

    def __init__(self, rows):
        self.rows = rows

    def write(self, request, stage="generate", ledger=None) -> builtin_writer.Written:
        text = registry.sentences(self.rows, [f"c{i}" for i in range(1, len(self.rows) + 1)])
        return builtin_writer.Written(text or generate.ABSTAIN, self.name, 0,
                                      textkit.count_tokens(text))


def _from_registry(out: Answer, idx, be, clock: _Clock, want: dict, include_private):
    """A project question answered from the registry: its rows, each citing its note."""
    rows = registry.rows_for(want, _projects(idx, include_private))
    kept = registry.passages(idx, rows)[:MAX_REGISTRY_ROWS]
    rows = [p for p in rows if p["path"] in {c.path for c in kept}]
    out.route = {**out.route, "why": f"a project question: the registry ({len(rows)} rows)"}
    out.sources = _sources(kept)
    if not kept:
        return _abstain(out, clock, "no project in the registry matches")
    _write_and_verify(out, kept, be, clock, _RegistryWriter(rows))
    out.stages, out.calls = clock.rows(), list(clock.ledger.rows)
    return out


def _write_and_verify(out: Answer, kept: list, be, clock: _Clock, writer=None) -> None:
    """The generate and verify stages over the kept passages, into out (the backend's
    writer unless another is given)."""
    mode = "present" if out.time_mode == "as_of" else out.time_mode   # present on the day
    writer = writer or be.writer
    draft = clock.run("generate", generate.generate, out.question, kept, mode,
                      writer, ledger=clock.ledger, policy=_policy(writer, be))
    wrote = draft.writer               # the chooser hands synthesis on ("generate")
    agree, model_p = ((draft.trace.get("agree"), draft.trace.get("model_p"))
                      if wrote == "choose" else (None, None))
    out.answer, out.abstained, out.messages = draft.text, draft.abstained, draft.messages
    out.reply = draft.reply
    if draft.abstained:
        out.abstain_reason = "the writer found no answer in the kept passages"
    ver = clock.run("verify", verify_stage.verify, draft.text, kept, mode,
                    be.judge, ledger=clock.ledger, question=out.question,
                    repairs=draft.repairs)
    out.checks = {"rules_ok": ver.rules_ok, "on_question": ver.on_question,
                  "sentences": ver.sentences, "passed": ver.verdict == "SHIP"}
    if draft.abstained:
        out.verdict = "ABSTAIN"
    else:
        cal = clock.run("calibrate", calibrate.calibrate, out.question, draft.notes, ver,
                        kept, calibrate.key(be.name, wrote, _identity(writer, wrote)),
                        agree, model_p)
        out.verdict, out.confidence = cal["verdict"], cal["p"]
        out.checks["calibration"] = {k: cal[k] for k in ("features", "threshold", "why",
                                                         "key", "by")}
    out.shown, out.look_at = unsure.advise(out.verdict, out.question, out.answer,
                                           out.abstain_reason, ver.sentences, kept)
    if draft.trace.get("alternate") and not draft.abstained:
        _alternate(out, draft, kept, mode, be, clock, writer, ver.sentences)
    by_id = {f"c{i}": c for i, c in enumerate(kept, 1)}
    out.citations = [{"id": cid, "path": by_id[cid].path, "date": by_id[cid].date}
                     for cid in draft.citations if cid in by_id]


def _policy(writer, be) -> dict | None:
    """A choosing writer's calibrated policy (its stored calibration's, else the
    uncalibrated one: calibrate.policy), handed in with its request; None for others."""
    if not isinstance(writer, choosing_writer.ChoosingWriter):
        return None
    identity = getattr(writer, "identity", None)
    return calibrate.policy(calibrate.key(be.name, "choose", identity) if identity else None)


def _alternate(out: Answer, draft, kept: list, mode: str, be, clock: _Clock, writer,
               rows: list) -> None:
    """The other reader's answer where an uncalibrated model and the builtin reader
    disagree (choosing_writer.py, policy "both"): verified and featured like the answer, and
    shown beside it, both marked unsure, with how to calibrate the model."""
    alt = draft.trace["alternate"]
    ver = clock.run("verify", verify_stage.verify, alt["text"], kept, mode, be.judge,
                    ledger=clock.ledger, question=out.question)
    cal = clock.run("calibrate", calibrate.calibrate, out.question, draft.notes, ver, kept,
                    calibrate.key(be.name), False, draft.trace.get("model_p"))
    out.alternate = {"by": alt["by"], "answer": alt["text"], "features": cal["features"],
                     "passed": ver.verdict == "SHIP", "sentences": ver.sentences}
    seconds = sum(clock.ms.values()) / 1000
    out.shown, out.look_at = unsure.both(
        (getattr(writer, "model", "the model"), out.answer, rows),
        ("the builtin reader", alt["text"], ver.sentences), kept,
        calibrate.hint(seconds))


def _identity(writer, wrote) -> str | None:
    """The model's identity (its digest), for its calibration's key."""
    return getattr(writer, "identity", None) if wrote != "builtin" else None


def _abstain(out: Answer, clock: _Clock, reason: str, kept=()) -> Answer:
    out.answer, out.abstained, out.abstain_reason = generate.ABSTAIN, True, reason
    out.verdict, out.stages, out.calls = "ABSTAIN", clock.rows(), list(clock.ledger.rows)
    out.shown, out.look_at = unsure.advise("ABSTAIN", out.question, out.answer, reason, [],
                                           list(kept))
    return out


def render(a: Answer) -> str:
    """The human report: what to read (and where to look when unsure), stage table,
    total, sources, verdict."""
    lines = [f"({SAMPLE_NOTICE})"] if a.sample_vault else []
    lines.append(a.shown or a.answer)
    lines += [f"  [{x['id']}] {x['path']} ({x['date']}): {' '.join(x['line'].split())[:110]}"
              for x in a.look_at]
    lines.append("")
    if a.abstain_reason:
        lines += [f"abstained: {a.abstain_reason}", ""]
    lines.append(f"{'stage':<15}{'ms':>9}{'tokens in':>11}{'out':>7}{'$':>11}")
    for s in a.stages:
        lines.append(f"{s['name']:<15}{s['ms']:>9.1f}{s['input_tokens']:>11}"
                     f"{s['output_tokens']:>7}{s['dollars']:>11.6f}")
    tot = cost_ledger.stage_totals(a.stages)
    lines.append(f"{'total':<15}{tot['ms']:>9.1f}{tot['input_tokens']:>11}"
                 f"{tot['output_tokens']:>7}{tot['dollars']:>11.6f}")
    lines += ["", f"time mode: {a.time_mode}   backend: {a.backend} ({a.backend_note})"]
    if a.search_words:
        lines.append("also searched: " + " | ".join(a.search_words))
    for i, s in enumerate(a.sources, 1):
        tag = "aside" if s.get("set_aside") else "latest" if s["is_latest"] else "older"
        head = f" / {s['heading']}" if s["heading"] else ""
        why = f" ({s['why']})" if s.get("set_aside") else ""
        lines.append(f"  [c{i}] {s['score']:.3f}  {s['date']}  {tag:<6} {s['path']}{head}{why}")
    for c in a.candidates.get("version", []):
        if c.get("dropped"):
            lines.append(f"  set aside: {c['date']}  {c['path']} ({c['dropped']})")
    why = (a.checks.get("calibration") or {}).get("why")
    conf = "" if a.confidence is None else f"confidence {a.confidence:.2f}"
    lines.append(f"verdict: {a.verdict}" + (f" ({'; '.join(filter(None, (conf, why)))})"
                                            if conf or why else ""))
    for s in a.checks.get("sentences", []):
        if not s.get("ok", True):
            why = "; ".join(s.get("reasons", [])) or "the judge found it unsupported"
            lines.append(f"  failing: {s.get('sentence', '')[:90]}  ({why})")
    return "\n".join(lines)


def _config_kept(config, index=None, vault=None) -> None:
    """--config on a question or `verso projects`: an index answers with the config it
    was built with, and only an ingest changes it (a config given here once became the
    index's config unsaid, and changed later answers' privacy). The file the index reads
    already changes nothing (the refresh keeps its own); another is a ValueError naming
    the ingest that makes it the index's config."""
    if config is None:
        return
    d, folder, _ = resolve(index, vault)
    given = Path(config).expanduser().resolve()
    reads = None
    if folder is not None:
        folder = Path(folder).expanduser().resolve()
        try:
            reads = ingest.kept_config(Path(d).expanduser().resolve(), folder)
        except ValueError:             # the kept file is gone: the ingest names another
            reads = ""
        reads = folder / vault_walk.CONFIG_NAME if reads is None else reads
    if reads and given == Path(reads).resolve():
        return
    where = f" --index {index}" if index is not None else ""
    raise ValueError(f"--config {config}: an index keeps the config it was built with "
                     f"({reads or 'none'}), and only an ingest changes it: run `verso "
                     f"ingest {folder or 'NOTES'} --config {config}{where}`")


PROJECTS_ABOUT = ("The project registry: one row per project note in the folders "
                  "verso.toml's [registry] names (folders = [\"projects\"]), as ingest read it.")


CLI_ERRORS = (ValueError, OSError, store.IndexProblem, store.IndexBusy, models.BackendError)
# what a command line reports as one "error: ..." line, exit 2


def _where_args(p: argparse.ArgumentParser) -> None:
    """--vault and --index, as a question and `verso projects` take them."""
    p.add_argument("--vault", default=None,
                   help="notes folder (default: the vault the index was built from)")
    p.add_argument("--index", default=None, help="index dir (default: the one ingested last)")


def _timeout_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--timeout", type=float, default=None, help="seconds one Ollama request "
                   "may take (default 120, or $VERSO_OLLAMA_TIMEOUT)")


def _projects_main(argv: list, prog: str) -> int:
    """`verso projects` (`python harness.py --projects`): the registry table."""
    p = argparse.ArgumentParser(prog=prog, description=PROJECTS_ABOUT, epilog=WHERE_FROM)
    _where_args(p)
    p.add_argument("--config", metavar="FILE", default=None, help=argparse.SUPPRESS)
    p.add_argument("--backend", choices=("auto", "builtin", "ollama"), default="auto")
    p.add_argument("--json", action="store_true", help="the rows as JSON")
    _timeout_arg(p)
    args = p.parse_args(argv)
    try:
        _config_kept(args.config, args.index, args.vault)
        models.use_timeout(args.timeout)
        idx, _ = load(args.index, args.vault, args.backend)
        ingest.keep_until_exit(idx)
    except CLI_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rows = _projects(idx)
    print(json.dumps(rows, indent=1) if args.json else registry.table(rows))
    return 0


def main(argv=None, prog="harness.py") -> int:
    """A question on the command line (`verso "..."`), or the registry (--projects);
    prog: the command named in --help and errors."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--projects" in argv:
        return _projects_main([a for a in argv if a != "--projects"],
                              prog if prog != "harness.py" else "harness.py --projects")
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0],
                                epilog=WHERE_FROM)
    p.add_argument("question", nargs="*")
    _where_args(p)
    p.add_argument("--config", metavar="FILE", default=None, help="the config the index "
                   "answers with, if you name it (only `verso ingest NOTES --config FILE` "
                   "changes it)")
    p.add_argument("--no-rerank", action="store_true", help="fused order, top 5, no gate")
    p.add_argument("--no-search-words", action="store_true", help="search the question "
                   "only (default with a model writer: also the other wordings it writes)")
    p.add_argument("--budget", type=int, default=evidence.BUDGET_WORDS, metavar="WORDS",
                   help="hand the reader about this many words: notes ranked, one passage "
                   "each, filled to the budget (default: a model writer half its context, "
                   f"at most {evidence.MCP_WORDS}; the builtin reader its best "
                   f"{evidence.KEEP} passages)")
    p.add_argument("--mode", choices=("present", "history", "any", "as_of"), default=None,
                   help="the time mode (default: the router's); as_of with --as-of DATE")
    p.add_argument("--as-of", metavar="DATE", default=None, help="answer from the notes as "
                   "they stood on DATE (YYYY-MM-DD, or YYYY-MM for the month's end)")
    p.add_argument("--backend", choices=("auto", "builtin", "ollama"), default="auto")
    p.add_argument("--judge", choices=backends.JUDGES, default=None)
    p.add_argument("--writer", choices=backends.WRITERS, default=None, help="a model "
                   "backend's writer: choose (the model picks lines, code writes and cites; "
                   "default, or $VERSO_WRITER) or generate (free text)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--html", metavar="FILE", help="also write a trace page of every stage, "
                   "for yourself: it holds the notes' text, private folders' too, under a "
                   "not-for-sharing banner")
    p.add_argument("--redact", action="store_true", help="write the --html page to share: "
                   "text from private folders left out, their paths kept")
    p.add_argument("--include-private", action="store_true", help=argparse.SUPPRESS)
    # ^ the older flag: the text is kept by default now
    _timeout_arg(p)
    args = p.parse_args(argv)
    if not args.question:
        p.error("ask a question (or pass --projects)")
    try:
        _config_kept(args.config, args.index, args.vault)
        models.use_timeout(args.timeout)
        idx, be = load(args.index, args.vault, args.backend, args.judge, writer=args.writer)
        ingest.keep_until_exit(idx)
        if args.budget is not None and args.budget < 1:
            raise ValueError(f"--budget {args.budget}: give a number of words, such as 400")
        a = ask(" ".join(args.question), index=idx, backend=be, budget=args.budget,
                rerank=not args.no_rerank, mode=args.mode, as_of=args.as_of,
                search_words=False if args.no_search_words else None)
    except CLI_ERRORS as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(a.to_dict(), indent=1) if args.json else render(a))
    if args.html:
        from verso import html_report
        try:
            page = html_report.redact(a.to_dict()) if args.redact else a.to_dict()
            html_report.save_trace(Path(args.html), page, Path(idx.manifest["vault"]))
        except (ValueError, OSError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if html_report.holds_private(page):
            print(f"note: {args.html} holds text from private notes, not for sharing "
                  "(--redact writes a copy to share)", file=sys.stderr)
    return 0


FACES = {"--mcp": "mcp_server.py", "--mcp-check": "mcp_server.py", "--chat": "chat.py",
         "--calibrate": "calibrate_model.py"}


def _face_program(argv: list) -> int | None:
    """`python harness.py --mcp|--mcp-check|--chat|--calibrate ...` runs that face's own
    program (mcp_server.py, chat.py, calibrate_model.py) with the same arguments and stdio: the pipeline hands over
    to a face without importing it (the face imports the pipeline). None: no face."""
    flag = next((a for a in argv if a in FACES), None)
    if flag is None:
        return None
    import subprocess
    program = Path(__file__).resolve().with_name(FACES[flag])
    args = [a for a in argv if a != "--calibrate"]       # its program's own arguments
    env = {k: v for k, v in os.environ.items()
           if not (BLAS_SET_HERE and k == "OPENBLAS_NUM_THREADS")}   # a long-lived face
    try:
        return subprocess.call([sys.executable, str(program), *args], env=env)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    if (code := _face_program(sys.argv[1:])) is not None:
        sys.exit(code)
    ingest.run_cli(main)        # collector off; the process ends without freeing the index
