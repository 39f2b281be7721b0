"""ingest: a vault of notes -> an index (dates, duplicates, version families, chunks, vectors).

In:  a folder of .md/.txt notes and an optional verso.toml (ignore globs; per folder
     `versioned` and `privacy`, default private).
Out: an index dir (--index, else $VERSO_HOME, else ./.verso) of immutable segments
     (vectors, texts, per-row metadata of whole notes), the file records and a manifest
     naming the live segments and the tombstoned notes in each (format 3; see "on
     disk"). An ingest writes the notes it read into one new segment under new names
     (merging segments past MERGE_SEGMENTS / MERGE_SHARE), then replaces the manifest
     atomically, then removes what no manifest names: a crash leaves the previous index
     whole. One writer at a time: index_dir/lock holds its pid under a kernel lock; a
     dead writer's lock is taken over. load_index memory-maps and parses metadata only;
     a chunk's text is read when asked for.
Not: BM25 arrays, retrieval or question-time version choices (retrieve.py, version.py).
     Never writes inside the vault, and reads nothing outside it: symlinks are followed
     once, and only to targets inside the vault. A note that cannot be read (binary, too
     large, empty, unreadable, vanished) is skipped and listed with its reason.

Rules, decided by code:
- Date, first hit wins: filename; frontmatter `updated:` > `date:` > `created:`; a header
  line in the first HEADER_LINES body lines (`Updated: 2 July 2026`, `Last edited
  2026-07-02`, `Date: ...`, `# Title - October 10, 2026`); else mtime (date_source
  "mtime", weak). A month, ISO week (2026-W40) or quarter (Q3 2026) alone means its
  first day, unless the note's frontmatter or header gives a day inside it. 03.10.2026
  and 3/10/2026 are read only as verso.toml's date_order ("dmy"/"mdy") says; the default
  "ymd" reads only unambiguous dates. Impossible dates are not dates. Names are compared
  NFKC-folded, case-folded, with every Unicode dash as "-".
- Exact duplicates: same sha256 (files.json "sha256") of the whole text, frontmatter
  included, whitespace collapsed. Near-copies (word 5-shingle Jaccard >=
  NEAR_COPY_JACCARD) are duplicates only when both have the same real (non-mtime) date.
  The copy kept: the one without a copy marker, else the shorter path.
- Family: folder + name without dates, v1/v2/final/draft, (1)/copy/copy 2/backup/bak/old
  and separators. A name left empty ("2026-04-03.md") and files in `versioned = false`
  folders are their own family. Newest real date is latest; mtime never beats a real date.
- Dated sections: a `##`/`###` heading that is or starts with a date is an entry; its
  chunks carry section_date (= date) and entry_latest (true for the file's newest entry).
- Chunks follow headings (trail "Plan > Week 3"); short sections merge forward within one
  entry, long ones become line-aligned windows; table rows become "Header: value; ...".
  A "word" longer than MAX_WORD_CHARS (base64, minified code) is cut into pieces first.
- Chunks are embedded as "title\\nheading\\ntext"; the cache key (chunk "hash") is sha256
  of that text plus the embedder id. The builtin IDF is fitted on the first build and on
  --rebuild and reused by incremental runs (rebuild after large changes).

    python ingest.py VAULT [--index DIR] [--config FILE] [--json] [--rebuild] [--quiet]
"""

from __future__ import annotations

import argparse
import calendar
import codecs
import fnmatch
import functools
import gc
import hashlib
import json
import os
import re
import itertools
import shlex
import stat
import sys
import time
import tomllib
import unicodedata
import zlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np

import models
import textkit

FORMAT = 3                         # 3: + file records as a base and a delta; 2: segments
                                   # + tombstones; 1: one chunks.json
MAX_FILE_BYTES = 5 * 1024 * 1024   # larger notes are skipped ("too large")
CHUNK_WORDS = 180                  # most words in one chunk
MAX_WORD_CHARS = 200               # longer "words" (base64, minified code) are cut in pieces
OVERLAP = 40                       # words repeated between windows of a long section
MIN_CHUNK_WORDS = 30               # shorter sections merge into the next (same date)
NEAR_COPY_JACCARD = 0.9            # word 5-shingle similarity of a near-copy
SHINGLE = 5
HEADER_LINES = 15                  # body lines searched for an "Updated: ..." line
EMBED_BATCH = 256
TEXT_EXTS = (".md", ".txt")
SKIP_DIRS = ("attachments",)       # plus every hidden folder (.obsidian, .git, .trash)
CONFIG_NAME = "verso.toml"
FOLDER_KEYS = {"versioned": bool, "privacy": str}
LOCK_NAME = "lock"                 # index_dir/lock: the writing ingest's pid, flock'ed
COMMIT_WAIT = 5.0                  # seconds load_index waits for an ingest finishing its commit
LOAD_TRIES = 3                     # load_index re-reads a manifest a commit replaced meanwhile
MERGE_SEGMENTS = 4                 # more delta segments than this: they are merged into one
MERGE_SHARE = 0.25                 # delta + tombstoned rows above this share of the live
                                   # rows: everything is merged into one segment
DELTA_SHARE = 0.1                  # file records differing from the base above this share
                                   # of all records: a new base is written (else a delta)
ROWS = np.dtype([("end", "<i8"), ("crc", "<u4"), ("hash", "V32")])   # s<N>.rows.npy
SEG_FILES = ("vectors.npy", "rows.npy", "text", "chunks.json")
INDEX_FILE_RE = re.compile(   # every name an index dir may hold besides lock (see "on disk")
    r"^(?:(?P<seg>s(?P<n>\d+))\.(?:vectors\.npy|rows\.npy|text|chunks\.json|(?P<bm25>bm25[\w.-]*))"
    r"|[ge](?P<n2>\d+)\.(?:files\.json|delta\.json|near\.json|idf\.npy)"
    r"|manifest\.json|files\.json|chunks\.json"
    r"|vectors\.npy|idf\.npy|bm25\.npz|bm25_vocab\.json|.+\.prev|\..+\.tmp-[\d-]+)$")
_TMP_IDS = itertools.count()
PRIVACY = ("private", "shareable")
SCRATCH = ("_body", "_norm", "_date_order", "_reused", "_chunks", "_family", "_reread")
                                   # record keys of one run, never written
REUSE_RULES = 2                    # bump when reading/dating/chunking rules change: an
                                   # index made under other rules is not reused per file

MONTHS = textkit.MONTHS            # one month table for dating notes and for the reader
_MON = textkit.MONTH_PATTERN + r"\.?"
_YEAR = r"((?:19|20)\d\d)(?!\d)"
DATE_PATTERNS = [  # most specific first; group order in the second field
    (re.compile(r"(?<!\d)((?:19|20)\d\d)[-_.](\d{1,2})[-_.](\d{1,2})(?!\d)"), "ymd"),
    (re.compile(_MON + r"[\s_-]+(\d{1,2})(?:st|nd|rd|th)?,?[\s_-]+" + _YEAR, re.I), "mdy"),
    (re.compile(r"(?<![\da-z])(\d{1,2})(?:st|nd|rd|th)?[\s_-]+" + _MON + r",?[\s_-]+" + _YEAR,
                re.I), "dmy"),
    # 03.10.2026 or 3/10/2026: day-first or month-first only as the config's date_order says
    (re.compile(r"(?<![\d.])(\d{1,2})([./-])(\d{1,2})\2((?:19|20)\d\d)(?!\d)"), "num"),
    (re.compile(r"(?<![\da-z])((?:19|20)\d\d)[-_\s]?w(\d{1,2})(?![\da-z])", re.I), "yw"),
    (re.compile(r"(?<![\da-z])q([1-4])[\s_-]*((?:19|20)\d\d)(?!\d)", re.I), "qy"),
    (re.compile(r"(?<![\da-z])((?:19|20)\d\d)[\s_-]*q([1-4])(?![\da-z])", re.I), "yq"),
    (re.compile(r"(?<!\d)((?:19|20)\d\d)[-_](\d{1,2})(?!\d|[-_.]\d)"), "ym"),
    (re.compile(_MON + r"[\s_,-]*" + _YEAR, re.I), "my"),
]
DATE_ORDERS = ("ymd", "dmy", "mdy")   # config date_order; "ymd" reads no d/m/y digits
HEADER_RE = re.compile(r"^[\s>*_#-]*(?:last[\s_-]+)?(?:updated|edited|modified|revised|"
                       r"date|dated|created|written)\b", re.I)
FRONT_KEYS = ("updated", "date", "created")    # frontmatter date keys, in preference order
COPY_RE = re.compile(r"\(\d+\)|(?<![a-z])(copy|backup|bak|old)(?![a-z])", re.I)
COPY_N_RE = re.compile(r"\(\d+\)|(?<![a-z])copy[\s_-]+\d+(?!\d)")  # (1), macOS "copy 2"
VERSION_RE = re.compile(r"(?<![a-z0-9])v\d+(?:\.\d+)*(?![a-z0-9])")
MARKER_WORDS = {"final", "draft", "copy", "backup", "bak", "old"}
SEPARATORS_RE = re.compile(r"[\s_\-.,()\[\]]+")   # after _fold: every dash is "-"
HEADING_RE = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
FENCE_RE = re.compile(r"^\s*(```|~~~)")
TABLE_SEP_RE = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
WIKILINK_RE = re.compile(r"\[\[([^\]|#\n]*)(?:#[^\]|\n]*)?(?:\|[^\]\n]*)?\]\]")
TAG_RE = re.compile(r"(?<![\w&/#])#([A-Za-z][\w/-]*)")


