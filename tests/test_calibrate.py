"""The calibrated verdict (calibrate.py), its fit (verdict_fit.py), the selective-
answering metrics (selective.py) and what Verso says when unsure (unsure.py), on records
and notes made for them."""

import math
import sys
from pathlib import Path

import types

import pytest

from verso import calibrate
from verso import generate
from verso import selective
from verso import unsure
from verso import verdict_fit
from verso.retrieve import Candidate
from verso.verify import verify

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import fit_verdict  # noqa: E402


def cand(i, path, text, date="2026-06-01", heading="", relevance=0.9, latest=True):
    chunk = {"id": i, "path": path, "heading": heading, "section_date": None, "date": date,
             "date_source": "filename", "family": path, "is_latest": latest,
             "entry_latest": None, "private": False, "text": text}
    return Candidate(chunk=chunk, relevance=relevance)


class Judge:
    def support(self, claims, stage="verify", ledger=None):
        return {k: 0.9 for k in claims}


def cal(question, answer, notes, mode="any", on_question=True):
    """(calibration, Verdict); on_question=False: verify without its question-aware checks."""
    sent = generate.request(question, notes, mode).notes     # the notes the writer read
    ver = verify(answer, notes, mode, Judge(), question=question if on_question else None)
    return calibrate.calibrate(question, sent, ver, notes, "builtin"), ver


PEOPLE = cand(1, "people/Ana Ferreira.md", "Ana Ferreira runs the relocation service.\n"
              "Phone: 0113 496 0721.", heading="Ana Ferreira")
CLIENT = cand(2, "work/Aireside Housing.md", "Role: Head of Digital; Name: Priya Nandakumar;"
              " Phone: 0113 496 0999.", heading="Contacts")


def test_a_line_of_the_asked_person_holds_the_name_another_does_not():
    f, _ = cal("What is Ana's phone number?", "Phone: 0113 496 0721 [c1].", [PEOPLE, CLIENT])
    assert f["features"]["names_held"] == 1.0
    g, _ = cal("What is Ana's phone number?", "Phone: 0113 496 0999 [c2].", [PEOPLE, CLIENT])
    assert g["features"]["names_held"] == 0.0
    assert g["features"]["readers_agree"] == 0.0 and f["features"]["readers_agree"] == 1.0


def test_asked_words_the_cited_note_never_mentions_are_counted():
    note = cand(1, "home/gym.md", "The gym costs £40 a month.")
    f, _ = cal("What floor is the gym on?", "The gym costs £40 a month [c1].", [note])
    g, _ = cal("How much is the gym a month?", "The gym costs £40 a month [c1].", [note])
    assert f["features"]["missing_in_note"] >= 1 and g["features"]["missing_in_note"] == 0


def test_other_notes_stating_the_same_values_agree():
    a = cand(1, "work/rates.md", "Day rate: £760.")
    b = cand(2, "work/email.md", "I quoted them my day rate of £760.")
    c = cand(3, "work/old.md", "Day rate: £640.")
    f, _ = cal("What is my day rate?", "Day rate: £760 [c1].", [a, b, c])
    assert f["features"]["agreeing_notes"] == 1.0 and f["features"]["margin"] >= 0.0


def test_an_answer_citing_no_line_has_no_features_and_escalates(monkeypatch):
    # a calibration every p clears, and answers verify passes (its question-aware checks
    # off): the missing features alone escalate the one citing no line
    monkeypatch.setitem(calibrate.CALIBRATIONS, "builtin",
                        dict(calibrate.CALIBRATIONS["builtin"], threshold=0.0))
    notes = [cand(1, "a.md", "Day rate: £760.")]
    for answer, cites_a_line in (("Day rate: £760 [c1].", True), ("It is fine [c1].", False)):
        f, ver = cal("What is my day rate?", answer, notes, on_question=False)
        assert ver.verdict == "SHIP" and (f["verdict"] == "SHIP") is cites_a_line
    assert f["features"] is None and f["p"] is None and f["verdict"] == "ESCALATE"
    assert f["why"] == "no sentence comes from a cited line"


