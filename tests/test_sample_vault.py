"""The sample vault, indexed: the families, latest files, duplicates, dates and privacy
that ingest must find in it. The vault's facts are described for humans in the repo's
question sets; this file pins what the index must say about its files.

The vault is copied once per module so the undated notes can be given a fixed mtime
AFTER every real date in the vault: that makes their dates deterministic and proves a
weak (mtime) date never wins "latest" against a real one.
"""

import os
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from verso import ingest
from verso import store_load

VAULT = Path(__file__).resolve().parent.parent / "sample-vault"
MARKER = "VERSO-PRIVATE-MARKER-7f3a"
LATE = datetime(2026, 12, 15, 12, 0).timestamp()  # noon local: same day in any timezone

UNDATED = [
    "work/Kittiwake Cycles.md",
    "work/Aireside Housing.md",
    "work/Halden and Rowe.md",
    "training/marathon fuelling.md",
    "move/packing list.md",
    "health/heart rate.md",
    "health/sleep and recovery.md",
    "people/Ana Ferreira.md",
    "people/Dev Okafor.md",
]

# family -> (non-duplicate members, the one latest member)
FAMILIES = {
    "kittiwake retainer": ([
        "work/2026-04-03 kittiwake retainer.md",
        "work/kittiwake retainer_2026-06.md",
        "work/kittiwake retainer (Sept 2026).md",
        "work/kittiwake retainer-oct2026.md",
    ], "work/kittiwake retainer-oct2026.md"),
    "rates card": ([
        "work/rates card (March 2026).md",
        "work/rates card_2026-07.md",
        "work/rates card 2026-10-05.md",
    ], "work/rates card 2026-10-05.md"),
    "race goals": ([
        "training/race goals_2026-03.md",
        "training/race goals_2026-06.md",
        "training/race goals (September 2026).md",
    ], "training/race goals (September 2026).md"),
    "training plan": ([
        "training/training plan (April 2026).md",
        "training/training plan – February 2026.md",   # an en dash before the date
        "training/training plan (July 2026).md",
    ], "training/training plan (July 2026).md"),
    "move plan": ([
        "move/move plan v1.md",
        "move/move plan v2.md",
        "move/move plan final.md",
    ], "move/move plan final.md"),
    "flat shortlist": ([
        "move/flat shortlist 2026-07-20.md",
        "move/flat shortlist 2026-08-30.md",
    ], "move/flat shortlist 2026-08-30.md"),
    "packing list": ([
        "move/packing list.md",          # undated (mtime set later than v2 on purpose)
        "move/packing list v2.md",
    ], "move/packing list v2.md"),
    "budget": (["finance/budget.md"], "finance/budget.md"),
}

DUPLICATES = {
    "work/kittiwake retainer (Sept 2026) (1).md": "work/kittiwake retainer (Sept 2026).md",
    "finance/budget_backup.md": "finance/budget.md",
}

# path -> (expected date, or "YYYY-MM" when the name gives only a month; date_source)
DATES = {
    "work/2026-04-03 kittiwake retainer.md": ("2026-04-03", "filename"),
    "work/kittiwake retainer_2026-06.md": ("2026-06", "filename"),
    "work/kittiwake retainer (Sept 2026).md": ("2026-09", "filename"),
    "work/kittiwake retainer (Sept 2026) (1).md": ("2026-09", "filename"),
    "work/kittiwake retainer-oct2026.md": ("2026-10", "filename"),
    "work/rates card (March 2026).md": ("2026-03", "filename"),
    "work/rates card 2026-10-05.md": ("2026-10-05", "filename"),
    "training/race goals (September 2026).md": ("2026-09", "filename"),
    "training/training plan (April 2026).md": ("2026-04", "filename"),
    "training/training plan – February 2026.md": ("2026-02", "filename"),
    "move/flat shortlist 2026-08-30.md": ("2026-08-30", "filename"),
    "work/Aireside tenant portal.md": ("2026-05-06", "frontmatter"),   # date:
    "move/move plan v1.md": ("2026-03-22", "frontmatter"),             # date:
    "move/move plan v2.md": ("2026-06-05", "frontmatter"),             # updated:
    "training/kit list.md": ("2026-04-02", "frontmatter"),             # updated:
    "move/packing list v2.md": ("2026-10-20", "frontmatter"),          # created:
    "training/training log.md": ("2026-03-02", "frontmatter"),         # created:
    "move/move plan final.md": ("2026-09-12", "header"),     # Updated: 12 September 2026
    "finance/budget.md": ("2026-05-14", "header"),           # Updated: 14 May 2026
    "move/visa D8 checklist.md": ("2026-08-29", "header"),   # Last edited 2026-08-29
    "work/handover plan.md": ("2026-09-30", "header"),       # Last edited 2026-09-30
    "move/email from Ana - flights.md": ("2026-10-08", "header"),  # Date: 8 October 2026
    "health/blood results.md": ("2026-05-19", "header"),     # Date: 19 May 2026
    "move/flat viewings.md": ("2026-07-18", "header"),       # # Title — July 18, 2026
    "training/race report lisbon.md": ("2026-10-11", "header"),  # # Title — October 11, 2026
}

