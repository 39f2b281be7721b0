"""ingest: a vault of notes -> an index (dates, duplicates, version families, chunks, vectors).

In:  a folder of .md/.txt notes and an optional verso.toml (ignore globs, date_order; per
     folder `versioned` and `privacy`, default private).
Out: the index in --index DIR (else home/index in Verso's home), written through store.py:
     the notes read now go into one new segment (segments merged past MERGE_SEGMENTS /
     MERGE_SHARE), the file records as a base or a delta (DELTA_SHARE), the manifest
     last. Notes whose size and mtime match their previous record are not read again and
     keep their rows; when few notes changed (file_records.CHANGES_SHARE) only their records
     and those a rule across notes ties to them are made again, and the delta is the
     previous one with those records changed: the work grows with what changed. The
     run's summary (printed by --json); refresh: the loaded Index.
Not: the walk and the config (vault_walk.py), the file records (file_records.py), dates
     (dating.py), duplicates, families and links (families.py), chunks (chunking.py),
     the files on disk and loading them
     (store.py, store_load.py); BM25 arrays, retrieval or question-time version choices
     (retrieve.py, version.py). Never writes inside the vault.

Rules, decided by code:
- Chunks are embedded as "title\\nheading\\ntext"; the cache key (chunk "hash") is sha256
  of that text plus the embedder id. The builtin IDF is fitted on the first build and on
  --rebuild and reused by incremental runs (rebuild after large changes).

    python ingest.py VAULT [--index DIR] [--config FILE] [--json] [--rebuild] [--quiet]
"""

from __future__ import annotations

# A program: numpy's BLAS on one thread (read when numpy loads; a value the user set
# stands). OpenBLAS starts a thread per core, which costs each process about 0.07 s of
# CPU (and of wall when the other cores are busy), and an ingest has no matrix product
# to share among them. In a checkout (not -m), `verso` is this folder (_checkout).
if __name__ == "__main__":
    import os
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if not __package__:
        import _checkout  # noqa: F401

import argparse
import bisect
import gc
import hashlib
import json
import os
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

import verso
from verso import bm25
from verso import embedder
from verso import file_records
from verso import chunking
from verso import dating
from verso import families
from verso import file_columns
from verso import store
from verso import store_load
from verso import timewords
from verso import vault_walk

MERGE_SEGMENTS = 4                 # more delta segments than this: they are merged into one
MERGE_SHARE = 0.25                 # delta + tombstoned rows above this share of the live
                                   # rows: everything is merged into one segment
POSTINGS_AT_INGEST = 5_000          # a new segment of this many rows gets its BM25 postings
                                   # from `python ingest.py`, not from the first question
DELTA_SHARE = 0.1                  # file records differing from the base above this share
                                   # of all records: a new base is written (else a delta)
EMBED_BATCH = 256
SCRATCH = ("_body", "_norm", "_date_order", "_reused", "_chunks", "_family", "_reread")
                                   # record keys of one run, never written
REUSE_RULES = 8                    # bump when reading/dating/chunking rules change: an
                                   # index made under other rules is not reused per file
REBUILT = ("; rebuilt", "; everything re-embedded")   # a note's end: all made again


# ------------------------------------------------------------------------- vectors

def _models():
    """The models module, imported when first needed (a model backend, or an except
    clause meeting an error): a builtin refresh never needs it, nor the reader modules
    it imports (about 10 ms of a one-note ingest)."""
    from verso import models
    return models


def _previous(index_dir: Path, vault: Path, backend, rebuild: bool, loaded=None):
    """(backend, is builtin, previous Index or None, note). loaded: the index already
    loaded for a builtin backend by _unchanged, so it is not parsed twice."""
    builtin = backend in (None, "builtin") or isinstance(
        getattr(backend, "embedder", None), embedder.BuiltinEmbedder)
    if isinstance(backend, str) and not builtin:
        from verso import backends         # the same: only for a model backend
        backend = backends.load_backend(backend)
    prev, note = None, ""
    if not rebuild and (index_dir / "manifest.json").exists():
        try:
            prev = loaded if loaded is not None and builtin else store_load.load_index(
                index_dir, None if builtin else backend)
        except (store.IndexProblem, _models().BackendError) as e:
            note = _old_format(index_dir) or f"previous index unusable ({e}); rebuilt"
        if prev and prev.manifest.get("vault") != str(vault):
            prev, note = None, "previous index was for another vault; rebuilt"
    return backend, builtin, prev, note


def _old_format(index_dir: Path) -> str:
    """The one line for an index an older Verso wrote (an older format, or another
    builtin embedder's vectors), else ""."""
    try:
        manifest = json.loads((index_dir / "manifest.json").read_bytes())
        old, eid = manifest.get("format"), str(manifest.get("embedder", ""))
    except (OSError, ValueError, AttributeError):
        return ""
    if type(old) is int and old < store.FORMAT:
        return f"index format {old} is older than this Verso's ({store.FORMAT}); rebuilt"
    if embedder.another_builtin(eid):
        return f"the index's vectors are another Verso's builtin embedder's ({eid}); rebuilt"
    return ""


