"""Private text never reaches a file meant to be shared: with --redact the HTML trace
(harness --html, chat /html, evaluate --html) and the chat transcript (--save) replace
every passage of a private folder by its path and "private: text not included", and a
sentence citing one likewise. Without it they are the asker's own: the text, under a
not-for-sharing banner at the top. The terminal answer for the owner is unchanged."""

import json

import pytest

from verso import chat
from verso import evaluate
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


def _ask_cli(loaded, tmp_path, name, *flags):
    base = [QUESTION, "--vault", str(harness.SAMPLE_VAULT), "--index",
            str(loaded[0].dir), "--backend", "builtin"]
    assert harness.main(base + ["--html", str(tmp_path / name), *flags]) == 0
    return (tmp_path / name).read_text(encoding="utf-8")


def test_the_cli_trace_holds_the_text_for_the_asker_and_redact_leaves_it_out(
        loaded, tmp_path, capsys):
    own = _ask_cli(loaded, tmp_path, "own.html")
    out = capsys.readouterr()
    assert MARKER in out.out                              # the terminal: the owner's
    assert MARKER in own and own.index(html_report.PRIVATE_BANNER) < own.index("<h1>")
    assert "not for sharing" in out.err                   # said where it was written
    shared = _ask_cli(loaded, tmp_path, "shared.html", "--redact")
    assert MARKER not in shared and html_report.PRIVATE_TEXT in shared
    assert html_report.PRIVATE_BANNER not in shared and "health/physio notes.md" in shared
    assert MARKER in _ask_cli(loaded, tmp_path, "old.html", "--include-private")  # no-op


def _chat(loaded, tmp_path, name, redact):
    conv = chat.Conversation(*loaded)
    lines = iter(["What is Maren's current day rate?", QUESTION,
                  "/html " + str(tmp_path / f"{name}.html"), "/quit"])
    chat.loop(conv, read=lambda prompt: next(lines), save=tmp_path / f"{name}.jsonl",
              redact=redact)
    return ((tmp_path / f"{name}.jsonl").read_text(encoding="utf-8"),
            (tmp_path / f"{name}.html").read_text(encoding="utf-8"))


def test_the_chat_transcript_and_page_hold_the_text_and_redact_leaves_it_out(
        loaded, tmp_path, capsys):
    saved, page = _chat(loaded, tmp_path, "own", redact=False)
    assert MARKER in capsys.readouterr().out
    rows = [json.loads(x) for x in saved.splitlines()]
    assert rows[0] == {"banner": html_report.PRIVATE_BANNER}       # the top of the file
    assert len(rows) == 3 and MARKER in rows[2]["answer"]
    assert MARKER in page and html_report.PRIVATE_BANNER in page
    saved, page = _chat(loaded, tmp_path, "shared", redact=True)
    assert MARKER in capsys.readouterr().out              # the terminal is still the owner's
    assert MARKER not in saved and "banner" not in saved and len(saved.splitlines()) == 2
    assert MARKER not in page and html_report.PRIVATE_TEXT in page
    assert chat.main(["--include-private", "--vault", "/nonexistent/vault"]) == 2   # accepted


def test_evaluate_pages_hold_the_text_and_redact_leaves_it_out(loaded, tmp_path, capsys):
    q = dict(id="p1", question=QUESTION, category="lookup", time_mode="present",
             answer="", key_facts=[], forbidden_facts=[],
             gold_files=["health/physio notes.md"], answerable=True)
    (tmp_path / "q.jsonl").write_text(json.dumps(q) + "\n", encoding="utf-8")
    base = ["--vault", str(harness.SAMPLE_VAULT), "--questions", str(tmp_path / "q.jsonl"),
            "--backend", "builtin", "--index", str(loaded[0].dir), "--variant", "full",
            "--json"]

    def pages(name, *flags):
        assert evaluate.main(base + ["--html", str(tmp_path / name), *flags]) == 0
        return "".join(f.read_text(encoding="utf-8") for f in (tmp_path / name).rglob("*.html"))
    own = pages("own")
    assert MARKER in own and html_report.PRIVATE_BANNER in own
    shared = pages("shared", "--redact")
    assert MARKER not in shared and html_report.PRIVATE_TEXT in shared
    capsys.readouterr()


class _Trace:
    def __init__(self, d):
        self.d = d

    def to_dict(self):
        return self.d


def test_a_later_private_turn_puts_the_banner_at_the_top_of_the_transcript(tmp_path):
    def turn(answer, private):
        src = {"path": "health/a.md", "private": private, "text": answer}
        return {"question": "q", "rewrite": "q", "how": "as asked", "answer": answer,
                "citations": [], "verdict": "SHIP", "time_mode": "present",
                "trace": _Trace({"answer": answer, "sources": [src], "candidates": {}})}
    path = tmp_path / "t.jsonl"
    chat.save_turn(path, turn("shareable", False))
    assert "banner" not in path.read_text(encoding="utf-8")       # nothing private yet
    chat.save_turn(path, turn(MARKER + ".", True))
    chat.save_turn(path, turn(MARKER + " again.", True))
    rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    assert rows[0] == {"banner": html_report.PRIVATE_BANNER}       # once, at the top
    assert [r["answer"] for r in rows[1:]] == ["shareable", MARKER + ".", MARKER + " again."]
