"""alternatives: what a user would pick instead of Verso's retrieval, on the same corpus.

In:  Verso's chunks (the same text our BM25 indexes: heading + file stem + text), their
     textkit.terms tokens, the index vectors, and the benchmark's questions.
Out: engines with build() and query(q, k) -> top-k chunk ids, plus the hardware floors:
     - SQLite FTS5 (stdlib sqlite3, the seed 004 engine): an OR query of the words, as
       seed 004 builds it ("how OR does OR chunk"), and an OR query of our terms;
     - rank_bm25 (BM25Okapi) and bm25s (method "lucene": the same idf and saturation
       as ours, so its top 10 is a reference check) over our own tokens, when installed;
     - the dense floor: a plain `vectors @ q` matmul, no top-k;
     - memory bandwidth: bytes read per second summing a 1 GiB float32 array, split
       across all cores (one thread each; numpy releases the GIL).
Not: timing loops or the table (bench/run.py).
"""

from __future__ import annotations

import importlib
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

BANDWIDTH_BYTES = 2**30           # bigger than any cache this VM reports (L3 480 MB)
BANDWIDTH_REPEATS = 5


def fts5_available() -> bool:
    try:
        con = sqlite3.connect(":memory:")
        con.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
        con.close()
        return True
    except sqlite3.OperationalError:
        return False


class FTS5:
    """chunks_fts(content) in an on-disk SQLite file, rowid == chunk id."""

    name = "fts5"

    def __init__(self, path: Path):
        self.path = Path(path)
        self.con = None

    def build(self, texts: list[str]) -> float:
        self.path.unlink(missing_ok=True)
        started = time.perf_counter()
        con = sqlite3.connect(self.path)
        con.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(content)")
        with con:
            con.executemany("INSERT INTO chunks_fts(rowid, content) VALUES (?, ?)",
                            enumerate(texts))
        self.con = con
        return time.perf_counter() - started

    @staticmethod
    def or_query(words: list[str]) -> str:
        """"w1" OR "w2" ...; quotes keep FTS5 syntax (AND, NEAR, '-') out of the words."""
        return " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))

    def query(self, words: list[str], k: int) -> list[int]:
        if not words:
            return []
        rows = self.con.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (self.or_query(words), k)).fetchall()
        return [r[0] for r in rows]

    def replace_process(self, rows: dict) -> float:
        """Wall seconds of a fresh Python process that opens this database, deletes the
        rows {rowid: text} and inserts them again, and commits: one note re-indexed."""
        code = ("import json, sqlite3, sys; rows = json.loads(sys.stdin.read()); "
                "con = sqlite3.connect(sys.argv[1]); ids = [(int(k),) for k in rows]\n"
                "with con:\n"
                "    con.executemany('DELETE FROM chunks_fts WHERE rowid = ?', ids)\n"
                "    con.executemany('INSERT INTO chunks_fts(rowid, content) VALUES (?, ?)',"
                " [(int(k), v) for k, v in rows.items()])\n")
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code, str(self.path)], input=json.dumps(rows),
                       text=True, check=True)
        return time.perf_counter() - started

    def disk_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*"))

    def close(self) -> None:
        if self.con is not None:
            self.con.close()
            self.con = None


def installed(module: str) -> bool:
    try:
        importlib.import_module(module)
        return True
    except ImportError:
        return False


class RankBM25:
    """rank_bm25.BM25Okapi over our tokens (its idf: log((N-df+.5)/(df+.5)), floored)."""

    name = "rank_bm25"

    def build(self, docs: list[list[str]], k1: float, b: float) -> float:
        from rank_bm25 import BM25Okapi
        started = time.perf_counter()
        self.bm = BM25Okapi(docs, k1=k1, b=b)
        return time.perf_counter() - started

    def scores(self, terms: list[str]) -> np.ndarray:
        return np.asarray(self.bm.get_scores(terms), dtype=np.float64)

    def query(self, terms: list[str], k: int) -> list[int]:
        scores = self.bm.get_scores(terms)
        order = np.lexsort((np.arange(len(scores)), -scores))[:k]
        return [int(i) for i in order if scores[i] > 0]


