"""A vault shaped like an import: many notes that share one date and one frontmatter
template (the case that made near-copy checks quadratic), plus one near copy.

    python bench/one_date_vault.py OUT [--notes 4000] [--seed 7]

Each note: frontmatter `date: 2026-05-01`, a heading, 120 words drawn from 4,000. Three
quarters in imported/, the rest in 20 log folders; imported/note 0 copy.md is note 0 with
one more word (the one near copy ingest must find).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path


def make(out: Path, notes: int = 4000, seed: int = 7) -> None:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(4000)]
    for i in range(notes):
        folder = out / ("imported" if i < notes * 3 // 4 else f"log{i % 20}")
        folder.mkdir(parents=True, exist_ok=True)
        body = " ".join(rng.choice(words) for _ in range(120))
        (folder / f"note {i}.md").write_text(f"---\ndate: 2026-05-01\n---\n# Note {i}\n{body}\n",
                                             encoding="utf-8")
    first = (out / "imported" / "note 0.md").read_text(encoding="utf-8")
    (out / "imported" / "note 0 copy.md").write_text(first + " extra\n", encoding="utf-8")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--notes", type=int, default=4000)
    p.add_argument("--seed", type=int, default=7)
    a = p.parse_args(argv)
    make(Path(a.out), a.notes, a.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
