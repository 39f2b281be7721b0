"""Fit the builtin reader (line_scores.py) on the dev split; print its fitted constants.

    python tools/fit_reader.py [--vault sample-vault] [--questions questions/dev.jsonl ...]
    (a question file over another vault: questions/dev4.jsonl=vaults/third-vault)

Step 1, the weights. Each question is routed and retrieved as the harness does (hybrid,
k=20, version.apply) and its candidates become the writer's notes in retrieval order
(generate.build_messages, read back by builtin_writer.parse_prompt). Every unit (sentence or
table row) of those notes is one row of line_scores.FEATURES; its label is 1 when it holds a
key fact of the question (measures.has_fact) and its note is a gold file, else 0 (every
unit of an unanswerable question is 0). A logistic regression, Newton steps with a
small ridge (RIDGE) so that a feature no positive row has stays finite, gives the bias
and the eight weights.

Step 2, the abstain threshold, with those weights. harness.ask answers every question
(full variant); the statistic of a question is the best evidence logit of any unit of
its kept passages (BuiltinJudge.evidence, every part). For each threshold between two
statistics the curve counts false abstentions (answerable, statistic below) and
answered refusals (unanswerable, statistic at or above); the threshold picked minimises
the balanced error, false-abstention rate + answered-refusal rate, and is the middle of
the run of equally good thresholds (--max-answered-refusals N instead takes the fewest
false abstentions among thresholds answering at most N refusals).

Only the split it is given is read; the frozen splits are never passed here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

from verso import embedder  # noqa: E402
from verso import evaluate  # noqa: E402

from verso import builtin_writer  # noqa: E402
from verso import generate  # noqa: E402
from verso import harness  # noqa: E402
from verso import line_scores  # noqa: E402
from verso import measures  # noqa: E402
from verso import rerank  # noqa: E402
from verso import retrieve  # noqa: E402
from verso import route  # noqa: E402
from verso import timewords  # noqa: E402
from verso import verdict_fit  # noqa: E402
from verso import version  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RIDGE = 1.0       # a unit-variance prior on each weight (a few dozen positives)
WEIGHT_NAMES = ("W_TEXT", "W_HEADING", "W_TITLE", "W_COVER", "W_TYPE", "W_NEAR", "W_RANK", "W_LATEST")


def _notes(idx, question: str) -> list[dict]:
    """The notes the builtin reader is shown, in the router's time mode. The reader is
    frozen: a question the router has read as of a date only since the fit (dev's d05,
    "last year", since seasons and years became points in time) is read as it was then,
    in mode any, so that the fit still gives the shipped constants."""
    mode = route.route(question)["time_mode"]
    mode = "any" if mode == "as_of" else mode
    qvec = idx.embedder.embed_query(question)
    cands = version.apply(idx, retrieve.search(idx, question, qvec, k=20), mode, qvec)
    user = generate.build_messages(question, cands, mode)[-1]["content"]
    return builtin_writer.parse_prompt(user)[2]


def rows(idx, questions: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(X [n, 8] features, y [n] labels) over every unit of every question's notes."""
    X, y = [], []
    for q in questions:
        notes = _notes(idx, q["question"])
        for u in builtin_writer.unit_rows(line_scores.analyse(q["question"]), notes):
            rank = 1.0 / (1 + u.note["order"])
            X.append(list(u.f) + [rank, float(u.note["status"] == builtin_writer.STATUS_LATEST)])
            y.append(float(q["answerable"] and u.note["path"] in q["gold_files"]
                           and any(measures.has_fact(u.text, f) for f in q["key_facts"])))
    return np.array(X, dtype=np.float64), np.array(y, dtype=np.float64)


def logistic(X: np.ndarray, y: np.ndarray, steps: int = 50, ridge: float = RIDGE) -> np.ndarray:
    """[bias, w1..wk] of a ridge logistic regression (verdict_fit.logistic, this fit's
    RIDGE)."""
    return verdict_fit.logistic(X, y, steps=steps, ridge=ridge)


def set_weights(w) -> None:
    line_scores.READER_BIAS = float(w[0])
    for name, v in zip(WEIGHT_NAMES, w[1:]):
        setattr(line_scores, name, float(v))


def statistics(idx, be, questions: list[dict]) -> list[tuple[float, bool]]:
    """(best evidence logit among the kept passages, answerable) per question."""
    idf = rerank.corpus_idf(idx)
    out = []
    for q in questions:
        a = harness.ask(q["question"], index=idx, backend=be)
        kept = {f"p{i}": {"text": idx.chunks[s["id"]].get("text", ""),
                          "heading": s["heading"], "path": s["path"]}
                for i, s in enumerate(a.sources)}
        ev = be.judge.evidence(q["question"], kept, idf) if kept else {}
        out.append((max((max(v) for v in ev.values()), default=float("-inf")),
                    q["answerable"]))
    return out