def test_the_verdict_ships_only_checked_answers_above_the_threshold(monkeypatch):
    n = len(calibrate.FEATURES)
    one = [1.0] + [0.0] * (n - 1)            # p = sigmoid(line_evidence + 2)
    monkeypatch.setattr(calibrate, "CALIBRATIONS", {"builtin": {
        "features": list(calibrate.FEATURES), "mean": [-2.0] + [0.0] * (n - 1),
        "scale": [1.0] * n, "weights": one, "bias": 0.0, "threshold": 0.6}})
    f = {k: 0.0 for k in calibrate.FEATURES}
    f["line_evidence"] = -1.0
    p = calibrate.probability(f, "builtin")
    assert p == pytest.approx(1 / (1 + math.exp(-1.0)))           # 0.731
    assert calibrate.decide(True, p, "builtin") == "SHIP"
    assert calibrate.decide(False, p, "builtin") == "ESCALATE"     # a failed check
    f["line_evidence"] = -3.0                                      # p 0.269
    assert calibrate.decide(True, calibrate.probability(f, "builtin"), "builtin") == "ESCALATE"
    assert calibrate.probability(f, "ollama") is None
    assert calibrate.decide(True, 0.99, "ollama") == "ESCALATE"    # not calibrated
    notes = [cand(1, "a.md", "Day rate: £760.")]
    r, ver = cal("What is my day rate?", "Day rate: £760 [c1].", notes)   # p 0.88 >= 0.6
    assert ver.verdict == "SHIP" and r["p"] >= 0.6
    assert r["verdict"] == "SHIP" and r["why"] is None
    r, ver = cal("What is my day rate?", "Day rate: £640 [c1].", notes)   # a failed check
    assert not ver.rules_ok and r["verdict"] == "ESCALATE"
    assert r["why"] == "a code check or the judge failed"


def test_the_lower_clopper_pearson_bound_matches_worked_cases():
    # all right: alpha ** (1/n); 29 of 29 is the fewest that clear 90% at 95%
    assert verdict_fit.lower_bound(29, 29) == pytest.approx(0.05 ** (1 / 29))
    assert verdict_fit.least_rows() == 29
    assert verdict_fit.lower_bound(28, 28) < 0.9 <= verdict_fit.lower_bound(29, 29)
    # 9 of 10: the p with P[X >= 9 | 10, p] = 0.05 (10 p^9 (1-p) + p^10 = 0.05 at 0.6058)
    lb = verdict_fit.lower_bound(9, 10)
    assert lb == pytest.approx(0.6058, abs=1e-4)
    assert 10 * lb ** 9 * (1 - lb) + lb ** 10 == pytest.approx(0.05, abs=1e-9)
    assert verdict_fit.lower_bound(0, 10) == 0.0 and verdict_fit.lower_bound(3, 0) == 0.0


def test_the_threshold_is_tested_from_the_top_down_and_stops_at_the_first_failure():
    n = verdict_fit.least_rows()
    p = [1 - i / 1000 for i in range(100)]
    assert verdict_fit.threshold(p[:n], [1] * n, [True] * n) == p[n - 1]       # 29 of 29
    assert verdict_fit.threshold(p[:n - 1], [1] * (n - 1), [True] * (n - 1)) == \
        verdict_fit.NEVER                                                       # too few
    right = [1] * 60 + [0] * 40          # the 60 most confident right, then all wrong
    t = verdict_fit.threshold(p, right, [True] * 100)
    k = sum(1 for x in p if x >= t)
    assert 60 <= k < 70 and verdict_fit.lower_bound(60, k) >= 0.9
    assert verdict_fit.lower_bound(60, k + 1) < 0.9
    # testing stops at the first failure, whatever follows: one wrong answer among the
    # first 29 fails the first test; one at 36 stops the sequence at 35
    assert verdict_fit.threshold(p, [0] + [1] * 99, [True] * 100) == verdict_fit.NEVER
    assert verdict_fit.threshold(p, [1] * 35 + [0] + [1] * 64, [True] * 100) == p[34]
    # rows whose checks failed never count; ties go together
    assert verdict_fit.threshold(p[:n], [1] * n, [False] + [True] * (n - 1)) == \
        verdict_fit.NEVER
    assert verdict_fit.threshold([0.5] * 40, [1] * 40, [True] * 40) == 0.5


def test_rows_needed_at_an_observed_precision():
    need = verdict_fit.rows_needed(57, 60)                  # 95% right
    assert need is not None and need > 60
    assert verdict_fit.lower_bound(int(0.95 * need), need) >= 0.9
    assert verdict_fit.lower_bound(int(0.95 * (need - 1)), need - 1) < 0.9
    assert verdict_fit.rows_needed(9, 10) is None           # 90%: no number will do
    assert verdict_fit.rows_needed(29, 29) == 29


