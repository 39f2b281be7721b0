"""Notes as the unit of evidence (passages.py), each kind of loss it exists for on notes
written for it: the right note with the wrong section, one note taking every slot, a fact
only an older version holds, a budget that does not scale, a change question's versions.
Also the plain baseline (plain_bm25.py) against a hand-worked BM25, and the budget table."""

import json
import math

import pytest

from verso import budget_eval
from verso import calibrate
from verso import evidence_fit
from verso import harness
from verso import measures
from verso import passages
from verso import plain_bm25
from verso import textkit
from vaults import write

FLAT = lambda pieces: [0.0] * len(pieces)     # noqa: E731  (a reader that reads none)
FILLER = " ".join(f"Line {i} of the minutes covered the usual round of updates." for i in range(14))


def _ask(vault, tmp_path, question, **kw):
    idx, be = harness.load(tmp_path / "idx", vault, "builtin")
    return harness.ask(question, index=idx, backend=be, write=False, **kw)


@pytest.fixture
def boat(tmp_path):
    """A long manual whose asked value sits under its own short heading, a meeting note
    that reverses a plan, versions of a mooring note, and filler notes."""
    v = tmp_path / "notes"
    write(v, "boat/manual.md", "# Kestrel manual\n## Engine\n" + FILLER + "\n## Electrics\n"
          + FILLER + "\n## Fuel filter\nPart number: FF-2291, change every 250 hours.\n"
          "## Sails\n" + FILLER + "\n")
    write(v, "boat/haul-out plan.md", "---\ndate: 2026-03-01\n---\n# Haul-out plan\n"
          "## Where\nHaul out at Penrith Yard in October.\n## Budget\n" + FILLER + "\n"
          "## Jobs\n" + FILLER + "\n## Crew\n" + FILLER + "\n")
    write(v, "meetings/2026-05-02 club meeting.md", "---\ndate: 2026-05-02\n---\n"
          "# Club meeting\nAgreed: the haul-out moves to Lowther Marina, not Penrith Yard, "
          "because the yard's crane is out of action.\n")
    write(v, "boat/mooring 2025-04.md", "---\ndate: 2025-04-01\n---\n# Mooring\n"
          "Mooring fee: £900 a year.\nWinter berth: pontoon C, berth 14.\n")
    write(v, "boat/mooring 2026-04.md", "---\ndate: 2026-04-01\n---\n# Mooring\n"
          "Mooring fee: £980 a year, paid by standing order.\n")
    for i in range(6):
        write(v, f"misc/note {i}.md", f"# Note {i}\n" + FILLER + "\n")
    return v


def test_the_section_that_answers_is_handed_on_from_a_long_note(boat, tmp_path):
    a = _ask(boat, tmp_path, "What is the fuel filter part number?", budget=150)
    assert a.sources[0]["path"] == "boat/manual.md"
    assert "FF-2291" in a.sources[0]["text"]


def test_one_note_takes_one_passage_and_the_reversing_note_arrives(boat, tmp_path):
    a = _ask(boat, tmp_path, "Where is the haul-out this year?", budget=400)
    paths = [s["path"] for s in a.sources]
    assert len(paths) == len(set(paths))
    assert "meetings/2026-05-02 club meeting.md" in paths
    plan = next(s for s in a.sources if s["path"] == "boat/haul-out plan.md")
    assert plan["text"].count(passages.HEADING_MARK) <= 3     # its sections, one passage


def test_a_fact_only_an_older_version_holds_is_handed_on_labelled(boat, tmp_path):
    a = _ask(boat, tmp_path, "Which winter berth did the boat have?", budget=300)
    old = [s for s in a.sources if s["path"] == "boat/mooring 2025-04.md"]
    assert old and "berth 14" in old[0]["text"]
    assert old[0]["superseded_by"] == "boat/mooring 2026-04.md" and not old[0]["is_latest"]


def test_as_of_a_season_the_later_version_is_handed_on_labelled_not_removed(boat, tmp_path):
    """"Over winter" is the last winter the notes reach (December 2025 to February 2026):
    the version in force then is current, and the one written after it stays in the
    evidence, labelled, not in force (400 words: every note of the pool fits, so only a
    version rule could leave it out; it names neither asked word)."""
    a = _ask(boat, tmp_path, "Which berth was the boat in over winter?", budget=400)
    assert a.as_of == "2026-02-28"
    by = {s["path"]: s for s in a.sources}
    assert by["boat/mooring 2025-04.md"]["is_latest"]
    later = by["boat/mooring 2026-04.md"]
    assert not later["is_latest"] and "not yet written on 2026-02-28" in later["why"]
    assert "boat/mooring 2026-04.md" not in {s["path"] for s in _ask(
        boat, tmp_path, "Which berth was the boat in over winter?").sources}   # no budget


def test_the_current_version_comes_before_an_older_one(boat, tmp_path):
    a = _ask(boat, tmp_path, "What is the mooring fee now?", budget=60)
    assert a.sources[0]["path"] == "boat/mooring 2026-04.md" and a.sources[0]["is_latest"]


def test_a_change_question_gets_every_version_oldest_first(boat, tmp_path):
    a = _ask(boat, tmp_path, "How has the mooring fee changed over the years?", budget=300)
    assert a.time_mode == "history"
    got = [s["path"] for s in a.sources if s["path"].startswith("boat/mooring")]
    assert got == ["boat/mooring 2025-04.md", "boat/mooring 2026-04.md"]
    assert "£900" in a.sources[0]["text"] and "£980" in a.sources[1]["text"]


def test_a_change_questions_long_versions_share_a_small_budget(tmp_path):
    """Three long versions of a price list and 200 words: each version is cut to its
    share of the words (the lines naming what is asked), so every version's price is
    handed on, oldest first, not two whole versions and no third."""
    v = tmp_path / "notes"
    filler = "\n".join(f"- item {i}: see the workshop card for the details." for i in range(12))
    for day, price in (("2025-09-01", "£75"), ("2026-01-05", "£80"), ("2026-07-01", "£85")):
        write(v, f"rates/price list {day[:7]}.md", f"---\ndate: {day}\n---\n# Price list\n"
              f"{filler}\nStandard tuning: {price} an hour.\n{filler}\n")
    a = _ask(v, tmp_path, "How has my standard tuning price changed?", budget=200)
    assert a.time_mode == "history"
    lists = [s for s in a.sources if s["path"].startswith("rates/")]
    assert [s["path"] for s in lists] == [f"rates/price list {m}.md"
                                          for m in ("2025-09", "2026-01", "2026-07")]
    assert all(p in s["text"] for s, p in zip(lists, ("£75", "£80", "£85")))
    assert sum(len(s["text"].split()) for s in a.sources) <= 200


