"""rerank: one batched judgment, ordering with ties, and the abstain gate."""

import pytest

from verso import models
from verso import line_scores
from verso import cost_ledger
from verso.rerank import RELEVANCE_THRESHOLD, gate, rerank
from verso.retrieve import Candidate


def cand(i, text="", fused=0.0, dense=None, private=False, path=None):
    chunk = {"id": i, "path": path or f"notes/{i}.md", "heading": f"h{i}",
             "section_date": None, "date": "2026-06-01", "date_source": "filename",
             "family": f"notes/{i}.md", "is_latest": True, "entry_latest": None,
             "private": private, "text": text or f"text {i}"}
    return Candidate(chunk=chunk, fused=fused, dense_score=dense)


class FakeJudge:
    def __init__(self, probs):
        self.probs, self.calls = probs, []

    def relevance(self, query, passages, stage="rerank", ledger=None):
        self.calls.append((query, passages, stage))
        return {k: self.probs[k] for k in passages if k in self.probs}


def test_one_batched_call_and_sorted_by_relevance_then_fused():
    cands = [cand(1, fused=0.03), cand(2, fused=0.02, private=True), cand(3, fused=0.01),
             cand(4, fused=0.04)]
    judge = FakeJudge({"p1": 0.2, "p2": 0.9, "p3": 0.7, "p4": 0.7})
    out = rerank("q", cands, judge, keep=2)
    assert len(judge.calls) == 1 and judge.calls[0][2] == "rerank"
    passages = judge.calls[0][1]
    assert list(passages) == ["p1", "p2", "p3", "p4"]
    assert passages["p2"]["private"] is True and passages["p1"]["private"] is False
    assert set(passages["p1"]) == {"text", "heading", "path", "date", "dense_score", "private"}
    assert [c.id for c in out] == [2, 4, 3, 1]          # 0.7 tie: fused 0.04 before 0.01
    assert [c.relevance for c in out] == [0.9, 0.7, 0.7, 0.2]
    assert cands[0].relevance is None                   # inputs untouched


def test_equal_scores_keep_incoming_order():
    cands = [cand(i) for i in (5, 6, 7)]
    out = rerank("q", cands, FakeJudge({"p1": 0.5, "p2": 0.5, "p3": 0.5}))
    assert [c.id for c in out] == [5, 6, 7]


def test_missing_judgment_is_an_error_not_a_silent_drop():
    with pytest.raises(models.BackendError, match="p2"):
        rerank("q", [cand(1), cand(2)], FakeJudge({"p1": 0.9}))


def test_empty_candidates():
    assert rerank("q", [], FakeJudge({})) == []


def test_builtin_judge_puts_the_answer_first():
    cands = [cand(1, "Ask Maren about her day rate next week.", fused=0.03, dense=0.6),
             cand(2, "The flat has two bedrooms.", fused=0.02, dense=0.2),
             cand(3, "Maren's day rate is £600 from October.", fused=0.01, dense=0.5)]
    ledger = cost_ledger.Ledger()
    out = rerank("What is Maren's day rate?", cands, line_scores.BuiltinJudge(), ledger=ledger)
    assert [c.id for c in out] == [3, 1, 2]
    assert out[0].relevance >= RELEVANCE_THRESHOLD > out[2].relevance
    assert len(ledger.rows) == 1 and ledger.rows[0]["stage"] == "rerank"


def test_gate():
    a, b = cand(1, path="work/rates.md"), cand(2)
    a.relevance, b.relevance = 0.21, 0.05
    assert gate([b, a]) == ("no passage reached 0.5 relevance; best was 0.21 from "
                            "work/rates.md")
    a.relevance = 0.5
    assert gate([b, a]) is None
    assert gate([b, a], threshold=0.6).startswith("no passage reached 0.6")
    assert gate([]) == "no passages were retrieved"
    with pytest.raises(ValueError):
        gate([cand(3)])


class IdfJudge(FakeJudge):
    def relevance(self, query, passages, stage="rerank", ledger=None, idf=None):
        self.idf = idf
        return super().relevance(query, passages, stage, ledger)


def test_idf_goes_to_the_judge_only_when_given():
    judge = IdfJudge({"p1": 0.5})
    rerank("q", [cand(1)], judge, idf={"rate": 2.0})
    assert judge.idf == {"rate": 2.0}
    rerank("q", [cand(1)], FakeJudge({"p1": 0.5}))   # a judge without idf= still works


def test_corpus_idf_is_the_bm25_idf_and_cached():
    from types import SimpleNamespace
    from verso import bm25
    from verso.rerank import corpus_idf
    chunks = [{"id": i, "path": f"{i}.md", "heading": "", "text": t}
              for i, t in enumerate(["day rate 550", "day off", "flat lease"])]
    index = SimpleNamespace(chunks=chunks, cache={}, manifest={}, dir=None)
    idf = corpus_idf(index)
    bm = bm25.load_bm25(index)
    assert idf["rate"] == pytest.approx(float(bm["idf"][bm["vocab"]["rate"]]))
    assert idf["rate"] > idf["day"]                 # df 1 against df 2
    assert corpus_idf(index) is idf


class PartJudge(FakeJudge):
    """A judge that also scores each part of a question (as the builtin one does)."""

    def relevance_by_part(self, query, passages, stage="rerank", ledger=None):
        self.calls.append((query, passages, stage))
        return {k: self.probs[k] for k in passages}


def test_several_parts_each_get_a_passage_from_another_note():
    # [whole, part 1, part 2]: p1..p3 answer part 1 (two from note a); p4 (note c)
    # answers part 2 but ranks last; keep=2 must hold p4, the best of part 2 outside a
    cands = [cand(1, path="a.md", fused=0.4), cand(2, path="a.md", fused=0.3),
             cand(3, path="b.md", fused=0.2), cand(4, path="c.md", fused=0.1)]
    judge = PartJudge({"p1": [0.8, 0.9, 0.7], "p2": [0.7, 0.8, 0.6],
                       "p3": [0.6, 0.7, 0.3], "p4": [0.3, 0.1, 0.55]})
    out = rerank("Who signs off, and what's their phone?", cands, judge, keep=2)
    assert len(judge.calls) == 1
    assert [c.id for c in out] == [1, 4, 2, 3]
    assert [c.relevance for c in out] == [0.9, 0.55, 0.8, 0.7]   # max over whole and parts


def test_a_part_passage_below_the_gate_is_not_promoted():
    cands = [cand(1, path="a.md"), cand(2, path="a.md"), cand(3, path="c.md")]
    judge = PartJudge({"p1": [0.8, 0.9, 0.7], "p2": [0.7, 0.8, 0.6],
                       "p3": [0.3, 0.1, RELEVANCE_THRESHOLD - 0.01]})
    assert [c.id for c in rerank("q", cands, judge, keep=2)] == [1, 2, 3]
