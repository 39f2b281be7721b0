"""The builtin embedder: hashed term and character n-gram features, IDF-weighted, beside
what the words mean (word_vectors.py: a static vector per word from a sentence embedder).

In:  texts (chunks at ingest, a question at ask time).
Out: float32 L2-normalised vectors of EMBED_DIM + the word table's dimension: the hashed
     part and the words' part each unit length, weighed so that a cosine is
     (1 - WORDS_SHARE) times the hashed cosine plus WORDS_SHARE times the words' (a text
     with no word of the table: the hashed part alone); the IDF it was fitted with, which
     the index keeps (its id names the dimension, a hash of the IDF and the word table).
Not: model calls (models.py) or any other file access (the shipped word table is read,
     once, by word_vectors.py). Offline and deterministic: the same text gives the same
     vector on every machine.
"""

from __future__ import annotations

import time
import zlib
from array import array

import numpy as np

from verso import cost_ledger
from verso import textkit
from verso import word_vectors

EMBED_DIM = 384          # hashed feature buckets (one float32 row per chunk)
NGRAM_RANGE = (3, 5)     # character n-grams of each term, with boundary marks
NGRAM_WEIGHT = 0.35      # a char n-gram counts this much against a whole term
BUILTIN_EMBEDDER = "builtin-v2"
# ---- FITTED: tools/fit_evidence.py --share --write (do not edit by hand)
WORDS_SHARE = 0.5
# ---- end FITTED


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


def _both(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(the texts' hashed counts, _counts_of; their words' sums, word_vectors.sums),
    from one pass over the terms."""
    occ, lens, names = textkit.term_occurrences(texts)
    return _counts_of(len(texts), occ, lens), word_vectors.sums(occ, lens, names)


def _counts_of(n: int, occ: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """[n, EMBED_DIM] float32 signed hashed counts of the terms and their char n-grams
    (crc32: stable everywhere) of n texts, from their term occurrences
    (textkit.term_occurrences)."""
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


def another_builtin(eid: str) -> bool:
    """`eid` names a builtin embedder other than this Verso's: another word table, share
    or dimension (the IDF digest aside: each vault fits its own)."""
    def kind(e: str) -> str:
        parts = e.split("-")
        return "-".join(parts[:3] + parts[4:]) if len(parts) > 4 else e
    return eid.startswith("builtin") and kind(eid) != kind(BuiltinEmbedder().id)


class BuiltinEmbedder:
    """Hashed word + char n-gram TF-IDF vectors; IDF is fitted once per index."""

    name = "builtin"

    def __init__(self, idf: np.ndarray | None = None):
        self.idf = (np.ones(EMBED_DIM, dtype=np.float32) if idf is None
                    else np.asarray(idf, dtype=np.float32))
        digest = zlib.crc32(self.idf.tobytes()) if idf is not None else 0
        self.dim = EMBED_DIM + word_vectors.dim()
        words = word_vectors.table().sha256[:8]
        self.id = f"{BUILTIN_EMBEDDER}-{self.dim}-{digest:08x}-{words}-{WORDS_SHARE}"

    @classmethod
    def fit(cls, texts: list[str]) -> "BuiltinEmbedder":
        """IDF per bucket from document frequencies: log((n + 1) / (df + 1)) + 1.

        The fitted embedder keeps each text's counts and word sums until it embeds that
        text once (ingest fits on the chunks, then embeds the same chunks)."""
        df = np.zeros(EMBED_DIM, dtype=np.float64)
        fitted: dict[str, list] = {}          # text -> [counts row, word sums, uses left]
        for start in range(0, len(texts), 2048):
            batch = texts[start:start + 2048]
            m, words = _both(batch)
            df += (m != 0).sum(axis=0)
            for t, row, w in zip(batch, m, words):
                fitted.setdefault(t, [row, w, 0])[2] += 1
        idf = np.log((len(texts) + 1) / (df + 1)) + 1.0
        emb = cls(idf.astype(np.float32))
        emb._fitted = fitted
        return emb

    def _raw(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """_both(texts), taking the rows fit() kept (each as often as it was fitted)."""
        fitted = getattr(self, "_fitted", None)
        if not fitted:
            return _both(texts)
        kept_rows = []
        for t in texts:
            kept = fitted.get(t)
            kept_rows.append(kept and kept[:2])
            if kept and kept[2] <= 1:
                del fitted[t]
            elif kept:
                kept[2] -= 1
        todo = [i for i, r in enumerate(kept_rows) if r is None]
        if todo:
            for i, m, w in zip(todo, *_both([texts[i] for i in todo])):
                kept_rows[i] = (m, w)
        if not kept_rows:
            return _both(texts)
        return (np.stack([r[0] for r in kept_rows]), np.stack([r[1] for r in kept_rows]))

    def _vectors(self, texts: list[str]) -> np.ndarray:
        m, words = self._raw(texts)
        m = word_vectors.unit(np.sign(m) * np.log1p(np.abs(m)) * self.idf)  # sublinear tf, idf
        both = np.concatenate([m * np.sqrt(1.0 - WORDS_SHARE),
                               word_vectors.unit(words) * np.sqrt(WORDS_SHARE)], axis=1)
        return word_vectors.unit(both).astype(np.float32)

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
