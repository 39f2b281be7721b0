"""ingest: family names and dates as people write them (Unicode dashes and spaces,
month-only file names with a day in the note, d/m/y digits by config, weeks, quarters,
timestamps)."""

from datetime import date

import pytest

from verso import dating
from verso import families
from verso import harness
from verso import ingest
from verso import store_load
from verso import vault_walk
from vaults import write

OLD = 1_600_000_000   # an mtime in 2020, far from every date written in the notes


def files_of(index_dir):
    return {f["path"]: f for f in store_load.load_index(index_dir).files}


def build(vault, tmp_path):
    ingest.build_index(vault, tmp_path / "idx")
    return files_of(tmp_path / "idx")


@pytest.mark.parametrize("stem", [
    "Shop stats – April 2026",            # en dash
    "Shop stats — 2026-05",               # em dash
    "shop-stats-2026-07",                 # hyphen-minus
    "shop stats Oct 2026",
    "shop_stats_2026_08_02",
    "Shop\u2010stats\u20122026-09",       # Unicode hyphen and figure dash
    "shop\u00a0stats\u2009Nov 2026",      # non-breaking and thin spaces
    "shop.stats.2026-12",
    "ＳＨＯＰ ＳＴＡＴＳ 2026-03",          # full-width letters (NFKC)
    "SHOP   STATS – – Q3 2026",           # runs of separators, a quarter
])
def test_family_name_folds_dashes_spaces_case_and_width(stem):
    assert families._family_name(stem) == "shop stats"


def test_en_dash_file_joins_its_family_and_is_not_latest(tmp_path):
    vault = tmp_path / "v"
    write(vault, "shop/Shop stats – April 2026.md", "# Shop stats\nOrders: 120 in April")
    write(vault, "shop/shop-stats-2026-07.md", "# Shop stats\nOrders: 180 in July")
    write(vault, "shop/shop stats Oct 2026.md", "# Shop stats\nUpdated: 3 October 2026\n"
                                                "Orders: 240 in October")
    files = build(vault, tmp_path)
    assert {f["family"] for f in files.values()} == {"shop/shop stats"}
    latest = [p for p, f in files.items() if f["is_latest"]]
    assert latest == ["shop/shop stats Oct 2026.md"]
    october = files["shop/shop stats Oct 2026.md"]
    assert (october["date"], october["date_source"]) == ("2026-10-03", "filename+header")
    assert files["shop/Shop stats – April 2026.md"]["date"] == "2026-04-01"


def test_a_day_in_another_month_does_not_override_the_file_name(tmp_path):
    vault = tmp_path / "v"
    write(vault, "shop stats Oct 2026.md", "Updated: 28 September 2026\nOrders: 240")
    write(vault, "shop stats 2026-W40.md", "---\ndate: 2026-10-01\n---\nOrders: 250")
    write(vault, "shop stats Q4 2026.md", "---\nupdated: 2026-12-24T10:00\n---\nOrders: 260")
    files = build(vault, tmp_path)
    got = {p: (f["date"], f["date_source"]) for p, f in files.items()}
    assert got["shop stats Oct 2026.md"] == ("2026-10-01", "filename")
    # ISO week 40 of 2026 runs Monday 28 September to Sunday 4 October: 1 October is inside
    assert got["shop stats 2026-W40.md"] == ("2026-10-01", "filename+frontmatter")
    assert got["shop stats Q4 2026.md"] == ("2026-12-24", "filename+frontmatter")


@pytest.mark.parametrize("text, expected", [
    ("2026-W40", "2026-09-28"),
    ("report 2026w01", "2025-12-29"),     # ISO week 1 of 2026 starts in 2025
    ("Q3 2026", "2026-07-01"),
    ("plan 2026-Q4", "2026-10-01"),
    ("2026-10-03T09:12", "2026-10-03"),
    ("2026-10-03 09:12:00+02:00", "2026-10-03"),
    ("2026-W54", None),                   # no such week
    ("Q5 2026", None),
])
def test_weeks_quarters_and_timestamps(text, expected):
    assert dating.find_date(text) == expected


@pytest.mark.parametrize("order, expected", [
    ("ymd", None), ("dmy", "2026-10-03"), ("mdy", "2026-03-10")])
def test_digit_dates_follow_the_configured_order_only(order, expected):
    for text in ("03.10.2026", "3/10/2026", "Updated 03-10-2026"):
        assert dating.find_date(text, date_order=order) == expected
    assert dating.find_date("3/10.2026", date_order="dmy") is None   # mixed separators
    assert dating.find_date("31/12/2026", date_order="mdy") is None  # no month 31


