"""Duplicates, version families and links: what the notes of a vault are to each other.

In:  the file records of one ingest (path, sha256, date, date_source, shingle count,
     versioned, wikilinks), each note's collapsed text on demand.
Out: the records marked in place: duplicate_of, family, is_latest, links (wikilinks
     resolved to vault paths); shingles, the word shingles a record counts.
Not: reading notes (vault_walk.py), dating them (dating.py), or choosing versions for a
     question (version.py).

Rules, decided by code:
- Exact duplicates: same sha256 (files.json "sha256") of the whole text, frontmatter
  included, whitespace collapsed. Near-copies (word 5-shingle Jaccard >=
  NEAR_COPY_JACCARD) are duplicates only when both have the same real (non-mtime) date.
  The copy kept: the one without a copy marker, else the shorter path.
- Family: folder + name without dates (a bare year too: "Rates 2025" and "Rates 2026"
  are one document kept a year at a time; a weekday beside a date goes with it: "Sun 1
  Feb 2026" is a day's note), v1/v2/final/updated/revised/draft, (1)/copy/copy 2/backup/
  bak/old and separators. A name left empty ("2026-04-03.md") and files in
  `versioned = false` folders are their own family.
- Exactly one member of a family is latest (latest_of). Newest real date wins; mtime
  never beats a real date. When the newest real dates tie, the version marker of the
  name decides (version_rank: old < draft < v1 = no marker < v2 < ... < updated =
  revised < final, any case), then, when every member's name writes one, its year
  ("Rates 2026" after "Rates 2025"); when every member is dated by mtime alone (files
  cloned or synced carry one), the marker and the year decide first and mtime only
  between equal ones. A copy marker ((1), copy, backup, bak) is no version: between
  members still tied, the one without it, else the path that sorts last, numbers
  compared as numbers (a name's numbers count up: "insurance 2026-27" after "insurance
  2025-26"). `ingest --files` shows what decided.
"""

from __future__ import annotations

import os
import re
import zlib
from collections import defaultdict
from pathlib import Path

from verso import dating

NEAR_COPY_JACCARD = 0.9            # word 5-shingle similarity of a near-copy
SHINGLE = 5
SKETCH = 8                         # bottom-k shingle hashes a record keeps ("sketch")
BOILERPLATE_SHARE = 0.1            # a sketch hash in more of a date's notes is a template's
BOILERPLATE_MIN = 20               # ... when at least this many notes share it
COPY_RE = re.compile(r"\(\d+\)|(?<![a-z])(copy|backup|bak|old)(?![a-z])", re.I)
COPY_N_RE = re.compile(r"\(\d+\)|(?<![a-z])copy[\s_-]+\d+(?!\d)")  # (1), macOS "copy 2"
VERSION_RE = re.compile(r"(?<![a-z0-9])v\d+(?:\.\d+)*(?![a-z0-9])")
REWRITE_WORDS = ("updated", "revised")     # a rewrite's name: newer than v-numbers
RANK_WORDS = ("final", *REWRITE_WORDS, "draft", "old")   # name words that order versions
MARKER_WORDS = {*RANK_WORDS, "copy", "backup", "bak"}
RANK_WORD_RE = re.compile(rf"(?<![a-z])({'|'.join(RANK_WORDS)})(?![a-z])")  # a folded name
DIGITS_RE = re.compile(r"(\d+)")
SEPARATORS_RE = re.compile(r"[\s_\-.,()\[\]]+")   # after dating.fold: every dash is "-"
YEAR_RE = re.compile(r"(?<![a-z\d.,:£$€#])(?:19|20)\d\d(?:[/-]\d\d(?!\d))?(?![\d.,:%a-z])")
                                   # "Rates 2026", "budget 2025/26"; not "£2026", "#2026"
DATE_MARK = "\x00"                 # where _undated blanked a date, until the weekday goes
_WEEKDAY = rf"(?<![a-z])(?:{dating.WEEKDAY}|weds)(?![a-z])"   # and a journal's "Weds"
WEEKDAY_RE = re.compile(rf"{_WEEKDAY}[\s,.]*{DATE_MARK}|{DATE_MARK}[\s,.]*{_WEEKDAY}")
WIKILINK_RE = re.compile(r"\[\[([^\]|#\n]*)(?:#[^\]|\n]*)?(?:\|[^\]\n]*)?\]\]")


def _undated(stem: str) -> str:
    """A name folded (dating.fold), every date form in it blanked: d/m/y digits too,
    whatever the order ("2026-10" is no v-number, "Oct" no word), and a bare year; a
    weekday written beside a date goes with it ("Sun 1 Feb 2026", "2026-03-01 Sun": a
    day's note, not a version of every other Sunday's)."""
    s = dating.fold(stem)
    for rx, _ in dating.DATE_PATTERNS:
        s = rx.sub(DATE_MARK, s)
    return YEAR_RE.sub(" ", WEEKDAY_RE.sub(DATE_MARK, s).replace(DATE_MARK, " "))


