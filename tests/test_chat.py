"""chat.py: follow-ups rewritten into full questions (the builtin rules and a model's
rewrite checked in code), the conversation loop and its commands, the transcript, and
evaluate's conversation runs."""

import json

import pytest

from verso import builtin_writer
from verso import chat
from verso import evaluate
from verso import followup
from verso import harness
from verso import html_report

RETAINER = {"question": "What is the Kittiwake retainer now?", "answer": "£3,350 [c1].",
            "citations": [{"id": "c1", "path": "a.md", "date": "2026-10-01"},
                          {"id": "c2", "path": "b.md", "date": "2026-06-01"}]}
FLAT = {"question": "How much is the rent for the Lisbon flat?", "answer": "€1,150 [c1].",
        "citations": []}
ANA = {"question": "What did Ana say about the flat?", "answer": "x", "citations": []}


@pytest.mark.parametrize("prev,msg,full,how", [
    (RETAINER, "and before that?", "What was the Kittiwake retainer before that?", "before that"),
    (FLAT, "what about the deposit?", "How much is the deposit for the Lisbon flat?",
     "what about"),
    (RETAINER, "what about Aireside?", "What is the Aireside retainer now?", "what about"),
    (RETAINER, "is that still true?", "What is the Kittiwake retainer now?", "still true"),
    (RETAINER, "and in June?", "What is the Kittiwake retainer in June?", "carried subject"),
    (RETAINER, "how much was it then?", "how much was the Kittiwake retainer then?", "pronoun"),
    (ANA, "what is her phone number?", "what is Ana's phone number?", "pronoun"),
    (ANA, "who did she say?", "who did Ana say?", "pronoun"),
    (RETAINER, "What is the studio rent?", "What is the studio rent?", "as asked"),
    (None, "and before that?", "and before that?", "as asked"),
])
def test_the_builtin_rewrite_rules(prev, msg, full, how):
    assert followup.rewrite(msg, prev) == (full, how)


def test_subject_drops_question_words_and_time_words():
    assert followup.subject("What is the Kittiwake retainer now?") == "the Kittiwake retainer"
    assert followup.subject("How much was the rent in June?") == "the rent"
    assert followup.subject("Who's my physio?") == "my physio"


class Writer:
    name, model = "fake-model", "fake"

    def __init__(self, reply):
        self.reply, self.calls = reply, []

    def write(self, request, stage="generate", ledger=None):
        self.calls.append(request.messages)
        return builtin_writer.Written(self.reply, self.name, 10, 5)


def test_a_model_rewrite_is_kept_only_when_it_names_the_follow_up_own_words():
    good = Writer("How much is the deposit for the Lisbon flat?")
    assert followup.model_rewrite(good, "what about the deposit?", FLAT) == (
        "How much is the deposit for the Lisbon flat?", "model")
    assert "Follow-up: what about the deposit?" in good.calls[0][0]["content"]
    dropped = Writer("How much is the rent for the Lisbon flat?")        # lost "deposit"
    assert followup.model_rewrite(dropped, "what about the deposit?", FLAT) == (
        "How much is the deposit for the Lisbon flat?", "what about")
    assert followup.model_rewrite(None, "and before that?", None) == ("and before that?",
                                                                 "as asked")


def test_the_rewrite_asks_the_model_itself_not_the_line_chooser():
    """A model backend's writer chooses lines from notes; a rewrite is free text (the
    chooser, handed the rewrite prompt, found no notes and said it did not know)."""
    from verso import choosing_writer
    model = Writer("How much is the deposit for the Lisbon flat?")
    assert followup.model_rewrite(choosing_writer.ChoosingWriter(model), "what about the deposit?",
                              FLAT) == ("How much is the deposit for the Lisbon flat?", "model")
    assert len(model.calls) == 1
    said = Writer("I don't know from my notes.")            # an answer, not a question
    assert followup.model_rewrite(said, "who did she say?", FLAT)[1] != "model"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    return harness.load(tmp_path_factory.mktemp("idx"), harness.SAMPLE_VAULT, "builtin")


def test_a_conversation_carries_the_subject_and_saves_a_transcript(loaded, tmp_path,
                                                                  capsys):
    conv = chat.Conversation(*loaded)
    lines = iter(["What is the Kittiwake retainer now?", "and before that?", "/sources",
                  "/cost", "/new", "/html " + str(tmp_path / "t.html"), "/quit"])
    save = tmp_path / "chat.jsonl"
    assert chat.loop(conv, read=lambda _: next(lines), save=save) == 0
    out = capsys.readouterr().out
    assert "→ What was the Kittiwake retainer before that?" in out
    assert "[c1]" in out and "rerank" in out and "(a new conversation)" in out
    assert (tmp_path / "t.html").read_text().startswith("<!doctype html>")
    banner, *rows = [json.loads(x) for x in save.read_text().splitlines()]
    assert banner == {"banner": html_report.PRIVATE_BANNER}   # private notes were searched
    assert [r["how"] for r in rows] == ["as asked", "before that"]
    assert set(rows[0]) == {"question", "rewrite", "how", "answer", "citations", "verdict",
                            "time_mode"}
    assert rows[1]["time_mode"] == "as_of"          # the notes before the cited version
    assert all(c["date"] < "2026-10-01" for c in rows[1]["citations"])


