"""What a new user tripped on (issue 44, item 6), each on notes written here: an empty
folder ingested, the registry's empty table, --config outside ingest, the --help of
`verso ingest` and `verso projects`, a follow-up that lost the method its question
named (the judge a named backend brings: tests/test_ollama.py)."""

import json

import pytest

from verso import chat
from verso import cli
from verso import followup
from verso import harness
from verso import ingest
from verso import store
from verso import store_load
from tests.vaults import write


def one_line(text: str) -> str:
    assert text.count("\n") == 1, text
    return text


# ------------------------------------------------------------------ (a) an empty folder

def test_ingest_of_a_folder_without_notes_is_one_line_naming_what_is_read(tmp_path, capsys):
    """It printed "indexed 0 of 0 files" and exited 0; the next question then failed."""
    empty = tmp_path / "empty"
    empty.mkdir()
    write(tmp_path, "pdfs/scan.pdf", b"%PDF-1.4")
    write(tmp_path, "pdfs/attachments/figure.md", "# Figure 3\nThe gel image.\n")
    for folder in (empty, tmp_path / "pdfs"):
        assert cli.main(["ingest", str(folder), "--index", str(tmp_path / "i")]) == 2
        out = capsys.readouterr()
        err = one_line(out.err)
        assert out.out == "" and f"no notes in {folder.resolve()}" in err
        assert ".md and .txt files" in err and "attachments/" in err
    assert not (tmp_path / "i" / "manifest.json").exists() and store.remembered() is None
    write(tmp_path, "blank/a.md", "")                       # notes, none of them readable
    write(tmp_path, "blank/b.txt", b"\x00\x01\x02")
    assert cli.main(["ingest", str(tmp_path / "blank"), "--index", str(tmp_path / "i")]) == 2
    err = one_line(capsys.readouterr().err)
    assert "none of the 2 notes" in err and "a.md: empty" in err and "b.txt: binary" in err


# ---------------------------------------------------------- (b), (c) the registry, --config

@pytest.fixture
def lab(tmp_path):
    """A lab vault: a project note, a private notebook, a shareable methods folder."""
    v = tmp_path / "lab"
    write(v, "projects/primer redesign.md", "# Primer redesign\n\nStatus: paused - waiting "
          "for the new oligos\n")
    write(v, "notebook/2026-10-02.md", "# 2 Oct\n\nRan the Taq PCR at 58 °C; clean bands.\n")
    write(v, "methods/gel.md", "# Agarose gel\n\nRun the 1% gel at 100 V for 40 minutes.\n")
    return v


def test_projects_without_a_registry_say_how_to_make_one(lab, tmp_path, capsys):
    idx = tmp_path / "idx"
    base = ["projects", "--vault", str(lab), "--index", str(idx), "--backend", "builtin"]
    assert cli.main(base) == 0
    said = capsys.readouterr().out
    assert said.startswith("no projects in the registry") and "[registry]" in said
    assert 'folders = ["projects"]' in said and "verso.toml" in said
    write(lab, "verso.toml", '[registry]\nfolders = ["projects"]\n')   # as it says
    assert cli.main(base) == 0
    assert "Primer redesign  paused" in capsys.readouterr().out


def test_a_config_changes_only_through_ingest(lab, tmp_path, capsys):
    """`projects --config FILE` became the index's config unsaid: later answers then
    treated the folders it marked shareable as shareable."""
    idx = tmp_path / "idx"
    alt = write(tmp_path, "alt.toml", '[folders.notebook]\nprivacy = "shareable"\n')
    assert ingest.main([str(lab), "--index", str(idx), "--quiet"]) == 0

    def kept():
        i = store_load.load_index(idx)
        return ingest.config_of(i.manifest)["given"], i.by_path["notebook/2026-10-02.md"][
            "private"]
    question = "What temperature did I run the Taq PCR at?"
    for argv in (["projects", "--config", str(alt), "--index", str(idx)],
                 [question, "--config", str(alt), "--index", str(idx), "--backend", "builtin"]):
        assert cli.main(argv) == 2
        out = capsys.readouterr()
        err = one_line(out.err)
        assert out.out == "" and f"`verso ingest {lab.resolve()} --config {alt}" in err
        assert kept() == (False, True)                     # the notebook still private
    assert cli.main(["ingest", str(lab), "--index", str(idx), "--config", str(alt),
                     "--quiet"]) == 0                      # the way to change it
    assert kept() == (True, False)
    assert cli.main([question, "--config", str(alt), "--index", str(idx), "--backend",
                     "builtin", "--json"]) == 0            # the kept one: nothing changes
    assert "58" in json.loads(capsys.readouterr().out)["answer"] and kept() == (True, False)


