"""Evaluation: a question set -> per-question records -> metrics per variant, with McNemar.

In:  a vault, a JSONL question set (format in DESIGN.md "Question sets"), variant names.
Out: records (one per question and variant: the answer and the evidence handed on to
     the readers, each scored), a summary per variant overall and by category (every
     rate as {k, n, p}), paired exact McNemar tests, a run folder.
Not: any retrieval or answering of its own; every answer comes from harness.ask(), and
     the gold time_mode is only used for scoring, never handed to the system.

    python evaluate.py --vault sample-vault --questions questions/dev.jsonl --out runs/dev
    python evaluate.py --check questions/test.jsonl --vault sample-vault
    python evaluate.py --compare runs/a runs/b

Latency percentiles use the nearest-rank method: p-th = sorted[ceil(p/100 * n) - 1].
"""

from __future__ import annotations

if __name__ == "__main__" and not __package__:   # a program in a checkout (not -m)
    import _checkout  # noqa: F401

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import verso
from verso import chunking
from verso import measures
from verso import backends
from verso import models
from verso import scorecard
from verso import selective
from verso import store
from verso import store_load

FORMAT = 1
FIELDS = {"id": str, "question": str, "category": str, "time_mode": str, "answer": str,
          "key_facts": list, "forbidden_facts": list, "gold_files": list,
          "answerable": bool}
CATEGORIES = ("lookup", "current", "change", "multi", "table", "refuse", "paraphrase",
              "false_premise", "as_of")
TIME_MODES = ("present", "history", "any", "as_of")
ASK_KEYS = ("method", "use_version", "rerank", "expand_links",
            "search_words")  # harness.ask keywords (search_words None: with a model writer)
VARIANTS = {"bm25": ("bm25", False, False, True, False),
            "dense": ("dense", False, False, True, False),
            "hybrid": ("hybrid", False, False, True, False),
            "no-rerank": ("hybrid", True, False, True, None),
            "full": ("hybrid", True, True, True, None),
            "no-links": ("hybrid", True, True, False, None),
            "no-words": ("hybrid", True, True, True, False)}
FAILED = "FAILED"          # the verdict of a record whose question got no answer
FAIL_STREAK = 3           # failures in a row after which a variant's rest is not asked
DEFAULT_VARIANTS = ("bm25", "dense", "hybrid", "no-rerank", "full")
DEFAULT_PAIRS = ("full:no-rerank", "full:hybrid")
PAIR_METRICS = ("answer_correct", "source_found_at5")


class EvalError(ValueError):
    """Bad input at the edge (question file, folders, pairs, pipeline); one line."""


class QuestionFailed(EvalError):
    """One question got no answer (its model timed out or failed); the run goes on."""


# --------------------------------------------------------------------- questions

def _jsonl(path):
    """(line number, object or None, error or None) per non-blank line."""
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                yield n, json.loads(line), None
            except json.JSONDecodeError as e:
                yield n, None, f"invalid JSON ({e.msg})"


def load_questions(path) -> list[dict]:
    """The questions of a JSONL file; raises EvalError on a malformed line."""
    out = []
    for n, q, err in _jsonl(path):
        if err:
            raise EvalError(f"{path}: line {n}: {err}")
        out.append(q)
    return out


def _line_problems(q, fields=FIELDS) -> list[str]:
    if not isinstance(q, dict):
        return ["not a JSON object"]
    out = [f"missing field {k!r}" for k in fields if k not in q]
    out += [f"unknown field {k!r}" for k in q if k not in fields]
    for k, typ in fields.items():
        v = q.get(k)
        if typ is list and k in q and not (isinstance(v, list) and all(
                isinstance(x, str) and x.strip() for x in v)):
            out.append(f"{k!r} must be a list of non-empty strings")
        elif typ is not list and k in q and not isinstance(v, typ):
            out.append(f"{k!r} must be {typ.__name__}, got {v!r}")
        elif k in ("id", "question") and k in q and not v.strip():
            out.append(f"{k!r} is empty")
    for k, allowed in (("category", CATEGORIES), ("time_mode", TIME_MODES)):
        if isinstance(q.get(k), str) and q[k] not in allowed:
            out.append(f"{k} {q[k]!r} not one of {', '.join(allowed)}")
    if q.get("answerable") is False and (q.get("gold_files") or q.get("key_facts")):
        out.append("answerable is false but gold_files or key_facts are given")
    return out