def _family_name(stem: str) -> str:
    """"Rates v2 (1)", "rates_2026-06", "Rates – Sept 2026", "Rates copy 2" -> "rates"."""
    s = VERSION_RE.sub(" ", COPY_N_RE.sub(" ", _undated(stem)))
    return " ".join(w for w in SEPARATORS_RE.sub(" ", s).split() if w not in MARKER_WORDS)


def version_marker(stem: str) -> str:
    """The version words of a name, as written in it, folded: "Budget v2 - FINAL" ->
    "v2 final", "budget (1)" -> "copy", "budget" -> ""."""
    s = _undated(stem)
    words = [m.group(0) for m in VERSION_RE.finditer(s)] + RANK_WORD_RE.findall(s)
    return " ".join(words + (["copy"] if _a_copy(stem) else []))


def version_rank(stem: str) -> tuple:
    """What a name's version marker says of its order, higher newer: old < draft < v1
    = no marker < v2 < v2.1 < ... < updated = revised < final (a "v2 draft" under v2, a
    "v3 final" over a "final", "plan updated" over "plan v2"). Copy markers do not
    count."""
    words = version_marker(stem).split()
    numbers = [tuple(int(n) for n in w[1:].split(".")) for w in words if w[0] == "v"]
    return ("old" not in words, "final" in words, bool(set(REWRITE_WORDS) & set(words)),
            max(numbers, default=(1,)), "draft" not in words)


def latest_of(members: list[dict]) -> tuple[dict, str]:
    """(the family's one latest member, what decided: "date", "marker", "name year",
    "file time", "not a copy" or "path"). members: live records of one family {path, date,
    date_source}, one or more, no two with one path."""
    pool = [m for m in members if m["date_source"] != dating.WEAK_SOURCE]
    years = [("name year", _year_of)] if all(_year_of(m) for m in members) else []
    steps = ([("date", _date_of), ("marker", _rank_of)] + years if pool else
             [("marker", _rank_of)] + years + [("file time", _date_of)])
    pool = pool or members
    for reason, key in steps + [("not a copy", _not_copy), ("path", _path_order)]:
        keys = [key(m) for m in pool]
        top = max(keys)
        tied = [m for m, k in zip(pool, keys) if k == top]
        if len(tied) == 1:
            return tied[0], reason
        pool = tied
    raise AssertionError(f"two members with one path: {pool[0]['path']}")


def _date_of(rec: dict) -> str:
    return rec["date"] or ""


def _year_of(rec: dict) -> int:
    return name_year(rec["path"])


def _rank_of(rec: dict) -> tuple:
    return name_rank(rec["path"])


def name_year(path: str) -> int:
    """The latest bare year a note's name writes ("Rates 2026"), 0 when none."""
    name = dating.fold(_stem(path))
    return max((int(m.group(0)[:4]) for m in YEAR_RE.finditer(name)), default=0)


def name_rank(path: str) -> tuple:
    """The version marker its name writes, as version_rank orders them (old < draft <
    no marker < v2 < ... < final)."""
    return version_rank(_stem(path))


def _not_copy(rec: dict) -> bool:
    return not _a_copy(_stem(rec["path"]))


def _path_order(rec: dict) -> tuple:
    """A path in natural order, numbers as numbers: "insurance 2026-27" after
    "insurance 2025-26", "plan (10)" after "plan (9)"; the path itself last."""
    parts = DIGITS_RE.split(rec["path"].casefold())
    return tuple(int(x) if i % 2 else x for i, x in enumerate(parts)), rec["path"]


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]    # Path(path).stem, faster


def _copy_marked(stem: str) -> bool:
    low = stem.lower()         # COPY_RE needs one of these (every character it matches
    return (("(" in low or "copy" in low or "bak" in low or "old" in low  # ignoring
             or "backup" in low) and bool(COPY_RE.search(stem)))     # case lowers to it)


def _a_copy(stem: str) -> bool:
    """A copy marker in a name: (1), copy, backup, bak ("old" is a version word)."""
    return _copy_marked(stem) and any(m.group(0).lower() != "old"
                                      for m in COPY_RE.finditer(stem))


def _keeper_key(rec: dict):
    return (_copy_marked(_stem(rec["path"])), len(rec["path"]), rec["path"])


def shingles(words: list[str]) -> set:
    if len(words) < SHINGLE:
        return {tuple(words)}
    return set(zip(*(words[i:] for i in range(SHINGLE))))