class IndexProblem(Exception):
    """The index is missing, damaged or from another embedder; one line with the fix."""


class IndexBusy(RuntimeError):
    """Another live ingest holds the index lock."""


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
    stat: list = field(default_factory=list)    # _index_stat of the files it was read from
    segments: list = field(default_factory=list)  # the Segments, in manifest order
    where: dict = field(default_factory=dict)     # path -> [(segment, first row, rows)]
    base: tuple | None = None    # (name, sha, records) of the file records' base


def default_index_dir() -> Path:
    """$VERSO_HOME if set, else ./.verso under the current directory."""
    home = os.environ.get("VERSO_HOME")
    return Path(home).expanduser() if home else Path.cwd() / ".verso"


# ------------------------------------------------------------------ config and files

def _load_config(vault: Path, config=None) -> tuple[dict, Path | None]:
    path = Path(config).expanduser() if config else vault / CONFIG_NAME
    if not path.is_file():
        if config:
            raise ValueError(f"config file {path} not found")
        return {"ignore": [], "folders": {}, "date_order": "ymd"}, None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid TOML: {e}") from None
    for key in data:
        if key not in ("ignore", "folders", "date_order"):
            raise ValueError(f"{path}: unknown key {key!r} (known: ignore, folders, "
                             f"date_order)")
    date_order = data.get("date_order", "ymd")
    if date_order not in DATE_ORDERS:
        raise ValueError(f"{path}: date_order = {date_order!r} is invalid (ymd: only "
                         f"unambiguous dates; dmy: 03.10.2026 is 3 October; mdy: March 10)")
    ignore = data.get("ignore", [])
    if not isinstance(ignore, list) or not all(isinstance(g, str) for g in ignore):
        raise ValueError(f"{path}: ignore must be a list of glob strings")
    folders = {}
    for name, table in data.get("folders", {}).items():
        if not isinstance(table, dict):
            raise ValueError(f"{path}: folders.{name} must be a table like [folders.{name}]")
        for key, value in table.items():
            if key not in FOLDER_KEYS:
                raise ValueError(f"{path}: unknown key {key!r} in [folders.{name}] "
                                 f"(known: versioned, privacy)")
            if not isinstance(value, FOLDER_KEYS[key]) or (key == "privacy"
                                                           and value not in PRIVACY):
                raise ValueError(f"{path}: folders.{name}.{key} = {value!r} is invalid "
                                 f"(versioned: true/false; privacy: private/shareable)")
        folders[name.strip("/")] = table
    return {"ignore": ignore, "folders": folders, "date_order": date_order}, path.resolve()


def _folder_flags(rel: str, cfg: dict) -> dict:
    """{"private", "versioned"} of a note from the longest [folders.X] whose X is its
    folder or a prefix (remembered per folder in cfg["_memo"])."""
    parent = rel.rpartition("/")[0]
    memo = cfg.setdefault("_memo", {})
    flags = memo.get(parent)
    if flags is None:
        flags = memo[parent] = {
            "private": _setting_of(parent, cfg, "privacy", "private") == "private",
            "versioned": _setting_of(parent, cfg, "versioned", True)}
    return flags


def _setting_of(parent: str, cfg: dict, key: str, default):
    best = None
    for name, table in cfg["folders"].items():
        if key in table and (parent == name or parent.startswith(name + "/")):
            if best is None or len(name) > len(best[0]):
                best = (name, table[key])
    return default if best is None else best[1]


def _entry_name(entry) -> str:
    return entry.name


@functools.lru_cache(maxsize=16)
def _ignore_re(globs: tuple) -> re.Pattern:
    """One regex for the ignore globs (fnmatchcase each; "dir/" means "dir/**"; a
    leading "**/" also matches at the top)."""
    pats = []
    for g in globs:
        g = g + "**" if g.endswith("/") else g
        pats += [g] + ([g[3:]] if g.startswith("**/") else [])
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in pats) or "(?!)")


def _inside(path: str, vault: Path) -> bool:
    return path == str(vault) or path.startswith(str(vault) + os.sep)


def _stat_of(entry) -> list | None:
    """[size, mtime_ns] of a DirEntry or a path, None when it cannot be stat'ed."""
    try:
        st = entry.stat() if not isinstance(entry, str) else os.stat(entry)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


class _Walk:
    """One walk of a vault (see _scan): notes, their stats and what was passed over."""

    def __init__(self, vault: Path, cfg: dict, stats: dict):
        self.vault, self.cut, self.stats = vault, len(str(vault)) + 1, stats
        self.notes, self.skipped, self.seen = [], [], set()
        self.link_dirs, self.link_files = [], []
        self.real_notes = []             # (real folder, its notes' names): see follow()
        self.ignored = _ignore_re(tuple(cfg["ignore"])).match if cfg["ignore"] else None

    def rel(self, path: str) -> str:
        if len(path) < self.cut:
            return "."
        return path[self.cut:].replace(os.sep, "/") if os.sep != "/" else path[self.cut:]

    def walk(self, top: str) -> None:
        stack, seen, rel, ignored = [top], self.seen, self.rel, self.ignored
        notes, stats, link_dirs, link_files = (self.notes, self.stats, self.link_dirs,
                                               self.link_files)
        while stack:
            folder = stack.pop()
            real = os.path.realpath(folder)
            if real in seen:
                continue
            seen.add(real)
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=_entry_name)
            except OSError as e:
                self.skipped.append({"path": rel(folder) + "/", "reason": "unreadable "
                                     f"folder ({e.strerror or type(e).__name__})"})
                continue
            names = []
            for e in entries:
                if e.name.startswith("."):
                    continue
                try:
                    link, is_dir = e.is_symlink(), e.is_dir()
                except OSError:                  # a link loop onto itself
                    link, is_dir = True, False
                if is_dir:
                    if e.name.lower() not in SKIP_DIRS:
                        (link_dirs if link else stack).append(e.path)
                elif e.name.lower().endswith(TEXT_EXTS):
                    r = rel(e.path)
                    if ignored and ignored(r):
                        continue
                    if link:
                        link_files.append(e.path)
                    else:
                        notes.append(r)
                        stats[r] = _stat_of(e)
                        names.append(e.name)
            self.real_notes.append((real.rstrip(os.sep) + os.sep, names))

    def follow(self) -> None:
        """Symlinked folders (in path order: the first link wins), then symlinked notes
        whose target was not indexed at its real path already."""
        while self.link_dirs:
            path = min(self.link_dirs)
            self.link_dirs.remove(path)
            target = os.path.realpath(path)
            if not _inside(target, self.vault):
                self.skipped.append({"path": self.rel(path) + "/", "reason": "symlink to a "
                                     "folder outside the vault (not followed)"})
            elif target not in self.seen:
                self.walk(path)
        reals = ({folder + name for folder, names in self.real_notes for name in names}
                 if self.link_files else set())
        for path in sorted(self.link_files):
            target = os.path.realpath(path)
            if not _inside(target, self.vault):
                self.skipped.append({"path": self.rel(path), "reason": "symlink to a file "
                                     "outside the vault (not read)"})
            elif target not in reals:
                reals.add(target)
                self.notes.append(self.rel(path))
                self.stats[self.notes[-1]] = _stat_of(path)


def _scan(vault: Path, cfg: dict, stats: dict | None = None) -> tuple[list[str], list[dict]]:
    """Vault-relative note paths, sorted, and what was passed over [{path, reason}];
    stats, when given, gets path -> [size, mtime_ns] (or None) of every note, from the
    same walk (one stat per note, no Path objects: the harness does this per question).

    Real folders are walked first; then each symlinked folder once, under its link path,
    if its target is inside the vault and was not walked yet (so loops end, and a note
    reached both ways keeps its real path). A symlinked note counts once too. Links whose
    target lies outside the vault are not followed and are listed: the vault folder is
    the boundary of what Verso reads. Unreadable folders are listed, never fatal."""
    stats = {} if stats is None else stats
    w = _Walk(vault, cfg, stats)
    w.walk(str(vault))
    w.follow()
    w.notes.sort()
    ordered = {p: stats[p] for p in w.notes}    # path order, as the stamp hashes them
    stats.clear()
    stats.update(ordered)
    return w.notes, w.skipped


