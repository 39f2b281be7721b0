"""Fit the statement labels (evidence.label_statements) on the tuning splits: one
logistic model of "this newer line replaces that older line's value" over
evidence.STATEMENT_FEATURES.

In:  the tuning splits of questions/splits.json (never a frozen one), the builtin backend.
Rows: every pair of lines evidence.statement_pairs finds in the evidence handed on at
     1,000 words (captured while harness.ask runs) for each answerable question,
     labelled 1 when the older line (with its heading) holds one of the question's
     forbidden facts (a value the notes once stated and later changed) and the newer
     line a key fact; every other pair 0 (a line holding a key fact, or no changed
     value, is not replaced).
Fit: verdict_fit.fit (standardised ridge logistic regression), raw-scale weights.
Scored, in sample and held out (for each tuning vault, the model fitted on the splits
     of the others: dev, dev2 and dev3 share one vault, so they are held out together),
     on the passages the statement labels fall on (budget_eval.statement_labels): right
     (the passage holds a forbidden fact), wrong (it holds a key fact and no forbidden
     one), other (neither), and stale evidence (measures.evidence_stale) on the
     one-version questions.

    python tools/fit_statements.py            # print the fit and the figures
    python tools/fit_statements.py --write    # and write the weights into evidence.py

The cut: of CUTS, the lowest (most labels) whose held-out labels are right at least
PRECISION times as often as wrong, else the highest. A wrong label costs more than a
right one saves: it tells a host that the note holding the current value is out of
date and makes verify escalate the answer citing it, while a missed label leaves a
dated passage a reader can still weigh by its date. (Until commit 2045e21 the rule was
"most right minus wrong"; refit on eleven splits it picked 0.05, held out 46 right and
33 wrong, which on the frozen splits gave 17 right and 30 wrong: docs/results.md.)
--write sets STATEMENT_CUT.
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
sys.path.insert(0, str(ROOT / "tools"))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

import fit_evidence  # noqa: E402

from verso import budget_eval  # noqa: E402
from verso import evidence  # noqa: E402
from verso import evidence_fit  # noqa: E402
from verso import harness  # noqa: E402
from verso import measures  # noqa: E402
from verso import verdict_fit  # noqa: E402

BUDGET = 1000
CUTS = (0.5, 0.3, 0.2, 0.1, 0.05)   # STATEMENT_CUT's choices, fewest labels first
PRECISION = 2.0                     # held-out right per wrong a cut must reach
NAMES = ("STATEMENT_BIAS", "STATEMENT_WEIGHTS")
CUT_RE = re.compile(r"^STATEMENT_CUT = [0-9.]+", re.M)


def _line(unit) -> str:
    return f"{unit.note['section']}\n{unit.text}"


def collect(sets, loaded) -> tuple[list[dict], list[dict]]:
    """(one row per line pair, one case per question: the evidence it was found in)."""
    rows, cases, real = [], [], evidence.label_statements
    for name, _, questions in sets:
        idx, be = loaded[name]
        for q in questions:
            seen = []

            def spy(question, kept, index=None):
                seen.append(list(kept))
                return real(question, kept, index)
            evidence.label_statements = spy
            try:
                harness.ask(q["question"], index=idx, backend=be, write=False,
                            budget=BUDGET)
            finally:
                evidence.label_statements = real
            if not seen:
                continue
            pairs = evidence.statement_pairs(q["question"], seen[0], idx)
            cases.append({"split": name, "q": q, "kept": seen[0], "index": idx,
                          "pairs": pairs})
            rows.extend({"split": name, "q": q["id"], "features": f,
                         "right": measures.has_any(_line(o), q["forbidden_facts"])
                         and measures.has_any(_line(n), q["key_facts"])}
                        for _, _, o, n, f in pairs)
    return rows, cases


def score(cases, bias: float, weights: dict) -> dict:
    """Statement labels right, wrong and other, and stale evidence, with these weights."""
    saved = evidence.STATEMENT_BIAS, dict(evidence.STATEMENT_WEIGHTS)
    evidence.STATEMENT_BIAS, evidence.STATEMENT_WEIGHTS = bias, weights
    out = {"right": 0, "wrong": 0, "other": 0, "stale": 0, "one_version": 0}
    try:
        for case in cases:
            q = case["q"]
            sources = harness._sources(evidence.label_statements(q["question"], case["kept"],
                                                                 case["index"]))
            for verdict in budget_eval.statement_labels(q, sources):
                out[verdict] += 1
            if q["forbidden_facts"] and q["time_mode"] in ("present", "as_of"):
                out["one_version"] += 1
                out["stale"] += measures.evidence_stale(q["forbidden_facts"], sources,
                                                        q["key_facts"])
    finally:
        evidence.STATEMENT_BIAS, evidence.STATEMENT_WEIGHTS = saved
    return out


def pick_cut(sets, rows, cases, model: tuple) -> float:
    """Of CUTS, the lowest whose held-out labels (each vault's cases scored by the model
    fitted on the other vaults' rows) are right at least PRECISION times as often as
    wrong, else the first; prints a row per cut, beside `model`'s (bias, weights) in
    sample."""
    names = evidence.STATEMENT_FEATURES
    vault_of = {name: vault for name, vault, _ in sets}
    folds = {vault: evidence_fit.raw(verdict_fit.fit(
        [r for r in rows if vault_of[r["split"]] != vault], names))
        for vault in dict.fromkeys(vault_of.values())}
    picks, saved = [], evidence.STATEMENT_CUT
    try:
        for cut in CUTS:
            evidence.STATEMENT_CUT = cut
            total = dict.fromkeys(("right", "wrong", "other", "stale", "one_version"), 0)
            for vault, fold in folds.items():
                got = score([c for c in cases if vault_of[c["split"]] == vault], *fold)
                total = {k: total[k] + got[k] for k in total}
            print(f"cut {cut}: " + _show("in", score(cases, *model)) + " | "
                  + _show("held out", total), flush=True)
            if total["right"] >= PRECISION * total["wrong"] and total["right"]:
                picks.append(cut)
    finally:
        evidence.STATEMENT_CUT = saved
    return min(picks) if picks else CUTS[0]


def _show(name: str, got: dict) -> str:
    return (f"{name:<9} right {got['right']:>3}  wrong {got['wrong']:>3}  other "
            f"{got['other']:>4}  stale {got['stale']}/{got['one_version']}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tools/fit_statements.py",
                                description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="write the weights into evidence.py")
    args = p.parse_args(argv)
    sets, home = fit_evidence.tuning_sets(), Path(tempfile.mkdtemp(prefix="fit-statements-"))
    loaded = {name: harness.load(index=str(home / name), vault=vault, backend="builtin")
              for name, vault, _ in sets}
    rows, cases = collect(sets, loaded)
    names = evidence.STATEMENT_FEATURES
    print(f"{len(rows)} line pairs, {sum(r['right'] for r in rows)} replacing, "
          f"{len(cases)} questions")
    bias, weights = evidence_fit.raw(verdict_fit.fit(rows, names))
    print(f"STATEMENT_BIAS = {bias:.4f}\nSTATEMENT_WEIGHTS = {json.dumps(weights)}")
    if set(evidence.STATEMENT_WEIGHTS) == set(names):     # the weights evidence.py ships
        print(_show("shipped", score(cases, evidence.STATEMENT_BIAS,
                                     evidence.STATEMENT_WEIGHTS)))
    cut = pick_cut(sets, rows, cases, (bias, weights))
    print(f"picked: STATEMENT_CUT = {cut}")
    if args.write:
        fit_evidence.write(bias, weights, "evidence.py", NAMES)
        path = ROOT / "evidence.py"
        path.write_text(CUT_RE.sub(f"STATEMENT_CUT = {cut}", path.read_text(encoding="utf-8"),
                                   count=1), encoding="utf-8")
        print("written: evidence.py between the FITTED marks, and STATEMENT_CUT")
    return 0


if __name__ == "__main__":
    sys.exit(main())
