"""The index on disk, its load side: an index dir -> an Index, checked, mapped, lazy.

In:  an index dir written by store.py (default store.default_index_dir()), and the
     backend of a non-builtin embedder; its big files read ahead in a thread (Ahead).
Out: an Index: the manifest, the file records, the live chunks (built when asked for,
     their texts read then), the vectors over the segments' memory maps (never copied),
     the embedder. Damage, another format or another embedder is one line naming the fix
     (store.IndexProblem). built_from says which vault an index was made from.
Not: writing (store.py), building (ingest.py), BM25 or retrieval (retrieve.py).
"""

from __future__ import annotations

import gc
import hashlib
import json
import operator
import os
import shlex
import threading
import zlib
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from verso import embedder
from verso import chunking
from verso import file_columns
from verso import store
from verso import textkit

LOAD_TRIES = 3                     # load_index re-reads a manifest a commit replaced meanwhile


@dataclass
class Index:
    dir: Path
    manifest: dict
    files: list
    chunks: list
    vectors: object              # float32 [n_chunks, dim] over memory maps, row i == chunks[i]
    by_path: dict
    embedder: object
    cache: dict = field(default_factory=dict)   # free for retrieve/version to memoise
    stat: list = field(default_factory=list)    # index_stat of the files it was read from
    segments: list = field(default_factory=list)  # the Segments, in manifest order
    places: object = None        # where, or the function that makes it (_load)
    base: tuple | None = None    # (name, sha, records) of the file records' base

    @property
    def date_order(self) -> str:
        """The order the vault's dates in digits were read in at ingest (verso.toml's
        date_order, else the file names': vault_walk.settle_date_order), "ymd" for none;
        an index written before the manifest named it: the last part of its reuse key."""
        got = self.manifest.get("date_order") or (self.manifest.get("reuse") or [None])[-1]
        return got if got in textkit.DIGIT_ORDERS else "ymd"

    @property
    def where(self) -> dict:
        """path -> [(segment, first row, rows)] of every live note, made when first read
        (an ingest reads it, a question does not)."""
        if callable(self.places):
            self.places = self.places()
        return {} if self.places is None else self.places


def _line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:160]


def _fix(index_dir: Path, vault=None) -> str:
    default = index_dir == store.default_index_dir().resolve()
    extra = "" if default else f" --index {shlex.quote(str(index_dir))}"
    return f"verso ingest {shlex.quote(vault) if vault else 'VAULT'}{extra} --rebuild"


def _read_json(index_dir: Path, name: str, key: str, vault=None):
    try:
        raw = (index_dir / name).read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as e:
        raise store.IndexProblem(f"{name} in {index_dir} is unreadable ({type(e).__name__}): "
                                 f"run {_fix(index_dir, vault)}") from None
    if not vault and isinstance(data, dict) and isinstance(data.get("vault"), str):
        vault = data["vault"]
    if not isinstance(data, dict) or data.get("format") != store.FORMAT or key not in data:
        raise store.IndexProblem(f"{name} in {index_dir} has unknown format "
                                 f"{data.get('format') if isinstance(data, dict) else '?'} "
                                 f"(this Verso reads {store.FORMAT}): run "
                                 f"{_fix(index_dir, vault)}")
    return data, raw


def built_from(index_dir=None) -> tuple[str, str] | None:
    """(vault folder, creation time) recorded by the index in index_dir (default
    store.default_index_dir()); None when no index is there. Read from the manifest
    alone, so an index of another format still says where it came from."""
    d = Path(index_dir or store.default_index_dir()).expanduser().resolve()
    if not (d / "manifest.json").exists():
        return None
    try:
        manifest = json.loads((d / "manifest.json").read_bytes())
        return str(manifest["vault"]), str(manifest.get("created") or "an unknown date")
    except (OSError, ValueError, KeyError, TypeError):
        raise store.IndexProblem(f"the index in {d} is damaged and does not say which vault it "
                                 f"was built from: run verso ingest YOUR_NOTES --index {d} "
                                 f"--rebuild") from None


