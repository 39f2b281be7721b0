"""searchwords: other wordings of the question from the user's model, searched beside it."""

from __future__ import annotations

import pytest

from fakes import FakeOllama
from verso import builtin_writer
from verso import harness
from verso import models
from verso import searchwords

SLEEP = "How much shut-eye do I need?"


def test_a_reply_gives_its_lines_as_queries_without_marks_repeats_or_the_question():
    reply = ("1. hours of sleep needed\n- \"sleep and recovery\"\n\n* HOURS OF SLEEP NEEDED\n"
             "How much shut-eye do I need?\n" + "a line that explains itself " * 6 + "\n"
             "Query 4: rest before hard sessions\nbedtime routine")
    assert searchwords.parse(reply, SLEEP) == [
        "hours of sleep needed", "sleep and recovery", "rest before hard sessions"]
    assert searchwords.parse("", SLEEP) == []
    assert searchwords.parse("how much  SHUT-EYE do i need?", SLEEP) == []


class Scripted:
    """A model writer answering searchwords' request with a fixed reply."""

    name = "scripted"

    def __init__(self, reply=None, error=None):
        self.reply, self.error, self.stages = reply, error, []

    def write(self, request, stage="generate", ledger=None):
        self.stages.append(stage)
        if self.error:
            raise self.error
        return builtin_writer.Written(self.reply, self.name, 40, 9)


def test_only_a_model_is_asked_and_a_model_error_searches_the_question_as_typed():
    assert searchwords.find(SLEEP, builtin_writer.BuiltinWriter()) == []
    assert searchwords.find(SLEEP, None) == []
    broken = Scripted(error=models.BackendError("Ollama is not answering"))
    assert searchwords.find(SLEEP, broken) == [] and broken.stages == ["retrieve"]
    broken.error, broken.reply = None, "sleep hours"      # an error is not remembered
    assert searchwords.find(SLEEP, broken) == ["sleep hours"] and len(broken.stages) == 2
    assert searchwords.find(SLEEP, broken) == ["sleep hours"] and len(broken.stages) == 2
    wrapped = type("Chooser", (), {"name": "choose", "inner": Scripted("sleep hours")})()
    assert searchwords.find(SLEEP, wrapped) == ["sleep hours"]     # the model itself


def _vault(tmp_path):
    vault = tmp_path / "vault"
    (vault / "health").mkdir(parents=True)
    (vault / "health" / "recovery.md").write_text(
        "# Recovery\nBefore a hard interval session I need 7.5 hours of sleep, or the "
        "intervals fall apart.\n")
    for n, topic in enumerate(("garden shed roof", "van insurance renewal", "piano tuning "
                               "rates", "bike gears service")):
        (vault / f"note {n}.md").write_text(f"# {topic}\nHow much did the {topic} cost? "
                                            f"Do I need to book the {topic} again?\n")
    return vault


@pytest.fixture()
def fake():
    with FakeOllama() as f:
        yield f


def test_the_models_words_find_a_note_the_question_does_not_name(fake, tmp_path,
                                                                  monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    idx, be = harness.load(index=tmp_path / "idx", vault=_vault(tmp_path), backend="ollama",
                           judge="builtin")
    fake.rephrase[SLEEP] = "1. hours of sleep needed\n2. sleep before hard sessions"
    plain = harness.ask(SLEEP, index=idx, backend=be, write=False, budget=60,
                        search_words=False)
    assert plain.search_words == []
    assert "health/recovery.md" not in [s["path"] for s in plain.sources]
    a = harness.ask(SLEEP, index=idx, backend=be, write=False, budget=60)
    assert a.search_words == ["hours of sleep needed", "sleep before hard sessions"]
    assert a.sources[0]["path"] == "health/recovery.md"
    assert "also searched: hours of sleep needed | sleep before hard sessions" in str(a)
    assert "also searched" not in str(plain)
    assert "hours of sleep needed | sleep before hard sessions" in a.to_html()
    row = next(r for r in a.calls if r["stage"] == "retrieve" and r["model"] == be.writer.model)
    assert row["input_tokens"] > 0 and row["output_tokens"] > 0     # retrieval's cost
    asked = [b["messages"][-1]["content"] for b in fake.bodies("/api/chat")]
    assert sum(SLEEP in m for m in asked) == 1      # asked once; search_words=False: never
    again = harness.ask(SLEEP, index=idx, backend=be, write=False, budget=200)
    assert again.search_words == a.search_words     # asked again: the words remembered,
    assert len(fake.bodies("/api/chat")) == len(asked)          # no second request
    fake.rephrase.clear()                           # a reply of the question alone: none
    other = "How much shut-eye did I get last week?"
    assert harness.ask(other, index=idx, backend=be, write=False, budget=60).search_words == []