def test_evaluate_scores_a_conversation_file(tmp_path, capsys):
    base = dict(category="current", answer="Retainer: £3,350 per month.", key_facts=["3,350"],
                forbidden_facts=[], gold_files=["work/kittiwake retainer-oct2026.md"],
                answerable=True)
    qs = [dict(base, id="k1", conversation="k", turn=1, referent=[], time_mode="present",
               question="What is the Kittiwake retainer now?"),
          dict(base, id="k2", conversation="k", turn=2, referent=["Kittiwake", "retainer"],
               time_mode="history", category="change", question="and before that?",
               answer="It was £2,400, then £2,750, then £3,100.", key_facts=["2,400"],
               gold_files=["work/2026-04-03 kittiwake retainer.md"])]
    path = tmp_path / "conv.jsonl"
    path.write_text("".join(json.dumps(q) + "\n" for q in qs))
    vault = str(harness.SAMPLE_VAULT)
    assert evaluate.main(["--check", str(path), "--vault", vault]) == 0
    capsys.readouterr()
    assert evaluate.main(["--conversations", str(path), "--vault", vault, "--backend",
                          "builtin", "--out", str(tmp_path / "run"), "--json"]) == 0
    c = json.loads(capsys.readouterr().out)["conversations"]
    assert c["referent_kept"] == {"k": 1, "n": 1, "p": 1.0}
    assert c["turns"]["n"] == 2 and c["by_rule"]["before that"]["referent_kept"]["k"] == 1
    records = evaluate.load_records(tmp_path / "run")
    assert records[1]["rewrite"] == "What was the Kittiwake retainer before that?"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({k: v for k, v in qs[1].items() if k != "referent"}) + "\n")
    assert evaluate.main(["--conversations", str(bad), "--vault", vault]) == 2


