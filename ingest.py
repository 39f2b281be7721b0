"""ingest: a vault of notes -> an index (dates, duplicates, version families, chunks, vectors).

In:  a folder of .md/.txt notes and an optional verso.toml (ignore globs; per folder
     `versioned` and `privacy`, default private).
Out: an index dir (--index, else $VERSO_HOME, else ./.verso) with manifest.json,
     files.json, chunks.json, vectors.npy and idf.npy (builtin embedder). Every JSON
     starts with "format": 1; each file is written to a temp name, then os.replace'd into
     place with the manifest last, and the old ones are put back if that step fails (or,
     after a hard kill, by the next ingest or load: _recover). One writer at a time:
     index_dir/lock holds its pid under a kernel lock; a dead writer's lock is taken over.
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
import hashlib
import json
import os
import re
import shlex
import shutil
import stat
import sys
import time
import tomllib
import unicodedata
from collections import Counter, defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import numpy as np

import models

FORMAT = 1
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
INDEX_FILES = ("manifest.json", "files.json", "chunks.json", "vectors.npy", "idf.npy")
PRIVACY = ("private", "shareable")
REUSE_RULES = 2                    # bump when reading/dating/chunking rules change: an
                                   # index made under other rules is not reused per file

MONTHS = dict(jan=1, feb=2, mar=3, apr=4, may=5, jun=6, jul=7, aug=8, sep=9, oct=10,
              nov=11, dec=12)
_MON = (r"(?<![a-z])(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|"
        r"aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
        r"(?![a-z])\.?")
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
    vectors: np.ndarray          # float32 [n_chunks, dim], memory-mapped, row i == chunks[i]
    by_path: dict
    embedder: object
    cache: dict = field(default_factory=dict)   # free for retrieve/version to memoise
    stat: list = field(default_factory=list)    # _index_stat of the files it was read from


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


def _folder_setting(rel: str, cfg: dict, key: str, default):
    """The setting from the longest [folders.X] whose X is the file's folder or a prefix."""
    parent, best = rel.rpartition("/")[0], None
    for name, table in cfg["folders"].items():
        if key in table and (parent == name or parent.startswith(name + "/")):
            if best is None or len(name) > len(best[0]):
                best = (name, table[key])
    return default if best is None else best[1]


def _ignored(rel: str, globs: list) -> bool:
    for g in globs:
        g = g + "**" if g.endswith("/") else g
        if fnmatch.fnmatchcase(rel, g) or (g.startswith("**/")
                                           and fnmatch.fnmatchcase(rel, g[3:])):
            return True
    return False


def _inside(path: str, vault: Path) -> bool:
    return path == str(vault) or path.startswith(str(vault) + os.sep)


def _scan(vault: Path, cfg: dict) -> tuple[list[str], list[dict]]:
    """Vault-relative note paths, sorted, and what was passed over [{path, reason}].

    Real folders are walked first; then each symlinked folder once, under its link path,
    if its target is inside the vault and was not walked yet (so loops end, and a note
    reached both ways keeps its real path). A symlinked note counts once too. Links whose
    target lies outside the vault are not followed and are listed: the vault folder is
    the boundary of what Verso reads. Unreadable folders are listed, never fatal."""
    notes, skipped, seen, reals = [], [], set(), set()
    link_dirs, link_files = [], []

    prefix = os.path.join(str(vault), "")     # every path below is a join onto it

    def rel(path: str) -> str:                # Path.relative_to, without its parsing cost
        return path[len(prefix):].replace(os.sep, "/") or "."

    def walk(top: str) -> None:
        stack = [top]
        while stack:
            folder = stack.pop()
            real = os.path.realpath(folder)
            if real in seen:
                continue
            seen.add(real)
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=lambda e: e.name)
            except OSError as e:
                skipped.append({"path": rel(folder) + "/",
                                "reason": f"unreadable folder ({e.strerror or type(e).__name__})"})
                continue
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
                elif (e.name.lower().endswith(TEXT_EXTS)
                      and not _ignored(rel(e.path), cfg["ignore"])):
                    if link:
                        link_files.append(e.path)
                    else:
                        notes.append(rel(e.path))
                        reals.add(os.path.join(real, e.name))

    walk(str(vault))
    while link_dirs:
        path = min(link_dirs)                  # links in path order: the first one wins
        link_dirs.remove(path)
        target = os.path.realpath(path)
        if not _inside(target, vault):
            skipped.append({"path": rel(path) + "/",
                            "reason": "symlink to a folder outside the vault (not followed)"})
        elif target not in seen:
            walk(path)
    for path in sorted(link_files):
        target = os.path.realpath(path)
        if not _inside(target, vault):
            skipped.append({"path": rel(path),
                            "reason": "symlink to a file outside the vault (not read)"})
        elif target not in reals:             # else indexed at its real path already
            reals.add(target)
            notes.append(rel(path))
    return sorted(notes), skipped


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
    return (bool(COPY_RE.search(Path(rec["path"]).stem)), len(rec["path"]), rec["path"])