class BM25S:
    """bm25s.BM25(method="lucene") over our tokens: same idf and ranking as ours."""

    name = "bm25s"

    def build(self, docs: list[list[str]], k1: float, b: float) -> float:
        import bm25s
        started = time.perf_counter()
        self.bm = bm25s.BM25(k1=k1, b=b, method="lucene")
        self.bm.index(docs, show_progress=False)
        self.n = len(docs)
        return time.perf_counter() - started

    def query(self, terms: list[str], k: int) -> list[int]:
        terms = [t for t in terms if t in self.bm.vocab_dict]
        if not terms:
            return []
        ids, scores = self.bm.retrieve([terms], k=min(k, self.n), show_progress=False,
                                       n_threads=1)
        return [int(i) for i, s in zip(ids[0], scores[0]) if s > 0]

    def scores(self, terms: list[str]) -> np.ndarray:
        terms = [t for t in terms if t in self.bm.vocab_dict]
        if not terms:
            return np.zeros(self.n)
        return np.asarray(self.bm.get_scores(terms), dtype=np.float64)


def matmul_floor(vectors: np.ndarray, qvec: np.ndarray) -> np.ndarray:
    """The dense floor: one float32 matrix-vector product over the same rows."""
    return vectors @ qvec


def _on_all_cores(fn, n: int, threads: int) -> float:
    """Seconds for fn(lo, hi) over [0, n) split across threads (numpy drops the GIL)."""
    cuts = np.linspace(0, n, threads + 1).astype(int)
    workers = [threading.Thread(target=fn, args=(lo, hi)) for lo, hi in zip(cuts, cuts[1:])]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - started


def bandwidth(nbytes: int = BANDWIDTH_BYTES, repeats: int = BANDWIDTH_REPEATS) -> dict:
    """Memory bandwidth from a float32 array larger than the caches, on every core:
    read = bytes / best time of a sum, copy = bytes read + written / best np.copyto;
    first touch = bytes / time to fill the array the first time (one thread)."""
    threads = os.cpu_count() or 1
    started = time.perf_counter()
    a = np.ones(nbytes // 4, dtype=np.float32)      # first touch: page faults included
    fresh = time.perf_counter() - started
    b = np.empty_like(a)
    read = min(_on_all_cores(lambda lo, hi: a[lo:hi].sum(), a.size, threads)
               for _ in range(repeats))
    copy = min(_on_all_cores(lambda lo, hi: np.copyto(b[lo:hi], a[lo:hi]), a.size, threads)
               for _ in range(repeats))
    return {"bytes": a.nbytes, "threads": threads, "read_bytes_per_s": a.nbytes / read,
            "copy_bytes_per_s": 2 * a.nbytes / copy, "first_touch_bytes_per_s": a.nbytes / fresh}


def overlap(a: list[int], b: list[int], k: int = 10) -> float | None:
    """|top-k of a ∩ top-k of b| / k-ish: shared ids over the larger list (None if both
    are empty)."""
    a, b = list(a)[:k], list(b)[:k]
    if not a and not b:
        return None
    return len(set(a) & set(b)) / max(len(a), len(b))


def agreement(ours: list[int], ref: np.ndarray, k: int = 10, rtol: float = 1e-5):
    """Share of our top k that is a valid top k under the reference scores `ref` (all
    documents): an id counts when its reference score reaches the reference k-th best,
    so ties broken differently still agree. None when neither side matched anything."""
    ours = list(ours)[:k]
    pos = ref[ref > 0]
    if not ours and pos.size == 0:
        return None
    kk = min(k, pos.size)
    if kk == 0:
        return 0.0
    kth = np.partition(pos, pos.size - kk)[pos.size - kk]
    ok = sum(ref[i] >= kth - rtol * abs(kth) for i in ours[:kk])
    return ok / max(len(ours), kk)
