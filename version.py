"""version: time modes over candidates, for whole files AND dated sections of a log.

Stage: version-filter before rerank; settle in the evidence stage after it.
  apply(index, cands, mode, qvec)   before rerank: pull in missing versions, mark, order.
  settle(cands, mode, threshold)    after rerank: label each older version with the
                                    newer one that answers (present, as-of); removes
                                    nothing; returns (kept, dropped).
  versions_answer(index, kept, threshold)   the evidence's fact: whether what answers
                                    can hold versions (harness decides the mode with it).
In:  retrieve.Candidate lists; the Index for families, dates and dated sections exactly
     as ingest computed them (file date/date_source/is_latest/family/duplicate_of, chunk
     section_date); the query vector to pick the closest chunk of a pulled-in version.
Out: Candidate lists. Every candidate leaving apply carries its date ("undated" for an
     mtime date), is_latest, and superseded_by (the newer file's path) whenever a newer
     version of its file is known, in every mode (marking is not filtering; "any" adds,
     reorders and drops nothing). A log's entries are a series, not versions: an entry
     is labelled ("path @ YYYY-MM-DD") only by settle, when a later entry among the
     candidates answers too (the newest entry of a log is often about something else).
Not: dating files, grouping families or deciding what is latest (dating.py,
     families.py), judging relevance (rerank.py), guessing topics. settle only compares
     dates and relevance.

Modes
- present: for each versioned family among the candidates whose latest file is
  missing (every file ingest flagged latest, on a date tie), add its chunk closest to
  the query; for each dated log, add its newest entry's closest chunk if missing
  (added_by="version"). Nothing is dropped by apply or settle; settle labels an older
  version superseded by the newer one that ALSO answers (the builtin reader's own five
  passages leave a restated one out: evidence._first).
- history: add the closest chunk of every missing version of each family present,
  each other version's chunk most like a candidate of the family (its parallel
  section: versions share structure), and the closest chunk of every dated section of
  each log present (at most HISTORY_MAX_ADDED, in that order). Order: candidates of versioned families and
  dated logs first, grouped by family in fused order of each family's best candidate,
  each group oldest to newest (undated = mtime last); then the others in fused order.
- as_of(DATE): the vault as it stood on DATE. In each versioned family the version in
  force is the newest real-dated file on or before DATE (pulled in when missing); in a
  dated log, its newest entry on or before DATE. Later versions and entries are set
  aside as "not yet written on DATE", an undated version as not known to be in force;
  a single note dated after DATE keeps only its lines stating days on or before DATE
  (a table of dated rows kept up to date, "last year [2025] I ..."), and is set aside
  when none does (a note's date is when its words were written: a later note's
  undated line says what was so later); an undated single note stays, shown undated;
  the one in force is marked latest (on copies of the chunk records), the others
  superseded by it. settle then works as in present mode. What is set aside is
  dropped from the builtin reader's own evidence only: given a budget, the evidence
  gets it back labelled (labelled: not in force, why it was set aside), since versions
  label and order and never remove.
- any: candidates unchanged (only marked).
Dates: a real date (filename, frontmatter, header, section) always outranks a weak
(mtime) one; a real-dated file is never superseded by an mtime-dated one.
"""

from __future__ import annotations

import dataclasses

from verso import asof
from verso import builtin_writer
from verso import dating
from verso import families
from verso import file_columns
from verso import retrieve
from verso import store_load
from verso.retrieve import Candidate

MODES = ("present", "history", "any", "as_of")
HISTORY_MAX_ADDED = 12     # history: chunks pulled in for missing versions and sections
WEAK_SOURCE = dating.WEAK_SOURCE   # date_source whose date is a guess (shown as "undated")
SECTION_MARK = " @ "       # superseded_by for a newer log entry: "path @ 2026-05-02"
DROP_REASON = "superseded by {}"
WHY_VERSION = "a newer version of this note"     # Candidate.why, beside superseded_by
WHY_ENTRY = "a newer entry of this log"
WHY_IN_FORCE = "the version in force on {}"      # as of a date


