"""ingest and the modules it runs (vault_walk, dating, families, chunking, store, store_load):
dating, duplicates, families, dated sections, chunks, config, the index on disk."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from verso import embedder
from verso import chunking
from verso import dating
from verso import families
from verso import ingest
from verso import backends
from verso import models
from verso import store
from verso import store_load
from verso import vault_walk
from vaults import index_file, write

OLD = 1_600_000_000  # an mtime in 2020, so mtime dates are recognisable


SEG1 = ["e1.idf.npy", "g1.files.cols", "g1.near.json", "manifest.json", "s1.chunks.json",
        "s1.rows.npy", "s1.text", "s1.vectors.npy"]   # one segment, files, near pairs, IDF


def build(vault, tmp_path, **kw):
    kw.setdefault("index_dir", tmp_path / "idx")
    summary = ingest.build_index(vault, **kw)
    return summary, store_load.load_index(kw["index_dir"])


def files_of(index):
    return {f["path"]: f for f in index.files}


@pytest.fixture
def vault(tmp_path):
    v = tmp_path / "vault"
    v.mkdir()
    return v


# ---------------------------------------------------------------------- dating

@pytest.mark.parametrize("text, expected", [
    ("2026-04-03 rates", "2026-04-03"),
    ("rates_2026-06", "2026-06-01"),
    ("rates 2026_06", "2026-06-01"),
    ("rates (Sept 2026)", "2026-09-01"),
    ("rates sept 2026", "2026-09-01"),
    ("rates-oct2026", "2026-10-01"),
    ("Rates October 2026", "2026-10-01"),
    ("Plan October 10, 2026", "2026-10-10"),
    ("10 Oct 2026 notes", "2026-10-10"),
    ("2nd July 2026", "2026-07-02"),
    ("2028-02-29", "2028-02-29"),
    ("plan v2 Oct 2026", "2026-10-01"),           # "2 Oct 2026" needs a free-standing day
    ("2026-13-45 plan", None),          # impossible: not a date at all
    ("31 Feb 2026", None),              # not "Feb 2026" either
    ("2026-02-29", None),
    ("octopus 2026 mayhem", None),
    ("rates 2026-2027", None),
    ("report", None),
])
def test_date_forms(text, expected):
    assert dating.find_date(text) == expected


def test_each_date_source(vault, tmp_path):
    write(vault, "a/rates 2026-04-03.md", "---\ndate: 2026-01-01\n---\nrates text")
    write(vault, "a/fm.md", "---\ncreated: 2026-01-01\ndate: 2026-02-02\n"
                            "updated: 2026-03-03\n---\nbody")
    write(vault, "a/fm created.md", "---\ncreated: 2026-01-05\n---\nbody two")
    write(vault, "a/h1.md", "# Title\nUpdated: 2 July 2026\nbody three")
    write(vault, "a/h2.md", "Some intro\nLast edited 2026-07-03\nbody four")
    write(vault, "a/h3.md", "Date: 3 May 2026\nbody five")
    write(vault, "a/h4.md", "# Handover — October 10, 2026\nbody six")
    write(vault, "a/plan 2026-13-45.md", "---\nupdated: 2026-05-06\n---\nbody seven")
    write(vault, "a/bad fm.md", "---\ndate: 31 Feb 2026\n---\nbody eight", mtime=OLD)
    write(vault, "a/undated.md", "no date in here at all", mtime=OLD)
    summary, idx = build(vault, tmp_path)
    got = {p: (f["date"], f["date_source"]) for p, f in files_of(idx).items()}
    assert got == {
        "a/rates 2026-04-03.md": ("2026-04-03", "filename"),
        "a/fm.md": ("2026-03-03", "frontmatter"),
        "a/fm created.md": ("2026-01-05", "frontmatter"),
        "a/h1.md": ("2026-07-02", "header"),
        "a/h2.md": ("2026-07-03", "header"),
        "a/h3.md": ("2026-05-03", "header"),
        "a/h4.md": ("2026-10-10", "header"),
        "a/plan 2026-13-45.md": ("2026-05-06", "frontmatter"),
        "a/bad fm.md": (dating.datetime.fromtimestamp(OLD).date().isoformat(), "mtime"),
        "a/undated.md": (dating.datetime.fromtimestamp(OLD).date().isoformat(), "mtime"),
    }
    assert summary["dated"] == {"filename": 1, "frontmatter": 3, "header": 4, "mtime": 2}


def test_frontmatter_stripped_and_kept_as_metadata(vault, tmp_path):
    write(vault, "n.md", "---\ntitle: My Note\ntags:\n  - alpha\n  - beta\n---\n"
                         "Body with #gamma and [[Other|alias]] and [[missing note]].")
    write(vault, "sub/other.md", "other body")
    write(vault, "broken.md", "---\nthis: [is: not yaml\nno closing fence\n")
    _, idx = build(vault, tmp_path)
    f = files_of(idx)["n.md"]
    assert f["title"] == "My Note" and f["tags"] == ["alpha", "beta", "gamma"]
    assert f["links"] == ["sub/other.md", "missing note"]
    chunk = next(c for c in idx.chunks if c["path"] == "n.md")
    assert chunk["text"].startswith("Body with") and "title:" not in chunk["text"]
    assert "broken.md" in files_of(idx)


# ------------------------------------------------------------------ duplicates

def test_exact_duplicates_keep_the_unmarked_copy(vault, tmp_path):
    text = "# Rates\nDay rate is 1550 per day for the Acme work."
    write(vault, "w/rates.md", text)
    write(vault, "w/rates (1).md", text.replace(" ", "  "))     # whitespace differs only
    write(vault, "w/rates_backup.md", text + "\n\n")
    write(vault, "x/longer name here.md", "same text twice")
    write(vault, "x/short.md", "same text twice")
    summary, idx = build(vault, tmp_path)
    f = files_of(idx)
    assert f["w/rates (1).md"]["duplicate_of"] == "w/rates.md"
    assert f["w/rates_backup.md"]["duplicate_of"] == "w/rates.md"
    assert f["w/rates.md"]["duplicate_of"] is None and f["w/rates.md"]["is_latest"]
    assert f["x/longer name here.md"]["duplicate_of"] == "x/short.md"
    assert {c["path"] for c in idx.chunks} == {"w/rates.md", "x/short.md"}
    assert summary["duplicates"] == 3 and summary["indexed"] == 2


WORDS = " ".join(f"word{i}" for i in range(80))


def test_near_copy_same_date_is_duplicate(vault, tmp_path):
    write(vault, "a/plan.md", f"---\ndate: 2026-05-01\n---\n{WORDS} rate 1500")
    write(vault, "b/plan copy.md", f"---\ndate: 2026-05-01\n---\n{WORDS} rate 1550")
    _, idx = build(vault, tmp_path)
    assert files_of(idx)["b/plan copy.md"]["duplicate_of"] == "a/plan.md"


def test_near_copy_different_date_is_a_version(vault, tmp_path):
    write(vault, "a/plan 2026-05-01.md", f"{WORDS} rate 1500")
    write(vault, "a/plan 2026-06-01.md", f"{WORDS} rate 1550")
    write(vault, "b/x.md", f"{WORDS} rate 1600", mtime=OLD)       # mtime dates never
    write(vault, "b/y.md", f"{WORDS} rate 1650", mtime=OLD)       # make near-duplicates
    _, idx = build(vault, tmp_path)
    f = files_of(idx)
    assert all(x["duplicate_of"] is None for x in f.values())
    assert not f["a/plan 2026-05-01.md"]["is_latest"] and f["a/plan 2026-06-01.md"]["is_latest"]
    assert f["a/plan 2026-05-01.md"]["family"] == "a/plan"


# -------------------------------------------------------------------- families

@pytest.mark.parametrize("stem", [
    "Rates", "rates v1", "Rates v2 final", "rates_draft", "rates (1)", "rates copy",
    "rates_bak", "rates old", "2026-04-03 Rates", "rates-oct2026", "Rates (Sept 2026)",
    "rates_2026-06", "rates v1.2", "Rates, backup", "rates  October 10, 2026",
    "Rates 2025", "rates_2026 v2",
])
def test_family_name(stem):
    assert families._family_name(stem) == "rates"


def test_families_and_latest(vault, tmp_path):
    write(vault, "w/plan v1.md", "---\ndate: 2026-04-01\n---\nfirst plan")
    write(vault, "w/plan v2.md", "---\ndate: 2026-05-01\n---\nsecond plan")
    write(vault, "w/Plan final.md", "---\ndate: 2026-06-01\n---\nthird plan")
    write(vault, "w/notes.md", "undated notes, changed recently")          # mtime now
    write(vault, "w/notes 2026-01-01.md", "dated notes")
    write(vault, "w/tie 2026-02-02.md", "tie one")
    write(vault, "w/tie (2026-02-02).md", "tie two")
    write(vault, "u/x.md", "older undated", mtime=OLD)
    write(vault, "u/x_old.md", "newer undated", mtime=OLD + 86400 * 3)
    write(vault, "daily/2026-04-03.md", "day one")
    write(vault, "daily/2026-04-04.md", "day two")
    summary, idx = build(vault, tmp_path)
    f = files_of(idx)
    latest = {p for p, x in f.items() if x["is_latest"]}
    plans = ("w/plan v1.md", "w/plan v2.md", "w/Plan final.md")
    assert {f[p]["family"] for p in plans} == {"w/plan"}
    assert f["w/notes.md"]["family"] == f["w/notes 2026-01-01.md"]["family"] == "w/notes"
    assert f["daily/2026-04-03.md"]["family"] == "daily/2026-04-03.md"      # empty name
    assert latest == {"w/Plan final.md", "w/notes 2026-01-01.md", "w/tie (2026-02-02).md",
                      "u/x.md", "daily/2026-04-03.md", "daily/2026-04-04.md"}
    # a date tie: one latest, by path; "old" marks the older version, whatever the mtime
    assert summary["families"] == 6
    assert all(c["is_latest"] == f[c["path"]]["is_latest"] for c in idx.chunks)


def test_a_document_kept_a_year_at_a_time_is_one_family(vault, tmp_path):
    """"Honey prices 2025" and "Honey prices 2026": one document rewritten each year,
    so the newer labels the older; a year inside an amount or a decimal is no year."""
    write(vault, "bees/Honey prices 2025.md", "---\ndate: 2025-09-10\n---\nJar £6.50")
    write(vault, "bees/Honey prices 2026.md", "---\ndate: 2026-07-20\n---\nJar £7")
    write(vault, "bees/hive 2.md", "hive two")
    _, idx = build(vault, tmp_path)
    f = files_of(idx)
    assert f["bees/Honey prices 2025.md"]["family"] == f["bees/Honey prices 2026.md"][
        "family"] == "bees/honey prices"
    assert f["bees/Honey prices 2026.md"]["is_latest"]
    assert not f["bees/Honey prices 2025.md"]["is_latest"]
    assert f["bees/hive 2.md"]["family"] == "bees/hive 2"            # a 2 is no year
    assert families._family_name("budget £2026") == "budget £2026"
    assert families._family_name("release 2026.1") == "release 2026 1"
    assert families._family_name("Issue #2026") == "issue #2026"
    assert families._family_name("budget 2025/26") == "budget"


def test_a_day_named_with_its_weekday_is_its_own_note_not_a_version(vault, tmp_path):
    """A journal named "Sun 1 Feb 2026" is that day's note: the weekday goes with the
    date, so two Sundays are not one document; a weekday that is the name's own word
    ("Monday meeting") or stands apart from the date ("Sunday league 2025") stays."""
    for name in ("Sun 1 Feb 2026", "Sun 16 Feb 2025", "2026-03-01 Sun", "2026-03-08 Sun.",
                 "Wed, 4 March 2026", "Tuesday 3 March 2026", "Weds 11 March 2026"):
        write(vault, f"journal/{name}.md", f"the day of {name}")
    write(vault, "club/Sunday league 2025.md", "---\ndate: 2025-05-01\n---\nfixtures")
    write(vault, "club/Sunday league 2026.md", "---\ndate: 2026-05-01\n---\nfixtures")
    _, idx = build(vault, tmp_path)
    f = files_of(idx)
    days = [p for p in f if p.startswith("journal/")]
    assert len(days) == 7 and all(f[p]["family"] == p and f[p]["is_latest"] for p in days)
    assert f["club/Sunday league 2025.md"]["family"] == "club/sunday league"
    assert not f["club/Sunday league 2025.md"]["is_latest"]
    assert families._family_name("Monday meeting") == "monday meeting"
    assert families._family_name("Thursday 2026-03-05 standup") == "standup"
    assert families._family_name("Saturday") == "saturday"


def test_a_year_in_the_name_orders_a_family_that_only_file_times_date(vault, tmp_path):
    """Synced copies carry one file time, often the wrong way round: the name's year
    decides before it."""
    write(vault, "bees/Honey prices 2025.md", "Jar £6.50", mtime=OLD + 86400 * 9)
    write(vault, "bees/Honey prices 2026.md", "Jar £7", mtime=OLD)
    _, idx = build(vault, tmp_path)
    f = files_of(idx)
    assert f["bees/Honey prices 2026.md"]["is_latest"]
    assert not f["bees/Honey prices 2025.md"]["is_latest"]


def test_unversioned_folder_keeps_separate_entries(vault, tmp_path):
    write(vault, "verso.toml", '[folders.journal]\nversioned = false\n')
    write(vault, "journal/run 2026-05-01.md", "ran 10k")
    write(vault, "journal/run 2026-05-08.md", "ran 12k")
    write(vault, "work/run 2026-05-01.md", "a")
    write(vault, "work/run 2026-05-08.md", "b")
    _, idx = build(vault, tmp_path)
    f = files_of(idx)
    assert f["journal/run 2026-05-01.md"]["family"] == "journal/run 2026-05-01.md"
    entry = f["journal/run 2026-05-01.md"]
    assert entry["is_latest"] and not entry["versioned"]
    assert not f["work/run 2026-05-01.md"]["is_latest"] and f["work/run 2026-05-08.md"]["is_latest"]


# -------------------------------------------------------------- dated sections

def test_dated_sections_and_entry_latest(vault, tmp_path):
    write(vault, "log/long runs.md", "---\ndate: 2026-04-01\n---\n# Long runs\n"
          "Intro about the log.\n## 2026-05-02\nRan 20k.\n### Notes\nKnee fine.\n"
          "## 3 May 2026\nRan 22k.\n## 2026-06-14 — long run\nRan 25k.\n"
          "## Gear\nShoes: Pegasus.\n")
    _, idx = build(vault, tmp_path)
    rows = [(c["heading"], c["section_date"], c["date"], c["date_source"], c["entry_latest"])
            for c in idx.chunks]
    assert rows == [
        ("Long runs", None, "2026-04-01", "frontmatter", None),
        ("Long runs > 2026-05-02", "2026-05-02", "2026-05-02", "section", False),
        ("Long runs > 3 May 2026", "2026-05-03", "2026-05-03", "section", False),
        ("Long runs > 2026-06-14 — long run", "2026-06-14", "2026-06-14", "section", True),
        ("Long runs > Gear", None, "2026-04-01", "frontmatter", None),
    ]
    assert idx.chunks[1]["text"] == "Ran 20k.\n\nNotes\nKnee fine."   # ### merged, same entry


def test_a_log_entry_written_without_its_year_takes_it_from_its_neighbours(vault, tmp_path):
    # People date a quick log entry "Sat 21/03" or "14 July": the day and month, the
    # year left to the entries around it. Such an entry is an entry of its own day, not
    # text merged into the entry before it, and the newest entry may be one of them.
    write(vault, "health/running log.md", "runs, mostly 5k\n## 2026-02-07\nparkrun 29:41\n"
          "## Sat 21/03\nAshton Court 28:55\n## 2026-05-09\n5k 28:10\n"
          "## 14 July\n5k towpath 27:48, hot\n## Tue 01/12\nparkrun 27:02\n")
    _, idx = build(vault, tmp_path)
    rows = [(c["heading"], c["section_date"], c["entry_latest"]) for c in idx.chunks]
    assert rows == [("", None, None), ("2026-02-07", "2026-02-07", False),
                    ("Sat 21/03", "2026-03-21", False), ("2026-05-09", "2026-05-09", False),
                    ("14 July", "2026-07-14", False), ("Tue 01/12", "2026-12-01", True)]


@pytest.mark.parametrize("heading, near, order, day", [
    ("Sat 21/03", "2026-02-07", "ymd", "2026-03-21"),     # 21 can only be the day
    ("Sat 03/01", "2025-12-14", "ymd", "2026-01-03"),     # the year turns after December
    ("Thu 05/06", "2025-05-01", "ymd", "2025-06-05"),     # the weekday decides 5 June
    ("**Sun 28/09**", "2025-09-01", "ymd", "2025-09-28"),
    ("March 3rd - call", "2025-12-30", "ymd", "2026-03-03"),
    ("2 May flight", "2026-01-01", "ymd", "2026-05-02"),
    ("05/06", "2026-01-01", "ymd", None),                 # nothing tells 5 June from 6 May
    ("05/06", "2026-01-01", "dmy", "2026-06-05"),         # the vault's date order does
    ("3/4 of the budget", "2026-01-01", "dmy", None),     # a fraction opening a sentence
    ("Sat 21/03", "2026-02-07", "mdy", None),             # no month 21
    ("18th Edition", "2026-01-01", "ymd", None),
    ("May 12:30 call", "2026-01-01", "ymd", None),
    ("Sat 21/03", None, "ymd", None),                     # no dated neighbour: no year
])
def test_a_day_without_a_year_is_read_beside_its_nearest_dated_day(heading, near, order, day):
    assert dating.day_without_year(heading, near, order) == day


# ---------------------------------------------------------------------- chunks

def test_table_rows_keep_their_column_names(vault, tmp_path):
    write(vault, "t.md", "# Rates\n| Client | Day rate | Notes |\n|:---|---:|---|\n"
                         "| Acme | £1,550 | |\n| Beta | 1200 | new. |\nAfter the table.")
    _, idx = build(vault, tmp_path)
    assert idx.chunks[0]["text"] == ("Client: Acme; Day rate: £1,550.\n"
                                     "Client: Beta; Day rate: 1200; Notes: new.\n"
                                     "After the table.")


def test_long_sections_are_overlapping_windows():
    words = [f"w{i}" for i in range(500)]
    body = "# Long\n" + "\n".join(" ".join(words[i:i + 10]) for i in range(0, 500, 10))
    pieces = chunking._pieces(body)
    assert len(pieces) > 2 and all(h == "Long" for h, _, _ in pieces)
    seen = [w for _, _, t in pieces for w in t.split()]
    assert set(seen) == set(words)
    assert all(len(t.split()) <= chunking.CHUNK_WORDS for _, _, t in pieces)
    assert len(seen) - len(words) <= chunking.OVERLAP * (len(pieces) - 1)
    first, second = pieces[0][2].split(), pieces[1][2].split()
    assert first[-1] in second                                   # windows overlap
    one_line = chunking._pieces(" ".join(words))                   # a single very long line
    assert {w for _, _, t in one_line for w in t.split()} == set(words)


def test_prose_paragraphs_overlap_too():
    para = lambda k: " ".join(f"p{k}w{i}" for i in range(120))
    pieces = chunking._pieces("\n\n".join(para(k) for k in range(4)))
    assert len(pieces) == 4
    for a, b in zip(pieces, pieces[1:]):
        tail = a[2].split()[-chunking.OVERLAP:]
        assert b[2].split()[:chunking.OVERLAP] == tail


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet="0123456789-_ ,.()JFMASONDjanfebmrpyulgsctovdeSept", max_size=40))
def test_date_parser_never_crashes(text):
    found = dating.find_date(text)
    assert found is None or dating.date.fromisoformat(found)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "bb", "c1", "|", "##", "d"]), max_size=300),
                max_size=12))
def test_windows_lose_nothing_and_respect_the_limit(lines):
    text = "\n".join(" ".join(line) for line in lines)
    out = chunking._windows(text)
    assert all(len(w.split()) <= chunking.CHUNK_WORDS for w in out)
    assert sorted(set(text.split())) == sorted({t for w in out for t in w.split()})
    repeated = sum(len(w.split()) for w in out) - len(text.split())
    assert repeated <= chunking.OVERLAP * max(0, len(out) - 1)


def test_headings_in_code_fences_are_text():
    pieces = chunking._pieces("# A\nintro words here\n```\n## 2026-01-01 not a heading\n```\n")
    assert pieces == [("A", None, "intro words here\n```\n## 2026-01-01 not a heading\n```")]


# ---------------------------------------------------------------------- config

def test_private_by_default_and_shareable_config(vault, tmp_path):
    write(vault, "verso.toml", '[folders.work]\nprivacy = "shareable"\n'
                               '[folders."work/secret"]\nprivacy = "private"\n')
    write(vault, "work/a.md", "client notes")
    write(vault, "work/secret/b.md", "secret notes")
    write(vault, "home/c.md", "home notes")
    write(vault, "top.md", "top notes")
    _, idx = build(vault, tmp_path)
    private = {p: f["private"] for p, f in files_of(idx).items()}
    assert private == {"work/a.md": False, "work/secret/b.md": True, "home/c.md": True,
                       "top.md": True}
    assert all(c["private"] == private[c["path"]] for c in idx.chunks)


@pytest.mark.parametrize("toml, key", [
    ('ignore = []\nfolder = 1\n', "'folder'"),
    ('[folders.work]\nprivate = true\n', "'private'"),
    ('[folders.work]\nprivacy = "public"\n', "privacy"),
    ('ignore = "x"\n', "ignore"),
    ('ignore = [\n', "not valid TOML"),
])
def test_bad_config_is_one_line_error(vault, tmp_path, capsys, toml, key):
    write(vault, "verso.toml", toml)
    write(vault, "a.md", "x")
    assert ingest.main([str(vault), "--index", str(tmp_path / "idx")]) == 2
    err = capsys.readouterr().err
    assert key in err and err.count("\n") == 1
    assert not (tmp_path / "idx" / "manifest.json").exists()


def test_config_flag_and_missing_vault(vault, tmp_path, capsys):
    cfg = write(tmp_path, "other.toml", 'ignore = ["*.md"]\n')
    write(vault, "a.md", "x")
    with pytest.raises(ValueError, match="no notes in .*nor what verso.toml's ignore names"):
        build(vault, tmp_path, config=cfg)          # an index of nothing: issue 44
    with pytest.raises(ValueError, match="not found"):
        build(vault, tmp_path, config=tmp_path / "nope.toml")
    assert ingest.main([str(tmp_path / "missing"), "--index", str(tmp_path / "i")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_ignore_globs_hidden_and_non_text(vault, tmp_path):
    write(vault, "verso.toml", 'ignore = ["skip/**", "*.excalidraw.md", "**/draft-*.md"]\n')
    for rel in ("keep.md", "notes.txt", "deep/a/b/c/keep2.md", "draft-root.md",
                "skip/x.md", "skip/deeper/y.md", "d/pic.excalidraw.md", "d/draft-1.md",
                ".obsidian/w.md", ".trash/t.md", "x/.git/g.md", ".hidden.md",
                "attachments/a.md", "img.png", "data.csv"):
        write(vault, rel, f"content of {rel}")
    summary, idx = build(vault, tmp_path)
    assert set(files_of(idx)) == {"keep.md", "notes.txt", "deep/a/b/c/keep2.md"}
    assert summary["files_seen"] == 3


@pytest.mark.skipif(os.name == "nt", reason="symlinks")
def test_symlink_loops_are_followed_once(vault, tmp_path):
    write(vault, "a/note.md", "inside a")
    (vault / "a" / "loop").symlink_to(vault / "a", target_is_directory=True)
    (vault / "a" / "dangling.md").symlink_to(vault / "nowhere.md")
    summary, idx = build(vault, tmp_path)
    assert set(files_of(idx)) == {"a/note.md"}
    assert summary["skipped"] == [{"path": "a/dangling.md",
                                   "reason": "unreadable (No such file or directory)"}]


def test_bad_files_are_skipped_with_reasons(vault, tmp_path, monkeypatch):
    monkeypatch.setattr(vault_walk, "MAX_FILE_BYTES", 1000)
    write(vault, "empty.md", "  \n\n")
    write(vault, "binary.md", b"\x89PNG\r\n\x1a\n\x00\x00")
    write(vault, "big.md", "word " * 400)
    write(vault, "latin.md", "caf\xe9 r\xe9sum\xe9".encode("cp1252"))
    write(vault, "broken.md", b"abc \x81\x8d bytes \xff")
    write(vault, "bom.md", "\ufeffhello bom".encode("utf-8"))
    write(vault, "wide.md", "wide text".encode("utf-16"))
    summary, idx = build(vault, tmp_path)
    reasons = {s["path"]: s["reason"] for s in summary["skipped"]}
    assert reasons["empty.md"] == "empty file"
    assert reasons["binary.md"].startswith("binary")
    assert reasons["big.md"].startswith("too large")
    text = {c["path"]: c["text"] for c in idx.chunks}
    assert text["latin.md"] == "café résumé" and text["bom.md"] == "hello bom"
    assert "\ufffd" in text["broken.md"] and text["wide.md"] == "wide text"
    assert summary["files_seen"] == 7 and summary["indexed"] == 4


# --------------------------------------------------------------------- the index

def test_incremental_reembeds_only_changed_chunks(vault, tmp_path):
    for i in range(5):
        write(vault, f"n{i}.md", f"# Note {i}\n{WORDS[:300]} para {i}\n## More\n{WORDS} end{i}")
    calls = []
    first, idx = build(vault, tmp_path, progress=lambda *a: calls.append(a))
    assert ("reading", 0, 5) in calls and ("embedding", 0, 10) in calls
    old = {(c["path"], c["heading"]): np.array(idx.vectors[c["id"]]) for c in idx.chunks}
    assert first["embedded"] == first["chunks"] == 10 and first["reused"] == 0
    write(vault, "n2.md", f"# Note 2\n{WORDS[:300]} para CHANGED\n## More\n" + WORDS + " end2")
    (vault / "n4.md").unlink()
    (vault / "n3.md").rename(vault / "renamed.md")
    second, idx = build(vault, tmp_path)
    assert (second["embedded"], second["reused"], second["chunks"]) == (1, 7, 8)
    paths = {c["path"] for c in idx.chunks}
    assert paths == {"n0.md", "n1.md", "n2.md", "renamed.md"} and "n4.md" not in idx.by_path
    for c in idx.chunks:
        key = (c["path"].replace("renamed", "n3"), c["heading"])
        if c["path"] != "n2.md" or c["heading"] != "Note 2":
            assert np.array_equal(idx.vectors[c["id"]], old[key])
    assert [c["id"] for c in idx.chunks] == list(range(8))
    third, _ = build(vault, tmp_path, rebuild=True)
    assert third["embedded"] == 8 and third["reused"] == 0


def test_changed_embedder_reembeds_everything(vault, tmp_path):
    class Fake:
        id, dim = "fake-embedder-8", 8

        def embed_documents(self, texts, ledger=None, stage="ingest"):
            return np.eye(8, dtype=np.float32)[[len(t) % 8 for t in texts]]

    fake = backends.Backend("fake", Fake(), None, None)
    write(vault, "a.md", "alpha")
    write(vault, "b.md", "beta")
    s1 = ingest.build_index(vault, tmp_path / "idx", backend=fake)
    s2 = ingest.build_index(vault, tmp_path / "idx", backend=fake)
    assert (s1["embedded"], s2["embedded"], s2["reused"]) == (2, 0, 2)
    assert store_load.load_index(tmp_path / "idx", backend=fake).embedder.id == "fake-embedder-8"
    with pytest.raises(store.IndexProblem, match="built with embedder fake-embedder-8"):
        store_load.load_index(tmp_path / "idx", backend=backends.Backend(
            "other", type("E", (), {"id": "e2", "dim": 8})(), None, None))
    s3 = ingest.build_index(vault, tmp_path / "idx")             # back to builtin
    assert s3["embedded"] == 2 and "rebuilt" in s3["note"]
    assert store_load.load_index(tmp_path / "idx").vectors.shape == (
        2, embedder.BuiltinEmbedder().dim)


def test_ollama_index_loads_its_embedder_without_a_server(vault, tmp_path):
    class FakeOllama:
        id, dim = "ollama:nomic-embed-text", 8

        def embed_documents(self, texts, ledger=None, stage="ingest"):
            return np.full((len(texts), 8), 8 ** -0.5, dtype=np.float32)

    write(vault, "a.md", "alpha")
    fake = backends.Backend("ollama", FakeOllama(), None, None)
    ingest.build_index(vault, tmp_path / "idx", backend=fake)
    idx = store_load.load_index(tmp_path / "idx")
    assert isinstance(idx.embedder, models.OllamaEmbedder) and idx.embedder.id == FakeOllama.id
    assert idx.manifest["backend"] == "ollama" and idx.embedder.dim == 8


def test_load_index_contents(vault, tmp_path):
    write(vault, "a.md", "# A\nalpha beta")
    _, idx = build(vault, tmp_path)
    assert idx.vectors.dtype == np.float32 and isinstance(idx.segments[0].vectors, np.memmap)
    assert np.allclose(np.linalg.norm(idx.vectors, axis=1), 1.0, atol=1e-5)
    assert idx.by_path["a.md"]["title"] == "A" and idx.cache == {}
    q = idx.embedder.embed_query("alpha beta")
    assert q.shape == (idx.embedder.dim,) and float(idx.vectors[0] @ q) > 0.5
    for name in ("manifest.json", "s1.chunks.json"):
        assert json.loads((idx.dir / name).read_text())["format"] == store.FORMAT
    head = (idx.dir / "g1.files.cols").read_bytes().split(b"\n", 1)[0]
    assert json.loads(head)["n"] == 1 and "title" in json.loads(head)["columns"]
    assert sorted(p.name for p in idx.dir.iterdir()) == SEG1


def _damage_truncate(d):
    raw = index_file(d, "vectors.npy").read_bytes()
    index_file(d, "vectors.npy").write_bytes(raw[:len(raw) // 2])


def _damage_rows(d):
    np.save(index_file(d, "vectors.npy"),
            np.zeros((1, embedder.BuiltinEmbedder().dim), np.float32))


def _damage_format(d):
    m = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps({**m, "format": 99}))


def _damage_edit(d):
    c = json.loads(index_file(d, "chunks.json").read_text())
    c["heading"][0] = "hand edited"
    index_file(d, "chunks.json").write_text(json.dumps(c))


def _damage_garbage(d):
    index_file(d, "files.json").write_text("{not json")


def _damage_idf(d):
    np.save(index_file(d, "idf.npy"), np.full(embedder.EMBED_DIM, 2.0, np.float32))


@pytest.mark.parametrize("damage, words", [
    (_damage_truncate, "vectors.npy"), (_damage_rows, "shape (1, "),
    (_damage_format, "unknown format 99"), (_damage_edit, "does not match its manifest"),
    (_damage_garbage, "files.cols"), (_damage_idf, "built with embedder"),
])
def test_damaged_index_is_detected(vault, tmp_path, damage, words):
    write(vault, "a.md", "# A\nalpha")
    write(vault, "b.md", "# B\nbeta")
    build(vault, tmp_path)
    damage(tmp_path / "idx")
    with pytest.raises(store.IndexProblem) as e:
        store_load.load_index(tmp_path / "idx")
    msg = str(e.value)
    assert words in msg and "\n" not in msg
    assert f"verso ingest {vault} --index {tmp_path / 'idx'} --rebuild" in msg
    summary, idx = build(vault, tmp_path)                # the next run repairs it
    assert "unusable" in summary["note"] and len(idx.chunks) == 2


def test_missing_index(tmp_path, monkeypatch):
    monkeypatch.setenv("VERSO_HOME", str(tmp_path / "home"))
    assert store.default_index_dir() == tmp_path / "home" / "index"
    with pytest.raises(store.IndexProblem, match="no index in .*: run verso ingest VAULT$"):
        store_load.load_index()


def test_crash_while_writing_keeps_previous_index(vault, tmp_path, monkeypatch):
    write(vault, "a.md", "# A\nalpha")
    build(vault, tmp_path)
    write(vault, "b.md", "# B\nbeta")
    real_replace = os.replace
    for fail_at in range(1, 7):          # vectors, rows, text, chunks, files, manifest
        calls = []

        def flaky(src, dst, calls=calls, fail_at=fail_at):
            calls.append(dst)
            if len(calls) == fail_at:
                raise OSError("disk full (simulated)")
            return real_replace(src, dst)

        monkeypatch.setattr(store.os, "replace", flaky)
        with pytest.raises(OSError, match="simulated"):
            ingest.build_index(vault, tmp_path / "idx")
        monkeypatch.setattr(store.os, "replace", real_replace)
        idx = store_load.load_index(tmp_path / "idx")
        assert [c["path"] for c in idx.chunks] == ["a.md"]
        assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == SEG1
    summary, idx = build(vault, tmp_path)
    assert [c["path"] for c in idx.chunks] == ["a.md", "b.md"] and summary["reused"] == 1


def test_index_inside_vault_is_refused(vault, tmp_path, capsys):
    write(vault, "a.md", "x")
    with pytest.raises(ValueError, match="inside the vault"):
        ingest.build_index(vault, vault / ".verso")
    assert ingest.main([str(vault), "--index", str(vault)]) == 2
    assert "inside the vault" in capsys.readouterr().err
    assert sorted(p.name for p in vault.iterdir()) == ["a.md"]


def test_locks(vault, tmp_path):
    write(vault, "a.md", "x")
    d = tmp_path / "idx"
    d.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    (d / "lock").write_text(dead.stdout.strip())
    summary, _ = build(vault, tmp_path)                  # stale lock recovered
    assert summary["indexed"] == 1 and not (d / "lock").exists()
    (d / "lock").write_text(str(os.getpid()))            # a live holder
    with pytest.raises(store.IndexBusy, match=f"pid {os.getpid()}"):
        build(vault, tmp_path)
    assert (d / "lock").read_text() == str(os.getpid())


def test_main_json_and_human(vault, tmp_path, capsys):
    write(vault, "a 2026-05-01.md", "# A\nalpha")
    write(vault, "a 2026-05-01 (1).md", "# A\nalpha")
    write(vault, "e.md", "")
    assert ingest.main([str(vault), "--index", str(tmp_path / "idx"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert {k: s[k] for k in ("files_seen", "indexed", "duplicates", "families", "chunks",
                              "embedded", "reused", "dated")} == {
        "files_seen": 3, "indexed": 1, "duplicates": 1, "families": 1, "chunks": 1,
        "embedded": 1, "reused": 0, "dated": {"filename": 2}}
    assert s["skipped"] == [{"path": "e.md", "reason": "empty file"}]
    assert s["index"] == str(tmp_path / "idx") and s["seconds"] >= 0
    assert ingest.main([str(vault), "--index", str(tmp_path / "idx")]) == 0
    out = capsys.readouterr()
    assert "indexed 1 of 3 files" in out.out and "skipped e.md: empty file" in out.out
    assert out.err == ""                                 # no progress line off a terminal


def test_unchanged_vault_is_not_reingested_and_a_touched_note_is(vault, tmp_path):
    write(vault, "a.md", "# A\nThe boat is moored at pier 4.\n", mtime=1_780_000_000)
    write(vault, "b.md", "# B\nThe shed roof costs 520 pounds.\n", mtime=1_780_000_000)
    first, _ = build(vault, tmp_path)
    manifest = tmp_path / "idx" / "manifest.json"
    written = manifest.stat().st_mtime_ns
    again, idx = build(vault, tmp_path)
    assert again["note"] == "nothing changed since the last ingest"
    assert (again["embedded"], again["reused"], again["chunks"]) == (0, 2, 2)
    assert {k: again[k] for k in ("indexed", "duplicates", "families", "dated")} == \
        {k: first[k] for k in ("indexed", "duplicates", "families", "dated")}
    assert manifest.stat().st_mtime_ns == written          # nothing rewritten
    # same text, new mtime: the stamp differs, so the full (incremental) path runs
    write(vault, "b.md", "# B\nThe shed roof costs 520 pounds.\n", mtime=1_790_000_000)
    third, _ = build(vault, tmp_path)
    assert third["note"] != again["note"] and third["reused"] == 2
    assert manifest.stat().st_mtime_ns != written
    # a damaged index under an unchanged vault is rebuilt, not trusted
    index_file(tmp_path / "idx", "chunks.json").write_text('{"format": 2, "files": []}')
    fourth, idx = build(vault, tmp_path)
    assert "unusable" in fourth["note"] and len(idx.chunks) == 2


# ------------------------------------------------------- per-file reuse (incremental)

T0 = 1_780_000_000   # mtimes of the first state; every later write gets its own


class FixedEmbedder:
    """A builtin embedder with a frozen IDF behind another id, so --rebuild does not
    re-fit it and the hashes and vectors of two builds can be compared exactly."""

    def __init__(self):
        self.inner = embedder.BuiltinEmbedder.fit(["alpha beta gamma", "rate plan run"])
        self.id, self.dim = "fixed-" + self.inner.id, self.inner.dim

    def embed_documents(self, texts, ledger=None, stage="ingest"):
        return self.inner.embed_documents(texts)


def _first_state(vault):
    n = iter(range(100))

    def put(rel, text):
        write(vault, rel, text, mtime=T0 + next(n))
    put("verso.toml", '[folders.shared]\nprivacy = "shareable"\n')
    put("w/plan v1.md", "---\ndate: 2026-04-01\n---\n# Plan\nfirst plan, rate 1400")
    put("w/plan v2.md", "---\ndate: 2026-05-01\n---\n# Plan\nsecond plan, rate 1500")
    put("x/rates.md", "# Rates\nDay rate is 1550.")
    put("x/rates (1).md", "# Rates\nDay rate is 1550.")
    put("y/source.md", "# Source\nThe source text of y.")
    put("y/other.md", "# Other\nSomething else entirely.")
    put("a/plan.md", f"---\ndate: 2026-05-01\n---\n{WORDS} rate 1500")
    put("b/plan copy.md", f"---\ndate: 2026-05-01\n---\n{WORDS} rate 1550")
    put("b/same day.md", "---\ndate: 2026-05-01\n---\nshort note, same day")
    put("log/runs.md", "---\ndate: 2026-04-01\n---\n# Runs\nIntro.\n## 2026-05-02\n"
        "Ran 20k.\n## 2026-06-14\nRan 25k.\n## Gear\nShoes.")
    put("shared/links.md", "See [[target]], [[plan v2]] and [[rates]].")
    put("sub/target.md", "# Target\nThe target note.")
    put("gone.md", "to be deleted")
    put("u/undated.md", "no date here")


def _second_state(vault):
    n = iter(range(100))

    def put(rel, text):
        write(vault, rel, text, mtime=T0 + 1000 + next(n))
    put("w/plan v1.md", "---\ndate: 2026-07-01\n---\n# Plan\nfirst plan, now the newest")
    put("y/other.md", "# Source\nThe source text of y.")         # exact copy of source
    (vault / "x/rates.md").unlink()                               # (1) is no longer a copy
    (vault / "gone.md").unlink()
    (vault / "sub/target.md").rename(vault / "sub/target2.md")     # links.md resolves anew
    put("log/new log.md", "# New\n## 2026-08-01\nNew entry.")


@pytest.mark.parametrize("backend", ["builtin", "fixed"])
def test_incremental_equals_full_rebuild(vault, tmp_path, backend):
    be = None if backend == "builtin" else backends.Backend("fixed", FixedEmbedder(), None,
                                                             None)
    _first_state(vault)
    ingest.build_index(vault, tmp_path / "inc", backend=be)
    _second_state(vault)
    inc = ingest.build_index(vault, tmp_path / "inc", backend=be)
    full = ingest.build_index(vault, tmp_path / "full", backend=be, rebuild=True)
    assert (inc["files_read"], inc["files_reused"]) == (4, 9)  # v1, other, target2, new log
    assert inc["files_reread"] == 1      # rates (1).md, no longer a copy; plan.md and plan
    # copy.md, unchanged, are not read again: the last run's near-copy result stands
    assert (full["files_read"], full["files_reused"]) == (13, 0)
    ia, ib = (store_load.load_index(tmp_path / d, backend=be) for d in ("inc", "full"))
    assert ia.files == ib.files
    f = {x["path"]: x for x in ia.files}
    assert f["w/plan v1.md"]["is_latest"] and not f["w/plan v2.md"]["is_latest"]
    assert f["y/source.md"]["duplicate_of"] == "y/other.md"
    assert f["x/rates (1).md"]["duplicate_of"] is None
    assert f["b/plan copy.md"]["duplicate_of"] == "a/plan.md"
    assert f["shared/links.md"]["links"] == ["target", "w/plan v2.md", "rates"]
    ca, cb = list(ia.chunks), list(ib.chunks)
    if backend == "builtin":             # --rebuild re-fits the IDF: other hashes, vectors
        ca, cb = ([{k: v for k, v in c.items() if k != "hash"} for c in x] for x in (ca, cb))
    assert ca == cb and any(c["path"] == "x/rates (1).md" for c in ca)
    assert not any(c["path"] == "y/source.md" for c in ca)
    ma, mb = ia.manifest, ib.manifest
    skip = {"created", "gen", "segments", "dead", "files_file", "idf_file", "near_file"} | (
        {"embedder"} if backend == "builtin" else set())
    assert {k: v for k, v in ma.items() if k not in skip} == \
        {k: v for k, v in mb.items() if k not in skip}
    if backend == "fixed":
        va, vb = np.asarray(ia.vectors), np.asarray(ib.vectors)
        assert va.shape == vb.shape and np.allclose(va, vb, atol=1e-6, rtol=0)


def test_summary_counts_read_and_reused_notes_and_config_change_reuses_nothing(
        vault, tmp_path, capsys):
    for i in range(3):
        write(vault, f"n{i}.md", f"# Note {i}\nbody {i}", mtime=T0 + i)
    first, _ = build(vault, tmp_path)
    assert (first["files_read"], first["files_reused"]) == (3, 0)
    write(vault, "n1.md", "# Note 1\nbody one, edited", mtime=T0 + 100)
    second, idx = build(vault, tmp_path)
    assert (second["files_read"], second["files_reused"], second["files_reread"]) == (1, 2, 0)
    assert idx.by_path["n0.md"]["size"] == (vault / "n0.md").stat().st_size
    assert idx.by_path["n1.md"]["mtime_ns"] == (vault / "n1.md").stat().st_mtime_ns
    write(vault, "verso.toml", '[folders.x]\nprivacy = "shareable"\n')
    third, _ = build(vault, tmp_path)
    assert (third["files_read"], third["files_reused"]) == (3, 0)
    write(vault, "n2.md", "# Note 2\nbody two, edited", mtime=T0 + 200)
    assert ingest.main([str(vault), "--index", str(tmp_path / "idx")]) == 0
    assert "notes read 1, reused 2" in capsys.readouterr().out


def test_a_reused_note_changing_mid_run_means_a_fresh_catalogue(vault, tmp_path, monkeypatch):
    write(vault, "a/plan.md", f"---\ndate: 2026-05-01\n---\n{WORDS} rate 1500", mtime=T0)
    write(vault, "b/plan copy.md", f"---\ndate: 2026-05-01\n---\n{WORDS} rate 1550", mtime=T0)
    write(vault, "c.md", "---\ndate: 2026-05-01\n---\nchanged", mtime=T0)
    build(vault, tmp_path)         # c.md's edit opens its date's group: plan.md is compared
    write(vault, "c.md", "---\ndate: 2026-05-01\n---\nchanged again", mtime=T0 + 5)
    m = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    (tmp_path / "idx" / m["near_file"]).unlink()     # no remembered pair: plan.md is read
    real_read = vault_walk.read

    def meddling(path):              # the near-copy check reads a/plan.md: edit it first
        if path.name == "plan.md" and "rate 1500" in path.read_text():
            write(vault, "a/plan.md", f"---\ndate: 2026-05-01\n---\n{WORDS} other", mtime=T0 + 9)
        return real_read(path)

    monkeypatch.setattr(vault_walk, "read", meddling)
    s, idx = build(vault, tmp_path)
    assert s["files_reused"] == 0 and s["files_read"] == 3
    assert "other" in next(c["text"] for c in idx.chunks if c["path"] == "a/plan.md")


def test_refresh_loads_an_unchanged_index_once(vault, tmp_path, monkeypatch):
    write(vault, "a.md", "# A\nThe boat is moored at pier 4.\n")
    first = ingest.refresh(vault, tmp_path / "idx")
    assert [c["path"] for c in first.chunks] == ["a.md"]
    loads = []
    real = store_load.load_index
    monkeypatch.setattr(store_load, "load_index", lambda *a, **k: loads.append(a) or real(*a, **k))
    again = ingest.refresh(vault, tmp_path / "idx")
    assert len(loads) == 1 and again.manifest["stamp"] == first.manifest["stamp"]
    write(vault, "b.md", "# B\nThe shed roof costs 520 pounds.\n")
    loads.clear()
    changed = ingest.refresh(vault, tmp_path / "idx")
    assert {c["path"] for c in changed.chunks} == {"a.md", "b.md"}


@pytest.mark.slow
def test_the_two_cli_processes_end_with_their_code_and_all_their_output(tmp_path):
    """python ingest.py and python harness.py end through ingest.run_cli (os._exit, the
    heap left to the OS): every line printed arrives, exit codes are main()'s, and
    argparse's --help / usage errors exit as ever."""
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    vault, d = tmp_path / "v", tmp_path / "idx"
    write(vault, "rates.md", "# Rates\n\nMy day rate is 640 pounds from March.\n")
    write(vault, "b.md", "# Boat\n\nThe boat is at the pier.\n")

    def run(*args):
        return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                              cwd=root)
    ok = run("ingest.py", str(vault), "--index", str(d), "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["indexed"] == 2
    again = run("ingest.py", str(vault), "--index", str(d))
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == \
        "nothing changed since the last ingest"
    bad = run("ingest.py", str(tmp_path / "nope"), "--index", str(d))
    assert bad.returncode == 2 and bad.stderr.startswith("ingest: vault ") and not bad.stdout
    helped = run("ingest.py", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: ingest.py")
    asked = run("harness.py", "--vault", str(vault), "--index", str(d), "--backend",
                "builtin", "--json", "What is my day rate?")
    assert asked.returncode == 0
    assert json.loads(asked.stdout)["question"] == "What is my day rate?"
    usage = run("harness.py")
    assert usage.returncode == 2 and "usage: harness.py" in usage.stderr


def test_links_after_an_ingest_equal_a_full_resolution():
    """Reused records keep their links unless a path their links name appeared, went or
    changed duplicate status; the rest are resolved against a table of only the names
    they ask for. Either way the links are those of a full resolution."""
    import copy
    paths = ["a/Plan.md", "b/plan.md", "b/Rate.md", "Rate.txt", "c/x.md", "c/Y.md", "img.md"]
    recs = [{"path": p, "duplicate_of": "a/Plan.md" if p == "b/plan.md" else None,
             "wikilinks": ["plan", "rate", "Y", "pic.png"], "_reused": True} for p in paths]
    families.resolve_links(recs)
    fresh = recs[4]
    del fresh["_reused"]
    fresh["wikilinks"] = ["plan", " Rate ", "b/rate", "y.md", "nowhere", "pic.png", "", "c/x"]

    def both(recs, changed):
        full, fast = copy.deepcopy(recs), copy.deepcopy(recs)
        families.resolve_links(full)
        families.resolve_links(fast, changed)
        assert full == fast
        return fast
    edited = both(recs, set())                                  # an edit: no path changed
    assert edited[4]["links"] == ["a/Plan.md", "Rate.txt", "b/Rate.md", "c/Y.md", "nowhere",
                                  "c/x.md"]     # the shorter path first; a copy never
    added = copy.deepcopy(edited) + [{"path": "a/rate.md", "duplicate_of": None,
                                      "wikilinks": []}]    # read now: not _reused
    assert both(added, {"a/rate.md"})[0]["links"] == ["a/Plan.md", "a/rate.md", "c/Y.md"]
    gone = [r for r in copy.deepcopy(edited) if r["path"] != "c/Y.md"]   # deleted
    assert both(gone, {"c/Y.md"})[0]["links"] == ["a/Plan.md", "Rate.txt", "Y"]
    copied = copy.deepcopy(edited)                         # a/Plan.md now a duplicate
    copied[0]["duplicate_of"] = "b/plan.md"
    copied[1]["duplicate_of"] = None
    assert both(copied, {"a/Plan.md", "b/plan.md"})[2]["links"][0] == "b/plan.md"


def test_the_keeper_key_marks_exactly_what_the_copy_pattern_finds():
    names = ["plan (1).md", "Plan COPY 2.md", "x/old notes.md", "bold.md", "BACKUP.txt",
             "a/ba\u212a.md", "Co\u0420y.md", "scaffold.md", "c/(draft).md", "golden.md",
             "Copy.md", "a.b/old.md", "a/b.c", "\u0130old.md", "rate.md"]
    for n in names:
        stem = n.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        assert families._keeper_key({"path": n}) == (bool(families.COPY_RE.search(stem)),
                                                     len(n), n)
    assert [families._keeper_key({"path": n})[0] for n in names[:6]] == [True] * 3 + [
        False, True, True]                      # U+212A, the Kelvin sign, lowers to k


def test_the_mcp_server_behind_harness_runs_with_the_cycle_collector_on(monkeypatch):
    """run_cli turns the collector off for one-shot processes; `python harness.py --mcp`
    serves for hours, so it turns it back on."""
    import gc
    from verso import cli
    from verso import mcp_server
    seen = []
    monkeypatch.setattr(mcp_server, "main", lambda argv: seen.append(gc.isenabled()) or 0)
    gc.disable()
    try:
        assert cli.main(["--mcp"]) == 0
    finally:
        gc.enable()
    assert seen == [True]


def _rec(path, text, date="2026-05-01"):
    sets = families.shingles(" ".join(text.split()).lower().split())
    return {"path": path, "sha256": path, "date": date, "date_source": "frontmatter",
            "duplicate_of": None, "shingles": len(sets), "sketch": families.sketch(sets),
            "_norm": " ".join(text.split())}


def test_near_copies_among_many_notes_of_one_date_compare_only_sketch_pairs(monkeypatch):
    """An import of many notes with one date (and one frontmatter template) compares the
    pairs whose sketches share a hash that is not the template's, not every pair."""
    import random
    rng = random.Random(3)
    head = "---\ndate: 2026-05-01\ntags: [import]\n---\n"
    recs = [_rec(f"imported/n{i}.md", head + " ".join(f"w{rng.randrange(5000)}"
                                                      for _ in range(80)))
            for i in range(300)]
    recs.append(_rec("imported/n7 copy.md", recs[7]["_norm"] + " one more"))
    calls = []
    real = families._near_copy
    monkeypatch.setattr(families, "_near_copy", lambda *a: calls.append(1) or real(*a))
    families.mark_duplicates(recs, lambda r: r["_norm"])
    assert [r["path"] for r in recs if r["duplicate_of"]] == ["imported/n7 copy.md"]
    assert recs[-1]["duplicate_of"] == "imported/n7.md"
    assert len(calls) < 50                       # of 45,150 pairs


def test_sketchless_records_are_compared_as_before():
    text = " ".join(f"w{i * 7 % 101}" for i in range(200))
    a, b = _rec("x/a.md", text), _rec("x/b.md", text + " and a tail")
    a["sketch"] = None                           # a record of an index before sketches
    families.mark_duplicates([a, b], lambda r: r["_norm"])
    assert b["duplicate_of"] == "x/a.md"


def test_an_index_of_an_older_builtin_embedder_is_rebuilt_and_the_question_says_so(
        vault, tmp_path, capsys):
    """After an upgrade that changes the builtin embedder (its word table, its share or
    its dimension), the first question makes the whole index again and says why."""
    from verso import harness
    write(vault, "a.md", "# Boiler\nThe boiler is a Greenstar 30i.")
    d = tmp_path / "idx"
    ingest.build_index(vault, d)
    m = json.loads((d / "manifest.json").read_text())
    old = "builtin-hash-v1-384-deadbeef"
    (d / "manifest.json").write_text(json.dumps({**m, "embedder": old}))
    idx, _ = harness.load(index=str(d), vault=str(vault), backend="builtin")
    err = capsys.readouterr().err
    assert f"another Verso's builtin embedder's ({old}); rebuilt" in err
    assert idx.embedder.id == embedder.BuiltinEmbedder(idx.embedder.idf).id
    harness.load(index=str(d), vault=str(vault), backend="builtin")
    assert "rebuilt" not in capsys.readouterr().err        # once only
