"""tools/fit_reader.py: the fitting procedure on hand-worked data, and the constants in
line_scores.py are what it prints for the dev split (re-run it and paste when this
fails)."""

import sys
from pathlib import Path

import numpy as np
import pytest

from verso import line_scores

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import fit_reader  # noqa: E402


def test_logistic_recovers_a_known_model():
    rng = np.random.default_rng(0)
    X = rng.uniform(0, 1, size=(4000, 2))
    z = -1.0 + 3.0 * X[:, 0] - 2.0 * X[:, 1]
    y = (rng.uniform(size=4000) < 1 / (1 + np.exp(-z))).astype(float)
    w = fit_reader.logistic(X, y)
    assert w == pytest.approx([-1.0, 3.0, -2.0], abs=0.3)


def test_curve_and_pick_hand_worked():
    stats = [(-5.0, True), (-4.0, False), (-3.0, True), (-2.0, True), (-1.0, False)]
    points = fit_reader.curve(stats)
    assert points[0] == (-6.0, 0, 2) and points[-1] == (0.0, 3, 0)
    assert (-3.5, 1, 1) in points     # -5.0 (answerable) abstains, -1.0 (refusal) answers
    # balanced error: -6: 0/3 + 2/2 = 1; -4.5: 1/3 + 2/2; -3.5: 1/3 + 1/2 (the least);
    # -2.5: 2/3 + 1/2; -1.5: 3/3 + 1/2; 0: 3/3 + 0/2
    assert fit_reader.pick(points, 3, 2) == -3.5
    # a run of equally good thresholds: its middle one
    flat = [(-3.0, 1, 0), (-2.0, 1, 0), (-1.0, 1, 0), (0.0, 2, 0)]
    assert fit_reader.pick(flat, 3, 2) == -2.0
    # at most no refusal answered: the fewest false abstentions among -1.5 and 0
    assert fit_reader.pick(points, 3, 2, max_answered=0) == 0.0
    assert fit_reader.pick(points, 3, 2, max_answered=1) == -3.5


@pytest.mark.slow
def test_reader_constants_are_the_fit_on_dev():
    shipped = {name: getattr(line_scores, name) for name in
               ["READER_BIAS", "ABSTAIN_LOGIT"] + list(fit_reader.WEIGHT_NAMES)}
    got = fit_reader.fit()
    assert got.keys() == shipped.keys()
    for name, value in got.items():
        assert shipped[name] == pytest.approx(value, abs=2e-3), name
        assert getattr(line_scores, name) == shipped[name], f"fit() left {name} changed"


def test_question_files_name_their_vault_or_take_the_default():
    sets = fit_reader._sets("sample-vault", ["questions/dev.jsonl",
                                             "questions/dev4.jsonl=vaults/third-vault",
                                             "questions/dev2.jsonl"])
    assert sets == {"sample-vault": ["questions/dev.jsonl", "questions/dev2.jsonl"],
                    "vaults/third-vault": ["questions/dev4.jsonl"]}
    assert fit_reader._sets("v", "q.jsonl") == {"v": ["q.jsonl"]}