def test_python_harness_chat_runs_the_conversation_program(tmp_path):
    import subprocess
    import sys
    root = harness.SAMPLE_VAULT.parent
    run = subprocess.run([sys.executable, str(root / "harness.py"), "--chat", "--backend",
                          "builtin", "--index", str(tmp_path / "idx"), "--vault",
                          str(harness.SAMPLE_VAULT)],
                         input="What is Maren's current day rate?\nis that still true?\n/quit\n",
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "760" in run.stdout and "→ What is Maren's day rate now?" in run.stdout
    assert "verso chat over" in run.stderr


# ------------------------------------------------ issue 37, item 3: sound rewrites only

LOAF = {"question": "What is the current price of the sourdough loaf?",
        "answer": "The sourdough loaf costs £4.80 [c1].",
        "citations": [{"id": "c1", "path": "bakery/prices 2026-09-14.md", "date": "2026-09-14"}]}
WHO = {"question": "Who signs off my work at Aireside Housing?", "citations": [],
       "answer": "Role: Head of Digital; Name: Priya Nandakumar; Phone: 0113 496 0721 [c1]."}


@pytest.fixture(scope="module")
def bakery(tmp_path_factory):
    """Two dated versions of one price list: a loaf and a baguette in each."""
    from tests.vaults import write
    vault = tmp_path_factory.mktemp("bakery")
    write(vault, "bakery/prices 2026-03-02.md", "# Bakery prices\n\nThe sourdough loaf costs "
          "£4.20 at the corner bakery.\nThe baguette costs £2.10.\n")
    write(vault, "bakery/prices 2026-09-14.md", "# Bakery prices\n\nThe sourdough loaf costs "
          "£4.80 at the corner bakery.\nThe baguette costs £2.40.\n")
    write(vault, "garden.md", "# Garden\n\nPlanted tomatoes on the balcony in May.\n")
    return harness.load(tmp_path_factory.mktemp("bakery-idx"), vault, "builtin")


def test_a_thing_after_a_value_is_asked_as_written_with_the_subject_beside_it(bakery):
    """"what about the baguette?" after a loaf's price became "the current baguette of
    the sourdough loaf": a baguette is not a value of a loaf. Asked as written, the
    previous subject shown and handed on; the evidence holds the baguette's price."""
    conv = chat.Conversation(*bakery)
    conv.ask(LOAF["question"])
    turn = conv.ask("what about the baguette?")
    assert (turn["rewrite"], turn["how"]) == (
        "what about the baguette? (about the price of the sourdough loaf)", "as written")
    assert any("£2.40" in s["text"] for s in turn["trace"].sources)
    # asked as typed, the subject searched only: the writer answers the baguette, not
    # the loaf the subject names (with the subject in the question it said £4.80)
    assert turn["context"] == "the price of the sourdough loaf"
    assert turn["trace"].question == "what about the baguette?"
    assert "£2.40" in turn["answer"] and "£4.80" not in turn["answer"]
    subj = followup.subject(LOAF["question"])          # a model's rewrite of the same kind
    assert not followup.keeps("what about the baguette?",
                          "What is the current baguette of the sourdough loaf?", LOAF, subj)
    assert followup.keeps("what about the baguette?", "What is the price of the baguette?",
                      LOAF, subj)


def test_before_that_asks_the_notes_as_they_stood_before_the_version_just_answered(bakery):
    """"and before that?" after a current price was answered with the current price
    again ("current" carried into the rewrite set the present mode)."""
    conv = chat.Conversation(*bakery)
    assert "£4.80" in conv.ask(LOAF["question"])["answer"]
    turn = conv.ask("and before that?")
    assert turn["rewrite"] == "What was the price of the sourdough loaf before that?"
    assert turn["time_mode"] == "as_of"
    assert "£4.20" in turn["answer"] and "£4.80" not in turn["answer"]
    now = conv.ask("and now?")                      # the time words set the mode back
    assert now["time_mode"] == "present" and "£4.80" in now["answer"]


@pytest.mark.parametrize("prev,msg,full,how", [
    (WHO, "what's her number?", "what's Priya Nandakumar's number?", "pronoun"),
    ({"question": "Which flat did I end up taking in Lisbon?", "answer": "x", "citations": []},
     "what about the deposit?", "What is the deposit of the flat in Lisbon?", "what about"),
    (RETAINER, "and what were they paying in May?", "what were Kittiwake paying in May?",
     "pronoun"),
])
def test_a_well_formed_rewrite_is_kept(prev, msg, full, how):
    """A rewrite that is one question, keeps the follow-up's words and takes only the
    previous turn's subject or name is kept (before: "what's Housing's number?", "Which
    flat did I end up deposit in Lisbon?", "and what were Kittiwake ...")."""
    assert followup.rewrite(msg, prev) == (full, how)
    assert followup.keeps(msg, full, prev, followup.subject(prev["question"]))


@pytest.mark.parametrize("full", [
    "who did I agree and what were Kittiwake paying with?",     # two questions glued
    "when did I hand Has my D8 visa been approved yet in?",
    "how much did did I hand it in cost?",                        # a word twice, a pronoun
    "What is the rent for the Porto flat?",                       # "Porto" from nowhere
])
def test_a_rewrite_that_is_not_a_sound_question_is_not_kept(full):
    prev = {"question": "Has my D8 visa been approved yet?", "answer": "x", "citations": []}
    assert not followup.keeps("when did I hand it in?", full, prev, "my D8 visa")


def test_the_time_words_of_a_follow_up_set_the_mode():
    assert followup.when("and before that?", LOAF) == {"as_of": "2026-09-13"}
    assert followup.when("what was it earlier?", {**LOAF, "citations": []}) == {"mode": "history"}
    assert followup.when("is that still true?", LOAF) == {"mode": "present"}
    assert followup.when("and currently?", LOAF) == {"mode": "present"}
    assert followup.when("what about the baguette?", LOAF) == {}
    assert followup.subject("What was my marathon goal back in June?") == "my marathon goal"
    assert followup.subject("What did the physio find when I went in?") == "the physio"


@pytest.fixture(scope="module")
def bread_diary(tmp_path_factory):
    """A price list naming a loaf and a baguette, and 25 diary days that each name a
    baguette once: "baguette" alone finds the diary, not the price list."""
    from tests.vaults import write
    vault = tmp_path_factory.mktemp("bread")
    write(vault, "bakery/prices 2026-09-14.md", "# Bakery prices\n\nThe sourdough loaf "
          "costs £4.80 at the corner bakery.\nThe baguette costs £2.40.\n")
    for i in range(25):
        write(vault, f"diary/day {i:02d}.md", f"# Day {i}\n\nBaked a baguette for lunch "
              "with Sam.\n")
    return harness.load(tmp_path_factory.mktemp("bread-idx"), vault, "builtin")


def test_context_is_searched_beside_a_follow_up_but_the_writer_reads_the_follow_up(
        bread_diary):
    """harness.ask(context=): a follow-up whose own words do not find the note finds it
    with the previous subject searched beside it, and the answer is the follow-up's
    thing (the baguette's price), not the subject's (the loaf's)."""
    idx, be = bread_diary
    bare = harness.ask("what about the baguette?", index=idx, backend=be)
    assert not any(p.startswith("bakery/") for p in bare.retrieved)
    assert "£2.40" not in bare.answer
    asked = harness.ask("what about the baguette?", index=idx, backend=be,
                        context="the price of the sourdough loaf")
    assert asked.question == "what about the baguette?"
    assert asked.sources[0]["path"] == "bakery/prices 2026-09-14.md"
    assert "£2.40" in asked.answer and "£4.80" not in asked.answer
    conv = chat.Conversation(idx, be)                 # the same through a conversation
    assert "£4.80" in conv.ask(LOAF["question"])["answer"]
    turn = conv.ask("what about the baguette?")
    assert (turn["how"], turn["context"]) == ("as written", "the price of the sourdough loaf")
    assert "£2.40" in turn["answer"] and "£4.80" not in turn["answer"]
