"""A refresh that few notes changed does work in proportion to them (issue 37, item 5):
file_records.changes re-marks only the changed notes' neighbourhoods and the writer keeps
every other record and row as it was. Checked three ways: after random edits, adds,
deletes, renames, copies and redates the files it writes are byte for byte those of the
full catalogue on the same previous index (and its records a rebuild's); one edited
note reads one note, builds no record of the others and writes the few files of a
delta; and an edit, an add and a delete are always seen."""

import json
import shutil
from pathlib import Path

import pytest

from verso import families
from verso import file_records
from verso import ingest
from verso import store
from verso import store_load
from verso import vault_walk
import test_incremental_marks
import test_segments


def _files(d: Path) -> dict:
    """name -> bytes of an index dir, the manifest without its creation time."""
    out = {}
    for p in sorted(d.iterdir()):
        if p.name == "lock":
            continue
        raw = p.read_bytes()
        if p.name == "manifest.json":
            m = json.loads(raw)
            m.pop("created")
            raw = json.dumps(m, sort_keys=True).encode()
        out[p.name] = raw
    return out


def _both(monkeypatch, vault: Path, d: Path, tmp: Path) -> tuple[dict, dict]:
    """The index after one refresh of d by the changes path and by the full catalogue
    (each from a copy of d as it is)."""
    out = []
    for share, name in ((1.0, "by_changes"), (-1.0, "by_all")):
        shutil.rmtree(tmp / name, ignore_errors=True)
        shutil.copytree(d, tmp / name)
        monkeypatch.setattr(file_records, "CHANGES_SHARE", share)
        ingest.build_index(vault, tmp / name)
        out.append(tmp / name)
    shutil.rmtree(d)
    shutil.copytree(out[0], d)
    return _files(out[0]), _files(out[1])


@pytest.mark.parametrize("seed", [1])
def test_random_changes_write_what_the_full_catalogue_writes(tmp_path, monkeypatch, seed):
    v = test_incremental_marks.Vault(tmp_path / "vault", seed)
    for _ in range(20):
        v.put(v.name(), v.text())
    d = tmp_path / "idx"
    ingest.build_index(v.root, d)
    kinds = []
    for i in range(14):
        kinds.append(v.step())
        a, b = _both(monkeypatch, v.root, d, tmp_path)
        assert a == b, f"after step {i} ({kinds[-1]})"
    assert {"add", "delete"} & set(kinds)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [2, 3, 4, 5])
def test_random_changes_long_runs(tmp_path, monkeypatch, seed):
    for cls in (test_incremental_marks.Vault, test_segments.Vault):
        v = cls(tmp_path / f"vault{cls.__module__}", seed)
        for _ in range(25):
            v.put(v.name(), v.text())
        d = tmp_path / f"idx{cls.__module__}"
        ingest.build_index(v.root, d)
        for i in range(30):
            kind = v.step()
            a, b = _both(monkeypatch, v.root, d, tmp_path)
            assert a == b, f"after step {i} ({kind})"
            fresh = tmp_path / "fresh"
            ingest.build_index(v.root, fresh, rebuild=True)
            assert (test_incremental_marks._marks(d) == test_incremental_marks._marks(fresh)
                    ), f"after step {i} ({kind})"
            shutil.rmtree(fresh)


def _vault(root: Path, n: int) -> None:
    for i in range(n):
        text = f"# Note {i}\n\nWords of note {i} about plan{i}. See [[note {i + 1}]].\n"
        test_segments.write(root, f"f{i % 4}/note {i}.md", text, mtime=1_750_000_000 + i)


def test_one_edited_note_reads_one_note_and_writes_a_delta(tmp_path, monkeypatch):
    _vault(tmp_path / "v", 60)
    d = tmp_path / "idx"
    ingest.build_index(tmp_path / "v", d)
    reads, records, written = [], [], []
    real_read, real_reused, real_write = vault_walk.read, file_records.reused, store.write_atomic
    monkeypatch.setattr(vault_walk, "read", lambda p: reads.append(p) or real_read(p))
    monkeypatch.setattr(file_records, "reused", lambda *a: records.append(a[0]["path"])
                        or real_reused(*a))
    monkeypatch.setattr(store, "write_atomic", lambda p, data: written.append(Path(p).name)
                        or real_write(p, data))
    test_segments.write(tmp_path / "v", "f1/note 9.md", "# Note 9\n\nNow about budget.\n",
                        mtime=1_760_000_000)
    s = ingest.build_index(tmp_path / "v", d)
    assert [Path(p).name for p in reads] == ["note 9.md"]
    assert s["files_read"] == 1 and s["files_reused"] == 59
    assert len(records) <= 3                     # its link neighbours at most, not all 60
    assert sorted(w.split(".", 1)[1] for w in written) == sorted(
        ["vectors.npy", "rows.npy", "text", "chunks.json", "near.json", "delta.json", "json"])
    idx = store_load.load_index(d)
    assert any("budget" in c["text"] for c in idx.chunks)
    assert not any("plan9" in c["text"] for c in idx.chunks)