@dataclass
class Segment:
    """One segment, memory-mapped: rows of chunks of whole notes. heading, section_date
    and entry_latest (a list each, one value a row) are decoded when first read; headings
    without a backslash per row (_Strings)."""
    name: str
    files: list                  # [[path, first row, rows]] in row order
    meta: object                 # _Meta of s<N>.chunks.json: the per-row lists
    vectors: np.ndarray          # float32 [rows, dim] (memory map)
    rows: np.ndarray             # store.ROWS [rows] (memory map)
    blob: object                 # the texts: a _Text (b"" when empty)
    where: str                   # "s3.text in DIR", for errors
    fix: str                     # the command that rebuilds the index

    @property
    def heading(self) -> list:
        return self.meta.get("heading")

    @property
    def section_date(self) -> list:
        return self.meta.get("section_date")

    @property
    def entry_latest(self) -> list:
        return self.meta.get("entry_latest")

    def text(self, r: int) -> str:
        start = int(self.rows["end"][r - 1]) if r else 0
        raw = bytes(self.blob[start:int(self.rows["end"][r])])
        if zlib.crc32(raw) != int(self.rows["crc"][r]):
            raise store.IndexProblem(f"{self.where} does not match its rows (edited or damaged): "
                                     f"run {self.fix}")
        return raw.decode("utf-8")

    def digest(self, r: int) -> str:
        return bytes(self.rows["hash"][r]).hex()

    def row_paths(self) -> list[str]:
        return [p for p, _, n in self.files for _ in range(n)]


META_KEYS = ("files", "heading", "section_date", "entry_latest")   # store._write_segment's


class _Meta:
    """A segment's chunks.json (its digest already checked), each list decoded when first
    asked for: store writes its keys in META_KEYS order, compactly, so each key's list
    starts after ',"key":[', which no JSON string can hold (its quotes are escaped), and
    ends where the next key starts. Any other layout is decoded whole. A list that does
    not parse or has not n values: store.IndexProblem(problem)."""

    def __init__(self, raw: bytes, n: int, data=None, problem: str = "", at=None):
        self.raw, self.n, self.lists, self.problem = raw, n, {}, problem
        if data is not None:                            # decoded whole already
            self.lists = {k: data.get(k) for k in META_KEYS}
            for k in META_KEYS[1:]:
                self._check(k, self.lists[k])
            return
        self.spans = {k: (i + len(k) + 4, j) for k, i, j in
                      zip(META_KEYS, at, at[1:] + [len(raw) - 1])}

    @staticmethod
    def keys_at(raw: bytes) -> list | None:
        """Where each key of META_KEYS starts when raw has the layout store writes (else
        None: it is decoded whole)."""
        if not (raw.startswith(b'{"format":%d,"files":[' % store.FORMAT)
                and raw.endswith(b"]}")):
            return None
        at, start = [], 0
        for k in META_KEYS:
            start = raw.find(b',"%s":[' % k.encode(), start)
            if start < 0:
                return None
            at.append(start)
        return at

    def _check(self, key: str, value) -> list:
        if not isinstance(value, list) or len(value) != self.n:
            raise store.IndexProblem(self.problem)
        return value

    def get(self, key: str) -> list:
        if key not in self.lists:
            start, end = self.spans[key]
            value = None if key == "files" else _Strings.of(self.raw, start, end, self.n)
            if value is None:
                try:
                    value = json.loads(self.raw[start:end])
                except ValueError:
                    raise store.IndexProblem(self.problem) from None
                value = value if key == "files" else self._check(key, value)
            self.lists[key] = value
        return self.lists[key]


