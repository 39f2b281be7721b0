"""The project registry against a hand-made truth: status right for every project?

    python tools/registry_check.py vaults/projects-vault questions/projects-truth.json [--backend ollama]

--backend ollama lets the model pick a status from a project's prose where its fields
name none (registry.py checks the quote it gives); the default is builtin.

The truth file: {"projects": [{"path", "name", "status", "status_from_prose"}, ...]},
written blind by a person reading each note (status: from its status field alone;
status_from_prose: from the whole note). Prints one line per project and the totals.
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


def check(vault: Path, truth_file: Path, backend: str = "builtin") -> tuple[list[str], dict]:
    truth = json.loads(truth_file.read_text(encoding="utf-8"))["projects"]
    with tempfile.TemporaryDirectory() as tmp:
        idx, _ = harness.load(index=tmp, vault=vault, backend=backend)
        rows = {p["path"]: p for p in idx.manifest.get("projects") or []}
    lines, counts = [], {"projects": len(truth), "found": 0, "name": 0, "status": 0,
                         "prose": 0, "extra": len(set(rows) - {t["path"] for t in truth})}
    for t in truth:
        got = rows.get(t["path"])
        ok = got is not None and got["status"] == t["status"]
        counts["found"] += got is not None
        counts["name"] += got is not None and got["name"] == t["name"]
        counts["status"] += ok
        counts["prose"] += got is not None and got["status"] == t["status_from_prose"]
        lines.append(f"{'ok  ' if ok else 'MISS'} {t['path']}: {got and got['status']} "
                     f"(truth {t['status']}, from prose {t['status_from_prose']})")
    return lines, counts


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