# ----------------------------------------------------------------- file versions


def _view(f: dict | None) -> tuple | None:
    """(is_latest, weak, date) of a file record; None when unknown."""
    if f is None:
        return None
    return (bool(f.get("is_latest")), f.get("date_source") == WEAK_SOURCE, f.get("date"))


def _newer(y: tuple | None, x: tuple | None) -> bool:
    """Is file view y a newer version than file view x (same family)?"""
    if y is None or x is None or y[1] is None or x[1] is None:
        return False           # unknown: never supersede on a guess
    (y_latest, y_weak, y_date), (x_latest, x_weak, x_date) = y, x
    if y_weak and not x_weak:
        return False           # a weak date never beats a real one
    if y_latest != x_latest:
        return y_latest        # ingest's latest flag decides between these two
    if y_weak != x_weak:
        return not y_weak      # real outranks weak
    return bool(y_date and x_date and y_date > x_date)


def _strength(f: dict) -> tuple:
    """Sort key, newest last: latest flag, real date, date, path."""
    return (bool(f.get("is_latest")), f.get("date_source") != WEAK_SOURCE,
            f.get("date") or "", f["path"])


def _tables(index) -> dict:
    """Cached: family -> version files (no duplicates); path -> {section date: ids}
    (per note, when asked)."""
    tables = index.cache.get("version")
    if tables is None:
        members: dict[str, list] = {}     # family -> positions in index.files
        files = index.files
        for i, (path, family, dup) in enumerate(zip(*(file_columns.column(files, k) for k in (
                "path", "family", "duplicate_of")))):
            if not dup:
                members.setdefault(family or path, []).append(i)
        tables = {"members": members, "files": files, "sections": _Sections(index)}
        index.cache["version"] = tables
    return tables


class _Sections:
    """path -> {section date: [chunk ids]} of a note with dated sections (get, in),
    made for a note when first asked for: a question looks at a few notes, not all."""

    def __init__(self, index):         # no reference to the index: no cycle through its cache
        self.chunks, self.ids_of = index.chunks, retrieve.chunk_ids_by_path(index)
        self.memo = {}

    def get(self, path: str, default=None):
        if path not in self.memo:
            ids = self.ids_of.get(path, ())
            out: dict[str, list] = {}
            for i, day in zip(ids, store_load.chunk_column(self.chunks, "section_date", ids)):
                if day:
                    out.setdefault(day, []).append(int(i))
            self.memo[path] = out
        return self.memo[path] or default

    def __contains__(self, path: str) -> bool:
        return bool(self.get(path))


def _versions(tables, family) -> list[dict]:
    """Version files of a family (empty when it has only one file)."""
    at = tables["members"].get(family, ())
    return [tables["files"][i] for i in at] if len(at) > 1 else []


def _latest(files: list[dict]) -> list[dict]:
    """The files ingest flagged latest (several on a tie), else the strongest one."""
    flagged = sorted((f for f in files if f.get("is_latest")), key=lambda f: f["path"])
    return flagged or ([max(files, key=_strength)] if files else [])


def _pull(index, qvec, ids, added_by="version") -> Candidate | None:
    """The chunk of ids closest to the query, as a new candidate (None if no ids)."""
    if ids is None or len(ids) == 0:
        return None
    cid = retrieve.closest_chunk(index, qvec, ids)
    return Candidate(index.chunks[cid], dense_score=float(index.vectors[cid] @ qvec),
                     added_by=added_by)


def _section_key(c: Candidate) -> tuple:
    return (c.path, c.chunk.get("section_date"))


# ------------------------------------------------------------------------ apply


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown time mode {mode!r}: use one of {', '.join(MODES)}")


