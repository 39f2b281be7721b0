"""retrieve: candidates for a question, dense + BM25 fused by reciprocal rank.

Stage: retrieve (after route, before version).
In:  an Index (see ../contract.md: chunks, vectors, files, by_path, cache), the question
     text and its query vector (float32 [dim], L2-normalised, from the index's embedder).
Out: list[Candidate], best first: the top k of the fused ranking, each with its dense
     rank/score, BM25 rank/score and RRF score, then up to LINK_MAX chunks pulled in one
     hop along wikilinks and backlinks (added_by="link", via=the seed note).
     A question about a period ("what happened on 5 January", "my notes from March",
     asof.period) searches only the chunks dated in it: a log entry or note dated in
     the period, or a passage stating a day in it ("yesterday [2026-01-06]",
     "2026-01-06"), whatever form the question wrote the date in; every note (and log
     entry) of the period missing from the top k is added by its closest chunk
     (added_by="period", at most PERIOD_MAX_NOTES), and no link is followed out of it.
     The period counts from the as-of date when one is given, else from the day of the
     vault's newest real-dated note. A question after the last or first time ("when
     did I last ...") gets up to MENTIONS_ADD more of its BM25 hits, the latest
     (earliest) mentions (added_by="mention"). BM25 also looks for the other forms of
     the question's verbs ("buy": bought; wordforms.py).
Not: time modes or version filtering (version.py), relevance judgments (rerank.py),
     embedding the query (models.py, by the caller), reading or writing the index
     (store_load.py, store.py), BM25 itself (bm25.py: its postings per segment on disk).

Dense: one float32 matmul `vectors @ qvec` per segment. BM25 Okapi over
textkit.terms(heading + file stem + text) (bm25.py). Top-k everywhere by argpartition
with ties broken by the lower chunk id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from verso import asof
from verso import bm25
from verso import dating
from verso import file_columns
from verso import store_load
from verso import textkit
from verso import wordforms

RRF_K = 60               # reciprocal rank fusion: 1 / (RRF_K + rank), rank 1-based
DEFAULT_K = 20           # fused candidates returned (before link expansion)
FUSE_DEPTH_MIN = 50      # each ranking contributes its top max(3k, FUSE_DEPTH_MIN)
LINK_SEEDS = 5           # distinct notes whose links and backlinks are followed
LINK_MAX = 5             # extra candidates link expansion may add
PERIOD_MAX_NOTES = 20    # notes and log entries of a period added beside the top k
MENTIONS_ADD = LINK_MAX  # "the last time": mentions added beside the top k, as links are
METHODS = ("hybrid", "bm25", "dense")
UNDATED = "undated"      # Candidate.date of a note dated by its file's mtime alone


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
    why: str | None = None            # why superseded_by: a newer version, entry or statement
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
        return UNDATED if weak else (self.chunk.get("date") or UNDATED)

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


def rrf(rankings: list, rrf_k: int = RRF_K, weights=None) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of id rankings (best first), each counted at its weight
    (default 1): [(id, fused)], fused desc, id asc."""
    fused: dict[int, float] = {}
    for n, ranking in enumerate(rankings):
        w = 1.0 if weights is None else weights[n]
        for rank, cid in enumerate(ranking, 1):
            fused[int(cid)] = fused.get(int(cid), 0.0) + w / (rrf_k + rank)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


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
            private = np.array([bool(x) for x in file_columns.column(files, "private")],
                               dtype=bool)[file_of]
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
    paths = file_columns.column(files, "path")
    return [paths[j] for j in file_of[first].tolist()], first


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


def bm25_scores(index, query: str) -> tuple[np.ndarray, np.ndarray]:
    """(chunk ids ascending, BM25 scores) of every chunk sharing a term with the query,
    searched with the other forms of its verbs the vault holds ("buy" finds "bought":
    wordforms.py); the last query's kept on the index (the evidence reads them again)."""
    memo = index.cache.get("bm25_last")
    if memo is not None and memo[0] == query:
        return memo[1], memo[2]
    bm = bm25.load_bm25(index)
    ids, scores = bm25.scores(bm, query + verb_forms(query, bm["vocab"]))
    index.cache["bm25_last"] = (query, ids, scores)
    return ids, scores


