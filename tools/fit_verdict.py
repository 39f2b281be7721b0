"""Refit the builtin calibration shipped in calibrate.py, on the tuning splits.

    python tools/fit_verdict.py                      # fit and print
    python tools/fit_verdict.py --write              # ... and write it into calibrate.py
    python tools/fit_verdict.py --save-rows R.jsonl  # keep the rows; --rows R.jsonl refits

A thin wrapper: the fit is verdict_fit.py's (the same one `verso calibrate` uses for a
model, which stores its calibration in Verso's home, never in the source tree). Every
tuning split (calibrate.tuning_splits; the frozen splits are never read) is answered by
the builtin backend, full variant; each answer that was written and did not abstain is
one row: its calibration features, measures.answer_correct, and whether verify's checks
passed. Refit whenever the builtin answers change (tests/test_calibrate.py checks it).
"""

from __future__ import annotations

import argparse
import json
import pprint
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import calibrate  # noqa: E402
from verso import evaluate  # noqa: E402
from verso import harness  # noqa: E402
from verso import measures  # noqa: E402
from verso import models  # noqa: E402
from verso import verdict_fit  # noqa: E402

BEGIN, END = "# --- fitted by tools/fit_verdict.py", "# --- end of fitted constants"


def collect(splits: dict) -> list[dict]:
    """One row per written, non-abstaining builtin answer: split, id, features, right,
    passed. splits: {split: (vault, questions file)}."""
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        loaded: dict = {}
        for split, (vault, qfile) in splits.items():
            if vault not in loaded:
                loaded[vault] = harness.load(index=str(Path(tmp) / str(len(loaded))),
                                             vault=vault, backend="builtin")
            idx, be = loaded[vault]
            for q in evaluate.load_questions(qfile):
                try:
                    a = harness.ask(q["question"], index=idx, backend=be).to_dict()
                except models.BackendError as e:   # a failed answer: one row less
                    print(f"# {split} {q['id']}: skipped ({e})", file=sys.stderr)
                    continue
                cal = a["checks"].get("calibration") or {}
                if a["abstained"] or cal.get("features") is None:
                    continue
                out.append({"split": split, "id": q["id"], "features": cal["features"],
                            "right": measures.answer_correct(q, a),
                            "passed": bool(a["checks"].get("passed"))})
    return out


def write(cal: dict, path: Path = ROOT / "calibrate.py") -> None:
    """Replace the fitted block of calibrate.py with the builtin calibration."""
    text = path.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    block = ("; do not edit by hand " + "-" * 32 + "\nCALIBRATIONS: dict = "
             + pprint.pformat({"builtin": cal}, width=88, compact=True, sort_dicts=True)
             + "\n")
    path.write_text(head + BEGIN + block + END + tail, encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--write", action="store_true", help="write the fit into calibrate.py")
    p.add_argument("--rows", metavar="JSONL", nargs="+", help="read the rows (written by "
                   "--save-rows) instead of answering the tuning splits again")
    p.add_argument("--save-rows", metavar="JSONL", help="also write the rows collected")
    args = p.parse_args(argv)
    if args.rows:
        rows = [json.loads(x) for f in args.rows for x in
                Path(f).read_text(encoding="utf-8").splitlines() if x.strip()]
    else:
        rows = collect(calibrate.tuning_splits())
    if args.save_rows:
        Path(args.save_rows).write_text("".join(json.dumps(r) + "\n" for r in rows),
                                        encoding="utf-8")
    if len({r["split"] for r in rows}) < 2:
        p.error("the held-out threshold needs rows from at least two tuning splits")
    cal = dict(verdict_fit.calibration(rows, "builtin"), model=None)
    print(f"# {cal['rows']} answers, {cal['right']} right, "
          f"{sum(r['passed'] for r in rows)} passed the checks")
    for split, (ok, ship, right) in cal["held_out"].items():
        print(f"# held out {split}: SHIP {ok}/{ship} right; right answers shipped {ok}/{right}")
    print(f"# held out, the most confident answers whose checks passed, right of the "
          f"first 5, 10, 20, 50: {cal['held_out_top']}")
    print(json.dumps(cal, indent=1))
    if args.write:
        write(cal)
    return 0


if __name__ == "__main__":
    sys.exit(main())
