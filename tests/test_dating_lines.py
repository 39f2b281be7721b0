"""dating: a day written in a note's first lines dates it (issue 44, item 1). Every vault
here has one mtime for all its files, as after a clone, a sync or a restore: a written
date has to win."""

import os
import sys
from pathlib import Path

import pytest

from verso import dating
from verso import harness
from verso import ingest
from verso import store_load
from vaults import write

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import dating_check  # noqa: E402

CLONED = 1_796_083_200     # 2026-12-01 00:00 UTC: every file's mtime, as after a clone

# A vault of my own: a flat move (a budget in three versions, dated only in their first
# lines) and a lab notebook, with notes that carry a date in a sentence or as a log.
OWN = {
    "flat/flat budget.md": "# Flat budget\n\n28 Aug 2026 — rough first pass\n\n"
                           "- Rent: £1,150 a month\n- Deposit: £1,327\n",
    "flat/flat budget v2.md": "# Flat budget\n19 Sept 2026 — after the viewing\n\n"
                              "- Rent: £1,210 a month\n- Deposit: £1,396\n",
    "flat/flat budget (Oct 2026).md": "# Flat budget\n\nThu 8 Oct 2026: signed\n\n"
                                      "- Rent: £1,195 a month\n- Deposit: £1,379\n",
    "flat/viewings.md": "Viewings\n\nFri 2 Oct 2026\nTwo flats on Marsh Lane, both damp.\n",
    "flat/movers.md": "Movers — Oct 8, 2026\nThree quotes; the cheapest is £640.\n",
    "lab/centrifuge.md": "# Centrifuge booking\n**2026-10-12** booked for the week\n"
                         "Rotor JA-25.50, 4 °C, 30 min at 15,000 g.\n",
    "lab/reading group.md": "# Reading group\n> Monday, 5 October 2026\n"
                            "We read the cryo-EM review; next time the AlphaFold paper.\n",
    "lab/conference.md": "# Conference\nThe meeting in Ghent, 17–20 Nov 2026, takes "
                         "posters until 1 Oct 2026.\n",
    "lab/gel log.md": "# Gel log\n2026-09-03 first gel, smeared\n2026-09-10 second gel, "
                      "clean bands\n",
    "lab/primers.md": "# Primers\n- 2026-09-01 ordered F1/R1\n- stock at 100 µM\n",
    "lab/protocol.md": "---\ndate: 2026-06-01\n---\n# Protocol\n3 Sept 2026 — buffer changed\n",
    "lab/supervisor.md": "# Supervisor meetings\nUpdated: 1 Oct 2026\n"
                         "14 Sept 2026 — chapter plan agreed\n",
}


def make(vault: Path, notes: dict, mtime=CLONED) -> Path:
    for rel, text in notes.items():
        write(vault, rel, text, mtime=mtime)
    return vault


def files_of(vault: Path, tmp_path: Path) -> dict:
    ingest.build_index(vault, tmp_path / "idx")
    return {f["path"]: f for f in store_load.load_index(tmp_path / "idx").files}


def dated(files: dict, path: str) -> tuple:
    return files[path]["date"], files[path]["date_source"]


@pytest.mark.parametrize("body, day", [
    ("# Flat budget\n28 Aug 2026 — rough first pass\nRent £1,150", "2026-08-28"),
    ("# Flat budget\n\n19 Sept 2026 — after the viewing", "2026-09-19"),
    ("# Flat budget\nFri 2 Oct 2026\nRent £1,195", "2026-10-02"),
    ("# Flat budget\nOct 8, 2026: signed", "2026-10-08"),
    ("# Flat budget\n2026-10-08\nRent £1,195", "2026-10-08"),
    ("# Flat budget\n_Thursday, 8 October 2026_", "2026-10-08"),
    ("Flat budget — 8 Oct 2026\nRent £1,195", "2026-10-08"),       # ends the title line
    ("Flat budget (8 Oct 2026)\nRent £1,195", "2026-10-08"),
    ("# Flat budget\nRent £1,195\nDeposit £1,379\n8 Oct 2026 — signed", "2026-10-08"),
])
def test_a_day_opening_a_first_line_dates_the_note(body, day):
    assert dating.date_of("flat budget", {}, body, CLONED) == (day, "text")


@pytest.mark.parametrize("body", [
    "# Conference\nThe meeting in Ghent, 17–20 Nov 2026, takes posters.",   # in a sentence
    "2026-09-03 first gel\n2026-09-10 second gel",                    # a log with no title
    "- [ ] renew passport (exp May 2027)\n- [x] ring the bank",       # a list, no title
    "| date | kg |\n|---|---|\n| 2026-01-02 | 4.1 |",                   # a table, no title
    "# Gel log\n2026-09-03 first gel\n2026-09-10 second gel",        # a log of dated lines
    "# Primers\n- 2026-09-01 ordered F1/R1",                          # a list item
    "# Hive log\n## 2026-03-28\nfirst inspection",                    # a dated section
    "## 2026-03-28\nfirst inspection",
    "# Budget\nOct 2026 plan",                                        # a month, no day
    "# Budget\n31 Feb 2026 — impossible",
    "# Budget\none\ntwo\nthree\nfour\n8 Oct 2026 — too far down",
    "# Budget\n08/10/2026 — digits, read only with a date_order",
])
def test_a_date_in_a_sentence_a_log_or_further_down_does_not(body):
    assert dating.date_of("notes", {}, body, CLONED)[1] == "mtime"