def curve(stats: list[tuple[float, bool]]) -> list[tuple[float, int, int]]:
    """(threshold, false abstentions, answered refusals) at each midpoint."""
    vals = sorted({s for s, _ in stats if np.isfinite(s)})
    cuts = [vals[0] - 1.0] + [(a + b) / 2 for a, b in zip(vals, vals[1:])] + [vals[-1] + 1.0]
    return [(t, sum(1 for s, ok in stats if ok and s < t),
             sum(1 for s, ok in stats if not ok and s >= t)) for t in cuts]


def pick(points, n_answerable: int, n_refuse: int, max_answered=None) -> float:
    """The middle threshold of the best run by balanced error; with max_answered, only
    thresholds answering at most that many refusals compete (the fewest false
    abstentions among them wins)."""
    if max_answered is not None:
        points = [p for p in points if p[2] <= max_answered]
        n_refuse = float("inf")
    err = [fa / max(n_answerable, 1) + wa / max(n_refuse, 1) for _, fa, wa in points]
    best = min(err)
    run = [i for i, e in enumerate(err) if e == best]
    first = run[0]
    run = [i for i in run if i - first == run.index(i)]      # the first contiguous run
    return float(round(points[run[len(run) // 2]][0], 3))


def _sets(vault, questions) -> dict:
    """{vault: [question file, ...]}: a file given as FILE=VAULT is over that vault,
    any other over `vault`."""
    files = [questions] if isinstance(questions, (str, Path)) else list(questions)
    out: dict = {}
    for f in map(str, files):
        name, _, own = f.partition("=")
        out.setdefault(own or str(vault), []).append(name)
    return out


def fit(vault=ROOT / "sample-vault", questions=ROOT / "questions" / "dev.jsonl",
        verbose=False, max_answered=None) -> dict:
    """{constant name: value} for line_scores.py, fitted on `questions` (one question file
    or several, pooled; "FILE=VAULT" for a file over another vault) over `vault`. The
    reader is frozen as the offline floor: its constants are the fit on the notes as
    written, before time words were resolved (timewords.py), and on the candidates the
    hashed embedder alone retrieved, before the word table (embedder.WORDS_SHARE 0), and
    stay so."""
    sets = _sets(vault, questions)
    shipped = [line_scores.READER_BIAS] + [getattr(line_scores, n) for n in WEIGHT_NAMES]
    resolve, share = timewords.resolve, embedder.WORDS_SHARE
    timewords.resolve = lambda text, written: text      # the notes as written (see below)
    embedder.WORDS_SHARE = 0.0                          # the hashed cosine alone
    with tempfile.TemporaryDirectory() as tmp:
        loaded, X, y, qs = [], [], [], []
        for i, (v, files) in enumerate(sets.items()):
            idx, be = harness.load(index=str(Path(tmp) / str(i)), vault=v, backend="builtin")
            vqs = [q for f in files for q in evaluate.load_questions(f)]
            Xv, yv = rows(idx, vqs)
            loaded.append((idx, be, vqs))
            X.append(Xv)
            y.append(yv)
            qs += vqs
        X, y = np.vstack(X), np.concatenate(y)
        w = np.round(logistic(X, y), 3)
        set_weights(w)
        try:
            stats = [st for idx, be, vqs in loaded for st in statistics(idx, be, vqs)]
        finally:
            set_weights(shipped)       # the fit leaves line_scores.py's constants as they were
            timewords.resolve, embedder.WORDS_SHARE = resolve, share
    points = curve(stats)
    n_ans = sum(1 for q in qs if q["answerable"])
    t = pick(points, n_ans, len(qs) - n_ans, max_answered)
    if verbose:
        print(f"# {len(y)} units, {int(y.sum())} positive, from {len(qs)} questions")
        print("# threshold  false_abstentions  answered_refusals")
        for th, fa, wa in points:
            print(f"# {th:9.3f}  {fa:2d}/{n_ans}  {wa:2d}/{len(qs) - n_ans}")
    return {"READER_BIAS": float(w[0]), **{k: float(v) for k, v in zip(WEIGHT_NAMES, w[1:])},
            "ABSTAIN_LOGIT": t}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vault", default=str(ROOT / "sample-vault"))
    p.add_argument("--questions", nargs="+", default=[str(ROOT / "questions" / "dev.jsonl")],
                   help="tuning question files, pooled (never a frozen split); FILE=VAULT "
                        "for a file over another vault than --vault")
    p.add_argument("--max-answered-refusals", type=int, default=None,
                   help="pick the threshold with the fewest false abstentions among those "
                        "answering at most this many refusals (default: balanced error)")
    args = p.parse_args(argv)
    for name, v in fit(args.vault, args.questions, verbose=True,
                       max_answered=args.max_answered_refusals).items():
        print(f"{name} = {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
