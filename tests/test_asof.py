"""Point-in-time questions: the date a question names (asof.py), the version in force on
it (version.py, time mode as_of), and the whole pipeline, CLI and MCP on a vault made
for them."""

import json

import pytest

from verso import asof
from verso import generate
from verso import harness
from verso import mcp_server
from verso import route
from verso import version
from verso.retrieve import Candidate
from tests.vaults import write

NEWEST = ["2024-09-01", "2026-04-02", "2026-06-10", "2026-11-03"]   # notes' real dates


@pytest.mark.parametrize("question,spec", [
    ("What was my day rate in June?", (None, 6, None, "end")),
    ("What did the budget say as of 1 May?", (None, 5, 1, "on")),
    ("Which gym did I use before September?", (None, 9, None, "before")),
    ("What was the plan at the start of the year?", (None, 1, 1, "start")),
    ("What did the budget say as of 2026-05-01?", (2026, 5, 1, "on")),
    ("What was the rent in March 2025?", (2025, 3, None, "end")),
    ("Who supplied the feed as of July 14?", (None, 7, 14, "on")),
])
def test_the_point_in_time_a_question_names(question, spec):
    got = asof.phrase(question)
    assert (got["year"], got["month"], got["day"], got["kind"]) == spec


@pytest.mark.parametrize("question", ["I may need the rent?", "What is my day rate?",
                                      "What's on the 3rd shelf?", "When is the marathon?",
                                      "What is in the summer house?", "winter tyres on?",
                                      "How much has it made since last year?",
                                      "the 2025 budget", "quotes in 2000 words",
                                      "the price in 2025 money", "the tax bill in 2025/26",
                                      "since the start of 2025", "until the end of last year",
                                      "What did I write in the spring?",
                                      "What happened last autumn?",
                                      "When did I first swim in the sea in 2026?"])
def test_no_point_in_time(question):
    assert asof.phrase(question) is None


@pytest.mark.parametrize("question,day", [
    ("What was I selling the jars for last autumn?", "2025-11-30"),   # autumn 2026 not over
    ("What was the rent last summer?", "2026-08-31"),
    ("Back in the spring, what did we put aside for food?", "2026-05-31"),
    ("How many hours was I doing last winter?", "2026-02-28"),
    ("What did heating cost in winter 2024?", "2025-02-28"),        # the one 2024's December opens
    ("What was the rate at the start of last winter?", "2025-12-01"),
    ("Who was my contact back in 2025?", "2025-12-31"),
    ("What were we paying per hour in 2025?", "2025-12-31"),
    ("the bank balance at the end of 2025", "2025-12-31"),
    ("What was dad taking at the start of 2025?", "2025-01-01"),
    ("the premium as of early 2026", "2026-04-30"),
    ("the premium in late 2025", "2025-12-31"),
    ("Which gym did I use before 2026?", "2025-12-31"),
    ("What was my rent last year?", "2025-12-31"),
    ("What was my rent at the start of last year?", "2025-01-01"),
    ("What was the rent in June last year?", "2025-06-30"),
    ("What was the rent in the spring last year?", "2025-05-31"),
    ("the premium in mid-2025", "2025-08-31"),
    ("What will the rate be in the spring?", "2027-05-31"),      # the next one
])
def test_a_season_or_a_year_as_a_point_in_time(question, day):
    """The end of what the question names, as "in June" is the 30th; the start or the day
    before when it says so; a season without a year the latest begun by the newest note
    (3 November 2026), or the latest over for "last"."""
    assert asof.resolve(asof.phrase(question), NEWEST) == day
    assert route.route(question)["time_mode"] == "as_of"


