"""Evidence measures: what is handed on to the readers, scored on hand-worked cases, in
the summaries, the text and HTML reports, --json, and tools/splits.py table."""

import importlib.util
import json
import sys
import time
import types
from pathlib import Path

import pytest

import verso
from verso import evaluate as ev
from verso import measures
from verso import html_report
from verso import scorecard


def q_(id="q1", category="current", time_mode="present", key=("1550",), forbidden=("1510",),
       gold=("rates/new.md",), answerable=True):
    return {"id": id, "question": f"question {id}?", "category": category,
            "time_mode": time_mode, "answer": "1550.", "key_facts": list(key),
            "forbidden_facts": list(forbidden), "gold_files": list(gold),
            "answerable": answerable}


def s_(path="rates/new.md", text="", heading="", superseded_by=None):
    return {"id": f"{path}#0", "path": path, "heading": heading, "date": "2026-10-01",
            "is_latest": superseded_by is None, "score": 1.0,
            "superseded_by": superseded_by, "why": superseded_by and "a newer version",
            "text": text}


def a_(*sources, verdict="SHIP", answer="1550 [c1].", abstained=False):
    return {"answer": answer, "abstained": abstained, "verdict": verdict,
            "sources": list(sources), "time_mode": "present", "checks": {"rules_ok": True}}


NEW = s_("rates/new.md", "Maren's day rate is now £1,550.", "Rates 2026")
OLD = s_("rates/old.md", "The day rate was £1,510.", "Rates 2025", "rates/new.md")
STALE = dict(OLD, superseded_by=None, is_latest=True)      # the old rate, marked current


# ------------------------------------------------------------------ the measures

def test_evidence_recall_joins_every_passage_heading_and_text():
    two = [s_(text="The rate is £1,550 a day."), s_("b.md", "Contract notes.", "MAREN")]
    assert measures.evidence_recall(["1550", "Maren"], two)          # one fact in each passage
    assert not measures.evidence_recall(["1550", "Maren"], two[:1])  # Maren only in b's heading
    assert measures.evidence_recall(["£1550"], [s_(text="£1,550")])   # thousands separator
    assert measures.evidence_recall(["1,550"], [s_(text="1550\n per   day")])
    assert not measures.evidence_recall(["1550"], [s_(text="it is 11550")])  # a longer number
    assert not measures.evidence_recall(["1550"], [])
    assert not measures.evidence_recall(["1550"], ["rates/new.md"])  # a bare path has no text


def test_evidence_recall_counts_the_date_every_reader_is_shown_with_a_passage():
    """"When did the engineer come?" is answered by the day the note was written."""
    came = s_("journal/2026-10-01.md", "The engineer finally came and fixed the boiler.")
    assert measures.evidence_recall(["2026-10-01"], [came])
    assert not measures.evidence_recall(["2026-10-02"], [came])
    assert not measures.evidence_recall(["2026-10-01"], [dict(came, date="undated")])


def test_evidence_stale_only_for_a_passage_marked_current():
    assert measures.evidence_stale(["1510"], [NEW, OLD]) is False    # labelled superseded: fine
    assert measures.evidence_stale(["1510"], [NEW, dict(OLD, superseded_by=None)]) is False  # older
    assert measures.evidence_stale(["1510"], [NEW, STALE]) is True
    assert measures.evidence_stale(["1,510"], [s_(text="it was 1510")]) is True
    assert measures.evidence_stale(["1510"], [s_(heading="1510 rates")]) is True   # heading too
    assert measures.evidence_stale(["1510"], [s_(text="it is 11510")]) is False
    assert measures.evidence_stale(["1510"], []) is False


def test_evidence_recall_all_and_words():
    gold = ["v1.md", "v2.md"]
    assert measures.evidence_recall_all(gold, [s_("v1.md"), s_("v2.md"), s_("x.md")])
    assert measures.evidence_recall_all(gold, [s_("v1.md"), s_("v2.md", superseded_by="v1.md")])
    assert not measures.evidence_recall_all(gold, [s_("v1.md"), s_("x.md")])
    assert measures.evidence_words([s_(text="a b  c\nd", heading="not counted"), s_(text="e")]) == 5
    assert measures.evidence_words([]) == 0 and measures.evidence_words([s_()]) == 0


# ------------------------------------------------------------------ records

