"""Time words resolved against the day they were written (timewords.py): every rule on a
sentence written for it, with a month boundary, a year boundary, a leap day, a weekday
on the note's own weekday, and an undated note."""

import pytest

from verso import timewords

CASES = [   # (written on, text, what the expression must be followed by)
    ("2026-05-08", "I finally went to the climbing gym yesterday.", "yesterday [2026-05-07]"),
    ("2026-03-01", "Yesterday the boiler died.", "Yesterday [2026-02-28]"),        # month
    ("2028-03-01", "Yesterday was the leap day.", "Yesterday [2028-02-29]"),       # leap day
    ("2026-01-02", "Last week was quiet.", "Last week [2025-12-22..2025-12-28]"),  # year
    ("2026-01-02", "Last year I ran my first half marathon.", "Last year [2025]"),
    ("2026-05-08", "Tomorrow the plumber comes.", "Tomorrow [2026-05-09]"),
    ("2026-05-08", "today it rained", "today [2026-05-08]"),
    ("2026-05-08", "the day before yesterday", "the day before yesterday [2026-05-06]"),
    ("2026-05-08", "Three days ago the deposit came back.", "Three days ago [2026-05-05]"),
    ("2026-05-08", "We moved the launch to two weeks from now.",
     "two weeks from now [2026-05-22]"),
    ("2026-05-08", "The bike is back in 10 days.", "in 10 days [2026-05-18]"),
    ("2026-05-08", "a fortnight ago we met", "a fortnight ago [2026-04-24]"),
    ("2026-01-15", "3 months ago I started.", "3 months ago [2025-10]"),
    ("2026-05-08", "Next week is half term.", "Next week [2026-05-11..2026-05-17]"),
    ("2026-05-08", "We stay in this weekend.", "this weekend [2026-05-09..2026-05-10]"),
    ("2026-05-08", "Two weekends ago we sailed.", "Two weekends ago [2026-04-25..2026-04-26]"),
    ("2026-05-08", "The week before was busy.", "The week before [2026-04-27..2026-05-03]"),
    ("2026-01-15", "Last month was expensive.", "Last month [2025-12]"),
    ("2026-05-08", "last Friday I swam", "last Friday [2026-05-01]"),            # a Friday
    ("2026-05-08", "On Friday I swam in the sea.", "On Friday [2026-05-08]"),    # its own day
    ("2026-05-06", "On Friday I swam in the sea.", "On Friday [2026-05-01]"),    # past
    ("2026-05-06", "The plumber will come on Friday.", "on Friday [2026-05-08]"),  # future
    ("2026-05-06", "No show again; rebooked for Friday.", "for Friday [2026-05-08]"),
    ("2026-05-08", "I did his shift on Friday.", "on Friday [2026-05-08]"),       # past:
    ("2026-05-08", "I'm now doing his shift on Friday.", "on Friday [2026-05-15]"),
    ("2026-05-08", "I will do his shift on Friday.", "on Friday [2026-05-15]"),   # its day,
    ("2026-05-08", "No show; rebooked for Friday.", "for Friday [2026-05-15]"),   # future:
    ("2026-05-08", "The form is due by Friday.", "by Friday [2026-05-08]"),       # the next
    ("2026-05-11", "Fixed at last! He came on Friday, not on the care plan.",
     "on Friday [2026-05-08]"),            # "plan" the noun says nothing of the future
    ("2026-05-08", "next Tuesday the plumber comes", "next Tuesday [2026-05-12]"),
    ("2026-05-08", "Since 1 Sept the rent is higher.", "Since 1 Sept [2025-09-01]"),
    ("2026-05-08", "It is fixed until the end of March.", "until the end of March [2027-03-31]"),
    ("2026-05-08", "We met on 14 March.", "on 14 March [2026-03-14]"),
    ("2026-11-20", "The flight is booked for 3 January.", "3 January [2027-01-03]"),   # year
    ("2026-05-08", "Done by June 3rd.", "by June 3rd [2026-06-03]"),
    ("2026-02-20", "We moved the launch to 14 April.", "14 April [2026-04-14]"),   # nearest
    ("2028-03-05", "Born on 29 February.", "29 February [2028-02-29]"),
    ("2026-03-01", "Lisbon Marathon, Sunday 11 October.", "Sunday 11 October [2026-10-11]"),
]


@pytest.mark.parametrize("written,text,expected", CASES)
def test_each_rule_resolves_against_the_day_written(written, text, expected):
    assert expected in timewords.resolve(text, written)


def test_the_words_stay_as_written_and_nothing_else_changes():
    text = "Went to the dentist yesterday and paid £40."
    out = timewords.resolve(text, "2026-05-08")
    assert out == "Went to the dentist yesterday [2026-05-07] and paid £40."


@pytest.mark.parametrize("text", [
    "Yesterday was long.",                      # an undated note: nothing resolved
])
def test_an_undated_note_is_not_resolved(text):
    assert timewords.resolve(text, None) == text


@pytest.mark.parametrize("text", [
    "I think 2 may be enough.",                 # the verb, not the month
    "On 14 March 2026 we met.",                 # a date with its year says it already
    "yesterday [2026-05-07] again",             # already resolved
    "The meeting is at 3 pm in room 14.",
    "Born on 29 February.",                     # no year near 2026 has one
    "58 km, the most I have ever run in a week.",   # within a week, not a week from now
])
def test_what_is_no_time_expression_or_says_it_already_is_left_alone(text):
    assert timewords.resolve(text, "2026-05-08") == text


def test_ingest_resolves_each_chunk_against_its_entry_or_note_and_reads_again_on_a_rule_change(
        tmp_path, monkeypatch):
    from verso import ingest
    from verso import store_load
    from vaults import write
    v = tmp_path / "notes"
    write(v, "journal/2026-05-08.md", "# Friday\nWent to the dentist yesterday.\n")
    write(v, "training log.md", "# Log\n\n## 2026-03-01\nYesterday I ran 10 km, the legs "
          "were heavy and the wind was strong along the canal towpath all the way back.\n")
    write(v, "loose.md", "# Loose\nYesterday I lost my keys.\n")        # dated by mtime
    ingest.build_index(v, tmp_path / "idx")
    text = {c["path"]: c["text"] for c in store_load.load_index(tmp_path / "idx").chunks}
    assert "yesterday [2026-05-07]" in text["journal/2026-05-08.md"]
    assert "Yesterday [2026-02-28]" in text["training log.md"]        # the entry's date
    assert "[" not in text["loose.md"]
    monkeypatch.setattr(timewords, "RULES", timewords.RULES + 1)
    again = ingest.build_index(v, tmp_path / "idx")
    assert again["files_read"] == 3                                   # every note read again


def test_mode_as_of_with_a_date_is_shown_as_of(tmp_path, capsys):
    from verso import harness
    from vaults import write
    v = tmp_path / "notes"
    write(v, "work/pay 2026-05.md", "# Pay\nThe hourly rate is £21.\n")
    args = ["What is the hourly rate?", "--vault", str(v), "--index", str(tmp_path / "i"),
            "--backend", "builtin", "--json"]
    assert harness.main(args + ["--mode", "as_of", "--as-of", "2026-06-30"]) == 0
    import json
    a = json.loads(capsys.readouterr().out)
    assert (a["time_mode"], a["as_of"]) == ("as_of", "2026-06-30")     # one note: still as_of
    assert harness.main(args + ["--mode", "as_of"]) == 2
    assert "as_of needs a date" in capsys.readouterr().err