LOG = "training/training log.md"
LOG_SECTIONS = ["2026-03-14", "2026-04-04", "2026-04-25", "2026-05-02", "2026-06-14",
                "2026-07-11", "2026-08-09", "2026-09-20", "2026-10-03"]
HR_SECTIONS = ["2026-03-20", "2026-05-30", "2026-08-15", "2026-10-05"]


def _notes_on_disk() -> set:
    skip = ("templates/", ".obsidian/", ".trash/", "attachments/")
    return {p.relative_to(VAULT).as_posix() for p in VAULT.rglob("*.md")
            if not p.relative_to(VAULT).as_posix().startswith(skip)}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("sample")
    vault = root / "vault"
    shutil.copytree(VAULT, vault)
    for rel in UNDATED:
        os.utime(vault / rel, (LATE, LATE))
    summary = ingest.build_index(vault, index_dir=root / "idx")
    return summary, store_load.load_index(root / "idx")


@pytest.fixture(scope="module")
def files(built):
    return {f["path"]: f for f in built[1].files}


def _family_of(files, path):
    return [p for p, f in files.items() if f["family"] == files[path]["family"]]


# ---------------------------------------------------------------- what gets indexed

def test_every_note_is_listed_and_nothing_else(built, files):
    summary, _ = built
    assert set(files) == _notes_on_disk()
    assert len(files) == 52
    assert summary["files_seen"] == 52
    assert summary["duplicates"] == 2
    assert summary["indexed"] == 50


def test_hidden_attachment_and_ignored_files_absent(files):
    assert (VAULT / ".obsidian" / "app.json").is_file()
    assert (VAULT / ".trash" / "flat ideas.md").is_file()
    assert (VAULT / "templates" / "meeting.md").is_file()
    assert (VAULT / "attachments" / "flat floorplan.png").is_file()
    for path in files:
        assert not path.startswith((".obsidian/", ".trash/", "templates/", "attachments/"))
        assert path.endswith(".md")


# ------------------------------------------------------------- families and latest

@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_members_and_latest(files, name):
    members, latest = FAMILIES[name]
    family = _family_of(files, members[0])
    live = {p for p in family if not files[p]["duplicate_of"]}
    assert live == set(members)
    assert [p for p in live if files[p]["is_latest"]] == [latest]


def test_four_version_family_has_a_new_date_each_time(files):
    members, _ = FAMILIES["kittiwake retainer"]
    days = [files[p]["date"] for p in members]
    assert days == sorted(days) and len(set(days)) == 4


def test_duplicates_join_the_family_of_their_original(files):
    for copy, original in DUPLICATES.items():
        assert files[copy]["family"] == files[original]["family"]


def test_other_notes_are_families_of_one(files):
    grouped = {p for members, _ in FAMILIES.values() for p in members} | set(DUPLICATES)
    families = [f["family"] for f in files.values()]
    for path, f in files.items():
        if path in grouped:
            continue
        assert families.count(f["family"]) == 1, path
        assert f["is_latest"], path


def test_journal_entries_are_never_versions(files):
    journal = [p for p in files if p.startswith("journal/")]
    assert len(journal) == 7
    for p in journal:
        f = files[p]
        assert f["versioned"] is False
        assert f["family"] == p
        assert f["is_latest"] and f["duplicate_of"] is None
        assert (f["date"], f["date_source"]) == (Path(p).stem, "filename")
    assert all(files[p]["versioned"] for p in files if not p.startswith("journal/"))


# ------------------------------------------------------------------- duplicates

def test_exact_duplicates_point_at_their_original(files):
    found = {p: f["duplicate_of"] for p, f in files.items() if f["duplicate_of"]}
    assert found == DUPLICATES
    for copy, original in DUPLICATES.items():
        assert (VAULT / copy).read_bytes() == (VAULT / original).read_bytes()