def apply(index, cands: list[Candidate], mode: str, qvec, as_of: str | None = None
          ) -> list[Candidate]:
    """Time mode before rerank: pull in missing versions, mark superseded_by, order.
    as_of ("YYYY-MM-DD") is the date of mode "as_of".

    Returns new Candidate objects (the input list is not modified)."""
    _check_mode(mode)
    out = [dataclasses.replace(c) for c in cands]
    if mode == "as_of":
        if not as_of:
            raise ValueError("time mode as_of needs a date")
        return _as_of(index, out, qvec, as_of)
    if mode == "present":
        out = _present(index, out, qvec)
    elif mode == "history":
        out = _history(index, out, qvec)
    mark(index, out)
    return out


def _in_force(files: list[dict], day: str) -> dict | None:
    """The newest file on or before day, by its real date or, undated, by the year its
    name writes (_begun), then by the marker of its name as families decides the latest
    (draft < none < v2 < final); None: none was written yet."""
    dated = [(when, f) for f in files if (when := _begun(f)) and when <= day]
    return max(dated, key=lambda x: (x[0], families.name_rank(x[1]["path"]), x[1]["path"])
               )[1] if dated else None


def _begun(f: dict) -> str | None:
    """When a version began: its real date; undated, the first day of the year its name
    writes (a note kept a year at a time, "Rates 2025", is in force from that year's
    start, whatever the file's clock says); None when neither is known."""
    if f.get("date_source") != WEAK_SOURCE:
        return f.get("date") or "9999"
    year = families.name_year(f["path"])
    return f"{year:04d}-01-01" if year else None


def _as_of(index, cands, qvec, day) -> list[Candidate]:
    """As of day: pull in each family's version in force and each log's newest entry up
    to day when missing, then set aside what was not yet written and mark the rest."""
    tables, ids_of = _tables(index), retrieve.chunk_ids_by_path(index)
    have, out = {c.path for c in cands}, []
    have_sections = {_section_key(c) for c in cands}
    for c in cands:
        out.append(c)
        force = _in_force(_versions(tables, c.chunk.get("family") or c.path), day)
        if force and force["path"] not in have:
            new = _pull(index, qvec, ids_of.get(force["path"]))
            if new is not None:
                out.append(new)
                have.add(new.path)
        entries = [d for d in tables["sections"].get(c.path, {}) if d <= day]
        if entries and (c.path, max(entries)) not in have_sections:
            new = _pull(index, qvec, tables["sections"].get(c.path)[max(entries)])
            out.append(new)
            have_sections.add(_section_key(new))
    for c in out:
        _mark_as_of(index, tables, c, day)
    return out


def _mark_as_of(index, tables, c: Candidate, day: str) -> None:
    """Set aside (dropped) or mark one candidate for as-of day."""
    c.superseded_by = c.why = None
    files = _versions(tables, c.chunk.get("family") or c.path)
    f = index.by_path.get(c.path) or {}
    latest, entry_latest = c.is_latest, c.chunk.get("entry_latest")
    if files:
        force, begun = _in_force(files, day), _begun(f) if f else None
        if begun is None:
            c.dropped = f"undated: not known to be in force on {day}"
        elif begun > day:
            known = (f"dated {f.get('date')}" if f.get("date_source") != WEAK_SOURCE
                     else f"named {begun[:4]}")
            c.dropped = f"not yet written on {day} ({known})"
        latest = force is not None and force["path"] == c.path
        if force is not None and not latest and not c.dropped:
            c.superseded_by, c.why = force["path"], WHY_IN_FORCE.format(day)
    entry = c.chunk.get("section_date")
    text = c.chunk.get("text", "")
    if not files and not entry and f.get("date_source") != WEAK_SOURCE \
            and (f.get("date") or "") > day:
        text = dated_before(text, day)     # a single note written after the day
        if not text:
            c.dropped = f"not yet written on {day} (dated {f.get('date')})"
    entries = [d for d in tables["sections"].get(c.path, {}) if d <= day]
    if entry and entry > day:
        c.dropped = c.dropped or f"not yet written on {day} (entry {entry})"
    elif entry and entries:
        entry_latest = entry == max(entries)
        if not entry_latest and not c.superseded_by:
            c.superseded_by = f"{c.path}{SECTION_MARK}{max(entries)}"
            c.why = WHY_IN_FORCE.format(day)
    c.chunk = {**c.chunk, "is_latest": latest, "entry_latest": entry_latest, "text": text}


