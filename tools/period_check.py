"""Three measures of issue 35 on one question set: when-questions, period evidence, and
as-of answers taken from a note written after the date.

    python tools/period_check.py --vault vaults/ninth-vault --questions questions/ninth.jsonl
    python tools/period_check.py ... --json

When-questions: each answerable question asking when ("when did/was/is ...", "how long
ago", "since when", "until when", "on what day", "what date") or after the last or first
time (asof.ordinal). Two counts: answered right (measures.answer_correct), and the day
handed on (measures.evidence_recall: every key fact, the day among them, inside the
passages handed on, their dates included) -- what any reader can answer from.

Period questions: each answerable question that asks what happened or was written in a
period (asof.period finds one, counted from the day of the vault's newest real-dated
note; the period found is printed beside each, so a reader checks the selection). Its
evidence is right when every gold file is among the passages handed on ("every note of
the period": the question set names them) and every passage is of the period: its own
date (log entry, else note; an mtime date is no date) lies in the period, or its text
states a day in it (asof.touches). measures.evidence_recall does not measure this: it
asks for the key facts, and says nothing of passages from outside the period.

As-of questions: each question the pipeline answers in time mode as_of. An answer is
taken from a note written after the date when a sentence of it cites a passage whose
date (log entry, else note) is after the as-of day, unless the passage holds only lines
stating days on or before it (version.py keeps those of a later note).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)
from verso import asof  # noqa: E402
from verso import evaluate  # noqa: E402
from verso import generate  # noqa: E402
from verso import harness  # noqa: E402
from verso import measures  # noqa: E402
from verso import retrieve  # noqa: E402


WHEN_RE = re.compile(r"^\W*(?:when\b|how long ago\b|since when\b|until when\b|"
                     r"on what (?:day|date)\b|what (?:day|date)\b)", re.I)


def asks_when(question: str) -> bool:
    return bool(WHEN_RE.search(question) or asof.ordinal(question))


def in_period(source: dict, start: str, end: str) -> bool:
    """A passage handed on is of the period: dated in it, or stating a day in it."""
    own = source.get("date")
    dated = own not in (None, "", "undated") and start <= own <= end
    return dated or asof.touches(asof.stated(source.get("text") or ""), start, end)


def period_right(gold_files, sources, start: str, end: str) -> tuple[bool, list, list]:
    """(right, gold files missing, paths of passages outside the period)."""
    paths = {s["path"] for s in sources}
    missing = sorted(set(gold_files) - paths)
    outside = [s["path"] for s in sources if not in_period(s, start, end)]
    return not missing and not outside, missing, outside


def later_citations(answer: dict) -> list[str]:
    """Paths of the passages an as-of answer cites that were written after the day and
    hold a line stating no day on or before it."""
    day, by_id = answer.get("as_of"), {f"c{i}": s for i, s in
                                       enumerate(answer.get("sources") or [], 1)}
    out = []
    for _, ids in generate.parse_citations(answer.get("answer") or ""):
        for s in (by_id[i] for i in ids if i in by_id):
            if s.get("date") in (None, "undated") or s["date"] <= day:
                continue
            lines = [x for x in (s.get("text") or "").splitlines() if x.strip()]
            if not all(asof.stated(x) and max(hi for _, hi in asof.stated(x)) <= day
                       for x in lines):
                out.append(s["path"])
    return sorted(set(out))


def run(vault: Path, questions: Path, index: str) -> dict:
    idx, be = harness.load(index=index, vault=vault, backend="builtin")
    today, period, as_of, when = retrieve.vault_today(idx), [], [], []
    for q in evaluate.load_questions(questions):
        span = asof.period(q["question"], today) if q["answerable"] else None
        a = harness.ask(q["question"], index=idx, backend=be).to_dict()
        if q["answerable"] and asks_when(q["question"]):
            when.append({"id": q["id"], "correct": measures.answer_correct(q, a),
                         "handed_on": measures.evidence_recall(q["key_facts"],
                                                               a["sources"])})
        if span:
            ok, missing, outside = period_right(q["gold_files"], a["sources"],
                                                span["start"], span["end"])
            period.append({"id": q["id"], "period": [span["start"], span["end"]],
                           "right": ok, "missing": missing, "outside": outside})
        if a.get("time_mode") == "as_of" and a.get("as_of"):
            later = later_citations(a)
            as_of.append({"id": q["id"], "as_of": a["as_of"], "later": later,
                          "correct": measures.answer_correct(q, a)})
    return {"today": today, "when": when, "period": period, "as_of": as_of}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vault", required=True)
    p.add_argument("--questions", required=True)
    p.add_argument("--index", help="an index folder (default: a fresh one)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = run(Path(args.vault), Path(args.questions), args.index or tmp)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"today (the vault's newest dated note): {out['today']}")
    for r in out["period"]:
        print(f"  {r['id']} {r['period'][0]}..{r['period'][1]} "
              f"{'right' if r['right'] else 'wrong'}  missing {r['missing']}  "
              f"outside {r['outside']}")
    for r in out["as_of"]:
        print(f"  {r['id']} as of {r['as_of']}  cites later notes {r['later']}  "
              f"correct {r['correct']}")
    for r in out["when"]:
        print(f"  {r['id']} when: correct {r['correct']}  day handed on {r['handed_on']}")
    n = len(out["when"])
    print(f"when-questions answered right: {sum(r['correct'] for r in out['when'])}/{n}; "
          f"with the day handed on: {sum(r['handed_on'] for r in out['when'])}/{n}")
    right = sum(r["right"] for r in out["period"])
    later = sum(bool(r["later"]) for r in out["as_of"])
    print(f"period questions with every note of the period and none outside: "
          f"{right}/{len(out['period'])}")
    print(f"as-of answers citing a note written after the date: {later}/{len(out['as_of'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