def test_near_copy_with_a_new_date_is_a_version_not_a_duplicate(files):
    sept = "work/kittiwake retainer (Sept 2026).md"
    octo = "work/kittiwake retainer-oct2026.md"
    a, b = (VAULT / sept).read_text(), (VAULT / octo).read_text()
    assert a != b and a.replace("£3,100", "£3,350") == b     # one number differs
    assert files[octo]["duplicate_of"] is None
    assert files[octo]["date"] > files[sept]["date"]
    assert files[octo]["is_latest"] and not files[sept]["is_latest"]


# ------------------------------------------------------------------------ dates

@pytest.mark.parametrize("path", sorted(DATES))
def test_date_forms(files, path):
    want, source = DATES[path]
    f = files[path]
    assert f["date_source"] == source
    assert f["date"] == want if len(want) == 10 else f["date"][:7] == want


def test_undated_notes_fall_back_to_mtime(files):
    assert sorted(p for p, f in files.items() if f["date_source"] == "mtime") == sorted(UNDATED)
    for p in UNDATED:
        assert files[p]["date"] == "2026-12-15"


def test_weak_date_never_wins_latest(files):
    old, new = FAMILIES["packing list"][0]
    assert files[old]["date"] > files[new]["date"]          # mtime is later on purpose
    assert files[new]["is_latest"] and not files[old]["is_latest"]


def test_corrected_elsewhere_is_dated_after_the_original(files):
    plan, email = "move/move plan final.md", "move/email from Ana - flights.md"
    assert "Flight: 14 November" in (VAULT / plan).read_text()
    assert "flight moved to 21 November" in (VAULT / email).read_text()
    assert files[plan]["family"] != files[email]["family"]
    assert files[email]["date"] > files[plan]["date"]


# ---------------------------------------------------------------------- privacy

def test_privacy_by_folder(files):
    for p, f in files.items():
        folder = p.split("/")[0]
        assert f["private"] is (folder in ("health", "journal", "finance")), p


def test_marker_only_in_private_text(built, files):
    _, index = built
    holders = [p for p in files if MARKER in (VAULT / p).read_text()]
    assert holders == ["health/physio notes.md"]
    assert files[holders[0]]["private"]
    marked = [c for c in index.chunks if MARKER in c["text"]]
    assert marked and all(c["private"] for c in marked)


# ------------------------------------------------------- dated sections, links, tables

def _section_chunks(index, path):
    return [c for c in index.chunks if c["path"] == path and c["section_date"]]


def test_training_log_sections_and_newest_entry(built):
    _, index = built
    chunks = _section_chunks(index, LOG)
    assert sorted({c["section_date"] for c in chunks}) == LOG_SECTIONS
    assert {c["section_date"] for c in chunks if c["entry_latest"]} == {"2026-10-03"}
    # the newest entry is about shoes: the longest long run (33 km) is only in an older one
    newest = " ".join(c["text"] for c in chunks if c["entry_latest"])
    holding = {c["section_date"] for c in chunks if "33 km" in c["text"]}
    assert "33 km" not in newest and "Pacewell Tempo X" in newest
    assert holding == {"2026-09-20"}
    assert any(c["section_date"] == "2026-06-14" and "long run" in c["heading"]
               for c in chunks)


def test_heart_rate_log_uses_h3_dated_sections(built):
    _, index = built
    chunks = _section_chunks(index, "health/heart rate.md")
    assert sorted({c["section_date"] for c in chunks}) == HR_SECTIONS
    assert all(c["private"] and c["date_source"] == "section" for c in chunks)


def test_two_hop_contact_follows_a_wikilink(files):
    project, client = "work/Aireside tenant portal.md", "work/Aireside Housing.md"
    assert client in files[project]["links"]
    assert "Priya Nandakumar" not in (VAULT / project).read_text()
    assert "Priya Nandakumar" in (VAULT / client).read_text()


def test_alias_links_resolve(files):
    assert "people/Dev Okafor.md" in files[LOG]["links"]                   # [[Dev Okafor|Dev]]
    assert "work/Kittiwake Cycles.md" in files["move/move plan v1.md"]["links"]


def test_table_rows_keep_their_column_names(built):
    _, index = built
    text = " ".join(c["text"] for c in index.chunks if c["path"] == "work/invoice tracker.md")
    assert "Amount (£): 3,350" in text