def test_date_order_from_the_vault_config(tmp_path):
    vault = tmp_path / "v"
    write(vault, "verso.toml", 'date_order = "dmy"\n')
    write(vault, "minutes 03.10.2026.md", "Budget agreed: 400", mtime=OLD)
    write(vault, "log.md", "# Log\n## 04.10.2026\nfirst entry words\n## 05.11.2026\nsecond")
    files = build(vault, tmp_path)
    assert files["minutes 03.10.2026.md"]["date"] == "2026-10-03"
    chunks = store_load.load_index(tmp_path / "idx").chunks
    assert {c["section_date"] for c in chunks if c["path"] == "log.md"} >= {
        "2026-10-04", "2026-11-05"}


def test_ambiguous_digits_are_never_guessed_by_default(tmp_path):
    vault = tmp_path / "v"
    write(vault, "minutes 03.10.2026.md", "Budget agreed: 400", mtime=OLD)
    write(vault, "minutes 04.11.2026.md", "Budget agreed: 450", mtime=OLD + 10)
    files = build(vault, tmp_path)
    assert {f["date_source"] for f in files.values()} == {"mtime"}
    assert {f["family"] for f in files.values()} == {"minutes"}   # still one family


@pytest.mark.parametrize("text, order, expected", [
    ("journal 14.07.26", "ymd", "2026-07-14"),   # a date that reads only one way is read
    ("25/12/2026", "ymd", "2026-12-25"),
    ("03.03.25", "ymd", "2025-03-03"),           # both ways the same day
    ("08.01.26", "ymd", None),                   # 8 January or 1 August: not guessed
    ("08.01.26", "dmy", "2026-01-08"),
    ("08.01.26", "mdy", "2026-08-01"),
    ("band mtg 15.3.26", "ymd", "2026-03-15"),
    ("14.07.98", "dmy", "1998-07-14"),           # two-digit years as strptime reads them
    ("v2.1.26", "dmy", None),                    # a version, not a date
    ("14.07.26.3", "dmy", None),
])
def test_digit_dates_with_two_digit_years_and_one_reading(text, order, expected):
    assert dating.find_date(text, date_order=order) == expected


@pytest.mark.parametrize("names, expected", [
    (["14.07.26", "20.11.26", "08.01.26"], "dmy"),
    (["07.14.26", "11.20.26", "08.01.26"], "mdy"),
    (["14.07.26", "08.01.26"], None),                # one name is no habit
    (["14.07.26", "20.11.26", "11.20.26"], None),    # names read both ways: unknown
    (["2026-07-14", "notes"], None),
])
def test_a_vaults_file_names_tell_the_order_it_writes_dates_in(names, expected):
    assert dating.names_order(names) == expected


def test_ambiguous_digits_follow_the_vaults_own_names_unless_the_config_says(tmp_path):
    # A writer who names notes 14.07.26 and 20.11.26 writes day first: 08.01.26 is the
    # 8th of January. The config, when it names an order, decides instead.
    vault = tmp_path / "v"
    write(vault, "journal/14.07.26.md", "Swim 40 lengths", mtime=OLD)
    write(vault, "journal/20.11.26.md", "Swim 44 lengths", mtime=OLD)
    write(vault, "journal/08.01.26.md", "Swim 36 lengths", mtime=OLD)
    files = build(vault, tmp_path)
    assert files["journal/08.01.26.md"]["date"] == "2026-01-08"
    assert files["journal/14.07.26.md"]["date"] == "2026-07-14"
    write(vault, "verso.toml", 'date_order = "mdy"\n')
    files = build(vault, tmp_path)
    assert files["journal/08.01.26.md"]["date"] == "2026-08-01"
    assert files["journal/14.07.26.md"]["date_source"] == "mtime"   # no month 14


def test_an_edit_keeps_the_vaults_date_order_and_a_new_name_reads_it_again(tmp_path,
                                                                           monkeypatch):
    vault = tmp_path / "v"
    write(vault, "journal/14.07.26.md", "Swim 40 lengths", mtime=OLD)
    write(vault, "journal/20.11.26.md", "Swim 44 lengths", mtime=OLD)
    write(vault, "journal/08.01.26.md", "Swim 36 lengths", mtime=OLD)
    build(vault, tmp_path)
    asked = []
    real = vault_walk.settle_date_order
    monkeypatch.setattr(vault_walk, "settle_date_order",
                        lambda cfg, paths: asked.append(len(paths)) or real(cfg, paths))
    write(vault, "journal/08.01.26.md", "Swim 38 lengths", mtime=OLD + 5)    # an edit
    files = build(vault, tmp_path)
    assert asked == [] and files["journal/08.01.26.md"]["date"] == "2026-01-08"
    write(vault, "journal/07.14.26.md", "Swim 41 lengths", mtime=OLD)        # a new name
    files = build(vault, tmp_path)
    assert asked == [4]                 # read again: now names read both ways, no order
    assert files["journal/08.01.26.md"]["date_source"] == "mtime"


