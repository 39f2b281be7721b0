"""Compare rerank judges on real models: per-passage logprobs vs one batched request.

A measurement script, not a test. Each question runs harness.ask(write=False) (route,
retrieve with the rig's embedder, version filter, rerank with the judge, gate) once per
judge; it prints rerank seconds, source found@5 and MRR per judge.

    OLLAMA_HOST=http://127.0.0.1:11435 python tests/judge_compare.py [--limit 6] \\
        [--judges builtin logprob batch] [--timeout 120] [--questions questions/dev.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import evaluate  # noqa: E402

from verso import harness  # noqa: E402
from verso import measures  # noqa: E402
from verso import backends  # noqa: E402
from verso import models  # noqa: E402

JUDGES = ("builtin", "logprob", "batch")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--questions", default=str(ROOT / "questions" / "dev.jsonl"))
    p.add_argument("--vault", default=str(ROOT / "sample-vault"))
    p.add_argument("--index", default="/tmp/real-idx")
    p.add_argument("--limit", type=int, default=6)
    p.add_argument("--judges", nargs="+", choices=JUDGES, default=list(JUDGES))
    p.add_argument("--timeout", type=float, default=models.OLLAMA_TIMEOUT,
                   help="seconds per request (a batched request reads every passage)")
    args = p.parse_args(argv)
    qs = [q for q in evaluate.load_questions(args.questions)
          if q["answerable"] and q["gold_files"]][:args.limit]
    rows = {j: [] for j in args.judges}
    for name in args.judges:
        be = backends.load_backend("ollama", judge="builtin" if name == "builtin" else "ollama",
                                   timeout=args.timeout)
        if name != "builtin":
            be.judge.batch = name == "batch"
        idx, be = harness.load(index=args.index, vault=args.vault, backend=be)
        for q in qs:
            a = harness.ask(q["question"], index=idx, backend=be, write=False)
            ms = sum(s["ms"] for s in a.stages if s["name"] == "rerank")
            rows[name].append({
                "id": q["id"], "rerank_s": ms / 1000,
                "found5": measures.source_found_at5(q["gold_files"], a.sources),
                "rr": measures.reciprocal_rank(q["gold_files"], a.ranking)})
            print(name, json.dumps(rows[name][-1]), flush=True)
    print(f"{'judge':<9}{'questions':>10}{'rerank s p50':>14}{'found@5':>9}{'MRR':>7}")
    for name, rs in rows.items():
        p50 = measures.percentile([r["rerank_s"] for r in rs], 50)
        print(f"{name:<9}{len(rs):>10}{p50:>14.1f}{sum(r['found5'] for r in rs):>6}/"
              f"{len(rs):<2}{sum(r['rr'] for r in rs) / len(rs):>7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