def _vault_problems(q: dict, vault: Path) -> list[str]:
    out, texts = [], []
    for g in q["gold_files"]:
        p = (vault / g).resolve()
        if p.is_relative_to(vault.resolve()) and p.is_file():
            text = p.read_text(encoding="utf-8", errors="replace")
            texts += [text, chunking.as_shown(text, p.stat().st_mtime, p.stem)]   # + days
        else:
            out.append(f"gold file {g!r} not found in the vault")
    out += [f"key fact {f!r} appears in no gold file" + _written_as(texts, f)
            for f in q["key_facts"] if not any(measures.has_fact(t, f) for t in texts)]
    out += [f"{f!r} is both a key and a forbidden fact" for f in q["key_facts"]
            if measures.normalise(f) in map(measures.normalise, q["forbidden_facts"])]
    if q["answerable"] and not measures.answer_correct(q, {"answer": q["answer"]}):
        out.append("the reference answer itself is scored incorrect (key facts, "
                   f"forbidden facts or more than {measures.MAX_SENTENCES} sentences)")
    return out


def _written_as(texts: list[str], fact: str) -> str:
    """A hint for a key fact no gold file holds whole: the longer word or number a gold
    file holds it inside, or "" when none does."""
    form = next((w for t in texts if (w := measures.written_as(t, fact))), None)
    return f" (a gold file has {form!r}: write the fact as the note does)" if form else ""


def _problems(path, vault: Path, fields=FIELDS):
    """(line, is_structural, message) for every problem of a question file."""
    seen: dict = {}
    for n, q, err in _jsonl(path):
        found = [err] if err else _line_problems(q, fields)
        if not found and q["id"] in seen:
            found.append(f"duplicate id {q['id']!r} (first on line {seen[q['id']]})")
        yield from ((n, True, p) for p in found)
        if not found:
            seen[q["id"]] = n
            yield from ((n, False, p) for p in _vault_problems(q, vault))


def check_questions(path, vault, fields=FIELDS) -> list[str]:
    """Every problem of a question file, one `line N: ...` string each; [] when clean."""
    if not Path(vault).is_dir():
        return [f"vault {vault} is not a folder"]
    return [f"line {n}: {p}" for n, _, p in _problems(path, Path(vault), fields)]


# ------------------------------------------------------------------ conversations

CONV_FIELDS = {**FIELDS, "conversation": str, "turn": int, "referent": list}


def load_conversations(path, vault) -> dict:
    """{conversation id: its questions in turn order} of a conversation file (each line
    a question plus "conversation", "turn" and "referent": the words a full rewrite of
    the follow-up must hold); EvalError on a structural problem."""
    bad = [f"line {n}: {p}" for n, s, p in _problems(path, Path(vault), CONV_FIELDS) if s]
    if bad:
        raise EvalError(f"{path}: {bad[0]} (see --check)")
    out: dict = {}
    for q in load_questions(path):
        out.setdefault(q["conversation"], []).append(q)
    return {c: sorted(qs, key=lambda q: q["turn"]) for c, qs in out.items()}


def run_conversations(convs: dict, idx, be) -> list[dict]:
    """Each conversation through chat.Conversation: one scored record per turn, with
    the rewrite and whether it kept the referent (follow-ups only)."""
    from verso import chat
    out = []
    for cid, turns in convs.items():
        conv = chat.Conversation(idx, be)
        for q in turns:
            turn = conv.ask(q["question"])
            r = score(q, turn["trace"].to_dict(), "chat")
            low = turn["rewrite"].lower()
            r.update(conversation=cid, turn=q["turn"], rewrite=turn["rewrite"],
                     how=turn["how"], referent_kept=(all(x.lower() in low for x in q["referent"])
                                                     if q["turn"] > 1 else None))
            out.append(r)
    return out


