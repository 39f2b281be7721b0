"""Jev backend against a real HTTP fake on 127.0.0.1: batching, retries, auth, privacy."""

import json
import os

import pytest

from verso import backends
from verso import models
from verso import line_scores
from verso import cost_ledger
from fakes import FakeJev, closed_port_url

MARKER = "ZX-PRIVATE-7731"  # planted in a private note: must never reach Jev


class LocalJudge:
    """Stands in for the builtin or Ollama judge; remembers what it was asked."""

    name = "local"

    def __init__(self):
        self.seen = []

    def relevance(self, query, passages, stage, ledger):
        self.seen += list(passages)
        if ledger is not None:
            ledger.record(stage, "builtin", "local", 3)
        return {k: 0.9 for k in passages}

    def support(self, claims, stage, ledger):
        self.seen += list(claims)
        return {k: 0.8 for k in claims}


@pytest.fixture
def jev():
    with FakeJev(key="k-123") as f:
        yield f


def make(jev, local=None, **kw):
    return models.JevJudge(local or LocalJudge(), api_key="k-123", url=jev.url,
                           timeout=0.5, **kw)


def passages():
    return {
        "3": {"text": "The day rate is 1550 from October.", "path": "work/rates.md",
              "heading": "Rates", "date": "2026-10-01", "dense_score": 0.5, "private": False},
        "4": {"text": "Parking at the client site costs 12 a day.", "path": "work/site.md",
              "heading": "", "date": "2026-09-01", "dense_score": None, "private": False},
        "8": {"text": f"My salary review {MARKER}: day rate 1550 agreed.",
              "path": "journal/2026-10-02.md", "heading": "", "date": "2026-10-02",
              "dense_score": 0.6, "private": True},
    }


def test_one_request_per_stage_with_shared_state_and_cost(jev):
    ledger = cost_ledger.Ledger()
    j = make(jev)
    p = j.relevance("What is the day rate?", passages(), stage="rerank", ledger=ledger)
    assert set(p) == {"3", "4", "8"} and p["3"] > p["4"]
    req, = jev.requests
    assert req["headers"]["Authorization"] == "Bearer k-123"
    body = req["json"]
    assert body["model"] == "jev-latest" and body["state"]["query"] == "What is the day rate?"
    assert set(body["state"]["passages"]) == {"3", "4"}
    assert all(q["type"] == "noul" for q in body["questions"].values())
    jev_row = next(r for r in ledger.rows if r["backend"] == "jev")
    usage = models.PRICE_PER_INPUT_TOKEN * jev_row["input_tokens"]
    assert jev_row["stage"] == "rerank" and jev_row["model"] == "jev-1.13.0"
    assert jev_row["input_tokens"] > 0 and jev_row["dollars"] == pytest.approx(usage)


def test_private_text_never_reaches_jev(jev):
    local, ledger = LocalJudge(), cost_ledger.Ledger()
    j = make(jev, local)
    p = j.relevance("What is the day rate?", passages(), stage="rerank", ledger=ledger)
    claims = {"s1": {"sentence": "The rate is 1550.", "private": True,
                     "sources": [f"{MARKER} day rate 1550 agreed."]},
              "s2": {"sentence": "Parking costs 12 a day.", "private": False,
                     "sources": ["Parking at the client site costs 12 a day."]}}
    s = j.support(claims, stage="verify", ledger=ledger)
    raw = [r["raw"] for r in jev.requests]
    assert len(raw) == 2 and not any(MARKER in body for body in raw)
    assert "1550 from October" in raw[0] and "Parking at the client site" in raw[1]
    assert local.seen == ["8", "s1"] and p["8"] == 0.9 and s["s1"] == 0.8
    assert j.last_routing == {"stage": "verify", "local": ["s1"], "jev": ["s2"]}
    local_row = next(r for r in ledger.rows if r["backend"] == "builtin")
    assert local_row["note"] == "routed_local: 1 private"


def test_unmarked_items_stay_local(jev):
    j = make(jev)
    j.relevance("q", {"1": {"text": "no privacy flag here"}})
    assert not jev.requests and j.last_routing["local"] == ["1"]


