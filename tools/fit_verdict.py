"""Fit the calibrated verdict (calibrate.py) on the tuning splits; print its constants.

    python tools/fit_verdict.py                      # builtin backend: fit and print
    python tools/fit_verdict.py --write              # ... and write it into calibrate.py
    OLLAMA_HOST=... python tools/fit_verdict.py --backend ollama --judge builtin --save-rows R.jsonl
    python tools/fit_verdict.py --backend ollama --rows R.jsonl --write    # refit offline
    python tools/fit_verdict.py --backend ollama --runs RUN=dev RUN2=dev2 ...  # from runs

The procedure, all of it here:
1. Every tuning split of questions/splits.json (role "tuning"; the frozen splits are never
   read) is answered by harness.ask with the backend, full variant. Each answer that was
   written and did not abstain is one row: the features calibrate computed (FEATURES,
   and for a model backend MODEL_FEATURES, calibrate.feature_names),
   the label evaluate.answer_correct (an answer to an unanswerable question is wrong),
   and whether verify's code checks and judge passed.
2. The features are standardised (mean and standard deviation over the rows) and a ridge
   logistic regression (tools/fit_reader.logistic, RIDGE below, bias unpenalised) gives
   the bias and one weight per feature.
3. The threshold comes from held-out probabilities: each tuning split is scored by the
   model fitted on the other tuning splits. Among the rows whose checks passed, ordered by
   that probability, the threshold is the lowest probability at which the rows at or above
   it, at least MIN_SUPPORT of them, are right at least calibrate.PRECISION of the time
   (the most answers shipped at that precision); when no probability reaches it, the
   threshold is above 1: nothing SHIPs.
"""

from __future__ import annotations

import argparse
import json
import os
import pprint
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import calibrate  # noqa: E402
from verso import evaluate  # noqa: E402
import fit_reader  # noqa: E402
from verso import harness  # noqa: E402
from verso import models  # noqa: E402

RIDGE = 5.0          # on standardised features: ~200 rows, a dozen features
NEVER = 1.01         # a threshold no probability reaches
# The fewest held-out answers a threshold may rest on: 1 of 1 right says nothing of a 90%
# precision, 9 of 10 says a little (ten is where one wrong answer already breaks 90%).
MIN_SUPPORT = 10
BEGIN, END = "# --- fitted by tools/fit_verdict.py", "# --- end of fitted constants"


def tuning_splits() -> dict:
    """{split: vault path} of the tuning splits."""
    table = json.loads((ROOT / "questions" / "splits.json").read_text(encoding="utf-8"))
    return {s: ROOT / row["vault"] for s, row in table["splits"].items()
            if row["role"] == "tuning"}


def collect(splits: dict, backend: str = "builtin", judge: str | None = None) -> list[dict]:
    """One row per written, non-abstaining answer: split, id, features, right, passed."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        loaded: dict = {}
        for split, vault in splits.items():
            if vault not in loaded:
                loaded[vault] = harness.load(index=str(Path(tmp) / str(len(loaded))),
                                             vault=vault, backend=backend, judge=judge)
            idx, be = loaded[vault]
            for q in evaluate.load_questions(ROOT / "questions" / f"{split}.jsonl"):
                try:
                    a = harness.ask(q["question"], index=idx, backend=be).to_dict()
                except models.BackendError as e:   # a slow or failed reply: one row less
                    print(f"# {split} {q['id']}: skipped ({e})", file=sys.stderr)
                    continue
                cal = a["checks"].get("calibration") or {}
                if a["abstained"] or cal.get("features") is None:
                    continue
                out.append({"split": split, "id": q["id"], "features": cal["features"],
                            "right": evaluate.answer_correct(q, a),
                            "passed": bool(a["checks"].get("passed")),
                            "key": cal.get("key")})
    return out


def rows_of_runs(specs: list[str], tuning: dict) -> list[dict]:
    """The rows of evaluate.py runs of tuning splits ("RUN=SPLIT", full variant), as
    collect would make them: the records keep each answer's features and checks."""
    out = []
    for spec in specs:
        run, _, split = spec.partition("=")
        if split not in tuning:
            raise SystemExit(f"fit_verdict: {split or spec!r} is not a tuning split")
        for r in evaluate.load_records(Path(run)):
            if r.get("variant") == "full" and not r["abstained"] and r.get("features"):
                out.append({"split": split, "id": r["id"], "features": r["features"],
                            "right": bool(r["answer_correct"]),
                            "passed": bool(r["checks_passed"]),
                            "key": r.get("calibration_key")})
    return out


