"""Where the builtin reader loses answerable questions: counts per pipeline step.

    python tools/reader_ceiling.py --vault sample-vault --questions questions/dev.jsonl

Each answerable question is asked as evaluate.py's full variant asks it (harness.ask,
builtin backend), and six steps are counted, each needing the one before:
  kept      a gold note is among the kept passages
  gate      the gate passed them to the writer
  in unit   every key fact stands in some unit of the writer's notes
            (builtin_writer.unit_rows over the notes of its prompt,
            builtin_writer.parse_prompt): an extractive answer exists
  named     ... in units that name an asked term (in their words or heading, or in a
            note without headings its title: builtin_writer._Unit.named)
  answers   ... in units that also answer (a value of the asked kind near an asked term)
  lead      the answer's first sentence holds a key fact
Of the questions that reach "answers" and miss "lead", the last line says how many were
led with a sentence citing a note where no answering unit holds a key fact (another
note) rather than with another line of a note that holds one.
Counts only: the frozen splits may be passed, no question or answer is printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import evaluate  # noqa: E402

from verso import builtin_writer
from verso import generate  # noqa: E402
from verso import harness  # noqa: E402
from verso import line_scores
from verso import measures  # noqa: E402

STEPS = ("kept", "gate", "in unit", "named", "answers", "lead")


def _holds(u, facts) -> bool:
    return any(measures.has_fact(u.text, f) for f in facts)


def _covered(facts, units) -> bool:
    return all(any(measures.has_fact(u.text, f) for u in units) for f in facts)


def funnel(q: dict, a) -> dict:
    """{step: bool} for one answerable question and its harness.Answer, and under
    "other note" whether a missed lead cites only notes whose answering units hold no
    key fact (None when the lead is not a miss of that kind)."""
    facts = q["key_facts"]
    got = dict.fromkeys(STEPS, False) | {"other note": None}
    got["kept"] = bool(set(q["gold_files"]) & {s["path"] for s in a.sources})
    user = next((m["content"] for m in reversed(a.messages) if m["role"] == "user"), "")
    got["gate"] = got["kept"] and bool(user)
    if not got["gate"]:
        return got
    question, _, notes = builtin_writer.parse_prompt(user)
    units = builtin_writer.unit_rows(line_scores.analyse(question), notes)
    named = [u for u in units if u.named]
    answering = [u for u in named if u.answers]
    got["in unit"] = _covered(facts, units)
    got["named"] = got["in unit"] and _covered(facts, named)
    got["answers"] = got["named"] and _covered(facts, answering)
    pairs = [] if a.abstained else generate.parse_citations(a.answer)
    got["lead"] = got["answers"] and bool(pairs) and any(
        measures.has_fact(pairs[0][0], f) for f in facts)
    if got["answers"] and not got["lead"]:
        right = {u.note["id"] for u in answering if _holds(u, facts)}
        got["other note"] = bool(pairs) and not set(pairs[0][1]) & right
    return got


def _totals(vault: str, questions: list[dict]) -> dict:
    totals = dict.fromkeys(STEPS, 0) | {"other note": 0}
    with tempfile.TemporaryDirectory() as tmp:
        idx, be = harness.load(index=str(Path(tmp) / "idx"), vault=vault, backend="builtin")
        for q in questions:
            got = funnel(q, harness.ask(q["question"], index=idx, backend=be))
            for k, v in got.items():
                totals[k] += bool(v)
    return totals


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vault", required=True)
    p.add_argument("--questions", required=True)
    args = p.parse_args(argv)
    if not Path(args.vault).is_dir():
        p.error(f"--vault {args.vault} is not a folder")
    if not Path(args.questions).is_file():
        p.error(f"--questions {args.questions} is not a file")
    qs = [q for q in evaluate.load_questions(args.questions) if q["answerable"]]
    totals = _totals(args.vault, qs)
    n = max(len(qs), 1)
    print(f"{Path(args.questions).stem}: {len(qs)} answerable  " + "  ".join(
        f"{k} {totals[k]}/{len(qs)} ({100 * totals[k] / n:.0f}%)" for k in STEPS))
    missed = totals["answers"] - totals["lead"]
    print(f"  led wrong though a unit answers: {missed}; from another note: "
          f"{totals['other note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