def _shingles(words: list[str]) -> set:
    if len(words) < SHINGLE:
        return {tuple(words)}
    return set(zip(*(words[i:] for i in range(SHINGLE))))


def _mark_duplicates(recs: list[dict], norm_of) -> None:
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
            for j in range(i + 1, len(members)):
                other = members[j]
                if keep["duplicate_of"] or other["duplicate_of"]:
                    continue
                if kind == "sha" or _near_copy(keep, other, sets, norm_of):
                    other["duplicate_of"] = keep["path"]


def _near_copy(a: dict, b: dict, sets: dict, norm_of) -> bool:
    """Word-shingle Jaccard >= NEAR_COPY_JACCARD; the shingle counts rule most pairs out."""
    if min(a["shingles"], b["shingles"]) < NEAR_COPY_JACCARD * max(a["shingles"],
                                                                   b["shingles"]):
        return False
    for r in (a, b):
        if r["path"] not in sets:
            sets[r["path"]] = _shingles(norm_of(r).lower().split())
    x, y = sets[a["path"]], sets[b["path"]]
    return len(x & y) / len(x | y) >= NEAR_COPY_JACCARD


def _mark_families(recs: list[dict]) -> None:
    fams = defaultdict(list)
    for r in recs:
        folder, _, name = r["path"].rpartition("/")
        norm = _family_name(Path(name).stem) if r["versioned"] else ""
        r["family"] = f"{folder}/{norm}" if norm and folder else (norm or r["path"])
        if not r["duplicate_of"]:
            fams[r["family"]].append(r)
    for members in fams.values():
        pool = [m for m in members if m["date_source"] != "mtime"] or members
        top = max(m["date"] for m in pool)
        for m in pool:
            m["is_latest"] = m["date"] == top


def _resolve_links(recs: list[dict]) -> None:
    """Wikilink targets -> vault-relative paths by stem or path (case-insensitive)."""
    by_key = defaultdict(list)
    for r in recs:
        no_ext = r["path"].rsplit(".", 1)[0].lower()
        by_key[no_ext].append(r)
        by_key[no_ext.rsplit("/", 1)[-1]].append(r)
    for r in recs:
        links, folder = [], r["path"].rpartition("/")[0]
        for raw in r["wikilinks"]:
            key = raw.strip().lower().removesuffix(".md").removesuffix(".txt")
            ext = os.path.splitext(key)[1]
            if not key or (ext and ext[1:].isalpha()):
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
        "duplicate_of": None,
        "private": _folder_setting(rel, cfg, "privacy", "private") == "private",
        "versioned": _folder_setting(rel, cfg, "versioned", True),
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
           "private": _folder_setting(rel, cfg, "privacy", "private") == "private",
           "versioned": _folder_setting(rel, cfg, "versioned", True), "_reused": True,
           "_date_order": cfg["date_order"]}
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
               old=None):
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
    _mark_duplicates(recs, lambda r: _text_of(vault, r))
    for r in recs:                      # a former duplicate needs chunks of its own now
        if not r["duplicate_of"] and "_body" not in r and "_chunks" not in r:
            _text_of(vault, r)
    _mark_families(recs)
    _resolve_links(recs)
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


def _rows(r: dict) -> list[tuple]:
    """(heading, section_date, text, entry_latest, hash) per chunk of one record: its
    previous chunks if reused (hash "" when not), else chunked from its body now."""
    if "_chunks" in r:
        return [(c["heading"], c["section_date"], c["text"], c["entry_latest"], c["hash"])
                for c in r["_chunks"]]
    pieces = _pieces(r["_body"], r.get("_date_order", "ymd"))
    newest = max((d for _, d, _ in pieces if d), default=None)
    return [(h, d, t, None if d is None else d == newest, "") for h, d, t in pieces]