def rows_model(args) -> str:
    """The model the rows came from, by name: the runs' writer, else the one collect used."""
    if args.runs:
        cfg = Path(args.runs[0].partition("=")[0]) / "config.json"
        if cfg.exists():
            return json.loads(cfg.read_text(encoding="utf-8")).get("writer") or "?"
    return os.environ.get("VERSO_WRITE_MODEL") or models.WRITE_MODEL


def _matrix(rows: list[dict], names, fill=None) -> np.ndarray:
    """The rows' features; a missing one (a model feature the server could not give) is
    fill's value, by default the mean of the rows that have it (0 when none has)."""
    X = np.array([[r["features"].get(n, np.nan) for n in names] for r in rows], float)
    if fill is None:
        seen = ~np.isnan(X)
        fill = np.where(seen.any(axis=0), np.nansum(X, axis=0) / np.maximum(1, seen.sum(0)), 0)
    return np.where(np.isnan(X), fill, X)


def fit(rows: list[dict], names=calibrate.FEATURES) -> dict:
    """{"names", "mean", "scale", "weights", "bias"} of the standardised ridge logistic
    model."""
    X, y = _matrix(rows, names), np.array([float(r["right"]) for r in rows])
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale < 1e-9] = 1.0
    w = fit_reader.logistic((X - mean) / scale, y, ridge=RIDGE)
    return {"names": tuple(names), "mean": mean, "scale": scale, "weights": w[1:],
            "bias": w[0]}


def predict(model: dict, rows: list[dict]) -> np.ndarray:
    X = _matrix(rows, model["names"], fill=model["mean"])
    z = model["bias"] + ((X - model["mean"]) / model["scale"]) @ model["weights"]
    return 1.0 / (1.0 + np.exp(-z))


def held_out(rows: list[dict], names=calibrate.FEATURES) -> np.ndarray:
    """Each row's probability from the model fitted on the other splits."""
    p = np.zeros(len(rows))
    for split in sorted({r["split"] for r in rows}):
        inside = [i for i, r in enumerate(rows) if r["split"] == split]
        p[inside] = predict(fit([r for r in rows if r["split"] != split], names),
                            [rows[i] for i in inside])
    return p


def threshold(p, right, passed, precision: float = calibrate.PRECISION,
              support: int = MIN_SUPPORT) -> float:
    """The lowest p at which the passed rows at or above it, at least `support` of them,
    are right >= precision of the time; NEVER when no such p exists."""
    order = sorted(((float(pi), bool(ri)) for pi, ri, ok in zip(p, right, passed) if ok),
                   reverse=True)
    best, k = NEVER, 0
    for n, (pi, ri) in enumerate(order, 1):
        k += ri
        if n >= support and k / n >= precision and (n == len(order) or order[n][0] < pi):
            best = pi
    return best


def report(rows, p, t) -> dict:
    """Per split, held out: [right among SHIP, SHIP, right answers]."""
    out = {}
    for split in sorted({r["split"] for r in rows}):
        rs = [(pi, r) for pi, r in zip(p, rows) if r["split"] == split]
        ship = [r for pi, r in rs if r["passed"] and pi >= t]
        out[split] = [sum(r["right"] for r in ship), len(ship), sum(r["right"] for _, r in rs)]
    return out


def top_right(p, rows, sizes=(5, 10, 20, 50)) -> str:
    """Of the passed rows, most confident first (held out): how many of the first N
    were right."""
    order = sorted((float(pi), bool(r["right"])) for pi, r in zip(p, rows) if r["passed"])
    order.reverse()
    return ", ".join(f"{sum(x for _, x in order[:n])}/{n}" for n in sizes if n <= len(order))