def test_a_change_question_gets_a_version_written_in_other_words(tmp_path):
    """The first draft of a letter says "complete by 30 April", the final one "completion
    date": a version naming none of the asked words is still a version of the document
    the question is answered from, so a change question gets it, dated, first."""
    v = tmp_path / "notes"
    write(v, "house/offer letter v1.md", "---\ndate: 2026-02-10\n---\n# Offer\n"
          "Looking to complete by 30 April, flexible.\n")
    write(v, "house/offer letter final.md", "---\ndate: 2026-02-17\n---\n# Offer\n"
          "Completion date: 15 May, agreed with the seller.\n")
    for i in range(4):          # other notes naming the asked words take the words left
        write(v, f"work/project {i}.md", f"# Project {i}\nThe completion date of project "
              f"{i} moved again; the date is on the board.\n" + FILLER[:300] + "\n")
    a = _ask(v, tmp_path, "How did the completion date move?", budget=80)
    assert a.time_mode == "history"
    got = [s for s in a.sources if s["path"].startswith("house/")]
    assert [s["path"] for s in got] == ["house/offer letter v1.md", "house/offer letter final.md"]
    assert "30 April" in got[0]["text"] and not got[0]["is_latest"]


def test_a_cut_keeps_the_sentence_that_answers_from_a_paragraph_written_as_one_line():
    """An email writes a paragraph as one line: a cut shorter than the line keeps its
    sentences naming the asked terms, not its first words."""
    para = ("Bad news first, good news after. The airline has cancelled the morning "
            "service from Leeds because they are dropping the route for the winter months. "
            "I rebooked you on the next one with seats, same baggage allowance and no extra "
            "cost to you at all. Your flight now leaves on 21 November at 10:15. "
            "The booking reference is in the attached PDF as usual.")
    cut = passages._cut("Hello Maren,\n" + para + "\nBest, Ana", {"flight", "leave"}, 30, FLAT)
    assert "Your flight now leaves on 21 November at 10:15." in cut
    assert len(cut.split()) <= 30 and passages.ELIDED in cut      # its marks counted


def test_a_cut_keeps_table_rows_and_numbered_steps_whole_and_never_passes_its_words():
    """A table row is one piece, a list number stays with its step, and an answering
    sentence longer than the words gives its first words rather than filler."""
    text = ("1. Drain the tank. Then close the valve.\n| Fuel filter | FF-2291. Spare in locker |"
            "\nfiller words here.\nmore filler.")
    cut = passages._cut(text, {"fuel", "filter"}, 12, FLAT)
    assert "| Fuel filter | FF-2291. Spare in locker |" in cut
    assert len(cut.split()) <= 12
    steps = passages._cut(text, {"valve"}, 9, FLAT)
    assert "Then close the valve." in steps and "\n1.\n" not in f"\n{steps}\n"
    long = passages._cut("Intro line.\nThe filter " + "word " * 40 + "end.", {"filter"}, 10,
                         FLAT)
    assert long.startswith("…\nThe filter") and len(long.split()) <= 10



def test_a_cut_of_lines_read_alike_keeps_the_one_marked_to_stand_out():
    """Meeting notes whose lines the reader reads alike (the question says "lab requests",
    the note "tech reqs"): a cut keeps the line the writer made bold or highlighted, the
    value they meant to find again, not the first lines in note order."""
    text = ("Dept mtg 24 June, everyone there.\n- Leaving do Fri 17 July, collection via Rhys.\n"
            "- New system: Google Form instead of the paper forms.\n"
            "- Deadline **Monday 12 noon** for the following week.\n"
            "- Results day Thu 20 Aug, who is in?")
    asked = {"lab", "request"}
    assert "**Monday 12 noon**" in passages._cut(text, asked, 12, FLAT)
    plain = passages._cut(text.replace("**", ""), asked, 12, FLAT)
    assert "Monday 12 noon" not in plain and "Dept mtg" in plain    # note order
    highlit = passages._cut(text.replace("**", "=="), asked, 12, FLAT)
    assert "==Monday 12 noon==" in highlit
    marked = textkit.BOLD_RE.search
    assert marked("rent up to __£795__") and not marked("file_name_here and a ** alone")

RATES = ("# Rates sheet\nThe hourly rate card goes to every agent and landlord each January.\n"
         "Hourly work is billed in half hours after the first hour on site.\n"
         "Labour: £52/hr\n"
         "Rates are reviewed against the trade survey and the hourly rate other firms quote.\n"
         "Hourly jobs booked through an agent pay the agent's rate card terms.\n"
         + FILLER + "\n")
ASK_RATE = "What's my hourly labour rate now?"


def test_past_its_share_a_section_comes_cut_to_the_lines_the_reader_reads(tmp_path,
                                                                        monkeypatch):
    """A long section past CAP_SHARE of the budget comes cut to CAP_WORDS words: the
    line the builtin reader reads as answering ("Labour: £52/hr", an amount beside an
    asked word), not the lines naming the most asked words (the hourly rate card)."""
    v = tmp_path / "notes"
    write(v, "work/Rates sheet.md", RATES)
    for i in range(4):
        write(v, f"misc/note {i}.md", f"# Note {i}\n" + FILLER + "\n")
    monkeypatch.setattr(passages, "CAP_SHARE", 0.0)
    a = _ask(v, tmp_path, ASK_RATE, budget=60)
    got = next(s for s in a.sources if s["path"] == "work/Rates sheet.md")
    rates = got["text"].split(passages.HEADING_MARK)[0]     # its first section, cut
    assert "£52/hr" in rates and passages.ELIDED in rates
    assert len(rates.split()) <= passages.CAP_WORDS < len(RATES.split("\nLine 0")[0].split())
    idx, _ = harness.load(tmp_path / "idx", v, "builtin")
    text, asked = RATES.split("\n", 1)[1], passages._asked(ASK_RATE)
    section = passages.Section(0, "work/Rates sheet.md", 0, 60, {},
                               {"heading": "Rates sheet", "text": text})
    reader = passages._line_reader(ASK_RATE, [section], idx)
    reads = lambda pieces: reader(section, pieces)  # noqa: E731
    assert "£52/hr" in passages._cut(text, asked, 10, reads)
    assert "£52/hr" not in passages._cut(text, asked, 10, FLAT)   # by asked words: cut out