def test_split_only_past_the_state_budget(jev):
    many = {str(i): {"text": f"note {i} " + "word " * 40, "private": False}
            for i in range(10)}
    make(jev).relevance("q", many)
    assert len(jev.requests) == 1
    p = make(jev, budget=700).relevance("q", many)
    sent = [set(b["state"]["passages"]) for b in jev.bodies()[1:]]
    assert len(sent) > 1 and set().union(*sent) == set(many) == set(p)
    assert all(len(json.dumps(b["state"])) < 1200 for b in jev.bodies()[1:])


def test_429_with_retry_after_ms_is_retried(jev):
    jev.fault("/v1/systemone", "429", times=2)
    p = make(jev).relevance("What is the day rate?", passages())
    assert len(jev.requests) == 3 and p["3"] > 0.5


def test_retry_after_seconds_and_500_then_success(jev):
    jev.fault("/v1/systemone", "429s", times=1)
    make(jev).support({"a": {"sentence": "x y", "sources": ["x y"], "private": False}})
    jev.fault("/v1/systemone", "500", times=1)
    make(jev).support({"a": {"sentence": "x y", "sources": ["x y"], "private": False}})
    assert len(jev.requests) == 4


def test_retries_are_bounded_in_count_and_time(jev):
    jev.fault("/v1/systemone", "429")
    with pytest.raises(models.BackendError, match="Jev failed after 3 tries \\(429 slow down"):
        make(jev, retries=2).relevance("q", passages())
    assert len(jev.requests) == 3
    jev.retry_after_ms = 60_000  # longer than the budget: stop at once, no sleeping
    with pytest.raises(models.BackendError, match="after 1 tries"):
        make(jev, retry_budget=1.0).relevance("q", passages())


@pytest.mark.parametrize("kind, text", [("401", "Jev refused the API key \\(401 invalid"),
                                        ("422", "Jev rejected the request \\(422 questions")])
def test_auth_and_validation_errors_fail_at_once(jev, kind, text):
    jev.fault("/v1/systemone", kind)
    with pytest.raises(models.BackendError, match=text):
        make(jev).relevance("q", passages())
    assert len(jev.requests) == 1


def test_wrong_key_is_a_401(jev):
    j = models.JevJudge(LocalJudge(), api_key="wrong", url=jev.url, timeout=0.5)
    with pytest.raises(models.BackendError, match="TYPESAFE_API_KEY"):
        j.relevance("q", passages())


def test_hang_and_down_are_retried_then_fail(jev):
    jev.fault("/v1/systemone", "hang")
    with pytest.raises(models.BackendError, match="ReadTimeout"):
        models.JevJudge(LocalJudge(), api_key="k-123", url=jev.url, timeout=0.1,
                        retries=1, retry_budget=1).relevance("q", passages())
    with pytest.raises(models.BackendError, match="ConnectionError"):
        models.JevJudge(LocalJudge(), api_key="k", url=closed_port_url(), retries=0
                        ).relevance("q", passages())


def test_malformed_reply(jev):
    jev.fault("/v1/systemone", "truncated")
    with pytest.raises(models.BackendError, match="Jev sent a malformed reply"):
        make(jev).relevance("q", passages())


def test_key_from_env_or_a_private_file(tmp_path, monkeypatch):
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    key = tmp_path / "key"
    with pytest.raises(models.BackendError, match="no Jev API key: set TYPESAFE_API_KEY"):
        models.JevJudge(LocalJudge(), key_file=str(key))
    key.write_text("sk-file\n")
    os.chmod(key, 0o644)
    with pytest.raises(models.BackendError, match="others can read it; run `chmod 600"):
        models.JevJudge(LocalJudge(), key_file=str(key))
    os.chmod(key, 0o600)
    assert models.JevJudge(LocalJudge(), key_file=str(key)).key == "sk-file"
    monkeypatch.setenv("TYPESAFE_API_KEY", "sk-env")
    assert models.JevJudge(LocalJudge(), key_file=str(key)).key == "sk-env"


def test_load_backend_with_jev_judge_keeps_a_local_judge(monkeypatch):
    monkeypatch.setenv("TYPESAFE_API_KEY", "sk-env")
    b = backends.load_backend("builtin", judge="jev")
    assert isinstance(b.judge, models.JevJudge)
    assert isinstance(b.judge.local, line_scores.BuiltinJudge)
    assert "private text judged locally by builtin" in b.note
