"""A new user's first steps on their own notes: the index remembers its vault, so the
harness, evaluate and the notebook API answer from it without --vault."""

import json
import os
import shutil
import subprocess

import pytest

from verso import evaluate
from verso import cli
from verso import harness
from verso import ingest
from verso import store
from verso import store_load
from vaults import write

QUESTION = "How much is the studio rent now?"


@pytest.fixture
def notes(tmp_path):
    v = tmp_path / "notes"
    write(v, "studio/studio rent 2026-03.md", "# Studio rent\nThe studio rent is £610 a month.")
    write(v, "studio/studio rent 2026-09.md", "# Studio rent\nFrom September the studio "
                                                "rent is £655 a month, paid on the 1st.")
    write(v, "garden/seeds.md", "# Seeds\nSow the broad beans in November.")
    return v


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh working folder, no $VERSO_HOME, and a user of its own: the state lives in
    the user's data folder ($XDG_DATA_HOME/verso). Returns the working folder."""
    cwd = tmp_path / "work"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("VERSO_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "user" / "data"))
    return cwd


def test_default_index_answers_from_the_vault_it_was_built_from(notes, home, capsys):
    assert ingest.main([str(notes), "--quiet"]) == 0
    assert store.home() == home.parent / "user" / "data" / "verso"
    assert (store.home() / "index" / "manifest.json").exists() and not (home / ".verso").exists()
    capsys.readouterr()
    assert harness.main([QUESTION, "--backend", "builtin"]) == 0
    out = capsys.readouterr()
    assert "655" in out.out and "610" not in out.out.split("\n\n")[0]
    assert "studio/studio rent 2026-09.md" in out.out
    assert "sample-vault" not in out.out + out.err


def test_index_flag_without_vault_uses_that_index_vault(notes, home, tmp_path, capsys):
    idx = tmp_path / "my-index"
    assert ingest.main([str(notes), "--index", str(idx), "--quiet"]) == 0
    capsys.readouterr()
    assert harness.main([QUESTION, "--index", str(idx), "--backend", "builtin", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert [c["path"] for c in a["citations"]] == ["studio/studio rent 2026-09.md"]
    assert not (store.home() / "index").exists()   # no other index was built


def test_notebook_load_and_ask_follow_the_index(notes, home, tmp_path):
    idx_dir = tmp_path / "nb-index"
    ingest.build_index(notes, idx_dir)
    a = harness.ask(QUESTION, index=str(idx_dir), backend="builtin")
    assert "655" in a.answer
    write(notes, "studio/studio rent 2026-11.md", "# Studio rent\nFrom November the "
                                                  "studio rent is £680 a month.")
    a = harness.ask(QUESTION, index=str(idx_dir), backend="builtin")
    assert "680" in a.answer                      # refreshed from the recorded vault


def test_a_moved_vault_answers_from_the_index_with_one_warning(notes, home, tmp_path,
                                                               capsys):
    idx = tmp_path / "idx"
    assert ingest.main([str(notes), "--index", str(idx), "--quiet"]) == 0
    notes.rename(tmp_path / "moved")
    capsys.readouterr()
    assert harness.main([QUESTION, "--index", str(idx), "--backend", "builtin"]) == 0
    out = capsys.readouterr()
    warning = [line for line in out.err.splitlines() if line]
    assert len(warning) == 1
    assert warning[0].startswith(f"vault {notes} not found: answering from the index built on 20")
    assert "655" in out.out


def test_another_vault_is_refused_without_advice_to_overwrite(notes, home, tmp_path,
                                                               capsys):
    idx = tmp_path / "idx"
    assert ingest.main([str(notes), "--index", str(idx), "--quiet"]) == 0
    capsys.readouterr()
    code = harness.main([QUESTION, "--index", str(idx), "--vault", str(harness.SAMPLE_VAULT),
                         "--backend", "builtin"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "--index DIR" in err and "--rebuild" not in err
    assert json.loads((idx / "manifest.json").read_text())["vault"] == str(notes.resolve())


def test_no_index_yet_means_the_sample_vault_and_it_says_so_every_time(home, capsys):
    assert harness.main(["What is Maren's current day rate?", "--backend", "builtin"]) == 0
    out = capsys.readouterr()
    assert "760" in out.out and out.err.strip() == harness.SAMPLE_NOTICE
    assert out.out.splitlines()[0] == f"({harness.SAMPLE_NOTICE})"      # stdout says it too
    assert store_load.built_from(store.home() / "sample")[0] == str(harness.SAMPLE_VAULT)
    assert not (store.home() / "index").exists() and not (home / ".verso").exists()
    assert harness.main(["What is Maren's current day rate?", "--backend", "builtin",
                         "--json"]) == 0                 # the index now exists: still said
    out = capsys.readouterr()
    assert out.err.strip() == harness.SAMPLE_NOTICE and json.loads(out.out)["sample_vault"]


def test_own_notes_carry_no_sample_mark(notes, home, capsys):
    assert ingest.main([str(notes), "--quiet"]) == 0
    capsys.readouterr()
    assert harness.main([QUESTION, "--backend", "builtin", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["sample_vault"] is False and out.err == ""


@pytest.mark.parametrize("make", [True, False])
def test_an_index_folder_without_an_index_and_no_vault_is_an_error(home, tmp_path, capsys,
                                                                    make):
    idx = tmp_path / "empty"
    if make:
        idx.mkdir()
    assert harness.main([QUESTION, "--index", str(idx), "--backend", "builtin"]) == 2
    err = capsys.readouterr().err
    assert f"no index in {idx}" in err and "verso ingest NOTES --index" in err
    assert not idx.exists() or list(idx.iterdir()) == []    # nothing was built there


def test_a_damaged_manifest_is_not_replaced_by_the_sample(home, capsys):
    (home / ".verso").mkdir()
    (home / ".verso" / "manifest.json").write_text("{not json")
    assert harness.main(["anything at all?", "--backend", "builtin"]) == 2
    err = capsys.readouterr().err
    assert "damaged" in err and "--rebuild" in err
    assert (home / ".verso" / "manifest.json").read_text() == "{not json"


def test_evaluate_takes_the_vault_from_the_index(notes, home, tmp_path, capsys):
    idx = tmp_path / "idx"
    ingest.build_index(notes, idx)
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"id": "r1", "question": QUESTION, "category": "current",
                              "time_mode": "present", "answer": "£655", "key_facts": ["655"],
                              "forbidden_facts": ["610"], "answerable": True,
                              "gold_files": ["studio/studio rent 2026-09.md"]}) + "\n")
    code = evaluate.main(["--index", str(idx), "--questions", str(qs), "--variant", "full",
                          "--backend", "builtin", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["vault"] == str(notes.resolve())
    assert evaluate.main(["--index", str(tmp_path / "none"), "--questions", str(qs)]) == 2


def test_render_prints_the_reason_of_each_failing_sentence():
    a = harness.Answer(question="q", answer="It is 5 [c1].", verdict="ESCALATE",
                       checks={"sentences": [{"sentence": "It is 5 [c1].", "ok": False,
                                              "reasons": ["5 not in the cited c1"]}]})
    assert "failing: It is 5 [c1].  (5 not in the cited c1)" in harness.render(a)


def test_help_says_where_the_vault_and_index_come_from(capsys):
    with pytest.raises(SystemExit):
        harness.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert text.index("The vault:") < text.index("The index:")
    assert "the vault the index was built from" in text


def test_ingest_progress_only_on_a_terminal_and_never_with_quiet(notes, tmp_path, capsys):
    assert ingest.main([str(notes), "--index", str(tmp_path / "i"), "--quiet"]) == 0
    assert capsys.readouterr() == ("", "")              # quiet: no progress, no summary
    assert ingest.main([str(notes), "--index", str(tmp_path / "i")]) == 0
    assert "indexed" in capsys.readouterr().out

    class Tty:
        text = ""

        def write(self, s):
            Tty.text += s

        def flush(self):
            pass

    meter = ingest._Meter(Tty())
    ingest.build_index(notes, tmp_path / "j", progress=meter)
    assert "reading 0/3 notes" in Tty.text and "chunks" in Tty.text
    meter("embedding", 128, 256)
    assert "s left" in Tty.text.rsplit("\r", 1)[-1]


@pytest.mark.skipif(shutil.which("verso") is None, reason="the verso console script is "
                    "installed by pip install -e . (CI does)")
def test_console_script_is_the_same_program(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("VERSO_HOME", "XDG_DATA_HOME")}
    env["HOME"] = str(tmp_path / "user")
    run = subprocess.run(["verso", "What is Maren's current day rate?", "--backend",
                          "builtin"], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    sample = tmp_path / "user" / ".local" / "share" / "verso" / "sample"
    assert "760" in run.stdout and (sample / "manifest.json").exists()
    assert not (tmp_path / ".verso").exists()


def test_mcp_serves_the_vault_its_index_records(notes, home, tmp_path, capsys):
    write(notes, "verso.toml", '[folders.studio]\nprivacy = "shareable"\n')
    idx = tmp_path / "idx"
    assert ingest.main([str(notes), "--index", str(idx), "--quiet"]) == 0
    capsys.readouterr()
    code = cli.main(["--mcp-check", "--index", str(idx), "--backend", "builtin"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"--vault {notes}" in out.splitlines()[0] and "sample-vault" not in out


def test_the_index_keeps_the_config_it_was_built_with(notes, home, tmp_path, capsys):
    # issue 23: `ingest --config alt.toml` ignoring studio/**, then a question refreshed
    # the index with the vault's own verso.toml and answered from the ignored note
    write(notes, "verso.toml", "")
    alt = tmp_path / "alt.toml"
    alt.write_text('ignore = ["studio/**"]\n')
    assert ingest.main([str(notes), "--config", str(alt), "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["indexed"] == 1 and first["config"]["given"]          # garden/seeds.md
    assert first["config"]["path"] == str(alt.resolve())
    assert harness.main([QUESTION, "--backend", "builtin", "--json"]) == 0
    a = json.loads(capsys.readouterr().out)
    assert not any(s["path"].startswith("studio/") for s in a["sources"])
    assert a["index_config"]["path"] == str(alt.resolve()) and a["index_config"]["sha256"]
    assert ingest.main([str(notes), "--json"]) == 0                     # no --config again
    again = json.loads(capsys.readouterr().out)
    assert again["note"] == "nothing changed since the last ingest" and again["indexed"] == 1
    alt.write_text('ignore = ["garden/**"]\n')                         # a changed config
    assert ingest.main([str(notes), "--json"]) == 0
    changed = json.loads(capsys.readouterr().out)
    assert changed["files_read"] > 0 and changed["config"]["sha256"] != first["config"]["sha256"]
    alt.unlink()
    assert ingest.main([str(notes)]) == 2
    assert "built with --config" in capsys.readouterr().err


def test_ingest_lists_every_note_with_files(notes, tmp_path, capsys):
    write(notes, "studio/studio rent 2026-09 (1).md", "# Studio rent\nFrom September the "
          "studio rent is £655 a month, paid on the 1st.")
    assert ingest.main([str(notes), "--index", str(tmp_path / "i"), "--files", "--json"]) == 0
    rows = {r["path"]: r for r in json.loads(capsys.readouterr().out)["files"]}
    assert set(rows) == {"garden/seeds.md", "studio/studio rent 2026-03.md",
                         "studio/studio rent 2026-09.md", "studio/studio rent 2026-09 (1).md"}
    new = rows["studio/studio rent 2026-09.md"]
    assert (new["date"], new["date_source"], new["is_latest"]) == ("2026-09-01", "filename",
                                                                   True)
    assert rows["studio/studio rent 2026-03.md"]["family"] == new["family"]
    assert rows["studio/studio rent 2026-09 (1).md"]["duplicate_of"] == new["path"]
    assert ingest.main([str(notes), "--index", str(tmp_path / "i"), "--files"]) == 0
    table = capsys.readouterr().out.split("\n\n", 1)[1].splitlines()
    assert table[0].split() == ["path", "date", "dated", "by", "family", "latest", "copy",
                                "of", "private"]
    copy = next(r for r in table if r.startswith("studio/studio rent 2026-09 (1).md"))
    assert len(table) == 5 and copy.split("  ")[-1].strip() == "yes"     # private
    assert "studio/studio rent 2026-09.md" in copy.split("filename", 1)[1]


def test_asked_from_any_folder_after_an_ingest_the_ingested_vault_answers(notes, home,
                                                                           tmp_path, capsys):
    idx = tmp_path / "work-index"
    assert cli.main(["ingest", str(notes), "--index", str(idx), "--quiet"]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)                    # the home fixture's monkeypatch restores the cwd
    capsys.readouterr()
    assert cli.main([QUESTION, "--backend", "builtin", "--json"]) == 0
    out = capsys.readouterr()
    a = json.loads(out.out)
    assert "655" in a["answer"] and a["sample_vault"] is False and out.err == ""
    assert list(elsewhere.iterdir()) == []             # nothing built where it was asked
    assert store.remembered() == idx.resolve()


def test_an_older_verso_index_in_the_folder_is_used_and_said_once(notes, home, capsys):
    ingest.build_index(notes, home / ".verso")           # as Verso before 0.2 left it
    assert harness.main([QUESTION, "--backend", "builtin"]) == 0
    out = capsys.readouterr()
    assert "655" in out.out and out.err.count("\n") == 1 and ".verso" in out.err
    assert harness.main([QUESTION, "--backend", "builtin"]) == 0    # now the default
    assert capsys.readouterr().err == ""
    assert store.remembered() == (home / ".verso").resolve()


def test_the_verso_command_lists_and_reaches_every_face(notes, home, tmp_path, capsys):
    assert cli.main(["--help"]) == 0
    listed = capsys.readouterr().out
    for face in ("ingest", "chat", "mcp", "projects", "evaluate"):
        assert f"\n  {face} " in listed
    assert cli.main([]) == 2                                 # no question, no command
    capsys.readouterr()
    assert cli.main(["ingest", str(notes), "--index", str(tmp_path / "i"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["index"] == str((tmp_path / "i").resolve())
    assert cli.main(["projects", "--backend", "builtin"]) == 0
    assert "no projects in the registry" in capsys.readouterr().out
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"id": "r1", "question": QUESTION, "category": "current",
                              "time_mode": "present", "answer": "£655", "key_facts": ["655"],
                              "forbidden_facts": [], "answerable": True,
                              "gold_files": ["studio/studio rent 2026-09.md"]}) + "\n")
    assert cli.main(["evaluate", "--check", str(qs), "--vault", str(notes)]) == 0
    assert capsys.readouterr().out.startswith("ok: 1 questions")


def test_the_notebook_api_at_the_top_of_the_package(notes, home, tmp_path):
    import verso
    summary = verso.ingest(notes)                          # a callable module
    assert summary["index"] == str(store.home() / "index")
    assert verso.ingest.build_index is ingest.build_index    # and still the module
    a = verso.ask(QUESTION, backend="builtin")
    assert isinstance(a, verso.Answer) and "655" in a.answer
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"id": "r1", "question": QUESTION, "category": "current",
                              "time_mode": "present", "answer": "£655", "key_facts": ["655"],
                              "forbidden_facts": ["610"], "answerable": True,
                              "gold_files": ["studio/studio rent 2026-09.md"]}) + "\n")
    result = verso.evaluate(qs, vault=notes)
    assert result["variants"]["full"]["overall"]["answer_correct"]["k"] == 1
    assert [r["id"] for r in result["records"]] == ["r1"]


def test_the_sample_vault_named_outright_is_indexed_apart(home):
    d, vault, notes = harness.resolve(None, harness.SAMPLE_VAULT)
    assert d == store.home() / "sample" and vault == harness.SAMPLE_VAULT and notes == []
    assert harness.resolve(None, None)[0] == store.home() / "sample"     # no index at all