MONTH_ENDS = ["31/01/25", "28/02/25", "31/03/25", "30/04/25", "31/05/25", "30/06/25",
              "31/07/25", "31/08/25", "30/09/25", "31/10/25", "30/11/25", "31/12/25"]
FUND = "# House fund log\nWhat the savings pot held at each month end.\n\n" + "".join(
    f"month end: {d}; balance: £{6800 + 410 * i:,}; notes: standing order in as usual.\n"
    for i, d in enumerate(MONTH_ENDS))


def test_dated_fit_reads_a_tables_rows_by_the_days_asked_about():
    """As of a day: the newest row up to it 2, any earlier one 1, a later or undated one
    0; a period: every row inside it 1; no time asked: all 0."""
    rows = [f"month end: {d}; balance" for d in MONTH_ENDS[4:8]] + ["notes: undated"]
    assert passages.dated_fit(rows, ("", "2025-06-30", True)) == [1, 2, 0, 0, 0]
    assert passages.dated_fit(rows, ("2025-06-01", "2025-07-31", False)) == [0, 1, 1, 0, 0]
    assert passages.dated_fit(rows, None) == [0] * 5
    assert passages.dated_fit(["paid 03/04/25", "paid 05/04/25"], ("", "2025-04-04", True),
                              "dmy") == [2, 0]


def test_a_cut_table_of_dated_rows_keeps_the_row_in_force_on_the_day_asked(tmp_path,
                                                                           monkeypatch):
    """A savings log kept as one table of month-end rows, read alike by the reader (the
    asked words are in its title, not its rows): asked the balance at the end of June, a
    cut keeps the June row, not the first rows in note order."""
    v = tmp_path / "notes"
    write(v, "money/house fund log.md", FUND)
    for i in range(4):
        write(v, f"misc/note {i}.md", f"# Note {i}\n" + FILLER + "\n")
    monkeypatch.setattr(passages, "CAP_SHARE", 0.0)
    question = "how much was in the house fund at the end of june 2025"
    a = _ask(v, tmp_path, question, budget=60)
    assert a.time_mode == "as_of" and a.as_of == "2025-06-30"
    got = next(s for s in a.sources if s["path"] == "money/house fund log.md")
    assert "£8,850" in got["text"] and passages.ELIDED in got["text"]
    monkeypatch.setattr(passages, "dated_fit", lambda pieces, *_: [0] * len(pieces))
    plain = _ask(v, tmp_path, question, budget=60)
    got = next(s for s in plain.sources if s["path"] == "money/house fund log.md")
    assert "£8,850" not in got["text"]      # by note order alone: January's rows


def test_a_cut_reads_its_rows_days_in_the_vaults_date_order(tmp_path, monkeypatch):
    """Rows written day-first with days that read either way ("05/06/25"): in a vault
    whose verso.toml says dmy, asked about the end of June, the row of 5 June is kept,
    not the one 06/05/25 would be read as under month-first."""
    v = tmp_path / "notes"
    write(v, "verso.toml", 'date_order = "dmy"\n')
    days = [f"{d:02d}/{m:02d}/25" for m in range(1, 13) for d in (5,)]
    write(v, "money/house fund log.md", "# House fund log\nWhat the savings pot held.\n\n"
          + "".join(f"paid in on {d}: balance £{7000 + 100 * i:,}, standing order as usual.\n"
                    for i, d in enumerate(days)))
    for i in range(4):
        write(v, f"misc/note {i}.md", f"# Note {i}\n" + FILLER + "\n")
    monkeypatch.setattr(passages, "CAP_SHARE", 0.0)
    a = _ask(v, tmp_path, "how much was in the house fund at the end of june 2025", budget=50)
    got = next(s for s in a.sources if s["path"] == "money/house fund log.md")
    assert "£7,500" in got["text"]          # 05/06/25, the fifth of June: row six
    assert passages.dated_fit(["paid 05/06/25", "paid 05/07/25"], ("", "2025-06-30", True),
                              "dmy") == [2, 0]


def test_the_fill_prices_a_long_section_at_the_caps_words(monkeypatch):
    """A long section is ordered by P per the words it costs once capped (its heading
    trail and CAP_WORDS): a likely answer in a 200-word section is not put behind every
    short one for words the budget will not spend on it; a short one costs its own."""
    def section(words, heading="Rates sheet"):
        return passages.Section(0, "n.md", 1, words + len(heading.split()), {},
                                {"text": " ".join(["w"] * words), "heading": heading})
    assert passages._cost(section(200)) == 2 + passages.CAP_WORDS
    assert passages._cost(section(30)) == 32
    assert passages._cost(section(200), history=True) == 202     # versions before notes
    monkeypatch.setattr(passages, "CAP_WORDS", 0)
    assert passages._cost(section(200)) == 202


def test_capped_sections_are_widened_while_the_budget_has_words(tmp_path, monkeypatch):
    """Three long notes and 400 words: capped at CAP_WORDS from the start they would
    hand on about 120; widened again they fill the budget."""
    v = tmp_path / "notes"
    for i in range(3):
        write(v, f"work/rates {i}.md", RATES.replace("Rates sheet", f"Rates sheet {i}"))
    monkeypatch.setattr(passages, "CAP_SHARE", 0.0)
    a = _ask(v, tmp_path, ASK_RATE, budget=400)
    words = sum(len(s["text"].split()) for s in a.sources)
    assert len(a.sources) == 3 and 0.8 * 400 <= words <= 400, words


