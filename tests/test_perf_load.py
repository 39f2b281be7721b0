"""What made a one-note refresh and a cold question cheaper (issue 37, item 5) gives what
the slower way gave: a segment's headings decoded per row (store_load._Strings) equal
json.loads of the list, the tricky strings included, and lists that are not plain
strings are decoded whole; a record compared field by field (file_columns.Columns.equals)
is dict(Record) == rec; files read ahead in a thread (store_load.Ahead) load the same
index, and a file changed after that read is read again, so damage is still found; a
builtin refresh imports no model module."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verso import file_columns
from verso import ingest
from verso import store
from verso import store_load

ROOT = Path(__file__).resolve().parent.parent

LISTS = [
    ["a", "b", "c"],
    [",", "", ",,", "a,b", "é ü 日本", "[", "]", "a\u2028b", ""],
    ["only one"],
    ["", ""],
    ["x"] * 300,                       # read past the threshold: decoded whole
]
NOT_PLAIN = [
    ["a", None, "b"],                  # a null among strings
    ['say "hi"', "b"],                 # an escaped quote
    ["back\\slash"],
    ["tab\there"],                     # a control character, escaped
    [None, None],
    [1, 2],
    [["a"], ["b"]],
]


def _span(values: list) -> tuple[bytes, int, int]:
    """values as store writes a chunks.json list, inside other bytes: (raw, start, end)."""
    raw = b'{"x":' + store.json_bytes(values) + b',"y":1}'
    return raw, 5, len(raw) - 7


@pytest.mark.parametrize("values", LISTS)
def test_strings_read_per_row_equal_the_decoded_list(values):
    raw, start, end = _span(values)
    assert json.loads(raw[start:end]) == values
    s = store_load._Strings.of(raw, start, end, len(values))
    assert s is not None and len(s) == len(values)
    assert [s[i] for i in range(len(values))] == values
    assert s[-1] == values[-1] and s[1:3] == values[1:3] and s[::-1] == values[::-1]
    assert list(s) == values and s == values
    with pytest.raises(IndexError):
        s[len(values)]


@pytest.mark.parametrize("values", NOT_PLAIN)
def test_lists_other_than_plain_strings_are_decoded_whole(values):
    raw, start, end = _span(values)
    assert store_load._Strings.of(raw, start, end, len(values)) is None
    for lists in ({"heading": values}, {"section_date": values}, {"entry_latest": values}):
        n = len(values)
        raw = store.json_bytes({"format": store.FORMAT, "files": [], "heading": [""] * n,
                                "section_date": [None] * n, "entry_latest": [None] * n,
                                **lists})
        meta = store_load._Meta(raw, n, problem="damaged", at=store_load._Meta.keys_at(raw))
        key = next(iter(lists))
        assert meta.get(key) == values and type(meta.get(key)) is list


def test_a_count_that_does_not_match_is_not_read_per_row():
    raw, start, end = _span(["a", "b", "c"])
    assert store_load._Strings.of(raw, start, end, 2) is None
    assert store_load._Strings.of(raw, start, end, 4) is None


def test_a_record_compared_field_by_field_is_dict_equality():
    recs = [{"path": f"n{i}.md", "size": i, "tags": ["t", str(i)], "date": None}
            for i in range(5)]
    cols = file_columns.Columns(file_columns.encode(recs))
    cols.column("size")                            # decoded first, as a refresh does
    same = dict(recs[2])
    variants = [same, {**same, "size": 9}, {**same, "tags": ["t"]}, {**same, "date": "x"},
                {**same, "extra": 1}, {k: v for k, v in same.items() if k != "date"},
                {**same, "path": "n3.md"}]
    for rec in variants:
        assert cols.equals(2, rec) == (dict(file_columns.Record(cols, 2)) == rec), rec
    edited = file_columns.Columns(file_columns.encode(recs))
    edited.column("size")
    assert not edited.equals(2, {**same, "size": 9})
    assert set(edited.cols) == {"size"}            # the rest stays undecoded


def _vault(tmp_path: Path) -> Path:
    v = tmp_path / "vault"
    for i in range(12):
        (v / f"f{i % 3}").mkdir(parents=True, exist_ok=True)
        (v / f"f{i % 3}" / f"n{i}.md").write_text(f"# Note {i}\n\nrate {i} per hour\n")
    return v


def _same(a, b) -> bool:
    return (a.manifest == b.manifest and list(a.files) == list(b.files)
            and list(a.chunks) == list(b.chunks))


def test_files_read_ahead_load_the_same_index(tmp_path):
    v, d = _vault(tmp_path), tmp_path / "idx"
    ingest.build_index(v, d)
    (v / "f0" / "n0.md").write_text("# Note 0\n\nrate 99 per hour\n")
    ingest.build_index(v, d)                       # a base, a delta, two segments
    ahead = store_load.Ahead(d)
    ahead.thread.join()
    assert len(ahead.files) == 1 + len(json.loads((d / "manifest.json").read_text())
                                       ["segments"])
    assert _same(store_load.load_index(d, ahead=ahead), store_load.load_index(d))
    assert not ahead.files                         # each taken once
    missing = store_load.Ahead(tmp_path / "nothing")
    missing.thread.join()
    assert missing.files == {}


def test_a_file_changed_after_its_read_ahead_is_read_again(tmp_path):
    v, d = _vault(tmp_path), tmp_path / "idx"
    ingest.build_index(v, d)
    seg = json.loads((d / "manifest.json").read_text())["segments"][0]["name"]
    path = d / f"{seg}.chunks.json"
    ahead = store_load.Ahead(d)
    ahead.thread.join()
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"Note", b"Nope"))   # damaged after the read ahead
    os.utime(path, ns=(1, 1))
    with pytest.raises(store.IndexProblem, match="does not match its manifest"):
        store_load.load_index(d, ahead=ahead)


def test_a_refresh_reads_ahead_and_finds_damage(tmp_path):
    v, d = _vault(tmp_path), tmp_path / "idx"
    ingest.build_index(v, d)
    m = json.loads((d / "manifest.json").read_text())
    files = d / m["files_file"]
    files.write_bytes(files.read_bytes().replace(b"n1.md", b"n7.md"))
    (v / "f1" / "n1.md").write_text("# Note 1\n\nrate 1 per day\n")
    s = ingest.build_index(v, d)                  # damaged previous index: rebuilt
    assert "previous index unusable" in s["note"] and s["indexed"] == 12
    texts = [c["text"] for c in store_load.load_index(d).chunks if c["path"] == "f1/n1.md"]
    assert any("per day" in t for t in texts)


def test_a_builtin_refresh_imports_no_model_module(tmp_path):
    v, d = _vault(tmp_path), tmp_path / "idx"
    ingest.build_index(v, d)
    (v / "f2" / "n2.md").write_text("# Note 2\n\nrate 2 per week\n")
    code = ("import sys, _checkout\nfrom verso import ingest\n"
            f"ingest.build_index({str(v)!r}, {str(d)!r})\n"
            "print(sorted(m for m in ('verso.models', 'verso.line_scores',"
            " 'verso.choosing_writer') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "[]"