def summarise_conversations(records) -> dict:
    follow = [r for r in records if r["turn"] > 1]
    hows = sorted({r["how"] for r in follow})
    return {"turns": _rate(r["answer_correct"] for r in records),
            "follow_ups": _rate(r["answer_correct"] for r in follow),
            "referent_kept": _rate(r["referent_kept"] for r in follow),
            "by_rule": {h: {"answer_correct": _rate(r["answer_correct"] for r in follow
                                                    if r["how"] == h),
                            "referent_kept": _rate(r["referent_kept"] for r in follow
                                                   if r["how"] == h)} for h in hows},
            "selective": selective.metrics(records)}


def _run_conversations(args, argv) -> int:
    vault = Path(args.vault)
    convs = load_conversations(args.conversations, vault)
    from verso import harness
    try:
        idx, be = harness.load(index=str(_index_dir(args, vault)), vault=vault,
                               backend=args.backend, judge=args.judge, writer=args.writer)
    except (ValueError, OSError, models.BackendError, store.IndexProblem) as e:
        raise EvalError(str(e)) from None
    records = run_conversations(convs, idx, be)
    result = {"conversations": summarise_conversations(records),
              "questions": str(args.conversations), "vault": str(vault.resolve()),
              "backend": be.name}
    print(json.dumps(result, indent=1) if args.json else
          scorecard.render_conversations(result["conversations"]))
    if args.out:
        save_run(Path(args.out), records, result, argv, {"backend": be.name,
                                                       "vault": result["vault"]})
    return 0


def _evidence(q: dict, a: dict) -> dict:
    """The evidence fields of a record; None where the measure does not apply."""
    src, ok = a.get("sources") or [], q["answerable"]
    one_version = (ok and q["time_mode"] in ("present", "as_of")
                   and bool(q["forbidden_facts"]))
    return {"evidence_recall": measures.evidence_recall(q["key_facts"], src)
            if ok and q["key_facts"] else None,
            "evidence_stale": measures.evidence_stale(q["forbidden_facts"], src, q["key_facts"])
            if one_version else None,
            "evidence_recall_all": measures.evidence_recall_all(q["gold_files"], src)
            if ok and q["gold_files"] and q["category"] == "change" else None,
            "evidence_words": measures.evidence_words(src)}


def score(q: dict, a: dict, variant: str) -> dict:
    """One record: the question, what the system answered, every per-question metric."""
    gold, text, abstained = q["gold_files"], a.get("answer") or "", bool(a.get("abstained"))
    answerable = q["answerable"] and bool(gold)   # retrieval metrics need gold files
    stages = [dict(s) for s in a.get("stages") or []]
    present = q["answerable"] and q["time_mode"] in ("present", "as_of")   # one version
    cal = (a.get("checks") or {}).get("calibration") or {}
    return {
        "id": q["id"], "question": q["question"], "category": q["category"],
        "variant": variant,
        "answerable": q["answerable"], "gold_time_mode": q["time_mode"], "answer": text,
        "abstained": abstained, "time_mode": a.get("time_mode"),
        "verdict": a.get("verdict"), "confidence": a.get("confidence"),
        "checks_passed": (a.get("checks") or {}).get("passed"),
        "features": cal.get("features"), "calibration_key": cal.get("key"),
        "sources": measures.source_paths(a.get("sources")),
        "ranking": list(a.get("ranking") or []), "retrieved": list(a.get("retrieved") or []),
        "stages": stages, "answer_correct": measures.answer_correct(q, a),
        "source_found_at5": measures.source_found_at5(gold, a.get("sources")) if answerable else None,
        "recall_all_at10": (measures.recall_all_at10(gold, a.get("retrieved"))
                            if answerable and q["category"] == "change" else None),
        "reciprocal_rank": measures.reciprocal_rank(gold, a.get("ranking")) if answerable else None,
        "stale": (measures.has_any(measures.CITATION_RE.sub("", text), q["forbidden_facts"])
                  if present else None),
        **_evidence(q, a),
        "abstain_correct": None if q["answerable"] else abstained,
        "false_abstain": abstained if q["answerable"] else None,
        "citation_valid": None if abstained else (a.get("checks") or {}).get("rules_ok"),
        "on_question": None if abstained else (a.get("checks") or {}).get("on_question"),
        "shipped_numbers_cited": measures.numbers_cited(a) if a.get("verdict") == "SHIP" else None,
        "route_correct": a.get("time_mode") == q["time_mode"],
        "total_ms": sum(s.get("ms", 0) for s in stages),
        "tokens": sum(s.get("input_tokens", 0) + s.get("output_tokens", 0) for s in stages),
        "dollars": sum(s.get("dollars", 0.0) for s in stages),
        # the writer's prompt and reply, for replaying a real model's answers offline
        "messages": list(a.get("messages") or []), "reply": a.get("reply") or "",
        # the choosing reader's trace: lines offered and chosen, the two readers agree
        "choose": next((c["choose"] for c in reversed(a.get("calls") or [])
                        if c.get("choose")), None)}


