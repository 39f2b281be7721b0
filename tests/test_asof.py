"""Point-in-time questions: the date a question names (asof.py), the version in force on
it (version.py, time mode as_of), and the whole pipeline, CLI and MCP on a vault made
for them."""

import json

import pytest

from verso import asof
from verso import harness
from verso import mcp_server
from verso import route
from tests.vaults import write

NEWEST = ["2026-04-02", "2026-06-10", "2026-11-03"]


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
                                      "What's on the 3rd shelf?", "When is the marathon?"])
def test_no_point_in_time(question):
    assert asof.phrase(question) is None


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
    from verso import reader
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
    v = verify.verify("Small box: £10 [c1].", kept, "present", reader.BuiltinJudge())
    assert v.verdict == "ESCALATE" and "older version" in v.failing[0]["reasons"][0]
    assert verify.verify("Small box: £12 [c2].", kept, "present",
                         reader.BuiltinJudge()).verdict == "SHIP"


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
    assert any("not yet written" in x["reason"] for x in r["set_aside"])
    assert call({"query": "small box price", "time_mode": "as_of"})["isError"]
    assert call({"query": "x", "time_mode": "as_of", "as_of": "2026-13-01"})["isError"]