def test_the_fit_recovers_a_known_model_and_scores_each_split_held_out():
    import numpy as np
    rng = np.random.default_rng(1)
    rows = []
    for i in range(600):
        f = {k: float(rng.normal()) for k in calibrate.FEATURES}
        z = 2.0 * f["line_evidence"] - 1.5 * f["missing_in_note"]
        rows.append({"split": f"s{i % 3}", "features": f, "passed": True,
                     "right": bool(rng.uniform() < 1 / (1 + math.exp(-z)))})
    m = verdict_fit.fit(rows)
    w = dict(zip(calibrate.FEATURES, m["weights"] / m["scale"]))
    assert w["line_evidence"] == pytest.approx(2.0, abs=0.5)
    assert w["missing_in_note"] == pytest.approx(-1.5, abs=0.5)
    assert abs(w["relevance"]) < 0.4
    held = verdict_fit.held_out(rows)
    assert len(held) == 600 and 0.0 < held.min() < held.max() < 1.0


@pytest.mark.slow
def test_the_shipped_builtin_calibration_is_what_the_fit_gives():
    rows = fit_verdict.collect(calibrate.tuning_splits())
    got, shipped = verdict_fit.calibration(rows, "builtin"), calibrate.CALIBRATIONS["builtin"]
    assert got["features"] == shipped["features"] == list(calibrate.FEATURES)
    assert got["threshold"] == shipped["threshold"] and got["rows"] == shipped["rows"]
    assert got["weights"] == pytest.approx(shipped["weights"], abs=2e-3)
    assert sorted(got["fitted_on"]) == sorted(["dev"] + [f"dev{i}" for i in range(2, 24)])


def rec(conf, right, verdict="ESCALATE", answerable=True):
    return {"confidence": conf, "answer_correct": right, "verdict": verdict,
            "answerable": answerable}


def test_selective_metrics_hand_worked():
    records = [rec(0.9, True, "SHIP"), rec(0.8, False, "SHIP"), rec(0.3, True),
               rec(None, True, "ABSTAIN", answerable=False), rec(0.7, False, "SHIP", False)]
    m = selective.metrics(records)
    assert (m["ship_precision"]["k"], m["ship_precision"]["n"]) == (1, 3)
    assert (m["coverage"]["k"], m["coverage"]["n"]) == (2, 3)     # SHIP among answerable
    assert m["wrong_ship"] == 2 and m["refusals_shipped"] == 1
    # most confident first: 0.9 right, 0.8 wrong, 0.7 wrong, 0.3 right; of 5 questions
    assert m["risk_coverage"] == [[0.2, 0.0], [0.4, 0.5], [0.6, 0.6667], [0.8, 0.5]]
    assert m["aurc"] == pytest.approx((0 + 0.5 + 0.6667 + 0.5) / 4, abs=1e-4)
    bins = {b["lo"]: b for b in m["reliability"]}
    assert [bins[x]["n"] for x in (0.0, 0.2, 0.4, 0.6, 0.8)] == [0, 1, 0, 1, 2]  # 0.9, 0.8
    assert bins[0.8]["right"]["k"] == 1 and bins[0.6]["right"]["k"] == 0
    assert bins[0.8]["mean_p"] == pytest.approx(0.85)


def test_escalate_marks_the_answer_and_names_the_line_to_check():
    shown, look = unsure.advise("ESCALATE", "What is Ana's phone?", "Phone: 0113 496 0721 [c1].",
                                None, [{"claim": "Phone: 0113 496 0721.",
                                        "citations": ["c1"]}], [PEOPLE, CLIENT])
    assert shown == "Not sure — check [c1]: Phone: 0113 496 0721 [c1]."
    assert look == [{"id": "c1", "path": "people/Ana Ferreira.md", "date": "2026-06-01",
                     "line": "Phone: 0113 496 0721."}]
    assert unsure.advise("SHIP", "q", "A [c1].", None, [], [PEOPLE]) == ("A [c1].", [])


