"""The index on disk, its write side: format, segments, file records, commit, the lock.

In:  the pieces of one ingest (a note's rows: vectors, texts, headings, dates), the
     manifest and file records to write; an index dir.
Out: an index dir (--index, else the default: find_index) of immutable segments
     (vectors, texts, per-row metadata of whole notes), the file records and a manifest
     naming the live segments and the tombstoned notes in each (format FORMAT; see "on
     disk" below). A commit writes the new files under new names, then replaces the
     manifest atomically, then removes what no manifest names: a crash leaves the
     previous index whole. One writer at a time: index_dir/lock holds its pid under a
     kernel lock; a dead writer's lock is taken over. write_atomic, the one atomic
     writer, serves retrieve.py, evaluate.py and html_report.py too.
Not: loading an index (store_load.py), deciding what goes in a segment or when to merge
     (ingest.py, which also keeps the index dir out of the vault), BM25 arrays
     (retrieve.py).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sys
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FORMAT = 4                         # 4: file records by column; 3: + a base and a delta; 2: segments
                                   # + tombstones; 1: one chunks.json
LOCK_NAME = "lock"                 # index_dir/lock: the writing ingest's pid, flock'ed
COMMIT_WAIT = 5.0                  # seconds load_index waits for an ingest finishing its commit
ROWS = np.dtype([("end", "<i8"), ("crc", "<u4"), ("hash", "V32")])   # s<N>.rows.npy
SEG_FILES = ("vectors.npy", "rows.npy", "text", "chunks.json")
INDEX_FILE_RE = re.compile(   # every name an index dir may hold besides lock (see "on disk")
    r"^(?:(?P<seg>s(?P<n>\d+))\.(?:vectors\.npy|rows\.npy|text|chunks\.json|(?P<bm25>bm25[\w.-]*))"
    r"|[ge](?P<n2>\d+)\.(?:files\.cols|files\.json|delta\.json|near\.json|idf\.npy)"
    r"|manifest\.json|files\.json|chunks\.json"
    r"|vectors\.npy|idf\.npy|bm25\.npz|bm25_vocab\.json|.+\.prev|\..+\.tmp-[\d-]+)$")
_TMP_IDS = itertools.count()
INDEX_NAME = "index"               # home/index: the index of `verso ingest NOTES` without --index
SAMPLE_NAME = "sample"             # home/sample: the bundled sample vault's index
DEFAULT_FILE = "default-index.json"   # home/default-index.json: the index ingested last
LOCAL_INDEX = ".verso"             # where Verso before 0.2 built an index: the current folder


class IndexProblem(Exception):
    """The index is missing, damaged or from another embedder; one line with the fix."""


class IndexBusy(RuntimeError):
    """Another live ingest holds the index lock."""


def home() -> Path:
    """Where Verso keeps its state (indexes, the default's name, evaluation indexes):
    $VERSO_HOME, else the platform's user data folder (~/.local/share/verso on Linux,
    $XDG_DATA_HOME/verso where set; ~/Library/Application Support/verso on macOS;
    %LOCALAPPDATA%\\verso on Windows)."""
    if set_home := os.environ.get("VERSO_HOME"):
        return Path(set_home).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local"
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base).expanduser() / "verso"


def _has_index(d: Path) -> bool:
    return (d / "manifest.json").is_file()


def remembered() -> Path | None:
    """The index ingested last (home/DEFAULT_FILE), when it still holds an index."""
    try:
        data = json.loads((home() / DEFAULT_FILE).read_bytes())
        d = Path(data["index"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return d if _has_index(d) else None


def remember(index_dir) -> None:
    """Make index_dir the default of every question asked without --index."""
    h = home()
    h.mkdir(parents=True, exist_ok=True)
    write_atomic(h / DEFAULT_FILE, json_bytes(
        {"format": 1, "index": str(Path(index_dir).expanduser().resolve())}))


def find_index() -> tuple[Path, str | None]:
    """(the index a question without --index uses, a one-line note or None): the index
    ingested last; else home/index (or $VERSO_HOME itself where an older Verso built the
    index there); else, with $VERSO_HOME unset, ./.verso built by an older Verso in the
    current folder, which then becomes the default (so the note is said once); else
    home/index, which holds no index yet (the caller falls back to the sample)."""
    if (d := remembered()) is not None:
        return d, None
    h = home()
    for d in (h / INDEX_NAME, h):
        if _has_index(d):
            return d, None
    local = Path.cwd() / LOCAL_INDEX
    if not os.environ.get("VERSO_HOME") and _has_index(local):
        remember(local)
        return local, (f"using the index in {local} (built here by an earlier Verso); it is "
                       f"now the default wherever you ask from")
    return h / INDEX_NAME, None


def default_index_dir() -> Path:
    """The index of a question or an ingest given no --index (see find_index)."""
    return find_index()[0]


def json_bytes(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _write(path: Path, data) -> None:
    """data (bytes, str, ndarray, or fn(binary file)) into path, flushed to disk."""
    with open(path, "wb") as f:
        if isinstance(data, np.ndarray):
            np.save(f, data)
        elif callable(data):
            data(f)
        else:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        f.flush()
        os.fsync(f.fileno())


def write_atomic(path, data) -> None:
    """The one atomic writer (index, BM25 arrays, evaluation runs): data goes to a temp
    name beside path, then os.replace'd into place; on failure path is as it was."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{next(_TMP_IDS)}")
    try:
        _write(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


@dataclass
class _Piece:
    """One note's rows, on their way into a new segment."""
    path: str
    vectors: np.ndarray          # float32 [k, dim]
    text: bytes                  # the k texts back to back
    rows: np.ndarray             # ROWS [k], "end" counted from the start of text
    heading: list
    section_date: list
    entry_latest: list


def new_piece(path: str, chunks: list[dict], vectors: np.ndarray) -> _Piece:
    blobs = [c["text"].encode("utf-8") for c in chunks]
    rows = np.zeros(len(blobs), ROWS)
    rows["end"] = np.cumsum([len(b) for b in blobs])
    rows["crc"] = [zlib.crc32(b) for b in blobs]
    rows["hash"] = [bytes.fromhex(c["hash"]) for c in chunks]
    return _Piece(path, vectors, b"".join(blobs), rows, [c["heading"] for c in chunks],
                  [c["section_date"] for c in chunks], [c["entry_latest"] for c in chunks])


def old_piece(seg, path: str, start: int, count: int) -> _Piece:
    rows = np.array(seg.rows[start:start + count])
    first = int(seg.rows["end"][start - 1]) if start else 0
    last = int(rows["end"][-1]) if count else first
    rows["end"] -= first
    sl = slice(start, start + count)
    return _Piece(path, np.asarray(seg.vectors[sl]), bytes(seg.blob[first:last]), rows,
                  seg.heading[sl], seg.section_date[sl], seg.entry_latest[sl])


def _write_segment(index_dir: Path, name: str, pieces: list, dim: int, written: list) -> dict:
    """The four files of segment `name` from pieces (in row order); its manifest entry."""
    files, at, ends, base = [], 0, [], 0
    for p in pieces:
        files.append([p.path, at, len(p.rows)])
        at += len(p.rows)
        ends.append(p.rows["end"] + base)
        base += len(p.text)
    rows = np.concatenate([p.rows for p in pieces]) if pieces else np.zeros(0, ROWS)
    if pieces:
        rows["end"] = np.concatenate(ends)
    vectors = (np.concatenate([p.vectors for p in pieces]).astype(np.float32, copy=False)
               if pieces else np.zeros((0, dim), np.float32))
    meta = json_bytes({"format": FORMAT, "files": files,    # this key order, compact:
                       # store_load._Meta decodes each list on its own
                       "heading": [h for p in pieces for h in p.heading],
                       "section_date": [d for p in pieces for d in p.section_date],
                       "entry_latest": [e for p in pieces for e in p.entry_latest]})
    for suffix, data in (("vectors.npy", vectors), ("rows.npy", rows),
                         ("text", b"".join(p.text for p in pieces)), ("chunks.json", meta)):
        written.append(index_dir / f"{name}.{suffix}")
        write_atomic(written[-1], data)
    return {"name": name, "rows": int(at), "sha": hashlib.sha256(meta).hexdigest()}


def _referenced(manifest: dict) -> tuple[set, set]:
    """(file names, segment names) a manifest keeps alive."""
    segs = {s["name"] for s in manifest.get("segments", [])}
    names = {"manifest.json", manifest.get("files_file"), manifest.get("files_delta"),
             manifest.get("idf_file"), manifest.get("near_file")}
    names |= {f"{s}.{x}" for s in segs for x in SEG_FILES}
    return names - {None}, segs


def _collect(index_dir: Path, manifest: dict) -> int:
    """Remove the index files `manifest` does not name (old segments, an older format,
    leftovers of an interrupted ingest); a segment's BM25 files live as long as it does.
    Files that cannot be removed now (mapped on Windows) are left for the next run."""
    names, segs = _referenced(manifest)
    removed = 0
    for p in index_dir.iterdir():
        m = INDEX_FILE_RE.match(p.name)
        if not m or p.name in names or (m.group("seg") in segs and m.group("bm25")):
            continue
        try:
            p.unlink()
            removed += 1
        except OSError:
            pass
    return removed


def recover(index_dir: Path) -> str:
    """Before an ingest writes (lock held): remove what an interrupted one left (temp
    files, segments no manifest names). "" when there was nothing, else one line."""
    try:
        manifest = json.loads((index_dir / "manifest.json").read_bytes())
        usable = isinstance(manifest, dict) and manifest.get("format") == FORMAT
    except (OSError, ValueError):
        manifest, usable = {}, False
    if usable:
        removed = _collect(index_dir, manifest)
    else:                              # no (readable) manifest: only what is surely junk
        removed = 0
        for p in index_dir.glob(".*.tmp-*"):
            p.unlink(missing_ok=True)
            removed += 1
    return (f"removed {removed} files an interrupted ingest had left" if removed else "")


def commit(index_dir: Path, manifest: dict, files: list, pieces_by_seg: list,
           idf, near: dict) -> None:
    """Write the new segments (name, pieces), the files and the IDF under new names,
    then the manifest; on failure remove what this run wrote, so the previous index is
    as it was. After the manifest, what it no longer names is removed."""
    written, dim = [], manifest["dim"]
    try:
        for name, pieces in pieces_by_seg:
            entry = _write_segment(index_dir, name, pieces, dim, written)
            manifest["segments"].append(entry)
        if idf is not None:
            written.append(index_dir / manifest["idf_file"])
            write_atomic(written[-1], idf)
        written.append(index_dir / manifest["near_file"])
        write_atomic(written[-1], json_bytes({"format": FORMAT, "pairs": near}))
        for name, raw in manifest.pop("_files"):
            written.append(index_dir / name)
            write_atomic(written[-1], raw)
        write_atomic(index_dir / "manifest.json", json.dumps(manifest, indent=1))
    except BaseException:
        for p in written:
            p.unlink(missing_ok=True)
        raise
    _collect(index_dir, manifest)


# ------------------------------------------------------------------------ the lock

def _alive(pid: int) -> bool:
    if os.name == "nt":      # os.kill(pid, 0) would end the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _flock(fd: int) -> bool:
    """An exclusive kernel lock on the open lock file; the kernel drops it when its
    holder dies, however it dies (flock; on Windows a byte-range lock)."""
    try:
        import fcntl
    except ImportError:                # Windows
        import msvcrt
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _pid_in(fd: int) -> int | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return int(os.read(fd, 32).decode("ascii", "replace").strip())
    except (OSError, ValueError):      # empty, or locked against reading (Windows)
        return None


def holder(index_dir: Path) -> int | None:
    """The pid of a live ingest writing index_dir, or None."""
    try:
        pid = int((index_dir / LOCK_NAME).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


@contextmanager
def lock(index_dir: Path, wait: float = 0.0):
    """index_dir/lock, flock'ed while held, with the holder's pid inside. Taken when no
    one holds the kernel lock and the pid in it is gone (a killed ingest's stale lock is
    taken over in place: no unlink race); else waits up to `wait` s, then IndexBusy."""
    index_dir.mkdir(parents=True, exist_ok=True)
    path, deadline = index_dir / LOCK_NAME, time.monotonic() + wait
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        got, pid = _flock(fd), _pid_in(fd)
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except OSError:
            same = False
        if got and same and not (pid is not None and _alive(pid)):
            break
        os.close(fd)
        if not got or same:            # else the holder just removed it: look again
            if time.monotonic() >= deadline:
                who = f" (pid {pid})" if pid is not None else ""
                raise IndexBusy(f"another ingest{who} is writing {index_dir}: wait for it, "
                                f"or delete {path} if that process is gone")
            time.sleep(0.05)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, str(os.getpid()).encode())
    try:
        yield
    finally:
        if os.name == "nt":            # Windows cannot unlink an open file
            os.close(fd)
            path.unlink(missing_ok=True)
        else:                          # unlink first: no one may lock this inode after us
            path.unlink(missing_ok=True)
            os.close(fd)

