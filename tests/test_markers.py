"""families: version markers order a family when dates do not, and a family has exactly
one latest member (issue 44, item 2). Every vault here has one mtime for all its files,
as after a clone."""

import json
import os

import pytest

from verso import families
from verso import harness
from verso import ingest
from verso import store_load
from vaults import write

CLONED = 1_796_083_200     # 2026-12-01 00:00 UTC: every file's mtime, as after a clone
DAY = 86_400


def make(vault, notes: dict, mtime=CLONED):
    for rel, text in notes.items():
        write(vault, rel, text, mtime=mtime)
    return vault


def files_of(vault, tmp_path) -> dict:
    ingest.build_index(vault, tmp_path / "idx")
    return {f["path"]: f for f in store_load.load_index(tmp_path / "idx").files}


def latest(files: dict) -> list[str]:
    return sorted(p for p, f in files.items() if f["is_latest"])


def record(path, date="2026-12-01", source="mtime") -> dict:
    return {"path": path, "date": date, "date_source": source}


HALL = {   # a hall hire quote: a draft and its final, no dates inside
    "events/hall hire - draft.md": "# Hall hire\nQuote from St Mary's: £420 for the "
                                   "evening, bar extra.\n",
    "events/hall hire - FINAL.md": "# Hall hire\nAgreed with St Mary's: £380 for the "
                                   "evening including the bar.\n",
}


def test_a_draft_and_its_final_are_one_family_with_one_latest(tmp_path):
    files = files_of(make(tmp_path / "v", HALL), tmp_path)
    assert {f["family"] for f in files.values()} == {"events/hall hire"}
    assert latest(files) == ["events/hall hire - FINAL.md"]


def test_a_rewrite_named_updated_or_revised_is_a_newer_version(tmp_path):
    """People mark a rewrite "UPDATED" or "revised" in its name: the same document, newer."""
    files = files_of(make(tmp_path / "v", {
        "home/Move plan.md": "# Move plan\nVan booked for the 14th, £310.\n",
        "home/Move plan UPDATED.md": "# Move plan\nVan moved to the 21st, £290.\n",
        "work/quote revised.md": "# Quote\nKitchen £8,950.\n",
        "work/quote.md": "# Quote\nKitchen £8,400.\n",
        "work/new tutor.md": "# Tutor\nMarta, Tuesdays.\n"}), tmp_path)
    assert files["home/Move plan UPDATED.md"]["family"] == "home/move plan"
    assert files["work/quote revised.md"]["family"] == "work/quote"
    assert files["work/new tutor.md"]["family"] == "work/new tutor"    # "new": no marker
    assert latest(files) == ["home/Move plan UPDATED.md", "work/new tutor.md",
                             "work/quote revised.md"]


def test_the_drafts_amount_does_not_go_out_as_current(tmp_path):
    make(tmp_path / "v", HALL)
    ingest.build_index(tmp_path / "v", tmp_path / "idx")
    a = harness.ask("How much is the hall hire?", index=tmp_path / "idx", backend="builtin")
    assert "£380" in a.answer and "£420" not in a.answer
    assert not [s for s in a.sources if s["path"] == "events/hall hire - draft.md"
                and not s.get("superseded_by")]          # never handed on as current


@pytest.mark.parametrize("stems, newest", [
    (["plan - draft", "plan v1", "plan v2", "plan - Final"], "plan - Final"),
    (["plan - draft", "plan v1", "plan v2"], "plan v2"),
    (["plan - DRAFT", "plan"], "plan"),
    (["plan v2", "plan v10", "plan v9"], "plan v10"),
    (["plan v1.2", "plan v1.10"], "plan v1.10"),
    (["plan_old", "plan"], "plan"),
    (["plan v3 draft", "plan v2"], "plan v3 draft"),
    (["plan v2 (1)", "plan v1"], "plan v2 (1)"),       # a copy of v2 is still v2
    (["Move plan", "Move plan UPDATED"], "Move plan UPDATED"),   # a rewrite's word
    (["quote revised", "quote v2", "quote"], "quote revised"),
    (["list updated", "list FINAL"], "list FINAL"),
])
def test_markers_order_a_family_of_one_file_time(stems, newest):
    members = [record(f"w/{s}.md") for s in stems]
    assert families.latest_of(members) == (record(f"w/{newest}.md"), "marker")
    ranked = sorted(stems, key=families.version_rank)
    assert ranked[-1] == newest


def test_a_copy_marker_is_a_copy_not_a_version(tmp_path):
    files = files_of(make(tmp_path / "v", {
        "w/plan.md": "# Plan\nthe plan as it stands", "w/plan (1).md": "# Plan\nan edit",
        "w/plan_bak.md": "# Plan\nthe plan before"}), tmp_path)
    assert latest(files) == ["w/plan.md"]
    for copy in ("plan (1)", "plan copy", "plan copy 2", "plan backup", "plan_bak"):
        assert families.version_rank(copy) == families.version_rank("plan")
        assert families.version_marker(copy) == "copy"
        win = families.latest_of([record(f"w/{copy}.md"), record("w/plan.md")])
        assert win == (record("w/plan.md"), "not a copy")