def _read(path: Path) -> tuple[str | None, os.stat_result | int, str]:
    """(text, its fstat, "") or (None, 0, reason). Opened once (no blocking on a pipe) and
    read up to MAX_FILE_BYTES, so a file that grows or vanishes meanwhile is still one
    answer. Decoding: UTF-16 with a BOM; NUL bytes otherwise mean binary; then UTF-8 (BOM
    ok), cp1252, and last UTF-8 with U+FFFD for the bad bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None, 0, "not a regular file"
            if st.st_size > MAX_FILE_BYTES:
                return None, 0, f"too large ({st.st_size} bytes > {MAX_FILE_BYTES})"
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        return None, 0, f"unreadable ({e.strerror or type(e).__name__})"
    if len(raw) > MAX_FILE_BYTES:
        return None, 0, f"too large (grew past {MAX_FILE_BYTES} bytes while read)"
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = raw.decode("utf-16", errors="replace")
    elif b"\0" in raw:
        return None, 0, "binary (NUL bytes)"
    else:
        text = None
        for enc in ("utf-8-sig", "cp1252"):
            try:
                text = raw.decode(enc)
                break
            except UnicodeDecodeError:
                pass
        text = raw.decode("utf-8", errors="replace") if text is None else text
    if not text.strip():
        return None, 0, "empty file"
    return text.replace("\r\n", "\n").replace("\r", "\n"), st, ""


# ----------------------------------------------------------------------- dating

def _fold(name: str) -> str:
    """A name as it is compared: NFKC, case folded, every Unicode dash or hyphen "-"
    ("Shop stats – April 2026" and "shop-stats-2026-04" then read alike)."""
    name = unicodedata.normalize("NFKC", name).casefold()
    return "".join("-" if unicodedata.category(ch) == "Pd" or ch == "\u2212" else ch
                   for ch in name)


def _span(groups, order: str, date_order: str = "ymd") -> tuple[date, date] | None:
    """(first day, last day) of what a date match names (a day, week, month or
    quarter), or None when it is no real date or its digit order is not known."""
    if order == "num":
        if date_order == "ymd":
            return None
        groups, order = (groups[0], groups[2], groups[3]), date_order
    parts = {}
    for key, value in zip(order, groups):    # casefold: re.I lets "ſep" match "sep"
        parts[key] = int(value) if value.isdigit() else MONTHS.get(value.casefold()[:3])
    if None in parts.values():
        return None
    y = parts["y"]
    try:
        if "w" in parts:
            first = date.fromisocalendar(y, parts["w"], 1)
            return first, first + timedelta(days=6)
        if "q" in parts:
            m = 3 * parts["q"] - 2
            return date(y, m, 1), date(y, m + 2, calendar.monthrange(y, m + 2)[1])
        if "d" in parts:
            day = date(y, parts["m"], parts["d"])
            return day, day
        return date(y, parts["m"], 1), date(y, parts["m"],
                                            calendar.monthrange(y, parts["m"])[1])
    except ValueError:
        return None


def _find_span(text: str, at_start: bool = False,
               date_order: str = "ymd") -> tuple[date, date] | None:
    """First valid date in text as (first day, last day), most specific form first;
    impossible ones are masked out so "31 Feb 2026" does not fall back to "Feb 2026"."""
    for rx, order in DATE_PATTERNS:
        for m in rx.finditer(text):
            found = _span(m.groups(), order, date_order)
            if found is None:
                text = text[:m.start()] + " " * (m.end() - m.start()) + text[m.end():]
            elif not at_start or m.start() == 0:
                return found
    return None


def _find_date(text: str, at_start: bool = False, date_order: str = "ymd") -> str | None:
    """The first day of the first valid date in text, ISO; None if there is none."""
    found = _find_span(text, at_start, date_order)
    return found[0].isoformat() if found else None


def _frontmatter(text: str) -> tuple[dict, str]:
    """(metadata, body) for a leading --- block of `key: value` lines; else ({}, text)."""
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    end = next((i for i in range(1, min(len(lines), 200)) if lines[i].strip() in ("---", "...")), 0)
    if not end:
        return {}, text
    meta, key = {}, None
    for line in lines[1:end]:
        m = re.match(r"^([A-Za-z_][\w-]*)\s*:\s*(.*)$", line)
        if m:
            key, value = m.group(1).lower(), m.group(2).strip()
            if value.startswith("[") and value.endswith("]"):
                value = [v.strip().strip("'\"") for v in value[1:-1].split(",") if v.strip()]
            meta[key] = value.strip("'\"") if isinstance(value, str) else value
        elif key and line.strip().startswith("- "):
            meta[key] = (meta[key] if isinstance(meta[key], list) else []) + [
                line.strip()[2:].strip().strip("'\"")]
    return meta, "\n".join(lines[end + 1:])


def _inner_date(meta: dict, body: str, date_order: str):
    """(span, source) of the note's own date: frontmatter, else a header line; or None."""
    for key in FRONT_KEYS:
        value = meta.get(key)
        found = _find_span(value, date_order=date_order) if isinstance(value, str) else None
        if found:
            return found, "frontmatter"
    for line in body.split("\n")[:HEADER_LINES]:
        if HEADER_RE.match(line) or line.startswith("# "):
            found = _find_span(line, date_order=date_order)
            if found:
                return found, "header"
    return None


def _date_of(stem: str, meta: dict, body: str, mtime: float,
             date_order: str = "ymd") -> tuple[str, str]:
    """(ISO date, date_source). The file name wins; when it names only a period (a
    month, week or quarter) and the note itself gives a day inside it, that day
    ("filename+header" / "filename+frontmatter"); a day outside it does not count."""
    named = _find_span(_fold(stem), date_order=date_order)
    inner = _inner_date(meta, body, date_order)
    if named:
        if named[0] != named[1] and inner and inner[0][0] == inner[0][1] \
                and named[0] <= inner[0][0] <= named[1]:
            return inner[0][0].isoformat(), f"filename+{inner[1]}"
        return named[0].isoformat(), "filename"
    if inner:
        return inner[0][0].isoformat(), inner[1]
    return datetime.fromtimestamp(mtime).date().isoformat(), "mtime"


# ------------------------------------------------------------ duplicates, families

def _family_name(stem: str) -> str:
    """"Rates v2 (1)", "rates_2026-06", "Rates – Sept 2026", "Rates copy 2" -> "rates"."""
    s = _fold(stem)
    for rx, _ in DATE_PATTERNS:     # every date form, d/m/y digits too, whatever the order
        s = rx.sub(" ", s)
    s = VERSION_RE.sub(" ", COPY_N_RE.sub(" ", s))
    return " ".join(w for w in SEPARATORS_RE.sub(" ", s).split() if w not in MARKER_WORDS)


def _keeper_key(rec: dict):
    stem = rec["path"].rsplit("/", 1)[-1].rsplit(".", 1)[0]    # Path(path).stem, faster
    low = stem.lower()         # COPY_RE needs one of these (every character it matches
    marked = ("(" in low or "copy" in low or "bak" in low or "old" in low  # ignoring
              or "backup" in low) and bool(COPY_RE.search(stem))      # case lowers to it)
    return (marked, len(rec["path"]), rec["path"])


def _shingles(words: list[str]) -> set:
    if len(words) < SHINGLE:
        return {tuple(words)}
    return set(zip(*(words[i:] for i in range(SHINGLE))))


def _mark_duplicates(recs: list[dict], norm_of, known=None) -> None:
    """Exact copies by hash; near-copies only among files with the same real date.
    norm_of(rec) gives a record's whitespace-collapsed text (a reused record's note is
    read only when its shingle count leaves a near-copy possible)."""
    groups = defaultdict(list)
    for r in recs:
        groups[("sha", r["sha256"])].append(r)
    for r in recs:
        if r["date_source"] != "mtime":
            groups[("date", r["date"])].append(r)
    for (kind, _), members in groups.items():
        if len(members) < 2:
            continue
        members = sorted((m for m in members if not m["duplicate_of"]), key=_keeper_key)
        sets = {}
        for i, keep in enumerate(members):
            if keep["duplicate_of"]:    # only later members are marked in its own pass
                continue
            low, high = NEAR_COPY_JACCARD * keep["shingles"], keep["shingles"]
            for other in members[i + 1:]:
                if other["duplicate_of"]:
                    continue
                if kind == "sha":
                    other["duplicate_of"] = keep["path"]
                    continue
                n = other["shingles"]     # _near_copy's first test, here: most pairs end
                if n < low or high < NEAR_COPY_JACCARD * n:  # on it (19k at 12k notes)
                    continue
                if _near_copy(keep, other, sets, norm_of, known):
                    other["duplicate_of"] = keep["path"]


def _near_copy(a: dict, b: dict, sets: dict, norm_of, known=None) -> bool:
    """Word-shingle Jaccard >= NEAR_COPY_JACCARD; the shingle counts rule most pairs out.
    known: {"old": {pair: result}, "new": {}}: the last run's results stand for two
    notes reused unread (same size and mtime); every result goes into "new"."""
    if min(a["shingles"], b["shingles"]) < NEAR_COPY_JACCARD * max(a["shingles"],
                                                                   b["shingles"]):
        return False
    pair = "\t".join(sorted((a["path"], b["path"])))
    if known is not None and a.get("_reused") and b.get("_reused") and pair in known["old"]:
        known["new"][pair] = known["old"][pair]
        return known["new"][pair]
    for r in (a, b):
        if r["path"] not in sets:
            sets[r["path"]] = _shingles(norm_of(r).lower().split())
    x, y = sets[a["path"]], sets[b["path"]]
    near = len(x & y) / len(x | y) >= NEAR_COPY_JACCARD
    if known is not None:
        known["new"][pair] = near
    return near


