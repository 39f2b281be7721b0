"""evaluate.py: metrics on hand-worked cases, the question validator, runs with a fake ask."""

import json
from pathlib import Path
import math
import sys
import types

import pytest

import verso
from verso import evaluate as ev
from verso import measures
from verso import scorecard


def q_(id="q1", category="current", time_mode="present", key=("1550",), forbidden=(),
       gold=("rates.md",), answerable=True, answer="The day rate is 1550."):
    return {"id": id, "question": f"question {id}?", "category": category,
            "time_mode": time_mode, "answer": answer, "key_facts": list(key),
            "forbidden_facts": list(forbidden), "gold_files": list(gold),
            "answerable": answerable}


def a_(text="", abstained=False, sources=(), ranking=(), retrieved=(), time_mode="present",
       verdict="SHIP", rules_ok=True, stages=()):
    return {"answer": text, "abstained": abstained, "sources": [{"path": p} for p in sources],
            "ranking": list(ranking), "retrieved": list(retrieved), "time_mode": time_mode,
            "verdict": verdict, "checks": {"rules_ok": rules_ok}, "stages": list(stages)}


# ------------------------------------------------------------------ normalisation

def test_normalise_case_whitespace_thousands():
    assert measures.normalise("  The  Day\n\tRATE is £1,550 ") == "the day rate is £1550"
    assert measures.normalise("1,234,567 and 3,4 and 2,10") == "1234567 and 3,4 and 2,10"
    assert measures.normalise("Maren\u2019s rate \u2013 new") == "maren's rate - new"


@pytest.mark.parametrize("text,fact,found", [
    ("MAREN charges", "maren", True),
    ("the day\n   rate", "Day Rate", True),
    ("it is 1,550 now", "1550", True),
    ("it is 1550 now", "1,550", True),
    ("£1,550/day", "1550", True),
    ("£1,550 a day", "£1550", True),
    ("it is 11550", "1550", False),        # not inside a longer number
    ("it is 15,500", "1550", False),
    ("it is 1550.5", "1550", False),       # not the integer part of a decimal
    ("it is 1550.", "1550", True),         # a full stop is no decimal
    ("September 2026", "Sept", False),     # whole words only
    ("(see [c1])", "c1", True),
    ("anything", "   ", False),
])
def test_has_fact(text, fact, found):
    assert measures.has_fact(text, fact) is found


def test_count_sentences():
    assert measures.count_sentences("One. Two! Three? Four.") == 4
    assert measures.count_sentences("Rate is 1.5 a day [c1]. Since May [c2].") == 2
    assert measures.count_sentences("- first item\n- second item\n\n") == 2
    assert measures.count_sentences("") == 0


# ------------------------------------------------------------------ answer_correct

def test_answer_correct_key_forbidden_and_length():
    q = q_(key=("1550", "Maren"), forbidden=("1510",))
    assert measures.answer_correct(q, a_("Maren charges £1,550 a day [c1]."))
    assert not measures.answer_correct(q, a_("Maren charges a lot [c1]."))          # key fact missing
    assert not measures.answer_correct(q, a_("Maren: £1,550, was £1,510 [c1]."))   # forbidden
    five = "Maren charges 1550. " + "More. " * 4
    assert measures.count_sentences(five) == 5 and measures.answer_correct(q, a_(five))
    assert not measures.answer_correct(q, a_(five + "Six."))                       # 6 sentences
    assert not measures.answer_correct(q, a_("Maren charges 1550.", abstained=True))


def test_answer_correct_unanswerable_only_when_abstained():
    q = q_(category="refuse", key=(), gold=(), answerable=False)
    assert measures.answer_correct(q, a_("I could not find that in your notes.", abstained=True))
    assert not measures.answer_correct(q, a_("Probably 42."))


# --------------------------------------------------------------- retrieval metrics

def test_source_found_at5():
    assert measures.source_found_at5(["g.md"], [{"path": p} for p in "abcd"] + [{"path": "g.md"}])
    assert not measures.source_found_at5(["g.md"], [{"path": p} for p in "abcde"] + [{"path": "g.md"}])
    assert measures.source_found_at5(["d/g.md"], ["d\\g.md"])       # windows separators
    assert not measures.source_found_at5(["g.md"], [])


