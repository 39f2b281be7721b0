"""real: the index's cost on a vault shaped like real ones, beside a baseline commit's
in the same minutes (issue 27).

In:  a size in chunks (default 100k), a baseline revision (default HEAD~1), a work folder.
Out: a table on stdout (each figure: this tree, the baseline, the target, met) and
     bench/out/real-<time>.json. --shape families: synth.py's "families" shape (one
     family per note, ~5 chunks a note: 20k notes at 100k chunks; issue 37). Otherwise
     the vault is synth.py's "real" shape: a pool of 140
     note dates (hundreds of notes per date), meeting notes by the dozen per day, monthly
     reports dated the 1st, long dated logs, version families of 10..30 files, an
     imported/ folder of 5,000 notes from one template with one modified time.
Not: the 1k/10k/100k latency table (run.py without --real).

How each figure is taken: the baseline is `git archive REV` unpacked under the work
folder; each tree gets its own copy of the vault (same bytes and mtimes) and its own
index. Full ingest: `python TREE/ingest.py VAULT --index DIR` from scratch, baseline then
this tree, peak memory from wait4 (that child alone). Then, alternating the two trees
run by run (RUNS each): one note edited (a line appended to the same note in both
copies, another note each run) then `python ingest.py`; `python harness.py --backend
builtin "q"` with nothing changed, and its peak memory; `python -c "import numpy,
json"`; SQLite FTS5 deleting and inserting that note's rows in a fresh process.

    python bench/run.py --real [--shape real|families] [--chunks 100k]
                               [--baseline HEAD~1|DIR] [--work DIR] [--runs 5]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import io
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

import alternatives as alt
import synth

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RUNS = 5
QUESTION = "what is the current rate in the latest report"
TARGETS = {  # key: (description, limit, "<" | "<=")
    "ingest_s": ("full ingest from scratch (s wall)", 60.0, "<"),
    "ingest_peak_mb": ("  peak memory (MB)", 1536.0, "<"),
    "edit_s": ("one edited note, python ingest.py (s wall)", 0.5, "<"),
    "edit_vs_fts5": ("  / FTS5 delete + insert of its rows (process)", 5.0, "<="),
    "harness_s": ("python harness.py \"q\", nothing changed (s wall)", 0.6, "<"),
    "harness_vs_numpy": ("  / python -c \"import numpy, json\"", 3.0, "<"),
    "harness_peak_mb": ("  peak memory (MB)", 300.0, "<"),
}
EXTRA = {"built_question_s": "first python harness.py \"q\" after the full ingest (s)",
         "first_question_s": "first python harness.py \"q\" after the edit (s wall)",
         "numpy_s": "python -c \"import numpy, json\" (s wall)"}


def _env() -> dict:
    """A user's shell: compiled modules cached (see run._user_env)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str], cwd=None) -> tuple[float, float]:
    """(wall seconds, peak resident MB) of one fresh process; its own rusage (wait4),
    not the largest of every child so far."""
    with tempfile.TemporaryFile() as errors:   # a file, not a pipe: a child that writes
        started = time.perf_counter()          # much to stderr never blocks on wait4
        proc = subprocess.Popen(cmd, cwd=cwd, env=_env(), stdout=subprocess.DEVNULL,
                                stderr=errors)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        err = errors.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed ({proc.returncode}): {err[-600:]}")
    return wall, usage.ru_maxrss / 1024


def baseline_tree(rev: str, dest: Path) -> tuple[Path, str]:
    """(the baseline tree, what it is): a folder holding a Verso tree as it is, else the
    tree of revision rev unpacked into dest (and its full sha)."""
    if (Path(rev) / "ingest.py").is_file():
        return Path(rev).resolve(), f"folder {Path(rev).resolve()}"
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True,
                         text=True, check=True).stdout.strip()
    data = subprocess.run(["git", "-C", str(ROOT), "archive", sha], capture_output=True,
                          check=True).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest, sha


class Side:
    """One tree with its own vault copy and index."""

    def __init__(self, name: str, tree: Path, vault: Path, index: Path):
        self.name, self.tree, self.vault, self.index = name, tree, vault, index
        self.figures: dict[str, list] = {}

    def py(self, script: str, *args) -> list[str]:
        return [sys.executable, str(self.tree / script), *map(str, args)]

    def ingest(self) -> tuple[float, float]:
        return timed(self.py("ingest.py", self.vault, "--index", self.index), cwd=self.tree)

    def harness(self) -> tuple[float, float]:
        return timed(self.py("harness.py", "--vault", self.vault, "--index", self.index,
                             "--backend", "builtin", QUESTION), cwd=self.tree)

    def add(self, key: str, value: float) -> None:
        self.figures.setdefault(key, []).append(value)


def _edit(vault: Path, rel: str, i: int) -> None:
    with open(vault / rel, "a", encoding="utf-8") as f:
        f.write(f"\n\nEdited for the benchmark ({i}): one more line about the rate.\n")