def bm25_ranking(index, query: str, n: int, mask=None) -> tuple[np.ndarray, np.ndarray]:
    """Top n chunk ids by BM25 among chunks sharing a term with the query, with scores
    (bm25_scores)."""
    ids, scores = bm25_scores(index, query)
    if mask is not None:
        keep = mask[ids]
        ids, scores = ids[keep], scores[keep]
    pos = top_k(scores, n)
    return ids[pos], scores[pos]


def verb_forms(query: str, vocab) -> str:
    """" " and the other forms of the query's words that vocab holds and the query does
    not, once each; "" when there are none."""
    asked = textkit.terms(query)
    have = set(asked)
    extra = [f for t in dict.fromkeys(asked) for f in sorted(wordforms.related(t))
             if f not in have and f in vocab]
    return " " + " ".join(dict.fromkeys(extra)) if extra else ""


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
                         "and run `verso ingest VAULT --rebuild`")
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
                         "or rebuild with `verso ingest VAULT --rebuild`")
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
           expand_links: bool = True, today: str | None = None,
           also=()) -> list[Candidate]:
    """Top k fused candidates for the question, then up to LINK_MAX link neighbours.

    method: "hybrid" (dense + BM25, RRF), "bm25" or "dense" (one ranking, same RRF
    scale). folders: vault-relative folder prefixes to search within.
    include_private=False leaves out chunks of private folders. today: the day a period
    the question names in relative words counts from (an as-of date); default the day
    of the vault's newest real-dated note. also: other wordings of the question
    [(text, vector)] (searchwords.find), each ranked as the question is and fused at
    1 / len(also) of its weight: together they count as much as the question (not for
    a question about a period: its notes are every note of the period).
    """
    qvec = _check_query(index, qvec, method, k, expand_links)
    mask = _mask(index, folders, include_private)
    today = today or vault_today(index)
    order = getattr(index, "date_order", "ymd")     # the vault's digit dates (store_load)
    span = asof.period(query, today, order)
    if span:
        inside = _period_mask(index, span["start"], span["end"])
        mask = inside if mask is None else mask & inside
        if not mask.any():
            return []                  # nothing was written in the period: no evidence
        also = ()                      # the period decides what is searched
    depth = max(3 * k, FUSE_DEPTH_MIN)
    lists = {}
    if method != "bm25":
        lists["dense"] = dense_ranking(index, qvec, depth, mask)
    if method != "dense":
        lists["bm25"] = bm25_ranking(index, query, depth, mask)
    others = []                         # the other wordings, ranked the same ways
    for text, vec in also:
        if method != "bm25":
            vec = _check_query(index, vec, method, k, expand_links)
            others.append(dense_ranking(index, vec, depth, mask))
        if method != "dense":
            others.append(bm25_ranking(index, text, depth, mask))
    cands = _fuse(index, lists, qvec, k, mask, expand_links and not span, others,
                  1.0 / max(len(also), 1))
    if span:
        return cands + _period_notes(index, cands, qvec, mask)
    if asof.ordinal(query):
        return cands + _mentions(index, query, mask, cands, today, lists.get("bm25"), order)
    return cands


# ------------------------------------------------------------ periods and mentions