def labelled(dropped: list[Candidate], index) -> list[Candidate]:
    """What as of a date set aside, given back labelled (versions label and order, they
    never remove: every reader given a budget reads the labels): copies not in force
    (is_latest False), why saying what set each aside (also their status for a model,
    builtin_writer.SET_ASIDE), with their notes' own text. No statement in them labels
    another passage (evidence.statement_pairs): they were written after the day."""
    out = []
    for c in dropped:
        chunk = {**c.chunk, "is_latest": False, builtin_writer.SET_ASIDE: c.dropped,
                 "text": index.chunks[c.id].get("text", "")}
        out.append(dataclasses.replace(c, chunk=chunk, why=c.dropped, superseded_by=None,
                                       dropped=None))
    return out


def dated_before(text: str, day: str) -> str:
    """The lines of a note written after day that state days, every one on or before it
    ("Date: 2026-07-04; Time: 23:05" in a table kept up to date, "last year [2025] I ran
    my first half marathon"): what the note says of the time before day. A line stating
    no day, or a later one, was not known on day. "" when no line is left."""
    return "\n".join(line for line in text.splitlines()
                     if (spans := asof.stated(line)) and max(hi for _, hi in spans) <= day)


def _present(index, cands, qvec) -> list[Candidate]:
    """Add each family's latest file(s) and each log's newest entry when missing; a
    pulled chunk goes right after the best candidate of its family / log."""
    tables, ids_of = _tables(index), retrieve.chunk_ids_by_path(index)
    have = {c.path for c in cands}
    have_sections = {_section_key(c) for c in cands}
    extras: dict[int, list] = {}
    anchors: dict[str, int] = {}   # path -> position of the candidate it hangs on
    families = set()
    for i, c in enumerate(cands):
        anchors.setdefault(c.path, i)
        family = c.chunk.get("family") or c.path
        if family in families:
            continue
        families.add(family)
        for latest in _latest(_versions(tables, family)):
            new = None if latest["path"] in have else _pull(
                index, qvec, ids_of.get(latest["path"]))
            if new is not None:
                extras.setdefault(i, []).append(new)
                have.add(new.path)
                have_sections.add(_section_key(new))
                anchors.setdefault(new.path, i)
    for path, i in anchors.items():
        sections = tables["sections"].get(path)
        if sections and (path, max(sections)) not in have_sections:
            new = _pull(index, qvec, sections[max(sections)])
            extras.setdefault(i, []).append(new)
            have_sections.add(_section_key(new))
    return [x for i, c in enumerate(cands) for x in [c] + extras.get(i, [])]