def test_a_month_is_read_in_the_vault_own_years_not_today():
    assert asof.resolve(asof.phrase("in June"), NEWEST) == "2026-06-30"
    assert asof.resolve(asof.phrase("in December"), NEWEST) == "2025-12-31"   # not yet 2026's
    assert asof.resolve(asof.phrase("before September"), NEWEST) == "2026-08-31"
    assert asof.resolve(asof.phrase("at the start of the year"), NEWEST) == "2026-01-01"
    assert asof.resolve(asof.phrase("as of 31 February"), NEWEST) == "2026-02-28"
    assert asof.resolve(asof.phrase("in June"), []) is None            # no dated note
    assert asof.parse("2026-05") == "2026-05-31" and asof.parse("2026-05-01") == "2026-05-01"
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        asof.parse("May")


def test_a_month_asked_about_in_the_present_or_future_tense_is_the_next_one():
    """"What hours are we doing on Sundays in December?" asks about the coming December,
    not last year's: nothing written since is set aside as written after the date. A
    plain present ("what is the rent in June") keeps the latest June."""
    assert asof.resolve(asof.phrase("What hours are we doing on Sundays in December?"),
                        NEWEST) == "2026-12-31"
    assert asof.resolve(asof.phrase("What is due in June?"), NEWEST) == "2027-06-30"
    assert asof.resolve(asof.phrase("What will the rent be in June?"), NEWEST) == "2027-06-30"
    assert asof.resolve(asof.phrase("What was due in June?"), NEWEST) == "2026-06-30"
    assert asof.resolve(asof.phrase("What is the rent in June?"), NEWEST) == "2026-06-30"
    assert asof.resolve(asof.phrase("What is my rate back in June?"), NEWEST) == "2026-06-30"
    assert asof.resolve(asof.phrase("and in December?"), NEWEST) == "2025-12-31"  # no verb
    assert asof.resolve(asof.phrase("What is due in June 2026?"), NEWEST) == "2026-06-30"


def test_the_router_asks_as_of_after_change_and_present_words():
    assert route.route("What was my day rate in June?")["time_mode"] == "as_of"
    assert route.route("How has my day rate changed since June?")["time_mode"] == "history"
    assert route.route("What is my day rate now?")["time_mode"] == "present"


@pytest.fixture
def shop(tmp_path):
    v = tmp_path / "notes"
    write(v, "farm/box prices 2026-04.md", "# Box prices\nSmall box: £10. Large box: £18.")
    write(v, "farm/box prices 2026-06.md", "# Box prices\nSmall box: £12. Large box: £20.")
    write(v, "farm/box prices 2026-09.md", "# Box prices\nSmall box: £13. Large box: £22.")
    write(v, "farm/box prices draft.md", "# Box prices\nSmall box: £99.", mtime=1.8e9)
    write(v, "farm/supplier log.md", "# Feed supplier\n## 2026-03-02\nFeed from Hartley "
          "Mills, £14 a sack.\n## 2026-09-05\nSwitched the feed to Bryn Feeds, £15 a "
          "sack.\n")
    write(v, "garden/seeds.md", "# Seeds\nSow the broad beans in November.")
    return v, tmp_path / "idx"


def ask(shop, q, **kw):
    return harness.ask(q, vault=shop[0], index=shop[1], backend="builtin", **kw)


def test_a_month_between_two_versions_gets_the_one_in_force(shop):
    # issue 26: asked in May, an April note has the old price and a June note the new one
    a = ask(shop, "What was the price of a small box in May?")
    assert (a.time_mode, a.as_of) == ("as_of", "2026-05-31")
    assert "£10" in a.answer and "£12" not in a.answer
    assert [c["path"] for c in a.citations] == ["farm/box prices 2026-04.md"]
    aside = {c["path"]: c["dropped"] for c in a.candidates["version"] if c.get("dropped")}
    assert aside["farm/box prices 2026-06.md"] == ("not yet written on 2026-05-31 (dated "
                                                   "2026-06-01)")
    assert "undated" in aside.get("farm/box prices draft.md", "undated")
    b = ask(shop, "What is the price of a small box?")
    assert b.time_mode == "present" and "£13" in b.answer


