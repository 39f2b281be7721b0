"""file_records: the notes of a vault -> their file records, whole or for what changed.

In:  the vault, the scan's paths and stats (vault_walk.scan), the config; the previous
     index (its file records by column, its rows per note) when there is one.
Out: catalogue(): every note's record (files.json fields plus scratch keys: _body/_norm
     for a note read now, _chunks for one whose rows are kept) and what was skipped.
     changes(): the same for a refresh that few notes changed (a Changes: the records
     read, or re-marked by a rule that spans notes, and the paths gone), without
     building the other notes' records, which stand as they were; None when more than
     CHANGES_SHARE of the notes changed (then catalogue() runs).
     listing(), listing_table(): the index's notes as ingest saw them (`verso ingest
     --files`).
Not: the walk (vault_walk.py), dates (dating.py), the rules across notes (families.py),
     chunks, vectors or writing (chunking.py, ingest.py, store.py).

changes() gives the records the full catalogue would give, which the incremental-marks
tests check against a full build: a note's record depends on other notes only through
its hash group and its date group (duplicates), its family (latest) and the notes its
links name, so those neighbourhoods of the changed notes are re-marked, nothing else.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from verso import chunking
from verso import dating
from verso import families
from verso import file_columns
from verso import textkit
from verso import vault_walk

CHANGES_SHARE = 0.1                # more notes read, added or gone than this share:
                                   # the full catalogue
TAG_RE = re.compile(r"(?<![\w&/#])#([A-Za-z][\w/-]*)")


class Stale(Exception):
    """A reused note changed between its stat and a later read: catalogue it afresh."""


def record(rel: str, text: str, st, cfg: dict) -> dict:
    """A files.json record (plus _body/_norm) for a note read now."""
    meta, body = dating.frontmatter(text)
    norm = " ".join(text.split())
    day, source = dating.date_of(Path(rel).stem, meta, body, st.st_mtime, cfg["date_order"])
    h1 = next((m.group(2) for m in map(chunking.HEADING_RE.match, body.split("\n"))
               if m and m.group(1) == "#"), None)
    tags = meta.get("tags") or []
    tags = tags.replace(",", " ").split() if isinstance(tags, str) else tags
    return {
        "path": rel, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
        "sha256": hashlib.sha256(norm.encode()).hexdigest(),
        "date": day, "date_source": source, "family": rel, "is_latest": False,
        "duplicate_of": None, **vault_walk.folder_flags(rel, cfg),
        "tags": sorted({t.lstrip("#") for t in tags} | set(TAG_RE.findall(body))),
        "title": str(meta.get("title") or h1 or Path(rel).stem),
        "wikilinks": families.WIKILINK_RE.findall(text),
        **_shingled(norm), "_body": body, "_norm": norm,
        "_date_order": cfg["date_order"]}


def _shingled(norm: str) -> dict:
    """A note's shingle count and sketch (families.sketch), for near-copy pairs."""
    sets = families.shingles(norm.lower().split())
    return {"shingles": len(sets), "sketch": families.sketch(sets)}


def reused(old, chunks, cfg: dict) -> dict:
    """A previous record of an unchanged note, with everything that depends on other
    notes or on the config reset, and its previous chunks (None: it had none, being a
    duplicate) under _chunks."""
    rel = old["path"]
    rec = {**old, "family": rel, "is_latest": False, "duplicate_of": None,
           **vault_walk.folder_flags(rel, cfg), "_reused": True,
           "_date_order": cfg["date_order"], "_family": old["family"]}
    if chunks is not None:
        rec["_chunks"] = chunks
    return rec


def text_of(vault: Path, rec: dict) -> str:
    """A record's collapsed text; a reused note is read now (Stale if it changed)."""
    if "_norm" not in rec:
        text, st, _ = vault_walk.read(vault / rec["path"])
        if text is None or [st.st_size, st.st_mtime_ns] != [rec["size"], rec["mtime_ns"]]:
            raise Stale(rec["path"])
        rec["_body"], rec["_norm"] = dating.frontmatter(text)[1], " ".join(text.split())
        rec["_reread"] = True
    return rec["_norm"]


