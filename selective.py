"""selective: how well a verdict separates right answers from wrong ones.

In:  scored records (evaluate.score): verdict, answer_correct, answerable, abstained and
     the calibrated confidence of each question.
Out: SHIP precision (right among SHIP), coverage (SHIP among answerable questions), the
     wrong SHIPs and the unanswerable ones shipped; the risk-coverage curve (answers
     taken in order of confidence, most confident first: the share of all questions
     answered against the share of those answers that are wrong) and the area under it
     (AURC, lower is better); the reliability table (confidence bins: how many, mean
     confidence, share right).
Not: scoring answers (evaluate.py) or drawing (scorecard.py, html_report.py).
"""

from __future__ import annotations

BINS = 5                 # reliability bins of width 1 / BINS


def _rate(k: int, n: int) -> dict:
    return {"k": k, "n": n, "p": k / n if n else None}


def curve(records) -> list[list[float]]:
    """[[coverage, risk], ...] with one point per answered question, most confident
    first; a question without a confidence (abstained) is never answered."""
    scored = sorted(((r["confidence"], bool(r["answer_correct"])) for r in records
                     if r.get("confidence") is not None), key=lambda x: -x[0])
    n, wrong, out = max(len(records), 1), 0, []
    for i, (_, right) in enumerate(scored, 1):
        wrong += not right
        out.append([round(i / n, 4), round(wrong / i, 4)])
    return out


def aurc(points) -> float | None:
    """The mean risk over the curve's points (area under risk-coverage, per answer)."""
    return round(sum(r for _, r in points) / len(points), 4) if points else None


def reliability(records, bins: int = BINS) -> list[dict]:
    """[{"lo", "hi", "n", "mean_p", "right"}] over the questions with a confidence."""
    out = []
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        xs = [r for r in records if r.get("confidence") is not None
              and (lo <= r["confidence"] < hi or (b == bins - 1 and r["confidence"] >= hi))]
        out.append({"lo": lo, "hi": hi, "n": len(xs),
                    "mean_p": round(sum(r["confidence"] for r in xs) / len(xs), 4) if xs
                    else None,
                    "right": _rate(sum(bool(r["answer_correct"]) for r in xs), len(xs))})
    return out


def metrics(records) -> dict:
    ship = [r for r in records if r.get("verdict") == "SHIP"]
    right = sum(bool(r["answer_correct"]) for r in ship)
    answerable = [r for r in records if r.get("answerable")]
    points = curve(records)
    return {"ship_precision": _rate(right, len(ship)),
            "coverage": _rate(sum(r.get("verdict") == "SHIP" for r in answerable),
                              len(answerable)),
            "wrong_ship": len(ship) - right,
            "refusals_shipped": sum(1 for r in ship if not r.get("answerable")),
            "right_shipped": _rate(right, sum(bool(r["answer_correct"]) for r in records)),
            "risk_coverage": points, "aurc": aurc(points),
            "reliability": reliability(records)}
