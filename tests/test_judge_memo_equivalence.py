"""The builtin reader's memoised helpers against their plain definitions."""

import itertools

from verso import textkit
from verso import line_scores

WORDS = ["move", "moving", "moved", "mover", "mow", "pay", "paying", "payment", "rate",
         "rates", "rated", "day", "agree", "agreed", "changes", "changed", "chang", "get",
         "getting", "gotten", "plan", "planned", "planning", "contract", "contractor",
         "bank", "banking", "card", "ab", "abc", "abcd", "abcde", "x", "3:44:00", "550"]


def _reference_match(term, tset):
    if term in tset:
        return 1.0
    return line_scores.PARTIAL_CREDIT if any(line_scores._related(term, p) for p in tset) else 0.0


def test_match_agrees_with_a_scan_of_the_set():
    sets = [set(c) for n in (1, 2, 3) for c in itertools.combinations(WORDS[::2], n)]
    sets += [set(WORDS), set(WORDS[1::3]), frozenset(WORDS[::5]), WORDS[::4]]
    for term in WORDS + ["moves", "payer", "plans", "abcdef"]:
        for tset in sets:
            assert line_scores.match(term, tset) == _reference_match(term, tset), (term, tset)


def test_scorer_memo_agrees_with_the_plain_share():
    ask = line_scores.analyse("What is the day rate for moving plans?")
    w = {t: 1.0 + i for i, t in enumerate(ask.terms)}
    sc = line_scores.Scorer(ask, w)
    for text in ["Day rate: £550", "planned move in May", "rates card", "nothing"]:
        ts = textkit.evidence_terms(text)
        assert sc.share(ts) == line_scores.term_share(w, ts) == sc.share(ts)


def test_cached_results_are_immutable():
    units = textkit.split_units("Day rate: \u00a3550. He is kind.")
    assert units == ("Day rate: \u00a3550.", "He is kind.") and isinstance(units, tuple)
    assert isinstance(textkit.evidence_terms("Day rate: \u00a3550."), frozenset)
