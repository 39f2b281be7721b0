"""evidence_fit: the evidence ranker (passages.py) fitted on the pools of tuning splits.

In:  tuning splits as (name, vault, answerable questions with key facts), each loaded
     as (Index, Backend): the builtin embedder's for tools/fit_evidence.py, the user's
     Ollama embedder's for `verso calibrate` (calibrate_model.py).
Out: pool rows (every section of the pool the harness builds for a question at the
     largest budget, its passages.FEATURES, whether it holds a key fact), weights on the
     features' own scale, the evidence recall a set of weights gives, and an embedder's
     fit beside the shipped one, held out by vault.
Not: the features or the fill (passages.py), the regression (verdict_fit.py), where a
     fit is written (tools/fit_evidence.py into passages.py, calibrate_model.py into
     Verso's home).

A section is labelled right when its heading or text holds a key fact and its note is
a gold file (any note when the question names none), or when a key fact is its note's
date and it is the note's first section (every reader is shown the date).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np

from verso import harness
from verso import measures
from verso import passages
from verso import verdict_fit

BUDGETS = (300, 600, 1000)
MIN_VAULTS = 5      # vaults an embedder's fit must be held out on before it is used
MIN_HOLDING = 200   # and sections holding a key fact it is fitted on (MiniLM's pools of
                    # the twenty tuning splits hold 1,345; `--limit 10` about 290)


def label(q: dict, s, idx) -> bool:
    """A pool section holds a key fact of q (see the module's rule)."""
    chunk = idx.chunks[s.id]
    if q["gold_files"] and s.path not in q["gold_files"]:
        return False
    text = f"{chunk.get('heading') or ''}\n{chunk.get('text') or ''}"
    if s.at == 0:
        text += f"\n{chunk.get('date') or ''}"
    return any(measures.has_fact(text, f) for f in q["key_facts"])


def collect(sets, loaded, say=None) -> list[dict]:
    """One row per pool section: {"split", "q", "features", "right"}; say(split, i, n)
    before each split when given."""
    rows, real = [], passages.sections
    for i, (name, _, questions) in enumerate(sets):
        if say:
            say(name, i + 1, len(sets))
        idx, be = loaded[name]
        for q in questions:
            seen = []

            def spy(*a, **kw):
                pool, table = real(*a, **kw)
                seen.append(pool)
                return pool, table
            passages.sections = spy
            try:
                harness.ask(q["question"], index=idx, backend=be, write=False,
                            budget=BUDGETS[-1])
            finally:
                passages.sections = real
            for s in (seen[0] if seen else []):
                rows.append({"split": name, "q": q["id"], "features": dict(s.features),
                             "right": label(q, s, idx)})
    return rows


def raw(model: dict) -> tuple[float, dict]:
    """(bias, {feature: weight}) on the features' own scale."""
    w = model["weights"] / model["scale"]
    bias = float(model["bias"] - (w * model["mean"]).sum())
    return bias, {n: round(float(x), 4) for n, x in zip(model["names"], w)}


@contextlib.contextmanager
def weights_in_use(bias: float, weights: dict):
    """Every index's sections scored by these weights while inside (passages.FORCED)."""
    saved = passages.FORCED
    passages.FORCED = (bias, weights)
    try:
        yield
    finally:
        passages.FORCED = saved


def recall(sets, loaded, bias, weights) -> dict:
    """{split: [key-fact questions handed on at each budget]} with these weights."""
    out = {}
    with weights_in_use(bias, weights):
        for name, _, questions in sets:
            idx, be = loaded[name]
            out[name] = [sum(measures.evidence_recall(q["key_facts"], harness.ask(
                q["question"], index=idx, backend=be, write=False, budget=b).sources)
                for q in questions) for b in BUDGETS]
    return out


def log_loss(p, rows: list[dict]) -> float:
    """Mean negative log-likelihood of the rows' labels under probabilities p."""
    y = np.array([float(r["right"]) for r in rows])
    p = np.clip(np.asarray(p, dtype=float), 1e-9, 1 - 1e-9)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean()) if len(y) else math.nan


def embedder_fit(rows: list[dict], vault_of: dict) -> dict:
    """An embedder's own ranker beside the shipped one (fitted on the builtin embedder's
    pools): {"bias", "weights", "held_out": {"fitted", "shipped"} log loss, "use",
    "why"}. Held out: each vault's rows scored by the model fitted on the other vaults'
    (dev, dev2 and dev3 share one vault). The rule: the embedder's fit is used when its
    held-out log loss is lower than the shipped weights' on the same rows, and it was
    fitted and held out on enough (MIN_VAULTS, MIN_HOLDING): a quick pass over a few
    questions never replaces the shipped ranker."""
    by_vault = [{**r, "split": vault_of[r["split"]]} for r in rows]
    bias, weights = raw(verdict_fit.fit(by_vault, passages.FEATURES))
    vaults, holding = len({r["split"] for r in by_vault}), sum(r["right"] for r in rows)
    if vaults < 2:
        return {"bias": bias, "weights": weights, "held_out": None, "use": "shipped",
                "why": "pools from one vault: nothing to hold out"}
    fitted = log_loss(verdict_fit.held_out(by_vault, passages.FEATURES), by_vault)
    shipped = log_loss([passages.probability(r["features"]) for r in by_vault], by_vault)
    enough = vaults >= MIN_VAULTS and holding >= MIN_HOLDING
    why = (f"held out by vault ({vaults} vaults, {holding} sections holding a key fact), "
           f"log loss {fitted:.4f} fitted against {shipped:.4f} shipped")
    return {"bias": bias, "weights": weights,
            "held_out": {"fitted": round(fitted, 5), "shipped": round(shipped, 5)},
            "use": "fitted" if enough and fitted < shipped else "shipped",
            "why": why if enough else f"{why}; too few to use it (at least {MIN_VAULTS} "
                                      f"vaults and {MIN_HOLDING} such sections)"}
