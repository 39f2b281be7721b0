"""harness: the whole pipeline on the sample vault with the builtin backend, and the CLI."""

import json
import re

import pytest

from verso import builtin_writer
from verso import harness
from verso import backends
from verso import route

REQUIRED = {"answer", "abstained", "abstain_reason", "time_mode", "citations", "sources",
            "stages", "verdict", "backend"}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    idx_dir = tmp_path_factory.mktemp("idx")
    return harness.load(idx_dir, harness.SAMPLE_VAULT, "builtin")


class NoWriter:
    """A model writer that must not be asked to answer (the gate abstains before
    writing); asked for other words to search (searchwords.py), it has none."""

    name = "no-writer"

    def __init__(self):
        self.asked = []

    def write(self, request, stage="generate", ledger=None):
        self.asked.append(stage)
        if stage != "retrieve":            # the search words' request is retrieval's
            raise AssertionError("the writer was called")
        return builtin_writer.Written("", self.name, 1, 0)


def test_current_value_is_the_newest_and_cites_the_newest_file(loaded):
    idx, be = loaded
    a = harness.ask("What is Maren's current day rate?", index=idx, backend=be)
    assert a.time_mode == "present" and a.checks["passed"]
    assert "760" in a.answer and "640" not in a.answer and "720" not in a.answer
    assert [c["path"] for c in a.citations] == ["work/rates card 2026-10-05.md"]
    assert a.sources[0]["is_latest"] is True
    assert "set aside: 2026-07-01  work/rates card_2026-07.md (superseded by work/rates " \
        "card 2026-10-05.md)" in harness.render(a)


def test_the_time_mode_is_decided_once_from_the_router_the_caller_and_the_evidence(loaded):
    idx, be = loaded
    plain = route.route("What is the wifi password?")       # no time named: presumed
    when = harness._choose_time(plain, None, None, idx)
    assert (when.mode, when.presumed) == ("present", True)
    assert when.written_in(False) == "any" and when.written_in(True) == "present"
    for named in (harness._choose_time(plain, "present", None, idx),     # the caller's
                  harness._choose_time(route.route("What is the wifi password now?"),
                                       None, None, idx)):               # a time word
        assert not named.presumed and named.written_in(False) == "present"
    dated = harness._choose_time(plain, None, "2026-05-01", idx)
    assert (dated.mode, dated.as_of, dated.written_in(False)) == ("as_of", "2026-05-01",
                                                                  "as_of")
    # nothing answers: no version was chosen, so the answer is not said to be current
    assert harness.ask("What is the wifi password?", index=idx, backend=be).time_mode == "any"
    assert harness.ask("What is the wifi password?", index=idx, backend=be,
                       mode="present").time_mode == "present"


def test_change_question_lists_every_value_in_date_order(loaded):
    idx, be = loaded
    a = harness.ask("How did the Kittiwake retainer change over time?", index=idx,
                    backend=be)
    assert a.time_mode == "history"
    at = [a.answer.find(v) for v in ("2,400", "2,750", "3,100", "3,350")]
    assert -1 not in at and at == sorted(at), a.answer
    dates = re.findall(r"On (\d{4}-\d{2}-\d{2}):", a.answer)
    assert dates == sorted(dates) and len(dates) >= 4


def test_unanswerable_abstains_at_the_gate_without_calling_the_writer(loaded):
    idx, be = loaded
    writer = NoWriter()
    spy = backends.Backend("builtin", be.embedder, be.judge, writer, be.note)
    a = harness.ask("What's the name of my dentist?", index=idx, backend=spy)
    assert a.abstained and a.verdict == "ABSTAIN" and writer.asked == ["retrieve"]
    assert a.abstain_reason.startswith("no passage reached")
    gen = next(s for s in a.stages if s["name"] == "generate")
    assert gen["ms"] == 0 and gen["input_tokens"] == 0


def test_small_talk_needs_no_retrieval(loaded):
    idx, be = loaded
    a = harness.ask("thanks!", index=idx, backend=be)
    assert a.abstained and "small talk" in a.abstain_reason
    assert all(s["ms"] == 0 for s in a.stages if s["name"] != "route")


def test_no_rerank_changes_the_kept_sources(loaded):
    idx, be = loaded
    q = "What is Maren's current day rate?"
    full = harness.ask(q, index=idx, backend=be)
    base = harness.ask(q, index=idx, backend=be, rerank=False)
    assert [s["path"] for s in full.sources] != [s["path"] for s in base.sources]
    assert next(s for s in base.stages if s["name"] == "rerank")["ms"] == 0


def test_stage_table_order_and_render(loaded):
    idx, be = loaded
    a = harness.ask("Which shoes am I racing in?", index=idx, backend=be)
    assert [s["name"] for s in a.stages] == list(harness.STAGES)
    text = harness.render(a)
    assert [ln.split()[0] for ln in text.splitlines()
            if ln.split() and ln.split()[0] in harness.STAGES + ("total",)] == \
        list(harness.STAGES) + ["total"]
    assert "verdict: " in text and "<pre>" in a._repr_html_()


def test_cli_json_has_the_documented_fields(loaded, capsys):
    idx, _ = loaded
    code = harness.main(["What time am I aiming for in the marathon?", "--index",
                         str(idx.dir), "--backend", "builtin", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert REQUIRED <= out.keys() and out["backend"] == "builtin"
    assert all({"name", "ms", "input_tokens", "output_tokens", "dollars"} <= s.keys()
               for s in out["stages"])
    assert all({"path", "date", "is_latest", "score"} <= s.keys() for s in out["sources"])


def test_cli_refuses_an_index_built_from_another_vault(loaded, tmp_path, capsys):
    idx, _ = loaded
    other = tmp_path / "other vault"
    other.mkdir()
    (other / "note.md").write_text("# Note\nThe boat is moored at pier 4.\n")
    code = harness.main(["Where is the boat?", "--vault", str(other), "--index",
                         str(tmp_path / "own index"), "--backend", "builtin"])
    assert code == 0 and "pier 4" in capsys.readouterr().out
    with pytest.raises(ValueError, match="was built from"):
        harness.load(idx.dir, other, "builtin")


def test_cli_empty_question_is_one_line(capsys, tmp_path):
    code = harness.main(["   ", "--index", str(tmp_path / "i"), "--backend", "builtin"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("error: ") and "\n" not in err


class UncitedWriter:
    """A writer that states the rates card's number and cites nothing, as small models do."""

    name = "uncited"

    def write(self, request, stage="generate", ledger=None):
        return builtin_writer.Written("The standard day rate is £760 per day.", self.name, 40, 9)


def test_a_citation_repair_reaches_the_answer_trace(loaded):
    idx, be = loaded
    be = backends.Backend("builtin", be.embedder, be.judge, UncitedWriter(), "test")
    a = harness.ask("What is Maren's current day rate?", index=idx, backend=be)
    assert "[c" in a.answer                           # re-cited in code
    rows = a.checks["sentences"]
    assert any("re-cited" in (r.get("repair") or "") for r in rows), rows
    assert a.citations and a.citations[0]["path"] == "work/rates card 2026-10-05.md"