def test_every_cut_of_a_question_reads_its_lines_with_one_scorer(tmp_path, monkeypatch):
    """Three long notes, each cut: the builtin reader's line scorer is made once for the
    question (its term weights over the pool's words), not once a cut section."""
    v = tmp_path / "notes"
    for i in range(3):
        write(v, f"work/rates {i}.md", RATES.replace("Rates sheet", f"Rates sheet {i}"))
    made, real = [], passages._line_reader
    monkeypatch.setattr(passages, "_line_reader", lambda *a: made.append(a) or real(*a))
    monkeypatch.setattr(passages, "CAP_SHARE", 0.0)
    a = _ask(v, tmp_path, ASK_RATE, budget=120)
    cut = [s for s in a.sources if passages.ELIDED in s["text"]]
    assert len(cut) >= 2 and all("£52/hr" in s["text"] for s in cut)
    assert len(made) == 1


def test_a_long_logs_entries_share_a_small_budget_and_still_come(tmp_path):
    """Thirty weigh-ins in one log and 150 words: each entry's share of the words is
    less than an entry, but every entry taken gets at least a cut's worth, so the log
    is handed on (entries that fit), not left out for want of a share."""
    v = tmp_path / "notes"
    write(v, "health/weight log.md", "# Weight log\n" + "".join(
        f"\n## 2026-{1 + i // 28:02d}-{1 + i % 28:02d}\nWeight {80 - i * 0.3:.1f} kg after "
        "the long run, legs heavy but fine.\n" for i in range(30)))
    for i in range(3):
        write(v, f"misc/note {i}.md", f"# Note {i}\nNothing here but the usual round.\n")
    a = _ask(v, tmp_path, "How has my weight changed?", budget=150)
    assert a.time_mode == "history"
    text = " ".join(s["text"] for s in a.sources)
    assert sum(f"{80 - i * 0.3:.1f} kg" in text for i in range(30)) >= 5


def test_a_terse_logs_entries_are_read_when_its_top_names_what_they_record(tmp_path):
    """A van log whose top says what each entry records ("mileage + anything done to
    it") and whose entries write the mileage bare ("79,815. tyres fine"): asked the
    mileage, its entries are read, though none names an asked word, and the one that
    holds the newest mileage is handed on."""
    v = tmp_path / "notes"
    entries = [("2026-03-02", "74,210. oil topped up, screenwash."),
               ("2026-06-18", "77,402. service at the garage, new pollen filter."),
               ("2026-10-29", "79,815. tyres fine, checked pressures."),
               ("2026-11-06", "new wiper blades, topped up the screenwash.")]
    write(v, "van/Berlingo log.md", "# Berlingo log\n\nYK17 RWD. mileage + anything done "
          "to it.\n" + "".join(f"\n## {day}\n{text}\n" for day, text in entries))
    for i in range(40):        # enough notes that the bare entries are no candidates
        write(v, f"misc/note {i}.md", f"# Note {i}\nThe current plan for the van, "
              f"version {i}.\n" + FILLER + "\n")
    a = _ask(v, tmp_path, "whats the current mileage on the van", budget=300)
    assert "79,815" in " ".join(s["text"] for s in a.sources)


def test_a_change_question_brings_every_entry_of_a_log_whose_top_names_the_field(tmp_path):
    """A running log whose top says what it records ("runs, mostly 5k") and whose
    entries often write a time bare ("Ashton Court 28:55"): asked how the 5k times went,
    every dated entry comes, not only those naming "5k", though sixty journal notes
    naming "5k" and "year" outrank the bare entries."""
    v = tmp_path / "notes"
    entries = [("2026-02-07", "parkrun Ashton Court 29:41. the hill. dying"),
               ("2026-03-21", "Ashton Court 28:55"),
               ("2026-05-09", "towpath to Saltford and back, 5k 28:10."),
               ("2026-07-14", "5k towpath 27:48, hot"),
               ("2026-09-26", "parkrun 27:32 PB!!")]
    write(v, "health/running log.md", "runs - mostly 5k. goal: sub 27 by the end of the "
          "year\n" + "".join(f"\n## {day}\n{text}\n" for day, text in entries))
    for i in range(60):
        write(v, f"journal/2026-10-{i % 28 + 1:02d} {i}.md", f"# Day {i}\nA 5k time trial "
              f"came up at the club again this year, version {i}.\n" + FILLER + "\n")
    a = _ask(v, tmp_path, "how have my 5k times gone this year", budget=600)
    assert a.time_mode == "history"
    text = " ".join(s["text"] for s in a.sources if s["path"] == "health/running log.md")
    assert all(t in text for t in ("29:41", "28:55", "28:10", "27:48", "27:32"))


def test_a_daily_logs_entries_of_another_kind_do_not_crowd_out_a_change(tmp_path):
    """A daily log whose top names the asked word among others ("runs, rent, weight")
    and a hundred entries of runs and weights: asked how the rent changed, its entries
    holding no sum are not brought for being the log's, so at 300 words the agent's
    letter with the newest rent still comes beside the two tenancy notes."""
    v = tmp_path / "notes"
    write(v, "home/daily log.md", "daily log: runs, rent, weight, whatever happened\n" + "".join(
        f"\n## 2026-{1 + i // 28:02d}-{1 + i % 28:02d}\n{'paid the rent, ' if i % 10 == 0 else ''}"
        f"ran {3 + i % 5} km, weight {80 - i * 0.05:.1f} kg.\n" for i in range(100)))
    for year, rent in (("2025", "£850"), ("2026", "£910")):
        write(v, f"home/tenancy {year}.md", f"---\ndate: {year}-03-01\n---\n# Tenancy\n"
              f"Rent: {rent} a month from March {year}.\n")
    write(v, "home/letter from agent.md", "---\ndate: 2026-09-10\n---\n# Letter\nThe agent "
          "wrote: rent rises to £960 a month from October.\n")
    for i in range(20):
        write(v, f"misc/note {i}.md", f"# Note {i}\nNothing much, the usual chores and a walk.\n")
    a = _ask(v, tmp_path, "how has my rent changed?", budget=300)
    assert a.time_mode == "history"
    text = " ".join(s["text"] for s in a.sources)
    assert all(rent in text for rent in ("£850", "£910", "£960"))