def test_recall_all_at10_counts_distinct_paths():
    ranked = ["v1"] * 5 + [str(i) for i in range(8)] + ["v2"]   # v2 is 10th distinct path
    assert measures.recall_all_at10(["v1", "v2"], ranked)
    assert not measures.recall_all_at10(["v1", "v2"], ["v1"] + [str(i) for i in range(9)] + ["v2"])
    assert not measures.recall_all_at10(["v1", "v2"], ["v1"])


def test_reciprocal_rank_and_mrr():
    assert measures.reciprocal_rank(["g"], ["x", "x", "y", "g", "g"]) == pytest.approx(1 / 3)
    assert measures.reciprocal_rank(["g", "h"], ["h", "g"]) == 1.0
    assert measures.reciprocal_rank(["g"], ["x", "y"]) == 0.0
    recs = [ev.score(q_(id=f"q{i}"), a_(ranking=r), "full")
            for i, r in enumerate([["rates.md"], ["x", "rates.md"], ["x", "y", "z", "rates.md"],
                                   ["x"]])]
    mrr = ev.summarise(recs)["overall"]["mrr"]
    assert mrr["n"] == 4 and mrr["p"] == pytest.approx((1 + 0.5 + 0.25 + 0) / 4)


# ---------------------------------------------------------------- percentile, McNemar

def test_percentile_nearest_rank():
    xs = [15, 20, 35, 40, 50]               # the textbook nearest-rank example
    assert [measures.percentile(xs, p) for p in (5, 30, 40, 50, 100)] == [15, 20, 20, 35, 50]
    assert measures.percentile(range(1, 101), 95) == 95
    assert measures.percentile(range(1, 11), 95) == 10
    assert measures.percentile([7], 50) == 7 and measures.percentile([], 50) is None


def test_mcnemar_worked_cases():
    assert measures.mcnemar(4, 0) == pytest.approx(0.125)           # 2 * 1 / 16
    assert measures.mcnemar(0, 4) == pytest.approx(0.125)
    assert measures.mcnemar(5, 0) == pytest.approx(0.0625)          # 2 * 1 / 32
    # b=10, c=2: 2 * (C(12,0) + C(12,1) + C(12,2)) / 2^12 = 2 * (1 + 12 + 66) / 4096
    assert measures.mcnemar(10, 2) == pytest.approx(158 / 4096)
    assert round(measures.mcnemar(10, 2), 4) == 0.0386
    assert measures.mcnemar(6, 1) == pytest.approx(2 * (1 + 7) / 128)
    assert measures.mcnemar(3, 3) == 1.0 and measures.mcnemar(0, 0) == 1.0 and measures.mcnemar(1, 0) == 1.0


def test_mcnemar_matches_brute_force_enumeration():
    # p = P(|wins - n/2| >= |b - n/2|) under a fair coin, by listing all 2^n outcomes
    for b, c in [(7, 2), (3, 9), (1, 5)]:
        n = b + c
        extreme = sum(1 for m in range(2 ** n)
                      if abs(bin(m).count("1") - n / 2) >= abs(b - n / 2))
        assert measures.mcnemar(b, c) == pytest.approx(extreme / 2 ** n)


# ------------------------------------------------------------------ records, summary

def test_score_record_fields():
    q = q_(key=("1550",), forbidden=("1510",))
    st = [{"name": "retrieve", "ms": 3.0, "input_tokens": 5, "output_tokens": 0,
           "dollars": 0.0},
          {"name": "generate", "ms": 7.0, "input_tokens": 100, "output_tokens": 20,
           "dollars": 0.002}]
    r = ev.score(q, a_("It was 1510, now 1550 [c1].", sources=["rates.md"], stages=st,
                       ranking=["rates.md"], verdict="ESCALATE", rules_ok=False), "full")
    assert r["id"] == "q1" and r["variant"] == "full" and r["category"] == "current"
    assert r["stale"] is True and r["answer_correct"] is False
    assert r["source_found_at5"] is True and r["recall_all_at10"] is None  # not change
    assert r["citation_valid"] is False and r["route_correct"] is True
    assert r["total_ms"] == 10.0 and r["tokens"] == 125 and r["dollars"] == 0.002
    assert r["evidence_recall"] is False and r["evidence_stale"] is False   # paths only
    assert r["evidence_recall_all"] is None and r["evidence_words"] == 0
    json.dumps(r)                                                   # a JSONL line


