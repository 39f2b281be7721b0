"""route: rules on a list of phrasings."""

import pytest

from verso.route import route

CASES = [  # message, intent, time mode
    ("What is Maren's current day rate?", "notes", "present"),
    ("What is Maren's day rate?", "notes", "present"),            # default: present
    ("What's the Kittiwake retainer now?", "notes", "present"),
    ("Is Arjun still working on QubitML?", "notes", "present"),
    ("Where does Ana live these days?", "notes", "present"),
    ("How much is the rent at the moment?", "notes", "present"),
    ("Who is the contact at Halden and Rowe?", "notes", "present"),
    ("What is the latest marathon goal?", "notes", "present"),
    ("When's my flight to Lisbon?", "notes", "present"),
    ("How has Maren's day rate changed over time?", "notes", "history"),
    ("What did the retainer used to be?", "notes", "history"),
    ("What was the goal originally?", "notes", "history"),
    ("Did the rate go from 500 to 550?", "notes", "history"),
    ("Show the history of the move plan", "notes", "history"),
    ("What was the rate before October?", "notes", "as_of"),      # in force on 30 Sep
    ("How has the box price evolved?", "notes", "history"),       # general cue words
    ("What was the hen count previously?", "notes", "history"),
    ("How did my long runs build up over the block?", "notes", "any"),  # no time cue
    ("How did the roof quote change from the first to the final one?", "notes", "history"),
    ("Has the rewire price moved since Dom quoted?", "notes", "history"),  # verb of change
    ("How many times has the fitting date shifted?", "notes", "history"),
    ("Where did I move to after Leeds?", "notes", "any"),         # a person moving
    ("how the e-bike service price has moved in 2026", "notes", "history"),
    ("I have moved the bike to the shed", "notes", "any"),
    ("Track the cellar readings over the year", "notes", "history"),
    ("What did we decide on the Halden call?", "notes", "any"),   # event lookup
    ("When was the Lisbon race?", "notes", "any"),
    ("What was the budget in April 2026?", "notes", "as_of"),
    ("What was the rate as of 2026-05-01?", "notes", "as_of"),
    ("What is the rate as of today?", "notes", "present"),
    ("Summarise the kit list", "notes", "any"),
    ("hi", "small_talk", "any"),
    ("Thanks so much!", "small_talk", "any"),
    ("how are you?", "small_talk", "any"),
    ("Hello Verso, good morning", "small_talk", "any"),
    ("thanks! what is Maren's day rate?", "notes", "present"),
    ("What's the weather in Lisbon today?", "live_data", "present"),
    ("What is the Apple stock price?", "live_data", "present"),
    ("What's the GBP to EUR exchange rate today?", "live_data", "present"),
    ("Any news headlines?", "live_data", "any"),
    ("What exchange rate did we assume in the budget?", "notes", "any"),
]


@pytest.mark.parametrize("message,intent,mode", CASES)
def test_rules(message, intent, mode):
    r = route(message)
    assert (r["intent"], r["time_mode"]) == (intent, mode)
    assert r["needs_retrieval"] == (intent == "notes")
    assert 0.0 <= r["confidence"] <= 1.0 and 0.0 <= r["time_confidence"] <= 1.0


def test_default_present_is_less_confident_than_explicit():
    assert (route("What is Maren's day rate?")["time_confidence"]
            < route("What is Maren's current day rate?")["time_confidence"])


def test_why_names_the_rule_and_the_cue_it_matched():
    assert route("What is Maren's current day rate?")["why"] == "present words 'current'"
    assert route("Has the rate changed?")["why"] == "change words 'has the rate changed'"
    assert route("What is Maren's day rate?")["why"] == "a plain question (default) 'what'"
    assert route("Summarise the kit list")["why"] == "no time cue"
