"""Every shipped split in one command: run them all, tabulate a run, diff two runs.

The table split -> vault -> role (tuning / frozen, with the frozen sha256) lives in
questions/splits.json; this script, tests/test_question_sets.py and the docs read it.

    python tools/splits.py run runs/all-before                # every split, default variants
    python tools/splits.py run runs/all-r --variant full --backend builtin
    python tools/splits.py diff runs/all-before runs/all-after   # exit 1 if any answer differs
    python tools/splits.py table runs/all-before                 # one row per split
    python tools/splits.py table runs/all-before --variant hybrid
    python tools/splits.py budgets runs/budgets    # evidence at 300/600/1,000 words, beside
                                                   # the plain BM25 baseline (plain_bm25.py),
                                                   # and the labels by kind
    python tools/splits.py budgets runs/t --role tuning --jobs 2   # the tuning splits
                                                   # only, two evaluate.py at a time

`run` and `budgets` take --role (tuning or frozen: only those splits) and --jobs N (N
evaluate.py processes at once; each split's output and the table's order are the same
as one at a time). `budgets` ends its table with one summed row per role: the key-fact
questions at each budget, the baseline's, change and stale at the largest budget, over
every split of that role it ran.

`diff` compares, per split, variant and question: the answer text, the verdict, the time
mode and the kept sources. "Behaviour unchanged" means it prints nothing and exits 0.

`table` reads each RUN/SPLIT/records.jsonl and prints one row per split for one variant
(default full; a split run with one variant only, such as a conversation split's "chat",
shows that one): answers correct, SHIP right (correct among SHIP), and what was handed on
to the readers: evidence recall (every key fact inside), stale evidence (a passage marked
current holds a forbidden fact), recall all (every gold file, change questions), words
per question. Counts are k/n over the questions each measure applies to; `-` when none
does, or the run predates the measure (SHIP right: 0/0 when nothing shipped).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import budget_eval  # noqa: E402

TABLE = ROOT / "questions" / "splits.json"
SAME = ("answer", "verdict", "time_mode", "sources", "abstained")
FORMAT = 1                 # evaluate.py's records format
POLL = 0.2                 # seconds between looks at the running evaluate.py processes
HEADER = ("split", "variant", "answer correct", "SHIP right", "evidence recall",
          "stale evidence", "recall all (evidence)", "words/q")


def splits(table: Path = TABLE) -> dict:
    """{split: {"vault": path relative to the repo, "role": ..., "sha256"?: ...}}"""
    return json.loads(table.read_text(encoding="utf-8"))["splits"]


def _load(run_dir: Path) -> list[dict]:
    """The records of one evaluate run folder, in order; ValueError on another format."""
    path = run_dir / "records.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    head = json.loads(lines[0]) if lines else {}
    if head.get("format") != FORMAT:
        raise ValueError(f"{path}: format {head.get('format')!r}, expected {FORMAT}")
    return [json.loads(x) for x in lines[1:] if x.strip()]


def _records(run_dir: Path) -> dict:
    """{(variant, id): record} of one evaluate run folder."""
    return {(r["variant"], r["id"]): r for r in _load(run_dir)}


def diff_runs(a: Path, b: Path) -> list[str]:
    """One line per answer that differs between two `run` folders (and per split or
    question present in only one)."""
    out = []
    for split in sorted({p.name for p in a.iterdir()} | {p.name for p in b.iterdir()}):
        if not ((a / split / "records.jsonl").is_file() and (b / split / "records.jsonl").is_file()):
            out.append(f"{split}: in one run only")
            continue
        ra, rb = _records(a / split), _records(b / split)
        for key in sorted(ra.keys() | rb.keys()):
            if key not in ra or key not in rb:
                out.append(f"{split} {key[0]} {key[1]}: in one run only")
                continue
            diffs = [k for k in SAME if ra[key].get(k) != rb[key].get(k)]
            if diffs:
                out.append(f"{split} {key[0]} {key[1]}: {', '.join(diffs)} differ")
    return out


def _kn(values, none: str = "-") -> str:
    """`k/n` of the truthy values among those not None; `none` when all are None."""
    vals = [bool(v) for v in values if v is not None]
    return f"{sum(vals)}/{len(vals)}" if vals else none


def split_row(split: str, records: list[dict], variant: str = "full") -> list[str]:
    """One table row (HEADER's columns) of a split's records for one variant; a split
    run with a single other variant (conversations: "chat") shows that one."""
    names = list(dict.fromkeys(r["variant"] for r in records))
    if variant not in names and len(names) == 1:
        variant = names[0]
    rs = [r for r in records if r["variant"] == variant]
    if not rs:
        return [split, f"no {variant}", *["-"] * (len(HEADER) - 2)]
    words = [r["evidence_words"] for r in rs if r.get("evidence_words") is not None]
    return [split, variant, _kn(r["answer_correct"] for r in rs),
            _kn((r["answer_correct"] for r in rs if r.get("verdict") == "SHIP"), "0/0"),
            *(_kn(r.get(m) for r in rs) for m in ("evidence_recall", "evidence_stale",
                                                   "evidence_recall_all")),
            f"{sum(words) / len(words):.1f}" if words else "-"]


def table(run: Path, variant: str = "full") -> list[list[str]]:
    """Rows (HEADER first) of every split folder of a `run` output, by split name."""
    dirs = sorted(run.iterdir()) if run.is_dir() else []
    found = [d for d in dirs if (d / "records.jsonl").is_file()]
    if not found:
        raise ValueError(f"{run} holds no SPLIT/records.jsonl: pass a folder written "
                         "by `python tools/splits.py run OUT`")
    return [list(HEADER), *(split_row(d.name, _load(d), variant) for d in found)]


def _columns(rows) -> str:
    """Rows as aligned text, two spaces between columns."""
    widths = [max(len(c) for c in col) for col in zip(*rows)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                     for r in rows)


def run_all(out: Path, extra: list[str], role: str | None = None, jobs: int = 1) -> int:
    """evaluate.py on every split (of `role` when given) into out/SPLIT, `jobs` at once;
    returns the first failing split's exit code, in the splits' order."""
    codes = run_each([(split, _evaluate(split, row, out, extra))
                      for split, row in chosen(role).items()], jobs)
    return next((code for code in codes.values() if code), 0)


def _evaluate(split: str, row: dict, out: Path, extra: list[str], *flags: str) -> list[str]:
    """evaluate.py's arguments for one split of splits.json (`flags` before its --out,
    the caller's `extra` last), its output in out/SPLIT."""
    return [str(ROOT / "evaluate.py"), "--vault", str(ROOT / row["vault"]),
            "--conversations" if row.get("kind") == "conversations" else "--questions",
            str(ROOT / "questions" / f"{split}.jsonl"), *flags, "--out", str(out / split),
            *extra]


BUDGET_HEADER = ("split", "role", "verso 300", "600", "1000", "plain BM25 300", "600", "1000",
                 "change @1000", "stale @1000", "labels @1000 (right/wrong)", "found@5",
                 "missed @1000", "why missed @1000", "why stale @1000")


LABEL_HEADER = ("split", "statement", "version", "log entry", "as of")
LABEL_TITLE = ("labels at 1,000 words on the questions asking the value in force (present, "
               "as of): n (right/wrong)")


def chosen(role: str | None = None) -> dict:
    """The splits of questions/splits.json, only those of `role` when one is given."""
    return {name: row for name, row in splits().items()
            if role is None or row.get("role") == role}


def run_each(cmds: list[tuple[str, list]], jobs: int = 1) -> dict:
    """{name: exit code} of every (name, evaluate.py arguments), at most `jobs` at once,
    each started in the order given (its command on stderr); output to /dev/null."""
    codes, running, queue = {}, [], list(cmds)
    while queue or running:
        while queue and len(running) < max(jobs, 1):
            name, args = queue.pop(0)
            print(f"{name}: {' '.join(args)}", file=sys.stderr)
            running.append((name, subprocess.Popen([sys.executable, *args],
                                                   stdout=subprocess.DEVNULL)))
        done = [(name, proc) for name, proc in running if proc.poll() is not None]
        if not done:
            time.sleep(POLL)
        for name, proc in done:
            running.remove((name, proc))
            codes[name] = proc.returncode
    return {name: codes[name] for name, _ in cmds}


def budgets_all(out: Path, extra: list[str], role: str | None = None,
                jobs: int = 1) -> tuple[list, list]:
    """evaluate.py --budgets on every question split (not the conversations; only those
    of `role` when given) into out/SPLIT/budgets.json, `jobs` at once; one BUDGET_HEADER
    row each, then one summed row per role (sum_row), and one LABEL_HEADER row each
    (every kind of label: n (right/wrong), as budget_eval.labels counts them)."""
    todo = {s: r for s, r in chosen(role).items() if r.get("kind") != "conversations"}
    codes = run_each([(s, _evaluate(s, r, out, extra, "--budgets"))
                      for s, r in todo.items()], jobs)
    failed = [s for s, code in codes.items() if code]
    if failed:
        raise ValueError(f"{failed[0]}: evaluate.py --budgets failed")
    rows, marks, got = [list(BUDGET_HEADER)], [list(LABEL_HEADER)], {}
    for split, row in todo.items():
        got[split] = json.loads((out / split / "budgets.json").read_text(encoding="utf-8"))
        rows.append(budget_row(split, row["role"], got[split]))
        marks.append(label_row(split, got[split]))
    for r in dict.fromkeys(row["role"] for row in todo.values()):
        rows.append(sum_row(r, [got[s] for s, row in todo.items() if row["role"] == r]))
    return rows, marks


def sum_row(role: str, runs: list[dict]) -> list[str]:
    """One BUDGET_HEADER row summing evaluate.py --budgets results of one role: recall
    and the baseline's at each budget, change and stale at the largest, as k/n."""
    def total(cells):
        cells = list(cells)
        return {"k": sum(c["k"] for c in cells), "n": sum(c["n"] for c in cells)}
    budgets = [str(x) for x in runs[0]["budgets"]] if runs else []
    first = [r["variants"][next(iter(r["variants"]))]["budgets"] for r in runs]
    last = [v[budgets[-1]] for v in first] if budgets else []
    return [f"all {role}", f"{len(runs)} splits",
            *(budget_eval.cell(total(v[b]["recall"] for v in first)) for b in budgets),
            *(budget_eval.cell(total(r["baseline"][b]["recall"] for r in runs)) for b in budgets),
            budget_eval.cell(total(x["by_kind"]["change"] for x in last)),
            budget_eval.cell(total(x["stale"] for x in last)), "", "", "", "", ""]


def label_row(split: str, got: dict) -> list[str]:
    """One LABEL_HEADER row: the labels at the largest budget, by kind."""
    variant = next(iter(got["variants"]))
    last = got["variants"][variant]["budgets"][str(got["budgets"][-1])]
    kinds = last.get("labels_by_kind", {})
    return [split] + [_labels(kinds[k]) if k in kinds else "-"
                      for k in ("statement", "version", "entry", "as of")]


def _labels(r: dict) -> str:
    """Labels counted by budget_eval: "n (right/wrong)"."""
    return f"{r['n']} ({r['right']}/{r['wrong']})"


def budget_row(split: str, role: str, got: dict) -> list[str]:
    """One BUDGET_HEADER row of an evaluate.py --budgets result (its first variant)."""
    kn = budget_eval.cell
    b = [str(x) for x in got["budgets"]]
    variant = next(iter(got["variants"]))
    v = got["variants"][variant]
    last = v["budgets"][b[-1]]
    return [split, role, *(kn(v["budgets"][x]["recall"]) for x in b),
            *(kn(got["baseline"][x]["recall"]) for x in b),
            kn(last["by_kind"]["change"]), kn(last["stale"]),
            _labels(last["labels"]),
            kn(v["found_at5"]),
            " ".join(got["missed"][variant]) or "-",
            budget_eval.why_counts(got.get("missed_why", {}).get(variant)),
            budget_eval.why_counts(got.get("stale_why", {}).get(variant),
                                   budget_eval.WHY_STALE)]


def _pick_args(p) -> None:
    p.add_argument("--role", choices=("tuning", "frozen"),
                   help="only the splits of this role (default every split)")
    p.add_argument("--jobs", type=_positive, default=1,
                   help="evaluate.py processes at once (default 1)")


def _positive(text: str) -> int:
    """--jobs: a whole number, at least 1 (argparse prints the error on one line)."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number, at least 1")
    return int(text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="tools/splits.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="evaluate every split into OUT/SPLIT")
    r.add_argument("out")
    _pick_args(r)
    d = sub.add_parser("diff", help="list answers that differ between two runs")
    d.add_argument("a")
    d.add_argument("b")
    t = sub.add_parser("table", help="one row per split of a run: answers and evidence")
    t.add_argument("run")
    t.add_argument("--variant", default="full", help="the variant to show (default full)")
    g = sub.add_parser("budgets", help="evidence recall at 300/600/1000 words beside the "
                       "plain BM25 baseline, every question split, into OUT/SPLIT")
    g.add_argument("out")
    _pick_args(g)
    args, extra = p.parse_known_args(argv)
    if args.cmd == "budgets":
        try:
            rows, marks = budgets_all(Path(args.out), extra, args.role, args.jobs)
            print(f"{_columns(rows)}\n\n{LABEL_TITLE}\n{_columns(marks)}")
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if args.cmd == "run":
        return run_all(Path(args.out), extra, args.role, args.jobs)
    if args.cmd == "table":
        if extra:
            p.error(f"unrecognized arguments: {' '.join(extra)}")
        try:
            print(_columns(table(Path(args.run), args.variant)))
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    lines = diff_runs(Path(args.a), Path(args.b))
    print("\n".join(lines) or "every answer the same")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
