"""calibrate: the probability that an answer is right, and the verdict it earns.

Stage: calibrate (after verify).
In:  the question, the notes the writer was sent (as the builtin reader reads them:
     builtin_writer.WriteRequest.notes, carried on in generate.Draft.notes), verify's rows
     (claims, citations, judge support), whether verify's checks passed, the kept
     candidates (rerank relevance) and the backend's name.
Out: FEATURES (numbers any written answer has), p = the backend's fitted logistic model's
     probability that the answer holds the asked facts, and the verdict: SHIP when the
     code checks and the judge passed and p >= that backend's threshold, else ESCALATE.
Not: abstaining (the gate and the writer do), fitting (tools/fit_verdict.py writes
     CALIBRATIONS), or reading rules of its own: line scores are the builtin reader's
     (line_scores.py, frozen), read a second time over the same notes.

The features describe how an answer came about: how strongly the builtin reader scores
the line the answer came from and by how much it beats the best line stating something
else; whether that line names the asked thing in its own words or only under its
heading; how many asked words the cited note never mentions; whether the question's
names stand in it; the gate's relevance; how many other notes state the same values;
the version status of what is cited; whether the writer's line is the reader's top line
(for a model writer, a second, independent reader); the judge's support; the on-question
check. A backend with no calibration here never SHIPs: nothing says its answers are
right often enough.

A model's calibration is the user's: `verso calibrate` (calibrate_model.py) answers the
bundled tuning splits with the model and stores the fit in Verso's home,
calibrations/<backend>@<digest>.json (STORED), beside its policy: whose answer is shown
where the model and the builtin reader disagree, and which writer answers synthesis and
change questions. Only the builtin calibration ships in this file.

    python tools/fit_verdict.py --write      # refit the builtin calibration in place
"""

from __future__ import annotations

import functools
import json
import math
import re
import sys
from pathlib import Path

import verso
from verso import builtin_writer
from verso import choosing_writer
from verso import line_scores
from verso import store
from verso import textkit

FEATURES = ("line_evidence", "margin", "line_named", "line_heading", "missing_in_note",
            "names_held", "relevance", "agreeing_notes", "cited_latest", "readers_agree",
            "support", "on_question")
# A model reader's own: its probability for the first line it chose
# (choosing_writer.first_pick_p, from the reply's logprobs). Missing (a server without
# logprobs) counts as its mean.
MODEL_FEATURES = ("model_p",)
PRECISION = 0.9          # the share of SHIPs that must be right (held out, tuning splits)
CLIP = 10.0              # reader logits beyond this say nothing more
FREE_TEXT_WRITERS = ("generate", "ollama")   # a model's own words (models.OllamaWriter)
NOT_CALIBRATED = "no calibration for this backend: nothing says its answers are right often enough"
MODEL_NOT_CALIBRATED = ("this model is not calibrated: `verso calibrate` measures how often "
                        "its answers are right")
STORED = "calibrations"          # under store.home(): one <backend>@<digest>.json a model
STORED_FORMAT = 1

