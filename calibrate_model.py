"""calibrate_model: `verso calibrate`, the user's model measured by the user's own run.

In:  the backend `verso` answers with (Ollama and its models, the judge chosen), and the
     tuning splits shipped with the package (calibrate.tuning_splits: vaults, questions).
Out: one row per question, appended as it is answered to
     <home>/calibrations/<backend>@<digest>.rows.jsonl (a killed run continues where it
     stopped: a question with a row is not asked again); then the fit, stored atomically
     in <home>/calibrations/<backend>@<digest>.json (calibrate.stored_path) with the
     date and the Verso version, and a report: whose answer is shown where the model and
     the builtin reader disagree, who answers synthesis and change questions, and when
     an answer ships.
     First, the evidence ranker for the user's embedder (evidence_fit.py): the pools of
     the same questions gathered with its vectors (the model asked nothing), fitted and
     held out by vault, stored as <home>/calibrations/evidence@<embedder>.json; the
     sections of that embedder's indexes are scored by it when it won held out
     (passages.ranker). Fitted again when none kept can be used (none, damaged, made
     for another ranker) or this run asks more questions than it was fitted on, and
     when --evidence asks (and then only it); never by --refit.
Not: the fit itself (verdict_fit.py, evidence_fit.py) or applying it (calibrate.py,
     choosing_writer.py, passages.py). Nothing is written into the source tree or the
     user's notes.

Each question is asked once with the model choosing lines, under the measuring policy
(MEASURE: both readers' answers kept, asked again in reverse where they disagree), and a
synthesis or change question once more with the model's free text. A row keeps, per
answer, whether it is right (measures.answer_correct), its calibration features and
whether verify's checks passed.

    verso calibrate [--splits dev dev2] [--limit N] [--judge builtin] [--refit] [--json]
    verso calibrate --evidence        # the evidence ranker for the embedder, only
"""

from __future__ import annotations

if __name__ == "__main__" and not __package__:   # a program in a checkout (not -m)
    import _checkout  # noqa: F401

import argparse
import json
import os
import sys
import time
from datetime import date

from verso import builtin_writer
from verso import calibrate
from verso import choosing_writer
from verso import evaluate
from verso import evidence_fit
from verso import harness
from verso import line_scores
from verso import measures
from verso import backends
from verso import models
from verso import passages
from verso import store
from verso import verdict_fit

FORMAT = 1
MEASURE = {"on_disagreement": "both", "synthesis": "choose", "change": "choose",
           "ask_again": True}
RULES = ("model", "reader", "again")     # ties: the user's model first; "again" costs a call
WRITERS = ("choose", "generate")         # ties: the chooser, whose lines cite themselves


def version() -> str:
    from importlib import metadata
    try:
        return metadata.version("verso")
    except metadata.PackageNotFoundError:
        return "checkout"


def _answer_row(q: dict, a: dict) -> dict:
    cal = (a.get("checks") or {}).get("calibration") or {}
    return {"right": measures.answer_correct(q, a), "abstained": bool(a.get("abstained")),
            "features": cal.get("features"), "passed": bool(a["checks"].get("passed"))}


def measure(q: dict, idx, be, free) -> dict:
    """One question's row: the model's answer and, where the readers disagreed, the
    reader's; for a synthesis or change question the free-text writer's too."""
    started = time.perf_counter()
    a = harness.ask(q["question"], index=idx, backend=be).to_dict()
    row = {"id": q["id"], "answers": {"model": _answer_row(q, a)}, "agree": True,
           "again": None, "kind": ("synthesis" if choosing_writer.SYNTHESIS_RE.match(q["question"])
                                   else "change" if a["time_mode"] == "history" else None)}
    call = next((c["choose"] for c in a["calls"] if c.get("choose")), None)
    if call and not call.get("agree", True):
        row["agree"], row["again"] = False, call.get("again")
        if alt := a.get("alternate"):              # the model's answer, the reader's beside
            row["answers"]["reader"] = {
                "right": measures.answer_correct(q, {"answer": alt["answer"]}),
                "abstained": False, "features": alt["features"], "passed": alt["passed"]}
        else:                                      # the model chose no line: the reader's
            row["answers"]["reader"] = row["answers"]["model"]
            row["answers"]["model"] = {"right": measures.answer_correct(
                q, {"answer": call.get("model_answer"), "abstained": True}),
                "abstained": True, "features": None, "passed": False}
    if row["kind"]:
        g = harness.ask(q["question"], index=idx, backend=free).to_dict()
        row["answers"]["generate"] = _answer_row(q, g)
    row["seconds"] = round(time.perf_counter() - started, 2)
    return row


def shown(row: dict, rule: str) -> dict:
    """The chooser's answer a row shows under a disagreement rule."""
    ans = row["answers"]
    if row["agree"] or rule == "model" or (rule == "again" and row["again"]):
        return ans["model"]
    return ans["reader"]


