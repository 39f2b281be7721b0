"""The vault's config and its walk: which notes there are, their folder flags, their text.

In:  a vault folder and its verso.toml (or --config FILE): ignore globs, date_order, per
     folder `versioned` and `privacy` (default private).
Out: the parsed config; the vault-relative note paths (with each note's size and mtime)
     and what was passed over, with its reason; a note's text, decoded, read once.
Not: dating, families or chunks (dating.py, families.py, chunking.py), or writing
     anything. Reads nothing outside the vault: symlinks are followed once, and only to
     targets inside it. A note that cannot be read (binary, too large, empty, unreadable,
     vanished) is skipped and listed with its reason.
"""

from __future__ import annotations

import codecs
import fnmatch
import functools
import operator
import os
import re
import stat
import tomllib
from pathlib import Path

from verso import dating

MAX_FILE_BYTES = 5 * 1024 * 1024   # larger notes are skipped ("too large")
TEXT_EXTS = (".md", ".txt")
SKIP_DIRS = ("attachments",)       # plus every hidden folder (.obsidian, .git, .trash)
CONFIG_NAME = "verso.toml"
CONFIG_KEYS = ("ignore", "folders", "date_order", "timeout", "registry")
FOLDER_KEYS = {"versioned": bool, "privacy": str}
PRIVACY = ("private", "shareable")


def load_config(vault: Path, config=None) -> tuple[dict, Path | None]:
    path = Path(config).expanduser() if config else vault / CONFIG_NAME
    if not path.is_file():
        if config:
            raise ValueError(f"config file {path} not found")
        return {"ignore": [], "folders": {}, "date_order": "ymd", "date_order_given": False,
                "timeout": None, "registry": []}, None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not valid TOML: {e}") from None
    for key in data:
        if key not in CONFIG_KEYS:
            raise ValueError(f"{path}: unknown key {key!r} (known: {', '.join(CONFIG_KEYS)})")
    date_order = data.get("date_order", "ymd")
    if date_order not in dating.DATE_ORDERS:
        raise ValueError(f"{path}: date_order = {date_order!r} is invalid (ymd: only "
                         f"unambiguous dates; dmy: 03.10.2026 is 3 October; mdy: March 10)")
    timeout = data.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(
            timeout, (int, float)) or not 0 < timeout < float("inf")):
        raise ValueError(f"{path}: timeout = {timeout!r} is invalid (seconds one Ollama "
                         f"request may take, a number above 0)")
    reg = data.get("registry", {})
    folders_of = reg.get("folders", []) if isinstance(reg, dict) else None
    if (folders_of is None or set(reg) - {"folders"} or not isinstance(folders_of, list)
            or not all(isinstance(x, str) and x.strip("/") for x in folders_of)):
        raise ValueError(f"{path}: [registry] takes folders = [\"projects\", ...], the "
                         f"folders whose notes are projects")
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
    return ({"ignore": ignore, "folders": folders, "date_order": date_order,
             "date_order_given": "date_order" in data, "timeout": timeout,
             "registry": [x.strip("/") for x in folders_of]},
            path.resolve())


def settle_date_order(cfg: dict, paths) -> str:
    """cfg's date_order: the config's, else the order the vault's file names write
    numeric dates in (dating.names_order: "14.07.26" names make 03.09.26 the 3rd of
    September), else "ymd" (only dates that read one way)."""
    if not cfg["date_order_given"]:
        cfg["date_order"] = dating.names_order(Path(p).stem for p in paths) or "ymd"
    return cfg["date_order"]


def folder_flags(rel: str, cfg: dict) -> dict:
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


_NAME = operator.attrgetter("name")          # a DirEntry's name, to sort a folder by


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
    """One walk of a vault (see scan): notes, their stats and what was passed over."""

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
        """Notes under top, depth first. A folder's real path (for loops) is its
        parent's plus its name unless it was reached by a link: one realpath per walk."""
        stack, seen, rel, ignored = [(top, None)], self.seen, self.rel, self.ignored
        cut, plain = self.cut, os.sep == "/"        # rel() inline: a path under the vault
        notes, stats, link_dirs, link_files = (self.notes, self.stats, self.link_dirs,
                                               self.link_files)
        while stack:
            folder, real = stack.pop()
            real = os.path.realpath(folder) if real is None else real
            if real in seen:
                continue
            seen.add(real)
            try:
                with os.scandir(folder) as it:
                    entries = sorted(it, key=_NAME)
            except OSError as e:
                self.skipped.append({"path": rel(folder) + "/", "reason": "unreadable "
                                     f"folder ({e.strerror or type(e).__name__})"})
                continue
            names = []
            for e in entries:               # the harness runs this per question: kept lean
                name = e.name
                if name.startswith("."):
                    continue
                try:
                    link, is_dir = e.is_symlink(), e.is_dir()
                except OSError:                  # a link loop onto itself
                    link, is_dir = True, False
                if is_dir:
                    if name.lower() not in SKIP_DIRS:
                        if link:
                            link_dirs.append(e.path)
                        else:
                            stack.append((e.path, real.rstrip(os.sep) + os.sep + name))
                elif name.lower().endswith(TEXT_EXTS):
                    r = e.path[cut:] if plain else rel(e.path)
                    if ignored and ignored(r):
                        continue
                    if link:
                        link_files.append(e.path)
                    else:
                        notes.append(r)
                        try:
                            st = e.stat()
                            stats[r] = [st.st_size, st.st_mtime_ns]
                        except OSError:
                            stats[r] = None
                        names.append(name)
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


def scan(vault: Path, cfg: dict, stats: dict | None = None) -> tuple[list[str], list[dict]]:
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
    ordered = dict(zip(w.notes, map(stats.__getitem__, w.notes)))   # path order, as the
                                                                    # stamp hashes them
    stats.clear()
    stats.update(ordered)
    return w.notes, w.skipped


def read(path: Path) -> tuple[str | None, os.stat_result | int, str]:
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
