"""How many lines the choosing reader must offer: on each split, the share of answerable
questions whose key facts stand in the first k lines offered (choosing_writer.offered), and
the words those k lines cost. No model is called: the kept notes are the builtin backend's.

    python tools/choose_reach.py [--splits dev dev2 dev3 dev4 dev5 dev6] [--pick]

--pick prints the smallest k (from KS) whose reach on the given splits, pooled, is within
TOLERANCE of the reach at the largest k: the value of choosing_writer.MAX_LINES it supports
(fitted on the tuning splits; run it on test, second and sixth only to report).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import builtin_writer  # noqa: E402
from verso import choosing_writer  # noqa: E402
from verso import evaluate  # noqa: E402
from verso import harness  # noqa: E402
from verso import measures  # noqa: E402
from verso.textkit import count_tokens  # noqa: E402

KS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 40)
TOLERANCE = 0.02                    # reach given up for a shorter prompt, pooled


def reach(split: str, info: dict) -> tuple[list, list]:
    """(per answerable question: the first k at which every key fact stands in the lines
    offered so far, or None; per question: words of the first k lines for each k)."""
    vault, qs = ROOT / info["vault"], evaluate.load_questions(ROOT / info["questions"])
    idx, be = harness.load(index=str(Path("/tmp/verso-choose-reach") / split), vault=vault,
                           backend="builtin")
    firsts, costs = [], []
    for q in qs:
        if not q["answerable"]:
            continue
        a = harness.ask(q["question"], index=idx, backend=be)
        if not a.messages:
            firsts.append(None)
            continue
        question, mode, notes = builtin_writer.parse_prompt(a.messages[-1]["content"])
        saved = choosing_writer.MAX_LINES, choosing_writer.MAX_PROMPT_TOKENS
        choosing_writer.MAX_LINES, choosing_writer.MAX_PROMPT_TOKENS = max(KS), 10 ** 6
        try:
            lines, _ = choosing_writer.offered(question, mode, notes)
        finally:
            choosing_writer.MAX_LINES, choosing_writer.MAX_PROMPT_TOKENS = saved
        text, first = "", None
        for k, u in enumerate(lines, 1):
            text += " " + u.text
            if first is None and all(measures.has_fact(text, f) for f in q["key_facts"]):
                first = k
        firsts.append(first)
        costs.append([sum(count_tokens(choosing_writer._line(0, u)) + 1 for u in lines[:k])
                      for k in KS])
    return firsts, costs


def main(argv=None) -> int:
    import json
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--splits", nargs="+", default=["dev", "dev2", "dev3", "dev4", "dev5",
                                                    "dev6"])
    p.add_argument("--pick", action="store_true")
    a = p.parse_args(argv)
    table = json.loads((ROOT / "questions" / "splits.json").read_text())["splits"]
    pooled = []
    print(f"{'split':<8}" + "".join(f"{'@' + str(k):>7}" for k in KS) + "   words@k (median)")
    for split in a.splits:
        info = table[split]
        info = {"vault": info["vault"], "questions": info.get("questions",
                                                               f"questions/{split}.jsonl")}
        firsts, costs = reach(split, info)
        pooled += firsts
        n = len(firsts)
        row = [sum(1 for f in firsts if f is not None and f <= k) / n for k in KS]
        med = [sorted(c[i] for c in costs)[len(costs) // 2] if costs else 0
               for i in range(len(KS))]
        print(f"{split:<8}" + "".join(f"{r:>7.2f}" for r in row) + "   "
              + " ".join(str(m) for m in med))
    n = len(pooled)
    pool = [sum(1 for f in pooled if f is not None and f <= k) / n for k in KS]
    print(f"{'pooled':<8}" + "".join(f"{r:>7.2f}" for r in pool) + f"   ({n} questions)")
    if a.pick:
        k = next(k for k, r in zip(KS, pool) if r >= pool[-1] - TOLERANCE)
        print(f"pick: MAX_LINES = {k} (reach {pool[KS.index(k)]:.2f} against "
              f"{pool[-1]:.2f} at {KS[-1]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