def _verdict_rows(rows: list, pick) -> list[dict]:
    out = []
    for r in rows:
        a = pick(r)
        if a and not a["abstained"] and a.get("features"):
            out.append({"split": r["split"], "id": r["id"], "features": a["features"],
                        "right": a["right"], "passed": a["passed"]})
    return out


def _verdict(rows: list[dict], backend: str) -> dict:
    """A verdict calibration, or {"none": why} when the rows cannot hold one."""
    if len(rows) < verdict_fit.least_rows():
        return {"none": f"{len(rows)} written answers: fewer than the "
                f"{verdict_fit.least_rows()} the bound needs to ship any"}
    if len({r["split"] for r in rows}) < 2:
        return {"none": f"answers from {len({r['split'] for r in rows})} split(s): the "
                "held-out fit needs two or more"}
    return verdict_fit.calibration(rows, backend)


def fit(rows: list[dict]) -> dict:
    """The policy and the verdict calibrations of a model's rows."""
    disagree = [{"split": r["split"], "right": {
        "model": r["answers"]["model"]["right"], "reader": r["answers"]["reader"]["right"],
        "again": shown(r, "again")["right"]}}       # (a model that chose no line: the reader's)
        for r in rows if not r["agree"]]
    rule = verdict_fit.pick(disagree, RULES)
    out = {"on_disagreement": rule}
    for kind in ("synthesis", "change"):
        both = [{"split": r["split"], "right": {"choose": shown(r, rule["choice"])["right"],
                                          "generate": r["answers"]["generate"]["right"]}}
                for r in rows if r["kind"] == kind and "generate" in r["answers"]]
        out[kind] = verdict_fit.pick(both, WRITERS)
    out["verdicts"], out["verdicts_why"] = {}, {}
    for writer, take in (("choose", lambda r: shown(r, rule["choice"])),
                         ("generate", lambda r: r["answers"].get("generate"))):
        v = _verdict(_verdict_rows(rows, take), "ollama")
        out["verdicts"][writer] = None if "none" in v else v
        if "none" in v:
            out["verdicts_why"][writer] = v["none"]
    return out


# ------------------------------------------------------------------ the run and its files
def rows_path(model_key: str):
    return calibrate.stored_path(model_key).with_suffix(".rows.jsonl")


def load_rows(path, same: dict) -> tuple[list[dict], int]:
    """(the rows kept from an earlier run with the same Verso, judge and splits' files,
    how many were set aside: another version's or a damaged line's)."""
    kept, aside = [], 0
    if not path.exists():
        return kept, aside
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
            ok = all(row.get(k) == v for k, v in same.items())
        except ValueError:          # a line cut short by a killed run
            ok = False
        kept += [row] if ok else []
        aside += not ok
    return kept, aside