# --------------------------------------------------------------------- summaries

def _rate(values) -> dict:
    vals = [bool(v) for v in values if v is not None]
    return {"k": sum(vals), "n": len(vals), "p": sum(vals) / len(vals) if vals else None}


def _stage_costs(records) -> dict:
    """Per stage and "total": p50/p95 ms, tokens and dollars (sum and per question)."""
    rows: dict = {}   # stage -> [(ms, tokens, dollars) per record that ran it]
    for r in records:
        for s in r["stages"]:
            rows.setdefault(s["name"], []).append((s.get("ms", 0), s.get(
                "input_tokens", 0) + s.get("output_tokens", 0), s.get("dollars", 0.0)))
    rows["total"] = [(r["total_ms"], r["tokens"], r["dollars"]) for r in records]
    n_q, out = max(len(records), 1), {}
    for name, xs in rows.items():
        ms, tok, usd = [x[0] for x in xs], sum(x[1] for x in xs), sum(x[2] for x in xs)
        out[name] = {"p50_ms": measures.percentile(ms, 50), "p95_ms": measures.percentile(ms, 95),
                     "tokens": tok, "tokens_per_question": tok / n_q,
                     "dollars": usd, "dollars_per_question": usd / n_q}
    return out


def _evidence_summary(records) -> dict:
    """Evidence recall, stale evidence, recall_all as rates; words per question as
    mean and nearest-rank p95 (records from before these fields count as not measured)."""
    words = [r["evidence_words"] for r in records if r.get("evidence_words") is not None]
    return {**{m: _rate(r.get(m) for r in records) for m in
               ("evidence_recall", "evidence_stale", "evidence_recall_all")},
            "evidence_words": {"mean": sum(words) / len(words) if words else None,
                               "p95": measures.percentile(words, 95), "n": len(words)}}


def _metrics(records) -> dict:
    rr = [r["reciprocal_rank"] for r in records if r["reciprocal_rank"] is not None]
    spoke = [r for r in records if not r["abstained"]]
    verdicts: dict = {}
    for r in records:
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    return {
        "n_questions": len(records),
        "source_found_at5": _rate(r["source_found_at5"] for r in records),
        "recall_all_at10": _rate(r["recall_all_at10"] for r in records),
        "mrr": {"k": sum(rr), "n": len(rr), "p": sum(rr) / len(rr) if rr else None},
        "answer_correct": _rate(r["answer_correct"] for r in records),
        "current_correct": _rate(r["answer_correct"] for r in records
                                 if r["category"] == "current"),
        "stale_rate": _rate(r["stale"] for r in records),
        "abstain_correct": _rate(r["abstain_correct"] for r in records),
        "false_abstain": _rate(r["false_abstain"] for r in records),
        "citation_valid": _rate(r["citation_valid"] for r in records),
        "on_question": _rate(r.get("on_question") for r in records),
        "shipped_numbers_cited": _rate(r.get("shipped_numbers_cited") for r in records),
        "route_accuracy": _rate(r["route_correct"] for r in records),
        **_evidence_summary(records),
        "verdicts": verdicts,
        "failed": sum(1 for r in records if r.get("error")),
        "escalate_on_correct": _rate(r["verdict"] == "ESCALATE" for r in spoke
                                     if r["answer_correct"]),
        "escalate_on_incorrect": _rate(r["verdict"] == "ESCALATE" for r in spoke
                                       if not r["answer_correct"]),
        "selective": selective.metrics(records),
        "stages": _stage_costs(records)}


