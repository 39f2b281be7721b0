"""bm25: Okapi BM25 over the index's segments, their postings kept on disk.

In:  chunk records (heading, file stem, text), the index's segments and tombstones.
Out: per segment a part (terms, CSC-style postings: per term a run of (row, term
     frequency), document lengths), built once and saved beside the segment
     (s<N>.bm25.json, s<N>.bm25-*.npy, through store.write_atomic), the document
     frequencies of its tombstoned rows (s<N>.bm25-dead.json, extended per ingest);
     load_bm25(index) combines the live parts; scores(bm, query) ranks them.
Not: fusing with the dense ranking or choosing candidates (retrieve.py).

A query weighs its terms' postings from the global document frequencies and average
length of the live chunks, then one bincount scatter-add.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from collections import Counter
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

import numpy as np

from verso import store
from verso import textkit
from verso import timewords

K1 = 1.5                 # BM25 term-frequency saturation
B = 0.75                 # BM25 length normalisation
BM25_FORMAT = 3          # 3: per segment, tf and lengths (weights from global statistics)
BM25_META = "bm25.json"  # s<N>.bm25.json: terms; s<N>.bm25-<array>.npy: the arrays
BM25_SAVED = ("indptr", "docs", "tf", "lens")
BM25_DEAD = "bm25-dead.json"   # s<N>.bm25-dead.json: document frequencies of its tombstones
SPARSE_RATIO = 8         # postings < n_docs / SPARSE_RATIO: sum via np.unique, not n-long
RETOKENIZE_SHARE = 0.05  # tombstoned rows up to this share are tokenized again for df
SATURATE_AFTER = 2       # the query of a process at which every posting's tf part is kept
STEM_MEMO_MAX = 200_000  # file stems remembered by chunk_text
_STEMS: dict[str, str] = {}


def chunk_text(chunk: dict) -> str:
    path = chunk["path"]
    stem = _STEMS.get(path)
    if stem is None:
        if len(_STEMS) > STEM_MEMO_MAX:
            _STEMS.clear()
        stem = _STEMS[path] = PurePosixPath(path).stem
    text = chunk.get("text") or ""
    if " [" in text:                  # the days timewords added are shown, not searched
        text = timewords.as_written(text)
    return f"{chunk.get('heading') or ''} {stem} {text}"


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
    return _combine([_part([chunk_text(c) for c in chunks])], [None])


def scores(bm: dict, query: str) -> tuple[np.ndarray, np.ndarray]:
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
        part = _part([chunk_text({"path": p, "heading": seg.heading[r], "text": seg.text(r)})
                      for r, p in enumerate(seg.row_paths())])
        try:
            _save_part(Path(index.dir), seg.name, sha, part)
        except OSError:
            pass
    return part


def save_postings(index_dir, min_rows: int) -> int:
    """Tokenize and save now the postings of each segment of min_rows rows or more that
    has none yet (a full build or a merge: else its first question pays for it, seconds
    at 100k chunks); the rows tokenized. Small segments are left to their first question."""
    folder = Path(index_dir)
    manifest = json.loads((folder / "manifest.json").read_bytes())
    todo = [s["name"] for s in manifest["segments"] if s["rows"] >= min_rows
            and not (folder / f"{s['name']}.{BM25_META}").exists()]
    if not todo:
        return 0
    from verso import store_load
    index = store_load.load_index(folder)
    done = 0
    for s, seg in enumerate(index.segments):
        if seg.name in todo:
            _segment_part(index, s, seg)
            done += len(seg.rows)
    return done


def _dead_texts(seg, dead: list[int]) -> list[str]:
    """The BM25 texts of a segment's rows `dead` (ascending)."""
    starts = np.array([start for _, start, _ in seg.files] or [0])
    note = np.searchsorted(starts, dead, "right") - 1            # the note of each row
    return [chunk_text({"path": seg.files[j][0], "heading": seg.heading[r],
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