# --- fitted by tools/fit_verdict.py; do not edit by hand --------------------------------
CALIBRATIONS: dict = {'builtin': {'backend': 'builtin',
             'bias': -0.9422,
             'bound': {'alpha': 0.05,
                       'precision': 0.9,
                       'rows_needed': None,
                       'top': [18, 29]},
             'features': ['line_evidence', 'margin', 'line_named', 'line_heading',
                          'missing_in_note', 'names_held', 'relevance',
                          'agreeing_notes', 'cited_latest', 'readers_agree', 'support',
                          'on_question'],
             'fitted_on': ['dev', 'dev10', 'dev11', 'dev12', 'dev13', 'dev14', 'dev15',
                           'dev16', 'dev17', 'dev18', 'dev19', 'dev2', 'dev20', 'dev21',
                           'dev22', 'dev23', 'dev3', 'dev4', 'dev5', 'dev6', 'dev7',
                           'dev8', 'dev9'],
             'held_out': {'dev': [0, 0, 21],
                          'dev10': [0, 0, 12],
                          'dev11': [0, 0, 11],
                          'dev12': [0, 0, 12],
                          'dev13': [0, 0, 7],
                          'dev14': [0, 0, 9],
                          'dev15': [0, 0, 8],
                          'dev16': [0, 0, 7],
                          'dev17': [0, 0, 10],
                          'dev18': [0, 0, 9],
                          'dev19': [0, 0, 10],
                          'dev2': [0, 0, 12],
                          'dev20': [0, 0, 13],
                          'dev21': [0, 0, 7],
                          'dev22': [0, 0, 7],
                          'dev23': [0, 0, 7],
                          'dev3': [0, 0, 8],
                          'dev4': [0, 0, 17],
                          'dev5': [0, 0, 7],
                          'dev6': [0, 0, 13],
                          'dev7': [0, 0, 16],
                          'dev8': [0, 0, 17],
                          'dev9': [0, 0, 7]},
             'held_out_top': '2/5, 5/10, 14/20, 29/50',
             'mean': [-2.4488, 0.5706, 0.446, 0.137, 1.165, 0.9513, 0.7723, 0.2164,
                      0.8432, 0.7298, 0.9824, 0.8509],
             'model': None,
             'right': 247,
             'rows': 818,
             'scale': [1.3137, 0.7631, 0.2432, 0.1926, 0.9255, 0.2104, 0.1485, 0.5469,
                       0.3256, 0.444, 0.0608, 0.3562],
             'threshold': 1.01,
             'weights': [0.0749, 0.3871, 0.1293, 0.0758, 0.233, -0.049, 0.3277, -0.1491,
                         -0.2827, 0.2453, -0.1121, 0.0543]}}
# --- end of fitted constants ------------------------------------------------------------


def _line_of(claim: str, units: list):
    """The unit a sentence came from: the one sharing most of its terms."""
    words = set(textkit.terms(claim))
    if not words or not units:
        return None
    best = max(units, key=lambda u: (len(words & set(textkit.terms(u.text))), u.ev))
    return best if words & set(textkit.terms(best.text)) else None


def _clip(x: float) -> float:
    return max(-CLIP, min(CLIP, float(x)))


def _share(terms, tset) -> float:
    return sum(1 for t in terms if line_scores.match(t, tset)) / len(terms) if terms else 1.0


def _cited_lines(notes: list, units: list, rows: list) -> list:
    by_note: dict = {}
    for u in units:
        by_note.setdefault(u.note["id"], []).append(u)
    lines = [_line_of(r["claim"], [u for c in r["citations"] for u in by_note.get(c, [])])
             for r in rows if r.get("citations")]
    return [u for u in lines if u is not None]


def features(question: str, notes: list, rows: list, kept: list) -> dict | None:
    """FEATURES of an answer over the notes its writer was sent (None when none of its
    sentences comes from a cited line)."""
    ask = line_scores.analyse(question)
    units = builtin_writer.unit_rows(ask, notes)
    lines = _cited_lines(notes, units, rows)
    if not lines:
        return None
    line, top = lines[0], max(units, key=lambda u: u.ev)
    said = builtin_writer.values(line.text)
    rival = max((u.ev for u in units if builtin_writer.values(u.text) != said), default=-CLIP)
    agree = {u.note["id"] for u in units if said and said <= builtin_writer.values(u.text)}
    cited = {c for r in rows for c in r.get("citations", [])} & {n["id"] for n in notes}
    by_id = {f"c{i}": c for i, c in enumerate(kept, 1)}
    rel = [by_id[c].relevance for c in cited if c in by_id and by_id[c].relevance is not None]
    support = [r["support"] for r in rows if r.get("support") is not None]
    own = textkit.evidence_terms(line.text) | builtin_writer.label_terms(line.note)
    mentioned = textkit.evidence_terms(line.note["text"]) | builtin_writer.label_terms(line.note)
    return {"line_evidence": _clip(line.ev), "margin": max(0.0, _clip(line.ev - rival)),
            "line_named": line.f[0], "line_heading": line.f[1],
            "missing_in_note": float(min(3, sum(1 for t in ask.terms
                                                if not line_scores.match(t, mentioned)))),
            "names_held": _share(sorted(ask.names), own),
            "relevance": max(rel, default=0.5),
            "agreeing_notes": float(min(3, len(agree - {line.note["id"]}))),
            "cited_latest": sum(n["status"] == builtin_writer.STATUS_LATEST for n in notes
                                if n["id"] in cited) / max(1, len(cited)),
            "readers_agree": float(line.ev >= top.ev),
            "support": min(support, default=0.5),
            "on_question": 1.0}