@pytest.mark.parametrize("written, order, expected", [
    ("14.07.26?", "ymd", (2026, 7, 14)),       # reads one way only: there is no month 14
    ("14/07/2026.", "mdy", None),              # nor in the month-first order
    ("03/09/2026?", "ymd", None),              # two ways, no order
    ("03/09/2026?", "dmy", (2026, 9, 3)),
    ("03.09.26", "mdy", (2026, 3, 9)),
    ("31.02.26", "dmy", None),                 # no such day
    ("1.2.3.2026", "dmy", None),               # a version, not a date
])
def test_a_question_reads_a_date_in_digits_in_the_vaults_order(written, order, expected):
    """The question side reads digit dates as ingest reads notes: with the vault's
    order, and without one only a date that reads one way; as a point in time ("as
    of") and as a period ("what did I write on")."""
    from verso import asof
    spec = asof.phrase(f"What was the rent as of {written}", order)
    assert (spec and (spec["year"], spec["month"], spec["day"])) == expected
    span = asof.period(f"What did I write on {written}", "2026-12-01", order)
    assert (span and span["start"]) == (expected and date(*expected).isoformat())


@pytest.mark.parametrize("question", [
    "What did I write about v1.2.30?", "what did I note on version 1.2.24",
    "What did I write about release 2.10.24?", "What did I write about 3/4 of the budget?",
    "What did I log about the 1.13.24 firmware?"])
def test_numbers_that_are_no_date_are_never_a_period(question):
    """A version or a fraction is no day: a question about it searches every note."""
    from verso import asof
    for order in ("ymd", "dmy", "mdy"):
        assert asof.period(question, "2026-12-01", order) is None, (question, order)
        assert asof.phrase(question, order) is None, (question, order)


def test_a_question_asks_as_of_a_digit_date_in_the_order_the_vault_writes(tmp_path):
    # The vault's names write day first, so "on 03/09/2026" is the 3rd of September: the
    # August note is the one in force; a vault whose config says mdy reads the 9th of
    # March, before either note.
    vault = tmp_path / "v"
    write(vault, "journal/14.07.26.md", "Swim 40 lengths", mtime=OLD)
    write(vault, "journal/20.11.26.md", "Swim 44 lengths", mtime=OLD)
    write(vault, "home/rent 2026-08-01.md", "Rent: £950 a month", mtime=OLD)
    write(vault, "home/rent 2026-10-01.md", "Rent: £990 a month", mtime=OLD)
    idx, be = harness.load(tmp_path / "idx", vault, "builtin")
    assert idx.date_order == "dmy"
    a = harness.ask("What was the rent on 03/09/2026?", index=idx, backend=be)
    assert a.time_mode == "as_of" and a.as_of == "2026-09-03"
    assert "£950" in a.answer and "£990" not in a.answer
    write(vault, "verso.toml", 'date_order = "mdy"\n')
    idx, be = harness.load(tmp_path / "idx", vault, "builtin")
    assert idx.date_order == "mdy"
    a = harness.ask("What was the rent on 03/09/2026?", index=idx, backend=be)
    assert a.time_mode == "as_of" and a.as_of == "2026-03-09"


def test_a_bad_date_order_is_one_clear_error(tmp_path):
    vault = tmp_path / "v"
    write(vault, "verso.toml", 'date_order = "dym"\n')
    write(vault, "a.md", "text")
    with pytest.raises(ValueError, match="date_order"):
        ingest.build_index(vault, tmp_path / "idx")


def test_sample_vault_en_dash_version_joins_the_training_plan_family(tmp_path):
    idx, _ = harness.load(tmp_path / "idx", harness.SAMPLE_VAULT, "builtin")
    sketch = idx.by_path["training/training plan – February 2026.md"]
    assert sketch["family"] == "training/training plan" and not sketch["is_latest"]
    members = [f for f in idx.files if f["family"] == "training/training plan"]
    assert len(members) == 3
    assert [f["path"] for f in members if f["is_latest"]] == [
        "training/training plan (July 2026).md"]
    assert date.fromisoformat(sketch["date"]) < date.fromisoformat(
        idx.by_path["training/training plan (April 2026).md"]["date"])
