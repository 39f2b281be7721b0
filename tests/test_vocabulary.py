"""Each vocabulary (a kind of word people write) is defined once: what it must match,
what it must not, and that the rules built from it read it (route, followup, asof, the
builtin reader)."""

import re

import pytest

from verso import asof, followup, line_scores, route, textkit, timewords


def _matches(words, text: str) -> bool:
    return bool(re.search(rf"\b{textkit.one_of(words)}\b", text.lower()))


VOCABULARIES = {   # name: (words, written with one of them, written with none)
    "NOW_WORDS": (timewords.NOW_WORDS,
                  ["what do I pay now", "is it still on", "my rate at the moment",
                   "what are we doing these days", "do I go there any more",
                   "who is my physio right now", "the fee as of today"],
                  ["what did I pay in June", "how long did it take", "the newest quote",
                   "knowledge of the area", "the nowhere road", "the stillroom"]),
    "LATEST_WORDS": (timewords.LATEST_WORDS,
                     ["the current rota", "my latest parkrun", "the newest quote",
                      "the most recent invoice"],
                     ["the currency I was paid in", "a recent invoice", "what is it now"]),
    "EARLIER_WORDS": (timewords.EARLIER_WORDS,
                      ["and before that?", "what was it earlier", "the previous flat",
                       "formerly a bakery", "what was it prior to that"],
                      ["the earliest date", "what is it now", "the prior agreement"]),
    "CHANGE_WORDS": (timewords.CHANGE_WORDS,
                     ["has the rate changed", "how has it evolved over time",
                      "the original quote", "what I used to pay", "the history of the plan"],
                     ["the change fee", "what is the rate", "an unchanged plan",
                      "the historic centre"]),
    "PAST_WORDS": (timewords.PAST_WORDS,
                   ["what did I pay", "what was the rate", "where we went",
                    "what I used to pay"],
                   ["what do I pay", "what is the rate", "where we go", "what I use"]),
    "WEEKDAYS": (textkit.WEEKDAYS,
                 ["on Monday", "next tuesday", "every Sunday"],
                 ["on the 5th", "Mon 3 March", "a weekday", "someday"]),
    "WH_WORDS": (textkit.WH_WORDS,
                 ["what is it", "whose phone", "how much"],
                 ["somewhat", "however", "the whole lot"]),
    "AUX_WORDS": (textkit.AUX_WORDS,
                  ["is it on", "did I pay", "could we go"],
                  ["this island", "the dido", "canned beans"]),
    "REVISION_WORDS": (textkit.REVISION_WORDS,
                       ["the launch moved to 14 April", "rent goes up to £950",
                        "Thursdays instead of Tuesdays", "new start: Monday 5 October",
                        "the real number is 389 (was 312)", "the plan fell through"],
                       ["the removal van", "Newcastle upon Tyne", "the snowfall",
                        "a known issue", "the wasp nest", "a renewal date"]),
    "SUBJECT_PRONOUNS": (textkit.SUBJECT_PRONOUNS,
                         ["did I go", "we'd paid", "when she last ran"],
                         ["the tide", "weed", "him and them"]),
}


@pytest.mark.parametrize("name", sorted(VOCABULARIES))
def test_each_vocabulary_matches_its_words_and_no_others(name):
    words, written, not_written = VOCABULARIES[name]
    assert [t for t in written if not _matches(words, t)] == []
    assert [t for t in not_written if _matches(words, t)] == []


MONTH_RE = re.compile(rf"\b{textkit.MONTH_WORD}\b", re.I)


def test_month_names_are_whole_words():
    for text in ("in March", "in mar", "on 5 Sept", "by the end of June", "in december"):
        assert MONTH_RE.search(text), text
    for text in ("in marketing", "in a decent way", "on the junior team", "a novel",
                 "mayhem", "the separate bill"):
        assert not MONTH_RE.search(text), text


def test_one_of_takes_the_longest_phrase_first():
    assert re.sub(rf"\b{textkit.one_of(['before', 'before that'])}\b", "_",
                  "and before that?") == "and _?"


# the rules built from the vocabularies read them, each with its own words beside them
def test_route_reads_the_time_vocabularies():
    mode = lambda q: route.route(q)["time_mode"]
    assert mode("What is my rate presently?") == "present"           # NOW_WORDS
    assert mode("What was the most recent quote?") == "present"       # LATEST_WORDS
    assert mode("What is the final price?") == "present"              # route's own
    assert mode("How has the rate evolved?") == "history"             # CHANGE_WORDS
    assert mode("What was my rate formerly?") == "history"            # EARLIER_WORDS
    assert mode("What is the current fee, has it changed?") == "history"  # change first
    assert mode("What is the current change fee?") == "present"   # "change" alone: weak
    assert mode("What did we decide about the van?") == "any"         # PAST_WORDS
    assert mode("What is the budget in marketing?") == "present"      # no month in it
    assert mode("What was agreed in Sept?") == "as_of"


def test_followup_reads_the_time_vocabularies():
    prev = {"question": "What is the rent for the Lisbon flat?", "answer": "",
            "citations": [{"date": "2026-10-05"}]}
    assert followup.when("and nowadays?", prev) == {"mode": "present"}
    assert followup.when("and formerly?", prev) == {"as_of": "2026-10-04"}
    assert followup.when("and the previous flat?", prev) == {}   # "previous" alone: another time
    assert followup.when("what did we do before the move?", prev) == {}
    assert followup.subject("What is the most recent rent?") == "the rent"
    assert followup.subject("What is the budget in marketing?") == "the budget in marketing"
    assert "Sunday" not in followup._names("Is the stall on Sunday with Maren?")


def test_asof_and_the_reader_read_them():
    assert asof.PAST_RE.search("what did it cost") and asof.PAST_RE.search("what i used to pay")
    assert asof.PAST_RE.search("what we'd paid") and not asof.PAST_RE.search("what is it")
    assert asof.ordinal("when did we last go") == "last"
    ask = line_scores.analyse("What is my rate presently, and how has it changed over time?")
    assert "presently" not in ask.terms and "time" not in ask.terms and "rate" in ask.terms
    assert line_scores.question_parts("How much is it and who pays?") == ["How much is it",
                                                                          "who pays"]
