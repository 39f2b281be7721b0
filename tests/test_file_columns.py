"""The file records by column (file_columns.py): what a loaded index reads equals the
records written, with and without a delta; a column is decoded only when a field of it is
read; a damaged files file is one line naming the fix."""

import json

import pytest

from verso import file_columns
from verso import ingest
from verso import store
from verso import store_load
from vaults import write

RECS = [{"path": "a.md", "date": "2026-05-01", "links": ["b.md"], "private": True,
         "title": "Ä note"},
        {"path": "b.md", "date": None, "links": [], "private": False, "title": "B"}]


def test_columns_give_back_the_records_and_decode_only_what_is_read():
    cols = file_columns.Columns(file_columns.encode(RECS))
    files = file_columns.Files(cols)
    assert files[0]["path"] == "a.md" and set(cols.cols) == {"path"}
    assert files.column("date") == ["2026-05-01", None] and "links" not in cols.cols
    assert files == RECS and list(map(dict, files)) == RECS and files.dicts() == RECS
    assert files[-1].get("nothing", 7) == 7 and files[1]["title"] == "B"
    with pytest.raises(TypeError):
        files[0]["path"] = "c.md"                      # a view: read only
    with pytest.raises(IndexError):
        files[2]


def test_a_delta_over_the_base_reads_as_the_records_now():
    cols = file_columns.Columns(file_columns.encode(RECS))
    changed = {**RECS[0], "title": "edited"}
    files = file_columns.Files(cols, [changed, 1, {**RECS[1], "path": "c.md"}])
    assert len(files) == 3 and files[0] is changed
    assert files.column("title") == ["edited", "B", "B"]
    assert files.column("path") == ["a.md", "b.md", "c.md"]
    assert files.dicts()[1] is cols.dicts()[1]          # an unchanged record is the base's
    by_path = file_columns.ByPath(files)
    assert "c.md" in by_path and by_path["b.md"]["date"] is None and len(by_path) == 3
    assert files != RECS


def test_a_header_without_columns_or_a_short_column_is_a_value_error():
    with pytest.raises(ValueError):
        file_columns.Columns(b'{"n": 2}\n[]')
    raw = file_columns.encode(RECS).replace(b'["a.md","b.md"]', b'["a.md"]       ')
    with pytest.raises(ValueError, match="column path"):
        file_columns.Columns(raw).column("path")


def test_a_loaded_index_reads_its_records_by_column(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "DELTA_SHARE", 1.0)      # the edit goes into a delta
    vault = tmp_path / "vault"
    write(vault, "a.md", "---\ndate: 2026-05-01\n---\n# A\nalpha [[b]]")
    write(vault, "b.md", "# B\nbeta")
    d = tmp_path / "idx"
    ingest.build_index(vault, d)
    write(vault, "b.md", "# B\nbeta, edited")
    ingest.build_index(vault, d)
    idx = store_load.load_index(d)
    assert idx.manifest["files_delta"] and isinstance(idx.files, file_columns.Files)
    assert idx.by_path["a.md"]["links"] == ["b.md"] and idx.by_path["a.md"]["date"] == "2026-05-01"
    assert [f["path"] for f in idx.files] == ["a.md", "b.md"]
    raw = (d / idx.manifest["files_file"]).read_bytes()
    assert json.loads(raw.split(b"\n", 1)[0])["n"] == 2


def test_a_files_file_with_its_digest_but_no_columns_is_one_line(tmp_path):
    """Written by something else with the manifest updated to match: not trusted."""
    import hashlib
    vault = tmp_path / "vault"
    write(vault, "a.md", "# A\nalpha")
    d = tmp_path / "idx"
    ingest.build_index(vault, d)
    m = json.loads((d / "manifest.json").read_text())
    raw = b'{"format": 4, "files": []}'
    (d / m["files_file"]).write_bytes(raw)
    (d / "manifest.json").write_text(json.dumps({**m, "files_sha": hashlib.sha256(raw).hexdigest()}))
    with pytest.raises(store.IndexProblem, match="does not match its manifest.*--rebuild"):
        store_load.load_index(d)
