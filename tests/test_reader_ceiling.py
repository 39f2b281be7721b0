"""tools/reader_ceiling.py: each step of the count on hand-made notes, written by the
builtin writer as the harness would."""

import sys
from pathlib import Path

import pytest

from verso import harness
from verso import builtin_writer
from verso import generate
from verso.retrieve import Candidate

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
import reader_ceiling  # noqa: E402

Q = {"question": "What is the egg price?", "key_facts": ["£3.20"],
     "gold_files": ["farm/egg round.md"], "answerable": True}


def _cand(i, path, text, heading=""):
    return Candidate(chunk={"id": i, "path": path, "heading": heading, "section_date": None,
                            "date": "2026-06-01", "date_source": "filename", "family": path,
                            "is_latest": True, "entry_latest": None, "private": False,
                            "text": text})


def _answer(cands, gate=True):
    """The harness.Answer of the builtin writer over cands (gate=False: the gate refused)."""
    sources = [{"id": c.id, "path": c.path, "heading": c.chunk["heading"],
                "date": c.date, "is_latest": True, "score": 0.9,
                "text": c.chunk["text"]} for c in cands]
    if not gate:
        return harness.Answer(question=Q["question"], sources=sources, abstained=True)
    request = generate.request(Q["question"], cands, "any")
    text = builtin_writer.BuiltinWriter().write(request).text
    return harness.Answer(question=Q["question"], sources=sources, messages=request.messages,
                          answer=text, abstained=text == builtin_writer.ABSTAIN_SENTENCE)


def _steps(got):
    return [k for k in reader_ceiling.STEPS if got[k]]


GOLD = "farm/egg round.md"


def test_every_step_when_the_writer_leads_with_the_fact():
    got = reader_ceiling.funnel(Q, _answer([_cand(1, GOLD, "Eggs: £3.20 a dozen.")]))
    assert _steps(got) == list(reader_ceiling.STEPS) and got["other note"] is None


def test_each_step_stops_where_its_condition_fails():
    elsewhere = _cand(1, "farm/x.md", "Eggs: £3.20.")
    assert _steps(reader_ceiling.funnel(Q, _answer([elsewhere]))) == []
    assert _steps(reader_ceiling.funnel(Q, _answer([_cand(1, GOLD, "Eggs: £3.20.")],
                                                   gate=False))) == ["kept"]
    no_word = _cand(1, GOLD, "Hens: nine.\nA dozen goes for £3.20 at the gate.", "Sales")
    assert _steps(reader_ceiling.funnel(Q, _answer([no_word]))) == ["kept", "gate", "in unit"]
    q = dict(Q, key_facts=["free"])
    no_value = _cand(1, GOLD, "Eggs: £3.20 a dozen.\nThe eggs are free for Ann.")
    assert _steps(reader_ceiling.funnel(q, _answer([no_value]))) == [
        "kept", "gate", "in unit", "named"]


def test_a_lead_from_another_note_is_told_from_one_of_the_same_note():
    other = _cand(1, "farm/market.md", "The egg price at the market: £3.00 a dozen.")
    gold = _cand(2, GOLD, "Eggs: £3.20 a dozen.")
    got = reader_ceiling.funnel(Q, _answer([other, gold]))
    assert _steps(got) == ["kept", "gate", "in unit", "named", "answers"]
    assert got["other note"] is True
    same = _cand(1, GOLD, "The egg price at the market: £3.00 a dozen.\n"
                 "Eggs: £3.20 a dozen.")
    got = reader_ceiling.funnel(Q, _answer([same]))
    assert not got["lead"] and got["other note"] is False


def test_main_rejects_a_missing_file_in_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit):
        reader_ceiling.main(["--vault", str(tmp_path), "--questions", str(tmp_path / "q")])
    assert "is not a file" in capsys.readouterr().err