def test_score_fields_apply_where_the_question_allows():
    r = ev.score(q_(), a_(NEW, OLD), "full")
    assert (r["evidence_recall"], r["evidence_stale"], r["evidence_recall_all"]) == (
        True, False, None)                                  # current, not change
    assert r["evidence_words"] == 6 + 5
    r = ev.score(q_(), a_(STALE), "full")
    assert (r["evidence_recall"], r["evidence_stale"]) == (False, True)
    refuse = q_(category="refuse", time_mode="any", key=(), forbidden=(), gold=(),
                answerable=False)
    r = ev.score(refuse, a_(NEW, abstained=True, verdict="ABSTAIN"), "full")
    assert (r["evidence_recall"], r["evidence_stale"], r["evidence_recall_all"]) == (
        None, None, None) and r["evidence_words"] == 6
    assert ev.score(q_(time_mode="history"), a_(NEW), "full")["evidence_stale"] is None
    assert ev.score(q_(time_mode="as_of"), a_(NEW), "full")["evidence_stale"] is False
    assert ev.score(q_(forbidden=()), a_(NEW), "full")["evidence_stale"] is None
    assert ev.score(q_(key=()), a_(NEW), "full")["evidence_recall"] is None
    change = q_(category="change", time_mode="history", gold=("rates/new.md", "rates/old.md"))
    assert ev.score(change, a_(NEW, OLD), "full")["evidence_recall_all"] is True
    assert ev.score(change, a_(NEW), "full")["evidence_recall_all"] is False
    failed = ev.failed(q_(), "full", "timed out")                       # no evidence at all
    assert (failed["evidence_recall"], failed["evidence_words"]) == (False, 0)
    json.dumps(r)


def _records():
    change = q_("h1", "change", "history", key=("1510", "1550"),
                gold=("rates/new.md", "rates/old.md"))
    refuse = q_("r1", "refuse", "any", key=(), forbidden=(), gold=(), answerable=False)
    pairs = [(q_("c1"), a_(NEW, OLD)),                                  # 11 words
             (q_("c2"), a_(STALE, verdict="ESCALATE")),     # 5
             (q_("c3"), a_(s_(text="one two three four five six seven eight nine ten "
                              "eleven twelve thirteen fourteen fifteen"))),         # 15
             (change, a_(NEW, OLD)),                                            # 11
             (refuse, a_(abstained=True, verdict="ABSTAIN"))]                   # 0
    return [ev.score(q, a, "full") for q, a in pairs]


def test_summaries_carry_rates_and_words_overall_and_by_category():
    s = ev.summarise(_records())
    o, cur = s["overall"], s["by_category"]["current"]
    assert o["evidence_recall"] == {"k": 2, "n": 4, "p": 0.5}       # c1, h1
    assert o["evidence_stale"] == {"k": 1, "n": 3, "p": pytest.approx(1 / 3)}   # c2
    assert o["evidence_recall_all"] == {"k": 1, "n": 1, "p": 1.0}
    assert o["evidence_words"] == {"mean": 8.4, "p95": 15, "n": 5}   # 0 5 11 11 15
    assert cur["evidence_recall"] == {"k": 1, "n": 3, "p": pytest.approx(1 / 3)}
    assert cur["evidence_words"]["mean"] == pytest.approx(31 / 3)
    assert s["by_category"]["refuse"]["evidence_recall"]["n"] == 0
    old = [{k: v for k, v in r.items() if not k.startswith("evidence")} for r in _records()]
    o = ev.summarise(old)["overall"]                               # a run from before
    assert o["evidence_recall"]["n"] == 0 and o["evidence_words"]["mean"] is None


def test_text_and_html_reports_show_the_evidence():
    recs = _records()
    result = {"variants": {"full": ev.summarise(recs)}, "pairs": []}
    text = scorecard.render(result)
    assert "evidence recall" in text and "stale evidence" in text and "words/q" in text
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("evidence handed on"))
    assert lines[at + 2].split() == ["full", "2/4", "(50%)", "1/3", "(33%)", "1/1", "(100%)",
                           "8", "/", "15"]
    qs = [dict(q_(r["id"], r["category"]), answerable=r["answerable"]) for r in recs]
    page = html_report.index_page(result, recs, qs)
    assert "evidence recall" in page and ">2/4 (50%)</t" in page and ">8 / 15</t" in page
    old = {"variants": {"full": {**result["variants"]["full"], "overall": {
        k: v for k, v in result["variants"]["full"]["overall"].items()
        if not k.startswith("evidence")}}}}
    rows = [t for t in scorecard.report_tables(old) if t[0].startswith("evidence")][0][2]
    assert rows == [["full", "-", "-", "-", "-"]]                  # a summary from before


