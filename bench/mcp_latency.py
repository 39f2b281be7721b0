"""mcp_latency: search_notes round trips inside one MCP server process, p50 and p95.

In:  the sample vault and its question sets (default), or --synth N: a bench/synth.py
     vault of about N chunks and its questions; a temporary index unless --index.
Out: figures on stdout: the first call (which builds the index), then p50 / p95 / max of
     --calls timed calls after --warmup untimed ones, each a full JSON-RPC round trip
     over the server's stdin/stdout (refresh check, route, retrieve, version, rerank).
Not: a timed test; nothing here asserts.

    python bench/mcp_latency.py [--calls 200] [--synth 100000] [--index DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import harness  # noqa: E402
from verso import mcp_check  # noqa: E402
import synth  # noqa: E402


def _questions(args, work: Path) -> tuple[Path, list[str]]:
    if args.synth:
        started = time.perf_counter()
        v = synth.make_vault(work / "vault", args.synth, seed=0, questions=args.calls)
        print(f"synthetic vault: {v.notes} notes, ~{v.est_chunks} chunks "
              f"({time.perf_counter() - started:.1f} s to write)")
        return v.root, [q["question"] for q in v.questions]
    qs = [json.loads(line)["question"] for name in ("dev.jsonl", "test.jsonl")
          for line in (ROOT / "questions" / name).read_text().splitlines() if line.strip()]
    return harness.SAMPLE_VAULT, qs


def _call(client, query: str) -> float:
    started = time.perf_counter()
    reply = client.send("tools/call", {"name": "search_notes", "arguments": {"query": query}})
    ms = (time.perf_counter() - started) * 1000
    if "error" in reply or reply["result"].get("isError"):
        raise SystemExit(f"search_notes failed: {json.dumps(reply)[:300]}")
    return ms


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="mcp_latency.py", description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--synth", type=int, default=0, help="chunks of a synthetic vault")
    p.add_argument("--index", default=None, help="index dir (default: a temporary one)")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        vault, qs = _questions(a, Path(tmp))
        index = a.index or str(Path(tmp) / "index")
        cmd = [sys.executable, str(ROOT / "harness.py"), "--mcp", "--vault", str(vault),
               "--index", index, "--backend", "builtin"]
        client = mcp_check.Client(cmd)
        client.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "clientInfo": {"name": "mcp_latency", "version": "1"}})
        first = _call(client, qs[0])
        for i in range(a.warmup):
            _call(client, qs[(i + 1) % len(qs)])
        ms = np.array([_call(client, qs[i % len(qs)]) for i in range(a.calls)])
        client.close()
    print(f"vault {vault if not a.synth else f'synthetic, {a.synth} chunks'}; "
          f"{a.calls} search_notes calls over {min(a.calls, len(qs))} distinct queries")
    print(f"first call (builds or loads the index): {first:.0f} ms")
    print(f"round trip ms: p50 {np.percentile(ms, 50):.2f}  p95 {np.percentile(ms, 95):.2f}"
          f"  max {ms.max():.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
