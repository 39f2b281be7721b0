"""Each test that asserts a verdict fails when the stage it is about is broken (issue 45,
item 5). A verdict alone cannot show this where the calibration escalates everything
(the builtin's threshold is 1.01; a model without a calibration has none), so each such
test pins its stage: the check that marks the sentence, the calibration it was judged
by. Here each stage is broken once, by monkeypatch, and the test about it must fail."""

import pytest

from verso import calibrate
from verso import rerank
from verso import verify

import test_asof
import test_calibrate
import test_calibrate_model
import test_evidence
import test_harness
import test_ollama
import test_reliability
import test_verify

# the fixtures the tests below take, from the modules that define them
hostile, obedient_calibrated = test_reliability.hostile, test_reliability.obedient_calibrated
small, ollama = test_reliability.small, test_reliability.ollama
loaded, launch, shop, fake = (test_harness.loaded, test_evidence.launch, test_asof.shop,
                              test_ollama.fake)


def fails(test, *args):
    with pytest.raises(AssertionError):
        test(*args)


def accept_everything(monkeypatch):
    """verify broken: every sentence passes the code checks and the judge."""
    rules = verify._check_rules
    monkeypatch.setattr(verify, "_check_rules", lambda *a: dict(rules(*a), reasons=[]))
    monkeypatch.setattr(verify, "_off_question", lambda *a: None)
    monkeypatch.setattr(verify, "_judge_support", lambda *a: None)


def every_model_calibrated(monkeypatch):
    """calibrate broken: a model nobody measured is judged by the builtin's calibration."""
    real = calibrate.lookup
    monkeypatch.setattr(calibrate, "lookup", lambda k: real(k) or real("builtin"))


@pytest.mark.parametrize("cite", ["rent note", "missing", "none"])
@pytest.mark.parametrize("broken", ["instruction check", "every check"])
def test_an_obeyed_injection_fails_when_verify_accepts_it(hostile, obedient_calibrated,
                                                          monkeypatch, cite, broken):
    if broken == "instruction check":
        monkeypatch.setattr(verify, "_injected", lambda *a: [])
    else:
        accept_everything(monkeypatch)
    fails(test_reliability.test_an_obeyed_injection_is_escalated, hostile, cite, None)


def test_a_citation_of_no_note_passes_when_verify_accepts_everything(small, ollama,
                                                                     monkeypatch):
    accept_everything(monkeypatch)
    fails(test_reliability.test_a_reply_citing_notes_that_do_not_exist_is_escalated,
          small, ollama)


@pytest.fixture
def no_version_check(monkeypatch):
    """verify's version check broken: an older version cited in present mode passes."""
    monkeypatch.setattr(verify, "_stale", lambda *a: [])


def test_a_stale_citation_passes_when_the_version_check_is_off(no_version_check):
    fails(test_verify.test_an_older_log_entry_escalates_only_when_a_later_entry_answers)
    fails(test_verify.test_a_sentence_citing_the_newest_version_beside_the_older_one_passes)


def test_a_corrected_statement_passes_when_the_version_check_is_off(no_version_check,
                                                                    launch, tmp_path):
    fails(test_evidence.test_verify_does_not_pass_a_sentence_citing_only_a_corrected_statement,
          launch, tmp_path)


def test_a_version_superseded_before_the_date_passes_when_the_check_is_off(
        no_version_check, shop):
    fails(test_asof.test_citing_a_version_superseded_before_the_date_escalates, shop)


def test_the_gate_abstains_only_while_it_stands(loaded, monkeypatch):
    monkeypatch.setattr(rerank, "gate", lambda *a, **k: None)
    fails(test_harness.test_unanswerable_abstains_at_the_gate_without_calling_the_writer,
          loaded)


def test_an_answer_citing_no_line_ships_when_features_are_always_found(monkeypatch):
    monkeypatch.setattr(calibrate, "features",
                        lambda *a: {n: 0.0 for n in calibrate.FEATURES})
    fails(test_calibrate.test_an_answer_citing_no_line_has_no_features_and_escalates,
          monkeypatch)


@pytest.mark.parametrize("decide", [
    lambda passed, p, backend: "ESCALATE",                       # as at threshold 1.01
    lambda passed, p, backend: "SHIP" if passed and p is not None else "ESCALATE",
])
def test_the_threshold_decides(monkeypatch, decide):
    monkeypatch.setattr(calibrate, "decide", decide)
    fails(test_calibrate.test_the_verdict_ships_only_checked_answers_above_the_threshold,
          monkeypatch)


def test_an_uncalibrated_model_escalates_for_want_of_its_calibration(tmp_path, fake,
                                                                     capsys, monkeypatch):
    every_model_calibrated(monkeypatch)
    fails(test_calibrate_model.
          test_until_a_model_is_calibrated_both_readings_are_shown_then_its_policy_holds,
          tmp_path, monkeypatch)
    (tmp_path / "eval").mkdir()
    fails(test_ollama.test_evaluate_runs_end_to_end_on_the_ollama_backend,
          fake, tmp_path / "eval", monkeypatch, capsys)