def test_a_written_date_orders_before_a_marker_and_file_time_never_beats_it():
    draft = record("w/plan - draft.md", "2026-10-02", "text")
    final = record("w/plan - final.md", "2026-09-20", "text")
    assert families.latest_of([draft, final]) == (draft, "date")
    final_undated = record("w/plan - final.md", "2026-12-01", "mtime")
    assert families.latest_of([draft, final_undated]) == (draft, "date")
    same_day = record("w/plan - final.md", "2026-10-02", "header")
    assert families.latest_of([draft, same_day]) == (same_day, "marker")


def test_file_times_decide_only_between_equal_markers():
    old = record("w/plan v2.md", "2026-01-01")
    new = record("w/plan v1.md", "2026-06-01")
    assert families.latest_of([old, new]) == (old, "marker")
    a, b = record("w/plan a.md", "2026-01-01"), record("w/plan b.md", "2026-06-01")
    assert families.latest_of([a, b]) == (b, "file time")


def test_a_full_tie_gives_exactly_one_latest_whatever_the_order(tmp_path):
    notes = {"w/tie 2026-02-02.md": "tie one", "w/tie (2026-02-02).md": "tie two",
             "w/tie_2026-02-02.md": "tie three"}
    files = files_of(make(tmp_path / "v", notes), tmp_path)
    assert latest(files) == ["w/tie_2026-02-02.md"]          # the path that sorts last
    members = [record(p, "2026-02-02", "filename") for p in notes]
    for turn in range(3):
        order = members[turn:] + members[:turn]
        assert families.latest_of(order) == (record("w/tie_2026-02-02.md", "2026-02-02",
                                                    "filename"), "path")


def test_between_names_still_tied_the_numbers_count_up(tmp_path):
    files = files_of(make(tmp_path / "v", {       # "2025-26" is no date: both by mtime
        "home/Home insurance 2025-26.md": "# Home insurance\nInsurer: Larkspur Mutual",
        "home/Home insurance 2026-27.md": "# Home insurance\nInsurer: Brightwater"}),
        tmp_path)
    assert {f["family"] for f in files.values()} == {"home/home insurance"}
    assert latest(files) == ["home/Home insurance 2026-27.md"]
    tied = [record("w/plan (9).md"), record("w/plan (10).md")]
    assert families.latest_of(tied) == (record("w/plan (10).md"), "path")


def test_one_latest_after_an_edit_refreshes_the_family(tmp_path):
    vault = make(tmp_path / "v", {**HALL, "events/hall hire v2.md": "# Hall hire\n£400"})
    ingest.build_index(vault, tmp_path / "idx")
    write(vault, "events/hall hire - draft.md", "# Hall hire\nQuote: £430.\n",
          mtime=CLONED + 3 * DAY)                        # the draft edited last
    ingest.build_index(vault, tmp_path / "idx")
    files = {f["path"]: f for f in store_load.load_index(tmp_path / "idx").files}
    assert latest(files) == ["events/hall hire - FINAL.md"]


def test_ingest_files_says_which_marker_or_date_decided(tmp_path, capsys):
    vault = make(tmp_path / "v", {
        **HALL, "events/hall hire (1).md": "# Hall hire\nan older quote, £450",
        "flat/rent v1.md": "# Rent\n2026-08-28\nRent £1,150",
        "flat/rent v2.md": "# Rent\n2026-09-19\nRent £1,210",
        "garden/seeds.md": "# Seeds\nbroad beans in November"})
    assert ingest.main([str(vault), "--index", str(tmp_path / "i"), "--files",
                        "--json"]) == 0
    rows = {r["path"]: r for r in json.loads(capsys.readouterr().out)["files"]}
    assert rows["events/hall hire - FINAL.md"]["latest_by"] == "marker final"
    assert rows["events/hall hire - draft.md"]["version"] == "draft"
    assert rows["events/hall hire (1).md"]["version"] == "copy"
    assert rows["flat/rent v2.md"]["latest_by"] == "date"
    assert rows["garden/seeds.md"]["latest_by"] is None          # a family of one
    assert ingest.main([str(vault), "--index", str(tmp_path / "i"), "--files",
                        "--quiet"]) == 0
    table = capsys.readouterr().out.splitlines()
    final = next(x for x in table if x.startswith("events/hall hire - FINAL.md"))
    assert "yes: marker final" in final
    assert "yes: date" in next(x for x in table if x.startswith("flat/rent v2.md"))
    assert os.path.getmtime(vault / "flat/rent v1.md") == CLONED