def catalogue(vault: Path, paths: list[str], cfg: dict, progress=None, stats=None,
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
            recs.append(reused(prev[0], prev[1], cfg))
            continue
        text, st, reason = vault_walk.read(vault / rel)
        if text is None:
            skipped.append({"path": rel, "reason": reason})
            continue
        recs.append(record(rel, text, st, cfg))
    marks = {p: v[0] for p, v in old.items()} if old else None
    families.mark_duplicates(recs, lambda r: text_of(vault, r), known, marks)
    _former_duplicates(vault, recs)
    families.mark_families(recs, marks)
    before = {p: bool(v[0]["duplicate_of"]) for p, v in old.items()}
    now = {r["path"]: bool(r["duplicate_of"]) for r in recs}
    changed = ({p for p in before.keys() | now.keys() if before.get(p) != now.get(p)}
               if old else None)
    families.resolve_links(recs, changed)
    return recs, skipped


def _former_duplicates(vault: Path, recs: list[dict]) -> None:
    """A former duplicate needs chunks of its own now: its text is read."""
    for r in recs:
        if not r["duplicate_of"] and "_body" not in r and "_chunks" not in r:
            text_of(vault, r)


# ------------------------------------------------------------- what changed only

@dataclass
class Changes:
    """A refresh that few notes changed: the records read or re-marked now (in path
    order, scratch keys included), the paths gone, what was skipped; every other note's
    record is the previous index's, as it was."""
    recs: list
    gone: set
    skipped: list
    read: int                                  # notes read now (skipped ones too)
    by_path: dict = field(default_factory=dict)    # path -> its record in recs
    at: dict = field(default_factory=dict)         # path -> position in prev's records


class _Old:
    """The previous index's records by column, looked up by path."""

    def __init__(self, prev):
        self.files, self.where = prev.files, prev.where
        self.at = prev.by_path.at if isinstance(prev.by_path, file_columns.ByPath) else {
            p: i for i, p in enumerate(file_columns.column(prev.files, "path"))}
        self.cols: dict[str, list] = {}

    def col(self, key: str) -> list:
        if key not in self.cols:
            self.cols[key] = file_columns.column(self.files, key)
        return self.cols[key]

    def rec(self, path: str):
        return self.files[self.at[path]]

    def rows(self, path: str):
        return self.where[path][0] if path in self.where else None


def changes(vault: Path, paths: list[str], stats: dict, cfg: dict, prev, known):
    """Changes for a refresh against prev (built under the same reuse key), or None when
    more than CHANGES_SHARE of the notes were read, added or gone. Stale as catalogue."""
    old = _Old(prev)
    size, mtime = old.col("size"), old.col("mtime_ns")
    at = old.at
    if old.col("path") == paths:       # the same notes: compare stats in step
        read = [p for p, st, a, b in zip(paths, map(stats.get, paths), size, mtime)
                if st is None or st[0] != a or st[1] != b or len(st) != 2]
    else:
        read = [p for p in paths if (i := at.get(p)) is None
                or stats.get(p) != [size[i], mtime[i]]]
    gone = {p for p in at if p not in stats}
    if len(read) + len(gone) > CHANGES_SHARE * max(len(paths), 1):
        return None
    recs, skipped = {}, []
    for rel in read:
        text, st, reason = vault_walk.read(vault / rel)
        if text is None:
            skipped.append({"path": rel, "reason": reason})
        else:
            recs[rel] = record(rel, text, st, cfg)
    marks = {p: old.rec(p) for p in read + sorted(gone) if p in at}  # read or gone
    _duplicates(vault, recs, marks, old, cfg, known)
    _former_duplicates(vault, list(recs.values()))
    _families(recs, marks, old, cfg)
    _links(recs, marks, old, cfg)
    out = [recs[p] for p in sorted(recs)]
    return Changes(out, gone, skipped, len(read), recs, at)


def _frozen(old: _Old, path: str, cfg: dict) -> dict:
    """A note outside what changed, as the rules it is not re-marked by left it: its
    previous record with its previous marks (the full catalogue gives it the same)."""
    prev = old.rec(path)
    rec = reused(prev, old.rows(path), cfg)
    rec["duplicate_of"], rec["is_latest"] = prev["duplicate_of"], prev["is_latest"]
    rec["family"] = rec.pop("_family")
    return rec


def _add(recs: dict, marks: dict, old: _Old, paths, cfg: dict, make) -> None:
    for p in paths:
        if p not in recs:
            recs[p] = make(old, p, cfg)
            marks[p] = old.rec(p)


def _duplicates(vault, recs: dict, marks: dict, old: _Old, cfg: dict, known) -> None:
    """families.mark_duplicates over the changed notes' hash groups and the date groups
    they touch, each whole, with the hash groups of those members (so the hash pass
    marks them as it would over every note); the rest keep their marks."""
    paths, sha, day, source = (old.col(k) for k in ("path", "sha256", "date", "date_source"))
    current = [i for i, p in enumerate(paths) if p not in marks]   # neither read nor gone
    gone = {p for p in marks if p not in recs}
    shas = {r["sha256"] for r in recs.values()} | {m["sha256"] for m in marks.values()}
    _add(recs, marks, old, [paths[i] for i in current if sha[i] in shas], cfg, _kept)
    groups: dict = {}
    for r in recs.values():
        groups.setdefault(("sha", r["sha256"]), []).append(r)
    todo = families.touched_dates(list(recs.values()), groups, marks)
    dated = {i for i in current if source[i] != "mtime" and day[i] in todo}
    more = {sha[i] for i in dated}
    _add(recs, marks, old, [paths[i] for i in current if i in dated or sha[i] in more], cfg,
         _kept)
    outside = set()
    if known is not None and known["old"]:
        ends = {p for pair in known["old"] for p in pair.split("\t")}
        outside = {p for p in ends if p not in recs and p not in gone and p in old.at
                   and source[old.at[p]] != "mtime" and day[old.at[p]] not in todo}
    families.mark_duplicates(_ordered(recs), lambda r: text_of(vault, r), known, marks,
                             outside)


def _kept(old: _Old, path: str, cfg: dict) -> dict:
    """A reused note re-marked now (the full catalogue's record of it)."""
    return reused(old.rec(path), old.rows(path), cfg)


def _dup_kept(old: _Old, path: str, cfg: dict) -> dict:
    """A reused note outside the duplicate passes: its previous copy mark stands."""
    rec = _kept(old, path, cfg)
    rec["duplicate_of"] = old.rec(path)["duplicate_of"]
    return rec


def _ordered(recs: dict) -> list:
    return [recs[p] for p in sorted(recs)]


def _families(recs: dict, marks: dict, old: _Old, cfg: dict) -> None:
    """families.mark_families over the families the changes touch, each whole."""
    families.name_families(list(recs.values()))
    touched = families.touched_families(list(recs.values()), marks)
    paths, fam = old.col("path"), old.col("family")
    _add(recs, marks, old, [p for p, f in zip(paths, fam) if f in touched and p not in marks],
         cfg, _dup_kept)
    families.mark_families(_ordered(recs), marks)


def _links(recs: dict, marks: dict, old: _Old, cfg: dict) -> None:
    """families.resolve_links for the notes read now and the notes whose links name a
    path that came, went or changed copy status; targets looked up among every note."""
    changed = {p for p in recs if p not in old.at} | {p for p in marks if p not in recs}
    changed |= {p for p, r in recs.items() if p in marks
                and bool(marks[p]["duplicate_of"]) != bool(r["duplicate_of"])}
    hit = {k for p in changed for k in families.path_keys(p)}
    if hit and _may_name(old, hit):
        paths, links = old.col("path"), old.col("wikilinks")
        _add(recs, marks, old, [p for p, ws in zip(paths, links) if ws and p not in marks
                                and families.names_any(ws, hit)], cfg, _frozen)
    families.resolve_links(_ordered(recs), changed, lambda keys: _named(old, marks, keys))


def _may_name(old: _Old, keys: set) -> bool:
    """False when no previous note's link can name one of keys: every link, lower-cased
    (all ASCII: per character), holds none of them; True otherwise."""
    if "links" not in old.cols:
        text = "\n".join(itertools.chain.from_iterable(old.col("wikilinks")))
        old.cols["links"] = text.lower() if text.isascii() else None
    text = old.cols["links"]
    return text is None or any(k in text for k in keys)


def _named(old: _Old, marks: dict, keys: set) -> list[dict]:
    """{path, duplicate_of} of the notes outside marks that a link key finds (by path or
    stem, lower case). Paths all ASCII: a substring search over them lower-cased first,
    then the exact test; else the exact test on every path."""
    paths, dup = old.col("path"), old.col("duplicate_of")
    if "blob" not in old.cols:
        blob = "\n".join(paths)
        old.cols["blob"] = blob.lower() if blob.isascii() else None
        old.cols["starts"] = list(itertools.accumulate((len(p) + 1 for p in paths),
                                                       initial=0))
    blob, starts = old.cols["blob"], old.cols["starts"]
    if blob is None:                   # str.lower of a whole path is not per character
        found = range(len(paths))      # beyond ASCII (a final sigma)
    else:
        found = set()
        for k in keys:
            i = blob.find(k) if k else -1
            while i >= 0:
                found.add(bisect.bisect_right(starts, i) - 1)
                i = blob.find(k, i + 1)
        found = sorted(found)
    return [{"path": paths[j], "duplicate_of": dup[j]} for j in found
            if paths[j] not in marks and not keys.isdisjoint(families.path_keys(paths[j]))]


# ------------------------------------------------------------ the listing (--files)

FILE_FIELDS = ("path", "date", "date_source", "family", "duplicate_of", "private",
               "is_latest")


def listing(files: list[dict]) -> list[dict]:
    """One row per note of the index, as ingest saw it: FILE_FIELDS, sorted by path, and
    its version marker ("version": "v2", "final", "copy", ...); the latest of a family of
    several also what made it latest ("latest_by": families.latest_of's reason)."""
    rows = sorted(({k: f.get(k) for k in FILE_FIELDS} for f in files),
                  key=lambda r: r["path"])
    fams = {}
    for r in rows:
        r["version"] = families.version_marker(Path(r["path"]).stem)
        r["latest_by"] = None
        if not r["duplicate_of"]:
            fams.setdefault(r["family"], []).append(r)
    for members in fams.values():
        if len(members) > 1:
            latest, why = families.latest_of(members)
            latest["latest_by"] = f"marker {latest['version']}".strip() if why == "marker" \
                else why
    return rows


def listing_table(rows: list[dict]) -> str:
    """--files: the listing as aligned columns (latest: "yes", in a family of several
    with what decided, "yes: date" / "yes: marker final"; copy of: the note it
    duplicates)."""
    head = ["path", "date", "dated by", "family", "latest", "copy of", "private"]
    size = Counter(r["family"] for r in rows if not r["duplicate_of"])
    body = [[r["path"], r["date"] or "", r["date_source"] or "",
             r["family"] if size[r["family"]] > 1 or r["duplicate_of"] else "",
             _latest_cell(r), r["duplicate_of"] or "",
             "yes" if r["private"] else ""] for r in rows]
    return "\n".join(textkit.columns(head, body))


def _latest_cell(row: dict) -> str:
    if not row["is_latest"]:
        return ""
    return f"yes: {row['latest_by']}" if row.get("latest_by") else "yes"
