"""retrieve: candidates for a question, dense + BM25 fused by reciprocal rank.

Stage: retrieve (after route, before version).
In:  an Index (see ../contract.md: chunks, vectors, files, by_path, cache), the question
     text and its query vector (float32 [dim], L2-normalised, from the index's embedder).
Out: list[Candidate], best first: the top k of the fused ranking, each with its dense
     rank/score, BM25 rank/score and RRF score, then up to LINK_MAX chunks pulled in one
     hop along wikilinks and backlinks (added_by="link", via=the seed note).
Not: time modes or version filtering (version.py), relevance judgments (rerank.py),
     embedding the query (models.py, by the caller), reading or writing the index
     (store_load.py, store.py).
     The only file I/O is each segment's BM25 postings (s<N>.bm25-*.npy, s<N>.bm25.json
     in the index dir), written once through store.write_atomic, and the document
     frequencies of its tombstoned rows (s<N>.bm25-dead.json), extended per ingest.

Dense: one float32 matmul `vectors @ qvec` per segment. BM25 Okapi over
textkit.terms(heading + file stem + text), stored CSC-style per segment: per term a run
of (row, term frequency); a query weighs its terms' postings from the global document
frequencies and average length of the live chunks, then one bincount scatter-add.
Top-k everywhere by argpartition with ties broken by the lower chunk id.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

import store
import store_load
import textkit

K1 = 1.5                 # BM25 term-frequency saturation
B = 0.75                 # BM25 length normalisation
RRF_K = 60               # reciprocal rank fusion: 1 / (RRF_K + rank), rank 1-based
DEFAULT_K = 20           # fused candidates returned (before link expansion)
FUSE_DEPTH_MIN = 50      # each ranking contributes its top max(3k, FUSE_DEPTH_MIN)
LINK_SEEDS = 5           # distinct notes whose links and backlinks are followed
LINK_MAX = 5             # extra candidates link expansion may add
METHODS = ("hybrid", "bm25", "dense")
BM25_FORMAT = 3          # 3: per segment, tf and lengths (weights from global statistics)
BM25_META = "bm25.json"  # s<N>.bm25.json: terms; s<N>.bm25-<array>.npy: the arrays
BM25_SAVED = ("indptr", "docs", "tf", "lens")
BM25_DEAD = "bm25-dead.json"   # s<N>.bm25-dead.json: document frequencies of its tombstones
SPARSE_RATIO = 8         # postings < n_docs / SPARSE_RATIO: sum via np.unique, not n-long
RETOKENIZE_SHARE = 0.05  # tombstoned rows up to this share are tokenized again for df
SATURATE_AFTER = 2       # the query of a process at which every posting's tf part is kept
STEM_MEMO_MAX = 200_000  # file stems remembered by _bm25_text
_STEMS: dict[str, str] = {}


@dataclass
class Candidate:
    chunk: dict                       # the chunk record from chunks.json
    dense_rank: int | None = None
    dense_score: float | None = None
    bm25_rank: int | None = None
    bm25_score: float | None = None
    fused: float = 0.0                # RRF score
    via: str | None = None            # link expansion: path of the note that brought it
    added_by: str | None = None       # "link" | "version" | None (found by search)
    relevance: float | None = None    # rerank probability (judge)
    superseded_by: str | None = None  # path (or "path @ section date") of the newer one
    dropped: str | None = None        # reason when a stage set it aside (kept in trace)

    @property
    def id(self) -> int:
        return int(self.chunk["id"])

    @property
    def path(self) -> str:
        return self.chunk["path"]

    @property
    def date(self) -> str:
        """The effective date, or "undated" when it is only a file mtime."""
        weak = self.chunk.get("date_source") == "mtime"
        return "undated" if weak else (self.chunk.get("date") or "undated")

    @property
    def is_latest(self) -> bool:
        return bool(self.chunk.get("is_latest", True))


# ------------------------------------------------------------------ numeric kernels


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; equal scores by lower index."""
    scores = np.asarray(scores)
    n = scores.shape[0]
    k = min(int(k), n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        part = np.argpartition(scores, n - k)[n - k:]   # the k highest, any tie order
        kth = scores[part].min()
        if kth != kth:                                  # NaN among them: slow path
            part = np.argpartition(-scores, k - 1)[:k]
            kth = scores[part].min()
        above = part[scores[part] > kth]                # all of them lie in part
        ties = np.flatnonzero(scores == kth)[: k - above.size]  # lowest ids first
        idx = np.concatenate([above, ties])
    else:
        idx = np.arange(n)
    order = np.lexsort((idx, -scores[idx]))  # last key primary: score desc, then id
    return idx[order].astype(np.int64)


def rrf(rankings: list, rrf_k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of id rankings (best first): [(id, fused)], fused desc, id asc."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, cid in enumerate(ranking, 1):
            fused[int(cid)] = fused.get(int(cid), 0.0) + 1.0 / (rrf_k + rank)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


def _bm25_text(chunk: dict) -> str:
    path = chunk["path"]
    stem = _STEMS.get(path)
    if stem is None:
        if len(_STEMS) > STEM_MEMO_MAX:
            _STEMS.clear()
        stem = _STEMS[path] = PurePosixPath(path).stem
    return f"{chunk.get('heading') or ''} {stem} {chunk.get('text') or ''}"


def _postings(texts: list[str], vocab: dict, doc_ids: np.ndarray, n: int):
    """(keys, tf, lens) of texts placed at doc_ids among n docs: keys = term * n + doc,
    ascending, one per (term, doc) with its term frequency. Terms new to vocab join it
    in alphabetical order (a deterministic numbering; scores never depend on it)."""
    ids, lens, names = textkit.term_occurrences(texts)
    seen = np.zeros(len(names), dtype=bool)
    seen[ids] = True
    uids = sorted(np.flatnonzero(seen).tolist(), key=names.__getitem__)
    col = np.zeros(len(names), dtype=np.int64)
    col[uids] = [vocab.setdefault(names[u], len(vocab)) for u in uids]
    keys = col[ids]                          # in place below: fewer postings-long arrays
    keys *= max(n, 1)
    keys += np.repeat(np.asarray(doc_ids, dtype=np.int64), lens)
    keys.sort()
    if keys.size == 0:
        return keys, np.zeros(0, dtype=np.int64), lens
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    return keys[starts], np.diff(np.r_[starts, keys.size]), lens


def _part(texts: list[str]) -> dict:
    """The postings of one set of documents (a segment): {"terms" [V] alphabetical,
    "col" {term: column}, "indptr" int64 [V+1], "docs" int32 [P] (ascending per term),
    "tf" int32 [P], "lens" int32 [n]}; no weights, which depend on every segment."""
    n, vocab = len(texts), {}
    keys, tf, lens = _postings(texts, vocab, np.arange(n), n)
    term = keys // max(n, 1)
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    np.cumsum(np.bincount(term, minlength=len(vocab)), out=indptr[1:])
    return {"terms": sorted(vocab, key=vocab.get), "col": vocab, "indptr": indptr,
            "docs": np.remainder(keys, max(n, 1)).astype(np.int32),
            "tf": tf.astype(np.int32), "lens": np.asarray(lens, dtype=np.int32)}


def _live_df(part: dict, live, dead_df=None) -> np.ndarray:
    """int64 [V]: per term column, the live documents holding it. Tombstoned documents
    are subtracted: dead_df, when given, counts them per column (their texts tokenized
    again, see _dead_df), else they are counted over every posting."""
    indptr = np.asarray(part["indptr"])
    if live is None:
        return np.diff(indptr)
    if dead_df is not None:
        return np.diff(indptr) - dead_df
    alive = np.r_[0, np.cumsum(live[np.asarray(part["docs"])] >= 0, dtype=np.int64)]
    return alive[indptr[1:]] - alive[indptr[:-1]]


class _ByGet(Mapping):
    """A read-only mapping whose get() does the lookup (None: absent)."""

    def __getitem__(self, term):
        c = self.get(term)
        if c is None:
            raise KeyError(term)
        return c

    def __contains__(self, term):
        return self.get(term) is not None


class _Columns(_ByGet):
    """term -> column of a segment's sorted vocabulary, by bisection: a cold question
    looks up a few terms, and a dict of a large vault's 50k took 8 to 12 ms."""

    def __init__(self, terms: list):
        self.terms = terms

    def get(self, term, default=None):
        i = bisect_left(self.terms, term)
        return i if i < len(self.terms) and self.terms[i] == term else default

    def __iter__(self):
        return iter(self.terms)

    def __len__(self):
        return len(self.terms)


class _Vocab(_ByGet):
    """term -> global column: the first part's columns whose terms a live document
    holds, then the terms only later parts hold (more), in that order (what a dict
    built term by term holds); values() is one list, for rerank's table."""

    def __init__(self, first, alive: np.ndarray, more: dict):
        self.first, self.alive, self.more = first, alive, more

    def get(self, term, default=None):
        c = self.more.get(term)
        if c is None:
            c = self.first.get(term)
            if c is None or not self.alive[c]:
                return default
        return c

    def __iter__(self):
        yield from (t for t, a in zip(self.first, self.alive.tolist()) if a)
        yield from self.more

    def __len__(self):
        return int(self.alive.sum()) + len(self.more)

    def values(self):
        return np.flatnonzero(self.alive).tolist() + list(self.more.values())


def _combine(parts: list[dict], lives: list, dead_dfs=None) -> dict:
    """One BM25 view over parts (segments): live[i] maps part i's rows to chunk ids (-1
    tombstoned; None: row r is chunk r); dead_dfs[i], when given, the document
    frequency per column of part i's tombstoned rows (_dead_df). Global document
    frequencies, document count
    and average length over the live documents only, so every score is what one index
    built from the live chunks gives. {"vocab" {term: column}, "idf" float64 [V],
    "n_docs", "avgdl", "parts"}."""
    n, total, dfs = 0, 0, []
    for p, live, dead in zip(parts, lives, dead_dfs or [None] * len(parts)):
        lens = np.asarray(p["lens"], dtype=np.int64)
        rows = slice(None) if live is None else live >= 0
        n += len(lens) if live is None else int(rows.sum())
        total += int(lens[rows].sum())
        dfs.append(_live_df(p, live, dead))
    avgdl = total / n if n and total else 1.0
    vocab, df, more, extra = None, np.zeros(0, dtype=np.int64), [], {}
    for p, d in zip(parts, dfs):
        if vocab is None:             # the first (largest) part: its columns, less the
            df = d.astype(np.int64)   # terms left with no doc
            vocab = _Vocab(p["col"], df > 0, extra)
            alive = vocab.alive.tolist()
            continue
        held = np.flatnonzero(d)              # the terms a live document holds
        terms, counts = [p["terms"][i] for i in held.tolist()], d[held]
        cols = _first_columns(vocab.first, alive, terms)
        at = np.array([c is not None for c in cols], dtype=bool)
        np.add.at(df, np.array([c for c in cols if c is not None], dtype=np.int64),
                  counts[at])
        for i in np.flatnonzero(~at).tolist():           # terms the first part lacks
            t, c = terms[i], int(counts[i])
            g = extra.get(t)
            if g is None:
                extra[t] = len(df) + len(more)
                more.append(c)
            else:
                more[g - len(df)] += c
    df = np.r_[df, np.asarray(more, dtype=np.int64)].astype(np.float64)
    views = [{"col": p["col"], "indptr": np.asarray(p["indptr"]),   # plain views of the
              "docs": np.asarray(p["docs"]), "tf": np.asarray(p["tf"]),  # maps: no memmap
              "live": live if live is None else np.where(live < 0, n, live),  # cost
              "norm": _norm(p["lens"], avgdl, live)} for p, live in zip(parts, lives)]
    return {"vocab": vocab if vocab is not None else {},
            "idf": np.log1p((n - df + 0.5) / (df + 0.5)), "n_docs": n,
            "avgdl": avgdl, "parts": views}


def _first_columns(first, alive: list, terms: list) -> list:
    """Each term's column in the first part (first: term -> column) if a live document
    holds it there, else None; terms ascending (a later part's), so each bisection
    starts where the last ended."""
    if not isinstance(first, _Columns):
        return [c if c is not None and alive[c] else None for c in map(first.get, terms)]
    ft, n, lo, out = first.terms, len(first.terms), 0, []
    for t in terms:
        lo = bisect_left(ft, t, lo)
        out.append(lo if lo < n and ft[lo] == t and alive[lo] else None)
    return out


def _norm(lens, avgdl: float, live) -> np.ndarray:
    """float64 [rows]: K1 * (1 - B + B * len / avgdl), infinite for a tombstoned row, so
    its weight is 0 (and its id is the sink n: no mask per query)."""
    norm = K1 * (1.0 - B + B * np.asarray(lens, dtype=np.float64) / avgdl)
    if live is not None:
        norm[live < 0] = np.inf
    return norm


def build_bm25(chunks: list[dict]) -> dict:
    """Okapi BM25 over chunks (heading + file stem + text), as one part: see _combine."""
    return _combine([_part([_bm25_text(c) for c in chunks])], [None])


def _bm25_scores(bm: dict, query: str) -> tuple[np.ndarray, np.ndarray]:
    """(matched chunk ids ascending, BM25 scores float64); a repeated query term counts
    twice, as in the Okapi sum over query terms. Weights are computed here, per posting
    of the query's terms, from the global idf and average length."""
    vocab = bm["vocab"]
    found = Counter(t for t in textkit.terms(query) if t in vocab)
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    ds, ws = [], []
    bm["asked"] = bm.get("asked", 0) + 1
    if bm["asked"] == SATURATE_AFTER:           # a process that asks again: per posting
        for p in bm["parts"]:                    # tf / (tf + norm), once (8 bytes each)
            p["sat"] = _saturation(p, slice(None))
    for t in sorted(found):        # summed in term order: no dependence on numbering
        scale = bm["idf"][vocab[t]] * found[t] * (K1 + 1.0)
        for p in bm["parts"]:
            c = p["col"].get(t)
            if c is None:
                continue
            sl = slice(p["indptr"][c], p["indptr"][c + 1])
            rows = p["docs"][sl]
            ds.append(rows if p["live"] is None else p["live"][rows])
            ws.append(scale * (p["sat"][sl] if "sat" in p else _saturation(p, sl)))
    d, w, n = np.concatenate(ds), np.concatenate(ws), bm["n_docs"]
    if d.size * SPARSE_RATIO < n:
        ids, inverse = np.unique(d, return_inverse=True)
        scores = np.bincount(inverse, weights=w)
        if ids.size and ids[-1] == n:              # the tombstones' sink id
            ids, scores = ids[:-1], scores[:-1]
        return ids.astype(np.int64), scores
    full = np.bincount(d, weights=w, minlength=n + 1)[:n]
    ids = np.flatnonzero(full)
    return ids, full[ids]


def _saturation(part: dict, sl: slice) -> np.ndarray:
    """float64 tf / (tf + norm) of the postings sl (0 for a tombstone: its norm is inf);
    the same arithmetic whether made per query or once for all postings."""
    tf = part["tf"][sl].astype(np.float64)
    return tf / (tf + part["norm"][part["docs"][sl]])


# ------------------------------------------------------------ BM25 per segment on disk


def _read_part(folder: Path, seg: str, sha: str, n: int) -> dict | None:
    """A segment's postings from disk (memory-mapped) if whole and made for it."""
    try:
        meta = json.loads((folder / f"{seg}.{BM25_META}").read_text(encoding="utf-8"))
        arrays = {k: np.load(folder / f"{seg}.bm25-{k}.npy", mmap_mode="r",
                             allow_pickle=False) for k in BM25_SAVED}
        ok = (meta["format"] == BM25_FORMAT and meta["segment_sha"] == sha
              and meta["n_docs"] == n == len(arrays["lens"])
              and len(arrays["indptr"]) == len(meta["terms"]) + 1
              and arrays["indptr"][-1] == len(arrays["docs"]) == len(arrays["tf"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None                     # missing or damaged: rebuilt by the caller
    if not ok:
        return None
    return {**arrays, "terms": meta["terms"], "col": _Columns(meta["terms"])}


def _save_part(folder: Path, seg: str, sha: str, part: dict) -> None:
    for k in BM25_SAVED:                # arrays first, the sidecar naming them last
        store.write_atomic(folder / f"{seg}.bm25-{k}.npy", part[k])
    meta = {"format": BM25_FORMAT, "segment_sha": sha, "n_docs": len(part["lens"]),
            "terms": part["terms"]}
    store.write_atomic(folder / f"{seg}.{BM25_META}",
                       json.dumps(meta, ensure_ascii=False).encode("utf-8"))


def _segment_part(index, s: int, seg) -> dict:
    """Segment s's postings: from its BM25 files, else tokenized now and saved (memory
    only when the index dir is not writable). Tombstoned rows are kept: masked later."""
    sha = index.manifest["segments"][s]["sha"]
    part = _read_part(Path(index.dir), seg.name, sha, len(seg.rows))
    if part is None:
        part = _part([_bm25_text({"path": p, "heading": seg.heading[r], "text": seg.text(r)})
                      for r, p in enumerate(seg.row_paths())])
        try:
            _save_part(Path(index.dir), seg.name, sha, part)
        except OSError:
            pass
    return part


def _dead_texts(seg, dead: list[int]) -> list[str]:
    """The BM25 texts of a segment's rows `dead` (ascending)."""
    starts = np.array([start for _, start, _ in seg.files] or [0])
    note = np.searchsorted(starts, dead, "right") - 1            # the note of each row
    return [_bm25_text({"path": seg.files[j][0], "heading": seg.heading[r],
                        "text": seg.text(r)}) for r, j in zip(dead, note.tolist())]


def _term_df(part: dict, texts: list[str]) -> np.ndarray | None:
    """int64 [V]: per column of part, the texts holding its term; None if a text holds
    a term part lacks (texts not from its documents)."""
    vocab, k = {}, len(texts)
    keys, _, _ = _postings(texts, vocab, np.arange(k), k)
    counts = np.bincount(keys // max(k, 1), minlength=len(vocab))
    col = part["col"]
    cols = [col.get(t) for t in vocab]
    if None in cols:
        return None
    out = np.zeros(len(part["indptr"]) - 1, dtype=np.int64)
    out[np.asarray(cols, dtype=np.int64)] = counts       # distinct terms, distinct columns
    return out


def _read_dead(path: Path, sha: str, n_cols: int) -> tuple[list, np.ndarray]:
    """(rows, int64 [n_cols] count per column) of a segment's s<N>.bm25-dead.json if
    whole and made for it, else ([], zeros)."""
    out = np.zeros(n_cols, dtype=np.int64)
    try:
        d = json.loads(path.read_bytes())
        rows, cols, counts = d["rows"], np.asarray(d["cols"]), np.asarray(d["counts"])
        ok = (d["format"] == BM25_FORMAT and d["segment_sha"] == sha
              and all(type(r) is int for r in rows) and all(map(int.__lt__, rows, rows[1:]))
              and cols.shape == counts.shape == (len(cols),) and cols.dtype.kind == "i"
              and counts.dtype.kind == "i" and (len(cols) == 0 or (
                  cols.min() >= 0 and cols.max() < n_cols and counts.min() > 0)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return [], out
    if not ok:
        return [], out
    np.add.at(out, cols, counts)
    return rows, out


def _dead_df(index, s: int, seg, live, part) -> np.ndarray | None:
    """int64 [V]: per column of the segment's postings, its tombstoned rows holding the
    term, when they are few (at most RETOKENIZE_SHARE of its rows; else None: they are
    counted over every posting). Their texts are tokenized again, once: the counts are
    kept in s<N>.bm25-dead.json with the rows they cover, and a later process tokenizes
    only the rows tombstoned since (the notes of the last ingest)."""
    dead = np.flatnonzero(live < 0).tolist() if live is not None else []
    if live is None or len(dead) > RETOKENIZE_SHARE * len(live):
        return None
    path = Path(index.dir) / f"{seg.name}.{BM25_DEAD}"
    sha = index.manifest["segments"][s]["sha"]
    rows, df = _read_dead(path, sha, len(part["indptr"]) - 1)
    if rows == dead:
        return df
    if not set(rows) <= set(dead):             # not from this tombstone set: start over
        df[:] = 0
        rows = []
    more = _term_df(part, _dead_texts(seg, sorted(set(dead) - set(rows))))
    if more is None:
        return None
    df += more
    cols = np.flatnonzero(df)
    try:
        store.write_atomic(path, json.dumps(
            {"format": BM25_FORMAT, "segment_sha": sha, "rows": dead,
             "cols": cols.tolist(), "counts": df[cols].tolist()}).encode("utf-8"))
    except OSError:
        pass                                   # read-only index dir: in memory only
    return df


def load_bm25(index) -> dict:
    """BM25 over the index's live chunks: memory cache, else the segments' postings
    (read from disk, or tokenized once per segment and saved), combined with global
    statistics; an index without segments (a plain chunk list) is tokenized in memory."""
    if "bm25" in index.cache:
        return index.cache["bm25"]
    segments = getattr(index, "segments", None)
    if segments:
        parts = [_segment_part(index, s, seg) for s, seg in enumerate(segments)]
        lives = [index.chunks.segment_ids(s) for s in range(len(segments))]
        if len(lives) == 1 and np.array_equal(lives[0], np.arange(len(lives[0]))):
            lives = [None]
        dead = [_dead_df(index, s, seg, live, part)
                for s, (seg, live, part) in enumerate(zip(segments, lives, parts))]
        bm = _combine(parts, lives, dead)
    else:
        bm = build_bm25(index.chunks)
    index.cache["bm25"] = bm
    return bm


# -------------------------------------------------------------------- per-index maps


def _meta(index) -> dict:
    """Cached per-index arrays: chunk -> path column, private flags, path -> chunk ids."""
    meta = index.cache.get("retrieve_meta")
    if meta is None:
        by_file = store_load.chunk_files(index.chunks)
        if by_file is not None:                    # chunks in file order: no dicts read
            file_of, files = by_file
            names, first = _file_runs(file_of, files)
            col = np.cumsum(np.r_[False, file_of[1:] != file_of[:-1]]) if len(
                file_of) else np.zeros(0, dtype=np.int64)
            private = np.array([bool(f.get("private")) for f in files], dtype=bool)[file_of]
            ids = index.cache.get("retrieve_ids") or _runs_by_path(names, first, len(file_of))
            index.cache["retrieve_ids"] = ids
            meta = {"paths": names, "col": col, "private": private, "ids": ids}
        else:
            paths: dict[str, int] = {}
            col = np.array([paths.setdefault(c["path"], len(paths)) for c in index.chunks],
                           dtype=np.int64)
            private = np.array([bool(c.get("private")) for c in index.chunks], dtype=bool)
            order = np.argsort(col, kind="stable")
            bounds = np.searchsorted(col[order], np.arange(len(paths) + 1))
            ids = {p: order[bounds[j]:bounds[j + 1]] for p, j in paths.items()}
            meta = {"paths": list(paths), "col": col, "private": private, "ids": ids}
        index.cache["retrieve_meta"] = meta
    return meta


def _file_runs(file_of: np.ndarray, files: list) -> tuple[list, np.ndarray]:
    """(path of each note with chunks, in chunk order; its first chunk id): chunks in
    file order, so each file's chunks are one run of ids."""
    first = np.flatnonzero(np.r_[True, file_of[1:] != file_of[:-1]]) if len(
        file_of) else np.zeros(0, dtype=np.int64)
    return [files[j]["path"] for j in file_of[first].tolist()], first


def _matrix(index):
    """index.vectors as something to multiply and index: a plain ndarray view (same
    memory: no copy, and none of np.memmap's per-operation overhead), or the index's own
    view over its segments (store_load._Vectors, which never copies), cached on the index."""
    m = index.cache.get("retrieve_matrix")
    if m is None:
        v = index.vectors
        m = index.cache["retrieve_matrix"] = v if hasattr(v, "mats") else np.asarray(v)
    return m


class _Runs(dict):
    """path -> its chunk ids (int64, ascending), kept as (first, end) and made when asked."""

    def __getitem__(self, path):
        first, end = super().__getitem__(path)
        return np.arange(first, end, dtype=np.int64)

    def get(self, path, default=None):
        return self[path] if path in self else default

    def values(self):
        return [self[p] for p in self]

    def items(self):
        return [(p, self[p]) for p in self]


def _runs_by_path(names: list, first: np.ndarray, n: int) -> "_Runs":
    """path -> its chunk ids, each note's chunks one run from its first id (_file_runs)."""
    return _Runs(dict(zip(names, zip(first.tolist(), np.r_[first[1:], n].tolist()))))


def chunk_ids_by_path(index) -> dict[str, np.ndarray]:
    """Vault-relative path -> its chunk ids (ascending), cached on the index (without
    the rest of _meta, which a question without filters never needs)."""
    ids = index.cache.get("retrieve_ids")
    if ids is None:
        by_file = store_load.chunk_files(index.chunks)
        if by_file is None:
            ids = _meta(index)["ids"]
        else:
            ids = _runs_by_path(*_file_runs(*by_file), len(by_file[0]))
        index.cache["retrieve_ids"] = ids
    return ids


def _folder(prefix: str) -> str:
    """A vault-relative folder prefix: "./work/" -> "work"; "." or "/" -> "" (all)."""
    parts = [p for p in prefix.replace("\\", "/").strip().split("/") if p not in ("", ".")]
    return "/".join(parts)


def _under(path: str, prefixes: list[str]) -> bool:
    """path lies in one of the folders ("work" holds "work/a.md", not "workshop/b.md")."""
    return any(not p or path == p or path.startswith(p + "/") for p in prefixes)


def _mask(index, folders, include_private) -> np.ndarray | None:
    """Boolean [n_chunks] of searchable chunks, None when nothing is filtered."""
    if isinstance(folders, str):
        folders = [folders]
    if not folders and include_private:
        return None
    prefixes = sorted({_folder(f) for f in folders or [""]})
    key = (tuple(prefixes), bool(include_private))
    masks = index.cache.setdefault("retrieve_masks", {})
    if key not in masks:
        meta = _meta(index)
        keep = np.array([_under(p, prefixes) for p in meta["paths"]], dtype=bool)
        mask = keep[meta["col"]]
        if not include_private:
            mask &= ~meta["private"]
        masks[key] = mask
    if not masks[key].any():
        raise ValueError(f"no chunks left after filters folders={prefixes} "
                         f"include_private={include_private}: check the folder names")
    return masks[key]


# ---------------------------------------------------------------------- rankings


def dense_ranking(index, qvec, n: int, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """Top n chunk ids by cosine (one matmul), with their scores; mask restricts ids."""
    scores = _matrix(index) @ qvec  # [n_chunks] float32
    if mask is None:
        ids = top_k(scores, n)
    else:
        allowed = np.flatnonzero(mask)
        ids = allowed[top_k(scores[allowed], n)]
    return ids, scores[ids].astype(np.float64)


def bm25_ranking(index, query: str, n: int, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """Top n chunk ids by BM25 among chunks sharing a term with the query, with scores."""
    ids, scores = _bm25_scores(load_bm25(index), query)
    if mask is not None:
        keep = mask[ids]
        ids, scores = ids[keep], scores[keep]
    pos = top_k(scores, n)
    return ids[pos], scores[pos]


def closest_chunk(index, qvec, chunk_ids) -> int:
    """The id among chunk_ids whose vector is closest to qvec (ties: lower id)."""
    ids = np.asarray(chunk_ids, dtype=np.int64).reshape(-1)
    if ids.size > 1 and not (ids[1:] > ids[:-1]).all():
        ids = np.sort(ids)                          # ascending: argmax ties -> lower id
        ids = ids[np.r_[True, ids[1:] != ids[:-1]]]   # (np.unique would import numpy.ma)
    if ids.size == 0:
        raise ValueError("closest_chunk needs at least one chunk id")
    return int(ids[int(np.argmax(_matrix(index)[ids] @ qvec))])


def _check_query(index, qvec, method, k, expand_links):
    if not len(index.chunks):
        raise ValueError("the index is empty (no chunks): add markdown notes to the vault "
                         "and run `python ingest.py VAULT --rebuild`")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if qvec is None and (method != "bm25" or expand_links):
        raise ValueError(f"method {method!r} (or link expansion) needs a query vector")
    if qvec is None:
        return None
    qvec = np.asarray(qvec, dtype=np.float32).reshape(-1)
    if qvec.shape[0] != index.vectors.shape[1]:
        raise ValueError(f"query vector has dim {qvec.shape[0]} but the index has "
                         f"{index.vectors.shape[1]}: embed with the index's embedder "
                         "or rebuild with `python ingest.py VAULT --rebuild`")
    return qvec


# ------------------------------------------------------------------------- search


def _ranks(lists: dict) -> dict:
    """{"dense"|"bm25": {chunk id: (rank, score)}} for the trace."""
    return {name: {int(i): (r, float(s)) for r, (i, s) in enumerate(zip(ids, sc), 1)}
            for name, (ids, sc) in lists.items()}


def _candidate(index, cid: int, fused: float, ranks: dict, **extra) -> Candidate:
    dense = ranks.get("dense", {}).get(cid, (None, None))
    bm25 = ranks.get("bm25", {}).get(cid, (None, None))
    return Candidate(index.chunks[cid], dense_rank=dense[0], dense_score=dense[1],
                     bm25_rank=bm25[0], bm25_score=bm25[1], fused=fused, **extra)


def search(index, query: str, qvec, k: int = DEFAULT_K, method: str = "hybrid",
           folders=None, include_private: bool = True,
           expand_links: bool = True) -> list[Candidate]:
    """Top k fused candidates for the question, then up to LINK_MAX link neighbours.

    method: "hybrid" (dense + BM25, RRF), "bm25" or "dense" (one ranking, same RRF
    scale). folders: vault-relative folder prefixes to search within.
    include_private=False leaves out chunks of private folders.
    """
    qvec = _check_query(index, qvec, method, k, expand_links)
    mask = _mask(index, folders, include_private)
    depth = max(3 * k, FUSE_DEPTH_MIN)
    lists = {}
    if method != "bm25":
        lists["dense"] = dense_ranking(index, qvec, depth, mask)
    if method != "dense":
        lists["bm25"] = bm25_ranking(index, query, depth, mask)
    return _fuse(index, lists, qvec, k, mask, expand_links)


def _fuse(index, lists: dict, qvec, k: int, mask=None,
          expand_links: bool = True) -> list[Candidate]:
    """RRF of the rankings {"dense"|"bm25": (ids, scores)}, top k as Candidates, then
    the link neighbours."""
    ranks = _ranks(lists)
    fused = rrf([ids for ids, _ in lists.values()])[:k]
    cands = [_candidate(index, cid, score, ranks) for cid, score in fused]
    if expand_links and cands:
        cands += _link_candidates(index, cands, qvec, mask, ranks)
    return cands


# ------------------------------------------------------------------ link expansion


def _backlinks(index) -> dict[str, list[str]]:
    """Resolved link target -> notes linking to it (sorted), cached on the index."""
    back = index.cache.get("backlinks")
    if back is None:
        back = index.cache["backlinks"] = _Sorted(_linkers(index))
    return back


def _linkers(index, want: set | None = None) -> dict[str, set]:
    """Resolved link target -> the set of notes linking to it (not itself), for every
    target or, with want, for those targets alone (notes linking to none are skipped)."""
    found: dict[str, set] = {}
    keep = index.by_path if want is None else {t for t in want if t in index.by_path}
    for f in index.files:
        links = f.get("links")
        if links and (want is None or not keep.isdisjoint(links)):
            here = f["path"]
            for target in links:
                if target != here and target in keep:
                    s = found.get(target)
                    if s is None:
                        found[target] = {here}
                    else:
                        s.add(here)
    return found


class _Sorted(dict):
    """key -> a set, handed out sorted (a list) the first time it is asked: a question
    reads the backlinks of a few seeds, so the rest are never sorted."""

    def get(self, key, default=None):
        s = dict.get(self, key)
        if s is None:
            return default
        if isinstance(s, set):
            s = sorted(s)
            dict.__setitem__(self, key, s)
        return s

    def __getitem__(self, key):
        s = self.get(key, self)
        if s is self:
            raise KeyError(key)
        return s


def _canonical(index, path: str) -> str | None:
    """A resolved note path, with an exact duplicate mapped to its original."""
    f = index.by_path.get(path)
    if f is None:
        return None  # an unresolved [[raw name]]
    dup = f.get("duplicate_of")
    return dup if dup and dup in index.by_path else path


def _seed_backlinks(index, seeds: list[str]) -> dict[str, list[str]]:
    """seed -> notes linking to it (sorted), for a few seeds: one walk that skips every
    note linking to none of them (a third of the time of the whole map)."""
    found = _linkers(index, set(seeds))
    return {s: sorted(found.get(s, ())) for s in seeds}


def _neighbours(index, seeds: list[str]) -> list[tuple[str, str]]:
    """(neighbour path, seed path) one hop from the seeds: links, then backlinks. A
    process's first question finds the seeds' backlinks alone; from its second on, the
    whole map is made once and kept (a long-running process asks again and again)."""
    if "backlinks" in index.cache or index.cache.get("backlinks_asked"):
        back = _backlinks(index)
    else:
        index.cache["backlinks_asked"] = True
        back = _seed_backlinks(index, seeds)
    out = []
    for seed in seeds:
        linked = list((index.by_path.get(seed) or {}).get("links") or [])
        for target in linked + back.get(seed, []):
            target = _canonical(index, target)
            if target is not None and target != seed:
                out.append((target, seed))
    return out


def _link_candidates(index, cands, qvec, mask, ranks) -> list[Candidate]:
    """For linked notes of the best LINK_SEEDS notes not yet represented, their chunk
    closest to the query; the LINK_MAX closest of those (ties: discovery order)."""
    seeds = list(dict.fromkeys(c.path for c in cands))[:LINK_SEEDS]
    seen = {c.path for c in cands}
    ids_of = chunk_ids_by_path(index)
    pool = []
    for target, seed in _neighbours(index, seeds):
        if target in seen:
            continue
        seen.add(target)
        ids = ids_of.get(target)
        if ids is not None and mask is not None:
            ids = ids[mask[ids]]
        if ids is None or ids.size == 0:
            continue
        cid = closest_chunk(index, qvec, ids)
        pool.append((-float(_matrix(index)[cid] @ qvec), len(pool), cid, seed))
    out = []
    for neg_score, _, cid, seed in sorted(pool)[:LINK_MAX]:
        fused = sum(1.0 / (RRF_K + r[cid][0]) for r in ranks.values() if cid in r)
        cand = _candidate(index, cid, fused, ranks, via=seed, added_by="link")
        cand.dense_score = -neg_score
        out.append(cand)
    return out
