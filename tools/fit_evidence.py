"""Fit the evidence stage's word settings on the tuning splits, by a stated rule.

In:  the tuning splits of questions/splits.json (never a frozen one), the builtin backend.
Out: one row per setting: answer correct, evidence recall (all key facts inside the
     passages handed on), recall_all (every gold file of a change question handed on),
     words per question. The baseline row is the evidence before this stage (the first
     five whole passages the version rules keep); the "count" row is this stage without
     a budget (evidence.KEEP whole passages); the others give a budget of BUDGET words,
     with long passages cut at PASSAGE_WORDS (HISTORY_WORDS for a change question).
Rules: the cut sizes: at the middle budget, the most key facts handed on (evidence
     recall plus recall_all), then the fewest words. The default (evidence.BUDGET_WORDS):
     among the count and the budgets with those cut sizes, the ones whose words per
     question stay at or under the baseline's and whose answers are right at least as
     often, the most key facts handed on, then the fewest words (None: the count).

    python tools/fit_evidence.py [--grid small|full]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import evaluate  # noqa: E402
from verso import evidence  # noqa: E402
from verso import harness  # noqa: E402

BASELINE_KEEP = 5        # the evidence before the stage: the first five whole passages
GRIDS = {"small": {"BUDGET_WORDS": (350, 400, 450), "PASSAGE_WORDS": (70, 150),
                   "HISTORY_WORDS": (40, 70)},
         "full": {"BUDGET_WORDS": (300, 350, 400, 450, 500), "PASSAGE_WORDS": (50, 70, 100, 150),
                  "HISTORY_WORDS": (30, 40, 70, 100)}}


def tuning_sets() -> list[tuple[str, Path, list]]:
    rows = json.loads((ROOT / "questions" / "splits.json").read_text())["splits"]
    return [(name, ROOT / row["vault"], evaluate.load_questions(ROOT / "questions" / f"{name}.jsonl"))
            for name, row in rows.items()
            if row.get("role") == "tuning" and row.get("kind") != "conversations"]


def measure(sets, loaded, **ask_kw) -> dict:
    """Counts over every question of the sets: correct, recall, recall_all, words."""
    out = dict(correct=0, n=0, recall=0, n_recall=0, recall_all=0, n_all=0, words=0)
    for name, _, questions in sets:
        idx, be = loaded[name]
        for q in questions:
            a = harness.ask(q["question"], index=idx, backend=be, **ask_kw).to_dict()
            passages = [f"{s['heading']} {s['text']}" for s in a["sources"]]
            out["n"] += 1
            out["correct"] += evaluate.answer_correct(q, a)
            out["words"] += sum(len(s["text"].split()) for s in a["sources"])
            if q["answerable"] and q["key_facts"]:
                out["n_recall"] += 1
                text = " ".join(passages)
                out["recall"] += all(evaluate.has_fact(text, f) for f in q["key_facts"])
            if q["answerable"] and q["category"] == "change" and q["gold_files"]:
                out["n_all"] += 1
                out["recall_all"] += set(q["gold_files"]) <= {s["path"] for s in a["sources"]}
    return out


def _row(label: str, m: dict) -> str:
    return (f"{label:<42} correct {m['correct']:>3}/{m['n']:<4} evidence recall "
            f"{m['recall']:>3}/{m['n_recall']:<4} recall_all {m['recall_all']:>2}/{m['n_all']:<3}"
            f" words/q {m['words'] / m['n']:.0f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tools/fit_evidence.py", description=__doc__.split("\n")[0])
    p.add_argument("--grid", choices=list(GRIDS), default="small")
    args = p.parse_args(argv)
    sets, home = tuning_sets(), Path(tempfile.mkdtemp(prefix="fit-evidence-"))
    loaded = {name: harness.load(index=str(home / name), vault=vault, backend="builtin")
              for name, vault, _ in sets}
    select = evidence.select
    evidence.select = lambda question, cands, *a, **kw: cands[:BASELINE_KEEP]
    try:
        base = measure(sets, loaded)
    finally:
        evidence.select = select
    print(_row(f"baseline: the first {BASELINE_KEEP} whole passages", base))
    grid = GRIDS[args.grid]
    saved = {k: getattr(evidence, k) for k in ("PASSAGE_WORDS", "HISTORY_WORDS")}
    middle = grid["BUDGET_WORDS"][len(grid["BUDGET_WORDS"]) // 2]
    try:
        cuts = []
        for pw, hw in itertools.product(grid["PASSAGE_WORDS"], grid["HISTORY_WORDS"]):
            evidence.PASSAGE_WORDS, evidence.HISTORY_WORDS = pw, hw
            m = measure(sets, loaded, budget=middle)
            print(_row(f"budget={middle} passage={pw} history={hw}", m), flush=True)
            cuts.append(((m["recall"] + m["recall_all"], -m["words"]), (pw, hw)))
        pw, hw = max(cuts)[1]
        evidence.PASSAGE_WORDS, evidence.HISTORY_WORDS = pw, hw
        rows = [(None, measure(sets, loaded, budget=None))]
        print(_row(f"count: the first {evidence.KEEP} whole passages", rows[0][1]), flush=True)
        for budget in grid["BUDGET_WORDS"]:
            rows.append((budget, measure(sets, loaded, budget=budget)))
            print(_row(f"budget={budget} passage={pw} history={hw}", rows[-1][1]), flush=True)
    finally:
        for k, v in saved.items():
            setattr(evidence, k, v)
    ok = [(m["recall"] + m["recall_all"], -m["words"], budget is None, budget)
          for budget, m in rows
          if m["words"] <= base["words"] and m["correct"] >= base["correct"]]
    print(f"picked: PASSAGE_WORDS = {pw}, HISTORY_WORDS = {hw}, BUDGET_WORDS = "
          f"{max(ok)[3] if ok else None}" + ("" if ok else " (no setting kept the "
                                             "baseline's words and answers: the count)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