def test_the_ranker_reads_every_section_itself_whatever_the_judge(boat, tmp_path):
    """The fitted ranker's reading feature is the builtin reader's, on every section of
    the pool, not the rerank judge's (a model judge's scale was never fitted): a judge
    that rates everything alike leaves the chosen evidence as it was."""
    idx, be = harness.load(tmp_path / "idx", boat, "builtin")
    q = "What is the fuel filter part number?"
    before = harness.ask(q, index=idx, backend=be, write=False, budget=150)

    class Flat:
        name, model = "flat", "flat"

        def relevance(self, query, passages, stage="rerank", ledger=None):
            return {k: 0.5 for k in passages}
    be.judge = Flat()
    after = harness.ask(q, index=idx, backend=be, write=False, budget=150)
    assert "FF-2291" in before.sources[0]["text"] and "FF-2291" in after.sources[0]["text"]


def test_the_words_handed_on_follow_the_budget(boat, tmp_path):
    words = {}
    for b in (100, 400, 1000):
        a = _ask(boat, tmp_path, "What did the club meeting agree about the haul-out?",
                 budget=b)
        words[b] = sum(len(s["text"].split()) for s in a.sources)
        assert 0.8 * b <= words[b] <= b, (b, words[b])
    assert words[100] < words[400] < words[1000]


def test_k_caps_the_notes(boat, tmp_path):
    a = _ask(boat, tmp_path, "Where is the haul-out this year?", budget=2000, keep=2)
    assert len(a.sources) == 2


def test_the_model_is_a_probability_rising_with_its_positive_features():
    base = {f: 0.0 for f in passages.FEATURES}
    p0 = passages.probability(base)
    assert 0.0 < p0 < 1.0
    assert math.isclose(p0, 1 / (1 + math.exp(-passages.BIAS)))
    for name, w in passages.WEIGHTS.items():
        p1 = passages.probability({**base, name: 1.0})
        assert (p1 > p0) == (w > 0) or w == 0


def _stored_ranker(home, embedder_id, use="fitted", weights=None, bias=-3.0, **more):
    key = passages.stored_key(embedder_id)
    path = home / "calibrations" / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": calibrate.STORED_FORMAT, "key": key, "use": use,
                                "ranker": passages.RANKER, "bias": bias,
                                "weights": weights or {f: 0.0 for f in passages.FEATURES},
                                **more}))


def test_a_model_embedders_stored_ranker_scores_its_sections_and_no_other(
        boat, tmp_path, monkeypatch):
    """`verso calibrate` keeps a ranker fitted on a model embedder's pools; the sections of
    an index built with that embedder are scored by it when it won held out, and by the
    shipped fit otherwise: another embedder, the builtin one, a fit that lost, or one
    over other features."""
    from types import SimpleNamespace
    from fakes import FakeOllama
    home = tmp_path / "home"
    monkeypatch.setenv("VERSO_HOME", str(home))
    with_id = lambda i: SimpleNamespace(embedder=SimpleNamespace(id=i))  # noqa: E731
    shipped = (passages.BIAS, passages.WEIGHTS)
    fake_id = "ollama:nomic-embed-text"
    assert passages.ranker(with_id(fake_id)) == shipped   # none stored
    _stored_ranker(home, fake_id)
    got = passages.ranker(with_id(fake_id))
    assert got[0] == -3.0 and set(got[1].values()) == {0.0}
    assert passages.ranker(with_id("ollama:mxbai-embed-large")) == shipped
    idx, _ = harness.load(tmp_path / "idx", boat, "builtin")
    _stored_ranker(home, idx.embedder.id)
    assert passages.ranker(idx) == shipped                # the builtin's: the shipped fit
    _stored_ranker(home, "ollama:lost", use="shipped")
    assert passages.ranker(with_id("ollama:lost")) == shipped
    _stored_ranker(home, "ollama:older", weights={"bm25": 1.0})
    assert passages.ranker(with_id("ollama:older")) == shipped
    _stored_ranker(home, "ollama:stale", ranker="0badc0de")    # made for another ranker
    assert passages.embedder_ranker("ollama:stale")[1] == "stale"
    assert passages.ranker(with_id("ollama:stale")) == shipped
    zeros = {f: 0.0 for f in passages.FEATURES}
    for i, bad in enumerate(({"bias": None}, {"bias": "x"}, {"bias": float("nan")},
                             {"weights": {**zeros, "bm25": None}},
                             {"weights": {**zeros, "bm25": "1"}}, {"weights": [1, 2]})):
        _stored_ranker(home, f"ollama:bad{i}", **{"weights": None, **bad})
        assert passages.embedder_ranker(f"ollama:bad{i}")[1] == "damaged", bad
        assert passages.ranker(with_id(f"ollama:bad{i}")) == shipped
    path = home / "calibrations" / f"{passages.stored_key('ollama:cut')}.json"
    path.write_text('{"format": 1, "ke')                  # cut short: never trusted
    assert passages.ranker(with_id("ollama:cut")) == shipped
    with FakeOllama() as fake:              # an index of the fake's embedder, end to end
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        (home / "calibrations" / f"{passages.stored_key(fake_id)}.json").unlink()
        idx, be = harness.load(tmp_path / "model-idx", boat, "ollama", judge="builtin")
        assert idx.embedder.id == fake_id
        seen, real = [], passages.sections
        monkeypatch.setattr(passages, "sections",
                            lambda *a, **kw: seen.append(real(*a, **kw)) or seen[-1])
        q = "What is the fuel filter part number?"
        harness.ask(q, index=idx, backend=be, write=False, budget=150, search_words=False)
        assert len({round(s.p, 6) for s in seen[-1][0]}) > 1    # the shipped fit
        assert "verso calibrate" not in be.note
        _stored_ranker(home, idx.embedder.id)
        harness.ask(q, index=idx, backend=be, write=False, budget=150, search_words=False)
        assert {round(s.p, 6) for s in seen[-1][0]} == {round(1 / (1 + math.exp(3.0)), 6)}
        _, be = harness.load(tmp_path / "model-idx", boat, "ollama", judge="builtin")
        assert "evidence ranked by the fit `verso calibrate` made for ollama:" in be.note
        _stored_ranker(home, idx.embedder.id, ranker="0badc0de")  # an older Verso's fit
        _, be = harness.load(tmp_path / "model-idx", boat, "ollama", judge="builtin")
        assert "fitted for another ranker, the shipped one is used (`verso calibrate " \
            "--evidence` fits it again)" in be.note
        (home / "calibrations" / f"{passages.stored_key(fake_id)}.json").unlink()
        with evidence_fit.weights_in_use(-1.0, zeros):      # a fit being measured
            _, be = harness.load(tmp_path / "model-idx", boat, "ollama", judge="builtin")
        assert "verso calibrate" not in be.note


