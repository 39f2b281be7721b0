"""Replay recorded real-model writer replies through today's pipeline and print figures.

A measurement script, not a test (pytest does not collect it). Three modes:
- default (no server needed): each recorded reply (collect.py's JSONL, e.g.
  /work/notes/rig/dev-1.5b.jsonl, or the records.jsonl of an evaluate.py run, which
  keeps each writer prompt and reply) goes through generate (parsing, citation repair) and
  verify (builtin judge) again, over the notes read back from the prompt it answered;
- --pipeline: harness.ask() with the rig's embedder and the builtin judge, the writer
  replaying the recorded reply to the same question;
- --live: harness.ask() with the rig's writer (20-80 s a question on 2 CPU cores).
It prints citation validity (every code rule passed) over the answers that reached the
writer, shipped answers whose every number stands in a passage the sentence cites,
answer correct over all questions, verdicts, repairs, exceptions and seconds.

    python tests/rig_replay.py RECORDED.jsonl [--code DIR]     # prompts replayed
    OLLAMA_HOST=http://127.0.0.1:11435 python tests/rig_replay.py RECORDED.jsonl \\
        --pipeline|--live [--questions questions/dev.jsonl] [--index /tmp/real-idx]

--code DIR imports generate, verify and models from DIR first (to measure the code of
another commit: `git show BASE:generate.py > DIR/generate.py`, and so on).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
if "--code" in sys.argv:
    sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1])
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import evaluate  # noqa: E402

from verso import builtin_writer
from verso import generate  # noqa: E402
from verso import harness  # noqa: E402
from verso import line_scores
from verso import measures  # noqa: E402
from verso import verify  # noqa: E402
import rigfixtures  # noqa: E402


class ReplayWriter:
    """Answers a prompt with the recorded reply to the same question."""

    name = "replay"

    def __init__(self, replies: dict):
        self.replies, self.missing, self.changed = replies, [], []

    def write(self, request, stage="generate", ledger=None):
        rec = self.replies.get(request.question)
        if rec is None:
            self.missing.append(request.question)
            return builtin_writer.Written("", self.name)
        if rec["messages"][-1]["content"] != request.messages[-1]["content"]:
            self.changed.append(request.question)   # the notes differ from the recording's
        return builtin_writer.Written(rec["reply"], self.name, rec.get("prompt_tokens", 0),
                                      rec.get("output_tokens", 0))


def run(questions, backend, index, writer) -> list[dict]:
    rows, drafts, write = [], [], generate.generate

    def spy(*args, **kw):             # harness does not pass the repairs on (yet)
        drafts.append(write(*args, **kw))
        return drafts[-1]
    generate.generate = spy
    for q in questions:
        drafts.clear()
        started, error, a = time.perf_counter(), None, None
        try:
            a = harness.ask(q["question"], index=index, backend=backend).to_dict()
        except Exception as e:  # noqa: BLE001  (the figure counts every exception)
            error = f"{type(e).__name__}: {e}"
            traceback.print_exc()
        row = {"id": q["id"], "seconds": time.perf_counter() - started, "error": error}
        if a is not None:
            rec = evaluate.score(q, a, "rig")
            wrote = any(s["name"] == "generate" and s["ms"] > 0 for s in a["stages"]) \
                and bool(a["messages"])
            repairs = [x["note"] for d in drafts for x in getattr(d, "repairs", [])]
            row.update(stage_seconds={s["name"]: s["ms"] / 1000 for s in a["stages"]},
                       found5=rec["source_found_at5"])
            row.update(verdict=a["verdict"], correct=rec["answer_correct"], wrote=wrote,
                       valid=rec["citation_valid"], answer=a["answer"], repairs=repairs,
                       stand=measures.numbers_cited(a) if a["verdict"] == "SHIP" else None)
        rows.append(row)
        print(row["id"], row.get("verdict"), f"{row['seconds']:.1f}s",
              repr((row.get("answer") or "")[:90]), row.get("repairs") or "", flush=True)
    return rows


class _Reply:
    name = "recorded"

    def __init__(self, text):
        self.text = text

    def write(self, request, stage="generate", ledger=None):
        return builtin_writer.Written(self.text, self.name)


def _as_recording(rec: dict) -> dict:
    """An evaluate.py record (it has a variant) in collect.py's shape."""
    if "variant" not in rec:
        return rec
    calls = [{"messages": rec["messages"], "reply": rec["reply"]}] if rec["messages"] else []
    return {"id": rec["id"], "question": rec.get("question"), "answer": rec["answer"],
            "seconds": rec["total_ms"] / 1000, "calls": calls}