def calibration(rows: list[dict], backend: str) -> dict:
    names = calibrate.feature_names(backend)
    probs = held_out(rows, names)
    t = threshold(probs, [r["right"] for r in rows], [r["passed"] for r in rows])
    m = fit(rows, names)
    r4 = lambda xs: [round(float(x), 4) for x in xs]  # noqa: E731
    return {"features": list(names), "mean": r4(m["mean"]),
            "scale": r4(m["scale"]), "weights": r4(m["weights"]),
            "bias": round(float(m["bias"]), 4), "threshold": round(t, 4),
            "fitted_on": sorted({r["split"] for r in rows}), "backend": backend,
            "rows": len(rows), "right": sum(r["right"] for r in rows),
            "held_out": report(rows, probs, t), "held_out_top": top_right(probs, rows)}


def write(backend: str, cal: dict, path: Path = ROOT / "calibrate.py") -> None:
    """Replace the fitted block of calibrate.py, keeping other backends' entries."""
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    cals = {**calibrate.CALIBRATIONS, backend: cal}
    block = ("; do not edit by hand " + "-" * 32 + "\nCALIBRATIONS: dict = "
             + pprint.pformat(cals, width=88, compact=True, sort_dicts=True) + "\n")
    path.write_text(head + BEGIN + block + END + tail, encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=("builtin", "ollama"), default="builtin")
    p.add_argument("--judge", choices=models.JUDGES, default=None, help="the judge the "
                   "answers are judged by (--backend ollama names every role the model's "
                   "unless this says builtin, as --backend auto runs it)")
    p.add_argument("--write", action="store_true", help="write the fit into calibrate.py")
    p.add_argument("--rows", metavar="JSONL", nargs="+", help="read the rows from this file (written "
                   "by --save-rows) instead of answering the tuning splits again")
    p.add_argument("--runs", metavar="RUN=SPLIT", nargs="+", help="take the rows from "
                   "evaluate.py runs (full variant) of these tuning splits")
    p.add_argument("--save-rows", metavar="JSONL", help="also write the rows collected")
    p.add_argument("--splits", nargs="+", metavar="SPLIT",
                   help="collect these tuning splits only (default: every tuning split)")
    args = p.parse_args(argv)
    splits = tuning_splits()
    if args.splits and not set(args.splits) <= set(splits):
        p.error(f"not tuning splits: {', '.join(sorted(set(args.splits) - set(splits)))}")
    if args.runs:
        rows = rows_of_runs(args.runs, splits)
    elif args.rows:
        rows = [json.loads(x) for f in args.rows for x in
                Path(f).read_text(encoding="utf-8").splitlines() if x.strip()]
    else:
        rows = collect({s: v for s, v in splits.items() if s in (args.splits or splits)},
                       args.backend, args.judge)
    if args.save_rows:
        Path(args.save_rows).write_text("".join(json.dumps(r) + "\n" for r in rows),
                                        encoding="utf-8")
    if len({r["split"] for r in rows}) < 2:
        p.error(f"rows from {len({r['split'] for r in rows})} split(s): the held-out "
                "threshold needs rows from at least two tuning splits (--rows A B, or "
                "--splits with two or more)")
    keys = {r.get("key") or args.backend for r in rows}
    if len(keys) != 1 or (args.backend != "builtin" and "@" not in next(iter(keys))):
        p.error(f"the rows are of calibration keys {sorted(keys)}: one model's rows are "
                "needed, with its identity (a key ollama@DIGEST)")
    key = keys.pop()
    cal = calibration(rows, args.backend)
    cal["model"] = rows_model(args) if args.backend != "builtin" else None
    print(f"# {cal['rows']} answers, {cal['right']} right, "
          f"{sum(r['passed'] for r in rows)} passed the checks")
    for split, (ok, ship, right) in cal["held_out"].items():
        print(f"# held out {split}: SHIP {ok}/{ship} right; right answers shipped {ok}/{right}")
    print(f"# held out, the most confident answers whose checks passed, right of the "
          f"first 5, 10, 20, 50: {cal['held_out_top']}")
    print(json.dumps(cal, indent=1))
    if args.write:
        write(key, cal)
    return 0


if __name__ == "__main__":
    sys.exit(main())