def test_abstain_says_why_in_plain_words_and_lists_where_to_look():
    notes = [PEOPLE, cand(3, "people/Ana Ferreira.md", "Ana's office is in Lisbon."),
             CLIENT, cand(4, "misc/a.md", "x"), cand(5, "misc/b.md", "y")]
    shown, look = unsure.advise("ABSTAIN", "What is Ana's phone number?", generate.ABSTAIN,
                                "no passage reached 0.5 relevance; best was 0.41 from x",
                                [], notes)
    assert shown.startswith(generate.ABSTAIN + " None of the notes found is about this.")
    assert [x["path"] for x in look] == ["people/Ana Ferreira.md", "work/Aireside Housing.md",
                                         "misc/a.md"]           # distinct notes, three
    assert look[0]["line"] == "Phone: 0113 496 0721."          # its best line for the question
    assert "people/Ana Ferreira.md (2026-06-01)" in shown
    assert unsure.plain_reason("the writer found no answer in the kept passages") == \
        "the notes closest to the question do not state it"


@pytest.mark.slow
def test_a_failed_reply_skips_one_row_not_the_collection(monkeypatch, capsys):
    from verso import harness
    from verso import models
    real, calls = harness.ask, []

    def flaky(question, **kw):
        calls.append(question)
        if len(calls) == 1:
            raise models.BackendError("Ollama at x sent no chat reply within 120 s")
        return real(question, **kw)
    monkeypatch.setattr(harness, "ask", flaky)
    rows = fit_verdict.collect({"dev3": calibrate.tuning_splits()["dev3"]})
    assert len(calls) == 30 and 0 < len(rows) < 30
    assert "dev3 f01: skipped" in capsys.readouterr().err


def test_free_text_a_model_wrote_is_judged_by_a_calibration_of_its_own():
    assert calibrate.key("ollama", "choose") == "ollama"           # no identity: none
    assert calibrate.key("ollama", "choose", "bc50fc0044b9") == "ollama@bc50fc0044b9"
    assert calibrate.key("ollama", "generate", "bc50fc0044b9") == "ollama:generate@bc50fc0044b9"
    assert calibrate.threshold("ollama") is None
    assert calibrate.key("ollama", "ollama") == calibrate.key("ollama", "generate") == \
        "ollama:generate"
    assert calibrate.key("builtin", "builtin") == calibrate.key("builtin", "registry") == "builtin"
    assert calibrate.threshold("ollama:generate") is None        # never fitted: never SHIPs


def test_two_readers_agreeing_stands_for_the_feature_when_a_model_chose():
    notes = [{"id": "c1", "path": "r.md", "section": "", "date": "2026-05-01",
              "status": "latest", "order": 0, "text": "Day rate: 1550."}]
    row = {"claim": "Day rate: 1550", "sentence": "Day rate: 1550 [c1].",
           "citations": ["c1"], "ok": True, "support": 0.9}
    ver = types.SimpleNamespace(sentences=[row],
                                on_question=True, verdict="SHIP")
    own = calibrate.calibrate("What is my day rate?", notes, ver, [], "builtin")
    told = calibrate.calibrate("What is my day rate?", notes, ver, [], "builtin",
                               readers_agree=False)
    assert own["features"]["readers_agree"] == 1.0 and told["features"]["readers_agree"] == 0.0


def test_a_model_feature_the_server_could_not_give_counts_as_its_mean(monkeypatch):
    import numpy as np
    names = calibrate.feature_names("ollama")
    assert names[-1] == "model_p" and "model_p" not in calibrate.feature_names("builtin")
    rng = np.random.default_rng(3)
    rows = []
    for i in range(400):
        f = {k: float(rng.normal()) for k in calibrate.FEATURES}
        f["model_p"] = float(rng.uniform())
        z = 4.0 * (f["model_p"] - 0.5)
        rows.append({"split": f"s{i % 2}", "features": f, "passed": True,
                     "right": bool(rng.uniform() < 1 / (1 + math.exp(-z)))})
    for r in rows[::4]:
        del r["features"]["model_p"]         # a server without logprobs
    m = verdict_fit.fit(rows, names)
    w = dict(zip(names, m["weights"] / m["scale"]))
    assert w["model_p"] > 2.0 and abs(w["line_evidence"]) < 0.5
    cal = verdict_fit.calibration(rows, "ollama")
    assert cal["features"] == list(names)
    f = dict(rows[0]["features"])
    f.pop("model_p", None)
    with_mean = dict(f, model_p=cal["mean"][-1])
    monkeypatch.setitem(calibrate.CALIBRATIONS, "ollama", cal)
    assert calibrate.probability(f, "ollama") == pytest.approx(
        calibrate.probability(with_mean, "ollama"))
    assert calibrate.probability(dict(f, model_p=0.95), "ollama") > \
        calibrate.probability(dict(f, model_p=0.05), "ollama")