def feature_names(backend: str) -> tuple:
    """The features a backend's calibration is fitted on."""
    return FEATURES if backend.split(":")[0] == "builtin" else FEATURES + MODEL_FEATURES


def key(backend: str, writer: str | None = None, identity: str | None = None) -> str:
    """The calibration an answer is judged by: the builtin writer's ("builtin"); a
    model's chosen lines ("<backend>@<identity>") or its free text
    ("<backend>:generate@<identity>"), per model (OllamaWriter.identity: a calibration
    holds for the model it was measured on, not for another served under the same
    name). Without an identity the key has no calibration: nothing ships."""
    if backend == "builtin":
        return backend
    free = ":generate" if writer in FREE_TEXT_WRITERS else ""
    return f"{backend}{free}@{identity}" if identity else f"{backend}{free}"


def tuning_splits() -> dict:
    """{split: (vault folder, questions file)} of the tuning splits shipped with the
    package (questions/splits.json, role "tuning"): what calibrations are fitted on."""
    table = json.loads(verso.data_path("questions/splits.json").read_text(encoding="utf-8"))
    return {s: (verso.data_path(row["vault"]), verso.data_path(f"questions/{s}.jsonl"))
            for s, row in table["splits"].items() if row["role"] == "tuning"}


@functools.lru_cache(maxsize=1)
def tuning_questions() -> int:
    """How many questions the tuning splits hold (read once a process)."""
    return sum(sum(1 for x in q.read_text(encoding="utf-8").splitlines() if x.strip())
               for _, q in tuning_splits().values())


def hint(seconds: float) -> str:
    """The line an uncalibrated model's answer ends with: what calibrating it takes,
    at the time this question took."""
    n = tuning_questions()
    return (f"`verso calibrate` measures this model once, to decide between them: about "
            f"{n} questions, ~{seconds:.0f} s each here ({n * seconds / 60:.0f} min)")


def file_name(text: str) -> str:
    """text as a file name under Verso's home (an embedder's "ollama:nomic-embed-text"):
    every run of other characters than letters, digits, "_", "." and "-" one "-"."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)


def stored_path(model_key: str) -> Path:
    """Where `verso calibrate` keeps a model's calibration ("<backend>@<identity>")."""
    return store.home() / STORED / f"{model_key}.json"


_LOADED: dict = {}       # path -> (mtime, the stored calibration)


def load_stored(model_key: str) -> dict | None:
    """A model's stored calibration (None: not calibrated, or a file of another format,
    which is said once on stderr: run `verso calibrate` again)."""
    path = stored_path(model_key)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return None
    if _LOADED.get(path, (None,))[0] != mtime:
        try:
            got = json.loads(path.read_text(encoding="utf-8"))
            ok = got.get("format") == STORED_FORMAT and got.get("key") == model_key
        except (OSError, ValueError, AttributeError):
            got, ok = None, False
        if not ok:
            print(f"verso: {path} is not a calibration this Verso reads; run `verso "
                  "calibrate` again", file=sys.stderr)
        _LOADED[path] = (mtime, got if ok else None)
    return _LOADED[path][1]