# ------------------------------------------------------------------ --json, run folders

def fake_ask(question, **kw):
    """Both rate passages handed on; the old one labelled only when versioning is on."""
    return {"answer": "Maren charges £1,550 a day [c1].", "abstained": False,
            "time_mode": "present", "verdict": "SHIP", "checks": {"rules_ok": True},
            "sources": [NEW, OLD if kw["use_version"] else STALE],
            "ranking": [], "retrieved": [], "stages": []}


@pytest.fixture
def fake_harness(monkeypatch):
    mod = types.ModuleType("verso.harness")
    mod.load = lambda **kw: ("IDX", types.SimpleNamespace(name="fake"))
    mod.ask = lambda question, index=None, backend=None, **kw: fake_ask(question, **kw)
    monkeypatch.setitem(sys.modules, "verso.harness", mod)
    monkeypatch.setattr(verso, "harness", mod, raising=False)
    return mod


def _run(tmp_path, capsys, out, *extra):
    v = tmp_path / "vault"
    (v / "rates").mkdir(parents=True, exist_ok=True)
    (v / "rates" / "new.md").write_text("# Rates 2026\nMaren's day rate is now £1,550.\n")
    (v / "rates" / "old.md").write_text("# Rates 2025\nThe day rate was £1,510.\n")
    qf = tmp_path / "q.jsonl"
    qf.write_text("\n".join(json.dumps(dict(q_(f"g{i}"), answer="Maren: £1550."))
                            for i in (1, 2)))
    assert ev.main(["--vault", str(v), "--questions", str(qf), "--out", str(out),
                    "--variant", "full", "hybrid", *extra]) == 0
    return capsys.readouterr().out


def test_json_and_run_folder_carry_the_evidence(tmp_path, capsys, fake_harness):
    res = json.loads(_run(tmp_path, capsys, tmp_path / "run" / "dev", "--json"))
    full, hybrid = res["variants"]["full"]["overall"], res["variants"]["hybrid"]["overall"]
    assert full["evidence_recall"] == {"k": 2, "n": 2, "p": 1.0}
    assert full["evidence_stale"]["k"] == 0 and hybrid["evidence_stale"]["k"] == 2
    assert full["evidence_words"] == {"mean": 11.0, "p95": 11, "n": 2}
    assert res["variants"]["full"]["by_category"]["current"]["evidence_stale"]["n"] == 2
    rec = ev.load_records(tmp_path / "run" / "dev")[0]
    assert {"evidence_recall", "evidence_stale", "evidence_recall_all",
            "evidence_words"} <= set(rec)