def _mentions(index, query: str, mask, cands, today, ranked=None,
              date_order: str = "ymd") -> list[Candidate]:
    """"When did I last ...", "the first time I ...": up to MENTIONS_ADD chunks among
    the question's top FUSE_DEPTH_MIN BM25 hits that no candidate is, the best mentions
    first (asof.mention_ranker: the sentence naming the most of its words, then the
    latest day for "last", the earliest for "first"); dated mentions only. ranked: the
    BM25 ranking search already made (at least that deep), else it is made here."""
    ids = (ranked if ranked is not None else
           bm25_ranking(index, query, FUSE_DEPTH_MIN, mask))[0][:FUSE_DEPTH_MIN]
    have, rank, found = {c.id for c in cands}, asof.mention_ranker(query, today,
                                                                   date_order), []
    for cid in ids.tolist():
        if cid in have:
            continue
        c = Candidate(index.chunks[cid], added_by="mention")
        key = rank(c.chunk.get("text", ""), None if c.date == UNDATED else c.date)
        if key:
            found.append((key, -cid, c))
    found.sort(key=lambda f: f[:2], reverse=True)
    return [f[2] for f in found[:MENTIONS_ADD]]


def real_dates(index) -> list[str]:
    """The dates of the vault's notes that are not a file's mtime alone (cached)."""
    if "dates" not in index.cache:
        index.cache["dates"] = [d for d, src in zip(file_columns.column(index.files, "date"),
                                                    file_columns.column(index.files, "date_source"))
                                if d and src != dating.WEAK_SOURCE]
    return index.cache["dates"]


def vault_today(index) -> str | None:
    """The day of the vault's newest real-dated note: the "today" a question's relative
    words ("last week") count from, the same in every run over the same notes."""
    return max(real_dates(index), default=None)


def _period_mask(index, start: str, end: str) -> np.ndarray:
    """Boolean [n_chunks]: the chunk is dated start..end (its log entry's date, else its
    note's real date) or states a day in it (asof.touches)."""
    cache = index.cache.get("retrieve_stated")
    if cache is None:
        chunks = index.chunks
        own = [None if src == dating.WEAK_SOURCE else d for d, src in zip(
            store_load.chunk_column(chunks, "date"),
            store_load.chunk_column(chunks, "date_source"))]
        said = [asof.stated(t) for t in store_load.chunk_column(chunks, "text")]
        cache = index.cache["retrieve_stated"] = (own, said)
    own, said = cache
    return np.array([bool(d and start <= d <= end) or asof.touches(s, start, end)
                     for d, s in zip(own, said)], dtype=bool)


def _period_notes(index, cands, qvec, mask) -> list[Candidate]:
    """The closest chunk of each note or log entry of the period that no candidate
    comes from, most like the question first (at most PERIOD_MAX_NOTES)."""
    have = {(c.path, c.chunk.get("section_date")) for c in cands}
    groups: dict[tuple, list[int]] = {}
    for cid in np.flatnonzero(mask).tolist():
        chunk = index.chunks[cid]
        key = (chunk["path"], chunk.get("section_date"))
        if key not in have:
            groups.setdefault(key, []).append(cid)
    best = [closest_chunk(index, qvec, ids) for ids in groups.values()]
    scores = _matrix(index)[best] @ qvec if best else np.zeros(0)
    order = sorted(range(len(best)), key=lambda j: (-float(scores[j]), best[j]))
    return [Candidate(index.chunks[best[j]], dense_score=float(scores[j]), added_by="period")
            for j in order[:PERIOD_MAX_NOTES]]


def _fuse(index, lists: dict, qvec, k: int, mask=None, expand_links: bool = True,
          others=(), weight: float = 1.0) -> list[Candidate]:
    """RRF of the rankings {"dense"|"bm25": (ids, scores)} and the `others` (other
    wordings' (ids, scores), each at `weight`), top k as Candidates, then the link
    neighbours."""
    ranks = _ranks(lists)
    rankings = [ids for ids, _ in lists.values()] + [ids for ids, _ in others]
    fused = rrf(rankings, weights=[1.0] * len(lists) + [weight] * len(others))[:k]
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
    for here, links in zip(file_columns.column(index.files, "path"),
                           file_columns.column(index.files, "links")):
        if links and (want is None or not keep.isdisjoint(links)):
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
