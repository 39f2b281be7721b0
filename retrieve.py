"""retrieve: candidates for a question, dense + BM25 fused by reciprocal rank.

Stage: retrieve (after route, before version).
In:  an Index (see ../contract.md: chunks, vectors, files, by_path, cache), the question
     text and its query vector (float32 [dim], L2-normalised, from the index's embedder).
Out: list[Candidate], best first: the top k of the fused ranking, each with its dense
     rank/score, BM25 rank/score and RRF score, then up to LINK_MAX chunks pulled in one
     hop along wikilinks and backlinks (added_by="link", via=the seed note).
Not: time modes or version filtering (version.py), relevance judgments (rerank.py),
     embedding the query (models.py), reading or writing the index itself (ingest.py).
     The only file I/O is the BM25 cache (bm25.npz + bm25_vocab.json in the index dir).

Dense: one float32 matmul `vectors @ qvec`. BM25 Okapi over
models.terms(heading + file stem + text), stored CSC-style: per term a run of
(doc id, precomputed BM25 weight) so a query is one bincount scatter-add.
Top-k everywhere by argpartition with ties broken by the lower chunk id.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np

import models

K1 = 1.5                 # BM25 term-frequency saturation
B = 0.75                 # BM25 length normalisation
RRF_K = 60               # reciprocal rank fusion: 1 / (RRF_K + rank), rank 1-based
DEFAULT_K = 20           # fused candidates returned (before link expansion)
FUSE_DEPTH_MIN = 50      # each ranking contributes its top max(3k, FUSE_DEPTH_MIN)
LINK_SEEDS = 5           # distinct notes whose links and backlinks are followed
LINK_MAX = 5             # extra candidates link expansion may add
METHODS = ("hybrid", "bm25", "dense")
BM25_FORMAT = 2          # 2: term frequencies, lengths and chunk keys kept (update_bm25)
BM25_ARRAYS = "bm25.npz"
BM25_VOCAB = "bm25_vocab.json"
BM25_SAVED = ("indptr", "docs", "weights", "idf", "tf", "lens", "keys")
SPARSE_RATIO = 8         # postings < n_docs / SPARSE_RATIO: sum via np.unique, not n-long
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


def _chunk_keys(texts: list[str]) -> np.ndarray:
    """uint64 [n]: blake2b of each BM25 text; equal keys, equal postings."""
    return np.frombuffer(b"".join(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest()
                                  for t in texts), dtype=np.uint64)


def _postings(texts: list[str], vocab: dict, doc_ids: np.ndarray, n: int):
    """(keys, tf, lens) of texts placed at doc_ids among n docs: keys = term * n + doc,
    ascending, one per (term, doc) with its term frequency. Terms new to vocab join it
    in alphabetical order (a deterministic numbering; scores never depend on it)."""
    ids, lens, names = models.term_occurrences(texts)
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


def _assemble(keys, tf, lens, vocab: dict, chunk_keys) -> dict:
    """The BM25 arrays from sorted (term * n + doc) keys, their tf and the doc lengths;
    terms left without postings (an incremental update) leave the vocabulary."""
    n = len(lens)
    term = keys // max(n, 1)
    doc = np.remainder(keys, max(n, 1), out=keys)   # keys are ours: reused for doc
    df = np.bincount(term, minlength=len(vocab))
    if not df.all():
        keep = df > 0
        remap = np.cumsum(keep) - 1
        term, df = remap[term], df[keep]
        vocab = {t: int(remap[c]) for t, c in vocab.items() if keep[c]}
    df = df.astype(np.float64)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    avgdl = float(lens.mean()) if n and lens.sum() else 1.0
    # idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len / avgdl)), the same float64
    # operations per posting as one expression, with fewer postings-long temporaries
    weights = idf[term]
    weights *= tf
    weights *= K1 + 1.0
    denom = (K1 * (1.0 - B + B * lens / avgdl))[doc]
    denom += tf
    weights /= denom
    indptr = np.zeros(len(vocab) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum(df.astype(np.int64))
    return {"indptr": indptr, "docs": doc.astype(np.int32),
            "weights": weights.astype(np.float32), "idf": idf.astype(np.float32),
            "tf": tf.astype(np.int32, copy=False), "lens": lens.astype(np.int64),
            "keys": np.asarray(chunk_keys, dtype=np.uint64),
            "vocab": vocab, "n_docs": n, "avgdl": avgdl}


def build_bm25(chunks: list[dict]) -> dict:
    """Okapi BM25 postings: CSC arrays, column = term, weights precomputed per (term, doc).

    Returns {"indptr" int64 [V+1], "docs" int32 [P], "weights" float32 [P],
    "idf" float32 [V], "tf" int32 [P], "lens" int64 [n], "keys" uint64 [n] (chunk text
    digests, for update_bm25), "vocab" {term: column}, "n_docs", "avgdl"}; the postings
    of term column j are docs[indptr[j]:indptr[j+1]] (ascending doc ids).
    """
    texts = [_bm25_text(c) for c in chunks]
    vocab: dict[str, int] = {}
    keys, tf, lens = _postings(texts, vocab, np.arange(len(texts)), len(texts))
    return _assemble(keys, tf, lens, vocab, _chunk_keys(texts))


def _match_keys(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """int64 [len(old)]: the new doc with the same key, else -1; the i-th copy of a key
    among the new docs takes the i-th among the old ones."""
    o2n = np.full(len(old), -1, dtype=np.int64)
    if not (len(old) and len(new)):
        return o2n
    by_key = np.argsort(old, kind="stable")
    sorted_old = old[by_key]
    left = np.searchsorted(sorted_old, new, "left")
    right = np.searchsorted(sorted_old, new, "right")
    order = np.argsort(new, kind="stable")
    run = np.flatnonzero(np.r_[True, new[order][1:] != new[order][:-1]])
    rank = np.empty(len(new), dtype=np.int64)
    rank[order] = np.arange(len(new)) - np.repeat(run, np.diff(np.r_[run, len(new)]))
    ok = np.flatnonzero(left + rank < right)
    o2n[by_key[left[ok] + rank[ok]]] = ok
    return o2n


def update_bm25(prev: dict, chunks: list[dict]) -> dict:
    """build_bm25(chunks), reusing prev's postings for every chunk whose BM25 text is
    unchanged (by key): only new or edited chunks are tokenized. Same weights and
    scores as a full build; term columns may be numbered differently."""
    texts = [_bm25_text(c) for c in chunks]
    n, ck = len(texts), _chunk_keys(texts)
    o2n = _match_keys(prev["keys"], ck)             # old doc -> the new doc reusing it
    reused = o2n[o2n >= 0]
    fresh = np.ones(n, dtype=bool)
    fresh[reused] = False
    todo = np.flatnonzero(fresh)                    # new or edited: tokenized now
    vocab = dict(prev["vocab"])
    kept = np.repeat(np.arange(len(prev["indptr"]) - 1), np.diff(prev["indptr"]))
    kept *= max(n, 1)                               # old term * n + new doc, in place
    new_doc = o2n[prev["docs"]]
    kept += new_doc
    keep = new_doc >= 0
    del new_doc
    kept, kept_tf = kept[keep], prev["tf"][keep]
    add, add_tf, add_lens = _postings([texts[i] for i in todo], vocab, todo, n)
    lens = np.zeros(n, dtype=np.int64)
    lens[reused] = prev["lens"][o2n >= 0]
    lens[todo] = add_lens
    if kept.size < 2 or np.all(kept[1:] > kept[:-1]):   # chunk order kept: one merge
        at = np.searchsorted(kept, add)
        keys, tf = np.insert(kept, at, add), np.insert(kept_tf, at, add_tf)
    else:
        order = np.argsort(np.r_[kept, add], kind="stable")
        keys, tf = np.r_[kept, add][order], np.r_[kept_tf, add_tf][order]
    return _assemble(keys, tf, lens, vocab, ck)


def _bm25_scores(bm: dict, query: str) -> tuple[np.ndarray, np.ndarray]:
    """(matched doc ids ascending, BM25 scores float64); a repeated query term counts
    twice, as in the Okapi sum over query terms."""
    vocab = bm["vocab"]
    found = Counter(t for t in models.terms(query) if t in vocab)
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    # summed in term order, so the scores do not depend on how columns are numbered
    ucols = [vocab[t] for t in sorted(found)]
    counts = [found[t] for t in sorted(found)]
    indptr, docs, weights = bm["indptr"], bm["docs"], bm["weights"]
    d = np.concatenate([docs[indptr[c]:indptr[c + 1]] for c in ucols])
    w = np.concatenate([weights[indptr[c]:indptr[c + 1]].astype(np.float64) * m
                        for c, m in zip(ucols, counts)])
    if d.size * SPARSE_RATIO < bm["n_docs"]:
        ids, inverse = np.unique(d, return_inverse=True)
        return ids.astype(np.int64), np.bincount(inverse, weights=w)
    full = np.bincount(d, weights=w, minlength=bm["n_docs"])
    ids = np.flatnonzero(full)
    return ids, full[ids]


# ----------------------------------------------------------------- BM25 cache on disk


def _read_bm25(folder: Path, key: str, n: int) -> tuple[dict | None, dict | None]:
    """(the cached arrays if they match this index (format, key, constants), else None;
    the cached arrays of an older index of this dir when readable, for update_bm25)."""
    try:
        meta = json.loads((folder / BM25_VOCAB).read_text(encoding="utf-8"))
        with np.load(folder / BM25_ARRAYS, allow_pickle=False) as z:
            arrays = {name: z[name] for name in BM25_SAVED + ("key",)}
        stored = str(arrays.pop("key"))
        usable = (meta["format"] == BM25_FORMAT and meta["k1"] == K1 and meta["b"] == B
                  and len(arrays["indptr"]) == len(meta["terms"]) + 1
                  and arrays["indptr"][-1] == len(arrays["docs"]) == len(arrays["tf"])
                  and len(arrays["keys"]) == len(arrays["lens"]) == meta["n_docs"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, None  # missing or damaged: rebuilt and rewritten by the caller
    if not usable:
        return None, None
    bm = {**arrays, "lens": arrays["lens"].astype(np.int64),
          "vocab": {t: i for i, t in enumerate(meta["terms"])},
          "n_docs": meta["n_docs"], "avgdl": meta["avgdl"]}
    fresh = meta["chunks_sha"] == key and stored == key and meta["n_docs"] == n
    return (bm, None) if fresh else (None, bm)


def _write_atomic(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _save_bm25(folder: Path, key: str, bm: dict) -> None:
    terms = sorted(bm["vocab"], key=bm["vocab"].get)
    meta = {"format": BM25_FORMAT, "chunks_sha": key, "k1": K1, "b": B,
            "n_docs": bm["n_docs"], "avgdl": bm["avgdl"], "terms": terms}
    arrays = {k: bm[k] for k in BM25_SAVED}
    _write_atomic(folder / BM25_ARRAYS,
                  lambda fh: np.savez(fh, key=np.array(key), **arrays))
    _write_atomic(folder / BM25_VOCAB,
                  lambda fh: fh.write(json.dumps(meta, ensure_ascii=False).encode("utf-8")))


def load_bm25(index) -> dict:
    """BM25 arrays for the index: memory cache, else bm25.npz if it was built from the
    manifest's chunks_sha, else built now (updated from the dir's previous arrays when
    there are any: only changed chunks are tokenized) and saved atomically (memory only
    when the index dir is not writable or the manifest has no chunks_sha)."""
    if "bm25" in index.cache:
        return index.cache["bm25"]
    key = str((getattr(index, "manifest", None) or {}).get("chunks_sha") or "")
    folder = Path(index.dir) if key and getattr(index, "dir", None) else None
    bm, stale = _read_bm25(folder, key, len(index.chunks)) if folder else (None, None)
    if bm is None:
        bm = (update_bm25(stale, index.chunks) if stale is not None
              else build_bm25(index.chunks))
        if folder is not None:
            try:
                _save_bm25(folder, key, bm)
            except OSError:
                pass  # read-only index dir: the in-memory copy serves this process
    index.cache["bm25"] = bm
    return bm


# -------------------------------------------------------------------- per-index maps


def _meta(index) -> dict:
    """Cached per-index arrays: chunk -> path column, private flags, path -> chunk ids."""
    meta = index.cache.get("retrieve_meta")
    if meta is None:
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


def _matrix(index) -> np.ndarray:
    """index.vectors as a plain ndarray view (same memory: no copy, and none of
    np.memmap's per-operation overhead), cached on the index."""
    m = index.cache.get("retrieve_matrix")
    if m is None:
        m = index.cache["retrieve_matrix"] = np.asarray(index.vectors)
    return m


def chunk_ids_by_path(index) -> dict[str, np.ndarray]:
    """Vault-relative path -> its chunk ids (ascending), cached on the index."""
    return _meta(index)["ids"]


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
        ids = np.unique(ids)                        # ascending: argmax ties -> lower id
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
        found: dict[str, set] = {}
        for f in index.files:
            for target in f.get("links") or []:
                if target in index.by_path and target != f["path"]:
                    found.setdefault(target, set()).add(f["path"])
        back = {t: sorted(s) for t, s in found.items()}
        index.cache["backlinks"] = back
    return back


def _canonical(index, path: str) -> str | None:
    """A resolved note path, with an exact duplicate mapped to its original."""
    f = index.by_path.get(path)
    if f is None:
        return None  # an unresolved [[raw name]]
    dup = f.get("duplicate_of")
    return dup if dup and dup in index.by_path else path


def _neighbours(index, seeds: list[str]) -> list[tuple[str, str]]:
    """(neighbour path, seed path) one hop from the seeds: links, then backlinks."""
    back = _backlinks(index)
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