def test_an_edit_an_add_and_a_delete_are_always_seen(tmp_path):
    v = tmp_path / "v"
    _vault(v, 40)
    d = tmp_path / "idx"
    ingest.build_index(v, d)
    test_segments.write(v, "f2/note 6.md", "# Note 6\n\nEdited: zebra.\n", mtime=1_750_000_006)
    ingest.build_index(v, d)                     # same mtime, another size: still seen
    assert any("zebra" in c["text"] for c in store_load.load_index(d).chunks)
    test_segments.write(v, "f0/new.md", "# New\n\nA giraffe. See [[note 3]].\n",
                        mtime=1_770_000_000)
    ingest.build_index(v, d)
    idx = store_load.load_index(d)
    assert idx.by_path["f0/new.md"]["links"] == ["f3/note 3.md"]
    assert any("giraffe" in c["text"] for c in idx.chunks)
    (v / "f3/note 3.md").unlink()
    s = ingest.build_index(v, d)
    idx = store_load.load_index(d)
    assert "f3/note 3.md" not in idx.by_path and s["files_seen"] == 40
    assert idx.by_path["f0/new.md"]["links"] == ["note 3"]    # its link now names nothing
    assert not any(c["path"] == "f3/note 3.md" for c in idx.chunks)
    fresh = tmp_path / "fresh"
    ingest.build_index(v, fresh, rebuild=True)
    assert [dict(f) for f in idx.files] == [dict(f) for f in store_load.load_index(fresh).files]


def test_link_lookup_beyond_ascii_paths(tmp_path):
    """A final sigma lower-cases differently in a whole path than in its stem: the
    lookup of link targets among unchanged notes takes the exact test there."""
    v = tmp_path / "v"
    _vault(v, 12)
    test_segments.write(v, "f0/ΟΔΟΣ.md", "# Road\n\nThe road.\n", mtime=1_750_000_100)
    d = tmp_path / "idx"
    ingest.build_index(v, d)
    test_segments.write(v, "f1/link.md", "# L\n\nSee [[οδος]] and [[ΟΔΟΣ]].\n",
                        mtime=1_760_000_000)
    ingest.build_index(v, d)
    fresh = tmp_path / "fresh"
    ingest.build_index(v, fresh, rebuild=True)
    assert store_load.load_index(d).by_path["f1/link.md"]["links"] == store_load.load_index(
        fresh).by_path["f1/link.md"]["links"]
    assert families.path_keys("f0/ΟΔΟΣ.md")[1] in {"οδος", "οδοσ"}


def test_a_loaded_index_makes_per_note_places_and_row_lists_only_when_read(tmp_path):
    """What a question does not need is not built at load: the path -> rows table
    (an ingest's) and a segment's headings, dates and entry marks (decoded on first
    read, then equal to what was written)."""
    v = tmp_path / "v"
    _vault(v, 20)
    d = tmp_path / "idx"
    ingest.build_index(v, d)
    idx = store_load.load_index(d)
    seg = idx.segments[0]
    assert callable(idx.places) and set(seg.meta.lists) == {"files"}
    meta = json.loads((d / f"{seg.name}.chunks.json").read_bytes())
    assert seg.heading == meta["heading"] and seg.entry_latest == meta["entry_latest"]
    assert seg.section_date == meta["section_date"] and seg.files == meta["files"]
    assert idx.where == {p: [(0, a, n)] for p, a, n in meta["files"]}
    assert [c["heading"] for c in idx.chunks] == meta["heading"]


def test_the_project_registry_after_a_changes_refresh_is_a_rebuilds(tmp_path):
    """The registry is given only its folders' records on the changes path: the same
    rows as a rebuild (and none without registry folders)."""
    v = tmp_path / "v"
    _vault(v, 30)
    (v / "verso.toml").write_text('[registry]\nfolders = ["projects"]\n', encoding="utf-8")
    for i in range(3):
        test_segments.write(v, f"projects/p{i}.md", f"# P{i}\n\nStatus: active\n\nWork {i}.\n",
                            mtime=1_750_000_500 + i)
    d = tmp_path / "idx"
    ingest.build_index(v, d)
    test_segments.write(v, "projects/p1.md", "# P1\n\nStatus: paused\n\nOn hold.\n",
                        mtime=1_760_000_000)
    s = ingest.build_index(v, d)
    assert s["files_read"] == 1
    fresh = tmp_path / "fresh"
    ingest.build_index(v, fresh, rebuild=True)
    rows = store_load.load_index(d).manifest["projects"]
    assert rows == store_load.load_index(fresh).manifest["projects"] and len(rows) == 3
