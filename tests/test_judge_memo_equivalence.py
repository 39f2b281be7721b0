"""The builtin judge's memoised helpers against their plain definitions."""

import itertools

import models

WORDS = ["move", "moving", "moved", "mover", "mow", "pay", "paying", "payment", "rate",
         "rates", "rated", "day", "agree", "agreed", "changes", "changed", "chang", "get",
         "getting", "gotten", "plan", "planned", "planning", "contract", "contractor",
         "bank", "banking", "card", "ab", "abc", "abcd", "abcde", "x", "3:44:00", "550"]


def _reference_match(term, tset):
    if term in tset:
        return 1.0
    return models.PARTIAL_CREDIT if any(models._related(term, p) for p in tset) else 0.0


def test_match_agrees_with_a_scan_of_the_set():
    sets = [set(c) for n in (1, 2, 3) for c in itertools.combinations(WORDS[::2], n)]
    sets += [set(WORDS), set(WORDS[1::3]), frozenset(WORDS[::5]), WORDS[::4]]
    for term in WORDS + ["moves", "payer", "plans", "abcdef"]:
        for tset in sets:
            assert models._match(term, tset) == _reference_match(term, tset), (term, tset)


def test_evidence_terms_without_a_digit_search_only_kinds_that_need_none():
    for text in ["Physio: Hannah Reyes", "ten per cent off", "no value here at all",
                 "Goal time 3:44:00 on 4 May", "Rent is \u00a3850 a month", "50% discount"]:
        kinds = {k for k, rx in models.VALUE_RES.items() if rx.search(text)}
        words = {w for w, ks in models.ANSWER_TYPES.items() if kinds.intersection(ks)}
        own = {models.number_key(t) if t[0].isdigit() else t for t in models.terms(text)}
        assert models.evidence_terms(text) == own | words, text


def test_cached_results_are_fresh_copies():
    units = models.split_units("Day rate: \u00a3550. He is kind.")
    units.append("x")
    assert models.split_units("Day rate: \u00a3550. He is kind.") == ["Day rate: \u00a3550.",
                                                                     "He is kind."]
    ts = models.evidence_terms("Day rate: \u00a3550.")
    ts.add("zzz")
    assert "zzz" not in models.evidence_terms("Day rate: \u00a3550.")
