"""The cost ledger: one row per model call (stage, backend, model, tokens, seconds, dollars).

In:  what each model call reports. Out: the rows, totals per stage, and the sum of an
     answer's stage rows (the "total" line of the stage table).
Not: any model call. Every backend (models.py, line_scores.py, builtin_writer.py) records
     here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass
class Ledger:
    """Every model call of one question (or one run), attributed to a stage."""

    rows: list = field(default_factory=list)

    def record(self, stage, backend, model, input_tokens=0, output_tokens=0,
               seconds=0.0, dollars=0.0):
        self.rows.append({"stage": stage, "backend": backend, "model": model,
                          "input_tokens": int(input_tokens),
                          "output_tokens": int(output_tokens),
                          "seconds": float(seconds), "dollars": float(dollars)})

    def by_stage(self) -> dict:
        out: dict = {}
        for r in self.rows:
            t = out.setdefault(r["stage"], {"calls": 0, "input_tokens": 0,
                                            "output_tokens": 0, "seconds": 0.0,
                                            "dollars": 0.0})
            t["calls"] += 1
            for k in ("input_tokens", "output_tokens", "seconds", "dollars"):
                t[k] += r[k]
        return out


def record(ledger, stage, backend, model, started, inp=0, out=0, dollars=0.0):
    """One row in `ledger` (if any) for a call that began at perf_counter() `started`."""
    if ledger is not None:
        ledger.record(stage, backend, model, inp, out, time.perf_counter() - started,
                      dollars)


def stage_totals(stages: list[dict]) -> dict:
    """ms, tokens in, tokens out and dollars summed over an answer's stage rows."""
    return {k: sum(s[k] for s in stages) for k in ("ms", "input_tokens", "output_tokens",
                                                   "dollars")}