def test_score_gold_label_stays_out_of_route_and_abstain_fields():
    q = q_(category="refuse", time_mode="any", key=(), gold=(), answerable=False)
    r = ev.score(q, a_("not in the notes", abstained=True, time_mode="present",
                       verdict="ABSTAIN"), "full")
    assert r["abstain_correct"] is True and r["false_abstain"] is None
    assert r["citation_valid"] is None and r["source_found_at5"] is None
    assert r["route_correct"] is False and r["stale"] is None


def _records():
    qs = [q_("c1", "current", key=("1550",), forbidden=("1510",)),
          q_("c2", "current", key=("1550",), forbidden=("1510",)),
          q_("c3", "current", key=("1550",), forbidden=("1510",)),
          q_("r1", "refuse", time_mode="any", key=(), gold=(), answerable=False),
          q_("h1", "change", time_mode="history", key=("1510", "1550"),
             gold=("v1.md", "v2.md"))]
    ans = [a_("1550 [c1].", sources=["rates.md"], verdict="SHIP"),
           a_("1510 [c1].", sources=["old.md"], verdict="ESCALATE", rules_ok=False),
           a_("nothing", abstained=True, verdict="ABSTAIN"),
           a_("nothing", abstained=True, verdict="ABSTAIN", time_mode="any"),
           a_("1510 then 1550.", sources=["v1.md"], retrieved=["v1.md", "v2.md"],
              time_mode="present", verdict="ESCALATE")]
    return [ev.score(q, a, "full") for q, a in zip(qs, ans)]


def test_summarise_overall_and_by_category():
    s = ev.summarise(_records())
    o, cur = s["overall"], s["by_category"]["current"]
    assert list(s["by_category"]) == ["current", "change", "refuse"]   # CATEGORIES order
    assert o["answer_correct"] == {"k": 3, "n": 5, "p": 0.6}
    assert cur["answer_correct"] == {"k": 1, "n": 3, "p": pytest.approx(1 / 3)}
    assert o["current_correct"]["k"] == 1 and o["current_correct"]["n"] == 3
    assert o["stale_rate"]["k"] == 1 and o["stale_rate"]["n"] == 3
    assert o["source_found_at5"] == {"k": 2, "n": 4, "p": 0.5}
    assert o["recall_all_at10"] == {"k": 1, "n": 1, "p": 1.0}
    assert o["abstain_correct"] == {"k": 1, "n": 1, "p": 1.0}
    assert o["false_abstain"] == {"k": 1, "n": 4, "p": 0.25}
    assert o["citation_valid"] == {"k": 2, "n": 3, "p": pytest.approx(2 / 3)}
    assert o["route_accuracy"] == {"k": 4, "n": 5, "p": 0.8}
    assert o["verdicts"] == {"SHIP": 1, "ESCALATE": 2, "ABSTAIN": 2}
    assert o["escalate_on_correct"] == {"k": 1, "n": 2, "p": 0.5}     # c1 ship, h1 escalate
    assert o["escalate_on_incorrect"] == {"k": 1, "n": 1, "p": 1.0}   # c2
    assert scorecard.fmt_rate(cur["answer_correct"]) == "1/3 (33%)"
    assert scorecard.fmt_rate(s["by_category"]["refuse"]["stale_rate"]) == "-"