def _mark_families(recs: list[dict]) -> None:
    fams = defaultdict(list)
    for r in recs:
        family = r.pop("_family", None)  # reused: same name, rules and config (reuse key)
        if family is None:
            folder, _, name = r["path"].rpartition("/")
            norm = _family_name(Path(name).stem) if r["versioned"] else ""
            family = f"{folder}/{norm}" if norm and folder else (norm or r["path"])
        r["family"] = family
        if not r["duplicate_of"]:
            fams[family].append(r)
    for members in fams.values():
        if len(members) == 1:           # most families: one file, the latest of itself
            members[0]["is_latest"] = True
            continue
        pool = [m for m in members if m["date_source"] != "mtime"] or members
        top = max(m["date"] for m in pool)
        for m in pool:
            m["is_latest"] = m["date"] == top


def _link_name(raw: str) -> str:
    """A wikilink target, case and note extension dropped: "Ana.md" -> "ana"."""
    return raw.strip().lower().removesuffix(".md").removesuffix(".txt")


def _link_key(raw: str) -> str | None:
    """A wikilink target as _resolve_links looks it up (None: an embed of an image or
    another attachment, or empty)."""
    key = _link_name(raw)
    ext = os.path.splitext(key)[1]
    return None if not key or (ext and ext[1:].isalpha()) else key


def _path_keys(path: str) -> tuple[str, str]:
    """The names a wikilink finds a note by: its path and its stem, lower case, without
    the extension ("people/Ana.md" -> "people/ana", "ana")."""
    no_ext = path.rsplit(".", 1)[0].lower()
    return no_ext, no_ext.rsplit("/", 1)[-1]


def _resolve_links(recs: list[dict], changed: set | None = None) -> None:
    """Wikilink targets -> vault-relative paths by stem or path (case-insensitive).
    changed: the paths that appeared, went or changed duplicate status since the last
    run (None: every record is resolved). A reused record's links then stand as they
    were unless one of its links names such a path (by path or stem): only those names
    have other candidates now, and only the names the resolved links ask for are
    looked up."""
    if changed is None:
        todo = recs
    else:
        hit = {k for p in changed for k in _path_keys(p)}
        todo = [r for r in recs if not r.get("_reused") or (hit and not hit.isdisjoint(
            map(_link_name, r["wikilinks"])))]    # a superset of _link_key's: embeds too
    wanted = ({k for r in todo for k in map(_link_key, r["wikilinks"])}
              if changed is not None else None)
    by_key = defaultdict(list)
    for r in recs:
        for key in _path_keys(r["path"]):
            if wanted is None or key in wanted:
                by_key[key].append(r)
    for r in todo:
        links, folder = [], r["path"].rpartition("/")[0]
        for raw in r["wikilinks"]:
            key = _link_key(raw)
            if key is None:
                continue  # embeds of images and other attachments
            hits = sorted(by_key.get(key, []), key=lambda h: (
                bool(h["duplicate_of"]), h["path"].rpartition("/")[0] != folder, len(h["path"])))
            target = hits[0]["path"] if hits else raw.strip()
            if target not in links:
                links.append(target)
        r["links"] = links


class _Stale(Exception):
    """A reused note changed between its stat and a later read: catalogue it afresh."""


def _record(rel: str, text: str, st, cfg: dict) -> dict:
    """A files.json record (plus _body/_norm) for a note read now."""
    meta, body = _frontmatter(text)
    norm = " ".join(text.split())
    day, source = _date_of(Path(rel).stem, meta, body, st.st_mtime, cfg["date_order"])
    h1 = next((m.group(2) for m in map(HEADING_RE.match, body.split("\n"))
               if m and m.group(1) == "#"), None)
    tags = meta.get("tags") or []
    tags = tags.replace(",", " ").split() if isinstance(tags, str) else tags
    return {
        "path": rel, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
        "sha256": hashlib.sha256(norm.encode()).hexdigest(),
        "date": day, "date_source": source, "family": rel, "is_latest": False,
        "duplicate_of": None, **_folder_flags(rel, cfg),
        "tags": sorted({t.lstrip("#") for t in tags} | set(TAG_RE.findall(body))),
        "title": str(meta.get("title") or h1 or Path(rel).stem),
        "wikilinks": WIKILINK_RE.findall(text),
        "shingles": len(_shingles(norm.lower().split())), "_body": body, "_norm": norm,
        "_date_order": cfg["date_order"]}


def _reused(old: dict, chunks, cfg: dict) -> dict:
    """A previous record of an unchanged note, with everything that depends on other
    notes or on the config reset, and its previous chunks (None: it had none, being a
    duplicate) under _chunks."""
    rel = old["path"]
    rec = {**old, "family": rel, "is_latest": False, "duplicate_of": None,
           **_folder_flags(rel, cfg), "_reused": True,
           "_date_order": cfg["date_order"], "_family": old["family"]}
    if chunks is not None:
        rec["_chunks"] = chunks
    return rec


def _text_of(vault: Path, rec: dict) -> str:
    """A record's collapsed text; a reused note is read now (_Stale if it changed)."""
    if "_norm" not in rec:
        text, st, _ = _read(vault / rec["path"])
        if text is None or [st.st_size, st.st_mtime_ns] != [rec["size"], rec["mtime_ns"]]:
            raise _Stale(rec["path"])
        rec["_body"], rec["_norm"] = _frontmatter(text)[1], " ".join(text.split())
        rec["_reread"] = True
    return rec["_norm"]


def _catalogue(vault: Path, paths: list[str], cfg: dict, progress=None, stats=None,
               old=None, known=None):
    """File records (files.json entries plus _body/_norm, or _chunks when reused) and
    skipped [{path, reason}]. old: path -> (previous record, its chunks or None), reused
    when stats (path -> [size, mtime_ns]) match the record; {} reads every note."""
    recs, skipped, old, stats = [], [], old or {}, stats or {}
    for n, rel in enumerate(paths):
        if progress and n % 50 == 0:
            progress("reading", n, len(paths))
        prev = old.get(rel)
        if prev and stats.get(rel) == [prev[0].get("size"), prev[0].get("mtime_ns")]:
            recs.append(_reused(prev[0], prev[1], cfg))
            continue
        text, st, reason = _read(vault / rel)
        if text is None:
            skipped.append({"path": rel, "reason": reason})
            continue
        recs.append(_record(rel, text, st, cfg))
    _mark_duplicates(recs, lambda r: _text_of(vault, r), known)
    for r in recs:                      # a former duplicate needs chunks of its own now
        if not r["duplicate_of"] and "_body" not in r and "_chunks" not in r:
            _text_of(vault, r)
    _mark_families(recs)
    before = {p: bool(v[0]["duplicate_of"]) for p, v in old.items()}
    now = {r["path"]: bool(r["duplicate_of"]) for r in recs}
    _resolve_links(recs, {p for p in before.keys() | now.keys() if before.get(p) != now.get(p)}
                   if old else None)
    return recs, skipped


# --------------------------------------------------------------------- chunking