def summarise(records) -> dict:
    """Metrics recomputed from records only: {"overall": {...}, "by_category": {...}}."""
    cats = sorted({r["category"] for r in records}, key=lambda c: (
        CATEGORIES.index(c) if c in CATEGORIES else len(CATEGORIES), c))
    return {"overall": _metrics(records),
            "by_category": {c: _metrics([r for r in records if r["category"] == c])
                            for c in cats}}


def paired(records, a: str, b: str, metric: str) -> dict:
    """Wins (a right, b wrong), losses and the exact McNemar p over shared questions."""
    va = {r["id"]: r[metric] for r in records if r["variant"] == a}
    vb = {r["id"]: r[metric] for r in records if r["variant"] == b}
    both = [i for i in va if i in vb and va[i] is not None and vb[i] is not None]
    wins = sum(1 for i in both if va[i] and not vb[i])
    losses = sum(1 for i in both if vb[i] and not va[i])
    return {"a": a, "b": b, "metric": metric, "wins": wins, "losses": losses,
            "n": len(both), "p": measures.mcnemar(wins, losses)}


def compare_runs(records_a, records_b) -> dict:
    """{variant: {metric: {"fixed": [ids], "broken": [ids]}}} from run A to run B."""
    out: dict = {}
    b = {(r["variant"], r["id"]): r for r in records_b}
    for ra in records_a:
        rb = b.get((ra["variant"], ra["id"]))
        for m in PAIR_METRICS:
            if rb is None or ra[m] is None or rb[m] is None or bool(ra[m]) == bool(rb[m]):
                continue
            flips = out.setdefault(ra["variant"], {}).setdefault(
                m, {"fixed": [], "broken": []})
            flips["fixed" if rb[m] else "broken"].append(ra["id"])
    return out


# ---------------------------------------------------------------- running, files

def run_variant(questions, ask_fn, variant: str, progress=None,
                on_answer=None) -> list[dict]:
    """Ask every question with the variant's settings; one scored record each.
    ask_fn(question_text, method=..., use_version=..., rerank=..., expand_links=...,
    search_words=...)
    returns an Answer (anything with to_dict()) or a dict; on_answer(q, answer dict,
    record), if given, sees each whole answer (the HTML trace pages).

    A question whose ask_fn raises QuestionFailed (a model that timed out or failed) is
    recorded with its error and scored wrong, and the run goes on; after FAIL_STREAK
    failures in a row the rest of the variant is recorded as not asked."""
    out, kwargs, streak = [], dict(zip(ASK_KEYS, VARIANTS[variant])), 0
    for i, q in enumerate(questions, 1):
        if progress:
            progress(f"{variant}: question {i}/{len(questions)}")
        if streak >= FAIL_STREAK:
            out.append(failed(q, variant, f"not asked: {FAIL_STREAK} questions in a row "
                              "failed before it"))
            continue
        try:
            a = ask_fn(q["question"], **kwargs)
        except QuestionFailed as e:
            streak += 1
            out.append(failed(q, variant, str(e)))
            continue
        streak = 0
        a = a if isinstance(a, dict) else a.to_dict()
        out.append(score(q, a, variant))
        if on_answer:
            on_answer(q, a, out[-1])
    return out


def failed(q: dict, variant: str, error: str) -> dict:
    """The record of a question that got no answer: scored wrong, its error kept."""
    r = score(q, {"verdict": FAILED}, variant)
    r["error"] = error
    return r


