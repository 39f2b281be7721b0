"""Two readers, one decision: on runs of the choosing reader, how often the model's
lines and the builtin reader's answer agree, who is right where they disagree, and the
model's pull towards the first line. Which answer a model's disagreements show is fitted
per model by `verso calibrate` (verdict_fit.pick); this tool reads runs.

    python tools/choose_agree.py RUN=QUESTIONS...

RUN is an evaluate.py run folder of a model backend (its records keep the chooser's
trace: the lines chosen, the builtin reader's answer on the same notes, whether the two
agree, the model's own answer when the reader's was shown, and when the policy asked
again whether the model chose the same first line with the lines in reverse); QUESTIONS
its question file.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import builtin_writer  # noqa: E402
from verso import evaluate  # noqa: E402
from verso import measures  # noqa: E402


def _right(q: dict, answer: str) -> bool:
    return measures.answer_correct(q, {"answer": answer,
                                       "abstained": answer == builtin_writer.ABSTAIN_SENTENCE})


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