def sketch(sets: set) -> list[int]:
    """The SKETCH smallest CRC32s of a note's shingles (bottom-k MinHash). Two notes
    with Jaccard J share the smallest hash of their union with probability J, so a
    near-copy pair (J >= 0.9) shares none of its bottom-8 with probability about
    0.1 ** 8: the sketches find the pairs worth comparing without reading any note."""
    hashes = {zlib.crc32("\x1f".join(s).encode("utf-8", "surrogatepass")) for s in sets}
    return sorted(hashes)[:SKETCH]


def _candidates(members: list[dict]) -> dict:
    """{index in members: the later members that share a sketch hash}. A hash most notes
    of the group share (a template's or frontmatter's shingle: in more than
    BOILERPLATE_SHARE of them, and BOILERPLATE_MIN or more) pairs nobody; a member left
    with fewer than two other hashes, or without a sketch (an older index), pairs with
    every other member, as every pair was compared before sketches."""
    by_hash = defaultdict(list)
    for i, m in enumerate(members):
        for h in m.get("sketch") or ():
            by_hash[h].append(i)
    common = {h for h, ids in by_hash.items() if len(ids) >= BOILERPLATE_MIN
              and len(ids) > BOILERPLATE_SHARE * len(members)}
    out = defaultdict(set)
    for h, ids in by_hash.items():
        if h not in common:
            for a in ids:
                out[a].update(b for b in ids if b > a)
    bare = [i for i, m in enumerate(members)
            if m.get("sketch") is None or len(set(m["sketch"]) - common) < 2]
    for a in bare:
        out[a].update(range(a + 1, len(members)))
        for b in range(a):
            out[b].add(a)
    return out


def mark_duplicates(recs: list[dict], norm_of, known=None, old=None, outside=()) -> None:
    """Exact copies by hash; near-copies only among files with the same real date.
    norm_of(rec) gives a record's whitespace-collapsed text (a reused record's note is
    read only when its shingle count leaves a near-copy possible). old: path -> the
    last run's record of every note it had (None: mark every group): then only the
    date groups an edit can change are compared again (touched), the rest keep their
    marks, which the same members, texts and rules would give again. outside: the paths
    of notes not in recs (a refresh that re-marks only what changed touches) that keep
    their marks too, so their known pairs carry over."""
    groups = defaultdict(list)
    for r in recs:
        groups[("sha", r["sha256"])].append(r)
    todo = None if old is None else touched_dates(recs, groups, old)
    for r in recs:
        if r["date_source"] != "mtime" and (todo is None or r["date"] in todo):
            groups[("date", r["date"])].append(r)
    for (kind, _), members in groups.items():
        if len(members) >= 2:
            _mark_group(kind, members, norm_of, known)
    if todo is not None:
        _keep_marks(recs, old, todo, known, outside)


def touched_dates(recs: list[dict], sha_groups: dict, old: dict) -> set:
    """The real dates whose group an edit can change: the old and new dates of every
    note read now or gone, and of every member of their (old and new) hash groups,
    whose exact-copy marks, which the date pass takes as given, may have changed."""
    here = {r["path"] for r in recs}
    moved = [r for r in recs if not r.get("_reused")]
    moved += [old[r["path"]] for r in moved if r["path"] in old]
    moved += [o for p, o in old.items() if p not in here]
    dates = {r["date"] for r in moved if r["date_source"] != "mtime"}
    for sha in {r["sha256"] for r in moved}:
        dates.update(m["date"] for m in sha_groups.get(("sha", sha), ())
                     if m["date_source"] != "mtime")
    return dates


def _keep_marks(recs: list[dict], old: dict, todo: set, known, outside=()) -> None:
    """Records of untouched date groups take their last marks (a copy by hash was
    marked again just now, to the same keeper); their pair results carry over (and those
    of the notes `outside`)."""
    kept = set(outside)
    for r in recs:
        if r["date_source"] != "mtime" and r["date"] not in todo:
            r["duplicate_of"] = old[r["path"]]["duplicate_of"]
            kept.add(r["path"])
    if known is not None:
        for pair, near in known["old"].items():
            a, _, b = pair.partition("\t")
            if a in kept and b in kept:
                known["new"][pair] = near


