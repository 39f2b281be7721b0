"""rerank: one judgment per candidate, "does this passage help answer the query", batched.

In:  the query, the candidates after version.apply, a judge from models.py.
Out: rerank(): every candidate with .relevance set, sorted best first (the first `keep`
     are the kept ones); gate(): an abstain reason when no kept passage reaches
     RELEVANCE_THRESHOLD, else None.
Not: time-mode filtering (version.settle) or writing.

All candidates of one query go to the judge in ONE call, keyed "p1".."pN". Each passage
carries its `private` flag: the judge backend decides where private text may go (the
builtin judge scores everything locally).
"""

from __future__ import annotations

from dataclasses import replace

import models
import retrieve

RELEVANCE_THRESHOLD = 0.5   # calibrated P(helps answer); below it for all kept -> abstain
KEEP = 5


def _passage(c) -> dict:
    return {"text": c.chunk.get("text", ""), "heading": c.chunk.get("heading", ""),
            "path": c.path, "date": c.date, "dense_score": c.dense_score,
            "private": bool(c.chunk.get("private", False))}


def corpus_idf(index) -> dict[str, float]:
    """term -> BM25 idf over the whole index (cached on it): a term's weight in the
    judge should not depend on which 20 candidates happened to come back."""
    if "term_idf" not in index.cache:
        bm = retrieve.load_bm25(index)
        idf = bm["idf"]
        index.cache["term_idf"] = {t: float(idf[i]) for t, i in bm["vocab"].items()}
    return index.cache["term_idf"]


def rerank(query: str, cands: list, judge, keep: int = KEEP, ledger=None,
           idf=None) -> list:
    """Judged copies of all candidates, sorted by relevance (ties: fused score, then
    the incoming order). `keep` only documents the cut: callers take [:keep]. `idf`
    (corpus_idf) goes to judges that take it (the builtin one)."""
    if not cands:
        return []
    assert keep >= 1, "keep must be at least 1"
    passages = {f"p{i}": _passage(c) for i, c in enumerate(cands, 1)}
    extra = {"idf": idf} if idf is not None else {}
    probs = judge.relevance(query, passages, stage="rerank", ledger=ledger, **extra)
    missing = [k for k in passages if k not in probs]
    if missing:
        raise models.BackendError(
            f"the judge returned no relevance for {', '.join(missing)}: "
            "check the judge backend (or run with --no-rerank)")
    judged = [replace(c, relevance=float(probs[f"p{i}"])) for i, c in enumerate(cands, 1)]
    order = sorted(range(len(judged)),
                   key=lambda i: (-judged[i].relevance, -(judged[i].fused or 0.0), i))
    return [judged[i] for i in order]


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