def test_a_log_entry_in_force_on_the_date(shop):
    a = ask(shop, "Who supplied the feed before September?")
    assert a.time_mode == "as_of" and "Hartley Mills" in a.answer and "Bryn" not in a.answer
    assert "Bryn Feeds" in ask(shop, "Who supplies the feed now?").answer


def test_a_date_given_outright_and_a_bad_one(shop, capsys):
    a = ask(shop, "What is the price of a small box?", as_of="2026-07-15")
    assert (a.time_mode, a.as_of) == ("as_of", "2026-07-15") and "£12" in a.answer
    assert harness.main(["What is the price of a small box?", "--vault", str(shop[0]),
                         "--index", str(shop[1]), "--backend", "builtin",
                         "--as-of", "2026-04", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["as_of"] == "2026-04-30" and "£10" in d["answer"]
    assert harness.main(["q?", "--vault", str(shop[0]), "--index", str(shop[1]),
                         "--backend", "builtin", "--as-of", "spring"]) == 2
    assert "YYYY-MM-DD" in capsys.readouterr().err


def test_citing_a_version_superseded_before_the_date_escalates(shop):
    from verso import line_scores
    from verso import retrieve
    from verso import version
    from verso import verify
    idx, _ = harness.load(shop[1], shop[0], "builtin")
    by = {c["path"]: c for c in idx.chunks}
    cands = [retrieve.Candidate(by[p], relevance=0.9) for p in
             ("farm/box prices 2026-04.md", "farm/box prices 2026-06.md",
              "farm/box prices 2026-09.md")]
    qvec = idx.embedder.embed_query("small box")
    marked = version.apply(idx, cands, "as_of", qvec, "2026-07-31")
    april, june, sept = marked[:3]
    assert april.superseded_by == "farm/box prices 2026-06.md" and june.is_latest
    assert sept.dropped and not april.dropped
    assert by["farm/box prices 2026-06.md"]["is_latest"] is False  # marked on copies only
    kept = [april, june]
    v = verify.verify("Small box: £10 [c1].", kept, "present", line_scores.BuiltinJudge())
    assert v.verdict == "ESCALATE" and "older version" in v.failing[0]["reasons"][0]
    assert verify.verify("Small box: £12 [c2].", kept, "present",
                         line_scores.BuiltinJudge()).verdict == "SHIP"


def test_mcp_search_notes_takes_an_as_of_date(shop):
    write(shop[0], "verso.toml", '[folders.farm]\nprivacy = "shareable"\n')
    srv = mcp_server.Server(shop[0], shop[1], "builtin")

    def call(args):
        return srv.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "search_notes", "arguments": args}})["result"]
    out = call({"query": "small box price", "time_mode": "as_of", "as_of": "2026-05-31"})
    r = out["structuredContent"]
    assert r["time_mode"] == "as_of" and r["as_of"] == "2026-05-31"
    assert r["passages"][0]["path"] == "farm/box prices 2026-04.md"
    assert r["passages"][0]["is_latest"]
    later = [x for x in r["passages"] if "not yet written on 2026-05-31" in (x["why"] or "")]
    assert {x["path"] for x in later} >= {"farm/box prices 2026-06.md"}   # labelled, not
    assert not any(x["is_latest"] for x in later) and not r["set_aside"]  # left out
    assert call({"query": "small box price", "time_mode": "as_of"})["isError"]
    assert call({"query": "x", "time_mode": "as_of", "as_of": "2026-13-01"})["isError"]


# ----------------------------------------------------- issue 35: periods, every note as of

TODAY = "2026-02-11"     # a Wednesday: "last week" is 2026-02-02..2026-02-08