def test_stage_latency_and_cost_summary():
    recs = []
    for i, ms in enumerate([10, 20, 30, 40]):
        st = [{"name": "retrieve", "ms": ms, "input_tokens": 1, "output_tokens": 0,
               "dollars": 0.0},
              {"name": "generate", "ms": 100, "input_tokens": 10, "output_tokens": 5,
               "dollars": 0.01}]
        recs.append(ev.score(q_(id=f"q{i}"), a_("1550", stages=st), "full"))
    st = ev.summarise(recs)["overall"]["stages"]
    assert st["retrieve"]["p50_ms"] == 20 and st["retrieve"]["p95_ms"] == 40
    assert st["total"]["p50_ms"] == 120 and st["generate"]["tokens_per_question"] == 15
    assert st["total"]["dollars"] == pytest.approx(0.04)
    assert st["total"]["dollars_per_question"] == pytest.approx(0.01)


def test_paired_and_compare_runs():
    full = [ev.score(q_(id=f"q{i}"), a_("1550" if i < 5 else "no", sources=["rates.md"]),
                     "full") for i in range(6)]
    base = [ev.score(q_(id=f"q{i}"), a_("1550" if i == 5 else "no"), "hybrid")
            for i in range(6)]
    p = ev.paired(full + base, "full", "hybrid", "answer_correct")
    assert (p["wins"], p["losses"], p["n"]) == (5, 1, 6)
    assert p["p"] == pytest.approx(2 * (1 + 6) / 64)
    flips = ev.compare_runs(base, [dict(r, answer_correct=not r["answer_correct"])
                                   if r["id"] in ("q0", "q5") else r for r in base])
    assert flips == {"hybrid": {"answer_correct": {"fixed": ["q0"], "broken": ["q5"]}}}


# ------------------------------------------------------------------------ validator

GOOD = q_(id="g1", key=("£1,550", "Maren"), gold=("rates/2026-10 rates.md",),
          answer="Maren charges £1550 a day.")


def _vault(tmp_path):
    v = tmp_path / "vault"
    (v / "rates").mkdir(parents=True)
    (v / "rates" / "2026-10 rates.md").write_text("# Rates\nMaren's day rate: £1550.\n")
    return v


def _write(path, lines):
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines))
    return path


def test_check_questions_reports_each_bad_line(tmp_path):
    v = _vault(tmp_path)
    bad = [GOOD,                                                         # 1 ok
           "{not json",                                                  # 2
           {k: x for k, x in GOOD.items() if k != "answer"} | {"id": "g3", "extra": 1},
           dict(GOOD, id="g4", category="trivia", time_mode="now"),      # 4
           dict(GOOD),                                                   # 5 duplicate id
           dict(GOOD, id="g6", gold_files=["rates/missing.md"]),         # 6
           dict(GOOD, id="g7", key_facts=["1510"], answer="1510"),       # 7 not verbatim
           dict(GOOD, id="g8", answerable=False),                        # 8
           dict(GOOD, id="g9", key_facts="1550", answerable="yes"),      # 9 wrong types
           "",                                                           # blank: skipped
           dict(GOOD, id="g11", answer="It is £1550 for sure.")]         # 11 reference bad
    problems = ev.check_questions(_write(tmp_path / "q.jsonl", bad), v)
    lines = sorted({int(p.split(":")[0].split()[1]) for p in problems})
    assert lines == [2, 3, 4, 5, 6, 7, 8, 9, 11]
    text = "\n".join(problems)
    for needle in ["line 2: invalid JSON", "line 3: missing field 'answer'",
                   "line 3: unknown field 'extra'", "line 4: category 'trivia'",
                   "line 4: time_mode 'now'", "line 5: duplicate id 'g1' (first on line 1)",
                   "line 6: gold file 'rates/missing.md' not found",
                   "line 7: key fact '1510' appears in no gold file",
                   "line 8: answerable is false", "line 9: 'key_facts' must be a list",
                   "line 9: 'answerable' must be bool",
                   "line 11: the reference answer"]:
        assert needle in text, needle


