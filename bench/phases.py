"""phases: where one refresh's time goes, phase by phase, in one process (issue 37).

In:  a benchmark vault and its index (bench/synth.py, then ingest.py), a note to edit.
Out: the wall seconds of the imports and of each phase of one `ingest.build_index`
     after a line is appended to that note (or, with --question, of one `harness.main`
     question in a fresh process): the scan, the stamp, loading the previous index,
     the catalogue and the rules across notes, writing. Phases nest (the catalogue
     holds the rules), so the rows do not add up to the total.
Not: a whole-process figure (bench/run.py --real times fresh processes); it edits the
     vault it is given: use it on a benchmark vault only.

    python bench/phases.py VAULT --index DIR --edit REL      # one edited note's ingest
    python bench/phases.py VAULT --index DIR --question "q"  # a cold question
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import io
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

PHASES = {"vault_walk": ["scan"], "ingest": ["_stamp", "_unchanged", "_files_and_chunks",
                                             "_write_index"],
          "file_records": ["changes", "catalogue"],
          "families": ["mark_duplicates", "mark_families", "resolve_links"],
          "store": ["commit"], "store_load": ["load_index"]}


def _wrap(mod, name: str, acc: dict):
    """Time mod.name into acc; the function to put back."""
    fn = getattr(mod, name)
    key = f"{mod.__name__.rsplit('.', 1)[-1]}.{name}"

    @functools.wraps(fn)
    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            acc[key] = acc.get(key, 0.0) + time.perf_counter() - t
    setattr(mod, name, timed)
    return lambda: setattr(mod, name, fn)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="bench/phases.py", description=__doc__.split("\n")[0])
    p.add_argument("vault")
    p.add_argument("--index", required=True)
    p.add_argument("--edit", help="the note (vault path) a line is added to first")
    p.add_argument("--question", help="time a cold question instead of the ingest")
    a = p.parse_args(argv)
    if not (a.edit or a.question):
        p.error("give --edit REL (an edited note's ingest) or --question (a question)")
    gc.disable()                       # as the CLIs run (ingest.run_cli)
    t = time.perf_counter()
    import importlib
    mods = {m: importlib.import_module(f"verso.{m}") for m in PHASES}
    from verso import harness, ingest
    imports = time.perf_counter() - t
    acc: dict = {}
    undo = [_wrap(mods[m], n, acc) for m, names in PHASES.items() for n in names]
    if a.edit:
        with open(Path(a.vault) / a.edit, "a", encoding="utf-8") as f:
            f.write(f"\n\nEdited by bench/phases.py at {time.time_ns()}.\n")
    t = time.perf_counter()
    try:
        if a.question:
            with contextlib.redirect_stdout(io.StringIO()):
                harness.main(["--vault", a.vault, "--index", a.index, "--backend",
                              "builtin", a.question])
        else:
            ingest.build_index(a.vault, a.index)    # not made the default index
    finally:
        total = time.perf_counter() - t
        for put_back in undo:
            put_back()
        gc.enable()
    print(f"{'imports':<32}{imports:8.3f}\n{'total':<32}{total:8.3f}")
    for k, v in acc.items():
        print(f"  {k:<30}{v:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
