"""Search words measured apart from the embedder: a model's words for every question, kept
in a file, then the evidence with the builtin backend with and without them.

    export OLLAMA_HOST=http://127.0.0.1:11437            # a model server (the rig, Ollama)
    python tools/search_words.py write WORDS.json --model qwen2.5-coder:1.5b [--role frozen]
    python tools/search_words.py budgets WORDS.json [--role frozen] [--splits a,b]

`write` asks the model searchwords.PROMPT for each question of the role's splits (the
raw replies kept, resumable: a question already in the file is not asked again).
`budgets` prints, per split and summed (budget_eval.measure, as `evaluate.py --budgets`),
the key-fact questions whose every key fact the evidence holds at 300, 600 and 1,000
words for the plain baseline (plain_bm25.py), without the words and with them
(searchwords.parse of each reply, given as `ask(search_words=[...])`), and for the last
two change questions and stale evidence at 1,000 (present and as-of questions with an
outdated value). The builtin backend is
used for everything else, so the difference is the words' alone; the whole path with a
model's embedder is `evaluate.py --budgets --backend ollama --variant full no-words`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import budget_eval  # noqa: E402
from verso import evaluate  # noqa: E402
from verso import harness  # noqa: E402
from verso import models  # noqa: E402
from verso import plain_bm25  # noqa: E402
from verso import searchwords  # noqa: E402

BUDGETS = (300, 600, 1000)
VARIANTS = ("without", "with")


def _sets(role: str, only: str | None) -> list[tuple[str, Path, list]]:
    rows = json.loads((ROOT / "questions" / "splits.json").read_text())["splits"]
    want = set(only.split(",")) if only else None
    return [(name, ROOT / row["vault"], evaluate.load_questions(
                ROOT / "questions" / f"{name}.jsonl"))
            for name, row in rows.items() if row.get("role") == role
            and row.get("kind") != "conversations" and (want is None or name in want)]


def write(path: Path, role: str, only: str | None, model: str) -> None:
    got = json.loads(path.read_text()) if path.exists() else {}
    writer = models.OllamaWriter(model)
    for name, _, questions in _sets(role, only):
        for q in questions:
            if q["question"] not in got:
                got[q["question"]] = writer.write(searchwords.request(q["question"]),
                                                  stage="retrieve").text
                path.write_text(json.dumps(got, indent=1))
        print(name, len(got), flush=True)


def _measure(vault: Path, questions: list, index_dir: Path, replies: dict) -> dict:
    """budget_eval.measure of one split, variants "without" (no words) and "with" (each
    question searched with its parsed reply), beside the plain baseline."""
    idx, be = harness.load(index=index_dir, vault=vault, backend="builtin")

    def ask(question, budget, words):
        given = searchwords.parse(replies.get(question, ""), question) if words else False
        return harness.ask(question, index=idx, backend=be, write=False, budget=budget,
                           search_words=given)
    return budget_eval.measure(questions, ask, plain_bm25.Baseline(vault), BUDGETS,
                               VARIANTS, {v: {"words": v == "with"} for v in VARIANTS})


def budgets(path: Path, role: str, only: str | None) -> None:
    replies = json.loads(path.read_text())
    total = {v: [0] * len(BUDGETS) for v in ("baseline", *VARIANTS)}
    with tempfile.TemporaryDirectory() as tmp:
        for name, vault, questions in _sets(role, only):
            got = _measure(vault, questions, Path(tmp) / name, replies)
            rows = {"baseline": got["baseline"], **{v: got["variants"][v]["budgets"]
                                                    for v in VARIANTS}}
            for label, row in rows.items():
                k = [row[b]["recall"]["k"] for b in BUDGETS]
                total[label] = [x + y for x, y in zip(total[label], k)]
                last = row[BUDGETS[-1]]
                more = ("" if label == "baseline" else f"  change "
                        f"{last['by_kind']['change']['k']}/{last['by_kind']['change']['n']}"
                        f"  stale {last['stale']['k']}")
                print(f"{label:<8} {name:<14} {' / '.join(map(str, k))}{more}", flush=True)
    for label, k in total.items():
        print(f"{label:<8} {'all':<14} {' / '.join(map(str, k))}", flush=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("command", choices=("write", "budgets"))
    p.add_argument("words", type=Path)
    p.add_argument("--role", default="frozen", choices=("tuning", "frozen"))
    p.add_argument("--splits", default=None, help="these splits only (comma-separated)")
    p.add_argument("--model", default=None, help="write: the model (default the writer's)")
    args = p.parse_args(argv)
    if args.command == "write":
        write(args.words, args.role, args.splits, args.model)
    else:
        budgets(args.words, args.role, args.splits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
