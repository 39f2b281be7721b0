"""plain_bm25: the plain baseline every evidence figure stands beside.

In:  a vault folder, a question, a word budget.
Out: the text a plain search hands on: Okapi BM25 (k1 1.2, b 0.75) over heading-sized
     chunks (a note split before each #, ## or ### heading, its path's words added to
     each chunk), chunks taken in rank order until the budget (the last one cut).
Not: dates, versions, rerank, time words, links: none of Verso's processing. It reads
     the vault's markdown and text files as they are (hidden folders skipped) and writes
     nothing.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

K1, B = 1.2, 0.75
SUFFIXES = (".md", ".txt")
WORD_RE = re.compile(r"[a-z0-9]+")
SPLIT_RE = re.compile(r"\n(?=#{1,3} )")        # before a #, ## or ### heading
STOP = frozenset("the a an of to is what was are in on for and did does how has have "
                 "with which who when where s i my me do".split())


def _words(text: str) -> list[str]:
    return [w for w in WORD_RE.findall(text.lower()) if w not in STOP]


class Baseline:
    """BM25 over one vault's heading chunks, built once, asked many times."""

    def __init__(self, vault):
        vault = Path(vault)
        self.chunks: list[tuple[str, str]] = []
        for f in sorted(vault.rglob("*")):
            rel = f.relative_to(vault)
            if f.suffix not in SUFFIXES or any(p.startswith(".") for p in rel.parts):
                continue
            for part in SPLIT_RE.split(f.read_text(encoding="utf-8", errors="replace")):
                if part.strip():
                    self.chunks.append((rel.as_posix(), part))
        docs = [_words(p.replace("_", " ") + " " + t) for p, t in self.chunks]
        self.lengths = [len(d) for d in docs]
        self.avg = sum(self.lengths) / max(len(docs), 1)
        self.tf = [Counter(d) for d in docs]
        self.df = Counter(w for d in docs for w in set(d))

    def scores(self, question: str) -> list[float]:
        n, out = len(self.chunks), []
        asked = _words(question)
        idf = {w: math.log(1 + (n - self.df[w] + 0.5) / (self.df[w] + 0.5)) for w in asked}
        for tf, length in zip(self.tf, self.lengths):
            norm = K1 * (1 - B + B * length / self.avg) if self.avg else K1
            out.append(sum(idf[w] * tf[w] * (K1 + 1) / (tf[w] + norm)
                           for w in asked if w in tf))
        return out

    def evidence(self, question: str, budget: int) -> list[dict]:
        """The chunks handed on, as source dicts ({"path", "text"}), to `budget` words."""
        sc = self.scores(question)
        out, left = [], budget
        for i in sorted(range(len(sc)), key=lambda i: -sc[i]):
            words = self.chunks[i][1].split()[:left]
            out.append({"path": self.chunks[i][0], "heading": "", "text": " ".join(words)})
            left -= len(words)
            if left <= 0:
                break
        return out