def test_an_embedders_fit_is_used_only_when_it_wins_held_out_on_enough_vaults():
    """evidence_fit.embedder_fit: rows where the shipped weights read a feature the wrong
    way round (sections the builtin reader scores low hold the facts) give a fit that
    wins held out; it is used when held out on MIN_VAULTS vaults with MIN_HOLDING
    sections holding a fact, not on fewer (it still wins there), and rows of one vault
    hold nothing out."""
    import random
    rng = random.Random(7)
    rows = []
    for split in ("a1", "a2", "b", "c", "d", "e"):
        for i in range(300):
            reader = rng.random()
            f = {k: 0.0 for k in passages.FEATURES}
            f["reader"] = reader
            rows.append({"split": split, "features": f, "right": rng.random() < 1 - reader})
    vault_of = {"a1": "v1", "a2": "v1", "b": "v2", "c": "v3", "d": "v4", "e": "v5"}
    got = evidence_fit.embedder_fit(rows, vault_of)
    assert got["use"] == "fitted" and got["weights"]["reader"] < 0
    assert got["held_out"]["fitted"] < got["held_out"]["shipped"]
    few = evidence_fit.embedder_fit([r for r in rows if r["split"] in ("a1", "b", "c")],
                                    vault_of)
    assert few["held_out"]["fitted"] < few["held_out"]["shipped"]
    assert few["use"] == "shipped" and "too few to use it" in few["why"]
    thin = [r for i, r in enumerate(rows) if i % 300 < 40]       # five vaults, 240 rows
    assert sum(r["right"] for r in thin) < evidence_fit.MIN_HOLDING
    got = evidence_fit.embedder_fit(thin, vault_of)
    assert got["use"] == "shipped" and "too few to use it" in got["why"]
    one = evidence_fit.embedder_fit([r for r in rows if r["split"] in ("a1", "a2")],
                                    vault_of)
    assert one["use"] == "shipped" and one["held_out"] is None


def test_the_reader_budgets():
    class Model:
        num_ctx, reply_tokens = 8192, 400

    class Small(Model):
        num_ctx = 2048

    from verso import evidence
    assert evidence.reader_budget(Model()) == evidence.MCP_WORDS
    assert evidence.reader_budget(Small()) == int((2048 - 400) * evidence.NOTES_SHARE
                                                  * evidence.WORDS_PER_TOKEN)
    assert evidence.reader_budget(object()) is None       # the builtin reader's own


def test_plain_bm25_against_a_hand_worked_example(tmp_path):
    v = tmp_path / "v"
    write(v, "a.md", "apple apple pear")
    write(v, "b.md", "pear plum")
    write(v, "c.md", "plum plum plum kiwi")
    base = plain_bm25.Baseline(v)
    docs = {p: t for p, t in base.chunks}
    assert set(docs) == {"a.md", "b.md", "c.md"}
    # the path's words count too: "md" in each, "b" and "c" ("a" is a stop word)
    lengths = {"a.md": 4, "b.md": 4, "c.md": 6}
    avg = sum(lengths.values()) / 3
    n, df = 3, 1                                          # "apple" in one chunk
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    norm = 1.2 * (1 - 0.75 + 0.75 * lengths["a.md"] / avg)
    want = idf * 2 * 2.2 / (2 + norm)
    got = dict(zip([p for p, _ in base.chunks], base.scores("apple")))
    assert math.isclose(got["a.md"], want) and got["b.md"] == got["c.md"] == 0
    ev = base.evidence("plum", 5)
    assert [s["path"] for s in ev] == ["c.md", "b.md"]
    assert sum(len(s["text"].split()) for s in ev) == 5


def test_the_budget_table_counts_both_sides(tmp_path):
    v = tmp_path / "v"
    write(v, "rent.md", "# Rent\nRent: 1240 a month.\n")
    write(v, "other.md", "# Other\nNothing here.\n")
    qs = [dict(id="q1", question="What is the rent?", category="current",
               time_mode="present", key_facts=["1240"], forbidden_facts=["1150"],
               gold_files=["rent.md"], answerable=True)]

    def ask(question, budget, **kw):
        return {"sources": [{"path": "other.md", "heading": "", "text": "no",
                             "superseded_by": None, "is_latest": True}]}
    out = budget_eval.measure(qs, ask, plain_bm25.Baseline(v), budgets=(10, 20))
    assert out["baseline"][10]["recall"] == {"k": 1, "n": 1}
    assert out["variants"]["full"]["budgets"][20]["recall"] == {"k": 0, "n": 1}
    assert out["variants"]["full"]["found_at5"] == {"k": 0, "n": 1}
    assert out["missed"]["full"] == ["q1"]
    assert out["missed_why"]["full"] == {"q1": "not retrieved"}   # rent.md names "rent"
    assert "plain BM25" in budget_eval.render(out)
    assert "why: not retrieved 1" in budget_eval.render(out)
    assert out["stale_why"]["full"] == {}           # the question asks no value in force