@pytest.mark.parametrize("body, day", [
    ("Virgin Media letter 2 Feb 2026\nyour price will rise", "2026-02-02"),  # a pasted letter
    ("copied from the team whatsapp 24/6/26\nfees going to £12", "2026-06-24"),
    ("Kirkstall Nomads 2026 (updated after the AGM, 22/02/26)\n- fee £10", "2026-02-22"),
    ("pasted bit from the engagement letter (arrived 1 Dec 2026)\nfee £420", "2026-12-01"),
    ("contacts (export Mar 2025)\nBen 07700 900 101", "2025-03-01"),        # a month: its 1st
    ("The meeting in Ghent, 17–20 Nov 2026\nposters", "2026-11-20"),  # the day with its month
    ("[28/05/2026, 21:14] Gordon: Evening all\n[28/05/2026, 21:15] Gordon: nets", "2026-05-28"),
])
def test_a_date_the_title_line_writes_dates_a_note_no_day_opens(body, day):
    """A pasted letter, a copied message, an export or a page's "updated" title says when
    it was written the way people write it: anywhere in the title line, a month or a day.
    A day opening a first line still wins ("text"), and so does a header or the name."""
    assert dating.date_of("notes", {}, body, CLONED) == (day, "title")
    assert dating.date_of("notes", {}, "Rates (Mar 2025)\n3 Apr 2025 — checked\nx",
                          CLONED) == ("2025-04-03", "text")
    assert dating.date_of("notes", {}, "# Rates\nUpdated: 9 May 2025\nMar 2025 list",
                          CLONED) == ("2025-05-09", "header")


def test_digit_dates_in_first_lines_follow_the_date_order():
    body = "# Flat budget\n08/10/2026 — signed"
    assert dating.date_of("b", {}, body, CLONED, "dmy") == ("2026-10-08", "text")
    assert dating.date_of("b", {}, body, CLONED, "mdy") == ("2026-08-10", "text")


def test_explicit_dates_keep_their_precedence_and_a_month_is_refined():
    text = "# Budget\n8 Oct 2026 — signed"
    assert dating.date_of("budget 2026-10-03", {}, text, CLONED) == ("2026-10-03", "filename")
    assert dating.date_of("budget", {"date": "2026-06-01"}, text, CLONED) == (
        "2026-06-01", "frontmatter")
    assert dating.date_of("budget", {}, "Updated: 1 Oct 2026\n" + text, CLONED) == (
        "2026-10-01", "header")
    assert dating.date_of("budget (Oct 2026)", {}, text, CLONED) == (
        "2026-10-08", "filename+text")
    assert dating.date_of("budget (Nov 2026)", {}, text, CLONED) == (
        "2026-11-01", "filename")          # a day outside the month named does not count


def test_own_vault_is_dated_by_what_its_notes_write(tmp_path):
    files = files_of(make(tmp_path / "v", OWN), tmp_path)
    assert dated(files, "flat/flat budget.md") == ("2026-08-28", "text")
    assert dated(files, "flat/flat budget v2.md") == ("2026-09-19", "text")
    assert dated(files, "flat/flat budget (Oct 2026).md") == ("2026-10-08", "filename+text")
    assert dated(files, "flat/viewings.md") == ("2026-10-02", "text")
    assert dated(files, "flat/movers.md") == ("2026-10-08", "text")
    assert dated(files, "lab/centrifuge.md") == ("2026-10-12", "text")
    assert dated(files, "lab/reading group.md") == ("2026-10-05", "text")
    assert dated(files, "lab/protocol.md") == ("2026-06-01", "frontmatter")
    assert dated(files, "lab/supervisor.md") == ("2026-10-01", "header")
    for path in ("lab/conference.md", "lab/gel log.md", "lab/primers.md"):
        assert files[path]["date_source"] == "mtime", path
    budgets = sorted((f["date"], p) for p, f in files.items() if p.startswith("flat/flat"))
    assert [p for _, p in budgets] == ["flat/flat budget.md", "flat/flat budget v2.md",
                                       "flat/flat budget (Oct 2026).md"]
    assert [p for p, f in files.items() if f["is_latest"] and "budget" in p] == [
        "flat/flat budget (Oct 2026).md"]


def test_the_current_budget_and_its_history_follow_the_written_dates(tmp_path):
    make(tmp_path / "v", OWN)
    ingest.build_index(tmp_path / "v", tmp_path / "idx")
    now = harness.ask("What is the rent in the flat budget?", index=tmp_path / "idx",
                      backend="builtin")
    assert "1,195" in now.answer and "1,210" not in now.answer
    history = harness.ask("How did the rent in the flat budget change?",
                          index=tmp_path / "idx", backend="builtin")
    said = history.answer           # each version dated, oldest to newest
    assert 0 <= said.find("2026-08-28") < said.find("£1,150") < said.find("2026-09-19") \
        < said.find("£1,210") < said.find("2026-10-08") < said.find("£1,195")


def test_dating_check_counts_no_note_with_a_written_day_left_to_mtime(tmp_path):
    row = dating_check.check(make(tmp_path / "v", OWN))
    assert row["dated"]["text"] == 6 and row["refined"] == 1
    assert row["carry"] == 9 and row["left"] == [] and row["logs"] == 1      # the gel log
    assert os.path.getmtime(tmp_path / "v" / "flat/movers.md") == CLONED
