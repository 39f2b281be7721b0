"""Writer replies real small models gave (tests/fixtures/rig_replies.jsonl): every shape is
parsed, repaired where code can be sure, checked, and never crashes generate or verify."""

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from verso import builtin_writer
from verso import generate
from verso import line_scores
import rigfixtures
from verso import verify
from verso.generate import ABSTAIN, parse_citations

FIX = rigfixtures.load()
FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


class Reply:
    def __init__(self, text):
        self.text = text

    def write(self, request, stage="generate", ledger=None):
        return builtin_writer.Written(self.text, "recorded", 10, 2)


def run(shape, reply=None):
    """(Draft, Verdict) of a fixture's reply (or another reply) over its notes."""
    r = FIX[shape]
    notes = rigfixtures.notes(r)
    d = generate.generate(r["question"], notes, r["time_mode"], Reply(reply or r["reply"]))
    v = verify.verify(d.text, notes, r["time_mode"], line_scores.BuiltinJudge(),
                      question=r["question"], repairs=d.repairs)
    return d, v


def notes_of(d):
    return [x["note"] for x in d.repairs]


def test_fixtures_are_small_real_and_private_marker_free():
    assert len(FIX) >= 12
    raw = rigfixtures.FIXTURES.read_text()
    assert len(raw) < 40_000 and "PRIVATE" not in raw.upper()
    assert all("1.5B" in r["source"] and r["reply"] is not None for r in FIX.values())


# ------------------------------------------------------------ shapes, real replies

def test_bare_citation_is_no_answer():
    assert FIX["bare_citation"]["reply"] == "[c1]"
    d, v = run("bare_citation")
    assert d.abstained and d.text == ABSTAIN and d.reply == "[c1]" and v.verdict == "SHIP"


def test_uncited_sentence_is_recited_to_the_one_note_that_states_it():
    d, v = run("uncited")
    assert d.text == "Hannah is my physio [c1]."
    assert notes_of(d) == ["re-cited nothing -> c1: its words are stated in c1 "
                           "(the writer cited nothing)"]
    assert v.sentences[0]["repair"] == notes_of(d)[0]
    assert not any("without a citation" in x for x in v.sentences[0]["reasons"])


def test_stated_in_note_sentence_gives_its_citation_and_wrong_one_is_moved():
    r = FIX["stated_in_note"]
    assert "This is stated in note [c2]." in r["reply"]
    pairs = parse_citations(r["reply"])
    assert len(pairs) == 1 and pairs[0][1] == ["c2"]
    assert "stated in note" not in pairs[0][0]
    d, _ = run("stated_in_note")
    assert notes_of(d) == ["re-cited c2 -> c1: the numbers and names are stated in c1"]
    assert d.citations == ["c1"]


def test_citation_after_the_full_stop_belongs_to_the_sentence():
    assert parse_citations(FIX["cite_after_period"]["reply"]) == [("49 bpm.", ["c1"])]
    d, v = run("cite_after_period")
    assert v.verdict == "SHIP" and d.repairs == []


def test_history_lines_without_citations_each_go_to_the_note_of_their_date():
    r = FIX["history_lines_uncited"]
    assert "\n" in r["reply"] and "[c" not in r["reply"]
    d, v = run("history_lines_uncited")
    notes = rigfixtures.notes(r)
    assert len(d.repairs) == 3 and v.verdict == "SHIP"
    for row in v.sentences:
        (cid,) = row["citations"]
        assert row["date"] == notes[int(cid[1:]) - 1].date


def test_bold_is_read_and_a_summary_no_note_states_stays_failing():
    d, v = run("bold")
    assert "**" in FIX["bold"]["reply"] and "**" not in d.text
    last = v.sentences[-1]
    assert last["claim"].startswith("The marathon goal time evolved")
    assert last["citations"] == [] and "states a fact without a citation" in last["reasons"]
    assert v.verdict == "ESCALATE"


def test_citation_on_its_own_line_joins_the_last_sentence_then_moves_to_the_named_note():
    r = FIX["citation_own_line"]
    assert r["reply"].endswith("\n\n[c1]")
    pairs = parse_citations(r["reply"])
    assert [ids for _, ids in pairs] == [[], ["c1"]]
    d, _ = run("citation_own_line")
    assert "re-cited c1 -> c2: the names are stated in c2" in notes_of(d)


def test_label_only_citation_piece_cites_the_sentence_before_it():
    assert FIX["label_citation"]["reply"] == "Split: 26:38. Notes: [c1]"
    assert parse_citations("Split: 26:38. Notes: [c1]") == [("Split: 26:38.", ["c1"])]
    _, v = run("label_citation")
    assert len(v.sentences) == 1 and v.sentences[0]["citations"] == ["c1"]


def test_wrong_citation_is_moved_and_the_trace_says_so():
    d, v = run("wrong_citation")
    assert notes_of(d) == ["re-cited c2 -> c1: the numbers are stated in c1"]
    assert d.text == "I budget £340 for food each month [c1]." and v.verdict == "SHIP"


def test_a_sentence_no_note_states_keeps_failing():
    d, v = run("unsupported_sentence")
    failing = [r for r in v.failing if r["claim"].startswith("This fee remained")]
    assert failing and failing[0]["citations"] == []
    assert {x["index"] for x in d.repairs} == {1, 3}   # the other sentences were repaired


def test_two_uncited_sentences_each_repaired():
    d, v = run("uncited_two_sentences")
    assert [x["to"] for x in d.repairs] == ["c1", "c1"] and v.verdict == "SHIP"


def test_two_notes_stating_a_claim_leave_it_unrepaired():
    r = FIX["wrong_citation"]
    notes = rigfixtures.notes(r) + rigfixtures.notes(r)[:1]    # the stating note twice
    pairs, repairs = generate.recite(parse_citations(r["reply"]), notes)
    assert repairs == [] and pairs[0][1] == ["c2"]