def test_a_miss_is_put_down_to_the_first_stage_that_lost_the_fact(tmp_path):
    v = tmp_path / "v"
    write(v, "rent.md", "# Rent\nRent: 1240 a month.\n\n## Deposit\nDeposit 2480.\n")
    write(v, "call.md", "Landlord rang: it goes to 1300 in May.\n")
    base = plain_bm25.Baseline(v)
    notes = {p: t for p, t in base.chunks if p == "call.md"}
    notes["rent.md"] = "\n".join(t for p, t in base.chunks if p == "rent.md")

    def why(facts, question="What is the rent?", retrieved=(), sources=()):
        q = {"question": question, "key_facts": facts}
        a = {"retrieved": list(retrieved), "sources": [
            {"path": p, "heading": "", "text": t} for p, t in sources]}
        return budget_eval.why_missed(q, a, notes)
    assert why(["999"]) == "not in the notes"
    assert why(["1300"]) == "in other words"       # the call names no word asked
    assert why(["1300"], "What did the landlord say?") == "not retrieved"
    assert why(["1240"], retrieved=["rent.md"]) == "ranked out"
    assert why(["2480"], "What is the deposit?", ["rent.md"],
               [("rent.md", "Rent: 1240 a month.")]) == "cut"
    # a question missing two facts counts under the stage further up
    assert why(["2480", "1300"], "rent deposit", ["rent.md"],
               [("rent.md", "Rent: 1240 a month.")]) == "in other words"
    assert why(["1240"], sources=[("rent.md", "Rent: 1240 a month.")]) is None   # not missed
    write(v, "insurer/Admiral.md", "Renews in August.\n")     # a name only in a file name
    notes["insurer/Admiral.md"] = "Renews in August.\n"
    assert why(["Admiral"], "Who insures me?", sources=[
        ("insurer/Admiral.md", "Renews in August.")]) == "not in the notes"
    assert budget_eval.why_counts({"a": "cut", "b": "ranked out", "c": "cut"}) == \
        "ranked out 1, cut 2"
    assert budget_eval.why_counts({}) == "-" and budget_eval.why_counts(None) == "n/a"


def test_stale_evidence_spares_a_passage_stating_the_current_value_too():
    src = [{"path": "a", "text": "Rent went from 1150 to 1240.", "superseded_by": None,
            "is_latest": True}]
    assert not measures.evidence_stale(["1150"], src, ["1240"])
    assert measures.evidence_stale(["1150"], src, ["1300"])


def test_stale_evidence_is_put_down_to_why_the_old_value_stood_unlabelled():
    def src(path, date, text, superseded_by=None):
        return {"path": path, "date": date, "heading": "", "text": text,
                "superseded_by": superseded_by, "is_latest": True}
    new = src("call.md", "2026-05-02", "Landlord rang: rent goes to 1300.")

    def why(*sources, key=("1300",)):
        q = {"key_facts": list(key), "forbidden_facts": ["1240"]}
        return budget_eval.why_stale(q, list(sources))
    old = src("rent.md", "2025-09-01", "Rent: 1240 a month.")
    assert why(old, new) == "older, not labelled"
    assert why(old, new, key=("1350",)) == "not handed on"
    assert why(src("contacts.md", "undated", "Rent 1240"), new) == "undated"
    assert why(old, src("call.md", "undated", "rent goes to 1300")) == "undated"
    assert why(src("later.md", "2026-06-01", "Rent: 1240 a month."), new) == "newer"
    assert why(src("flat.md", "2025-09-01", "Rent 1240. Deposit 2480."), new,
               key=("1300", "2480")) == "one note, both"
    # labelled superseded, or stating the current value beside it: not stale
    assert why(src("rent.md", "2025-09-01", "Rent: 1240", "call.md"), new) is None
    assert why(src("a.md", "2026-05-02", "Rent went from 1240 to 1300."), new) is None
    # two passages stale for two reasons: the reason first in WHY_STALE's order
    assert why(old, src("contacts.md", "undated", "Rent 1240"), new) == "undated"
    assert budget_eval.why_counts({"a": "newer", "b": "undated"}, budget_eval.WHY_STALE) \
        == "undated 1, newer 1"


def test_a_statement_label_is_right_on_an_old_value_and_wrong_on_the_current_one():
    why = "a newer dated statement in another note (2026-06-03)"
    q = {"key_facts": ["Harlow Mutual"], "forbidden_facts": ["Northgate"]}
    src = [{"path": "a.md", "heading": "", "text": "Lender: Northgate", "why": why,
            "superseded_by": "b.md"},
           {"path": "b.md", "heading": "", "text": "The lender is now Harlow Mutual",
            "why": None, "superseded_by": None},
           {"path": "c.md", "heading": "Lender", "text": "Harlow Mutual, 4.19%", "why": why,
            "superseded_by": "b.md"},
           {"path": "d.md", "heading": "", "text": "Sow beans in November", "why": why,
            "superseded_by": "b.md"}]
    assert budget_eval.statement_labels(q, src) == ["right", "wrong",
                                                                       "other"]


def test_every_kind_of_label_is_counted_apart(tmp_path):
    write(tmp_path / "v", "card.md", "# Card\nDay rate £760\n")
    q = {"key_facts": ["£760"], "forbidden_facts": ["£700"]}
    src = [{"heading": "", "text": "Day rate £700", "superseded_by": "log.md @ 2026-09-01",
            "why": "a newer entry of this log"},
           {"heading": "", "text": "Day rate £760", "superseded_by": "card v2.md",
            "why": "a newer version of this note"},
           {"heading": "", "text": "Rates", "superseded_by": "card v2.md",
            "why": "the version in force on 2026-03-01"},
           {"heading": "", "text": "Day rate £760", "superseded_by": None, "why": None}]
    assert budget_eval.labels(q, src) == [
        ("entry", "right"), ("version", "wrong"), ("as of", "other")]
    out = budget_eval.measure(
        [dict(id="q1", question="What is the day rate?", category="current",
              time_mode="present", gold_files=[], answerable=True, **q)],
        lambda question, budget, **kw: {"sources": src}, plain_bm25.Baseline(tmp_path / "v"),
        budgets=(10,))
    kinds = out["variants"]["full"]["budgets"][10]["labels_by_kind"]
    assert kinds["entry"] == {"n": 1, "right": 1, "wrong": 0, "other": 0}
    assert kinds["version"]["wrong"] == 1 and kinds["statement"]["n"] == 0
    change = budget_eval.measure(   # a change question's older versions hold its facts
        [dict(id="q2", question="How did the day rate change?", category="change",
              time_mode="history", gold_files=[], answerable=True, **q)],
        lambda question, budget, **kw: {"sources": src}, plain_bm25.Baseline(tmp_path / "v"),
        budgets=(10,))
    assert change["variants"]["full"]["budgets"][10]["labels_by_kind"]["version"]["n"] == 0