def test_check_names_the_longer_number_a_key_fact_sits_inside(tmp_path):
    """A key fact written shorter than the note writes it ("155" for "1550", "£2,250"
    for "£2,250.00") is found in no gold file: has_fact counts only the whole number,
    and --check says how the note writes it."""
    v = _vault(tmp_path)
    short = dict(GOOD, key_facts=["155"], answer="155")
    got = ev.check_questions(_write(tmp_path / "s.jsonl", [short]), v)
    assert got[0] == ("line 1: key fact '155' appears in no gold file (a gold file has "
                      "'£1550': write the fact as the note does)")
    absent = dict(GOOD, key_facts=["1510"], answer="1510")
    assert ev.check_questions(_write(tmp_path / "a.jsonl", [absent]), v)[0] == (
        "line 1: key fact '1510' appears in no gold file")


def test_check_questions_clean_file_and_path_escape(tmp_path):
    v = _vault(tmp_path)
    (tmp_path / "outside.md").write_text("1550")
    assert ev.check_questions(_write(tmp_path / "ok.jsonl", [GOOD]), v) == []
    empty = _write(tmp_path / "empty.jsonl", [dict(GOOD, id=" ")])
    assert ev.check_questions(empty, v) == ["line 1: 'id' is empty"]
    esc = dict(GOOD, gold_files=["../outside.md"], key_facts=["1550"])
    assert "not found" in ev.check_questions(_write(tmp_path / "e.jsonl", [esc]), v)[0]


