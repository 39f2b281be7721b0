"""Every shipped split in one command: run them all, or diff two such runs answer by answer.

The table split -> vault -> role (tuning / frozen, with the frozen sha256) lives in
questions/splits.json; this script, tests/test_question_sets.py and the docs read it.

    python tools/splits.py run runs/all-before                # every split, default variants
    python tools/splits.py run runs/all-r --variant full --backend builtin
    python tools/splits.py diff runs/all-before runs/all-after   # exit 1 if any answer differs

`diff` compares, per split, variant and question: the answer text, the verdict, the time
mode and the kept sources. "Behaviour unchanged" means it prints nothing and exits 0.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "questions" / "splits.json"
SAME = ("answer", "verdict", "time_mode", "sources", "abstained")


def splits(table: Path = TABLE) -> dict:
    """{split: {"vault": path relative to the repo, "role": ..., "sha256"?: ...}}"""
    return json.loads(table.read_text(encoding="utf-8"))["splits"]


def _records(run_dir: Path) -> dict:
    """{(variant, id): record} of one evaluate run folder (the format line skipped)."""
    lines = (run_dir / "records.jsonl").read_text(encoding="utf-8").splitlines()[1:]
    return {(r["variant"], r["id"]): r for r in map(json.loads, lines)}


def diff_runs(a: Path, b: Path) -> list[str]:
    """One line per answer that differs between two `run` folders (and per split or
    question present in only one)."""
    out = []
    for split in sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()}):
        if not ((a / split / "records.jsonl").is_file() and (b / split / "records.jsonl").is_file()):
            out.append(f"{split}: in one run only")
            continue
        ra, rb = _records(a / split), _records(b / split)
        for key in sorted(ra.keys() | rb.keys()):
            if key not in ra or key not in rb:
                out.append(f"{split} {key[0]} {key[1]}: in one run only")
                continue
            diffs = [k for k in SAME if ra[key].get(k) != rb[key].get(k)]
            if diffs:
                out.append(f"{split} {key[0]} {key[1]}: {', '.join(diffs)} differ")
    return out


def run_all(out: Path, extra: list[str]) -> int:
    """evaluate.py on every split into out/SPLIT; returns the first failing exit code."""
    for split, row in splits().items():
        kind = "--conversations" if row.get("kind") == "conversations" else "--questions"
        cmd = [sys.executable, str(ROOT / "evaluate.py"), "--vault", str(ROOT / row["vault"]),
               kind, str(ROOT / "questions" / f"{split}.jsonl"),
               "--out", str(out / split), *extra]
        print(f"{split}: {' '.join(cmd[1:])}", file=sys.stderr)
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        if r.returncode:
            return r.returncode
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tools/splits.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="evaluate every split into OUT/SPLIT")
    r.add_argument("out")
    d = sub.add_parser("diff", help="list answers that differ between two runs")
    d.add_argument("a")
    d.add_argument("b")
    args, extra = p.parse_known_args(argv)
    if args.cmd == "run":
        return run_all(Path(args.out), extra)
    lines = diff_runs(Path(args.a), Path(args.b))
    print("\n".join(lines) or "every answer the same")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
