"""The project registry against a hand-made truth: status right for every project?

    python tools/registry_check.py vaults/projects-vault questions/projects-truth.json [--backend ollama]

--backend ollama lets the model pick a status from a project's prose where its fields
name none (registry.py checks the quote it gives); the default is builtin.

The truth file: {"projects": [{"path", "name", "status", "status_from_prose"}, ...]},
written blind by a person reading each note (status: from its status field alone;
status_from_prose: from the whole note), optionally with "why" (what the note says
about why the status is what it is, "" when it says nothing). Prints one line per
project and the totals; with "why" in the truth, also why right: a project's why is
right when the registry's why holds every main word (textkit.terms) of the truth's,
counted over the projects whose truth gives one, and the whys the registry gives where
the truth has none.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import harness  # noqa: E402
from verso import textkit  # noqa: E402


def check(vault: Path, truth_file: Path, backend: str = "builtin") -> tuple[list[str], dict]:
    truth = json.loads(truth_file.read_text(encoding="utf-8"))["projects"]
    with tempfile.TemporaryDirectory() as tmp:
        idx, _ = harness.load(index=tmp, vault=vault, backend=backend)
        rows = {p["path"]: p for p in idx.manifest.get("projects") or []}
    lines, counts = [], {"projects": len(truth), "found": 0, "name": 0, "status": 0,
                         "prose": 0, "extra": len(set(rows) - {t["path"] for t in truth}),
                         "whys": 0, "why": 0, "why_extra": 0, "has_why": False}
    for t in truth:
        got = rows.get(t["path"])
        ok = got is not None and got["status"] == t["status"]
        counts["found"] += got is not None
        counts["name"] += got is not None and got["name"] == t["name"]
        counts["status"] += ok
        counts["prose"] += got is not None and got["status"] == t["status_from_prose"]
        lines.append(f"{'ok  ' if ok else 'MISS'} {t['path']}: {got and got['status']} "
                     f"(truth {t['status']}, from prose {t['status_from_prose']})")
        if "why" in t:
            counts["has_why"] = True
            lines[-1] += _why_line(t["why"] or "", (got or {}).get("why") or "", counts)
    return lines, counts


def why_right(truth_why: str, why: str) -> bool:
    """The registry's why holds every main word of the truth's."""
    return set(textkit.terms(truth_why)) <= set(textkit.terms(why))


def _why_line(truth_why: str, why: str, counts: dict) -> str:
    if not truth_why:
        counts["why_extra"] += bool(why)
        return f"; why {why[:60]!r} (truth none)" if why else ""
    counts["whys"] += 1
    counts["why"] += (ok := why_right(truth_why, why))
    return f"; why {'ok' if ok else 'MISS'} {why[:60]!r} (truth {truth_why[:60]!r})"


def main(argv=None) -> int:
    args = list(argv if argv is not None else sys.argv[1:])
    backend = "builtin"
    if "--backend" in args:
        at = args.index("--backend")
        backend = args[at + 1] if at + 1 < len(args) else ""
        del args[at:at + 2]
    if len(args) != 2 or backend not in ("builtin", "ollama"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    lines, c = check(Path(args[0]), Path(args[1]), backend)
    print("\n".join(lines))
    print(f"status right {c['status']}/{c['projects']} (against the prose {c['prose']}/"
          f"{c['projects']}); found {c['found']}, names right {c['name']}, rows not in the "
          f"truth {c['extra']}")
    if c["has_why"]:
        print(f"why right {c['why']}/{c['whys']} (of the projects whose truth gives a why); "
              f"a why where the truth has none {c['why_extra']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
