"""Two readers, one decision: on runs of the choosing reader, how often the model's
lines and the builtin reader's answer agree, who is right where they disagree, and the
model's pull towards the first line; --pick prints the choose.ON_DISAGREEMENT it supports.

    python tools/choose_agree.py RUN=QUESTIONS... [--pick]

RUN is an evaluate.py run folder of a model backend (its records keep the chooser's
trace: the lines chosen, the builtin reader's answer on the same notes, whether the two
agree, the model's own answer when the reader's was shown, and with choose.ASK_AGAIN
whether the model chose the same first line with the lines in reverse); QUESTIONS its
question file. Run --pick on tuning splits only: of "reader", "model" and (when the
runs asked again) "again", the rule whose shown answers are right most often over the
disagreements; a tie goes to the earlier of the three.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import evaluate  # noqa: E402
from verso import extract  # noqa: E402


def _right(q: dict, answer: str) -> bool:
    return evaluate.answer_correct(q, {"answer": answer,
                                       "abstained": answer == extract.ABSTAIN_SENTENCE})


def tally(run: Path, questions: Path) -> dict:
    qs = {q["id"]: q for q in evaluate.load_questions(questions)}
    out = {"answers": 0, "agree": 0, "agree_right": 0, "first_line": 0, "reader_only": 0,
           "model_only": 0, "both": 0, "neither": 0, "asked_again": 0, "again": 0,
           "again_reader": 0, "again_model": 0}
    for r in evaluate.load_records(run):
        ch = r.get("choose")
        if r["variant"] != "full" or not ch or ch.get("writer") != "choose":
            continue
        q = qs[r["id"]]
        out["answers"] += 1
        out["first_line"] += (ch.get("chosen") or [None])[0] == 1
        if ch["agree"]:
            out["agree"] += 1
            out["agree_right"] += r["answer_correct"]
            continue
        model = ch.get("model_answer") or r["answer"]
        a, b = _right(q, ch["builtin"]), _right(q, model)
        out["both" if a and b else "reader_only" if a else "model_only" if b else
            "neither"] += 1
        if "again" in ch:                   # asked twice: the same first line both times?
            out["asked_again"] += 1
            out["again"] += bool(ch["again"])
            out["again_reader"] += a and not b and bool(ch["again"])
            out["again_model"] += b and not a and bool(ch["again"])
    return out


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    pick = "--pick" in args
    args = [a for a in args if a != "--pick"]
    if not args or any("=" not in a for a in args):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    total: dict = {}
    print(f"{'run':<28}{'answers':>8}{'agree':>7}{'right':>7}{'line 1':>8}"
          f"{'reader only':>13}{'model only':>12}{'both':>6}{'neither':>9}")
    for spec in args:
        run, _, qfile = spec.partition("=")
        t = tally(Path(run), Path(qfile))
        for k, v in t.items():
            total[k] = total.get(k, 0) + v
        print(f"{Path(run).name:<28}{t['answers']:>8}{t['agree']:>7}{t['agree_right']:>7}"
              f"{t['first_line']:>8}{t['reader_only']:>13}{t['model_only']:>12}"
              f"{t['both']:>6}{t['neither']:>9}")
    if total.get("asked_again"):
        print(f"asked again in reverse: {total['asked_again']} disagreements, the same first "
              f"line in {total['again']}; of those the reader alone right "
              f"{total['again_reader']}, the model alone {total['again_model']}")
    if pick:
        choice, gains = pick_rule(total)
        print(f"pick: ON_DISAGREEMENT = {choice!r} (right answers gained over the reader's "
              f"over {total['answers'] - total['agree']} disagreements: " +
              ", ".join(f"{k} {v:+d}" for k, v in gains.items()) + ")")
    return 0


def pick_rule(total: dict) -> tuple[str, dict]:
    """(the rule, {rule: right answers it shows beyond "reader"}) over the disagreements."""
    gains = {"reader": 0, "model": total["model_only"] - total["reader_only"]}
    if total.get("asked_again"):
        gains["again"] = total["again_model"] - total["again_reader"]
    best = max(gains.values())
    return next(k for k, v in gains.items() if v == best), gains


if __name__ == "__main__":
    raise SystemExit(main())
