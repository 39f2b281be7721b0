"""Private text never reaches a file meant to be shared unless the user asks: the HTML
trace (harness --html, chat /html, evaluate --html) and the chat transcript (--save)
replace every passage of a private folder by its path and "private: text not included",
and a sentence citing one likewise; the terminal answer for the owner is unchanged."""

import json

import pytest

from verso import chat
from verso import harness
from verso import html_report

MARKER = "VERSO-PRIVATE-MARKER-7f3a"          # in the sample vault's private health/ notes
QUESTION = "What is the clinic ref in my physio notes?"


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    return harness.load(tmp_path_factory.mktemp("idx"), harness.SAMPLE_VAULT, "builtin")


def test_the_owner_sees_the_private_answer_and_a_shared_copy_does_not(loaded):
    idx, be = loaded
    a = harness.ask(QUESTION, index=idx, backend=be).to_dict()
    assert MARKER in json.dumps(a)                       # the owner's own answer
    shared = html_report.redact(a)
    assert MARKER not in json.dumps(shared, ensure_ascii=False)
    private = [s for s in shared["sources"] if s["private"]]
    assert private and all(s["text"] == html_report.PRIVATE_TEXT for s in private)
    assert {s["path"] for s in private} >= {"health/physio notes.md"}      # the path stays
    assert MARKER not in html_report.trace_page(shared)


def test_nothing_private_leaves_the_answer_as_it_is(loaded):
    idx, be = loaded
    a = harness.ask("What is Maren's current day rate?", index=idx, backend=be,
                    include_private=False).to_dict()
    assert html_report.redact(a) is a


def test_the_cli_trace_and_the_chat_transcript_leave_it_out_unless_asked(loaded, tmp_path,
                                                                          capsys):
    base = [QUESTION, "--vault", str(harness.SAMPLE_VAULT), "--index",
            str(loaded[0].dir), "--backend", "builtin"]
    assert harness.main(base + ["--html", str(tmp_path / "t.html")]) == 0
    assert MARKER in capsys.readouterr().out              # the terminal: the owner's
    assert MARKER not in (tmp_path / "t.html").read_text(encoding="utf-8")
    assert harness.main(base + ["--html", str(tmp_path / "p.html"), "--include-private"]) == 0
    assert MARKER in (tmp_path / "p.html").read_text(encoding="utf-8")
    capsys.readouterr()
    conv = chat.Conversation(*loaded)
    saved = tmp_path / "chat.jsonl"
    lines = iter([QUESTION, "/quit"])
    chat.loop(conv, read=lambda prompt: next(lines), save=saved)
    assert MARKER in capsys.readouterr().out
    assert saved.read_text(encoding="utf-8") and MARKER not in saved.read_text(encoding="utf-8")
