"""The batched local judge: one request per stage, the question first, every passage
numbered, 0-10 scores through a JSON schema; what its reply leaves out is judged one
passage at a time."""

import json
import re

from verso import models
from verso import cost_ledger
from fakes import FakeOllama, overlap

T = 0.5
PASSAGES = {
    "1": {"path": "work/rates.md", "date": "2026-10-05", "heading": "Rates",
          "text": "Standard day rate: £760 per day."},
    "2": {"path": "move/email.md", "date": "2026-10-08", "heading": "Flights",
          "text": "Your flight moved to 21 November."},
}


class BatchFake(FakeOllama):
    """Answers a request with `format` by a JSON object of 0-10 scores, one per numbered
    item ("[n] ..."), from word overlap with the query; `leave_out` drops some keys."""

    def __init__(self, leave_out=(), **kw):
        super().__init__(**kw)
        self.leave_out = set(leave_out)

    def _chat(self, body, kind):
        if "format" not in body:
            return super()._chat(body, kind)
        prompt = body["messages"][-1]["content"]
        query = re.search(r"^Query: (.*)$", prompt, re.M)
        items = re.findall(r"(?ms)^\[(\d+)\] (.*?)(?=^\[\d+\] |\Z)", prompt)
        scores = {n: round(10 * overlap(query.group(1) if query else "", text))
                  for n, text in items if n not in self.leave_out}
        status, reply, extra = super()._chat({**body, "logprobs": False}, kind)
        reply["message"]["content"] = json.dumps(scores)
        return status, reply, extra


def judge(f):
    return models.OllamaJudge(models.OllamaWriter(host=f.url, timeout=T), batch=True)


def test_one_request_question_first_schema_and_scores():
    with BatchFake() as f:
        ledger = cost_ledger.Ledger()
        p = judge(f).relevance("What is my day rate?", PASSAGES, ledger=ledger)
        (body,) = f.bodies("/api/chat")
        prompt = body["messages"][-1]["content"]
        assert prompt.startswith("Query: What is my day rate?")
        assert "[1] (work/rates.md, 2026-10-05) Rates:" in prompt and "[2] (" in prompt
        assert body["format"]["required"] == ["1", "2"]
        assert body["format"]["properties"]["1"]["maximum"] == models.BATCH_SCALE
        assert set(p) == {"1", "2"} and p["1"] > p["2"] and 0 <= p["2"] <= p["1"] <= 1
        assert len(ledger.rows) == 1 and ledger.rows[0]["stage"] == "rerank"


def test_left_out_passages_are_judged_one_by_one():
    with BatchFake(leave_out={"2"}) as f:
        p = judge(f).relevance("What is my day rate?", PASSAGES)
        bodies = f.bodies("/api/chat")
        assert len(bodies) == 2 and "format" not in bodies[1] and bodies[1]["logprobs"]
        assert set(p) == {"1", "2"} and all(0 <= v <= 1 for v in p.values())


def test_batched_support_numbers_each_sentence_with_its_sources():
    claims = {"s1": {"sentence": "The day rate is £760.", "sources": ["Day rate: £760."],
                     "private": False},
              "s2": {"sentence": "The flight is on 3 May.", "sources": ["Rent is due."],
                     "private": False}}
    with BatchFake() as f:
        p = judge(f).support(claims)
        (body,) = f.bodies("/api/chat")
        assert "[1] Sentence: The day rate is £760.\nSources:\n- Day rate: £760." in \
            body["messages"][-1]["content"]
        assert set(p) == {"s1", "s2"}


def test_the_per_passage_judge_stays_the_default():
    assert models.JUDGE_BATCH is False
    with FakeOllama() as f:
        j = models.OllamaJudge(models.OllamaWriter(host=f.url, timeout=T))
        assert j.batch is False
        j.relevance("What is my day rate?", PASSAGES)
        assert len(f.bodies("/api/chat")) == 2 and all(
            "format" not in b for b in f.bodies("/api/chat"))