def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _tables(text: str) -> str:
    """Markdown table rows -> "Header: value; Header: value." lines."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if "|" in lines[i] and "|" in nxt and TABLE_SEP_RE.match(nxt):
            head, i = _cells(lines[i]), i + 2
            while i < len(lines) and "|" in lines[i]:
                pairs = [f"{h}: {v}" if h else v
                         for h, v in zip(head, _cells(lines[i])) if v]
                if pairs:
                    out.append("; ".join(pairs).rstrip(".") + ".")
                i += 1
        else:
            out.append(lines[i])
            i += 1
    return "\n".join(out)


def _sections(body: str, date_order: str = "ymd") -> list[tuple[str, str | None, str,
                                                               str]]:
    """(heading trail, section date, last heading, text) per heading outside code."""
    out, trail, lines, sdate, slevel, fence = [], [], [], None, 0, False

    def flush():
        out.append((" > ".join(t for _, t in trail), sdate, trail[-1][1] if trail else "",
                    _tables("\n".join(lines)).strip()))

    for line in body.split("\n"):
        fence = fence != bool(FENCE_RE.match(line))
        m = None if fence else HEADING_RE.match(line)
        if not m:
            lines.append(line)
            continue
        flush()
        lines, level, title = [], len(m.group(1)), m.group(2).strip()
        trail = [(lv, t) for lv, t in trail if lv < level] + [(level, title)]
        if sdate and level <= slevel:
            sdate = None
        found = (_find_date(title.lstrip("*_ "), True, date_order) if level in (2, 3)
                 else None)
        if found:
            sdate, slevel = found, level
    flush()
    return out


def _windows(text: str) -> list[str]:
    """Whole lines packed into windows of <= CHUNK_WORDS words; each window starts with
    the previous one's last lines (or last words) up to OVERLAP words. A "word" longer
    than MAX_WORD_CHARS is cut into pieces of that size first."""
    units = []                                   # (line, words); blank runs kept once
    for line in text.split("\n"):
        words = line.split()
        if any(len(w) > MAX_WORD_CHARS for w in words):    # no chunk of one 2 MB "word"
            words = [w[i:i + MAX_WORD_CHARS] for w in words
                     for i in range(0, len(w), MAX_WORD_CHARS)]
            line = " ".join(words)
        if len(words) > CHUNK_WORDS:             # a very long line: word windows
            units += [(" ".join(words[i:i + CHUNK_WORDS]), len(words[i:i + CHUNK_WORDS]))
                      for i in range(0, len(words) - OVERLAP, CHUNK_WORDS - OVERLAP)]
        elif words or (units and units[-1][1]):
            units.append((line, len(words)))
    out, cur, count = [], [], 0
    for unit in units:
        if cur and count + unit[1] > CHUNK_WORDS:
            out.append("\n".join(u for u, _ in cur).strip())
            keep, kept = [], 0
            for u in reversed(cur):
                if kept + u[1] > OVERLAP:
                    break
                keep, kept = [u] + keep, kept + u[1]
            if not kept:                         # last line too long: its last words,
                tail = next(u for u, n in reversed(cur) if n).split()[-OVERLAP:]
                if unit[0].split()[:len(tail)] != tail:   # unless the unit repeats them
                    keep, kept = [(" ".join(tail), len(tail))], len(tail)
            cur, count = (keep, kept) if kept + unit[1] <= CHUNK_WORDS else ([], 0)
        cur.append(unit)
        count += unit[1]
    out.append("\n".join(u for u, _ in cur).strip())
    return [w for w in out if w]


def _pieces(body: str, date_order: str = "ymd") -> list[tuple[str, str | None, str]]:
    """(heading, section_date, text) chunks of one file."""
    merged = []
    for heading, sdate, last, text in _sections(body, date_order):
        prev = merged[-1] if merged else None
        prev_words = len(prev[2].split()) if prev else 0
        if prev and prev[1] == sdate and not prev[2]:
            merged[-1] = (heading, sdate, text)
        elif (prev and prev[1] == sdate and prev_words < MIN_CHUNK_WORDS
              and prev_words + len(f"{last} {text}".split()) <= CHUNK_WORDS):
            merged[-1] = (prev[0], sdate, f"{prev[2]}\n\n{last}\n{text}".strip())
        else:
            merged.append((heading, sdate, text))
    out = [(h, d, w) for h, d, t in merged if t for w in _windows(t)]
    return out or ([("", None, body.strip())] if body.strip() else [])


def _chunk_dict(cid: int, r: dict, heading: str, sdate, entry_latest, text: str,
                digest: str) -> dict:
    """A chunk as the pipeline sees it: its own fields plus those of its file's record
    (the one home of this shape: a new build and a loaded index make it here)."""
    return {"id": cid, "path": r["path"], "heading": heading, "section_date": sdate,
            "date": sdate or r["date"],
            "date_source": "section" if sdate else r["date_source"],
            "family": r["family"], "is_latest": r["is_latest"], "entry_latest": entry_latest,
            "private": r["private"], "text": text, "hash": digest}


def _chunk_all(recs: list[dict]) -> list[dict]:
    """The chunks of the records read now (duplicates have none), with _embed text."""
    chunks = []
    for r in recs:
        if r["duplicate_of"]:
            continue
        pieces = _pieces(r["_body"], r.get("_date_order", "ymd"))
        newest = max((d for _, d, _ in pieces if d), default=None)
        for heading, sdate, text in pieces:
            chunks.append(_chunk_dict(len(chunks), r, heading, sdate,
                                      None if sdate is None else sdate == newest, text, ""))
            chunks[-1]["_embed"] = f"{r['title']}\n{heading}\n{text}"
    return chunks


# ------------------------------------------------------------------------- vectors

def _previous(index_dir: Path, vault: Path, backend, rebuild: bool, loaded=None):
    """(backend, is builtin, previous Index or None, note). loaded: the index already
    loaded for a builtin backend by _unchanged, so it is not parsed twice."""
    builtin = backend in (None, "builtin") or isinstance(
        getattr(backend, "embedder", None), models.BuiltinEmbedder)
    if isinstance(backend, str) and not builtin:
        backend = models.load_backend(backend)
    prev, note = None, ""
    if not rebuild and (index_dir / "manifest.json").exists():
        try:
            prev = loaded if loaded is not None and builtin else load_index(
                index_dir, None if builtin else backend)
        except (IndexProblem, models.BackendError) as e:
            note = _old_format(index_dir) or f"previous index unusable ({e}); rebuilt"
        if prev and prev.manifest.get("vault") != str(vault):
            prev, note = None, "previous index was for another vault; rebuilt"
    return backend, builtin, prev, note


def _old_format(index_dir: Path) -> str:
    """The one line for an index an older Verso wrote, else ""."""
    try:
        old = json.loads((index_dir / "manifest.json").read_bytes()).get("format")
    except (OSError, ValueError, AttributeError):
        return ""
    if type(old) is int and old < FORMAT:
        return f"index format {old} is older than this Verso's ({FORMAT}); rebuilt"
    return ""


def _embedder_for(backend, builtin: bool, prev, note: str, texts: list[str]):
    """(embedder, previous Index to reuse vectors from or None, note, backend name)."""
    name = "builtin" if builtin else backend.name
    if not builtin:
        emb = backend.embedder
    elif prev and isinstance(prev.embedder, models.BuiltinEmbedder):
        emb = prev.embedder            # keep the fitted IDF: unchanged chunks keep their ids
    else:
        emb = models.BuiltinEmbedder.fit(texts)
    if prev and prev.embedder.id != emb.id:
        prev, note = None, f"embedder changed to {emb.id}; everything re-embedded"
    return emb, prev, note, name


def _reuse_key(cfg_path) -> list:
    """What per-file reuse depends on besides the note itself: the rules and the config
    file (its stat). A previous index with another key is not reused per file."""
    return [REUSE_RULES, MAX_FILE_BYTES, CHUNK_WORDS, MAX_WORD_CHARS, OVERLAP,
            MIN_CHUNK_WORDS, SHINGLE, HEADER_LINES,
            str(cfg_path) if cfg_path else None, _stat(Path(cfg_path)) if cfg_path else None]


def _old_records(prev, key: list) -> dict:
    """path -> (previous record, its live rows (segment, first row, rows) or None for a
    duplicate) when prev was built under the same reuse key, else {}."""
    if prev is None or prev.manifest.get("reuse") != key:
        return {}
    where = prev.where
    return {f["path"]: (f, where[f["path"]][0] if f["path"] in where else None)
            for f in prev.files}


def _near_pairs(prev) -> dict:
    """The last run's near-copy results {"a\tb": bool} (see _near_copy); {} if unreadable."""
    try:
        data = json.loads((prev.dir / prev.manifest["near_file"]).read_bytes())
        return dict(data["pairs"]) if data.get("format") == FORMAT else {}
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
            raise models.BackendError(f"embedder {emb.id} returned shape {rows.shape}, expected "
                               f"({len(batch)}, {emb.dim})")
        vectors[batch] = rows
    return vectors, len(todo)


def _segments_after(prev, live: list[str], keep: dict, new: dict) -> tuple[list, dict, list]:
    """(old segments kept, their tombstones {name: [paths]}, pieces of the one new
    segment in row order). live: the paths with chunks, in path order; keep: path -> old
    rows left in place; new: path -> its new _Piece. Deltas are merged when they pass a
    count (MERGE_SEGMENTS), everything into one segment when delta and dead rows pass
    MERGE_SHARE of the live rows."""
    segs = list(prev.segments) if prev is not None else []
    if not segs:
        return [], {}, [new[p] for p in live]
    total = sum(keep[p][2] if p in keep else len(new[p].rows) for p in live)
    here = [{p for p in keep if keep[p][0] == s} for s in range(len(segs))]
    dead_rows = sum(n for s, seg in enumerate(segs) for p, _, n in seg.files
                    if p not in here[s])
    delta_rows = sum(len(seg.rows) for seg in segs[1:]) + sum(len(x.rows) for x in new.values())
    if delta_rows + dead_rows > MERGE_SHARE * max(total, 1):
        return [], {}, [new[p] if p in new else _old_piece(segs[keep[p][0]], p, *keep[p][1:])
                        for p in live]
    stay = range(len(segs))
    if len(segs) - 1 + bool(new) > MERGE_SEGMENTS:        # the deltas into one
        stay = [0]
        new = {p: new[p] if p in new else _old_piece(segs[keep[p][0]], p, *keep[p][1:])
               for p in live if p in new or keep[p][0] != 0}
    kept, dead = [], {}
    for s in stay:
        gone = sorted(p for p, _, _ in segs[s].files if p not in here[s])
        if len(gone) < len(segs[s].files):             # a segment left with no note goes
            kept.append(s)
            if gone:
                dead[segs[s].name] = gone
    return kept, dead, [new[p] for p in live if p in new]


def _next_gen(index_dir: Path, prev_manifest: dict | None) -> int:
    """A number no file of the index dir uses yet."""
    used = [int(m.group("n")) for p in index_dir.iterdir()
            if (m := INDEX_FILE_RE.match(p.name)) and m.group("n")]
    return max(used + [int((prev_manifest or {}).get("gen") or 0)]) + 1