def _progress(msg: str) -> None:
    if sys.stderr.isatty():
        print(f"\r{msg:<60}", end="" if msg else "\r", file=sys.stderr, flush=True)


def _git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                           cwd=Path(__file__).resolve().parent, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def save_run(out: Path, records, result: dict, argv, config: dict) -> None:
    """records.jsonl (format header line first), summary.json, command.txt, config.json."""
    out.mkdir(parents=True, exist_ok=True)
    head = json.dumps({"format": FORMAT, "kind": "verso-eval-records"})
    write = store.write_atomic
    write(out / "records.jsonl", "\n".join([head, *map(json.dumps, records)]) + "\n")
    write(out / "summary.json", json.dumps({"format": FORMAT, **result}, indent=1))
    write(out / "command.txt", " ".join(["python", "evaluate.py", *argv]) + "\n")
    write(out / "config.json", json.dumps({"format": FORMAT, **config}, indent=1))


def load_records(run_dir) -> list[dict]:
    """The records of a run folder written by save_run (format checked)."""
    path = Path(run_dir) / "records.jsonl"
    if not path.is_file():
        raise EvalError(f"{path} not found: pass a folder written by --out")
    lines = path.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0]) if lines else {}
    if head.get("format") != FORMAT:
        raise EvalError(f"{path}: format {head.get('format')!r}, expected {FORMAT}")
    return [json.loads(x) for x in lines[1:] if x.strip()]


# --------------------------------------------------------------------------- CLI

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evaluate.py", description=__doc__.split("\n")[0])
    p.add_argument("--vault", help="the notes folder the questions are about (default: "
                   "the vault the --index was built from)")
    p.add_argument("--questions", help="question set (JSONL)")
    p.add_argument("--check", metavar="FILE", help="validate a question file and stop")
    p.add_argument("--conversations", metavar="FILE", help="score a conversation file: "
                   "each follow-up rewritten (chat.py), then answered")
    p.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                   help="list questions whose answer_correct / source_found flipped")
    p.add_argument("--variant", nargs="+", choices=list(VARIANTS), default=None)
    p.add_argument("--backend", choices=("auto", "builtin", "ollama"), default="auto")
    p.add_argument("--judge", choices=backends.JUDGES, default=None)
    p.add_argument("--writer", choices=backends.WRITERS, default=None,
                   help="a model backend's writer: choose (default) or generate")
    p.add_argument("--timeout", type=float, default=None, help="seconds one Ollama request may take (default 120, or $VERSO_OLLAMA_TIMEOUT)")
    p.add_argument("--index", help="index dir (default: OUT/index, else a cache dir)")
    p.add_argument("--out", help="run folder: records, summary, command, config")
    p.add_argument("--pairs", nargs="+", metavar="A:B", default=None)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("--html", metavar="DIR", help="index.html and a trace page per question "
                   "(the notes' text, private folders' too, under a not-for-sharing banner)")
    p.add_argument("--redact", action="store_true", help="write the --html pages to share: "
                   "text from private folders left out, their paths kept")
    p.add_argument("--include-private", action="store_true", help=argparse.SUPPRESS)
    # ^ the older flag: the text is kept by default now
    p.add_argument("--budgets", nargs="*", type=int, metavar="WORDS", default=None,
                   help="instead of answering: the evidence at these word budgets "
                   "(default 300 600 1000) for each --variant, beside the plain BM25 "
                   "baseline (plain_bm25.py); recall by kind, stale evidence, found@5")
    p.add_argument("--evidence-only", action="store_true", help="stop at the evidence the "
                   "writer would get (no answer written; a model writer still writes search "
                   "words): retrieval and evidence measures only, "
                   "quick with a model backend; the answer measures then mean nothing")
    return p


def _vault_of(index_dir) -> str:
    """The vault an existing index was built from (for a run given --index alone)."""
    try:
        built = store_load.built_from(index_dir)
    except store.IndexProblem as e:
        raise EvalError(str(e)) from None
    if built is None:
        raise EvalError(f"no index in {index_dir}: pass --vault DIR")
    return built[0]


