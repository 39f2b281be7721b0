"""Measure the writer's prompt forms (generate.PROMPT_FORMS) on a question set.

A measurement script, not a test (pytest does not collect it): for each form it runs
evaluate.py in this process with generate.PROMPT_FORM set (full variant, Ollama writer,
builtin judge unless --judge says otherwise), one run folder per form, then prints one
row per form. On the verso rig (2 CPU cores, 1.5B writer) a dev run takes 10-20 minutes.

    OLLAMA_HOST=http://127.0.0.1:11435 python tests/prompt_forms.py \\
        --questions questions/dev.jsonl --index /tmp/rig/sample-idx --out runs/forms \\
        [--forms plain example] [--judge builtin|ollama]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import evaluate  # noqa: E402
import generate  # noqa: E402

COLUMNS = ("source_found_at5", "answer_correct", "stale_rate", "abstain_correct",
           "false_abstain", "citation_valid", "shipped_numbers_cited")


def row(summary: dict) -> dict:
    """The figures of a run's full variant: k/n per rate, SHIP count, seconds, tokens."""
    m = summary["variants"]["full"]["overall"]
    out = {c: f"{m[c]['k']}/{m[c]['n']}" for c in COLUMNS}
    out["SHIP"] = m["verdicts"].get("SHIP", 0)
    st = m["stages"]
    for name in ("total", "generate", "rerank", "verify"):
        if name in st:
            out[f"{name} p50/p95 s"] = (f"{st[name]['p50_ms'] / 1000:.1f} / "
                                        f"{st[name]['p95_ms'] / 1000:.1f}")
    out["tokens/question"] = round(st["total"]["tokens_per_question"])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--questions", required=True)
    p.add_argument("--index", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--forms", nargs="+", default=list(generate.PROMPT_FORMS),
                   choices=generate.PROMPT_FORMS)
    p.add_argument("--judge", default="builtin", choices=("builtin", "ollama"))
    args = p.parse_args(argv)
    rows = {}
    for form in args.forms:
        generate.PROMPT_FORM = form
        out = Path(args.out) / form
        code = evaluate.main(["--questions", args.questions, "--index", args.index,
                              "--backend", "ollama", "--judge", args.judge, "--variant",
                              "full", "--out", str(out)])
        if code:
            return code
        rows[form] = row(json.loads((out / "summary.json").read_text()))
        print(form, json.dumps(rows[form]), file=sys.stderr, flush=True)
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