def _chunk_all(recs: list[dict]) -> list[dict]:
    chunks = []
    for r in recs:
        if r["duplicate_of"]:
            continue
        for heading, sdate, text, entry_latest, digest in _rows(r):
            chunks.append({
                "id": len(chunks), "path": r["path"], "heading": heading,
                "section_date": sdate, "date": sdate or r["date"],
                "date_source": "section" if sdate else r["date_source"],
                "family": r["family"], "is_latest": r["is_latest"],
                "entry_latest": entry_latest,
                "private": r["private"], "text": text, "hash": digest,
                "_embed": f"{r['title']}\n{heading}\n{text}"})
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
            note = f"previous index unusable ({e}); rebuilt"
        if prev and prev.manifest.get("vault") != str(vault):
            prev, note = None, "previous index was for another vault; rebuilt"
    return backend, builtin, prev, note


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
    """path -> (previous record, its chunks or None) when prev was built under the same
    reuse key, else {}."""
    if prev is None or prev.manifest.get("reuse") != key:
        return {}
    by_path = defaultdict(list)
    for c in prev.chunks:
        by_path[c["path"]].append(c)
    return {f["path"]: (f, None if f["duplicate_of"] else by_path.get(f["path"], []))
            for f in prev.files}


def _embed(chunks: list[dict], emb, prev, progress=None) -> tuple[np.ndarray, int]:
    """float32 [n, dim] rows for chunks: old rows by hash, the rest embedded now."""
    old = {c["hash"]: c["id"] for c in prev.chunks} if prev else {}
    vectors = np.zeros((len(chunks), emb.dim), dtype=np.float32)
    todo = []
    for c in chunks:
        if c["hash"] in old:
            vectors[c["id"]] = prev.vectors[old[c["hash"]]]
        else:
            todo.append(c["id"])
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


# --------------------------------------------------------------------- on disk