def _split_key(k: str) -> tuple[str, str]:
    """("<backend>@<identity>", "choose" or "generate") of a model's key."""
    head, _, identity = k.partition("@")
    backend, _, free = head.partition(":")
    return f"{backend}@{identity}", "generate" if free else "choose"


def lookup(k: str) -> dict | None:
    """The calibration under key k: the shipped builtin one, else the model's stored one
    (None: none)."""
    if k in CALIBRATIONS or "@" not in k:
        return CALIBRATIONS.get(k)
    model_key, writer = _split_key(k)
    got = load_stored(model_key)
    return None if got is None else (got.get("verdicts") or {}).get(writer)


def policy(model_key: str | None) -> dict:
    """A model's policy ({"on_disagreement", "synthesis", "change"}): its stored
    calibration's, else choosing_writer.UNCALIBRATED_POLICY."""
    got = load_stored(model_key) if model_key else None
    if got is None:
        return dict(choosing_writer.UNCALIBRATED_POLICY)
    return {k: got[k]["choice"] for k in choosing_writer.UNCALIBRATED_POLICY}


def judged_by(k: str) -> dict:
    """Which calibration judged an answer: {"key", "source"} where source is "shipped"
    (in this file), the stored file with its date, or None (no calibration)."""
    if k in CALIBRATIONS:
        return {"key": k, "source": "shipped"}
    got = load_stored(_split_key(k)[0]) if "@" in k else None
    if got is None or lookup(k) is None:
        return {"key": k, "source": None}
    return {"key": k, "source": str(stored_path(_split_key(k)[0])), "date": got.get("date")}


def probability(f: dict | None, backend: str) -> float | None:
    """The backend's fitted p(right) for features f (None: no features or no calibration)."""
    cal = lookup(backend)
    if f is None or cal is None:
        return None
    z = cal["bias"] + sum(w * (f.get(n, m) - m) / s for n, w, m, s in zip(
        cal["features"], cal["weights"], cal["mean"], cal["scale"]))
    return 1.0 / (1.0 + math.exp(-z))


def threshold(backend: str) -> float | None:
    cal = lookup(backend)
    return None if cal is None else cal["threshold"]


def decide(checks_passed: bool, p: float | None, backend: str) -> str:
    """SHIP only when the code checks and the judge passed and p clears the threshold."""
    t = threshold(backend)
    return "SHIP" if checks_passed and p is not None and t is not None and p >= t \
        else "ESCALATE"


def calibrate(question: str, notes: list, ver, kept: list, backend: str,
              readers_agree: bool | None = None, model_p: float | None = None) -> dict:
    """{"features", "p", "threshold", "verdict", "why", "key"} of a written, non-abstaining
    answer over the notes its writer was sent, judged by the calibration under key
    `backend` (key()).
    readers_agree: whether a model's chosen lines and the builtin reader stated the same
    facts (choosing_writer.py), which then stands for the feature (else: is the answer's
    line the reader's top line); model_p: the model's probability for its first chosen
    line."""
    f = features(question, notes, ver.sentences, kept)
    if f is not None:
        f["on_question"] = float(ver.on_question)
        if readers_agree is not None:
            f["readers_agree"] = float(readers_agree)
        if model_p is not None:
            f["model_p"] = float(model_p)
    p = probability(f, backend)
    verdict = decide(ver.verdict == "SHIP", p, backend)
    t = threshold(backend)
    why = (None if verdict == "SHIP" else
           "a code check or the judge failed" if ver.verdict != "SHIP" else
           (MODEL_NOT_CALIBRATED if "@" in backend else NOT_CALIBRATED) if t is None else
           "no sentence comes from a cited line" if p is None else
           f"at no confidence were this backend's answers right {PRECISION:.0%} of the time "
           "on the tuning splits, so none ships unchecked" if t > 1 else
           f"below {t:.2f}, where answers were right {PRECISION:.0%} of the time")
    return {"features": f, "p": None if p is None else round(p, 4), "threshold": t,
            "verdict": verdict, "why": why, "key": backend, "by": judged_by(backend)}
