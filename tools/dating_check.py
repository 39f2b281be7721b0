"""How a vault's notes are dated (issue 44): notes by date_source, and the notes whose
first lines carry a day that are still dated by their file's mtime (target 0).

    python tools/dating_check.py sample-vault vaults/*      # one row per vault
    python tools/dating_check.py VAULT --list               # ... and every note counted
                                                            #     in "of them by mtime"

dated by: the date_source dating.date_of gives each note (as ingest does), "filename"
counting a file-name month a day in the note refined ("month refined": filename+...).
first lines carry a day: this tool's own reading, not dating.py's, so that it runs on any
checkout (the figures before a change are taken with it too): a whole day (2026-10-08,
8 Oct 2026, Oct 8, 2026, digit dates as the vault's date_order reads them) opens the
title line (the first non-empty line) or one of the three non-empty lines after it (after
#, >, emphasis and a weekday; a list item or a line under a section heading does not
count), or ends the title line set off by a dash, colon, bar or parenthesis. First lines
that carry two different days are a log of dated lines, counted apart ("logs of dated
lines": its first entry is not the note's day). A note carrying one day that dating.py
leaves to mtime is listed with --list, with its lines, to judge.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)
from verso import dating  # noqa: E402
from verso import vault_walk  # noqa: E402

SOURCES = ("text", "title", "filename", "frontmatter", "header", "mtime")
FIRST_LINES = 3
_DAY = (r"(?:(?:19|20)\d\d[-./]\d{1,2}[-./]\d{1,2}"
        r"|\d{1,2}(?:st|nd|rd|th)?\s+[a-z]{3,9}\.?,?\s+(?:19|20)\d\d"
        r"|[a-z]{3,9}\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+(?:19|20)\d\d"
        r"|\d{1,2}[./-]\d{1,2}[./-](?:19|20)\d\d)(?!\d)")
OPENS_RE = re.compile(r"^[#>\s]*(?:[*_]{1,2}(?=\S))?"
                      r"(?:[a-z]{3,9}day|mon|tue|wed|thu|fri|sat|sun)?\.?,?\s*(" + _DAY + ")",
                      re.I)
ENDS_RE = re.compile(r"(?:\s[-\u2013\u2014|]|[:(])\s*(" + _DAY + r")[\s)*_.]*$", re.I)
HEADING_RE = re.compile(r"#{1,6}\s")


def _day(m, order: str) -> str | None:
    """The ISO day a match of _DAY names, None when it is none (31 Feb, a month)."""
    return dating.find_date(m.group(1), date_order=order) if m else None


def first_line_days(body: str, order: str) -> set:
    """The days the note's first lines carry (see the module's docstring)."""
    lines = [x.strip() for x in body.split("\n")[:40] if x.strip()]
    if not lines or (HEADING_RE.match(lines[0]) and not lines[0].startswith("# ")):
        return set()
    days = {_day(OPENS_RE.match(lines[0]), order) or _day(ENDS_RE.search(lines[0]), order)}
    for line in lines[1:1 + FIRST_LINES]:
        if HEADING_RE.match(line):
            break
        days.add(_day(OPENS_RE.match(line), order))
    return days - {None}


def check(vault: Path) -> dict:
    """{"notes", "dated": {source: n}, "refined", "carry", "left": [{path, lines}],
    "logs"}: carry counts the notes whose first lines carry one day, left those of them
    dated by mtime, logs the notes whose first lines open with several days."""
    cfg, _ = vault_walk.load_config(vault)
    paths, _ = vault_walk.scan(vault, cfg)
    vault_walk.settle_date_order(cfg, paths)
    dated, refined, carry, logs, left = Counter(), 0, 0, 0, []
    for rel in paths:
        text, st, _ = vault_walk.read(vault / rel)
        if text is None:
            continue
        meta, body = dating.frontmatter(text)
        _, source = dating.date_of(Path(rel).stem, meta, body, st.st_mtime,
                                   cfg["date_order"])
        dated[source.split("+")[0]] += 1
        refined += "+" in source
        days = first_line_days(body, cfg["date_order"])
        logs += len(days) > 1
        if len(days) == 1:
            carry += 1
            if source == dating.WEAK_SOURCE:
                left.append({"path": rel, "lines": [x.strip() for x in body.split("\n")
                                                    if x.strip()][:1 + FIRST_LINES]})
    return {"notes": sum(dated.values()), "dated": dict(dated), "refined": refined,
            "carry": carry, "left": left, "logs": logs}


def table(rows: dict) -> list[str]:
    head = ["vault", "notes", *SOURCES, "month refined", "first lines carry a day",
            "of them by mtime", "logs of dated lines"]
    body = [[name, r["notes"], *(r["dated"].get(s, 0) for s in SOURCES), r["refined"],
             r["carry"], len(r["left"]), r["logs"]] for name, r in rows.items()]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(map(str, b)) + " |" for b in body]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("vaults", nargs="+", help="vault folders")
    p.add_argument("--list", action="store_true", help="name the notes still by mtime")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows = {}
    for v in a.vaults:
        if not Path(v).is_dir():
            print(f"dating_check: {v} is not a folder", file=sys.stderr)
            return 2
        rows[Path(v).name] = check(Path(v))
    if a.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("\n".join(table(rows)))
    for name, r in rows.items():
        for x in r["left"] if a.list else ():
            print(f"\n{name}/{x['path']} (by mtime):\n    " + "\n    ".join(x["lines"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