def _history(index, cands, qvec) -> list[Candidate]:
    """Pull in every missing version and dated section; each family oldest first."""
    tables, ids_of = _tables(index), retrieve.chunk_ids_by_path(index)
    have = {c.path for c in cands}
    families = dict.fromkeys(c.chunk.get("family") or c.path for c in cands)
    versions = []
    for family in families:
        for f in sorted(_versions(tables, family), key=_display_key):
            if f["path"] not in have:
                new = _pull(index, qvec, ids_of.get(f["path"]))
                if new is not None:
                    versions.append(new)
                    have.add(f["path"])
    parallels = _parallels(index, tables, ids_of, cands + versions, qvec)
    have_sections = {_section_key(c) for c in cands + versions}
    entries = []
    for path in dict.fromkeys(c.path for c in cands + versions):
        for day, ids in sorted(tables["sections"].get(path, {}).items()):
            if (path, day) not in have_sections:
                entries.append(_pull(index, qvec, ids))
    entries.sort(key=lambda c: -c.dense_score)
    have_ids = {c.id for c in parallels}
    added = versions + parallels + [c for c in entries if c.id not in have_ids]
    everyone = cands + added[:HISTORY_MAX_ADDED]
    order = {id(c): i for i, c in enumerate(everyone)}
    group: dict[str, int] = {}     # family -> position of its best candidate
    for c in everyone:
        group.setdefault(c.chunk.get("family") or c.path, len(group))
    dated = sorted((c for c in everyone if _is_versioned(tables, c)), key=lambda c: (
        group[c.chunk.get("family") or c.path], c.chunk.get("date_source") == WEAK_SOURCE,
        c.chunk.get("date") or "", c.is_latest, c.path, order[id(c)]))
    return dated + [c for c in everyone if not _is_versioned(tables, c)]


def _parallels(index, tables, ids_of, cands, qvec) -> list[Candidate]:
    """History: for each candidate of a versioned family, the chunk of every other
    version file most similar to it (versions of one document share their structure,
    so "When" of v2 finds "When" of v1), when not yet present; most similar first.
    The chunk closest to the query alone may be the wrong part of an old version."""
    have = {c.id for c in cands}
    found: dict[int, float] = {}
    for c in cands:
        if c.chunk.get("section_date"):
            continue               # log entries are pulled by date, not by likeness
        for f in _versions(tables, c.chunk.get("family") or c.path):
            ids = ids_of.get(f["path"])
            if f["path"] == c.path or ids is None or len(ids) == 0:
                continue
            cid = retrieve.closest_chunk(index, index.vectors[c.id], ids)
            sim = float(index.vectors[cid] @ index.vectors[c.id])
            if cid not in have and sim > found.get(cid, -2.0):
                found[cid] = sim
    return [Candidate(index.chunks[cid], dense_score=float(index.vectors[cid] @ qvec),
                      added_by="version")
            for cid in sorted(found, key=lambda i: (-found[i], i))]


def family_paths(index) -> dict[str, list[str]]:
    """family -> the paths of its version files (no copies), one path for a note alone."""
    tables = _tables(index)
    out = tables.get("paths")
    if out is None:
        files = tables["files"]
        out = tables["paths"] = {f: [files[i]["path"] for i in at]
                                 for f, at in tables["members"].items()}
    return out


def _display_key(f: dict) -> tuple:
    """History order of files: real dates oldest -> newest, then undated (mtime)."""
    return (f.get("date_source") == WEAK_SOURCE, f.get("date") or "", f["path"])


def _is_versioned(tables, c: Candidate) -> bool:
    return bool(_versions(tables, c.chunk.get("family") or c.path)
                or c.path in tables["sections"])


def mark(index, cands) -> None:
    """superseded_by: the newest newer file of the family."""
    tables = _tables(index)
    for c in cands:
        c.superseded_by = c.why = None
        own = _view(index.by_path.get(c.path))
        newer = [f for f in _versions(tables, c.chunk.get("family") or c.path)
                 if f["path"] != c.path and _newer(_view(f), own)]
        if newer:
            c.superseded_by, c.why = max(newer, key=_strength)["path"], WHY_VERSION


# ----------------------------------------------------------------------- settle


