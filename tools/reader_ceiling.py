"""How far a line-picking reader can get on a question set: the funnel from retrieval to
the builtin reader's first pick, over the answerable questions (full variant, builtin).

    python tools/reader_ceiling.py --vault sample-vault --questions questions/dev.jsonl

For each answerable question the kept passages (harness.ask up to the gate, write=False)
are split into the reader's units (models.unit_rows) and five questions are asked:
  kept     a gold note is among the kept passages
  in unit  every key fact is in some unit of them (an extractive answer exists)
  named    ... in units that name an asked term in their words, heading or title
           (what term overlap can see: the rest differ from the question in every word)
  answers  ... in units that also hold a value of the asked kind near an asked term
           (models._Unit.answers: the units the writer may pick)
  first    the unit the writer leads with (the best answering unit of the whole
           question, models._best; none answers: it abstains) holds a key fact
Counts only: the frozen splits may be passed, no question or answer is printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import evaluate  # noqa: E402
import harness  # noqa: E402
import models  # noqa: E402

STEPS = ("kept", "in unit", "named", "answers", "first")


def _notes(a) -> list[dict]:
    """The kept passages as the writer's notes (models.parse_prompt's fields)."""
    return [{"id": f"c{i}", "path": s["path"], "section": s["heading"], "date": s["date"],
             "status": models.STATUS_LATEST if s["is_latest"] else models.STATUS_OLDER,
             "order": i - 1, "text": s["text"]} for i, s in enumerate(a.sources, 1)]


def _covered(facts, units) -> bool:
    return all(any(evaluate.has_fact(u.text, f) for u in units) for f in facts)


def funnel(q: dict, a) -> dict:
    """{step: bool} for one answerable question and its harness.Answer."""
    notes = _notes(a)
    units = models.unit_rows(models.analyse(q["question"]), notes) if notes else []
    facts = q["key_facts"]
    answering = [u for u in units if u.answers]    # none: the writer abstains
    best = models._best(answering) if answering else None
    return {"kept": bool(set(q["gold_files"]) & {s["path"] for s in a.sources}),
            "in unit": _covered(facts, units),
            "named": _covered(facts, [u for u in units if u.f[3] > 0]),
            "answers": _covered(facts, [u for u in units if u.f[3] > 0 and u.answers]),
            "first": best is not None and any(evaluate.has_fact(best.text, f)
                                              for f in facts)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vault", required=True)
    p.add_argument("--questions", required=True)
    args = p.parse_args(argv)
    qs = [q for q in evaluate.load_questions(args.questions) if q["answerable"]]
    totals = dict.fromkeys(STEPS, 0)
    with tempfile.TemporaryDirectory() as tmp:
        idx, be = harness.load(index=str(Path(tmp) / "idx"), vault=args.vault,
                               backend="builtin")
        for q in qs:
            got = funnel(q, harness.ask(q["question"], index=idx, backend=be, write=False))
            for k in STEPS:
                totals[k] += got[k]
    print(f"{Path(args.questions).stem}: {len(qs)} answerable  " + "  ".join(
        f"{k} {v}/{len(qs)} ({100 * v / max(len(qs), 1):.0f}%)" for k, v in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