def replay_prompts(recs, questions) -> list[dict]:
    """generate + verify again on each recorded reply, over the notes its prompt held;
    a question the recording abstained on before the writer counts as that abstention."""
    by_q, rows = {r["id"]: r for r in map(_as_recording, recs)}, []
    judge = line_scores.BuiltinJudge()
    for q in questions:
        rec = by_q.get(q["id"])
        if rec is None:
            continue
        row = {"id": q["id"], "seconds": rec["seconds"], "error": None, "wrote": False,
               "repairs": []}
        if not rec["calls"]:
            a = {"answer": rec["answer"], "abstained": True}
            row.update(verdict="ABSTAIN", correct=measures.answer_correct(q, a), valid=None,
                       answer=rec["answer"], stand=None)
            rows.append(row)
            continue
        call = rec["calls"][0]
        question, mode, notes = rigfixtures.notes_from_prompt(call["messages"][-1]["content"])
        try:
            d = generate.generate(question, notes, mode, _Reply(call["reply"]))
            kw = {"repairs": d.repairs} if hasattr(d, "repairs") else {}
            v = verify.verify(d.text, notes, mode, judge, question=question, **kw)
        except Exception as e:  # noqa: BLE001  (the figure counts every exception)
            row.update(error=f"{type(e).__name__}: {e}", verdict="ERROR", correct=False,
                       valid=False, answer="", stand=None)
            rows.append(row)
            continue
        verdict = "ABSTAIN" if d.abstained else v.verdict
        sources = [{"text": c.chunk["text"], "heading": c.chunk["heading"], "path": c.path,
                    "date": c.date} for c in notes]
        a = {"answer": d.text, "abstained": d.abstained, "sources": sources}
        row.update(wrote=True, verdict=verdict, answer=d.text,
                   correct=measures.answer_correct(q, a),
                   valid=None if d.abstained else v.rules_ok,
                   repairs=[r["note"] for r in getattr(d, "repairs", [])],
                   stand=measures.numbers_cited(a) if verdict == "SHIP" else None,
                   failing=[(f["sentence"][:70], f["reasons"]) for f in v.failing])
        rows.append(row)
        print(q["id"], verdict, repr(d.text[:80]), row["repairs"] or "",
              row["failing"] or "", flush=True)
    return rows


def summary(rows) -> dict:
    wrote = [r for r in rows if r.get("wrote")]
    spoke = [r for r in wrote if r["valid"] is not None]
    shipped = [r for r in rows if r.get("verdict") == "SHIP" and r.get("stand") is not None]
    secs = sorted(r["seconds"] for r in wrote)
    verdicts: dict = {}
    for r in rows:
        verdicts[r.get("verdict")] = verdicts.get(r.get("verdict"), 0) + 1
    return {"questions": len(rows), "reached_writer": len(wrote),
            "citation_valid": f"{sum(r['valid'] for r in spoke)}/{len(spoke)}",
            "shipped_numbers_stand": f"{sum(r['stand'] for r in shipped)}/{len(shipped)}",
            "correct": f"{sum(bool(r.get('correct')) for r in rows)}/{len(rows)}",
            "verdicts": verdicts, "repaired_sentences": sum(len(r.get("repairs") or [])
                                                            for r in rows),
            "exceptions": sum(r["error"] is not None for r in rows),
            "p50_seconds_writer_questions": measures.percentile(secs, 50),
            "p50_seconds_all": measures.percentile([r["seconds"] for r in rows], 50),
            "p50_generate_seconds": measures.percentile(
                [r["stage_seconds"]["generate"] for r in wrote if "stage_seconds" in r], 50),
            "found_at5": f"{sum(bool(r.get('found5')) for r in rows)}/"
                         f"{sum(r.get('found5') is not None for r in rows)}"}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("recorded", nargs="?", help="collect.py JSONL (replies to replay)")
    p.add_argument("--questions", default=str(ROOT / "questions" / "dev.jsonl"))
    p.add_argument("--vault", default=str(ROOT / "sample-vault"))
    p.add_argument("--index", default="/tmp/real-idx")
    p.add_argument("--live", action="store_true", help="the rig's writer answers")
    p.add_argument("--pipeline", action="store_true",
                   help="harness.ask() around the recorded replies (needs the rig)")
    p.add_argument("--code", help="import generate, verify, models from this folder first")
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--out", help="write the per-question rows as JSONL here")
    args = p.parse_args(argv)
    questions = evaluate.load_questions(args.questions)[:args.limit]
    if not (args.live or args.pipeline):
        recs = [r for r in map(json.loads, filter(str.strip, open(args.recorded)))
                if "id" in r]
        rows = replay_prompts(recs, questions)
        if args.out:
            Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
        print(json.dumps(summary(rows), indent=1))
        return 0
    idx, be = harness.load(index=args.index, vault=args.vault, backend="ollama",
                           judge="builtin")
    writer = None
    if not args.live:
        recs = [r for r in map(json.loads, filter(str.strip, open(args.recorded)))
                if "id" in r]
        writer = ReplayWriter({r["question"]: r["calls"][0] for r in recs if r["calls"]})
        be.writer = writer
    rows = run(questions, be, idx, writer)
    if args.out:
        Path(args.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    s = summary(rows)
    if writer is not None:
        s.update(no_recording=len(writer.missing), prompt_changed=len(writer.changed))
    print(json.dumps(s, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