@pytest.mark.parametrize("shape", sorted(FIX))
def test_render_parses_back_to_the_same_sentences(shape):
    pairs = [p for p in parse_citations(FIX[shape]["reply"]) if p[0]]
    assert parse_citations(generate.render(pairs)) == pairs


# --------------------------------------------- other citation forms, on a real reply

@pytest.mark.parametrize("reply,ids", [
    ("[c1] 49 bpm.", ["c1"]),
    ("49 bpm (c1).", ["c1"]),
    ("49 bpm (see c1).", ["c1"]),
    ("49 bpm [1].", ["c1"]),
    ("49 bpm c1.", ["c1"]),
    ("49 bpm [c1, c2].", ["c1", "c2"]),
    ("49 bpm [1, 2].", ["c1", "c2"]),
    ("49 bpm [c1][C2].", ["c1", "c2"]),
    ("49 bpm, as stated in note [c1].", ["c1"]),
    ("According to note c1, 49 bpm.", ["c1"]),
    ("<think>The resting rate is in c1.</think>\n49 bpm [c1].", ["c1"]),
    ("the notes list readings</think>49 bpm [c1].", ["c1"]),
    ("- **49 bpm** [c1]", ["c1"]),
])
def test_citation_forms(reply, ids):
    (pair,) = parse_citations(reply)
    assert pair[0].rstrip(".") == "49 bpm" and pair[1] == ids


@pytest.mark.parametrize("reply", [
    "", "   ", "[c1][c2]", "<think>no idea</think>", "<think>cut off mid-thought",
    "I don't know from my notes.", "i dont know from my notes",
    "I don't know.", "The notes do not say what your blood type is.",
    "There is no information about the bib number in the notes.",
    "I'm sorry, but the notes don't mention an airline.",
    "Unfortunately, this is not stated in the notes [c1].",
    "I could not find the entry fee. The notes don't contain it.",
])
def test_empty_citation_only_and_abstain_variants_are_no_answer(reply):
    d, v = run("cite_after_period", reply or " ")
    assert d.abstained and d.text == ABSTAIN and v.verdict == "SHIP"


def test_a_lack_followed_by_a_fact_is_an_answer():
    d, v = run("cite_after_period", "The notes don't say when it was taken. 49 bpm [c1].")
    assert not d.abstained
    assert v.sentences[0]["reasons"] == []      # saying what is missing needs no citation


# --------------------------------------------------------------- no reply crashes

PIECE = st.sampled_from(["49 bpm", "[c1]", "[c9]", "(c2)", "[1, 2]", "c1", ". ", "\n",
                         "- ", "**", "<think>", "</think>", "On 2026-08-15: ", "[", "]",
                         "as stated in note", "I don't know", "Notes:", "# x", "3:58:00",
                         "£1,550/day", ", ", "Banco Atlântico Norte", "[[link]]", "?"])


@FAST
@given(st.lists(PIECE, max_size=25).map("".join))
@example("<think></think></think>")          # a stray closing tag once survived the strip
@example("[c1]# x. - Notes:")                # re-cited and written back, it was a heading
def test_no_reply_shape_crashes_generate_or_verify(reply):
    d, v = run("history_lines_uncited", reply)
    assert v.verdict in ("SHIP", "ESCALATE")
    assert d.abstained or parse_citations(d.text)
    assert all(i.startswith("c") for i in d.citations)


# ------------------------------------------------ names and asked terms (verify)

def test_a_name_no_cited_note_holds_escalates():
    r = FIX["citation_own_line"]
    notes = rigfixtures.notes(r)
    text = generate.normalise_citations(r["reply"])          # the writer's own citation
    v = verify.verify(text, notes, r["time_mode"], line_scores.BuiltinJudge())
    reasons = [x for row in v.sentences for x in row["reasons"]]
    assert "names Aire, Valley, Striders, not in the cited c1" in reasons
    fixed = text.replace("[c1]", "[c2]")                     # the note that names them
    v = verify.verify(fixed, notes, r["time_mode"], line_scores.BuiltinJudge())
    assert not any(x.startswith("names ") for row in v.sentences for x in row["reasons"])


def test_cited_notes_must_name_what_the_question_asks_for():
    d, v = run("refusal_wrong_focus")       # "What's my blood type?" answered from a test
    assert v.verdict == "ESCALATE"
    assert "the cited c1 never name type, which the question asks about" in \
        v.failing[0]["reasons"]
    _, v = run("uncited")                    # "who's my physio": the note names physio
    assert not any("never name" in x for row in v.sentences for x in row["reasons"])


@pytest.mark.parametrize("question,focus", [
    ("Which airline is Maren flying to Lisbon with?", ["airline"]),
    ("who's my physio", ["physio"]),
    ("What's my blood type?", ["blood", "type"]),
    ("What's the name of my dentist?", ["dentist"]),
    ("What did I run in Lisbon?", []),                  # a verb, not an attribute
    ("How much did getting the NIF cost me?", []),      # a kind of value, not a term
    ("What time am I aiming for?", []),
])
def test_focus_terms(question, focus):
    assert list(line_scores.focus_terms(question, line_scores.analyse(question).names)) == focus
    assert list(line_scores.analyse(question).focus) == focus


def test_a_name_first_in_the_sentence_answers_who():
    d, v = run("uncited")                    # "Hannah is my physio": a who question
    assert v.verdict == "SHIP" and not v.failing
    d, v = run("uncited", "Physio is my physio [c1].")      # a capital word, not a name
    assert any("holds no value of the kind asked" in x
               for row in v.sentences for x in row["reasons"])