def settle(cands: list[Candidate], mode: str, threshold: float | None = None,
           index=None) -> tuple[list[Candidate], list[Candidate]]:
    """After rerank: label, never remove. Present (and as-of) mode: an older version x
    that a newer answering candidate y supersedes (y a newer file of x's family, or a
    later dated section of x's own file) keeps its place, labelled superseded_by y, so
    every reader can still cite what only the older one holds (the evidence orders a
    document's versions: passages.py). "Answers": relevance
    >= threshold; with threshold None (no rerank) being among the candidates, except
    that a log entry pulled in only by apply (added_by="version") is no evidence: a
    log's newest entry is often about something else. History moves the versions of
    the leading document to the front (needs `index`); any changes nothing.

    Returns (kept, dropped): dropped holds only what arrived with .dropped set (as of a
    date, versions not yet written). `index` (optional) gives exact file dates for
    chunks inside dated sections; without it such a file only compares with its family
    when another candidate of the same file shows the file's date.
    """
    _check_mode(mode)
    kept = [c for c in cands if not c.dropped]
    if mode in ("present", "as_of"):     # as_of: apply marked the version in force latest
        views = _settle_views(kept, index if mode == "present" else None)
        for x in kept:
            by = _superseder(x, kept, threshold, views)
            if by:
                x.superseded_by = by
                x.why = WHY_ENTRY if SECTION_MARK in by else (x.why or WHY_VERSION)
    if mode == "history" and index is not None:
        kept = _lead_versions_first(index, kept, threshold)
    return kept, [c for c in cands if c.dropped]


def _lead_versions_first(index, cands, threshold) -> list[Candidate]:
    """History: the versions of the best-ranked versioned document that answers move
    to the front, in their ranked order, so the kept passages hold its whole history
    rather than the one or two versions that happen to outrank unrelated notes."""
    tables = _tables(index)
    lead = next((c for c in cands if _answers(c, threshold)
                 and _is_versioned(tables, c)), None)
    if lead is None:
        return cands
    key = lead.chunk.get("family") or lead.path
    group = [c for c in cands if (c.chunk.get("family") or c.path) == key]
    return group + [c for c in cands if c not in group]


def _settle_views(cands, index) -> dict:
    """path -> (is_latest, weak, date) of its file; weak/date None when unknown."""
    views: dict[str, tuple] = {}
    for c in cands:
        if index is not None and c.path in index.by_path:
            views[c.path] = _view(index.by_path[c.path])
        elif c.chunk.get("date_source") != "section":
            views[c.path] = (c.is_latest, c.chunk.get("date_source") == WEAK_SOURCE,
                             c.chunk.get("date"))
        else:
            views.setdefault(c.path, (c.is_latest, None, None))
    return views


def versions_answer(index, kept: list[Candidate], threshold=None) -> bool:
    """Whether what answers (relevance at the threshold) can hold versions of the
    answer: two or more files answer, or the one file that answers has other versions or
    dated log entries. False when nothing answers. (A present mode the rules presumed
    stands only where this holds: harness._Time.)"""
    answering = [c for c in kept if _answers(c, threshold)]
    if len({c.path for c in answering}) != 1:
        return bool(answering)
    return _is_versioned(_tables(index), answering[0])


def _answers(c: Candidate, threshold) -> bool:
    if threshold is None:
        return True
    return c.relevance is not None and c.relevance >= threshold


def _superseder(x, cands, threshold, views) -> str | None:
    """Label of the newest answering candidate that supersedes x, else None."""
    family = x.chunk.get("family") or x.path
    best_file, best_day = None, None
    for y in cands:
        if y is x or not _answers(y, threshold):
            continue
        if (y.path != x.path and (y.chunk.get("family") or y.path) == family
                and _newer(views[y.path], views[x.path])):
            if best_file is None or _newer(views[y.path], views[best_file]):
                best_file = y.path
        elif (y.path == x.path and _later_entry(y, x, threshold) and
              y.chunk["section_date"] > (best_day or "")):
            best_day = y.chunk["section_date"]
    if best_file:
        return best_file
    return f"{x.path}{SECTION_MARK}{best_day}" if best_day else None


def _later_entry(y, x, threshold) -> bool:
    """y lies in a later dated section of x's file and counts as evidence."""
    xd, yd = x.chunk.get("section_date"), y.chunk.get("section_date")
    if not (xd and yd and yd > xd):
        return False
    return threshold is not None or y.added_by != "version"