def _embedder_for(backend, builtin: bool, prev, note: str, texts: list[str]):
    """(embedder, previous Index to reuse vectors from or None, note, backend name)."""
    name = "builtin" if builtin else backend.name
    if not builtin:
        emb = backend.embedder
    elif prev and isinstance(prev.embedder, embedder.BuiltinEmbedder):
        emb = prev.embedder            # keep the fitted IDF: unchanged chunks keep their ids
    else:
        emb = embedder.BuiltinEmbedder.fit(texts)
    if prev and prev.embedder.id != emb.id:
        prev, note = None, f"embedder changed to {emb.id}; everything re-embedded"
    return emb, prev, note, name


def kept_config(index_dir: Path, vault: Path) -> str | None:
    """The --config file an index of this vault was built with, for a build that names
    none (harness's refresh, a later ingest): an index keeps its config. A kept file
    that is gone is an error naming the fix."""
    try:
        m = json.loads((index_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None                 # no index yet, or a damaged one: loading says why
    if not isinstance(m, dict) or not m.get("config_given") or m.get("vault") != str(vault):
        return None
    if not Path(m["config"]).is_file():
        raise ValueError(f"the index was built with --config {m['config']}, which is gone: "
                         f"pass --config FILE (VAULT/{vault_walk.CONFIG_NAME} for the "
                         f"vault's own)")
    return m["config"]


def _digest(path) -> str | None:
    """sha256 of a config file's bytes (None without one)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None


def config_of(manifest: dict) -> dict:
    """{"path", "sha256", "given"}: the config an index was built with."""
    return {"path": manifest.get("config"), "sha256": manifest.get("config_sha256"),
            "given": bool(manifest.get("config_given"))}


def _reuse_key(cfg_path, date_order: str = "ymd") -> list:
    """What per-file reuse depends on besides the note itself: the rules, the config
    file (its stat) and the date order notes are read in (the vault's file names may set
    it: vault_walk.settle_date_order). A previous index with another key is not reused
    per file."""
    return [REUSE_RULES, timewords.RULES, vault_walk.MAX_FILE_BYTES, chunking.CHUNK_WORDS,
            chunking.MAX_WORD_CHARS, chunking.OVERLAP, chunking.MIN_CHUNK_WORDS,
            families.SHINGLE, dating.HEADER_LINES,
            str(cfg_path) if cfg_path else None, _stat(Path(cfg_path)) if cfg_path else None,
            date_order]


def _settle_date_order(cfg: dict, paths: list, prev) -> None:
    """cfg's date_order (vault_walk.settle_date_order), the order the file names show
    taken from the previous index when its notes had the same names (an edit leaves the
    names, and so the order, as they were: no scan of every name)."""
    kept = prev.manifest.get("names_order") if prev is not None else None
    if (kept and not cfg["date_order_given"] and len(prev.files) == len(paths)
            and file_columns.column(prev.files, "path") == paths):
        cfg["date_order"] = kept
    else:
        vault_walk.settle_date_order(cfg, paths)


def _old_records(prev, key: list) -> dict:
    """path -> (previous record, its live rows (segment, first row, rows) or None for a
    duplicate) when prev was built under the same reuse key, else {}."""
    if prev is None or prev.manifest.get("reuse") != key:
        return {}
    where = prev.where
    return {f["path"]: (f, where[f["path"]][0] if f["path"] in where else None)
            for f in file_columns.dicts(prev.files)}


def _near_pairs(prev) -> dict:
    """The last run's near-copy results {"a\tb": bool} (the `known` of
    families.mark_duplicates); {} if unreadable."""
    try:
        data = json.loads((prev.dir / prev.manifest["near_file"]).read_bytes())
        return dict(data["pairs"]) if data.get("format") == store.FORMAT else {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _old_rows(prev, keep: dict) -> dict:
    """hash -> (segment, row) of the previous rows of every note not kept in place
    (edited, renamed, deleted): their vectors serve new chunks of the same text."""
    if prev is None:
        return {}
    out = {}
    for path, places in prev.where.items():
        if path not in keep:
            s, start, count = places[0]
            seg = prev.segments[s]
            out.update((seg.digest(r), (seg, r)) for r in range(start, start + count))
    return out


def _same_rows(prev, place, chunks: list[dict]) -> bool:
    """Whether a re-read note's chunks are the rows it already has (a touched note)."""
    seg, start, count = prev.segments[place[0]], place[1], place[2]
    return count == len(chunks) and all(
        (seg.digest(r), seg.heading[r], seg.section_date[r], seg.entry_latest[r],
         seg.text(r)) == (c["hash"], c["heading"], c["section_date"], c["entry_latest"],
                          c["text"]) for r, c in zip(range(start, start + count), chunks))


def _embed(chunks: list[dict], emb, old: dict, progress=None) -> tuple[np.ndarray, int]:
    """float32 [n, dim] rows for the new chunks: old rows by hash, the rest embedded now."""
    vectors = np.zeros((len(chunks), emb.dim), dtype=np.float32)
    todo = []
    for i, c in enumerate(chunks):
        if c["hash"] in old:
            seg, r = old[c["hash"]]
            vectors[i] = seg.vectors[r]
        else:
            todo.append(i)
    for start in range(0, len(todo), EMBED_BATCH):
        if progress:
            progress("embedding", start, len(todo))
        batch = todo[start:start + EMBED_BATCH]
        rows = np.asarray(emb.embed_documents([chunks[i]["_embed"] for i in batch]),
                          dtype=np.float32)
        if rows.shape != (len(batch), emb.dim):
            raise _models().BackendError(f"embedder {emb.id} returned shape {rows.shape}, "
                                         f"expected ({len(batch)}, {emb.dim})")
        vectors[batch] = rows
    return vectors, len(todo)


def _segments_after(prev, live: list[str], keep: dict, new: dict) -> tuple[list, dict, list]:
    """(old segments kept, their tombstones {name: [paths]}, pieces of the one new
    segment in row order). live: the paths with chunks, in path order; keep: path -> old
    rows left in place; new: path -> its new piece (store.new_piece). Deltas are merged
    when they pass a count (MERGE_SEGMENTS), everything into one segment when delta and
    dead rows pass MERGE_SHARE of the live rows."""
    segs = list(prev.segments) if prev is not None else []
    if not segs:
        return [], {}, [new[p] for p in live]
    total = sum(v[2] for v in keep.values()) + sum(len(x.rows) for x in new.values())
    held = [0] * len(segs)                   # rows each segment keeps in place
    for s, _, n in keep.values():
        held[s] += n
    dead_rows = sum(len(seg.rows) - held[s] for s, seg in enumerate(segs))
    delta_rows = sum(len(seg.rows) for seg in segs[1:]) + sum(len(x.rows) for x in new.values())
    if delta_rows + dead_rows > MERGE_SHARE * max(total, 1):
        return [], {}, [new[p] if p in new else store.old_piece(segs[keep[p][0]], p, *keep[p][1:])
                        for p in live]
    stay = range(len(segs))
    if len(segs) - 1 + bool(new) > MERGE_SEGMENTS:        # the deltas into one
        stay = [0]
        new = {p: new[p] if p in new else store.old_piece(segs[keep[p][0]], p, *keep[p][1:])
               for p in live if p in new or keep[p][0] != 0}
    kept, dead, moved = [], {}, [[] for _ in segs]
    for p, places in prev.where.items():     # live before, not kept in place now
        if keep.get(p) != places[0]:
            moved[places[0][0]].append(p)
    for s in stay:
        gone = sorted({*prev.manifest["dead"].get(segs[s].name, ()), *moved[s]})
        if len(gone) < len(segs[s].files):             # a segment left with no note goes
            kept.append(s)
            if gone:
                dead[segs[s].name] = gone
    return kept, dead, [new[p] for p in live if p in new]


def _next_gen(index_dir: Path, prev_manifest: dict | None) -> int:
    """A number no file of the index dir uses yet."""
    used = [int(m.group("n")) for p in index_dir.iterdir()
            if (m := store.INDEX_FILE_RE.match(p.name)) and m.group("n")]
    return max(used + [int((prev_manifest or {}).get("gen") or 0)]) + 1


# --------------------------------------------------------------------------- API

def _backend_name(backend) -> str:
    if backend in (None, "builtin") or isinstance(getattr(backend, "embedder", None),
                                                  embedder.BuiltinEmbedder):
        return "builtin"
    return backend if isinstance(backend, str) else backend.name


def _stat(p) -> list | None:
    """[size, mtime_ns] of a file (symlinks followed), or None if it cannot be stat'ed."""
    try:
        st = os.stat(p)
        return [st.st_size, st.st_mtime_ns]
    except OSError:
        return None


def _stamp(vault: Path, stats: dict, passed_over: list, cfg_path, backend) -> str:
    """What the index was built from, cheaply: every note's size and mtime (stats: path
    -> _stat), what was passed over, the config file and the embedder backend. Equal
    stamps: nothing to do."""
    parts = [store.FORMAT, REUSE_RULES, timewords.RULES, str(vault), _backend_name(backend),
             passed_over,
             [str(cfg_path), _stat(Path(cfg_path))] if cfg_path else None]
    h = hashlib.sha256(json.dumps(parts).encode())
    lines = [f"\0{p}\0[{s[0]}, {s[1]}]" if type(s) is list and len(s) == 2 else
             f"\0{p}\0{s}" for p, s in stats.items()]    # f"\0{p}\0{s}", list repr inline
    h.update("".join(lines).encode("utf-8", "surrogatepass"))
    return h.hexdigest()           # (a path holds no NUL: the join is unambiguous)


def _unchanged(index_dir: Path, vault: Path, stamp: str, backend, current=None,
               brief=False, ahead=None):
    """(summary, index) for an index whose vault has not changed since it was built (and
    which still loads cleanly); (None, the index or None) otherwise: then the full ingest
    runs and repairs or refreshes, reusing what it can of that index. `current`, an
    Index this process loaded from index_dir, stands for it while the index files on
    disk are the ones it was read from (no second parse; its caches stay warm). brief:
    the summary is only {"index"} (refresh reads no more of it); ahead: its files read
    ahead (store_load.Ahead)."""
    if not (index_dir / "manifest.json").exists():
        return None, None
    if (current is not None and current.dir == index_dir
            and current.stat == store_load.index_stat(index_dir)):
        idx = current
    else:
        try:
            idx = store_load.load_index(index_dir, None if _backend_name(backend) == "builtin"
                                        else backend, ahead)
        except (store.IndexProblem, _models().BackendError):
            return None, None
    m = idx.manifest
    if m.get("stamp") != stamp or m.get("vault") != str(vault):
        return None, idx
    if brief:
        return {"index": str(index_dir)}, idx
    counts = m.get("counts", {})
    fams = [fam for fam, dup in zip(file_columns.column(idx.files, "family"),
                                    file_columns.column(idx.files, "duplicate_of")) if not dup]
    return {"files_seen": counts.get("files_seen", len(idx.files)), "indexed": len(fams),
            "duplicates": len(idx.files) - len(fams),
            "families": len(set(fams)), "chunks": len(idx.chunks),
            "embedded": 0, "reused": len(idx.chunks), "files_read": 0,
            "files_reused": len(idx.files), "files_reread": 0,
            "dated": dict(Counter(file_columns.column(idx.files, "date_source"))),
            "skipped": m.get("skipped", []), "seconds": 0.0, "index": str(index_dir),
            "embedder": m["embedder"], "config": config_of(m),
            "note": "nothing changed since the last ingest"}, idx


def _files_and_chunks(vault: Path, paths: list, cfg: dict, progress, stats: dict,
                      prev, key: list, known: dict):
    """(records, skipped, chunks of the notes read now, {files_read, files_reused,
    files_reread}, file_records.Changes or None). With prev built under the same reuse
    key, a refresh that few notes changed gets the records of what changed only
    (file_records.changes); else every note's (reused notes keep their previous rows under
    _chunks). A reused note that changed while this ran: the whole catalogue afresh."""
    ch = None
    try:
        if prev is not None and prev.manifest.get("reuse") == key and len(prev.files):
            ch = file_records.changes(vault, paths, stats, cfg, prev, known)
        if ch is not None:
            recs, skipped = ch.recs, ch.skipped
        else:
            recs, skipped = file_records.catalogue(vault, paths, cfg, progress, stats,
                                                   _old_records(prev, key), known)
    except file_records.Stale:
        known["new"].clear()
        ch = None
        recs, skipped = file_records.catalogue(vault, paths, cfg, progress, known=known)
    reused = (len(paths) - ch.read if ch is not None
              else sum(1 for r in recs if r.get("_reused")))
    counts = {"files_read": len(paths) - reused, "files_reused": reused,
              "files_reread": sum(1 for r in recs if r.get("_reread"))}
    return (recs, skipped, chunking.chunk_all([r for r in recs if "_chunks" not in r]),
            counts, ch)


def _summary(paths, passed_over, files, n_chunks, embedded, skipped, counts) -> dict:
    dup = file_columns.column(files, "duplicate_of")
    live = [f for f, d in zip(file_columns.column(files, "family"), dup) if not d]
    return {"files_seen": len(paths) + len(passed_over), "indexed": len(live),
            "duplicates": len(files) - len(live),
            "families": len(set(live)), "chunks": n_chunks,
            "embedded": embedded, "reused": n_chunks - embedded, **counts,
            "dated": dict(Counter(file_columns.column(files, "date_source"))),
            "skipped": skipped}


def build_index(vault, index_dir=None, config=None, rebuild=False, backend=None,
                progress=None, keep=None) -> dict:
    """Index the vault into index_dir; returns the summary (also printed by --json).
    See _build_now for the arguments."""
    return _build(vault, index_dir, config, rebuild, backend, progress, keep=keep)[0]


def ingest_notes(vault, index=None, config=None, rebuild=False, backend="builtin",
                 progress=None) -> dict:
    """What `verso ingest NOTES` does, for a notebook too (`verso.ingest(NOTES)`): index
    the vault (into the default index, home/index, unless `index` names one), write its
    BM25 postings, and make that index the default of every question. The summary."""
    s = build_index(vault, index or store.home() / store.INDEX_NAME, config, rebuild,
                    backend=backend, progress=progress, keep=_AT_EXIT)
    bm25.save_postings(s["index"], POSTINGS_AT_INGEST)
    store.remember(s["index"])
    return s


def refresh(vault, index_dir=None, config=None, rebuild=False, backend=None,
            current=None, notes=None) -> store_load.Index:
    """The vault's index, brought up to date and loaded (as build_index loaded it to
    find the vault unchanged: not parsed twice). current: the Index a long-running caller
    got last time, returned itself when neither vault nor index changed (_unchanged).
    notes: a list the note goes to when the whole index was made again."""
    summary, idx = _build(vault, index_dir, config, rebuild, backend, None, current, brief=True)
    if notes is not None and summary.get("note", "").endswith(REBUILT):
        notes.append(summary["note"])
    if idx is None:
        idx = store_load.load_index(summary["index"], None if _backend_name(backend) == "builtin"
                                    else backend)
    return idx


_AT_EXIT: list | None = None        # a one-shot CLI process's objects, left to the OS


def keep_until_exit(*objs) -> None:
    """In a one-shot CLI process (run_cli), hold objs until it ends: they are never
    freed object by object (the loaded index: about 30 ms at 100k chunks). Not for a
    long-running caller (the MCP server), which would keep every index it loaded."""
    if _AT_EXIT is not None:
        _AT_EXIT.extend(objs)


def run_cli(main) -> None:
    """`python ingest.py` / `python harness.py`: main() with the cycle collector off
    (it would only walk the index, 0.1 s at 100k chunks), then the process ends without
    tearing its heap down: stdout and stderr flushed, os._exit(main's code); a failed
    flush exits 120, as Python's own shutdown does. An exception, or sys.exit inside
    main (argparse), ends the process the ordinary way."""
    global _AT_EXIT
    gc.disable()
    _AT_EXIT = []
    code = main()
    for out in (sys.stdout, sys.stderr):
        try:
            if out is not None:           # None: the process was started without it
                out.flush()
        except (OSError, ValueError):
            code = 120
    os._exit(code)


def _build(vault, index_dir, config, rebuild, backend, progress, current=None, keep=None,
           brief=False):
    with store_load.bulk():
        return _build_now(vault, index_dir, config, rebuild, backend, progress, current,
                          keep, brief)


def _build_now(vault, index_dir, config, rebuild, backend, progress, current=None,
               keep=None, brief=False):
    """(summary, the loaded Index when nothing changed, else None).
    backend: None/"builtin", a backend name, or a backends.Backend; progress(stage, done,
    total) is called while reading and embedding; keep, a list, gets the previous index
    and the records (held to the end of a one-shot process: see keep_until_exit). Notes
    whose size and mtime match their previous record (same vault, embedder, rules and
    config) are not read again and keep their rows; everything that depends on other
    notes is recomputed for every note."""
    started = time.perf_counter()
    vault = Path(vault).expanduser().resolve()
    if not vault.is_dir():
        raise ValueError(f"vault {vault} is not a folder: pass the folder that holds your notes")
    index_dir = Path(index_dir or store.default_index_dir()).expanduser().resolve()
    if index_dir == vault or vault in index_dir.parents:
        raise ValueError(f"index dir {index_dir} is inside the vault; Verso never writes "
                         f"there: pass --index DIR outside it or set VERSO_HOME")
    given = config is not None
    config = config if given else kept_config(index_dir, vault)
    cfg, cfg_path = vault_walk.load_config(vault, config)
    stats, ahead = {}, None            # the index's big files read while the vault is scanned
    if not rebuild and (current is None or current.dir != index_dir):
        ahead = store_load.Ahead(index_dir)
    paths, passed_over = vault_walk.scan(vault, cfg, stats)
    if not paths:                      # an index of nothing would only fail the question
        raise ValueError(_no_notes(vault, cfg, passed_over))
    stamp = _stamp(vault, stats, passed_over, cfg_path, backend)
    with store.lock(index_dir):
        recovered = store.recover(index_dir)
        same, loaded = (None, None) if rebuild else _unchanged(index_dir, vault, stamp,
                                                               backend, current, brief, ahead)
        if keep is not None:
            keep.append(loaded)
        if same:
            same["seconds"] = round(time.perf_counter() - started, 3)
            return same, loaded
        backend, builtin, prev, note = _previous(index_dir, vault, backend, rebuild, loaded)
        del loaded
        _settle_date_order(cfg, paths, prev)
        key = _reuse_key(cfg_path, cfg["date_order"])
        same_key = prev is not None and prev.manifest.get("reuse") == key and len(prev.files)
        known = {"old": _near_pairs(prev) if same_key else {}, "new": {}}
        recs, skipped, chunks, counts, ch = _files_and_chunks(vault, paths, cfg, progress,
                                                              stats, prev, key, known)
        if ch is None and not recs:    # every note skipped (empty, binary, unreadable)
            raise ValueError(_no_notes(vault, cfg, passed_over + skipped, len(paths)))
        if keep is not None:           # freed by the process's end, not one by one here
            keep += [prev, recs]
        emb, prev, note, name = _embedder_for(backend, builtin, prev, note,
                                              [c["_embed"] for c in chunks])
        if ch is not None and prev is None:    # nothing of the previous index is reused
            known = {"old": {}, "new": {}}
            recs, skipped, chunks, counts, ch = _files_and_chunks(
                vault, paths, cfg, progress, stats, None, key, known)
        note = "; ".join(filter(None, (recovered, note)))
        for c in chunks:
            c["hash"] = hashlib.sha256(f"{c['_embed']}\n{emb.id}".encode()).hexdigest()
        manifest, files, summary = _write_index(index_dir, prev, recs, chunks, emb, progress,
                                                (ch, paths))
        summary = {**_summary(paths, passed_over, files, summary[0], summary[1],
                              passed_over + skipped, counts),
                   "seconds": 0.0, "index": str(index_dir), "embedder": emb.id, "note": note}
        manifest.update({
            "backend": name, "vault": str(vault), "stamp": stamp, "reuse": key,
            "names_order": None if cfg["date_order_given"] else cfg["date_order"],
            "date_order": cfg["date_order"],
            **_config_fields(cfg_path, config), **_counts(summary),
            "projects": _projects(vault, files, cfg["registry"], backend, prev)})
        summary["config"] = config_of(manifest)
        manifest["near_file"] = f"g{manifest['gen']}.near.json"
        store.commit(index_dir, manifest, files, manifest.pop("_pieces"),
                     manifest.pop("_idf"), known["new"])
    summary["seconds"] = round(time.perf_counter() - started, 3)
    return summary, None


def _no_notes(vault: Path, cfg: dict, passed_over: list, found: int = 0) -> str:
    """The one line for a vault with no note to index: which files Verso reads, and
    what it passed over (the first few, with their reasons)."""
    over = "; ".join(f"{x['path']}: {x['reason']}" for x in passed_over[:3])
    over += f" and {len(passed_over) - 3} more" if len(passed_over) > 3 else ""
    if found:
        return f"none of the {found} notes in {vault} could be read ({over})"
    return (f"no notes in {vault}: Verso reads {' and '.join(vault_walk.TEXT_EXTS)} files "
            f"(not in hidden folders or {', '.join(d + '/' for d in vault_walk.SKIP_DIRS)}"
            + (", nor what verso.toml's ignore names" if cfg.get("ignore") else "") + ")"
            + (f"; passed over {over}" if over else "")
            + ": pass the folder that holds your notes")


def _config_fields(cfg_path, config) -> dict:
    """The manifest's record of the config a build used (config_of reads it back)."""
    return {"config": str(cfg_path) if cfg_path else None,
            "config_sha256": _digest(cfg_path), "config_given": config is not None}


def _counts(summary: dict) -> dict:
    return {"counts": {**{k: summary[k] for k in ("files_seen", "indexed", "duplicates",
                                                  "families", "chunks")},
                       "skipped": len(summary["skipped"])},
            "skipped": summary["skipped"]}


def _write_index(index_dir: Path, prev, recs: list, chunks: list, emb, progress,
                 changes=(None, None)):
    """(manifest without the vault fields, files, (chunks, embedded)) of the new index:
    reused notes keep their rows, a touched note whose chunks did not change too; the
    rest go into one new segment (with the notes a merge moves). The manifest carries
    the new segment's pieces and the IDF to write under _pieces and _idf. changes:
    (file_records.Changes, the scan's paths) when recs hold only what changed (every other
    note keeps its record and rows), else (None, None)."""
    ch, paths = changes
    keep = {r["path"]: r["_chunks"] for r in recs if "_chunks" in r and not r["duplicate_of"]}
    by_path = {r["path"]: [] for r in recs if not r["duplicate_of"] and r["path"] not in keep}
    for c in chunks:
        by_path[c["path"]].append(c)
    old_where = prev.where if prev is not None else {}
    for path, cs in list(by_path.items()):
        if path in old_where and _same_rows(prev, old_where[path][0], cs):
            keep[path] = old_where[path][0]
            del by_path[path]
    if ch is None:
        live = [r["path"] for r in recs if not r["duplicate_of"]]
    else:
        live = _live_now(prev, paths, ch)
        keep.update((p, old_where[p][0]) for p in live if p not in ch.by_path)
    todo = [c for cs in by_path.values() for c in cs]
    vectors, embedded = _embed(todo, emb, _old_rows(prev, keep), progress)
    new, at = {}, 0
    for path, cs in by_path.items():
        new[path] = store.new_piece(path, cs, vectors[at:at + len(cs)])
        at += len(cs)
    kept, dead, pieces = _segments_after(prev, live, keep, new)
    gen = _next_gen(index_dir, prev.manifest if prev is not None else None)
    same_idf = prev is not None and prev.embedder is emb
    idf = (emb.idf if isinstance(emb, embedder.BuiltinEmbedder) and not same_idf else None)
    manifest = {"format": store.FORMAT, "embedder": emb.id, "dim": int(emb.dim), "gen": gen,
                "segments": [prev.manifest["segments"][s] for s in kept], "dead": dead,
                "idf_file": (f"e{gen}.idf.npy" if idf is not None else
                             prev.manifest.get("idf_file") if same_idf else None),
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "_pieces": [(f"s{gen}", pieces)] if pieces else [], "_idf": idf}
    for f in recs:                     # the records themselves, less their scratch keys
        for k in SCRATCH:
            f.pop(k, None)
    n_chunks = sum(keep[p][2] if p in keep else len(new[p].rows) for p in live)
    files = recs if ch is None else _entries_now(prev, paths, ch)
    manifest["_files"] = _files_out(prev, files, gen, manifest)
    return manifest, files, (n_chunks, embedded)


def _live_now(prev, paths: list, ch) -> list:
    """The paths with rows after a refresh of few changes, in path order: every note
    not a duplicate, by its record now (changed) or before."""
    at, dup = ch.at, file_columns.column(prev.files, "duplicate_of")
    skipped = {x["path"] for x in ch.skipped}
    return [p for p in paths if (not ch.by_path[p]["duplicate_of"] if p in ch.by_path
                                 else p not in skipped and not dup[at[p]])]


def _entries_now(prev, paths: list, ch) -> file_columns.Files:
    """The file records after a refresh of few changes, in path order: prev's, with
    those of ch as dicts where they differ from the base (as _files_out would find), the
    gone and the skipped left out."""
    at = ch.at
    entries = list(range(len(at))) if prev.files.entries is None else prev.files.entries
    base = prev.base[2].base
    base_paths = base.column("path")

    def entry(r):                      # the base's position when r is the base's record
        i = bisect.bisect_left(base_paths, r["path"])
        same = i < len(base_paths) and base_paths[i] == r["path"]
        return i if same and base.equals(i, r) else r
    drop = {at[p] for p in ch.gone} | {at[x["path"]] for x in ch.skipped if x["path"] in at}
    new = {at[p]: entry(r) for p, r in ch.by_path.items() if p in at}
    out = [new.get(i, e) for i, e in enumerate(entries) if i not in drop]
    added = sorted(p for p in ch.by_path if p not in at)
    if added:
        now = [p for i, p in enumerate(file_columns.column(prev.files, "path")) if i not in drop]
        for p in added:
            j = bisect.bisect_left(now, p)
            now.insert(j, p)
            out.insert(j, entry(ch.by_path[p]))
    return file_columns.Files(base, out)


def _projects(vault: Path, files, folders, backend, prev) -> list:
    """registry.build's rows, given the records it looks at (those in its folders);
    none without registry folders (registry.build gives none then: not imported)."""
    if not folders:
        return []
    from verso import registry
    if isinstance(files, file_columns.Files):
        files = [files[i] for i, p in enumerate(files.column("path"))
                 if registry.in_registry(p, folders)]
    return registry.build(vault, files, folders, getattr(backend, "writer", None),
                          prev.manifest.get("projects", []) if prev else [])


def _files_out(prev, files, gen: int, manifest: dict) -> list:
    """[(name, bytes)] of the file records, their names and digests set in manifest:
    the records that differ from the previous index's base, as a delta (g<gen>.delta.json:
    per record its position in the base, or the record itself), while they are at most
    DELTA_SHARE of all; else a new base (g<gen>.files.cols, by column) with every record.
    files: a list of records, or a file_columns.Files over that base (_entries_now)."""
    base = getattr(prev, "base", None)
    out = None
    if isinstance(files, file_columns.Files):
        out = files.entries
        changed = sum(1 for e in out if type(e) is dict)
    elif base is not None:
        name, sha, recs = base[0], base[1], file_columns.dicts(base[2])
        pos = {r["path"]: i for i, r in enumerate(recs)}
        out, changed = [], 0
        for f in files:
            i = pos.get(f["path"])
            if i is not None and recs[i] == f:
                out.append(i)
            else:
                out.append(f)
                changed += 1
    if out is not None and changed <= DELTA_SHARE * len(files):
        name, sha = base[0], base[1]
        raw = store.json_bytes({"format": store.FORMAT, "base": name, "files": out})
        manifest.update(files_file=name, files_sha=sha, files_delta=f"g{gen}.delta.json",
                        delta_sha=hashlib.sha256(raw).hexdigest())
        return [(manifest["files_delta"], raw)]
    raw = file_columns.encode(file_columns.dicts(files))
    manifest.update(files_file=f"g{gen}.files.cols", files_sha=hashlib.sha256(raw).hexdigest(),
                    files_delta=None, delta_sha=None)
    return [(manifest["files_file"], raw)]


def _human(s: dict) -> str:
    dated = ", ".join(f"{k} {v}" for k, v in sorted(s["dated"].items()))
    lines = [f"indexed {s['indexed']} of {s['files_seen']} files ({s['duplicates']} duplicates,"
             f" {len(s['skipped'])} skipped): {s['families']} families, {s['chunks']} chunks",
             f"notes read {s['files_read']}, reused {s['files_reused']} (re-read for checks "
             f"{s['files_reread']}); chunks embedded {s['embedded']}, reused {s['reused']} "
             f"in {s['seconds']:.2f} s; "
             f"dated by {dated or 'nothing'}", f"index: {s['index']}"]
    cfg = s.get("config") or {}
    if cfg.get("path"):
        lines.append(f"config: {cfg['path']}" + (" (kept: the index answers with it)"
                                                 if cfg["given"] else ""))
    lines += [f"skipped {x['path']}: {x['reason']}" for x in s["skipped"]]
    return "\n".join(lines + ([s["note"]] if s["note"] else []))


class _Meter:
    """progress(stage, done, total) for a terminal: one line rewritten in place with the
    count, the rate and the time left."""

    def __init__(self, out):
        self.out, self.stage, self.start = out, None, 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if stage != self.stage:
            self.stage, self.start = stage, now
        rate = done / (now - self.start) if done and now > self.start else 0.0
        left = f", about {(total - done) / rate:.0f} s left" if rate else ""
        noun = "notes" if stage == "reading" else "chunks"
        print(f"\r{stage} {done}/{total} {noun} ({rate:.0f}/s{left})    ", end="",
              file=self.out, flush=True)

    def clear(self) -> None:
        if self.stage:
            print("\r" + " " * 72 + "\r", end="", file=self.out, flush=True)


def main(argv=None, prog="ingest.py") -> int:
    """`verso ingest` (prog names the command in --help and errors)."""
    p = argparse.ArgumentParser(prog=prog, description="Index a folder of notes.")
    p.add_argument("vault", help="folder of .md/.txt notes")
    p.add_argument("--index", help="index dir (default: the index in Verso's home, "
                   "$VERSO_HOME or ~/.local/share/verso); the last one ingested is the "
                   "default of every question")
    p.add_argument("--config", help="vault config (default VAULT/verso.toml)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--rebuild", action="store_true", help="re-fit and re-embed everything")
    p.add_argument("--backend", choices=("builtin", "ollama"), default="builtin",
                   help="embedder: builtin (offline) or ollama (nomic-embed-text)")
    p.add_argument("--quiet", action="store_true",
                   help="print nothing but errors: no progress line, no summary (--json "
                   "and --files still print what they are asked for)")
    p.add_argument("--timeout", type=float, default=None, help="seconds one Ollama request "
                   "may take (default 120, or $VERSO_OLLAMA_TIMEOUT)")
    p.add_argument("--files", action="store_true", help="also list every note: its date, "
                   "how it was dated, its family, the note it copies, private or not")
    a = p.parse_args(argv)
    meter = None if a.quiet or not sys.stderr.isatty() else _Meter(sys.stderr)
    try:
        if a.timeout is not None:
            _models().use_timeout(a.timeout)
        s = ingest_notes(a.vault, a.index, a.config, a.rebuild, a.backend, meter)
        if a.files:
            s["files"] = file_records.listing(store_load.load_index(s["index"]).files)
    except (ValueError, store.IndexProblem, store.IndexBusy, _models().BackendError,
            OSError) as e:
        print(f"{chr(10) if meter and meter.stage else ''}ingest: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ningest: interrupted; the index is as it was before this run", file=sys.stderr)
        return 130
    if meter:
        meter.clear()
    if a.json:
        print(json.dumps(s, indent=2))
    elif a.files:
        print(("" if a.quiet else _human(s) + "\n\n") + file_records.listing_table(s["files"]))
    elif not a.quiet:
        print(_human(s))
    return 0


verso.call_as(__name__, ingest_notes)     # verso.ingest(NOTES) in a notebook

if __name__ == "__main__":
    run_cli(main)