def _mark_group(kind: str, members: list[dict], norm_of, known) -> None:
    """One hash group (every later member a copy of the first) or one date group
    (near-copies among the pairs whose sketches meet)."""
    members = sorted((m for m in members if not m["duplicate_of"]), key=_keeper_key)
    sets = {}
    pairs = _candidates(members) if kind == "date" else None
    for i, keep in enumerate(members):
        if keep["duplicate_of"]:        # only later members are marked in its own pass
            continue
        low, high = NEAR_COPY_JACCARD * keep["shingles"], keep["shingles"]
        later = (members[i + 1:] if pairs is None else
                 [members[j] for j in sorted(pairs.get(i, ()))])
        for other in later:
            if other["duplicate_of"]:
                continue
            if kind == "sha":
                other["duplicate_of"] = keep["path"]
                continue
            n = other["shingles"]       # _near_copy's first test, here: most pairs end
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
            sets[r["path"]] = shingles(norm_of(r).lower().split())
    x, y = sets[a["path"]], sets[b["path"]]
    near = len(x & y) / len(x | y) >= NEAR_COPY_JACCARD
    if known is not None:
        known["new"][pair] = near
    return near


def name_families(recs: list[dict]) -> None:
    """Each record's family (also under _family, which mark_families drops)."""
    for r in recs:
        family = r.get("_family")       # reused: same name, rules and config (reuse key)
        if family is None:
            folder, _, name = r["path"].rpartition("/")
            norm = _family_name(Path(name).stem) if r["versioned"] else ""
            family = r["_family"] = f"{folder}/{norm}" if norm and folder else (norm or
                                                                                r["path"])
        r["family"] = family


def mark_families(recs: list[dict], old=None) -> None:
    """Each record's family and whether it is the family's latest. old: path -> the
    last run's record (None: every family is decided): a family whose members, dates
    and copy marks are all as they were keeps its latest."""
    name_families(recs)
    fams = defaultdict(list)
    for r in recs:
        del r["_family"]
        if not r["duplicate_of"]:
            fams[r["family"]].append(r)
    todo = None if old is None else touched_families(recs, old)
    for family, members in fams.items():
        if todo is not None and family not in todo:
            for m in members:
                m["is_latest"] = old[m["path"]]["is_latest"]
            continue
        if len(members) == 1:           # most families: one file, the latest of itself
            members[0]["is_latest"] = True
            continue
        latest = latest_of(members)[0]
        for m in members:
            m["is_latest"] = m is latest


def touched_families(recs: list[dict], old: dict) -> set:
    """Families with a member read now, gone, or whose copy mark came or went."""
    here = {r["path"]: r for r in recs}
    out = {o["family"] for p, o in old.items() if p not in here}
    for r in recs:
        o = old.get(r["path"])
        if (not r.get("_reused") or o is None
                or bool(o["duplicate_of"]) != bool(r["duplicate_of"])):
            out.add(r["family"])
            if o is not None:
                out.add(o["family"])
    return out


def _link_name(raw: str) -> str:
    """A wikilink target, case and note extension dropped: "Ana.md" -> "ana"."""
    return raw.strip().lower().removesuffix(".md").removesuffix(".txt")


def _link_key(raw: str) -> str | None:
    """A wikilink target as resolve_links looks it up (None: an embed of an image or
    another attachment, or empty)."""
    key = _link_name(raw)
    ext = os.path.splitext(key)[1]
    return None if not key or (ext and ext[1:].isalpha()) else key


def path_keys(path: str) -> tuple[str, str]:
    """The names a wikilink finds a note by: its path and its stem, lower case, without
    the extension ("people/Ana.md" -> "people/ana", "ana")."""
    no_ext = path.rsplit(".", 1)[0].lower()
    return no_ext, no_ext.rsplit("/", 1)[-1]


def names_any(wikilinks: list, keys: set) -> bool:
    """Whether a link of wikilinks names one of keys (path_keys; embeds too)."""
    return not keys.isdisjoint(map(_link_name, wikilinks))


def resolve_links(recs: list[dict], changed: set | None = None, more=None) -> None:
    """Wikilink targets -> vault-relative paths by stem or path (case-insensitive).
    changed: the paths that appeared, went or changed duplicate status since the last
    run (None: every record is resolved). A reused record's links then stand as they
    were unless one of its links names such a path (by path or stem): only those names
    have other candidates now, and only the names the resolved links ask for are
    looked up. more(keys): the records ({path, duplicate_of}) of the notes not in recs
    whose path_keys meet keys (recs then hold only what a refresh re-marks)."""
    if changed is None:
        todo = recs
    else:
        hit = {k for p in changed for k in path_keys(p)}
        todo = [r for r in recs if not r.get("_reused") or (hit and names_any(
            r["wikilinks"], hit))]               # a superset of _link_key's: embeds too
    wanted = ({k for r in todo for k in map(_link_key, r["wikilinks"])}
              if changed is not None else None)
    pool = recs
    if more is not None and wanted:
        pool = sorted([*recs, *more(wanted - {None})], key=lambda r: r["path"])
    by_key = defaultdict(list)
    for r in pool:
        for key in path_keys(r["path"]):
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