# --------------------------------------------------------------------- on disk
#
# index_dir/manifest.json names everything live and is replaced last (atomically):
#   s<N>.vectors.npy  a segment: float32 [rows, dim], one row per chunk of whole notes
#   s<N>.rows.npy     per row: end offset of its text in s<N>.text, crc32, sha256 (hash)
#   s<N>.text         the rows' texts, UTF-8, back to back (read only when asked for)
#   s<N>.chunks.json  per row heading, section_date, entry_latest; per note [path, row, n]
#   s<N>.bm25-*       the segment's BM25 postings and its tombstones' document
#                     frequencies (retrieve.py, on the first question)
#   g<N>.files.json   the base of the file records; g<N>.delta.json the records now, as
#                     positions in the base or the records that differ (see _files_out)
#   e<N>.idf.npy      the builtin embedder's IDF
# A segment is never rewritten: an ingest writes new files, then the manifest, whose
# "dead" lists the notes of each segment replaced or deleted since (tombstones). Files
# no manifest names are removed after the commit, or by the next ingest (under the lock).

def _json_bytes(obj) -> bytes:
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


def _new_piece(path: str, chunks: list[dict], vectors: np.ndarray) -> _Piece:
    blobs = [c["text"].encode("utf-8") for c in chunks]
    rows = np.zeros(len(blobs), ROWS)
    rows["end"] = np.cumsum([len(b) for b in blobs])
    rows["crc"] = [zlib.crc32(b) for b in blobs]
    rows["hash"] = [bytes.fromhex(c["hash"]) for c in chunks]
    return _Piece(path, vectors, b"".join(blobs), rows, [c["heading"] for c in chunks],
                  [c["section_date"] for c in chunks], [c["entry_latest"] for c in chunks])


