"""Fit the evidence ranker (passages.py) on the tuning splits: one logistic model of
"this section holds a key fact" over passages.FEATURES.

In:  the tuning splits of questions/splits.json (never a frozen one), the builtin backend.
Rows: every section of the pool passages.sections builds for each answerable question
     (evidence_fit.collect: the pool the harness builds, captured while harness.ask
     runs; its label rule is evidence_fit's).
Fit: verdict_fit.fit (standardised ridge logistic regression, Newton's method), turned
     into raw-scale weights. Held out: for each tuning split, the model fitted on the
     splits of the other vaults (dev, dev2 and dev3 share one), and the evidence recall
     it gives there at 300, 600 and 1,000 words beside the in-sample model's.

    python tools/fit_evidence.py            # print the fit and the held-out figures
    python tools/fit_evidence.py --write    # and write the weights into passages.py
    python tools/fit_evidence.py --share --write   # first the builtin embedder's share
    python tools/fit_evidence.py --grid     # the fill's sizes: CUT_MIN, WORDS_POWER

--share: the builtin embedder's WORDS_SHARE (how much of a cosine is the word table's,
word_vectors.py) is not a ranker weight: it decides the vectors, so each of SHARES builds
every tuning index again, fits the ranker on it and scores it held out by vault; the
share whose held-out key-fact questions, summed over the budgets, are the most is
picked (ties: the first listed, 0 first: no word table), and with --write written into
embedder.py before the ranker is fitted and written on its indexes.

--grid: every combination of GRID's sizes with the shipped weights, the key facts handed
on at the three budgets summed over the tuning splits; the rule: the most, ties to the
sizes listed first (fewer words spent on cut lines; P per word as it is; CUT_MIN's
order decides before WORDS_POWER's). It also prints what picking buys held out: each
vault scored at the sizes the rule picks without it (only the sizes are held out: the
weights are the shipped ones, fitted on every vault), summed over vaults and budgets,
beside the shipped sizes and the first sizes listed. On fourteen splits the pick handed
on 1,342 key-fact questions held out and the first sizes 1,351: the pick is noise, and
the next refit should keep the first sizes unless a pick wins held out. Run at commit
cc5634a it picked SHORT_NOTE 0 (no note given whole for being short: 0, 50 and 100 words
tied), so that branch was taken out; CUT_MIN 10. From d099396 (23 tuning splits) GRID
holds the cap's sizes (CAP_WORDS, CAP_SHARE: once a share of the budget is filled, a
longer section comes cut to its lines the builtin reader reads best), CUT_MIN and
WORDS_POWER held at the sizes the grid above picked; list them in GRID to pick all four.
At 28f405b, with 20 and 30 words listed too, it picked CAP_WORDS 30 (CAP_SHARE 0.3), held
out 719/803/844 against the shipped 40's 717/799/844: a pick that wins held out, shipped.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

import numpy as np  # noqa: E402

from verso import embedder  # noqa: E402
from verso import evaluate  # noqa: E402
from verso import evidence_fit  # noqa: E402
from verso import harness  # noqa: E402
from verso import passages  # noqa: E402
from verso import verdict_fit  # noqa: E402

BUDGETS = evidence_fit.BUDGETS
SHARES = (0.0, 0.25, 0.5, 0.75)     # the builtin embedder's WORDS_SHARE (--share)
GRID = {"CAP_WORDS": (0, 20, 30, 40, 60), "CAP_SHARE": (0.3, 0.5)}   # ties: the first (0: no cap)
FENCE_RE = re.compile(r"(# ---- FITTED:[^\n]*\n)(.*?)(# ---- end FITTED)", re.S)


def tuning_sets() -> list[tuple[str, Path, list]]:
    rows = json.loads((ROOT / "questions" / "splits.json").read_text())["splits"]
    return [(name, ROOT / row["vault"],
             [q for q in evaluate.load_questions(ROOT / "questions" / f"{name}.jsonl")
              if q["answerable"] and q["key_facts"]])
            for name, row in rows.items()
            if row.get("role") == "tuning" and row.get("kind") != "conversations"]


def grid(sets, loaded) -> dict:
    """GRID's sizes by its rule (every combination); prints a row per combination, the
    pick, and what picking buys held out: each vault scored at the sizes the rule picks
    on the other vaults, beside the shipped sizes and the first sizes listed."""
    names = list(GRID)
    saved, rows = {n: getattr(passages, n) for n in names}, []
    try:
        for combo in itertools.product(*(GRID[n] for n in names)):
            for n, v in zip(names, combo):
                setattr(passages, n, v)
            got = evidence_fit.recall(sets, loaded, passages.BIAS, passages.WEIGHTS)
            print(", ".join(f"{n} {v}" for n, v in zip(names, combo)) + ": " + "  ".join(
                f"{b} words {k}" for b, k in zip(BUDGETS, _sums(got))), flush=True)
            rows.append(([GRID[n].index(v) for n, v in zip(names, combo)], combo, got))
    finally:
        for n, v in saved.items():
            setattr(passages, n, v)
    vault_of = {name: vault for name, vault, _ in sets}
    best = dict(zip(names, _pick(rows, set(vault_of))[1]))
    print("picked: " + ", ".join(f"{n} = {v}" for n, v in best.items()))
    if len(set(vault_of.values())) < 2:
        print("held out by vault: one vault, nothing to hold out")
        return best
    held = [0] * len(BUDGETS)
    for vault in set(vault_of.values()):
        mine = {n for n, v in vault_of.items() if v == vault}
        got = _pick(rows, set(vault_of) - mine)[2]
        held = [h + k for h, k in zip(held, _sums({n: got[n] for n in mine}))]
    shipped = next((r[2] for r in rows if r[1] == tuple(saved[n] for n in names)), None)
    print("held out by vault (each vault at the sizes picked without it): "
          f"{_slashed(held)}; the shipped sizes: "
          f"{_slashed(_sums(shipped)) if shipped else 'not in GRID'}; the first sizes "
          f"listed: {_slashed(_sums(rows[0][2]))}")
    return best


def _pick(rows: list, splits: set) -> tuple:
    """The row the rule picks on `splits`: the most key facts over the budgets, ties to
    the sizes listed first."""
    return min(rows, key=lambda r: (-sum(sum(r[2][n]) for n in splits), r[0]))


def _sums(got: dict) -> list[int]:
    """Key-fact questions at each budget, summed over the splits of `got` (recall's)."""
    return [sum(v[i] for v in got.values()) for i in range(len(BUDGETS))]


def _slashed(sums: list) -> str:
    """Counts at each budget as printed: "400 / 458 / 484"."""
    return " / ".join(str(int(k)) for k in sums)


def write(bias: float, weights: dict, module: str = "passages.py",
          names: tuple = ("BIAS", "WEIGHTS")) -> None:
    """The weights into `module` between its FITTED marks, as the constants `names`."""
    path = ROOT / module
    body = [f"{names[0]} = {round(bias, 4)}", f"{names[1]} = {{"]
    items = [f'"{k}": {v}' for k, v in weights.items()]
    line = "    "
    for item in items:
        if len(line) + len(item) + 2 > 92:
            body.append(line.rstrip())
            line = "    "
        line += item + ", "
    body.append(line.rstrip().rstrip(",") + "}")
    text = path.read_text(encoding="utf-8")
    new = FENCE_RE.sub(lambda m: m.group(1) + "\n".join(body) + "\n" + m.group(3), text)
    path.write_text(new, encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tools/fit_evidence.py", description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="write the weights into passages.py")
    p.add_argument("--grid", action="store_true", help="the fill's sizes (GRID), then stop")
    p.add_argument("--share", action="store_true",
                   help="first the builtin embedder's WORDS_SHARE (SHARES), held out")
    args = p.parse_args(argv)
    sets = tuning_sets()
    if args.share:
        share = pick_share(sets)
        if args.write:
            write_share(share)
        embedder.WORDS_SHARE = share
    loaded = _load(sets)
    if args.grid:
        grid(sets, loaded)
        return 0
    rows = evidence_fit.collect(sets, loaded)
    print(f"{len(rows)} sections, {sum(r['right'] for r in rows)} holding a key fact, "
          f"{sum(len(q) for _, _, q in sets)} questions")
    bias, weights = evidence_fit.raw(verdict_fit.fit(rows, passages.FEATURES))
    print(f"BIAS = {bias:.4f}\nWEIGHTS = {json.dumps(weights)}")
    held_out(sets, loaded, rows, (bias, weights), say=True)
    if args.write:
        write(bias, weights)
        print("written: passages.py between the FITTED marks")
    return 0


def _load(sets) -> dict:
    """Every tuning split's index, built afresh with the builtin backend."""
    home = Path(tempfile.mkdtemp(prefix="fit-evidence-"))
    return {name: harness.load(index=str(home / name), vault=vault, backend="builtin")
            for name, vault, _ in sets}


def held_out(sets, loaded, rows, fit, say=False) -> tuple:
    """(key-fact questions at each budget in sample, held out): each split scored by the
    model fitted on the splits of the other vaults (dev, dev2 and dev3 share one)."""
    inside = evidence_fit.recall(sets, loaded, *fit)
    if say:
        print(f"{'split':<8}{'n':>4}  " + "  ".join(f"{b:>5}in {b:>5}out" for b in BUDGETS))
    total_in, total_out = np.zeros(len(BUDGETS)), np.zeros(len(BUDGETS))
    vault_of = {name: vault for name, vault, _ in sets}
    for name, vault, questions in sets:
        fold = evidence_fit.raw(verdict_fit.fit(
            [r for r in rows if vault_of[r["split"]] != vault], passages.FEATURES))
        out = evidence_fit.recall([s for s in sets if s[0] == name], loaded, *fold)[name]
        total_in += inside[name]
        total_out += out
        if say:
            print(f"{name:<8}{len(questions):>4}  " + "  ".join(
                f"{a:>7} {b:>8}" for a, b in zip(inside[name], out)), flush=True)
    if say:
        n = sum(len(q) for _, _, q in sets)
        print(f"{'all':<8}{n:>4}  " + "  ".join(f"{int(a):>7} {int(b):>8}"
                                                  for a, b in zip(total_in, total_out)))
    return total_in, total_out


def pick_share(sets) -> float:
    """The WORDS_SHARE whose ranker, refitted on its own indexes, hands on the most
    key-fact questions held out by vault, summed over the budgets (ties: the first of
    SHARES). Each share builds every index again (its vectors differ)."""
    saved, best = embedder.WORDS_SHARE, None
    try:
        for share in SHARES:
            embedder.WORDS_SHARE = share
            loaded = _load(sets)
            rows = evidence_fit.collect(sets, loaded)
            fit = evidence_fit.raw(verdict_fit.fit(rows, passages.FEATURES))
            _, out = held_out(sets, loaded, rows, fit)
            print(f"WORDS_SHARE {share}: held out {_slashed(out)}", flush=True)
            if best is None or out.sum() > best[1]:
                best = (share, out.sum())
    finally:
        embedder.WORDS_SHARE = saved
    print(f"picked: WORDS_SHARE = {best[0]}")
    return best[0]


def write_share(share: float) -> None:
    path = ROOT / "embedder.py"
    text = path.read_text(encoding="utf-8")
    path.write_text(FENCE_RE.sub(lambda m: f"{m.group(1)}WORDS_SHARE = {share}\n{m.group(3)}",
                                 text), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