class _Strings(Sequence):
    """A list of a segment's chunks.json that is n strings none of which holds a
    backslash (most segments' headings): each string decoded when read, from the
    offsets of its quotes (a question reads its candidates' headings, not 100k); all of
    them at once when more than a few are read. Equal to the list json.loads gives."""

    def __init__(self, raw: bytes, quotes: np.ndarray):
        self.raw, self.quotes, self.n = raw, quotes, len(quotes) // 2
        self.reads, self.all = 0, None

    @staticmethod
    def of(raw: bytes, start: int, end: int, n: int):
        """A _Strings of the JSON list raw[start:end], or None when it is not n such
        strings: then every quote is a string's edge, so 2n quotes, each pair but the
        last followed by ',"', are exactly n strings."""
        if (not n or raw[start:start + 2] != b'["' or raw[end - 2:end] != b'"]'
                or raw.count(b"\\", start, end)):
            return None
        text = np.frombuffer(raw, np.uint8, end - start, start)
        quotes = np.flatnonzero(text == ord('"'))
        if len(quotes) != 2 * n or not (np.all(quotes[2::2] - quotes[1:-1:2] == 2)
                                        and np.all(text[quotes[1:-1:2] + 1] == ord(","))):
            return None
        return _Strings(raw, quotes + start)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        i = range(self.n)[i]                           # IndexError as a list's
        self.reads += 1
        if self.all is None and self.reads > 64 + self.n // 16:
            self.all = self._decoded()
        if self.all is not None:
            return self.all[i]
        a, b = self.quotes[2 * i:2 * i + 2].tolist()
        return self.raw[a + 1:b].decode("utf-8", "surrogatepass")

    def _decoded(self) -> list[str]:           # no string holds a quote: '","' is a seam
        whole = self.raw[int(self.quotes[0]) + 1:int(self.quotes[-1])]
        return whole.decode("utf-8", "surrogatepass").split('","')

    def __iter__(self):
        return iter(self._decoded() if self.all is None else self.all)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None


class _Text:
    """A segment's texts, read by offset (blob[a:b] -> bytes, one pread): not a memory map,
    whose every first touch maps megabytes of the file into the process (large folios),
    for a chunk of a kilobyte."""

    def __init__(self, path: Path):
        self.file = open(path, "rb", buffering=0)        # closed with the segment

    def __getitem__(self, sl: slice) -> bytes:
        start, stop = sl.start or 0, sl.stop
        if hasattr(os, "pread"):
            return os.pread(self.file.fileno(), stop - start, start)
        self.file.seek(start)
        return self.file.read(stop - start)


class _Vectors:
    """The vectors of the live chunks in chunk-id order, over the segments' memory maps
    (never copied): `v @ q`, `v[i]`, `v[ids]`, shape, dtype, nbytes, np.asarray(v)."""

    def __init__(self, mats: list, seg_of: np.ndarray, row: np.ndarray, dim: int):
        self.mats = [np.asarray(m) for m in mats]
        base = np.cumsum([0] + [m.shape[0] for m in mats])
        self.base, self.rows = base, base[seg_of] + row      # chunk id -> global row
        self.shape, self.dtype, self.ndim = (len(row), dim), np.dtype(np.float32), 2
        self.nbytes = len(row) * dim * 4
        self.plain = (self.mats[0] if len(mats) == 1 and base[-1] == len(row)
                      and np.array_equal(self.rows, np.arange(len(row))) else None)

    def __len__(self) -> int:
        return self.shape[0]

    def __matmul__(self, q):
        if self.plain is not None:
            return self.plain @ q
        return np.concatenate([m @ q for m in self.mats])[self.rows]

    def __getitem__(self, i):
        if self.plain is not None:
            return self.plain[i]
        g = self.rows[i]
        if np.ndim(g) == 0:
            s = int(np.searchsorted(self.base, g, "right")) - 1
            return self.mats[s][g - self.base[s]]
        g = np.asarray(g)
        out = np.empty(g.shape + (self.shape[1],), np.float32)
        seg = np.searchsorted(self.base, g, "right") - 1
        for s in range(len(self.mats)):        # not np.unique: it imports numpy.ma
            at = seg == s
            if not at.any():
                continue
            out[at] = self.mats[s][g[at] - self.base[s]]
        return out

    def __array__(self, dtype=None, copy=None):
        out = self[np.arange(len(self))] if self.plain is None else np.array(self.plain)
        return out if dtype is None else out.astype(dtype)