def _json_bytes(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _write(path: Path, data) -> None:
    with open(path, "wb") as f:
        if isinstance(data, np.ndarray):
            np.save(f, data)
        else:
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _commit(staged: list[tuple[Path, Path]]) -> None:
    """os.replace each temp file into place in order; on any failure the old files
    (kept as hard links, else copies) are put back, so the previous index stays whole."""
    backups = []
    try:
        for tmp, final in staged:
            bak = final.with_name(final.name + ".prev")
            if final.exists():
                bak.unlink(missing_ok=True)
                try:
                    os.link(final, bak)
                except OSError:
                    shutil.copy2(final, bak)
            backups.append((bak if final.exists() else None, final))
            os.replace(tmp, final)
    except BaseException:
        for bak, final in reversed(backups):
            if bak:
                os.replace(bak, final)
            else:
                final.unlink(missing_ok=True)
        raise
    finally:
        for bak, _ in backups:
            if bak:
                bak.unlink(missing_ok=True)


def _save(index_dir: Path, manifest: dict, files: list, chunks: list, vectors, emb) -> None:
    for junk in index_dir.glob(".*.tmp-*"):
        junk.unlink(missing_ok=True)   # left by an ingest that was killed
    blobs = {"files.json": _json_bytes({"format": FORMAT, "files": files}),
             "chunks.json": _json_bytes({"format": FORMAT, "chunks": chunks})}
    manifest["chunks_sha"] = hashlib.sha256(blobs["chunks.json"]).hexdigest()
    manifest["files_sha"] = hashlib.sha256(blobs["files.json"]).hexdigest()
    order = [("vectors.npy", vectors), *blobs.items(),
             ("manifest.json", json.dumps(manifest, indent=1).encode("utf-8"))]
    if isinstance(emb, models.BuiltinEmbedder):
        order.insert(0, ("idf.npy", emb.idf))
    staged = []
    try:
        for name, data in order:
            tmp = index_dir / f".{name}.tmp-{os.getpid()}"
            staged.append((tmp, index_dir / name))
            _write(tmp, data)
        _commit(staged)
    finally:
        for tmp, _ in staged:
            tmp.unlink(missing_ok=True)


def _recover(index_dir: Path) -> str:
    """Finish or undo the commit of an ingest killed inside _commit, whose *.prev files
    are the old copies of what it had replaced. The manifest goes in last, so a
    manifest.json.prev that differs from manifest.json means the new index is whole: the
    old copies go. Otherwise they are put back. Call with the lock held. "" if clean."""
    prevs = sorted(index_dir.glob("*.prev"), key=lambda p: (p.name == "manifest.json.prev",
                                                            p.name))
    if not prevs:
        return ""
    man = index_dir / "manifest.json"
    old = index_dir / "manifest.json.prev"
    done = old.exists() and man.exists() and old.read_bytes() != man.read_bytes()
    for prev in prevs:                 # the manifest's copy last: it decides a rerun
        if done:
            prev.unlink(missing_ok=True)
        else:
            os.replace(prev, prev.with_suffix(""))
    return ("an interrupted ingest had written the new index; finished it" if done else
            "an interrupted ingest had replaced part of the index; put the old files back")


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


def load_index(index_dir=None, backend=None) -> Index:
    """The index in index_dir (default_index_dir()), checked: format, the chunks and
    files the manifest was written with, vector rows and dim, and the embedder.
    `backend` supplies the embedder of a non-builtin index. The commit of an ingest
    killed while replacing files is finished or undone first (see _recover)."""
    d = Path(index_dir or default_index_dir()).expanduser().resolve()
    if not (d / "manifest.json").exists():
        raise IndexProblem(f"no index in {d}: run python ingest.py VAULT"
                           + ("" if d == default_index_dir().resolve() else f" --index {d}"))
    if any(d.glob("*.prev")):
        _recover_for_load(d)
    try:
        return _load(d, backend)
    except IndexProblem:
        if (pid := _holder(d)) is not None:    # read while an ingest replaces the files
            raise IndexProblem(f"an ingest (pid {pid}) is writing {d}: try again when it "
                               "finishes") from None
        raise


def _recover_for_load(d: Path) -> None:
    try:
        with _lock(d, wait=COMMIT_WAIT):
            _recover(d)
    except IndexBusy:
        raise IndexProblem(f"an ingest (pid {_holder(d)}) is writing {d}: try again when "
                           "it finishes") from None
    except OSError as e:
        raise IndexProblem(f"an ingest was interrupted while replacing the index in {d} and "
                           f"this process cannot repair it ({e.strerror}): run "
                           f"{_fix(d)}") from None


def _index_stat(d: Path) -> list:
    """[size, mtime_ns] of every index file: equal lists, the same files on disk."""
    return [_stat(d / name) for name in INDEX_FILES]


def _load(d: Path, backend) -> Index:
    stat = _index_stat(d)              # before reading: a later replacement shows as a change
    manifest, _ = _read_json(d, "manifest.json", "embedder")
    vault = manifest.get("vault") if isinstance(manifest.get("vault"), str) else None
    fix = _fix(d, vault)
    dim = manifest.get("dim")
    if not isinstance(manifest["embedder"], str) or type(dim) is not int or dim < 1:
        raise IndexProblem(f"manifest.json in {d} has a bad embedder or dim "
                           f"({manifest['embedder']!r}, {dim!r}): run {fix}")
    files, files_raw = _read_json(d, "files.json", "files", vault)
    chunks, chunks_raw = _read_json(d, "chunks.json", "chunks", vault)
    for raw, key, name in ((chunks_raw, "chunks_sha", "chunks.json"),
                           (files_raw, "files_sha", "files.json")):
        if hashlib.sha256(raw).hexdigest() != manifest.get(key):
            raise IndexProblem(f"{name} in {d} does not match its manifest (edited, or an "
                               f"ingest was interrupted): run {fix}")
    try:
        vectors = np.load(d / "vectors.npy", mmap_mode="r")
    except (OSError, ValueError, EOFError) as e:
        raise IndexProblem(f"vectors.npy in {d} is unreadable ({_line(e)}): run "
                           f"{fix}") from None
    n = len(chunks["chunks"])
    if vectors.dtype != np.float32 or vectors.shape != (n, dim):
        raise IndexProblem(f"vectors.npy in {d} has shape {vectors.shape} {vectors.dtype}, "
                           f"expected ({n}, {dim}) float32: run {fix}")
    embedder = _load_embedder(d, manifest, backend, fix)
    return Index(d, manifest, files["files"], chunks["chunks"], vectors,
                 {f["path"]: f for f in files["files"]}, embedder, stat=stat)


def _load_embedder(d: Path, manifest: dict, backend, fix: str):
    """The embedder the vectors were made with: builtin from idf.npy, Ollama by model
    name (no server call), anything else from the backend passed in."""
    eid = manifest["embedder"]
    if backend is not None:
        emb = getattr(backend, "embedder", backend)
    elif eid.startswith(models.BUILTIN_EMBEDDER):
        try:
            emb = models.BuiltinEmbedder(np.load(d / "idf.npy"))
        except (OSError, ValueError, EOFError) as e:
            raise IndexProblem(f"idf.npy in {d} is unreadable ({_line(e)}): run "
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
             [str(cfg_path), _stat(Path(cfg_path))] if cfg_path else None,
             [[p, s] for p, s in stats.items()]]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


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
                      old: dict):
    """(records, skipped, chunks, {files_read, files_reused, files_reread}); a reused
    note that changed while this ran means the whole catalogue is read afresh."""
    try:
        recs, skipped = _catalogue(vault, paths, cfg, progress, stats, old)
    except _Stale:
        recs, skipped = _catalogue(vault, paths, cfg, progress)
    reused = sum(1 for r in recs if r.get("_reused"))
    counts = {"files_read": len(paths) - reused, "files_reused": reused,
              "files_reread": sum(1 for r in recs if r.get("_reread"))}
    return recs, skipped, _chunk_all(recs), counts