def _old_piece(seg, path: str, start: int, count: int) -> _Piece:
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
    meta = _json_bytes({"format": FORMAT, "files": files,
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


def _recover(index_dir: Path) -> str:
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


def _commit(index_dir: Path, manifest: dict, files: list, pieces_by_seg: list,
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
        write_atomic(written[-1], _json_bytes({"format": FORMAT, "pairs": near}))
        for name, raw in manifest.pop("_files"):
            written.append(index_dir / name)
            write_atomic(written[-1], raw)
        write_atomic(index_dir / "manifest.json", json.dumps(manifest, indent=1))
    except BaseException:
        for p in written:
            p.unlink(missing_ok=True)
        raise
    _collect(index_dir, manifest)


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


def _holder(index_dir: Path) -> int | None:
    """The pid of a live ingest writing index_dir, or None."""
    try:
        pid = int((index_dir / LOCK_NAME).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


@contextmanager
def _lock(index_dir: Path, wait: float = 0.0):
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


def _line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:160]


def _fix(index_dir: Path, vault=None) -> str:
    default = index_dir == default_index_dir().resolve()
    extra = "" if default else f" --index {shlex.quote(str(index_dir))}"
    return f"python ingest.py {shlex.quote(vault) if vault else 'VAULT'}{extra} --rebuild"


def _read_json(index_dir: Path, name: str, key: str, vault=None):
    try:
        raw = (index_dir / name).read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as e:
        raise IndexProblem(f"{name} in {index_dir} is unreadable ({type(e).__name__}): "
                           f"run {_fix(index_dir, vault)}") from None
    if not vault and isinstance(data, dict) and isinstance(data.get("vault"), str):
        vault = data["vault"]
    if not isinstance(data, dict) or data.get("format") != FORMAT or key not in data:
        raise IndexProblem(f"{name} in {index_dir} has unknown format "
                           f"{data.get('format') if isinstance(data, dict) else '?'} "
                           f"(this Verso reads {FORMAT}): run {_fix(index_dir, vault)}")
    return data, raw


def built_from(index_dir=None) -> tuple[str, str] | None:
    """(vault folder, creation time) recorded by the index in index_dir (default
    default_index_dir()); None when no index is there. Read from the manifest alone, so
    an index of another format still says where it came from."""
    d = Path(index_dir or default_index_dir()).expanduser().resolve()
    if not (d / "manifest.json").exists():
        return None
    try:
        manifest = json.loads((d / "manifest.json").read_bytes())
        return str(manifest["vault"]), str(manifest.get("created") or "an unknown date")
    except (OSError, ValueError, KeyError, TypeError):
        raise IndexProblem(f"the index in {d} is damaged and does not say which vault it "
                           f"was built from: run python ingest.py YOUR_NOTES --index {d} "
                           f"--rebuild") from None
@dataclass
class Segment:
    """One segment, memory-mapped: rows of chunks of whole notes."""
    name: str
    files: list                  # [[path, first row, rows]] in row order
    heading: list
    section_date: list
    entry_latest: list
    vectors: np.ndarray          # float32 [rows, dim] (memory map)
    rows: np.ndarray             # ROWS [rows] (memory map)
    blob: object                 # the texts: a _Text (b"" when empty)
    where: str                   # "s3.text in DIR", for errors
    fix: str                     # the command that rebuilds the index

    def text(self, r: int) -> str:
        start = int(self.rows["end"][r - 1]) if r else 0
        raw = bytes(self.blob[start:int(self.rows["end"][r])])
        if zlib.crc32(raw) != int(self.rows["crc"][r]):
            raise IndexProblem(f"{self.where} does not match its rows (edited or damaged): "
                               f"run {self.fix}")
        return raw.decode("utf-8")

    def digest(self, r: int) -> str:
        return bytes(self.rows["hash"][r]).hex()

    def row_paths(self) -> list[str]:
        return [p for p, _, n in self.files for _ in range(n)]


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
            c = self.memo[i] = _chunk_dict(i, self.files[self.file_of[i]], seg.heading[r],
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
            values = np.array([f[key] for f in self.files] + [None], dtype=object)[:-1]
            return values[self.file_of].tolist()
        if key in ("heading", "section_date", "entry_latest"):
            out = np.empty(len(self), dtype=object)
            for s, seg in enumerate(self.segments):
                at = self.seg_of == s
                out[at] = np.array(getattr(seg, key) + [None], dtype=object)[:-1][self.row[at]]
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


def load_index(index_dir=None, backend=None) -> Index:
    """The index in index_dir (default_index_dir()), checked: format, the files and
    segments the manifest names, vector rows and dim, and the embedder. Texts are read
    (and checked) only when a chunk is asked for. `backend` supplies the embedder of a
    non-builtin index. An ingest that commits meanwhile is followed to its new manifest."""
    d = Path(index_dir or default_index_dir()).expanduser().resolve()
    if not (d / "manifest.json").exists():
        raise IndexProblem(f"no index in {d}: run python ingest.py VAULT"
                           + ("" if d == default_index_dir().resolve() else f" --index {d}"))
    for attempt in range(LOAD_TRIES):
        seen = _manifest_bytes(d)
        try:
            with _bulk():
                return _load(d, backend)
        except IndexProblem:
            if attempt + 1 < LOAD_TRIES and _manifest_bytes(d) != seen:
                continue                       # a commit replaced the files: read anew
            if (pid := _holder(d)) is not None:
                raise IndexProblem(f"an ingest (pid {pid}) is writing {d}: try again when "
                                   "it finishes") from None
            raise


def _manifest_bytes(d: Path) -> bytes:
    try:
        return (d / "manifest.json").read_bytes()
    except OSError:
        return b""


def _index_stat(d: Path) -> list:
    """[name, size, mtime_ns] of every file in the index dir but the lock and temp files:
    an equal list means the files on disk are the ones that were read (a commit, a merge
    or a damaged file all show as a change)."""
    try:
        entries = list(os.scandir(d))
    except OSError:
        return []
    out = []
    for e in entries:
        if e.name != LOCK_NAME and not e.name.startswith(".") and e.is_file():
            st = e.stat()
            out.append([e.name, st.st_size, st.st_mtime_ns])
    return sorted(out)


def _load(d: Path, backend) -> Index:
    stat = _index_stat(d)              # before reading: a later replacement shows as a change
    manifest, _ = _read_json(d, "manifest.json", "embedder")
    vault = manifest.get("vault") if isinstance(manifest.get("vault"), str) else None
    fix = _fix(d, vault)
    dim = manifest.get("dim")
    if not isinstance(manifest["embedder"], str) or type(dim) is not int or dim < 1:
        raise IndexProblem(f"manifest.json in {d} has a bad embedder or dim "
                           f"({manifest['embedder']!r}, {dim!r}): run {fix}")
    try:
        names = [(s["name"], s["rows"], s["sha"]) for s in manifest["segments"]]
        dead = {k: set(v) for k, v in manifest["dead"].items()}
        files_file = str(manifest["files_file"])
    except (KeyError, TypeError, AttributeError):
        raise IndexProblem(f"manifest.json in {d} lacks its segments or files: run "
                           f"{fix}") from None
    base, files = _load_files(d, manifest, files_file, vault, fix)
    segments = [_load_segment(d, name, rows, sha, dim, vault) for name, rows, sha in names]
    where = _live_notes(segments, dead)
    file_of, seg_of, row = _layout(d, files, where, fix)
    embedder = _load_embedder(d, manifest, backend, fix)
    idx = Index(d, manifest, files, _Chunks(files, segments, file_of, seg_of, row),
                _Vectors([s.vectors for s in segments], seg_of, row, dim),
                {f["path"]: f for f in files}, embedder, stat=stat)
    idx.segments, idx.where, idx.base = segments, where, base
    return idx


def _load_files(d: Path, manifest: dict, files_file: str, vault, fix: str):
    """((base name, its sha, its records), the file records): the base, with the delta
    the manifest names (if any) applied; each file checked against its digest."""
    data, raw = _read_json(d, files_file, "files", vault)
    if hashlib.sha256(raw).hexdigest() != manifest.get("files_sha"):
        raise IndexProblem(f"{files_file} in {d} does not match its manifest (edited, or an "
                           f"ingest was interrupted): run {fix}")
    base = (files_file, manifest["files_sha"], data["files"])
    name = manifest.get("files_delta")
    if not name:
        return base, data["files"]
    delta, raw = _read_json(d, str(name), "files", vault)
    recs, n = data["files"], len(data["files"])
    try:
        ok = (hashlib.sha256(raw).hexdigest() == manifest.get("delta_sha")
              and delta.get("base") == files_file)
        files = [recs[e] if type(e) is int and 0 <= e < n else e if type(e) is dict
                 else None for e in delta["files"]] if ok else [None]
    except TypeError:
        files = [None]
    if None in files:
        raise IndexProblem(f"{name} in {d} does not match its manifest (edited, or an "
                           f"ingest was interrupted): run {fix}")
    return base, files


def _mapped(path: Path, fix: str, dtype=None, shape=None):
    """np.load(mmap) of a .npy, checked against dtype and shape (one line if not)."""
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise IndexProblem(f"{path.name} in {path.parent} is unreadable ({_line(e)}): run "
                           f"{fix}") from None
    if arr.dtype != dtype or arr.shape != shape:
        raise IndexProblem(f"{path.name} in {path.parent} has shape {arr.shape} {arr.dtype}, "
                           f"expected {shape} {np.dtype(dtype)}: run {fix}")
    return arr


def _load_segment(d: Path, name: str, n: int, sha: str, dim: int, vault) -> Segment:
    fix = _fix(d, vault)
    meta, raw = _read_json(d, f"{name}.chunks.json", "files", vault)
    if hashlib.sha256(raw).hexdigest() != sha:
        raise IndexProblem(f"{name}.chunks.json in {d} does not match its manifest (edited, "
                           f"or an ingest was interrupted): run {fix}")
    vectors = _mapped(d / f"{name}.vectors.npy", fix, np.float32, (n, dim))
    rows = _mapped(d / f"{name}.rows.npy", fix, ROWS, (n,))
    text = d / f"{name}.text"
    try:
        size = text.stat().st_size
        blob = _Text(text) if size else b""
    except (OSError, ValueError) as e:
        raise IndexProblem(f"{name}.text in {d} is unreadable ({_line(e)}): run "
                           f"{fix}") from None
    if size != (int(rows["end"][-1]) if n else 0) or not all(
            len(meta.get(k) or []) == n for k in ("heading", "section_date", "entry_latest")):
        raise IndexProblem(f"{name}.text in {d} does not match its rows (edited or "
                           f"damaged): run {fix}")
    return Segment(name, meta["files"], meta["heading"], meta["section_date"],
                   meta["entry_latest"], vectors, rows, blob, f"{name}.text in {d}", fix)


def _live_notes(segments: list, dead: dict) -> dict:
    """path -> [(segment, first row, rows)] of every note not tombstoned (one each in a
    whole index)."""
    where = {}
    for s, seg in enumerate(segments):
        gone = dead.get(seg.name, ())
        for path, start, count in seg.files:
            if path not in gone:
                where.setdefault(path, []).append((s, start, count))
    return where


def _layout(d: Path, files: list, where: dict, fix: str):
    """(file_of, seg_of, row): for each live chunk, in full-build order (notes by path,
    then their rows), its file's position in files, its segment and its row there."""
    live = [(j, f["path"]) for j, f in enumerate(files) if not f.get("duplicate_of")]
    if len(where) != len(live) or any(len(where.get(p, ())) != 1 for _, p in live):
        raise IndexProblem(f"the segments in {d} do not match its files (a note missing or "
                           f"indexed twice): run {fix}")
    loc = np.array([where[p][0] for _, p in live], dtype=np.int64).reshape(-1, 3)
    counts = loc[:, 2]
    first = np.cumsum(counts) - counts                 # each note's first chunk id
    row = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(loc[:, 1] - first, counts)
    return (np.repeat(np.array([j for j, _ in live], dtype=np.int64), counts),
            np.repeat(loc[:, 0], counts), row)


def _load_embedder(d: Path, manifest: dict, backend, fix: str):
    """The embedder the vectors were made with: builtin from its IDF file, Ollama by
    model name (no server call), anything else from the backend passed in."""
    eid = manifest["embedder"]
    if backend is not None:
        emb = getattr(backend, "embedder", backend)
    elif eid.startswith(models.BUILTIN_EMBEDDER):
        name = str(manifest.get("idf_file"))
        try:
            emb = models.BuiltinEmbedder(np.load(d / name))
        except (OSError, ValueError, EOFError) as e:
            raise IndexProblem(f"{name} in {d} is unreadable ({_line(e)}): run "
                               f"{fix}") from None
    elif eid.startswith("ollama:") and hasattr(models, "OllamaEmbedder"):
        emb = models.OllamaEmbedder(eid[len("ollama:"):], dim=manifest["dim"])
    else:
        raise IndexProblem(f"index {d} was built with embedder {eid}, which needs its "
                           f"backend to load: pass it, or run {fix}")
    if emb.id != eid or emb.dim != manifest["dim"]:
        raise IndexProblem(f"index {d} was built with embedder {eid} (dim "
                           f"{manifest['dim']}), not {emb.id} (dim {emb.dim}): run {fix}")
    return emb


# --------------------------------------------------------------------------- API

def _backend_name(backend) -> str:
    if backend in (None, "builtin") or isinstance(getattr(backend, "embedder", None),
                                                  models.BuiltinEmbedder):
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
    parts = [FORMAT, str(vault), _backend_name(backend), passed_over,
             [str(cfg_path), _stat(Path(cfg_path))] if cfg_path else None]
    h = hashlib.sha256(json.dumps(parts).encode())
    lines = [f"\0{p}\0[{s[0]}, {s[1]}]" if type(s) is list and len(s) == 2 else
             f"\0{p}\0{s}" for p, s in stats.items()]    # f"\0{p}\0{s}", list repr inline
    h.update("".join(lines).encode("utf-8", "surrogatepass"))
    return h.hexdigest()           # (a path holds no NUL: the join is unambiguous)


def _unchanged(index_dir: Path, vault: Path, stamp: str, backend, current=None):
    """(summary, index) for an index whose vault has not changed since it was built (and
    which still loads cleanly); (None, the index or None) otherwise: then the full ingest
    runs and repairs or refreshes, reusing what it can of that index. `current`, an
    Index this process loaded from index_dir, stands for it while the index files on
    disk are the ones it was read from (no second parse; its caches stay warm)."""
    if not (index_dir / "manifest.json").exists():
        return None, None
    if (current is not None and current.dir == index_dir
            and current.stat == _index_stat(index_dir)):
        idx = current
    else:
        try:
            idx = load_index(index_dir, None if _backend_name(backend) == "builtin"
                             else backend)
        except (IndexProblem, models.BackendError):
            return None, None
    m = idx.manifest
    if m.get("stamp") != stamp or m.get("vault") != str(vault):
        return None, idx
    counts = m.get("counts", {})
    live = [f for f in idx.files if not f.get("duplicate_of")]
    return {"files_seen": counts.get("files_seen", len(idx.files)), "indexed": len(live),
            "duplicates": len(idx.files) - len(live),
            "families": len({f["family"] for f in live}), "chunks": len(idx.chunks),
            "embedded": 0, "reused": len(idx.chunks), "files_read": 0,
            "files_reused": len(idx.files), "files_reread": 0,
            "dated": dict(Counter(f["date_source"] for f in idx.files)),
            "skipped": m.get("skipped", []), "seconds": 0.0, "index": str(index_dir),
            "embedder": m["embedder"], "note": "nothing changed since the last ingest"}, idx


def _files_and_chunks(vault: Path, paths: list, cfg: dict, progress, stats: dict,
                      old: dict, known: dict):
    """(records, skipped, chunks of the notes read now, {files_read, files_reused,
    files_reread}); a reused note that changed while this ran means the whole catalogue
    is read afresh. A reused note keeps its previous rows (its record's _chunks)."""
    try:
        recs, skipped = _catalogue(vault, paths, cfg, progress, stats, old, known)
    except _Stale:
        known["new"].clear()
        recs, skipped = _catalogue(vault, paths, cfg, progress, known=known)
    reused = sum(1 for r in recs if r.get("_reused"))
    counts = {"files_read": len(paths) - reused, "files_reused": reused,
              "files_reread": sum(1 for r in recs if r.get("_reread"))}
    return recs, skipped, _chunk_all([r for r in recs if "_chunks" not in r]), counts


def _summary(paths, passed_over, files, n_chunks, embedded, skipped, counts) -> dict:
    live = [f for f in files if not f["duplicate_of"]]
    return {"files_seen": len(paths) + len(passed_over), "indexed": len(live),
            "duplicates": len(files) - len(live),
            "families": len({f["family"] for f in live}), "chunks": n_chunks,
            "embedded": embedded, "reused": n_chunks - embedded, **counts,
            "dated": dict(Counter(f["date_source"] for f in files)), "skipped": skipped}


def build_index(vault, index_dir=None, config=None, rebuild=False, backend=None,
                progress=None, keep=None) -> dict:
    """Index the vault into index_dir; returns the summary (also printed by --json).
    See _build_now for the arguments."""
    return _build(vault, index_dir, config, rebuild, backend, progress, keep=keep)[0]


def refresh(vault, index_dir=None, config=None, rebuild=False, backend=None,
            current=None) -> Index:
    """The vault's index, brought up to date and loaded: the index build_index already
    loaded to find the vault unchanged is returned as is, not parsed a second time.
    current: the Index a long-running caller got last time; returned itself when
    neither the vault nor the index files changed since (see _unchanged)."""
    summary, idx = _build(vault, index_dir, config, rebuild, backend, None, current)
    if idx is None:
        idx = load_index(summary["index"], None if _backend_name(backend) == "builtin"
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


@contextmanager
def _bulk():
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


def _build(vault, index_dir, config, rebuild, backend, progress, current=None, keep=None):
    with _bulk():
        return _build_now(vault, index_dir, config, rebuild, backend, progress, current,
                          keep)


def _build_now(vault, index_dir, config, rebuild, backend, progress, current=None,
               keep=None):
    """(summary, the loaded Index when nothing changed, else None).
    backend: None/"builtin", a backend name, or a models.Backend; progress(stage, done,
    total) is called while reading and embedding; keep, a list, gets the previous index
    and the records (held to the end of a one-shot process: see keep_until_exit). Notes
    whose size and mtime match their previous record (same vault, embedder, rules and
    config) are not read again and keep their rows; everything that depends on other
    notes is recomputed for every note."""
    started = time.perf_counter()
    vault = Path(vault).expanduser().resolve()
    if not vault.is_dir():
        raise ValueError(f"vault {vault} is not a folder: pass the folder that holds your notes")
    index_dir = Path(index_dir or default_index_dir()).expanduser().resolve()
    if index_dir == vault or vault in index_dir.parents:
        raise ValueError(f"index dir {index_dir} is inside the vault; Verso never writes "
                         f"there: pass --index DIR outside it or set VERSO_HOME")
    cfg, cfg_path = _load_config(vault, config)
    stats = {}
    paths, passed_over = _scan(vault, cfg, stats)
    stamp = _stamp(vault, stats, passed_over, cfg_path, backend)
    with _lock(index_dir):
        recovered = _recover(index_dir)
        same, loaded = (None, None) if rebuild else _unchanged(index_dir, vault, stamp,
                                                               backend, current)
        if keep is not None:
            keep.append(loaded)
        if same:
            same["seconds"] = round(time.perf_counter() - started, 3)
            return same, loaded
        backend, builtin, prev, note = _previous(index_dir, vault, backend, rebuild, loaded)
        del loaded
        key = _reuse_key(cfg_path)
        old = _old_records(prev, key)
        known = {"old": _near_pairs(prev) if old else {}, "new": {}}
        recs, skipped, chunks, counts = _files_and_chunks(vault, paths, cfg, progress, stats,
                                                          old, known)
        if keep is not None:           # freed by the process's end, not one by one here
            keep += [prev, old, recs]
        emb, prev, note, name = _embedder_for(backend, builtin, prev, note,
                                              [c["_embed"] for c in chunks])
        note = "; ".join(filter(None, (recovered, note)))
        for c in chunks:
            c["hash"] = hashlib.sha256(f"{c['_embed']}\n{emb.id}".encode()).hexdigest()
        manifest, files, summary = _write_index(index_dir, prev, recs, chunks, emb, progress)
        summary = {**_summary(paths, passed_over, files, summary[0], summary[1],
                              passed_over + skipped, counts),
                   "seconds": 0.0, "index": str(index_dir), "embedder": emb.id, "note": note}
        manifest.update({
            "backend": name, "vault": str(vault), "stamp": stamp,
            "config": str(cfg_path) if cfg_path else None, "reuse": key,
            "counts": {**{k: summary[k] for k in ("files_seen", "indexed", "duplicates",
                                                  "families", "chunks")},
                       "skipped": len(summary["skipped"])},
            "skipped": summary["skipped"]})
        manifest["near_file"] = f"g{manifest['gen']}.near.json"
        _commit(index_dir, manifest, files, manifest.pop("_pieces"), manifest.pop("_idf"),
                known["new"])
    summary["seconds"] = round(time.perf_counter() - started, 3)
    return summary, None


def _write_index(index_dir: Path, prev, recs: list, chunks: list, emb, progress):
    """(manifest without the vault fields, files, (chunks, embedded)) of the new index:
    reused notes keep their rows, a touched note whose chunks did not change too; the
    rest go into one new segment (with the notes a merge moves). The manifest carries
    the new segment's pieces and the IDF to write under _pieces and _idf."""
    keep = {r["path"]: r["_chunks"] for r in recs if "_chunks" in r and not r["duplicate_of"]}
    by_path = {r["path"]: [] for r in recs if not r["duplicate_of"] and r["path"] not in keep}
    for c in chunks:
        by_path[c["path"]].append(c)
    old_where = prev.where if prev is not None else {}
    for path, cs in list(by_path.items()):
        if path in old_where and _same_rows(prev, old_where[path][0], cs):
            keep[path] = old_where[path][0]
            del by_path[path]
    todo = [c for cs in by_path.values() for c in cs]
    vectors, embedded = _embed(todo, emb, _old_rows(prev, keep), progress)
    new, at = {}, 0
    for path, cs in by_path.items():
        new[path] = _new_piece(path, cs, vectors[at:at + len(cs)])
        at += len(cs)
    live = [r["path"] for r in recs if not r["duplicate_of"]]
    kept, dead, pieces = _segments_after(prev, live, keep, new)
    gen = _next_gen(index_dir, prev.manifest if prev is not None else None)
    same_idf = prev is not None and prev.embedder is emb
    idf = (emb.idf if isinstance(emb, models.BuiltinEmbedder) and not same_idf else None)
    manifest = {"format": FORMAT, "embedder": emb.id, "dim": int(emb.dim), "gen": gen,
                "segments": [prev.manifest["segments"][s] for s in kept], "dead": dead,
                "idf_file": (f"e{gen}.idf.npy" if idf is not None else
                             prev.manifest.get("idf_file") if same_idf else None),
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "_pieces": [(f"s{gen}", pieces)] if pieces else [], "_idf": idf}
    files = recs                       # the records themselves, less their scratch keys
    for f in files:
        for k in SCRATCH:
            f.pop(k, None)
    n_chunks = sum(keep[p][2] if p in keep else len(new[p].rows) for p in live)
    manifest["_files"] = _files_out(prev, files, gen, manifest)
    return manifest, files, (n_chunks, embedded)


def _files_out(prev, files: list, gen: int, manifest: dict) -> list:
    """[(name, bytes)] of the file records, their names and digests set in manifest:
    the records that differ from the previous index's base, as a delta (g<gen>.delta.json:
    per record its position in the base, or the record itself), while they are at most
    DELTA_SHARE of all; else a new base (g<gen>.files.json) with every record."""
    base = getattr(prev, "base", None)
    if base is not None:
        name, sha, recs = base
        pos = {r["path"]: i for i, r in enumerate(recs)}
        out, changed = [], 0
        for f in files:
            i = pos.get(f["path"])
            if i is not None and recs[i] == f:
                out.append(i)
            else:
                out.append(f)
                changed += 1
        if changed <= DELTA_SHARE * len(files):
            raw = _json_bytes({"format": FORMAT, "base": name, "files": out})
            manifest.update(files_file=name, files_sha=sha, files_delta=f"g{gen}.delta.json",
                            delta_sha=hashlib.sha256(raw).hexdigest())
            return [(manifest["files_delta"], raw)]
    raw = _json_bytes({"format": FORMAT, "files": files})
    manifest.update(files_file=f"g{gen}.files.json", files_sha=hashlib.sha256(raw).hexdigest(),
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="ingest.py", description="Index a folder of notes.")
    p.add_argument("vault", help="folder of .md/.txt notes")
    p.add_argument("--index", help="index dir (default $VERSO_HOME or ./.verso)")
    p.add_argument("--config", help="vault config (default VAULT/verso.toml)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--rebuild", action="store_true", help="re-fit and re-embed everything")
    p.add_argument("--backend", choices=("builtin", "ollama"), default="builtin",
                   help="embedder: builtin (offline) or ollama (nomic-embed-text)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress line (it is shown only on a terminal anyway)")
    a = p.parse_args(argv)
    meter = None if a.quiet or not sys.stderr.isatty() else _Meter(sys.stderr)
    try:
        s = build_index(a.vault, a.index, a.config, a.rebuild, backend=a.backend,
                        progress=meter, keep=_AT_EXIT)
    except (ValueError, IndexProblem, IndexBusy, models.BackendError, OSError) as e:
        print(f"{chr(10) if meter and meter.stage else ''}ingest: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ningest: interrupted; the index is as it was before this run", file=sys.stderr)
        return 130
    if meter:
        meter.clear()
    print(json.dumps(s, indent=2) if a.json else _human(s))
    return 0


if __name__ == "__main__":
    run_cli(main)
