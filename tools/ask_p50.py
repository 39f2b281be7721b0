"""Builtin ask() latency on a synthetic vault, with bench/synth.py's generator (bench/
itself is not touched): builds a vault of N chunks and its index under a temporary
folder, asks its questions and prints p50 / p95 of the whole harness.ask().

    python tools/ask_p50.py [--chunks 10000] [--questions 60] [--budget WORDS --evidence]

--budget asks for that many words of evidence (the MCP default is 1,000); --evidence stops
at the evidence (write=False), as MCP search_notes does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import harness  # noqa: E402
from verso import ingest  # noqa: E402
from verso import backends  # noqa: E402
from verso import store_load  # noqa: E402
import synth  # noqa: E402

WARM = 5      # questions asked once first (imports, caches), not timed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chunks", type=int, default=10_000)
    p.add_argument("--questions", type=int, default=60)
    p.add_argument("--budget", type=int, default=None)
    p.add_argument("--evidence", action="store_true", help="stop at the evidence")
    args = p.parse_args(argv)
    kw = {"budget": args.budget} if args.budget else {}
    kw.update({"write": False} if args.evidence else {})
    with tempfile.TemporaryDirectory() as tmp:
        v = synth.make_vault(Path(tmp) / "vault", args.chunks, seed=0,
                             questions=args.questions)
        ingest.build_index(v.root, Path(tmp) / "idx")
        idx, be = store_load.load_index(Path(tmp) / "idx"), backends.load_backend("builtin")
        qs = [q["question"] for q in v.questions][:args.questions]
        for q in qs[:WARM]:
            harness.ask(q, index=idx, backend=be, **kw)
        ms = []
        for q in qs:
            started = time.perf_counter()
            harness.ask(q, index=idx, backend=be, **kw)
            ms.append((time.perf_counter() - started) * 1000)
    ms.sort()
    print(f"chunks {len(idx.chunks)}  questions {len(ms)}  {kw or ''}  builtin ask() p50 "
          f"{statistics.median(ms):.1f} ms  p95 {ms[int(0.95 * (len(ms) - 1))]:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