def _summary(paths, passed_over, files, chunks, embedded, skipped, counts) -> dict:
    live = [f for f in files if not f["duplicate_of"]]
    return {"files_seen": len(paths) + len(passed_over), "indexed": len(live),
            "duplicates": len(files) - len(live),
            "families": len({f["family"] for f in live}), "chunks": len(chunks),
            "embedded": embedded, "reused": len(chunks) - embedded, **counts,
            "dated": dict(Counter(f["date_source"] for f in files)), "skipped": skipped}


def build_index(vault, index_dir=None, config=None, rebuild=False, backend=None,
                progress=None) -> dict:
    """Index the vault into index_dir; returns the summary (also printed by --json).
    See _build for the arguments."""
    return _build(vault, index_dir, config, rebuild, backend, progress)[0]


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


def _build(vault, index_dir, config, rebuild, backend, progress, current=None):
    """(summary, the loaded Index when nothing changed, else None).
    backend: None/"builtin", a backend name, or a models.Backend; progress(stage, done,
    total) is called while reading and embedding. Notes whose size and mtime match their
    previous record (same vault, embedder, rules and config) are not read or chunked
    again; everything that depends on other notes is recomputed for every note."""
    started = time.perf_counter()
    vault = Path(vault).expanduser().resolve()
    if not vault.is_dir():
        raise ValueError(f"vault {vault} is not a folder: pass the folder that holds your notes")
    index_dir = Path(index_dir or default_index_dir()).expanduser().resolve()
    if index_dir == vault or vault in index_dir.parents:
        raise ValueError(f"index dir {index_dir} is inside the vault; Verso never writes "
                         f"there: pass --index DIR outside it or set VERSO_HOME")
    cfg, cfg_path = _load_config(vault, config)
    paths, passed_over = _scan(vault, cfg)
    root = os.path.join(str(vault), "")
    stats = {p: _stat(root + p) for p in paths}
    stamp = _stamp(vault, stats, passed_over, cfg_path, backend)
    with _lock(index_dir):
        recovered = _recover(index_dir)
        same, loaded = (None, None) if rebuild else _unchanged(index_dir, vault, stamp,
                                                               backend, current)
        if same:
            same["seconds"] = round(time.perf_counter() - started, 3)
            return same, loaded
        backend, builtin, prev, note = _previous(index_dir, vault, backend, rebuild, loaded)
        del loaded
        key = _reuse_key(cfg_path)
        recs, skipped, chunks, counts = _files_and_chunks(vault, paths, cfg, progress, stats,
                                                          _old_records(prev, key))
        emb, prev, note, name = _embedder_for(backend, builtin, prev, note,
                                              [c["_embed"] for c in chunks])
        note = "; ".join(filter(None, (recovered, note)))
        for c in chunks:               # a reused hash stands only under the same embedder
            if prev is None or not c["hash"]:
                c["hash"] = hashlib.sha256(f"{c['_embed']}\n{emb.id}".encode()).hexdigest()
        vectors, embedded = _embed(chunks, emb, prev, progress)
        del prev                        # release the old memory map before replacing it
        for c in chunks:
            del c["_embed"]
        files = [{k: v for k, v in r.items() if not k.startswith("_")} for r in recs]
        summary = {**_summary(paths, passed_over, files, chunks, embedded,
                              passed_over + skipped, counts),
                   "seconds": 0.0, "index": str(index_dir), "embedder": emb.id, "note": note}
        manifest = {"format": FORMAT, "embedder": emb.id, "dim": int(emb.dim),
                    "backend": name, "vault": str(vault), "stamp": stamp,
                    "config": str(cfg_path) if cfg_path else None, "reuse": key,
                    "counts": {**{k: summary[k] for k in ("files_seen", "indexed", "duplicates",
                                                          "families", "chunks")},
                               "skipped": len(summary["skipped"])},
                    "skipped": summary["skipped"],
                    "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        _save(index_dir, manifest, files, chunks, vectors, emb)
    summary["seconds"] = round(time.perf_counter() - started, 3)
    return summary, None


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
                        progress=meter)
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
    sys.exit(main())