class _Chunks(Sequence):
    """The live chunks in id order, each dict built from its segment and its file's
    record when first asked for (its text read then); equal to the list a full build
    makes. column(key) gives one field of every chunk without building the dicts."""

    def __init__(self, files: list, segments: list, file_of, seg_of, row):
        self.files, self.segments = files, segments
        self.file_of, self.seg_of, self.row = file_of, seg_of, row
        self.memo: dict[int, dict] = {}

    def __len__(self) -> int:
        return len(self.row)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i) + (len(self) if int(i) < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError("chunk id out of range")
        c = self.memo.get(i)
        if c is None:
            seg, r = self.segments[self.seg_of[i]], int(self.row[i])
            c = self.memo[i] = chunking.chunk_dict(i, self.files[self.file_of[i]], seg.heading[r],
                                                   seg.section_date[r], seg.entry_latest[r],
                                                   seg.text(r), seg.digest(r))
        return c

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def segment_ids(self, s: int) -> np.ndarray:
        """int64 [rows of segment s]: each row's chunk id, -1 when tombstoned."""
        out = np.full(len(self.segments[s].rows), -1, dtype=np.int64)
        at = np.flatnonzero(self.seg_of == s)
        out[self.row[at]] = at
        return out

    def files_of(self) -> tuple[np.ndarray, list]:
        """(int64 [n]: each chunk's position in files, ascending; files)."""
        return self.file_of, self.files

    def column(self, key: str) -> list:
        if key == "id":
            return list(range(len(self)))
        if key in ("path", "private", "family", "is_latest"):
            values = np.array(file_columns.column(self.files, key) + [None], dtype=object)[:-1]
            return values[self.file_of].tolist()
        if key in ("heading", "section_date", "entry_latest"):
            out = np.empty(len(self), dtype=object)
            for s, seg in enumerate(self.segments):
                at = self.seg_of == s
                out[at] = np.array(list(getattr(seg, key)) + [None],
                                   dtype=object)[:-1][self.row[at]]
            return out.tolist()
        return [c.get(key) for c in self]


def chunk_files(chunks):
    """(each chunk's position in the file records, the records) when the chunks come
    from a loaded index, else None (a plain list: read the dicts)."""
    return chunks.files_of() if isinstance(chunks, _Chunks) else None


def chunk_column(chunks, key: str, ids=None) -> list:
    """One field of every chunk in id order, or of the chunks `ids`; from an index's
    columns when it has them (no chunk dict built, no text read), else from the dicts."""
    if ids is not None:
        ids = [int(i) for i in ids]
        if isinstance(chunks, _Chunks) and key in ("heading", "section_date", "entry_latest"):
            segs, rows = chunks.seg_of[ids].tolist(), chunks.row[ids].tolist()
            return [getattr(chunks.segments[s], key)[r] for s, r in zip(segs, rows)]
        return [chunks[i].get(key) for i in ids]
    if isinstance(chunks, _Chunks):
        return chunks.column(key)
    return [c.get(key) for c in chunks]


class Ahead:
    """The big files a load checks by digest (the file records' base, each segment's
    chunks.json), read and hashed in a thread begun before the caller scans the vault:
    reads and sha256 run without the GIL, so they overlap the scan's stat calls (a load
    at 100k chunks: 54 ms, 37 ms so). load_index takes a file from here only
    when the file on disk is still the one read (same name, size and mtime)."""

    def __init__(self, index_dir):
        self.dir, self.files = Path(index_dir), {}
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            m = json.loads((self.dir / "manifest.json").read_bytes())
            names = [m["files_file"]] + [f"{s['name']}.chunks.json" for s in m["segments"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return                     # no index, or a damaged one: load_index says so
        for name in names:
            try:
                with open(self.dir / str(name), "rb") as f:
                    st, raw = os.fstat(f.fileno()), f.read()
            except OSError:
                continue
            self.files[name] = ([name, st.st_size, st.st_mtime_ns], raw,
                                hashlib.sha256(raw).hexdigest())

    def take(self, name: str, stat: list) -> tuple[bytes, str] | None:
        """(the bytes of index file `name`, their sha256) when read ahead and still on
        disk as read (stat: index_stat's rows), else None."""
        self.thread.join()
        got = self.files.pop(name, None)
        return got[1:] if got is not None and got[0] in stat else None


def _digested(d: Path, name: str, ahead: Ahead | None, stat: list) -> tuple[bytes, str]:
    """(the bytes of index file `name`, their sha256), read ahead or now (OSError)."""
    got = ahead.take(name, stat) if ahead is not None else None
    if got is None:
        raw = (d / name).read_bytes()
        got = raw, hashlib.sha256(raw).hexdigest()
    return got


def load_index(index_dir=None, backend=None, ahead: Ahead | None = None) -> Index:
    """The index in index_dir (store.default_index_dir()), checked: format, the files and
    segments the manifest names, vector rows and dim, and the embedder. Texts are read
    (and checked) only when a chunk is asked for. `backend` supplies the embedder of a
    non-builtin index; `ahead`, files read ahead for it. An ingest that commits meanwhile
    is followed to its new manifest."""
    d = Path(index_dir or store.default_index_dir()).expanduser().resolve()
    if not (d / "manifest.json").exists():
        raise store.IndexProblem(f"no index in {d}: run verso ingest VAULT"
                                 + ("" if d == store.default_index_dir().resolve()
                                    else f" --index {d}"))
    for attempt in range(LOAD_TRIES):
        seen = _manifest_bytes(d)
        try:
            with bulk():
                return _load(d, backend, ahead)
        except store.IndexProblem:
            if attempt + 1 < LOAD_TRIES and _manifest_bytes(d) != seen:
                continue                       # a commit replaced the files: read anew
            if (pid := store.holder(d)) is not None:
                raise store.IndexProblem(f"an ingest (pid {pid}) is writing {d}: try again when "
                                         "it finishes") from None
            raise


def _manifest_bytes(d: Path) -> bytes:
    try:
        return (d / "manifest.json").read_bytes()
    except OSError:
        return b""


def index_stat(d: Path) -> list:
    """[name, size, mtime_ns] of every file in the index dir but the lock and temp files:
    an equal list means the files on disk are the ones that were read (a commit, a merge
    or a damaged file all show as a change)."""
    try:
        entries = list(os.scandir(d))
    except OSError:
        return []
    out = []
    for e in entries:
        if e.name != store.LOCK_NAME and not e.name.startswith(".") and e.is_file():
            st = e.stat()
            out.append([e.name, st.st_size, st.st_mtime_ns])
    return sorted(out)


def _load(d: Path, backend, ahead: Ahead | None = None) -> Index:
    stat = index_stat(d)              # before reading: a later replacement shows as a change
    manifest, _ = _read_json(d, "manifest.json", "embedder")
    vault = manifest.get("vault") if isinstance(manifest.get("vault"), str) else None
    fix = _fix(d, vault)
    dim = manifest.get("dim")
    if not isinstance(manifest["embedder"], str) or type(dim) is not int or dim < 1:
        raise store.IndexProblem(f"manifest.json in {d} has a bad embedder or dim "
                                 f"({manifest['embedder']!r}, {dim!r}): run {fix}")
    try:
        names = [(s["name"], s["rows"], s["sha"]) for s in manifest["segments"]]
        dead = {k: set(v) for k, v in manifest["dead"].items()}
        files_file = str(manifest["files_file"])
    except (KeyError, TypeError, AttributeError):
        raise store.IndexProblem(f"manifest.json in {d} lacks its segments or files: run "
                                 f"{fix}") from None
    def read(name):                    # a file checked by its digest: read ahead or now
        return _digested(d, name, ahead, stat)
    base, files = _load_files(d, manifest, files_file, vault, fix, read)
    segments = [_load_segment(d, name, rows, sha, dim, vault, read)
                for name, rows, sha in names]
    live = _live_notes(segments, dead)
    file_of, seg_of, row = _layout(d, files, live, fix)
    embedder = _load_embedder(d, manifest, backend, fix)
    idx = Index(d, manifest, files, _Chunks(files, segments, file_of, seg_of, row),
                _Vectors([s.vectors for s in segments], seg_of, row, dim),
                file_columns.ByPath(files), embedder, stat=stat)
    idx.segments, idx.places, idx.base = segments, _where(*live), base
    return idx


def _load_files(d: Path, manifest: dict, files_file: str, vault, fix: str, read):
    """((base name, its sha, its records), the file records now): the base's columns
    (file_columns; decoded when a field is asked for), with the delta the manifest names
    (if any) applied; each file checked against its digest. read: _digested's."""
    try:
        raw, sha = read(files_file)
    except OSError as e:
        raise store.IndexProblem(f"{files_file} in {d} is unreadable ({type(e).__name__}): "
                                 f"run {fix}") from None
    cols = None
    if sha == manifest.get("files_sha"):
        try:
            cols = file_columns.Columns(raw)
        except (ValueError, TypeError, KeyError):
            pass
    if cols is None:
        raise store.IndexProblem(f"{files_file} in {d} does not match its manifest (edited, or an "
                                 f"ingest was interrupted): run {fix}")
    base = (files_file, manifest["files_sha"], file_columns.Files(cols))
    name = manifest.get("files_delta")
    if not name:
        return base, base[2]
    delta, raw = _read_json(d, str(name), "files", vault)
    n = cols.n
    try:
        ok = (hashlib.sha256(raw).hexdigest() == manifest.get("delta_sha")
              and delta.get("base") == files_file)
        entries = [e if (type(e) is int and 0 <= e < n) or type(e) is dict else None
                   for e in delta["files"]] if ok else [None]
    except TypeError:
        entries = [None]
    if None in entries:
        raise store.IndexProblem(f"{name} in {d} does not match its manifest (edited, or an "
                                 f"ingest was interrupted): run {fix}")
    return base, file_columns.Files(cols, entries)


def _mapped(path: Path, fix: str, dtype=None, shape=None):
    """np.load(mmap) of a .npy, checked against dtype and shape (one line if not)."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise store.IndexProblem(f"{path.name} in {path.parent} is unreadable ({_line(e)}): run "
                                 f"{fix}") from None
    if arr.dtype != dtype or arr.shape != shape:
        raise store.IndexProblem(f"{path.name} in {path.parent} has shape {arr.shape} "
                                 f"{arr.dtype}, expected {shape} {np.dtype(dtype)}: run {fix}")
    return arr


def _load_segment(d: Path, name: str, n: int, sha: str, dim: int, vault, read) -> Segment:
    fix = _fix(d, vault)
    try:
        raw, digest = read(f"{name}.chunks.json")
    except OSError as e:
        raise store.IndexProblem(f"{name}.chunks.json in {d} is unreadable "
                                 f"({type(e).__name__}): run {fix}") from None
    if digest != sha:
        raise store.IndexProblem(f"{name}.chunks.json in {d} does not match its manifest (edited, "
                                 f"or an ingest was interrupted): run {fix}")
    problem = (f"{name}.text in {d} does not match its rows (edited or damaged): run "
               f"{fix}")
    try:
        at = _Meta.keys_at(raw)
        meta = (_Meta(raw, n, problem=problem, at=at) if at else
                _Meta(raw, n, _read_json(d, f"{name}.chunks.json", "files", vault)[0], problem))
        files = meta.get("files")
    except UnicodeDecodeError:
        raise store.IndexProblem(f"{name}.chunks.json in {d} is unreadable "
                                 f"(UnicodeDecodeError): run {fix}") from None
    if not isinstance(files, list):
        raise store.IndexProblem(problem)
    vectors = _mapped(d / f"{name}.vectors.npy", fix, np.float32, (n, dim))
    rows = _mapped(d / f"{name}.rows.npy", fix, store.ROWS, (n,))
    text = d / f"{name}.text"
    try:
        size = text.stat().st_size
        blob = _Text(text) if size else b""
    except (OSError, ValueError) as e:
        raise store.IndexProblem(f"{name}.text in {d} is unreadable ({_line(e)}): run "
                                 f"{fix}") from None
    if size != (int(rows["end"][-1]) if n else 0):
        raise store.IndexProblem(f"{name}.text in {d} does not match its rows (edited or "
                                 f"damaged): run {fix}")
    return Segment(name, files, meta, vectors, rows, blob, f"{name}.text in {d}", fix)


def _live_notes(segments: list, dead: dict) -> tuple[list, np.ndarray]:
    """(the paths of the notes not tombstoned, in segment order; int64 [notes, 3]: each
    one's segment, first row and rows)."""
    paths, loc = [], []
    for s, seg in enumerate(segments):
        gone = dead.get(seg.name, ())
        entries = [f for f in seg.files if f[0] not in gone] if gone else seg.files
        paths += map(operator.itemgetter(0), entries)
        cols = [np.full(len(entries), s, np.int64)] + [
            np.fromiter(map(operator.itemgetter(k), entries), np.int64, len(entries))
            for k in (1, 2)]
        loc.append(np.stack(cols, axis=1))
    return paths, (np.concatenate(loc) if loc else np.zeros((0, 3), np.int64))


def _where(paths: list, loc: np.ndarray):
    """Index.where of _live_notes, made when first read."""
    return lambda: dict(zip(paths, ([t] for t in map(tuple, loc.tolist()))))


def _layout(d: Path, files: list, live: tuple, fix: str):
    """(file_of, seg_of, row): for each live chunk, in full-build order (notes by path,
    then their rows), its file's position in files, its segment and its row there.
    live: _live_notes; each note not a duplicate must be there exactly once."""
    paths, loc = live
    pos = dict(zip(paths, range(len(paths))))
    js = [j for j, dup in enumerate(file_columns.column(files, "duplicate_of")) if not dup]
    at = list(map(pos.get, map(file_columns.column(files, "path").__getitem__, js)))
    if len(pos) != len(paths) or len(js) != len(paths) or None in at:
        raise store.IndexProblem(f"the segments in {d} do not match its files (a note missing or "
                                 f"indexed twice): run {fix}")
    loc = loc[np.asarray(at, dtype=np.int64)] if at else np.zeros((0, 3), np.int64)
    counts = loc[:, 2]
    first = np.cumsum(counts) - counts                 # each note's first chunk id
    row = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(loc[:, 1] - first, counts)
    return (np.repeat(np.array(js, dtype=np.int64), counts),
            np.repeat(loc[:, 0], counts), row)


def _load_embedder(d: Path, manifest: dict, backend, fix: str):
    """The embedder the vectors were made with: builtin from its IDF file, Ollama by
    model name (no server call), anything else from the backend passed in."""
    eid = manifest["embedder"]
    if backend is not None:
        emb = getattr(backend, "embedder", backend)
    elif eid.startswith(embedder.BUILTIN_EMBEDDER):
        name = str(manifest.get("idf_file"))
        try:
            emb = embedder.BuiltinEmbedder(np.load(d / name))
        except (OSError, ValueError, EOFError) as e:
            raise store.IndexProblem(f"{name} in {d} is unreadable ({_line(e)}): run "
                                     f"{fix}") from None
    else:
        from verso import models       # a model's index only (models imports the reader)
        if not (eid.startswith("ollama:") and hasattr(models, "OllamaEmbedder")):
            raise store.IndexProblem(f"index {d} was built with embedder {eid}, which needs "
                                     f"its backend to load: pass it, or run {fix}")
        emb = models.OllamaEmbedder(eid[len("ollama:"):], dim=manifest["dim"])
    if emb.id != eid or emb.dim != manifest["dim"]:
        raise store.IndexProblem(f"index {d} was built with embedder {eid} (dim "
                                 f"{manifest['dim']}), not {emb.id} (dim {emb.dim}): run {fix}")
    return emb


@contextmanager
def bulk():
    """Python's cycle collector paused while many acyclic objects are made (parsed
    records, chunk dicts): each full collection walks all of them (0.1 s of an edit at
    12k notes). Reference counting still frees everything; the collector runs again after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
