"""generate: the prompt, citation parsing, and the Draft from a writer."""

from verso import generate
from verso import builtin_writer
from verso import cost_ledger
from verso.generate import ABSTAIN, build_messages, parse_citations
from verso.retrieve import Candidate


def cand(i, path, text, date="2026-06-01", heading="", latest=True, source="filename", **kw):
    chunk = {"id": i, "path": path, "heading": heading, "section_date": None, "date": date,
             "date_source": source, "family": path, "is_latest": latest,
             "entry_latest": None, "private": False, "text": text}
    return Candidate(chunk=chunk, **kw)


class FakeWriter:
    def __init__(self, reply):
        self.reply, self.calls = reply, []

    def write(self, request, stage="generate", ledger=None):
        self.calls.append((request, stage))
        return builtin_writer.Written(self.reply, "fake", 123, 7, {"seen": len(request.notes)})


NOTES = [
    cand(1, "work/rates card 2026-10-05.md", "Day rate: £600.", "2026-10-05", "Rates"),
    cand(2, "work/rates card_2026-07.md", "Day rate: £550.", "2026-07-01", latest=False,
         superseded_by="work/rates card 2026-10-05.md"),
    cand(3, "journal/x.md", "Met Ana.", "2026-03-01", source="mtime"),
]


def test_abstain_sentence_is_shared_with_models():
    assert ABSTAIN == builtin_writer.ABSTAIN_SENTENCE == "I don't know from my notes."


def test_build_messages_system_rules():
    system = build_messages("q?", NOTES, "present")[0]
    assert system["role"] == "system"
    for rule in ("only", "[c2]", "at most 5 sentences", ABSTAIN, "newest", "On YYYY-MM-DD:"):
        assert rule in system["content"]


def test_build_messages_user_message_exact():
    user = build_messages("What is  the day rate?", NOTES, "present")[1]
    assert user["role"] == "user"
    assert user["content"] == (
        "Notes:\n\n"
        "[c1] path: work/rates card 2026-10-05.md | section: Rates | date: 2026-10-05 | latest\n"
        "Day rate: £600.\n\n"
        "[c2] path: work/rates card_2026-07.md | section: - | date: 2026-07-01 | "
        "older version, superseded by work/rates card 2026-10-05.md\n"
        "Day rate: £550.\n\n"
        "[c3] path: journal/x.md | section: - | date: undated | latest\n"
        "Met Ana.\n\n"
        "Time mode: present\n"
        "Question: What is the day rate?")


def test_note_status_labels():
    older = cand(4, "a.md", "x", latest=False)
    entry = cand(5, "log.md", "x", superseded_by="log.md @ 2026-05-02")
    user = build_messages("q", [older, entry], "history")[1]["content"]
    assert "[c1] path: a.md | section: - | date: 2026-06-01 | older version\n" in user
    assert "| older entry, superseded by log.md @ 2026-05-02\n" in user


def test_parse_citations_formats():
    text = ("The rate is £600 [c1]. It was £550 [c1, c2]. Both held [c1][c3]. "
            "Ana agreed. [c2]\n- Dr. Rao signed it [C3].")
    assert parse_citations(text) == [
        ("The rate is £600.", ["c1"]),
        ("It was £550.", ["c1", "c2"]),
        ("Both held.", ["c1", "c3"]),
        ("Ana agreed.", ["c2"]),
        ("Dr. Rao signed it.", ["c3"]),
    ]


def test_parse_citations_uncited_and_own_line():
    assert parse_citations("Here is what I found:\nRate 3.5% [c1].\n[c2]") == [
        ("Here is what I found:", []), ("Rate 3.5%.", ["c1", "c2"])]
    assert parse_citations("On 2026-04-03: Rate: £500 [c1].") == [
        ("On 2026-04-03: Rate: £500.", ["c1"])]


def test_generate_draft_with_citations():
    writer = FakeWriter("The rate is £600 [c1]. Earlier £550 [c2][c1].")
    d = generate.generate("What is the rate?", NOTES, "present", writer)
    assert d.citations == ["c1", "c2"] and not d.abstained
    assert (d.input_tokens, d.output_tokens) == (123, 7)
    request, stage = writer.calls[0]
    assert stage == "generate" and request.question == "What is the rate?"
    assert request.mode == "present" and request.policy is None
    assert [n["path"] for n in request.notes] == [c.path for c in NOTES]
    assert (d.messages, d.notes) == (request.messages, request.notes)
    assert (d.writer, d.trace) == ("fake", {"seen": len(NOTES)})   # handed back


def test_generate_abstain_and_think_block():
    d = generate.generate("q", NOTES, "any", FakeWriter("<think>hmm</think> I don't know "
                                                       "from my notes"))
    assert d.abstained and d.text == ABSTAIN and d.citations == []
    writer = FakeWriter("x")
    d = generate.generate("q", [], "any", writer)
    assert d.abstained and writer.calls == []


def test_generate_with_builtin_writer_records_ledger():
    ledger = cost_ledger.Ledger()
    d = generate.generate("What is the day rate?", NOTES[:1], "present",
                          builtin_writer.BuiltinWriter(), ledger=ledger)
    assert d.text == "Day rate: £600 [c1]." and d.citations == ["c1"]
    assert ledger.rows[0]["stage"] == "generate"
    assert ledger.rows[0]["model"] == builtin_writer.WRITER_MODEL


def read_back(request) -> tuple:
    """(question, mode, notes) the request's own messages state (its text stripped)."""
    q, mode, notes = builtin_writer.parse_prompt(request.messages[-1]["content"])
    return q, mode, [{**n, "text": n["text"].strip()} for n in notes]


def test_every_prompt_form_hands_on_the_notes_its_messages_show():
    four = NOTES + [cand(4, "home/boiler.md", "Service in May.", "2026-05-01")]
    for form in generate.PROMPT_FORMS:
        req = generate.request("What is  my day rate?", four, "present", form=form)
        assert req.messages == build_messages("What is  my day rate?", four, "present",
                                              form=form)
        system, user = req.messages
        assert read_back(req) == (req.question, req.mode, req.notes), form
        assert (req.question, req.mode) == ("What is my day rate?", "present"), form
        ids = ["c1", "c2", "c3"] + ([] if form == "top3" else ["c4"])
        assert [n["id"] for n in req.notes] == ids, form
        assert req.notes[1]["status"] == "older version, superseded by " + NOTES[0].path
        assert req.notes[1]["section"] == "" and req.notes[0]["section"] == "Rates"
        assert "Rules" not in req.notes[-1]["text"] and "Service" in req.notes[-1]["text"] \
            or form == "top3", form
        rules_in = user["content"] if form == "rules-last" else system["content"]
        assert "End every sentence that states a fact" in rules_in, form
    numbered = build_messages("q?", NOTES, "present", form="numbered")
    assert "[1] path: work/rates card 2026-10-05.md" in numbered[1]["content"]
    assert "like [2]" in numbered[0]["content"] and "[c" not in numbered[0]["content"]
    example = build_messages("q?", NOTES, "present", form="example")[0]["content"]
    assert "one fact per sentence" in example.lower()


def test_unknown_prompt_form_is_a_clear_error():
    import pytest
    with pytest.raises(ValueError, match="unknown prompt form 'short'"):
        build_messages("q?", NOTES, "present", form="short")