def _append(path, row: dict) -> None:
    """One row, flushed to disk before the next question (a kill loses at most it)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _progress(done: int, total: int, split: str, row: dict, spent: list) -> str:
    left = (total - done) * sum(spent) / len(spent)
    when = f"{left / 60:.0f} min" if left >= 90 else f"{left:.0f} s"
    ans = row["answers"]["model"]
    return (f"calibrate: {done}/{total} {split} {row['id']} "
            f"{'right' if ans['right'] else 'wrong'}"
            f"{'' if row['agree'] else ' (readers disagree)'} · {row['seconds']:.1f} s · "
            f"about {when} left")


def _backends(judge):
    """(the choosing backend under MEASURE, the same model writing free text)."""
    be = backends.load_backend("auto", judge=judge, writer="choose")
    if be.name != "ollama":
        raise models.BackendError("verso calibrate measures a model served by Ollama: "
                                  + be.note.removeprefix("auto chose builtin: "))
    be.writer.policy = dict(MEASURE)
    free = backends.Backend("ollama", be.embedder, be.judge, be.writer.inner,
                            be.note + "; free text (calibration)")
    return be, free


def _index_dir(be, vault) -> str:
    emb = calibrate.file_name(getattr(be.embedder, "id", "embedder"))
    return str(store.home() / calibrate.STORED / "indexes" / emb / vault.name)


def collect(splits: dict, be, free, path, same: dict, limit=None, say=print) -> list[dict]:
    """Every tuning question of `splits` answered (those with a row already are not
    asked again); the rows of this Verso, judge and these splits."""
    rows, aside = load_rows(path, same)
    if aside:
        say(f"calibrate: {aside} rows of another Verso version or judge set aside")
    done = {(r["split"], r["id"]) for r in rows}
    todo = {s: [q for q in evaluate.load_questions(qf)[:limit] if (s, q["id"]) not in done]
            for s, (_, qf) in splits.items()}
    total, n, spent = sum(map(len, todo.values())), 0, []
    if rows:
        say(f"calibrate: {len(rows)} questions answered before; {total} to go")
    for split, qs in todo.items():
        if not qs:
            continue
        idx, _ = harness.load(index=_index_dir(be, splits[split][0]), vault=splits[split][0],
                              backend=be)
        for q in qs:
            n += 1
            try:
                row = {"split": split, **same, **measure(q, idx, be, free)}
            except models.BackendError as e:      # one slow or failed reply: asked next run
                say(f"calibrate: {split} {q['id']} skipped ({e})")
                continue
            _append(path, row)
            rows.append(row)
            spent.append(row["seconds"])
            say(_progress(n, total, split, row, spent))
    return [r for r in rows if r["split"] in splits]


def _evidence_sets(splits: dict, limit=None) -> list[tuple]:
    """(split, vault, the answerable key-fact questions among its first `limit`) of
    each tuning split: what the evidence ranker is fitted on."""
    return [(split, vault, [q for q in evaluate.load_questions(qfile)[:limit]
                            if q["answerable"] and q["key_facts"]])
            for split, (vault, qfile) in splits.items()]


def fit_evidence(sets: list, be, limit=None, say=print) -> dict:
    """The evidence ranker fitted on the pools the embedder of `be` gives for the tuning
    questions of `sets` (_evidence_sets: the first `limit` of each split), evidence_fit's
    rule deciding whether it is used: what calibrations/evidence@<embedder>.json keeps.
    The pools are gathered with the builtin judge and writer, as the shipped ranker's
    were: no model is asked."""
    pools = backends.Backend("ollama", be.embedder, line_scores.BuiltinJudge(),
                             builtin_writer.BuiltinWriter(),
                             be.note + "; evidence pools (calibration)")
    loaded = {}
    for i, (split, vault, _) in enumerate(sets):
        say(f"calibrate: indexing {split} with {be.embedder.id} ({i + 1}/{len(sets)})")
        loaded[split] = harness.load(index=_index_dir(be, vault), vault=vault,
                                     backend=pools)
    rows = evidence_fit.collect(sets, loaded, say=lambda split, i, n: say(
        f"calibrate: evidence pools of {split} ({i}/{n})"))
    if not rows:
        raise ValueError("no evidence pools: the tuning questions found no sections")
    fitted = evidence_fit.embedder_fit(rows, {split: str(v) for split, v, _ in sets})
    return {"format": calibrate.STORED_FORMAT, "key": passages.stored_key(be.embedder.id),
            "embedder": be.embedder.id, "ranker": passages.RANKER,
            "date": date.today().isoformat(), "verso": version(),
            "questions": sum(len(q) for _, _, q in sets), "sections": len(rows),
            "holding": sum(r["right"] for r in rows),
            "splits": sorted(split for split, _, _ in sets), "limit": limit, **fitted}


def evidence_report(ev: dict) -> str:
    """The line a person reads after the evidence ranker is fitted."""
    return (f"evidence ranker for {ev['embedder']}: {ev['questions']} questions, "
            f"{ev['sections']} sections ({ev['holding']} holding a key fact); {ev['why']} "
            f"-> {'this fit' if ev['use'] == 'fitted' else 'the shipped one'}")


def evidence_step(args, splits: dict, be, say) -> list[str]:
    """The evidence ranker for the embedder of `be`: fitted when --evidence asks, or
    (not with --refit) when none is in a state to use or this run asks more questions
    than the kept one was fitted on; the lines the report opens with."""
    emb = be.embedder.id
    got, state = passages.embedder_ranker(emb)
    sets = _evidence_sets(splits, args.limit)
    asked = sum(len(q) for _, _, q in sets)
    kept = got.get("questions") if isinstance(got, dict) else None
    more = not isinstance(kept, int) or asked > kept
    if args.evidence or not args.refit and (state in ("none", "damaged", "stale") or more):
        ev = fit_evidence(sets, be, args.limit, say)
        path = calibrate.stored_path(ev["key"])
        store.write_atomic(path, (json.dumps(ev, indent=1) + "\n").encode())
        return [evidence_report(ev), f"stored: {path}"]
    when = f" (fitted {got.get('date')})" if state in ("used", "not used") else ""
    return [f"evidence ranker for {emb}: {passages.RANKER_STATES[state]}{when}"]


def stored(rows: list[dict], model_key: str, model: str, judge: str) -> dict:
    """What calibrations/<key>.json keeps: the fit, with what it was fitted on."""
    return {"format": calibrate.STORED_FORMAT, "key": model_key, "model": model,
            "backend": "ollama", "judge": judge, "date": date.today().isoformat(),
            "verso": version(), "questions": len(rows),
            "splits": sorted({r["split"] for r in rows}),
            "seconds_per_question": round(sum(r["seconds"] for r in rows)
                                          / max(1, len(rows)), 2), **fit(rows)}


def _pick_line(what: str, got: dict) -> str:
    counts = ", ".join(f"{k} right {v}" for k, v in got["right"].items())
    held = "" if got["held_out"] is None else f"; held out {got['held_out']} right"
    return f"{what} ({got['rows']} questions): {counts or 'none seen'} -> {got['choice']}{held}"


def report(cal: dict) -> list[str]:
    """The lines a person reads after a calibration."""
    out = [f"verso calibrate: {cal['model']} ({cal['key']}), judge {cal['judge']}: "
           f"{cal['questions']} questions of {', '.join(cal['splits'])}, "
           f"{cal['seconds_per_question']:.1f} s each",
           _pick_line("where the model and the builtin reader disagree",
                      cal["on_disagreement"]),
           _pick_line("synthesis questions", cal["synthesis"]),
           _pick_line("change questions", cal["change"])]
    for writer, v in cal["verdicts"].items():
        if v is None:
            out.append(f"verdict ({writer}): none fitted: {cal['verdicts_why'][writer]}")
            continue
        ok, ship = (sum(x[i] for x in v["held_out"].values()) for i in (0, 1))
        top_k, top_n = v["bound"]["top"]
        if v["threshold"] <= 1:
            out.append(f"verdict ({writer}): SHIP at confidence {v['threshold']:.2f} or "
                       f"more; held out, {ok} of {ship} SHIPs right")
        else:
            need = v["bound"]["rows_needed"]
            out.append(f"verdict ({writer}): nothing ships: of the {top_n} most confident "
                       f"answers {top_k} were right, and the 95% lower bound of that "
                       f"precision is under {v['bound']['precision']:.0%}; " +
                       (f"about {need} answers at that precision would be needed"
                        if need else "at that precision no number of answers would do"))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="verso calibrate", description="Fit the evidence "
                                "ranker to your embedder, then measure your model on the "
                                "tuning question sets shipped with Verso and store how its "
                                "answers are used (whose reading is shown, when an answer "
                                "ships) in Verso's home.")
    p.add_argument("--splits", nargs="+", metavar="SPLIT", help="these tuning splits only "
                   f"(default: all: {', '.join(calibrate.tuning_splits())})")
    p.add_argument("--limit", type=int, metavar="N", help="the first N questions of each")
    p.add_argument("--judge", choices=backends.JUDGES, help="the judge answers are checked "
                   "by (default: as `verso` answers, builtin beside an Ollama writer)")
    p.add_argument("--refit", action="store_true", help="fit the rows kept so far; ask "
                   "nothing")
    p.add_argument("--evidence", action="store_true", help="fit only the evidence ranker "
                   "to the embedder (the order sections are handed on in); asks the "
                   "model nothing")
    p.add_argument("--json", action="store_true", help="print the stored calibration")
    args = p.parse_args(argv)
    if args.evidence and args.refit:
        p.error("--evidence fits the ranker again from the notes; --refit fits kept rows")
    splits = calibrate.tuning_splits()
    if args.splits and not set(args.splits) <= set(splits):
        p.error(f"not tuning splits: {', '.join(sorted(set(args.splits) - set(splits)))}")
    if args.limit is not None and args.limit < 1:
        p.error("--limit must be 1 or more")
    splits = {s: v for s, v in splits.items() if s in (args.splits or splits)}
    try:
        be, free = _backends(args.judge)
        identity = be.writer.inner.identity
        if not identity:
            raise models.BackendError(f"Ollama lists no digest for {be.writer.model}: a "
                                      "calibration is kept per model digest")
        key = calibrate.key("ollama", "choose", identity)
        path = rows_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        same = {"format": FORMAT, "verso": version(), "judge": args.judge or "builtin"}
        say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        ev_lines = evidence_step(args, splits, be, say)
        if args.evidence:
            stored_ev = calibrate.load_stored(passages.stored_key(be.embedder.id))
            print(json.dumps(stored_ev, indent=1) if args.json else "\n".join(ev_lines))
            return 0
        rows = (load_rows(path, same)[0] if args.refit else
                collect(splits, be, free, path, same, args.limit, say))
        rows = [r for r in rows if r["split"] in splits]
        cal = stored(rows, key, be.writer.model, same["judge"])
    except (models.BackendError, ValueError, store.IndexProblem) as e:
        print(f"verso calibrate: {e}", file=sys.stderr)
        return 1
    if not rows:
        print("verso calibrate: no rows to fit: run it without --refit", file=sys.stderr)
        return 1
    store.write_atomic(calibrate.stored_path(key), (json.dumps(cal, indent=1) + "\n").encode())
    print(json.dumps(cal, indent=1) if args.json else "\n".join(
        ev_lines + report(cal) + [f"stored: {calibrate.stored_path(key)}"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