# ------------------------------------------------------------------------- (d) --help

@pytest.mark.parametrize("argv,usage", [
    (["ingest", "--help"], "usage: verso ingest "),
    (["projects", "--help"], "usage: verso projects "),
    (["--help-question"], "usage: verso "),
])
def test_help_names_the_verso_command(argv, usage, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    out = capsys.readouterr().out
    assert e.value.code == 0 and out.startswith(usage) and ".py" not in out.split("\n")[0]
    assert "question" not in out or argv[0] != "projects"   # projects: its own options


def test_the_programs_in_a_checkout_keep_their_own_names(capsys):
    for main, argv, usage in ((ingest.main, ["--help"], "usage: ingest.py "),
                              (harness.main, ["--projects", "--help"],
                               "usage: harness.py --projects ")):
        with pytest.raises(SystemExit):
            main(argv)
        assert capsys.readouterr().out.startswith(usage)


# ------------------------------------------------------------- (e) a follow-up's subject

@pytest.mark.parametrize("question,subject", [
    ("What annealing temperature do I use for the Taq PCR now?",
     "the annealing temperature for the Taq PCR"),
    ("What speed do I run the gel at for Western blots?", "the speed for Western blots"),
    ("Which flat did I end up taking in Lisbon?", "the flat in Lisbon"),
    ("What buffer do I use for the Bradford assay and the Lowry assay?",
     "the buffer for the Bradford assay and the Lowry assay"),
    ("What is the current price of the sourdough loaf?", "the price of the sourdough loaf"),
    ("Which flat did Maren sign in Lisbon?", "the flat in Lisbon"),   # Maren: a pronoun's
])
def test_a_subject_keeps_the_names_its_question_gives(question, subject):
    assert followup.subject(question) == subject


@pytest.fixture
def pcr(tmp_path):
    """Three PCR methods, each with its annealing temperature, two of them changed."""
    v = tmp_path / "pcr"
    write(v, "methods/Taq PCR 2026-03-02.md", "# Taq PCR\n\nAnnealing temperature: 55 °C "
          "for 30 s, 30 cycles.\nExtension at 72 °C, 1 min per kb.\n")
    write(v, "methods/Taq PCR 2026-09-14.md", "# Taq PCR\n\nAnnealing temperature: 58 °C "
          "for 30 s, 32 cycles (raised after the smeared March gels).\nExtension at 72 °C, "
          "1 min per kb.\n")
    write(v, "methods/Q5 PCR 2026-05-10.md", "# Q5 high-fidelity PCR\n\nAnnealing "
          "temperature: 62 °C for 20 s, 30 cycles.\nExtension at 72 °C, 30 s per kb.\n")
    write(v, "methods/Q5 PCR 2026-10-01.md", "# Q5 high-fidelity PCR\n\nAnnealing "
          "temperature: 64 °C for 20 s, 30 cycles.\nExtension at 72 °C, 30 s per kb.\n")
    write(v, "methods/colony PCR.md", "# Colony PCR\n\nAnnealing temperature: 52 °C, "
          "25 cycles, one colony per tube.\n")
    return harness.load(tmp_path / "pcr-idx", v, "builtin")


def test_and_before_that_keeps_the_method_its_question_named(pcr):
    """The rewrite lost "Taq PCR" ("What was the annealing temperature before that?")
    and the answer abstained."""
    conv = chat.Conversation(*pcr)
    assert "58 °C" in conv.ask("What annealing temperature do I use for the Taq PCR now?")[
        "answer"]
    turn = conv.ask("and before that?")
    assert (turn["rewrite"], turn["how"]) == (
        "What was the annealing temperature for the Taq PCR before that?", "before that")
    assert "55 °C" in turn["answer"] and not any(
        t in turn["answer"] for t in ("52 °C", "58 °C", "62 °C", "64 °C"))
