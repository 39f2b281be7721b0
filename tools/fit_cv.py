"""Which question files to fit the reader on: leave one tuning split out, fit on the
others pooled (tools/fit_reader.py), score the one left out (evaluate.py, full
variant), and compare with the shipped dev-only fit on the same split.

    python tools/fit_cv.py [SPLIT ...]      (default: every tuning split below)

Each fold works in a temporary copy of the repo (line_scores.py's constants replaced there);
the frozen splits (test, second) are never passed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPLITS = {"dev": ("questions/dev.jsonl", "sample-vault"),
          "dev2": ("questions/dev2.jsonl", "sample-vault"),
          "dev3": ("questions/dev3.jsonl", "sample-vault"),
          "dev4": ("questions/dev4.jsonl", "vaults/third-vault"),
          "dev5": ("questions/dev5.jsonl", "vaults/fourth-vault")}
CONSTANT_RE = re.compile(r"^([A-Z_]+) = (-?[\d.]+)$", re.M)


def _score(repo: Path, split: str, out: str) -> str:
    questions, vault = SPLITS[split]
    subprocess.run([sys.executable, "evaluate.py", "--vault", vault, "--questions", questions,
                    "--out", out], cwd=repo, capture_output=True, check=True)
    o = json.loads((repo / out / "summary.json").read_text())["variants"]["full"]["overall"]
    return "  ".join(f"{k} {o[k]['k']}/{o[k]['n']}" for k in
                     ("answer_correct", "false_abstain", "abstain_correct"))


def fold(split: str, tmp: Path) -> str:
    """One line: the split scored with the others' pooled fit, then with the shipped fit."""
    repo = tmp / split
    shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns("runs", ".git", ".verso",
                                                              "__pycache__"))
    others = [f"{q}={v}" for s, (q, v) in SPLITS.items() if s != split]
    out = subprocess.run([sys.executable, "tools/fit_reader.py", "--questions", *others],
                         cwd=repo, capture_output=True, text=True, check=True).stdout
    shipped = _score(repo, split, "runs/shipped")
    text = (repo / "line_scores.py").read_text()
    for name, value in CONSTANT_RE.findall(out):
        text = re.sub(rf"^{name} = -?[\d.]+", f"{name} = {value}", text, flags=re.M)
    (repo / "line_scores.py").write_text(text)
    return f"{split}: others' fit {_score(repo, split, 'runs/pooled')} | dev fit {shipped}"


def main(argv=None) -> int:
    splits = (argv if argv is not None else sys.argv[1:]) or list(SPLITS)
    with tempfile.TemporaryDirectory() as tmp:
        for split in splits:
            print(fold(split, Path(tmp)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