def test_main_check(tmp_path, capsys):
    v = _vault(tmp_path)
    good = _write(tmp_path / "ok.jsonl", [GOOD])
    bad = _write(tmp_path / "bad.jsonl", [GOOD, "{"])
    assert ev.main(["--check", str(good), "--vault", str(v)]) == 0
    assert "ok: 1 questions" in capsys.readouterr().out
    assert ev.main(["--check", str(bad), "--vault", str(v)]) == 1
    assert capsys.readouterr().out.startswith("line 2: invalid JSON")
    assert ev.main(["--check", str(good), "--vault", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: vault") and err.count("\n") == 1
    assert ev.main(["--questions", str(tmp_path / "nope.jsonl"), "--vault", str(v)]) == 2
    assert "question file" in capsys.readouterr().err


# --------------------------------------------------------------------------- running

def fake_ask(question, **kw):
    """Right and sourced only with rerank on; never sees the gold time mode."""
    assert set(kw) == set(ev.ASK_KEYS)
    good = kw["rerank"]
    return {"answer": "Maren charges £1,550 a day [c1]." if good else "Unsure [c1].",
            "abstained": False, "time_mode": "present", "verdict": "SHIP",
            "sources": [{"path": "rates/2026-10 rates.md" if good else "x.md"}],
            "ranking": ["x.md", "rates/2026-10 rates.md"], "retrieved": [],
            "checks": {"rules_ok": True},
            "stages": [{"name": "retrieve", "ms": 1.0, "input_tokens": 2,
                        "output_tokens": 0, "dollars": 0.0}]}


def test_run_variant_with_fake_ask():
    seen = []

    def ask(question, **kw):
        seen.append((question, kw))
        return types.SimpleNamespace(to_dict=lambda: fake_ask(question, **kw))
    qs = [GOOD, dict(GOOD, id="g2")]
    recs = ev.run_variant(qs, ask, "no-rerank", progress=seen.append)
    assert seen[0] == "no-rerank: question 1/2"
    assert seen[1] == (GOOD["question"], {"method": "hybrid", "use_version": True,
                                          "rerank": False, "expand_links": True,
                                          "search_words": None})
    assert [r["id"] for r in recs] == ["g1", "g2"]
    assert all(r["variant"] == "no-rerank" and not r["answer_correct"] for r in recs)
    full = ev.run_variant(qs, ask, "full")
    assert all(r["answer_correct"] and r["source_found_at5"] for r in full)
    assert full[0]["reciprocal_rank"] == 0.5


@pytest.fixture
def fake_harness(monkeypatch):
    mod = types.ModuleType("verso.harness")
    mod.load = lambda index=None, vault=None, backend="auto", judge=None, writer=None: (
        "IDX", types.SimpleNamespace(name="fake"))
    mod.ask = lambda question, index=None, backend=None, **kw: fake_ask(question, **kw)
    monkeypatch.setitem(sys.modules, "verso.harness", mod)
    monkeypatch.setattr(verso, "harness", mod, raising=False)   # `from verso import harness`
    return mod


def test_main_run_json_out_and_compare(tmp_path, capsys, fake_harness):
    v = _vault(tmp_path)
    qf = _write(tmp_path / "q.jsonl", [GOOD, dict(GOOD, id="g2")])
    out = tmp_path / "runs" / "a"
    argv = ["--vault", str(v), "--questions", str(qf), "--json", "--out", str(out)]
    assert ev.main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert list(res["variants"]) == list(ev.DEFAULT_VARIANTS)
    full = res["variants"]["full"]
    assert full["overall"]["answer_correct"] == {"k": 2, "n": 2, "p": 1.0}
    assert full["by_category"]["current"]["source_found_at5"]["k"] == 2
    assert res["variants"]["hybrid"]["overall"]["answer_correct"]["k"] == 0
    for name in ("source_found_at5", "recall_all_at10", "mrr", "answer_correct",
                 "stale_rate", "abstain_correct", "false_abstain", "citation_valid",
                 "route_accuracy", "evidence_recall", "evidence_stale",
                 "evidence_recall_all", "evidence_words"):
        assert name in full["overall"]
    pair = [p for p in res["pairs"] if p["b"] == "no-rerank" and p["metric"] ==
            "answer_correct"][0]
    assert (pair["wins"], pair["losses"], pair["p"]) == (2, 0, 0.5)
    assert len(res["questions_sha256"]) == 64
    assert {f.name for f in out.iterdir()} >= {"records.jsonl", "summary.json",
                                               "command.txt", "config.json"}
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["questions_sha256"] == res["questions_sha256"] and "git_commit" in cfg
    assert cfg["backend"] == "fake" and cfg["variants"] == list(ev.DEFAULT_VARIANTS)
    assert "--vault" in (out / "command.txt").read_text()
    assert len(ev.load_records(out)) == 10                       # 2 questions x 5 variants

    assert ev.main(argv[:4] + ["--variant", "full", "hybrid"]) == 0        # text table
    text = capsys.readouterr().out
    assert "full vs hybrid  answer_correct: wins 2, losses 0" in text
    assert "2/2 (100%)" in text and "answer correct by category:" in text
    assert "evidence recall" in text and "stale evidence" in text and "words/q" in text

    b = tmp_path / "runs" / "b"
    fake_harness.ask = lambda question, index=None, backend=None, **kw: fake_ask(
        question, **dict(kw, rerank=not kw["rerank"]))
    assert ev.main(argv[:4] + ["--out", str(b), "--variant", "full"]) == 0
    capsys.readouterr()
    assert ev.main(["--compare", str(out), str(b)]) == 0
    assert "full answer_correct: fixed -; broken g1, g2" in capsys.readouterr().out
    import importlib.util
    spec = importlib.util.spec_from_file_location("rig_runs", Path(__file__).parent /
                                                  "rig_runs.py")
    rig = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rig)
    table = rig.table([f"{out}=A", str(b)], str(out)).splitlines()
    heads = [h.strip() for h in table[0].strip("|").split("|")]
    a_row = dict(zip(heads, (c.strip() for c in table[2].strip("|").split("|"))))
    b_row = dict(zip(heads, (c.strip() for c in table[3].strip("|").split("|"))))
    ships = sum(r["verdict"] == "SHIP" for r in ev.load_records(out) if r["variant"] == "full")
    assert a_row["run"] == "A" and a_row["correct"] == "2/2"
    assert a_row["SHIP right"] == f"{ships}/{ships}" and b_row["correct"] == "0/2"
    assert b_row["McNemar (wins/losses)"] == "0/2, p = 0.50"


def test_main_refuses_out_inside_vault_and_unrun_pairs(tmp_path, capsys, fake_harness):
    v = _vault(tmp_path)
    qf = _write(tmp_path / "q.jsonl", [GOOD])
    base = ["--vault", str(v), "--questions", str(qf)]
    assert ev.main(base + ["--out", str(v / "runs")]) == 2
    assert "inside the vault" in capsys.readouterr().err
    assert not (v / "runs").exists()
    assert ev.main(base + ["--index", str(v / ".idx")]) == 2
    assert "index dir" in capsys.readouterr().err
    assert ev.main(base + ["--variant", "full", "--pairs", "full:bm25"]) == 2
    assert "full:bm25" in capsys.readouterr().err
    assert ev.main(base + ["--variant", "full", "--pairs", "full"]) == 2
    assert "pairs full:" in capsys.readouterr().err
    bad = _write(tmp_path / "bad.jsonl", [dict(GOOD, category="x")])
    assert ev.main(["--vault", str(v), "--questions", str(bad)]) == 2
    assert "line 1: category" in capsys.readouterr().err


def test_compare_needs_run_folders(tmp_path, capsys):
    assert ev.main(["--compare", str(tmp_path), str(tmp_path)]) == 2
    assert "records.jsonl not found" in capsys.readouterr().err


def test_variants_table():
    assert dict(zip(ev.ASK_KEYS, ev.VARIANTS["hybrid"])) == {
        "method": "hybrid", "use_version": False, "rerank": False, "expand_links": True,
        "search_words": False}                  # a plain baseline asks no model for words
    assert ev.VARIANTS["full"] == ("hybrid", True, True, True, None)
    assert ev.VARIANTS["no-words"] == ev.VARIANTS["full"][:4] + (False,)
    assert ev.VARIANTS["no-links"][3] is False and math.isclose(measures.mcnemar(2, 2), 1.0)


def test_main_end_to_end_on_a_vault_it_has_never_seen(tmp_path, capsys):
    """The real harness, the builtin backend, a fresh vault and question file."""
    vault = tmp_path / "notes"
    (vault / "garden").mkdir(parents=True)
    (vault / "garden" / "shed quote 2026-02.md").write_text(
        "# Shed quote\n\nThe carpenter quoted 480 pounds for the new shed roof.\n")
    (vault / "garden" / "shed quote 2026-05.md").write_text(
        "# Shed quote\n\nThe carpenter now quotes 520 pounds for the new shed roof.\n")
    (vault / "garden" / "tomatoes.md").write_text(
        "# Tomatoes\n\nThe tomato variety this year is Sungold, sown on 12 March.\n")
    questions = tmp_path / "q.jsonl"
    rows = [
        dict(id="a", question="What does the carpenter quote for the shed roof now?",
             category="current", time_mode="present", answer="520 pounds",
             key_facts=["520"], forbidden_facts=["480"],
             gold_files=["garden/shed quote 2026-05.md"], answerable=True),
        dict(id="b", question="Which tomato variety am I growing?", category="lookup",
             time_mode="any", answer="Sungold", key_facts=["Sungold"], forbidden_facts=[],
             gold_files=["garden/tomatoes.md"], answerable=True),
        dict(id="c", question="What is the name of my plumber?", category="refuse",
             time_mode="any", answer="", key_facts=[], forbidden_facts=[], gold_files=[],
             answerable=False),
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = sorted(p for p in vault.rglob("*"))
    assert ev.main(["--check", str(questions), "--vault", str(vault)]) == 0
    capsys.readouterr()
    out = tmp_path / "run"
    code = ev.main(["--vault", str(vault), "--questions", str(questions), "--backend",
                    "builtin", "--variant", "full", "hybrid", "--out", str(out), "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    full = summary["variants"]["full"]["overall"]
    for name in ("source_found_at5", "recall_all_at10", "mrr", "answer_correct",
                 "stale_rate", "abstain_correct", "false_abstain", "citation_valid",
                 "route_accuracy"):
        assert name in full
    assert full["answer_correct"]["k"] == 3 and full["stale_rate"]["k"] == 0
    assert (out / "records.jsonl").exists() and (out / "summary.json").exists()
    assert sorted(p for p in vault.rglob("*")) == before      # nothing written in the vault