def _notes_to_edit(vault: Path, n: int) -> list[str]:
    """n notes spread over the vault, one of each shape the bench vault has."""
    notes = sorted(p.relative_to(vault).as_posix() for p in vault.rglob("*.md"))
    return [notes[(2 * j + 1) * len(notes) // (2 * n)] for j in range(n)]


def _fts5_rows(index: Path, rel: str) -> tuple[alt.FTS5, dict] | None:
    """An FTS5 database of the index's chunks, and the rows of note rel."""
    if not alt.fts5_available():
        return None
    sys.path.insert(0, str(ROOT))
    import _checkout  # noqa: F401  (`verso` is this checkout)
    from verso import bm25
    from verso import store_load
    idx = store_load.load_index(index)
    texts = [bm25.chunk_text(c) for c in idx.chunks]
    fts = alt.FTS5(index.parent / "fts5.sqlite")
    fts.build(texts)
    fts.close()
    rows = {i: t for i, (c, t) in enumerate(zip(idx.chunks, texts)) if c["path"] == rel}
    return fts, rows


def run(work: Path, chunks: int, rev: str, runs: int = RUNS, log=print,
        shape: str = "real") -> dict:
    work.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    made = synth.make_vault(work / "vault", chunks, seed=0, questions=1, shape=shape)
    log(f"vault: {made.notes} notes, {made.bytes / 2**20:.1f} MB, {made.counts} "
        f"({time.perf_counter() - t:.1f} s)")
    tree, sha = baseline_tree(rev, work / "baseline")
    sides = [Side("baseline", tree, work / "vault-baseline", work / "idx-baseline"),
             Side("this tree", ROOT, work / "vault-this", work / "idx-this")]
    for s in sides:
        shutil.copytree(work / "vault", s.vault, copy_function=shutil.copy2)
    for s in sides:                                   # full ingest, then BM25 once
        log(f"{s.name}: full ingest")
        wall, peak = s.ingest()
        s.add("ingest_s", wall)
        s.add("ingest_peak_mb", peak)
        s.add("built_question_s", s.harness()[0])     # BM25 postings, if ingest left them
    edits = _notes_to_edit(work / "vault", runs)
    for i in range(runs):
        log(f"round {i + 1} of {runs}")
        for s in (sides if i % 2 == 0 else sides[::-1]):
            _edit(s.vault, edits[i], i)
            s.add("edit_s", s.ingest()[0])
            s.add("first_question_s", s.harness()[0])    # the new segment's BM25 too
            wall, peak = s.harness()
            s.add("harness_s", wall)
            s.add("harness_peak_mb", peak)
            s.add("numpy_s", timed([sys.executable, "-c", "import numpy, json"])[0])
    fts = _fts5_rows(sides[1].index, edits[-1])
    fts5_s = (float(np.median([fts[0].replace_process(fts[1]) for _ in range(runs)]))
              if fts else None)
    return {"chunks_target": chunks, "shape": shape, "notes": made.notes, "vault_bytes": made.bytes,
            "kinds": made.counts, "baseline": sha, "runs": runs, "fts5_note_s": fts5_s,
            "edited": edits, "sides": {s.name: s.figures for s in sides},
            "chunks": _chunks(sides[1].index)}


def _chunks(index: Path) -> int:
    m = json.loads((index / "manifest.json").read_text())
    return int(m.get("counts", {}).get("chunks", 0))


def figures(side: dict, fts5_s) -> dict:
    """Medians of one side's runs, and the ratios the targets name."""
    med = {k: float(np.median(v)) for k, v in side.items()}
    if fts5_s:
        med["edit_vs_fts5"] = med["edit_s"] / fts5_s
    med["harness_vs_numpy"] = med["harness_s"] / med["numpy_s"]
    return med


def render(res: dict) -> str:
    this = figures(res["sides"]["this tree"], res["fts5_note_s"])
    base = figures(res["sides"]["baseline"], res["fts5_note_s"])
    rows = [f"Verso on a {res.get('shape', 'real')}-shaped vault: {res['notes']:,} notes, "
            f"{res['chunks']:,} chunks, "
            f"{res['vault_bytes'] / 2**20:.1f} MB; medians of {res['runs']} fresh processes "
            f"per figure, the two trees alternating",
            f"baseline: {_short(res['baseline'])}; FTS5 delete + insert of one note's rows "
            f"(process): {res['fts5_note_s'] or float('nan'):.3f} s",
            "", f"{'figure':<52}{'this tree':>11}{'baseline':>11}{'limit':>9}  met"]
    for key, (label, limit, op) in TARGETS.items():
        a, b = this.get(key), base.get(key)
        met = (a < limit if op == "<" else a <= limit) if a is not None else None
        rows.append(f"{label:<52}{_num(a):>11}{_num(b):>11}{op + ' ' + _num(limit):>9}  "
                    f"{'yes' if met else 'MISSED' if met is not None else '-'}")
    for key, label in EXTRA.items():
        rows.append(f"{label:<52}{_num(this.get(key)):>11}{_num(base.get(key)):>11}")
    return "\n".join(rows)


def _short(baseline: str) -> str:
    return baseline[:10] if len(baseline) == 40 else baseline


def _num(x) -> str:
    return "-" if x is None else f"{x:,.3f}" if x < 100 else f"{x:,.0f}"


def main(work, chunks: int, rev: str, runs: int, out_dir: Path, log,
         shape: str = "real") -> int:
    res = run(Path(work), chunks, rev, runs, log, shape)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in (f"real-{stamp}.json", "real-latest.json"):
        (out_dir / name).write_text(json.dumps(res, indent=1))
    print(render(res))
    return 0