def _index_dir(args, vault: Path) -> Path:
    if args.index or args.out:
        return Path(args.index) if args.index else Path(args.out) / "index"
    tag = hashlib.sha256(str(vault.resolve()).encode()).hexdigest()[:10]
    return store.home() / "eval" / f"{vault.name}-{tag}"


def _open_pipeline(vault: Path, index_dir: Path, args):
    """ask(question, **variant) bound to one loaded index and backend (lazy imports)."""
    from verso import harness
    try:
        idx, be = harness.load(index=str(index_dir), vault=vault, backend=args.backend,
                               judge=args.judge, writer=args.writer)
    except (ValueError, OSError, models.BackendError, store.IndexProblem) as e:
        raise EvalError(str(e)) from None

    stop = {"write": False} if args.evidence_only else {}     # the evidence, no writer

    def ask(question, **kw):
        try:
            return harness.ask(question, index=idx, backend=be, **kw, **stop)
        except models.BackendError as e:   # a model that timed out or failed: this question
            raise QuestionFailed(str(e)) from None
        except store.IndexProblem as e:   # the index itself: the run cannot go on
            raise EvalError(str(e)) from None
    return ask, be


def _setup(args) -> tuple[list, list, Path]:
    """Variants, pairs and index dir; the questions validated (vault issues warned)."""
    vault, variants = Path(args.vault), list(dict.fromkeys(args.variant or DEFAULT_VARIANTS))
    pairs = [s.partition(":")[::2] for s in args.pairs or DEFAULT_PAIRS]
    bad = [f"{a}:{b}" for a, b in pairs if a not in variants or b not in variants]
    if bad and args.pairs:
        raise EvalError(f"pairs {', '.join(bad)}: run both variants of each (--variant)")
    index_dir = _index_dir(args, vault)
    for what, p in (("--out", args.out), ("--html", args.html), ("index dir", index_dir)):
        if p and Path(p).resolve().is_relative_to(vault.resolve()):
            raise EvalError(f"{what} {p} is inside the vault: choose a folder outside it")
    for n, structural, p in _problems(args.questions, vault):
        if structural:
            raise EvalError(f"{args.questions}: line {n}: {p} (see --check)")
        print(f"warning: {args.questions}: line {n}: {p}", file=sys.stderr)
    return variants, [p for p in pairs if f"{p[0]}:{p[1]}" not in bad], index_dir


def _evaluate(args, setup, on_answer=None, progress=None):
    """(result, records, backend) of the question set args.questions; setup: _setup's."""
    variants, pairs, index_dir = setup
    vault, qpath = Path(args.vault), Path(args.questions)
    questions = load_questions(qpath)
    ask, be = _open_pipeline(vault, index_dir, args)
    records = []
    for v in variants:
        records += run_variant(questions, ask, v, progress=progress, on_answer=on_answer)
    result = {"variants": {v: summarise([r for r in records if r["variant"] == v])
                           for v in variants},
              "pairs": [paired(records, a, b, m) for a, b in pairs for m in PAIR_METRICS],
              "questions": str(qpath), "n_questions": len(questions),
              "questions_sha256": hashlib.sha256(qpath.read_bytes()).hexdigest(),
              "vault": str(vault.resolve()), "backend": getattr(be, "name", str(be)),
              "evidence_only": bool(args.evidence_only)}
    return result, records, be


def run_set(questions, vault, *, index=None, backend="builtin", variants=("full",),
            judge=None, writer=None) -> dict:
    """A question set's figures, for a notebook (`verso.evaluate(FILE, vault=DIR)`): the
    summary per variant, the McNemar pairs, and every scored record under "records"."""
    questions, vault = Path(questions).expanduser(), Path(vault).expanduser()
    argv = ["--questions", str(questions), "--vault", str(vault), "--backend", backend,
            "--variant", *variants] + (["--index", str(index)] if index else [])
    args = _parser().parse_args(argv + (["--judge", judge] if judge else [])
                                + (["--writer", writer] if writer else []))
    result, records, _ = _evaluate(args, _setup(args))
    return dict(result, records=records)