@pytest.mark.parametrize("question,span", [
    ("What happened on 2026-01-05?", ("2026-01-05", "2026-01-05")),
    ("What happened on 5 January?", ("2026-01-05", "2026-01-05")),       # before today
    ("What did I do on Jan 5th, 2024?", ("2024-01-05", "2024-01-05")),
    ("What happened on 20 March?", ("2025-03-20", "2025-03-20")),        # not yet in 2026
    ("Show me my notes from March", ("2025-03-01", "2025-03-31")),
    ("What notes did I make about the lodger in February 2026?", ("2026-02-01", "2026-02-28")),
    ("What did I write about the kiln last week?", ("2026-02-02", "2026-02-08")),
    ("What did I do yesterday?", ("2026-02-10", "2026-02-10")),
    ("What's in my journal for the first week of May 2026?", ("2026-05-01", "2026-05-07")),
    ("What's in my journal for the last week of February 2024?", ("2024-02-23", "2024-02-29")),
    ("What did I do over Christmas 2025?", ("2025-12-24", "2025-12-26")),
    ("What did I do over Christmas?", ("2025-12-24", "2025-12-26")),     # the last one
    ("What happened in 2025?", ("2025-01-01", "2025-12-31")),
])
def test_the_period_a_question_asks_about(question, span):
    got = asof.period(question, TODAY)
    assert (got["start"], got["end"]) == span


@pytest.mark.parametrize("question", [
    "What was my rent in June?",               # a value in force then: as of, not a period
    "When did I first swim in the sea in 2026?",
    "What happened on 31 February?",           # no such day
    "What happened to the kiln?",              # no period named
])
def test_no_period(question):
    assert asof.period(question, TODAY) is None


def test_relative_periods_need_a_today():
    assert asof.period("What did I write last week?", None) is None
    assert asof.period("What happened on 2026-01-05?", None)["start"] == "2026-01-05"


def test_the_days_a_passage_states_and_whether_they_touch_a_period():
    text = ("Yesterday [2026-01-06] the boiler. Paid on 2026-01-02. Last week "
            "[2025-12-22..2025-12-28] was quiet; last month [2025-12]; last year [2025].")
    assert asof.stated(text) == [("2026-01-06", "2026-01-06"), ("2025-12-22", "2025-12-28"),
                                 ("2025-12-01", "2025-12-31"), ("2025-01-01", "2025-12-31"),
                                 ("2026-01-02", "2026-01-02")]
    assert asof.touches([("2025-12-22", "2025-12-28")], "2025-12-25", "2025-12-25")  # a week
    assert not asof.touches([("2025-12-01", "2025-12-31")], "2025-12-25", "2025-12-25")
    assert asof.touches([("2025-12-01", "2025-12-31")], "2025-12-01", "2025-12-31")  # inside
    assert not asof.touches([("2026-01-06", "2026-01-06")], "2025-12-01", "2025-12-31")


def test_the_router_reads_a_period_question_as_any_and_a_value_in_a_month_as_of():
    r = route.route("What happened on 2026-01-06?")
    assert r["time_mode"] == "any" and "period" in r["why"]
    assert route.route("What did I discuss with Dr Okafor in March 2026?")["time_mode"] == "any"
    assert route.route("What was my parkrun time in July?")["time_mode"] == "as_of"


@pytest.fixture
def diary(tmp_path):
    v = tmp_path / "notes"
    write(v, "verso.toml", "[folders.journal]\nversioned = false\n")
    write(v, "journal/2026-01-02.md", "The kiln engineer is coming on Tuesday.\n\n"
          "Bought glaze for the new mugs.")
    write(v, "journal/2026-01-07.md", "Yesterday the kiln engineer finally came and "
          "fixed the element.")
    write(v, "journal/2026-01-20.md", "Fired the kiln again: the mugs came out well.")
    write(v, "journal/2026-03-10.md", "Kiln studio rent went up to £95 a month.")
    write(v, "journal/2026-03-12.md", "Nothing about pottery today.")
    write(v, "studio/kiln rent.md", "---\ndate: 2026-02-01\n---\n# Kiln studio\n"
          "Studio rent: £80 a month.")
    write(v, "studio/firing log.md", "---\ndate: 2026-06-01\n---\n# Firing log\n"
          "Date: 2026-01-20; Cone: 6; Mugs: 12.\nDate: 2026-05-30; Cone: 10; Mugs: 8.\n"
          "Best firing so far: cone 10.")
    write(v, "studio/kiln notes.md", "# Kiln\nThe kiln is a 2009 Kilnmaster.", mtime=1.8e9)
    return v, tmp_path / "idx"


