"""rerank: one judgment per candidate, "does this passage help answer the query", batched.

In:  the query, the candidates after version.apply, a judge (line_scores.BuiltinJudge, or
     models.Ollama).
Out: rerank(): every candidate with .relevance set, sorted best first (the first `keep`
     are the kept ones); gate(): an abstain reason when no kept passage reaches
     RELEVANCE_THRESHOLD, else None.
Not: time-mode filtering (version.settle) or writing.

All candidates of one query go to the judge in ONE call, keyed "p1".."pN". A judge that
also scores each part of a several-part question (relevance_by_part, the builtin one)
lets each part's best passage from another note into the kept set. Each passage
carries its `private` flag: the judge backend decides where private text may go (the
builtin judge scores everything locally).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from verso import models
from verso import bm25

RELEVANCE_THRESHOLD = 0.5   # calibrated P(helps answer); below it for all kept -> abstain
KEEP = 5


def _passage(c) -> dict:
    return {"text": c.chunk.get("text", ""), "heading": c.chunk.get("heading", ""),
            "path": c.path, "date": c.date, "dense_score": c.dense_score,
            "private": bool(c.chunk.get("private", False))}


def corpus_idf(index) -> Mapping[str, float]:
    """term -> BM25 idf over the whole index (cached on it): a term's weight in the
    judge should not depend on which 20 candidates happened to come back."""
    if "term_idf" not in index.cache:
        bm = bm25.load_bm25(index)
        index.cache["term_idf"] = _TermIdf(bm["vocab"], bm["idf"])
    return index.cache["term_idf"]


class _TermIdf(Mapping):
    """{term: float(idf[column])} over the BM25 vocabulary, read when asked: a cold
    question looks up a few terms, not the 40k of a large vault (a dict of them took
    10 to 20 ms per process). values() is made once, for the judge's max()."""

    def __init__(self, vocab: dict, idf: np.ndarray):
        self._vocab, self._idf, self._values = vocab, idf, None

    def __getitem__(self, term):
        return float(self._idf[self._vocab[term]])

    def __contains__(self, term):
        return term in self._vocab

    def __iter__(self):
        return iter(self._vocab)

    def __len__(self):
        return len(self._vocab)

    def values(self):
        if self._values is None:
            cols = np.fromiter(self._vocab.values(), dtype=np.int64, count=len(self._vocab))
            self._values = np.asarray(self._idf, dtype=np.float64)[cols].tolist()
        return self._values


def rerank(query: str, cands: list, judge, keep: int = KEEP, ledger=None,
           idf=None) -> list:
    """Judged copies of all candidates, sorted by relevance (ties: fused score, then
    the incoming order), except that for a several-part question each part's best
    passage is moved into the first `keep` (_cover_parts). Callers take [:keep]. `idf`
    (corpus_idf) goes to judges that take it (the builtin one)."""
    if not cands:
        return []
    assert keep >= 1, "keep must be at least 1"
    passages = {f"p{i}": _passage(c) for i, c in enumerate(cands, 1)}
    extra = {"idf": idf} if idf is not None else {}
    by_part = getattr(judge, "relevance_by_part", None)
    if by_part is not None:
        table = by_part(query, passages, stage="rerank", ledger=ledger, **extra)
        probs = {k: max(v) for k, v in table.items()}
    else:
        table, probs = {}, judge.relevance(query, passages, stage="rerank", ledger=ledger,
                                           **extra)
    missing = [k for k in passages if k not in probs]
    if missing:
        raise models.BackendError(
            f"the judge returned no relevance for {', '.join(missing)}: "
            "check the judge backend (or run with --no-rerank)")
    judged = [replace(c, relevance=float(probs[f"p{i}"])) for i, c in enumerate(cands, 1)]
    order = sorted(range(len(judged)),
                   key=lambda i: (-judged[i].relevance, -(judged[i].fused or 0.0), i))
    parts = [table[f"p{i}"][1:] for i in range(1, len(cands) + 1)] if table else []
    if parts and len(parts[0]) > 1:
        order = _cover_parts(order, parts, [c.path for c in judged], keep)
    return [judged[i] for i in order]


def _cover_parts(order: list[int], parts: list[list[float]], paths: list[str],
                 keep: int) -> list[int]:
    """A question of several parts: each part, in turn, names its best passage from a
    note no earlier part named; one that passes the gate on its own is moved into the
    first `keep` (the writer needs a sentence per part, often from a second note).
    `parts[i][j]` is passage i's probability for part j; `order` is best first."""
    named, must = set(), []
    for j in range(len(parts[0])):
        rest = [i for i in order if paths[i] not in named]
        if not rest:
            break
        best = max(rest, key=lambda i: (parts[i][j], -order.index(i)))
        named.add(paths[best])
        if parts[best][j] >= RELEVANCE_THRESHOLD:
            must.append(best)
    head = set(must[:keep])
    for i in order:
        if len(head) >= keep:
            break
        head.add(i)
    return [i for i in order if i in head] + [i for i in order if i not in head]


def gate(kept: list, threshold: float = RELEVANCE_THRESHOLD) -> str | None:
    """Why to abstain without writing, or None when some kept passage is relevant."""
    if not kept:
        return "no passages were retrieved"
    if any(c.relevance is None for c in kept):
        raise ValueError("gate() needs reranked candidates (relevance is None)")
    best = max(kept, key=lambda c: c.relevance)
    if best.relevance >= threshold:
        return None
    return (f"no passage reached {threshold:g} relevance; best was "
            f"{best.relevance:.2f} from {best.path}")
