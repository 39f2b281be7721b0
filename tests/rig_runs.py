"""Real-model runs: the writer's prompt forms measured, and run folders as table rows.

Measurement scripts, not tests (pytest does not collect them).
- forms: for each form (generate.PROMPT_FORMS) run evaluate.py in this process with
  generate.PROMPT_FORM set (full variant, Ollama writer, builtin judge unless --judge
  says otherwise), one run folder per form, then one row per form. On the verso rig
  (2 CPU cores, 1.5B writer) a dev run takes 10-20 minutes.
- table: one markdown row per evaluate.py run folder (full variant), with the exact
  McNemar test of answer correct against --base (a run over the same questions).

    OLLAMA_HOST=http://127.0.0.1:11435 python tests/rig_runs.py forms \\
        --questions questions/dev.jsonl --index /tmp/rig/sample-idx --out runs/forms \\
        [--forms plain example] [--judge builtin|ollama|cascade]
    python tests/rig_runs.py table RUN[=LABEL]... [--base BUILTIN_RUN]
    python tests/rig_runs.py pick FORM_RUN...   # the form to keep: citation valid + correct
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
from verso import generate  # noqa: E402

COLUMNS = ("source_found_at5", "answer_correct", "stale_rate", "abstain_correct",
           "false_abstain", "citation_valid", "shipped_numbers_cited")
STAGES = ("total", "rerank", "generate", "verify")
LABELS = {"source_found_at5": "found@5", "answer_correct": "correct", "stale_rate": "stale",
          "abstain_correct": "refusals abstained", "false_abstain": "false abstentions",
          "citation_valid": "citation valid", "shipped_numbers_cited": "SHIP numbers cited"}


def _seconds(ms) -> str:
    return "-" if ms is None else f"{ms / 1000:.1f}" if ms >= 100 else f"{ms / 1000:.3f}"


def row(summary: dict) -> dict:
    """The figures of a run's full variant: k/n per rate, SHIP count, seconds, tokens."""
    m = summary["variants"]["full"]["overall"]
    out = {LABELS.get(c, c): f"{m[c]['k']}/{m[c]['n']}" if c in m else "-" for c in COLUMNS}
    out["MRR"] = f"{m['mrr']['p']:.3f}" if m["mrr"]["p"] is not None else "-"
    out["SHIP"] = m["verdicts"].get("SHIP", 0)
    sel = m.get("selective") or {}
    if sel:
        prec = sel["ship_precision"]
        out["SHIP right"] = f"{prec['k']}/{prec['n']}"
        out["AURC"] = "-" if sel.get("aurc") is None else f"{sel['aurc']:.3f}"
    for name in STAGES:
        st = m["stages"].get(name, {})
        out[f"{name} s"] = (f"{_seconds(st.get('p50_ms'))} / "
                                    f"{_seconds(st.get('p95_ms'))}")
    out["tokens (writer)"] = (
        f"{round(m['stages']['total']['tokens_per_question'])} "
        f"({round(m['stages'].get('generate', {}).get('tokens_per_question', 0))})")
    return out


def versus(run: Path, base: Path) -> str:
    """Answer correct, run against base: wins/losses and the exact McNemar p."""
    recs = [dict(r, variant=tag) for tag, d in (("run", run), ("base", base))
            for r in evaluate.load_records(d) if r["variant"] == "full"]
    p = evaluate.paired(recs, "run", "base", "answer_correct")
    return f"{p['wins']}/{p['losses']}, p = {p['p']:.2f}"


def table(runs: list, base: str | None) -> str:
    """RUN or RUN=LABEL per row (the label names the row, else the folder's name)."""
    heads = None
    lines = []
    for spec in runs:
        d, _, label = spec.partition("=")
        d = Path(d)
        r = row(json.loads((d / "summary.json").read_text()))
        recs = [x for x in evaluate.load_records(d) if x["variant"] == "full"]
        refusals = [x for x in recs if not x["answerable"]]
        r["unanswerable shipped"] = (f"{sum(x['verdict'] == 'SHIP' for x in refusals)}/"
                                     f"{len(refusals)}")
        if base:
            r["McNemar (wins/losses)"] = versus(d, Path(base))
        if heads is None:
            heads = ["run"] + list(r)
            lines += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
        lines.append("| " + " | ".join([label or d.name] + [str(v) for v in r.values()])
                     + " |")
    return "\n".join(lines)


def pick(runs: list) -> str:
    """The run (form) with the highest citation validity plus answer correct (rates);
    ties go to the lower p50 seconds a question."""
    def key(d):
        m = json.loads((Path(d) / "summary.json").read_text())["variants"]["full"]["overall"]
        return (-(m["citation_valid"]["p"] or 0) - (m["answer_correct"]["p"] or 0),
                m["stages"]["total"]["p50_ms"])
    return Path(min(runs, key=key)).name


def forms(args) -> int:
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("forms")
    f.add_argument("--questions", required=True)
    f.add_argument("--index", required=True)
    f.add_argument("--out", required=True)
    f.add_argument("--forms", nargs="+", default=list(generate.PROMPT_FORMS),
                   choices=generate.PROMPT_FORMS)
    f.add_argument("--judge", default="builtin", choices=("builtin", "ollama", "cascade"))
    t = sub.add_parser("table")
    t.add_argument("runs", nargs="+")
    t.add_argument("--base")
    sub.add_parser("pick").add_argument("runs", nargs="+")
    args = p.parse_args(argv)
    if args.cmd == "pick":
        print(pick(args.runs))
        return 0
    if args.cmd == "table":
        print(table(args.runs, args.base))
        return 0
    return forms(args)


if __name__ == "__main__":
    sys.exit(main())