def test_a_period_question_gets_every_note_of_the_period_and_none_outside(diary):
    # the day written as an ISO date; the notes say "on Tuesday" and "yesterday"
    a = ask(diary, "What happened with the kiln on 2026-01-06?")
    assert a.time_mode == "any"
    assert sorted({s["path"] for s in a.sources}) == ["journal/2026-01-02.md",
                                                      "journal/2026-01-07.md"]
    # a month: the notes dated in it (a log's dated row too), none from other months
    b = ask(diary, "What did I write about the kiln in January 2026?")
    paths = {s["path"] for s in b.sources}
    assert {"journal/2026-01-02.md", "journal/2026-01-07.md", "journal/2026-01-20.md"} <= paths
    assert paths <= {"journal/2026-01-02.md", "journal/2026-01-07.md",
                     "journal/2026-01-20.md", "studio/firing log.md"}
    # counted from the newest dated note (2026-06-01): nothing written on 5 May
    assert ask(diary, "What happened on 5 May?").abstained


def test_a_relative_period_counts_from_the_as_of_date_when_one_is_given(diary):
    """"What did I write about the kiln last week?" as of 2026-01-10 is the week of 29
    December to 4 January, not the week before the newest note (June)."""
    a = ask(diary, "What did I write about the kiln last week?", as_of="2026-01-10")
    assert {s["path"] for s in a.sources} == {"journal/2026-01-02.md"}
    assert ask(diary, "What did I write about the kiln last week?").abstained


def test_as_of_sets_aside_a_single_note_written_after_the_day(diary):
    a = ask(diary, "What was the kiln studio rent in February?")
    assert (a.time_mode, a.as_of) == ("as_of", "2026-02-28")
    assert "£80" in a.answer and "£95" not in a.answer
    assert "journal/2026-03-10.md" not in {s["path"] for s in a.sources}
    aside = {c["path"]: c["dropped"] for c in a.candidates["version"] if c.get("dropped")}
    assert aside.get("journal/2026-03-10.md", "").startswith("not yet written on 2026-02-28")


def test_as_of_keeps_the_lines_of_a_later_note_dated_before_the_day(diary):
    # the firing log was written in June; its row of 20 January was so in February
    a = ask(diary, "How many mugs were in the firing as of 2026-02-28?")
    log = [s for s in a.sources if s["path"] == "studio/firing log.md"]
    assert log and log[0]["text"] == "Date: 2026-01-20; Cone: 6; Mugs: 12."
    # an undated note stays, shown undated
    b = ask(diary, "What make is the kiln?", as_of="2026-02-28")
    assert any(s["path"] == "studio/kiln notes.md" and s["date"] == "undated"
               for s in b.sources)


def test_dated_before_keeps_lines_stating_only_earlier_days():
    from verso import version
    text = ("Date: 2026-07-04; Time: 23:05.\nDate: 2026-08-22; Time: 22:48.\n"
            "Current best: 22:31.\nLast year [2025] I ran my first half.\n"
            "From 2026-06-01 to 2026-09-01 the rate was £50.")
    assert version.dated_before(text, "2026-07-31") == ("Date: 2026-07-04; Time: 23:05.\n"
                                                        "Last year [2025] I ran my first half.")
    assert version.dated_before("No dates here.", "2026-07-31") == ""