def _run(args, argv) -> int:
    setup, pages = _setup(args), None
    if args.html:
        from verso import html_report
        pages = html_report.TracePages(Path(args.html), Path(args.vault), args.redact)
    result, records, be = _evaluate(args, setup, pages, _progress)
    index_dir = setup[2]
    _progress("")
    qpath = Path(args.questions)
    print(json.dumps(result, indent=1) if args.json else scorecard.render(result))
    if fails := [r for r in records if r.get("error")]:
        print(f"warning: {len(fails)} of {len(records)} answers failed and were scored "
              f"wrong (first: {fails[0]['variant']} {fails[0]['id']}: {fails[0]['error']})",
              file=sys.stderr)
    if args.out:
        from verso import generate
        config = {"backend": result["backend"], "judge": args.judge,
                  "variants": list(result["variants"]),
                  "backend_note": getattr(be, "note", ""), "writer": getattr(getattr(
                      be, "writer", None), "model", "builtin"),
                  "prompt_form": generate.PROMPT_FORM,
                  "vault": result["vault"], "questions": str(qpath.resolve()),
                  "questions_sha256": result["questions_sha256"],
                  "index": str(index_dir), "git_commit": _git_commit()}
        save_run(Path(args.out), records, result, argv, config)
    if pages:
        pages.save_index(result, records, load_questions(qpath))
    return 0


def _run_budgets(args) -> int:
    """--budgets: the evidence at equal words beside the baseline (budget_eval.py)."""
    from verso import budget_eval
    from verso import plain_bm25
    args.variant, args.evidence_only = args.variant or ["full"], True   # no writer
    variants, _, index_dir = _setup(args)
    ask, _ = _open_pipeline(Path(args.vault), index_dir, args)
    budgets = args.budgets or list(budget_eval.BUDGETS)
    if any(b < 1 for b in budgets):
        raise EvalError(f"--budgets {budgets}: give numbers of words, such as 300 600 1000")
    result = budget_eval.measure(
        load_questions(args.questions), ask,
        plain_bm25.Baseline(args.vault), budgets, variants,
        {v: dict(zip(ASK_KEYS, VARIANTS[v])) for v in variants})
    print(json.dumps(result, indent=1) if args.json else budget_eval.render(result))
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        store.write_atomic(Path(args.out) / "budgets.json",
                           json.dumps(result, indent=1).encode())
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    try:
        models.use_timeout(args.timeout)
        if args.compare:
            flips = compare_runs(*(load_records(d) for d in args.compare))
            print(json.dumps(flips, indent=1) if args.json else scorecard.render_compare(flips))
            return 0
        path = args.check or args.questions or args.conversations
        if not args.vault and args.index:
            args.vault = _vault_of(args.index)
        if not args.vault or not path:
            raise EvalError("pass --vault DIR and --questions FILE (or --check FILE)")
        if not Path(args.vault).is_dir():
            raise EvalError(f"vault {args.vault} not found (pass --vault DIR)")
        if not Path(path).is_file():
            raise EvalError(f"question file {path} not found")
        if args.conversations and not args.check:
            return _run_conversations(args, argv)
        if not args.check and args.budgets is not None:
            return _run_budgets(args)
        if not args.check:
            return _run(args, argv)
        first = next((q for _, q, _ in _jsonl(args.check) if isinstance(q, dict)), {})
        conv = "conversation" in first      # a conversation file's lines carry the key
        problems = check_questions(args.check, args.vault, CONV_FIELDS if conv else FIELDS)
        print("\n".join(problems) or f"ok: {len(load_questions(args.check))} questions")
        return 1 if problems else 0
    except (EvalError, models.BackendError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


verso.call_as(__name__, run_set)     # verso.evaluate(FILE, vault=DIR) in a notebook

if __name__ == "__main__":
    sys.exit(main())