def _splits_tool():
    path = Path(__file__).resolve().parents[1] / "tools" / "splits.py"
    spec = importlib.util.spec_from_file_location("splits_tool", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_splits_table_one_row_per_split(tmp_path, capsys, fake_harness):
    run = tmp_path / "run"
    _run(tmp_path, capsys, run / "dev")
    chat = [dict(r, variant="chat", turn=1) for r in _records()]      # a conversation split
    chat[0] = {k: v for k, v in chat[0].items() if not k.startswith("evidence")}
    ev.save_run(run / "conv", chat, {}, [], {})
    splits = _splits_tool()
    assert splits.main(["table", str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("  ")[0] == "split" and len(lines) == 3
    rows = {r[0]: r for r in splits.table(run)[1:]}
    # conv: h1 lacks 1510 in its answer; SHIP: c1, c3, h1; c1 predates the measures,
    # so evidence over c2 (stale), c3 (no 1550), h1 (both facts, both files), r1
    assert rows["conv"] == ["conv", "chat", "4/5", "2/3", "1/3", "1/2", "1/1", "7.8"]
    assert rows["dev"] == ["dev", "full", "2/2", "2/2", "2/2", "0/2", "-", "11.0"]
    hybrid = splits.table(run, "hybrid")[1:]
    assert hybrid[1] == ["dev", "hybrid", "2/2", "2/2", "2/2", "2/2", "-", "11.0"]
    assert hybrid[0][:2] == ["conv", "chat"]                 # its one variant
    assert splits.table(run, "bm25")[2] == ["dev", "no bm25", *["-"] * 6]
    held = splits.split_row("x", [dict(r, verdict="ESCALATE") for r in chat])
    assert held[2:4] == ["4/5", "0/0"]                      # nothing shipped
    assert splits.main(["table", str(tmp_path / "nothing")]) == 2
    assert "holds no SPLIT/records.jsonl" in capsys.readouterr().err


def test_splits_budget_rows_show_every_kind_of_label():
    splits = _splits_tool()
    kinds = {"statement": {"n": 3, "right": 2, "wrong": 1, "other": 0},
             "entry": {"n": 0, "right": 0, "wrong": 0, "other": 0}}
    got = {"budgets": [300, 1000], "variants": {"full": {"budgets": {
        "1000": {"labels_by_kind": kinds}}}}}
    assert splits.label_row("dev", got) == ["dev", "3 (2/1)", "-", "0 (0/0)", "-"]
    got["variants"]["full"]["budgets"]["1000"] = {}          # a run before the measure
    assert splits.label_row("dev", got) == ["dev", "-", "-", "-", "-"]


def test_splits_budget_rows_count_why_each_miss_was_missed():
    splits = _splits_tool()
    cell = {"recall": {"k": 1, "n": 3}, "by_kind": {"change": {"k": 0, "n": 0}},
            "stale": {"k": 0, "n": 1}, "labels": {"n": 0, "right": 0, "wrong": 0}}
    got = {"budgets": [1000], "baseline": {"1000": {"recall": {"k": 2, "n": 3}}},
           "variants": {"full": {"budgets": {"1000": cell}, "found_at5": {"k": 3, "n": 3}}},
           "missed": {"full": ["a", "b"]},
           "missed_why": {"full": {"a": "cut", "b": "in other words"}}}
    got["stale_why"] = {"full": {"a": "undated"}}
    row = splits.budget_row("dev", "tuning", got)
    assert row[-3:] == ["a b", "in other words 1, cut 1", "undated 1"]
    assert len(row) == len(splits.BUDGET_HEADER) - 2 * 2    # one budget of three: 2 x 2 fewer
    del got["missed_why"], got["stale_why"]                  # a run before the reasons
    assert splits.budget_row("dev", "tuning", got)[-2:] == ["n/a", "n/a"]


def test_splits_run_each_keeps_the_order_given_and_every_exit_code(tmp_path):
    splits = _splits_tool()
    slow = tmp_path / "slow.py"
    slow.write_text("import time, sys\ntime.sleep(1.0)\nsys.exit(3)\n")
    quick = tmp_path / "quick.py"
    quick.write_text("pass\n")
    started = time.monotonic()
    codes = splits.run_each([("a", [str(slow)]), ("b", [str(quick)]), ("c", [str(slow)])],
                            jobs=2)
    assert list(codes) == ["a", "b", "c"] and codes == {"a": 3, "b": 0, "c": 3}
    assert time.monotonic() - started < 1.8      # c started when b ended, beside a (2 s in turn)


def test_splits_sum_row_adds_every_split_of_a_role():
    splits = _splits_tool()

    def run(k300, k1000, base, change, stale):
        last = {"recall": {"k": k1000, "n": 10}, "by_kind": {"change": change},
                "stale": stale}
        return {"budgets": [300, 600, 1000], "variants": {"full": {"budgets": {
            "300": {"recall": {"k": k300, "n": 10}}, "600": {"recall": {"k": 7, "n": 10}},
            "1000": last}}}, "baseline": {b: {"recall": {"k": base, "n": 10}}
                                          for b in ("300", "600", "1000")}}
    row = splits.sum_row("frozen", [run(5, 9, 4, {"k": 2, "n": 3}, {"k": 1, "n": 4}),
                                    run(6, 8, 7, {"k": 0, "n": 0}, {"k": 0, "n": 2})])
    assert row[:10] == ["all frozen", "2 splits", "11/20", "14/20", "17/20", "11/20",
                        "11/20", "11/20", "2/3", "1/6"]
    assert len(row) == len(splits.BUDGET_HEADER)


def test_splits_role_keeps_only_that_roles_splits():
    splits = _splits_tool()
    every = splits.splits()
    tuning = splits.chosen("tuning")
    assert tuning and set(tuning) < set(every)
    assert all(row["role"] == "tuning" for row in tuning.values())
    assert set(splits.chosen("frozen")) == set(every) - set(tuning)