def test_a_logs_later_entry_labels_its_own_header(tmp_path):
    """A log whose undated top keeps a standing value ("Rent: £900 a month") and whose
    later dated entry states another: the top is handed on labelled superseded by that
    entry, the entry current."""
    v = tmp_path / "notes"
    write(v, "home/flat log.md", "# Flat log\nRent: £900 a month, paid to Graham by standing "
          "order on the first. Landlord's number is in contacts; the boiler is serviced "
          "every autumn by the same firm.\n\n## 2026-03-01\nBoiler fixed, new pump.\n\n"
          "## 2026-05-01\nThe rent goes up to £950 a month from June, Graham says.\n")
    write(v, "garden/seeds.md", "# Seeds\nSow the broad beans in November.\n")
    a = _ask(v, tmp_path, "How much is the rent a month?", budget=300)
    log = [s for s in a.sources if s["path"] == "home/flat log.md"]
    top = next(s for s in log if "£900" in s["text"])
    new = next(s for s in log if "£950" in s["text"])
    assert top is not new and new["superseded_by"] is None and new["is_latest"]
    assert top["superseded_by"] == "home/flat log.md @ 2026-05-01"
    assert top["why"] == "a newer entry of this log"


def test_a_logs_older_entry_is_no_older_version_of_a_later_one_about_something_else(
        tmp_path):
    """A log's entries are a series: the entry that answers is handed on unlabelled
    when the log's later entries are about something else, whatever the question's
    time words."""
    v = tmp_path / "notes"
    write(v, "van/workshop log.md", "# Workshop log\n\n## 2026-09-14\nVan MOT passed at "
          "Ferry Road, advisory on the rear tyres. Next MOT due 14 September 2027.\n\n"
          "## 2026-10-02\nNew drill bits and a box of wall plugs.\n\n## 2026-11-20\n"
          "Swept the unit out, sharpened the chisels.\n")
    write(v, "garden/seeds.md", "# Seeds\nSow the broad beans in November.\n")
    for question in ("When is the van's next MOT due?", "When was the van's MOT?"):
        a = _ask(v, tmp_path, question, budget=300)
        held = [s for s in a.sources if "September 2027" in s["text"]]
        assert held and all(s["superseded_by"] is None for s in held), question


@pytest.mark.slow
def test_the_shipped_evidence_weights_are_what_the_fit_gives(tmp_path):
    """passages.py's FITTED block is what tools/fit_evidence.py fits on the tuning
    splits today: refit (--write) whenever the pipeline before the evidence changes."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import fit_evidence
    from verso import verdict_fit
    sets = fit_evidence.tuning_sets()
    assert sorted(name for name, _, _ in sets) == sorted(
        ["dev"] + [f"dev{i}" for i in range(2, 24)])
    loaded = {name: harness.load(index=str(tmp_path / name), vault=vault, backend="builtin")
              for name, vault, _ in sets}
    bias, weights = evidence_fit.raw(verdict_fit.fit(evidence_fit.collect(sets, loaded),
                                                     passages.FEATURES))
    assert bias == pytest.approx(passages.BIAS, abs=2e-3)
    assert weights == pytest.approx(passages.WEIGHTS, abs=2e-3)


def test_the_grid_scores_its_pick_held_out_by_vault(monkeypatch, capsys):
    """The fill-size grid picks by its rule on every tuning vault (ties to the size listed
    first), and scores each vault at the sizes picked without it, splits of one vault
    held out together: a size one vault alone favours is picked in sample and loses held
    out; one vault has nothing to hold out."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import fit_evidence
    monkeypatch.setattr(fit_evidence, "GRID", {"CUT_MIN": (10, 25)})
    monkeypatch.setattr(passages, "CUT_MIN", 10)
    gain = {10: {"a": 5, "b": 5, "c": 5}, 25: {"a": 0, "b": 0, "c": 20}}   # c alone likes 25

    def recall(sets, loaded, bias, weights):
        return {name: [gain[passages.CUT_MIN][name]] * 3 for name, _, _ in sets}
    monkeypatch.setattr(evidence_fit, "recall", recall)

    def held_out(sets):
        best = fit_evidence.grid(sets, {name: None for name, _, _ in sets})
        return best, capsys.readouterr().out.strip().splitlines()[-1]
    best, line = held_out([("a", "v1", []), ("b", "v2", []), ("c", "v3", [])])
    assert best == {"CUT_MIN": 25}                  # 60 in sample against 45
    # held out: a (and b) at 25, which the others pick with c among them: 0 each; c at
    # 10, which a and b pick: 5; so 5 a budget, against 15 at the shipped sizes (10)
    assert line == ("held out by vault (each vault at the sizes picked without it): "
                    "5 / 5 / 5; the shipped sizes: 15 / 15 / 15; the first sizes "
                    "listed: 15 / 15 / 15")
    # a1 and a2 share a vault; a2 alone likes 25, and in sample 25 ties with 10 (20 each)
    gain.update({10: {"a1": 5, "a2": 5, "b": 5, "c": 5}, 25: {"a1": 0, "a2": 20, "b": 0,
                                                              "c": 0}})
    best, line = held_out([("a1", "v1", []), ("a2", "v1", []), ("b", "v2", []),
                           ("c", "v3", [])])
    assert best == {"CUT_MIN": 10}                  # the tie goes to the first listed
    # v1 out: b and c pick 10, a1 + a2 hand on 10; b out or c out: 25 is picked, 0
    # (holding a1 and a2 out apart would give 5: a1 out, a2 makes 25 the pick)
    assert line.startswith("held out by vault (each vault at the sizes picked without "
                           "it): 10 / 10 / 10;")
    best, line = held_out([("a1", "v1", []), ("a2", "v1", [])])
    assert best == {"CUT_MIN": 25} and line == "held out by vault: one vault, nothing to hold out"
    assert passages.CUT_MIN == 10
