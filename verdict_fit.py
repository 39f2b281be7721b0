"""verdict_fit: a calibration fitted from rows of answers (the one home of the fit).

In:  rows, one per written answer: {"split", "id", "features", "right", "passed"}; and
     for the choices, one row per question that offers one: {"split", "right": {option:
     bool}} (whose answer was right where the two readers disagreed; which writer's
     answer was right on a synthesis or change question).
Out: calibration(): the standardised ridge logistic model (bias, weights, mean, scale),
     the SHIP threshold with a finite-sample guarantee and the held-out report;
     pick(): the option with the most right answers, with its held-out count.
Not: collecting rows (calibrate_model.py answers the tuning splits with the user's
     model; tools/fit_verdict.py refits the builtin calibration shipped in calibrate.py)
     or applying a calibration (calibrate.py).

The threshold, learn-then-test with a fixed sequence: each tuning split is scored by the
model fitted on the other splits. Among the rows whose checks passed, most confident
first, the cut points are tested from the top down, starting at the first cut with
LEAST_ROWS rows (fewer could not pass even if all were right). A cut passes when the
lower one-sided Clopper-Pearson bound (level 1 - ALPHA) of the precision of the rows at or
above it is at least calibrate.PRECISION. Testing stops at the first cut that fails; the
threshold is the lowest cut that passed. The order of the cuts is fixed before any label
is read, so the guarantee needs no correction for the number of cuts tested. When no cut
passes nothing ships, and rows_needed says how many rows at the observed precision the
bound would need.
"""

from __future__ import annotations

import math

import numpy as np

from verso import calibrate

RIDGE = 5.0          # on standardised features: ~200 rows, a dozen features
NEVER = 1.01         # a threshold no probability reaches
ALPHA = 0.05         # the bound holds with probability 95%
MOST_ROWS = 100_000  # rows_needed looks no further


def logistic(X: np.ndarray, y: np.ndarray, steps: int = 50, ridge: float = RIDGE) -> np.ndarray:
    """[bias, w1..wk] of a ridge logistic regression (Newton's method; bias unpenalised)."""
    A = np.hstack([np.ones((len(X), 1)), X])
    w = np.zeros(A.shape[1])
    penalty = ridge * np.eye(A.shape[1])
    penalty[0, 0] = 0.0
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(A @ w)))
        grad = A.T @ (p - y) + penalty @ w
        hess = (A * (p * (1 - p))[:, None]).T @ A + penalty
        try:
            step = np.linalg.solve(hess, grad)
        except np.linalg.LinAlgError:        # a handful of rows, all right or all wrong
            step = np.linalg.lstsq(hess, grad, rcond=None)[0]
        w -= step
        if np.abs(step).max() < 1e-10:
            break
    return w


def _matrix(rows: list[dict], names, fill=None) -> np.ndarray:
    """The rows' features; a missing one (a model feature the server could not give) is
    fill's value, by default the mean of the rows that have it (0 when none has)."""
    X = np.array([[r["features"].get(n, np.nan) for n in names] for r in rows], float)
    X = X.reshape(len(rows), len(names))
    if fill is None:
        seen = ~np.isnan(X)
        fill = np.where(seen.any(axis=0), np.nansum(X, axis=0) / np.maximum(1, seen.sum(0)), 0)
    return np.where(np.isnan(X), fill, X)


def fit(rows: list[dict], names=calibrate.FEATURES) -> dict:
    """{"names", "mean", "scale", "weights", "bias"} of the standardised ridge logistic
    model."""
    X, y = _matrix(rows, names), np.array([float(r["right"]) for r in rows])
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale < 1e-9] = 1.0
    w = logistic((X - mean) / scale, y, ridge=RIDGE)
    return {"names": tuple(names), "mean": mean, "scale": scale, "weights": w[1:],
            "bias": w[0]}


def predict(model: dict, rows: list[dict]) -> np.ndarray:
    X = _matrix(rows, model["names"], fill=model["mean"])
    z = model["bias"] + ((X - model["mean"]) / model["scale"]) @ model["weights"]
    return 1.0 / (1.0 + np.exp(-z))


def held_out(rows: list[dict], names=calibrate.FEATURES) -> np.ndarray:
    """Each row's probability from the model fitted on the other splits."""
    p = np.zeros(len(rows))
    for split in sorted({r["split"] for r in rows}):
        inside = [i for i, r in enumerate(rows) if r["split"] == split]
        p[inside] = predict(fit([r for r in rows if r["split"] != split], names),
                            [rows[i] for i in inside])
    return p


