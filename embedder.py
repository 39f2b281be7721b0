"""The builtin embedder: hashed term and character n-gram features, IDF-weighted.

In:  texts (chunks at ingest, a question at ask time).
Out: float32 L2-normalised vectors of EMBED_DIM; the IDF it was fitted with, which the
     index keeps (its id names the dimension and a hash of the IDF).
Not: model calls (models.py) or any file access. Offline and deterministic: the same
     text gives the same vector on every machine.
"""

from __future__ import annotations

import time
import zlib
from array import array

import numpy as np

from verso import cost_ledger
from verso import textkit

EMBED_DIM = 384          # hashed feature buckets (one float32 row per chunk)
NGRAM_RANGE = (3, 5)     # character n-grams of each term, with boundary marks
NGRAM_WEIGHT = 0.35      # a char n-gram counts this much against a whole term
BUILTIN_EMBEDDER = "builtin-hash-v1"


def _bucket(feature: str) -> tuple[int, float]:
    h = zlib.crc32(feature.encode("utf-8"))
    return h % EMBED_DIM, (1.0 if (h >> 31) & 1 else -1.0)


# A term's features are fixed: its word bucket, then its char n-grams in order, kept
# per interned term as int16 codes bucket * 4 + kind (kind indexes _CODE_VALUE). A
# batch of texts expands its term occurrences into (row, bucket, value) events in text
# order and sums them with one bincount, which adds in that order, exactly as the first
# version's per-text dict did (tests/test_bench_equivalence.py checks it bit for bit).
_CODE_VALUE = np.array([1.0, -1.0, NGRAM_WEIGHT, -NGRAM_WEIGHT])
SMALL_BATCH_TERMS = 64   # fewer term occurrences than this: summed in a Python loop


def _term_codes(term: str) -> bytes:
    """The signed hashed features of one term (word, then 3..5-grams of <term>)."""
    codes = []
    b, s = _bucket("w:" + term)
    codes.append(b * 4 + (0 if s > 0 else 1))
    marked = f"<{term}>"
    lo, hi = NGRAM_RANGE
    for n in range(lo, hi + 1):
        for i in range(len(marked) - n + 1):
            b, s = _bucket(marked[i:i + n])
            codes.append(b * 4 + (2 if s > 0 else 3))
    return np.array(codes, dtype=np.int16).tobytes()


def _codes(i: int) -> bytes:
    c = textkit.TERM_CODES[i]
    if c is None:
        c = textkit.TERM_CODES[i] = _term_codes(textkit.TERMS[i])
    return c


def _counts(texts: list[str]) -> np.ndarray:
    """[n, EMBED_DIM] float32 signed hashed counts of terms and their char n-grams
    (crc32: stable everywhere)."""
    n = len(texts)
    occ, lens, _ = textkit.term_occurrences(texts)
    if not occ.size:
        return np.zeros((n, EMBED_DIM), dtype=np.float32)
    if occ.size <= SMALL_BATCH_TERMS:                       # a query: plain Python is faster
        m = np.zeros((n, EMBED_DIM), dtype=np.float32)
        values, at = _CODE_VALUE.tolist(), 0
        for row, k in enumerate(lens.tolist()):
            acc = [0.0] * EMBED_DIM
            for i in occ[at:at + k].tolist():
                for code in array("h", _codes(i)):
                    acc[code >> 2] += values[code & 3]
            m[row] = acc
            at += k
        return m
    uniq, occ = np.unique(occ, return_inverse=True)
    blobs = [_codes(i) for i in uniq.tolist()]
    table = np.frombuffer(b"".join(blobs), dtype=np.int16)  # codes of the batch's terms
    bucket, value = (table >> 2).astype(np.int64), _CODE_VALUE[table & 3]
    sizes = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs)) // 2
    starts = np.cumsum(sizes) - sizes
    per = sizes[occ]                                        # events per occurrence
    ends = np.cumsum(per)                                   # where each one's events end
    pos = np.arange(int(ends[-1]), dtype=np.int64) + np.repeat(starts[occ] - ends + per, per)
    flat = np.repeat(np.repeat(np.arange(0, n * EMBED_DIM, EMBED_DIM, dtype=np.int64),
                               lens), per)                  # row offset of every event
    flat += bucket[pos]
    m = np.bincount(flat, weights=value[pos], minlength=n * EMBED_DIM)
    return m.reshape(n, EMBED_DIM).astype(np.float32)  # [n, EMBED_DIM] signed raw counts


class BuiltinEmbedder:
    """Hashed word + char n-gram TF-IDF vectors; IDF is fitted once per index."""

    name = "builtin"
    dim = EMBED_DIM

    def __init__(self, idf: np.ndarray | None = None):
        self.idf = (np.ones(EMBED_DIM, dtype=np.float32) if idf is None
                    else np.asarray(idf, dtype=np.float32))
        digest = zlib.crc32(self.idf.tobytes()) if idf is not None else 0
        self.id = f"{BUILTIN_EMBEDDER}-{EMBED_DIM}-{digest:08x}"

    @classmethod
    def fit(cls, texts: list[str]) -> "BuiltinEmbedder":
        """IDF per bucket from document frequencies: log((n + 1) / (df + 1)) + 1.

        The fitted embedder keeps each text's counts until it embeds that text once
        (ingest fits on the chunks, then embeds the same chunks)."""
        df = np.zeros(EMBED_DIM, dtype=np.float64)
        fitted: dict[str, list] = {}          # text -> [counts row, uses left]
        for start in range(0, len(texts), 2048):
            batch = texts[start:start + 2048]
            m = _counts(batch)
            df += (m != 0).sum(axis=0)
            for t, row in zip(batch, m):
                fitted.setdefault(t, [row, 0])[1] += 1
        idf = np.log((len(texts) + 1) / (df + 1)) + 1.0
        emb = cls(idf.astype(np.float32))
        emb._fitted = fitted
        return emb

    def _raw(self, texts: list[str]) -> np.ndarray:
        """_counts(texts), taking the rows fit() kept (each as often as it was fitted)."""
        fitted = getattr(self, "_fitted", None)
        if not fitted:
            return _counts(texts)
        rows = []
        for t in texts:
            kept = fitted.get(t)
            rows.append(kept and kept[0])
            if kept and kept[1] <= 1:
                del fitted[t]
            elif kept:
                kept[1] -= 1
        todo = [i for i, r in enumerate(rows) if r is None]
        if todo:
            for i, r in zip(todo, _counts([texts[i] for i in todo])):
                rows[i] = r
        return np.stack(rows) if rows else _counts(texts)

    def _vectors(self, texts: list[str]) -> np.ndarray:
        m = self._raw(texts)
        m = np.sign(m) * np.log1p(np.abs(m)) * self.idf  # sublinear tf, idf weight
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return (m / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed_documents(self, texts, ledger=None, stage="ingest"):
        started = time.perf_counter()
        out = self._vectors(list(texts))
        cost_ledger.record(ledger, stage, "builtin", self.id, started,
                sum(textkit.count_tokens(t) for t in texts))
        return out

    def embed_query(self, text, ledger=None, stage="retrieve"):
        started = time.perf_counter()
        out = self._vectors([text])[0]
        cost_ledger.record(ledger, stage, "builtin", self.id, started, textkit.count_tokens(text))
        return out
