"""searchwords: other wordings of the question from the user's model, searched beside it."""

from __future__ import annotations

import pytest

from fakes import FakeOllama
from verso import builtin_writer
from verso import harness
from verso import mcp_server
from verso import mcp_tools
from verso import models
from verso import passages
from verso import retrieve
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


def test_a_model_that_timed_out_is_not_asked_for_words_again_for_a_while(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(searchwords.time, "monotonic", lambda: clock[0])
    hung = Scripted(error=models.BackendTimeout("Ollama sent no reply within 300 s"))
    problems = []
    assert searchwords.find(SLEEP, hung, problems=problems) == [] and len(hung.stages) == 1
    hung.error, hung.reply = None, "sleep hours"          # it answers again, but unasked
    clock[0] += 10
    assert searchwords.find("other question?", hung, problems=problems) == []
    assert len(hung.stages) == 1                          # no request: no second timeout
    left = f"{searchwords.HUNG_WAIT - 10:.0f} s"
    assert f"within 300 s; not asked again for {left}" in problems[1]
    assert problems[1].endswith("the question searched as typed")
    clock[0] += searchwords.HUNG_WAIT                     # the wait is over: asked again
    assert searchwords.find(SLEEP, hung) == ["sleep hours"] and len(hung.stages) == 2


TOPICS = ("garden shed roof", "van insurance renewal", "piano tuning rates", "bike gears",
          "boiler service", "dentist check", "car tax", "window cleaner", "chimney sweep",
          "gutter repair", "fence panels", "lawn mower blades")


def _vault(tmp_path):
    """One note answers in other words; three others share the question's words, nine
    share none."""
    vault = tmp_path / "vault"
    (vault / "health").mkdir(parents=True)
    (vault / "health" / "recovery.md").write_text(
        "# Recovery\nBefore a hard interval session: 7.5 hours of sleep, or the "
        "intervals fall apart.\n")
    for n, topic in enumerate(TOPICS):
        (vault / f"note {n}.md").write_text(f"# {topic}\nHow much do I need for the "
                                            f"{topic}?\n" if n < 3 else
                                            f"# {topic}\nBooked the {topic} for spring.\n")
    (vault / "journal.md").write_text("# Journal\n\n## 2026-03-02\nBooked the boiler.\n")
    return vault


@pytest.fixture()
def fake():
    with FakeOllama() as f:
        yield f


def test_a_model_writer_is_asked_once_and_its_words_shown_costed_and_capped(
        fake, tmp_path, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    idx, be = harness.load(index=tmp_path / "idx", vault=_vault(tmp_path), backend="ollama",
                           judge="builtin")
    fake.rephrase[SLEEP] = "1. hours of sleep\n2. sleep before interval sessions"
    plain = harness.ask(SLEEP, index=idx, backend=be, write=False, budget=100,
                        search_words=False)
    assert plain.search_words == []
    a = harness.ask(SLEEP, index=idx, backend=be, write=False, budget=100)
    assert a.search_words == ["hours of sleep", "sleep before interval sessions"]
    assert "also searched: hours of sleep | sleep before interval sessions" in str(a)
    assert "also searched" not in str(plain)
    assert "hours of sleep | sleep before interval sessions" in a.to_html()
    row = next(r for r in a.calls if r["stage"] == "retrieve" and r["model"] == be.writer.model)
    assert row["input_tokens"] > 0 and row["output_tokens"] > 0     # retrieval's cost
    asked = [b["messages"][-1]["content"] for b in fake.bodies("/api/chat")]
    assert sum(SLEEP in m for m in asked) == 1      # asked once; search_words=False: never
    assert fake.bodies("/api/chat")[0]["options"]["num_predict"] == searchwords.REPLY_TOKENS
    n = len(fake.bodies("/api/chat"))
    assert harness.ask("How much shut-eye is enough?", index=idx, backend=be, write=False,
                       budget=60, search_words=[]).search_words == []     # none given: none
    assert len(fake.bodies("/api/chat")) == n                             # and none asked
    again = harness.ask(SLEEP, index=idx, backend=be, write=False, budget=200)
    assert again.search_words == a.search_words     # asked again: the words remembered,
    assert len(fake.bodies("/api/chat")) == len(asked)          # no second request
    fake.fault("/api/chat", "500", times=2)         # failed, and so its retry: said
    failed = harness.ask("How much sleep before a race?", index=idx, backend=be, write=False,
                         budget=60)
    assert failed.search_words == [] and "no search words (" in failed.backend_note
    assert "no search words" in str(failed) and "no search words" not in a.backend_note
    fake.rephrase.clear()                           # a reply of the question alone: none
    other = "How much shut-eye do I get?"
    assert harness.ask(other, index=idx, backend=be, write=False, budget=60).search_words == []
    assert any(other in m for m in (b["messages"][-1]["content"]
                                    for b in fake.bodies("/api/chat")))     # it was asked


def test_retrieval_finds_by_the_other_wordings_what_the_question_misses(tmp_path):
    idx, _ = harness.load(index=tmp_path / "idx", vault=_vault(tmp_path), backend="builtin")
    top = [c.path for c in retrieve.search(idx, SLEEP, None, k=3, method="bm25",
                                           expand_links=False)]
    assert "health/recovery.md" not in top and len(top) == 3     # the question's words
    top = [c.path for c in retrieve.search(idx, SLEEP, None, k=3, method="bm25",
                                           expand_links=False, also=[("hours of sleep", None)])]
    assert "health/recovery.md" in top[:2]       # ranked first by the wording: fused in


def test_a_sections_bm25_is_the_best_of_the_questions_and_the_wordings(tmp_path):
    idx, _ = harness.load(index=tmp_path / "idx", vault=_vault(tmp_path), backend="builtin")
    ids = list(range(len(idx.chunks)))
    sleep = next(i for i in ids if idx.chunks[i]["path"] == "health/recovery.md")
    own = passages._bm25(idx, SLEEP, ids)
    both = passages._bm25(idx, SLEEP, ids, also=["hours of sleep"])
    assert own[sleep] == 0 and both[sleep] == pytest.approx(own.max())   # scaled to its top
    assert (both >= own).all() and both.max() == pytest.approx(own.max())


def test_the_other_wordings_count_together_as_much_as_the_question():
    assert retrieve.rrf([[1, 2], [2, 3]], rrf_k=1) == [(2, 1 / 2 + 1 / 3), (1, 1 / 2),
                                                       (3, 1 / 3)]
    fused = dict(retrieve.rrf([[1], [2], [3]], rrf_k=1, weights=[1.0, 0.5, 0.5]))
    assert fused == {1: 0.5, 2: 0.25, 3: 0.25}


def test_no_words_are_asked_for_a_period_or_with_the_flag(fake, tmp_path, monkeypatch,
                                                          capsys):
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    vault, index = _vault(tmp_path), tmp_path / "idx"
    idx, be = harness.load(index=index, vault=vault, backend="ollama", judge="builtin")
    period = "What did I write in March 2026?"
    fake.rephrase[period] = "march diary entries"
    assert harness.ask(period, index=idx, backend=be, write=False, budget=60).search_words == []
    assert harness.main([SLEEP, "--index", str(index), "--backend", "ollama", "--judge",
                         "builtin", "--no-search-words"]) == 0
    assert "also searched" not in capsys.readouterr().out
    asked = [b["messages"][-1]["content"] for b in fake.bodies("/api/chat")]
    assert not any(m.startswith(searchwords.PROMPT[:40]) for m in asked)


def test_a_callers_own_wordings_are_searched_without_asking_any_model(tmp_path):
    idx, be = harness.load(index=tmp_path / "idx", vault=_vault(tmp_path), backend="builtin")
    a = harness.ask(SLEEP, index=idx, backend=be, write=False, budget=60,
                    search_words=["  hours   of sleep ", "", "rest"])
    assert a.search_words == ["hours of sleep", "rest"]
    embedded = [r for r in a.calls if r["stage"] == "retrieve"]
    assert len(embedded) == 3 and {r["backend"] for r in embedded} == {"builtin"}   # q + 2
    assert harness.ask(SLEEP, index=idx, backend=be, write=False,
                       budget=60).search_words == []          # the builtin writer: none


def test_search_notes_tells_a_host_the_words_it_also_searched(fake, tmp_path, monkeypatch):
    # A host reading the evidence should know it came from more than its own query.
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    vault = tmp_path / "v"
    (vault / "work").mkdir(parents=True)
    (vault / "verso.toml").write_text('[folders.work]\nprivacy = "shareable"\n')
    (vault / "work" / "sleep.md").write_text("# Sleep\nEight hours before interval days.\n")
    fake.rephrase[SLEEP] = "1. hours of sleep"
    srv = mcp_server.Server(vault, tmp_path / "idx", "ollama", "builtin")
    assert mcp_tools.search_notes(srv, {"query": SLEEP})["also_searched"] == ["hours of sleep"]
    offline = mcp_server.Server(vault, tmp_path / "idx2", "builtin")
    assert mcp_tools.search_notes(offline, {"query": SLEEP})["also_searched"] == []
