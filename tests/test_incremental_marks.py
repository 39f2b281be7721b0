"""Copies, families and links decided incrementally (issue 27): after each random edit
of a vault where many notes share a date (an import, a day of meetings), near copies
and exact copies come and go, and versions of one document are added and deleted, the
incremental ingest's marks equal a full rebuild's: every record's duplicate_of, family,
is_latest and links, and the remembered near-copy pairs. The edits also show that an
edit outside a date's group compares none of its pairs again."""

import json
import shutil
from pathlib import Path

import pytest

from verso import families
from verso import ingest
from verso import store_load
import test_segments

DATES = ["2026-05-01", "2026-05-01", "2026-05-01", "2026-06-01", "2026-07-15"]
WORDS = [f"w{i}" for i in range(300)]
MARKS = ("path", "duplicate_of", "family", "is_latest", "links", "date", "sha256")


class Vault(test_segments.Vault):
    """test_segments' randomly edited vault (put, notes), with notes that share dates."""

    def body(self) -> str:
        return " ".join(self.rng.choices(WORDS, k=self.rng.randint(30, 90)))

    def text(self, body=None, date=None) -> str:
        r = self.rng
        date = date or (r.choice(DATES) if r.random() < 0.8 else None)
        head = f"---\ndate: {date}\n---\n" if date else ""
        link = f"\nSee [[{r.choice(self.notes()).rsplit('/', 1)[-1][:-3]}]]." if (
            self.notes() and r.random() < 0.3) else ""
        return f"{head}# Note\n{body or self.body()}{link}\n"

    def name(self) -> str:
        r = self.rng
        return (f"{r.choice(['imported', 'meetings', 'plans'])}/{r.choice(WORDS[:40])}"
                f"{r.choice(['', ' v2', ' v3', ' 2026-04-01', ' final', ' copy'])}.md")

    def step(self) -> str:
        r, notes = self.rng, self.notes()
        kind = r.choice(["edit", "add", "delete", "near", "exact", "redate"])
        if kind == "add" or len(notes) < 4:
            self.put(self.name(), self.text())
            return "add"
        src = r.choice(notes)
        text = (self.root / src).read_text()
        if kind == "edit":
            self.put(src, self.text())
        elif kind == "delete":
            (self.root / src).unlink()
        elif kind == "near":                  # the same text and one word more
            self.put(self.name(), text.replace("# Note\n", "# Note\nalso "))
        elif kind == "exact":
            self.put(self.name(), text)
        else:                                 # the same body under another date
            body = text.split("# Note\n", 1)[-1]
            self.put(src, f"---\ndate: {r.choice(DATES)}\n---\n# Note\n{body}")
        return kind


def _marks(d: Path) -> tuple[list, dict]:
    idx = store_load.load_index(d)
    near = json.loads((d / idx.manifest["near_file"]).read_bytes())["pairs"]
    return [{k: f.get(k) for k in MARKS} for f in idx.files], dict(near)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.slow
def test_random_edits_mark_copies_and_families_as_a_full_rebuild(tmp_path, seed):
    v = Vault(tmp_path / "vault", seed)
    for _ in range(25):
        v.put(v.name(), v.text())
    d = tmp_path / "idx"
    ingest.build_index(v.root, d)
    kinds, dups = [], 0
    for i in range(40):
        kinds.append(v.step())
        ingest.build_index(v.root, d)
        fresh = tmp_path / f"fresh{i}"
        ingest.build_index(v.root, fresh, rebuild=True)
        (a, near_a), (b, near_b) = _marks(d), _marks(fresh)
        assert a == b, f"after step {i} ({kinds[-1]})"
        assert near_a == near_b, f"after step {i} ({kinds[-1]})"
        dups = max(dups, sum(1 for f in a if f["duplicate_of"]))
        shutil.rmtree(fresh)
    assert {"near", "exact", "delete", "redate"} <= set(kinds)
    assert dups >= 3                    # copies were found, not merely none on both sides


def test_an_edit_outside_a_dates_group_compares_none_of_its_pairs(tmp_path, monkeypatch):
    v = Vault(tmp_path / "vault", 9)
    body = v.body()
    for i in range(6):                          # one date, one near-copy chain
        v.put(f"imported/n{i}.md", v.text(body + " x" * i, "2026-05-01"))
    v.put("other.md", v.text(date="2026-07-15"))
    d = tmp_path / "idx"
    ingest.build_index(v.root, d)
    calls = []
    real = families._near_copy
    monkeypatch.setattr(families, "_near_copy", lambda *a, **k: calls.append(1) or real(*a, **k))
    v.put("other.md", v.text(date="2026-07-15"))
    ingest.build_index(v.root, d)
    assert calls == []
    assert sum(1 for f in store_load.load_index(d).files if f["duplicate_of"]) >= 1
    v.put("imported/n9.md", v.text(body, "2026-05-01"))      # an exact copy joins
    ingest.build_index(v.root, d)
    assert calls                                 # its group is compared again
    keeper = {f["duplicate_of"] for f in store_load.load_index(d).files} - {None}
    for rel in keeper:                           # the copies' keepers go
        (v.root / rel).unlink()
    ingest.build_index(v.root, d)
    ingest.build_index(v.root, tmp_path / "fresh", rebuild=True)
    assert _marks(d) == _marks(tmp_path / "fresh")
    assert not {f["duplicate_of"] for f in store_load.load_index(d).files} & keeper