def test_a_note_kept_a_year_at_a_time_is_in_force_in_its_named_year(tmp_path):
    """Files cloned or synced carry no real date ("Rates 2025.md", "Rates 2026.md" both
    dated by the checkout's clock): as of a day, the one whose name writes that day's
    year (or the latest before it) is in force, a later year's is not yet written."""
    v = tmp_path / "notes"
    write(v, "money/Rates 2025.md", "# Rates 2025\nDay rate: £420.\n")
    write(v, "money/Rates 2026.md", "# Rates 2026\nDay rate: £475.\n")
    write(v, "journal/2026-03-02.md", "# 2 March\nQuiet day at the surgery.\n")
    write(v, "journal/2025-06-10.md", "# 10 June\nLong list at the surgery.\n")
    a = harness.ask("What was my day rate back in 2025?", vault=v, index=tmp_path / "idx",
                    backend="builtin")
    assert (a.time_mode, a.as_of) == ("as_of", "2025-12-31")
    assert "£420" in a.answer and "£475" not in a.answer
    aside = {c["path"]: c["dropped"] for c in a.candidates["version"] if c.get("dropped")}
    assert aside["money/Rates 2026.md"] == "not yet written on 2025-12-31 (named 2026)"
    now = harness.ask("What is my day rate?", vault=v, index=tmp_path / "idx",
                      backend="builtin")
    assert "£475" in now.answer


def test_two_seasons_or_years_joined_ask_across_both_and_a_season_alone_is_no_point():
    for q in ("the rent in summer 2025 or summer 2026", "rent last year and this year",
              "compare 2025 and last year", "last summer or last winter, which rent"):
        assert route.route(q)["time_mode"] == "history", q
    for q in ("What is the summer and winter rate?", "Which tyres, winter or summer?"):
        assert route.route(q)["time_mode"] == "present", q     # kinds of rate, not times


@pytest.mark.parametrize("question", ["What did I pay in 2025 about the car?",
                                      "my rate in 2025 as a contractor",
                                      "the rent in 2025 per month", "in 2025 - roughly what"])
def test_a_year_ends_its_phrase_before_a_function_word_or_a_dash(question):
    assert asof.resolve(asof.phrase(question), NEWEST) == "2025-12-31"


def test_a_passage_set_aside_is_handed_on_with_why_as_its_status():
    """version.labelled: a copy not in force, why (and a model's status) saying when it
    was written, with its note's own text (as of, the stage kept only earlier lines)."""
    class Index:
        chunks = [{"id": 0, "path": "farm/prices.md", "text": "Small box: £12."}]
    c = Candidate({"id": 0, "path": "farm/prices.md", "text": ""},
                  dropped="not yet written on 2026-05-31 (dated 2026-06-01)")
    (copy,) = version.labelled([c], Index)
    assert not copy.is_latest and copy.dropped is None and copy.superseded_by is None
    assert copy.why == c.dropped
    assert generate.note_status(copy) == f"not in force on the day asked ({c.dropped})"
    assert copy.chunk["text"] == "Small box: £12."


def test_undated_versions_of_one_named_year_go_by_their_marker():
    files = [{"path": f"money/Rates 2026{m}.md", "date": "2026-11-30",
              "date_source": version.WEAK_SOURCE} for m in ("", " v2", " draft")]
    assert version._in_force(files, "2026-06-30")["path"] == "money/Rates 2026 v2.md"


def test_with_a_budget_the_builtin_reader_never_answers_from_a_later_version(shop):
    """The later versions are handed on labelled (a model or host reads them); the
    builtin reader skips a note not in force on the day, as it did when they were left
    out."""
    a = ask(shop, "What was the price of a small box in May?", budget=400)
    assert a.as_of == "2026-05-31" and any(s["set_aside"] for s in a.sources)
    assert "£10" in a.answer and "£12" not in a.answer and "£13" not in a.answer