def _tail(k: int, n: int, p: float) -> float:
    """P[Binomial(n, p) >= k]."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    return min(1.0, sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1)
                                 - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
                        for i in range(k, n + 1)))


def lower_bound(k: int, n: int, alpha: float = ALPHA) -> float:
    """The lower one-sided Clopper-Pearson bound of a proportion with k of n right: the
    p at which k or more right would happen with probability alpha (0 when k is 0)."""
    if n <= 0 or k <= 0:
        return 0.0
    if k >= n:
        return alpha ** (1.0 / n)
    lo, hi = 0.0, k / n
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _tail(k, n, mid) < alpha else (lo, mid)
    return lo


def least_rows(precision: float = calibrate.PRECISION, alpha: float = ALPHA) -> int:
    """The fewest rows whose bound can reach precision (all of them right)."""
    return max(1, math.ceil(math.log(alpha) / math.log(precision)))


def threshold(p, right, passed, precision: float = calibrate.PRECISION,
              alpha: float = ALPHA) -> float:
    """The lowest held-out probability passing the fixed sequence of tests (the module's
    docstring); NEVER when the first test fails or there are too few rows."""
    order = sorted(((float(pi), bool(ri)) for pi, ri, ok in zip(p, right, passed) if ok),
                   reverse=True)
    best, k, start = NEVER, 0, least_rows(precision, alpha)
    for n, (pi, ri) in enumerate(order, 1):
        k += ri
        if n < start or (n < len(order) and order[n][0] == pi):
            continue                               # not a cut: ties go together
        if lower_bound(k, n, alpha) < precision:
            break
        best = pi
    return best


def rows_needed(k: int, n: int, precision: float = calibrate.PRECISION,
                alpha: float = ALPHA) -> int | None:
    """How many rows at the precision k/n the bound needs to reach `precision` (None:
    at k/n no number will do)."""
    rate = k / n if n else 0.0
    if rate <= precision:
        return None
    ok = lambda m: lower_bound(math.floor(rate * m), m, alpha) >= precision  # noqa: E731
    hi = least_rows(precision, alpha)
    while not ok(hi):
        if hi > MOST_ROWS:
            return None
        hi *= 2
    lo = hi // 2
    while lo + 1 < hi:                 # the bound grows with m at a fixed rate
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def _top(p, rows) -> tuple[int, int]:
    """(right, rows) of the least_rows() most confident passed rows, held out."""
    order = sorted(((float(pi), bool(r["right"])) for pi, r in zip(p, rows) if r["passed"]),
                   reverse=True)[:least_rows()]
    return sum(x for _, x in order), len(order)


def report(rows, p, t) -> dict:
    """Per split, held out: [right among SHIP, SHIP, right answers]."""
    out = {}
    for split in sorted({r["split"] for r in rows}):
        rs = [(pi, r) for pi, r in zip(p, rows) if r["split"] == split]
        ship = [r for pi, r in rs if r["passed"] and pi >= t]
        out[split] = [sum(r["right"] for r in ship), len(ship), sum(r["right"] for _, r in rs)]
    return out


def top_right(p, rows, sizes=(5, 10, 20, 50)) -> str:
    """Of the passed rows, most confident first (held out): how many of the first N
    were right."""
    order = sorted(((float(pi), bool(r["right"])) for pi, r in zip(p, rows) if r["passed"]),
                   reverse=True)
    return ", ".join(f"{sum(x for _, x in order[:n])}/{n}" for n in sizes if n <= len(order))


def calibration(rows: list[dict], backend: str) -> dict:
    """The calibration of these rows (the dict calibrate.py reads)."""
    names = calibrate.feature_names(backend)
    probs = held_out(rows, names)
    t = threshold(probs, [r["right"] for r in rows], [r["passed"] for r in rows])
    m = fit(rows, names)
    r4 = lambda xs: [round(float(x), 4) for x in xs]  # noqa: E731
    top_k, top_n = _top(probs, rows)
    return {"features": list(names), "mean": r4(m["mean"]),
            "scale": r4(m["scale"]), "weights": r4(m["weights"]),
            "bias": round(float(m["bias"]), 4), "threshold": round(t, 4),
            "fitted_on": sorted({r["split"] for r in rows}), "backend": backend,
            "rows": len(rows), "right": sum(r["right"] for r in rows),
            "held_out": report(rows, probs, t), "held_out_top": top_right(probs, rows),
            "bound": {"precision": calibrate.PRECISION, "alpha": ALPHA,
                      "top": [top_k, top_n],
                      "rows_needed": None if t <= 1 else rows_needed(top_k, top_n)}}


def pick(rows: list[dict], options: tuple) -> dict:
    """The option with the most right answers over rows {"split", "right": {option:
    bool}} (ties: the first in `options`), and how it fares held out: each split counted
    under the option picked on the other splits. Options some row lacks are left out."""
    have = [o for o in options if all(r["right"].get(o) is not None for r in rows)]
    best = lambda rs: max(have, key=lambda o: (sum(r["right"][o] for r in rs),  # noqa: E731
                                               -have.index(o)))
    splits = sorted({r["split"] for r in rows})
    held = sum(sum(r["right"][best([x for x in rows if x["split"] != s])] for r in rows
                   if r["split"] == s) for s in splits) if len(splits) > 1 else None
    return {"choice": best(rows) if rows else options[0], "rows": len(rows),
            "right": {o: sum(r["right"][o] for r in rows) for o in have},
            "held_out": held}
