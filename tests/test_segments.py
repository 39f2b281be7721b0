"""The segmented index: an ingest writes one small segment and tombstones, never the
whole index. Checked here: a random run of edits, adds, deletes and renames equals a
fresh full build (records, chunks, vectors, every query's ranking), with and without
merges, with the file records as a delta or a new base; BM25 across segments equals one index of the live chunks (and bm25s); a crash
between a segment and its manifest, or inside a merge, leaves one whole index; an index
of the old format is rebuilt with one line saying so."""

import hashlib
import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from verso import ingest
from verso import backends
from verso import textkit
from verso import bm25
from verso import retrieve
from verso import store
from verso import timewords
from verso import store_load
from test_ingest import FixedEmbedder
from vaults import index_file, write

T0 = 1_780_000_000
WORDS = ("rate invoice boat pier shed roof garden kittiwake retainer visa plan run shoes "
         "rent lease flat day month client halden audit form tax quarter budget").split()
QUERIES = ["day rate", "boat pier shed", "retainer plan", "tax quarter budget", "rent",
           "garden roof 1550", "visa run shoes client", "kittiwake audit form lease"]


def _backend():
    return backends.Backend("fixed", FixedEmbedder(), None, None)


class Vault:
    """A small vault edited at random; every write gets a later mtime."""

    def __init__(self, root: Path, seed: int):
        self.root, self.rng, self.clock = root, random.Random(seed), T0

    def text(self) -> str:
        r = self.rng
        head = f"---\ndate: 2026-0{r.randint(1, 9)}-1{r.randint(0, 9)}\n---\n" if r.random() < .4 else ""
        body = [f"# {r.choice(WORDS).title()}", " ".join(r.choices(WORDS, k=r.randint(3, 40)))]
        for _ in range(r.randint(0, 3)):
            title = f"2026-0{r.randint(1, 9)}-0{r.randint(1, 9)}" if r.random() < .5 else r.choice(WORDS)
            body += [f"## {title}", " ".join(r.choices(WORDS, k=r.randint(5, 60)))
                     + f" {r.randint(100, 2000)}"]
        if r.random() < .3:
            body.append(f"See [[{r.choice(self.notes() or ['nothing']).rsplit('/', 1)[-1][:-3]}]].")
        return head + "\n\n".join(body) + "\n"

    def notes(self) -> list[str]:
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*.md"))

    def put(self, rel: str, text: str) -> None:
        self.clock += 10
        write(self.root, rel, text, mtime=self.clock)

    def name(self) -> str:
        r = self.rng
        return (f"{r.choice(['w', 'x', 'log'])}/{r.choice(WORDS)}"
                f"{r.choice(['', ' v2', ' 2026-05-01', ' (1)', ' final'])}.md")

    def step(self) -> str:
        r, notes = self.rng, self.notes()
        kind = r.choice(["edit", "edit", "add", "delete", "rename", "copy"]) if notes else "add"
        if kind == "edit":
            self.put(r.choice(notes), self.text())
        elif kind == "add":
            self.put(self.name(), self.text())
        elif kind == "delete":
            (self.root / r.choice(notes)).unlink()
        elif kind == "rename":
            src, dst = self.root / r.choice(notes), self.root / self.name()
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                src.rename(dst)
        else:                                       # an exact copy: a duplicate
            self.put(self.name(), (self.root / r.choice(notes)).read_text())
        return kind


def _rankings(idx) -> tuple[list, list]:
    """Every query's candidates (id, path, fused, BM25 score) by each method, and their
    dense scores apart: equal to float32 rounding only, as BLAS sums a 3-row and a
    30-row matrix in other orders (the vectors themselves are compared bit for bit)."""
    out, dense = [], []
    for q in QUERIES:
        qvec = getattr(idx.embedder, "inner", idx.embedder).embed_query(q)
        for method in ("hybrid", "bm25", "dense"):
            cands = retrieve.search(idx, q, qvec, k=8, method=method)
            out.append([(c.id, c.path, c.fused, c.bm25_score) for c in cands])
            dense.append([c.dense_score or 0.0 for c in cands])
    return out, dense


def _same_as_full_build(vault: Path, d: Path, tmp_path: Path) -> None:
    fresh = tmp_path / f"fresh-{random.random()}"
    ingest.build_index(vault, fresh, backend=_backend())
    a, b = (store_load.load_index(x, backend=_backend()) for x in (d, fresh))
    assert a.files == b.files
    assert list(a.chunks) == list(b.chunks)
    np.testing.assert_array_equal(np.asarray(a.vectors), np.asarray(b.vectors))
    (ra, da), (rb, db) = _rankings(a), _rankings(b)
    assert ra == rb
    for x, y in zip(da, db):
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)
    shutil.rmtree(fresh)


@pytest.mark.parametrize("merges", ["default", "deltas only", "never"])
@pytest.mark.slow
def test_random_edits_equal_a_fresh_full_build(tmp_path, monkeypatch, merges):
    if merges != "default":
        monkeypatch.setattr(ingest, "MERGE_SHARE", 10.0)          # no full merge
        monkeypatch.setattr(ingest, "MERGE_SEGMENTS", 3 if merges == "deltas only" else 999)
    if merges == "never":
        monkeypatch.setattr(ingest, "DELTA_SHARE", 1.0)      # file records: always a delta
    v = Vault(tmp_path / "vault", seed=len(merges))
    for _ in range(12):
        v.put(v.name(), v.text())
    d = tmp_path / "idx"
    ingest.build_index(v.root, d, backend=_backend())
    kinds, most, records = [], 0, set()
    for i in range(50):
        kinds.append(v.step())
        s = ingest.build_index(v.root, d, backend=_backend())
        idx = store_load.load_index(d, backend=_backend())
        most = max(most, len(idx.segments))
        records.add("delta" if idx.manifest["files_delta"] else "base")
        assert s["files_read"] <= 2 or kinds[-1] == "copy"
        if i % 10 == 9:
            _same_as_full_build(v.root, d, tmp_path)
    assert set(kinds) == {"edit", "add", "delete", "rename", "copy"}
    assert most > 1                                     # deltas and tombstones were used
    assert records == ({"delta"} if merges == "never" else {"delta", "base"})
    if merges == "deltas only":
        assert most <= 4
    names = {p.name for p in d.iterdir()}
    live = {n for s in json.loads((d / "manifest.json").read_text())["segments"]
            for n in names if n.startswith(s["name"] + ".")}
    assert {n for n in names if n.startswith("s")} == live      # old segments removed


def _segmented(tmp_path):
    """An index of three segments with tombstones in the first two."""
    v = Vault(tmp_path / "vault", seed=3)
    for _ in range(30):
        v.put(v.name(), v.text())
    d = tmp_path / "idx"
    ingest.build_index(v.root, d, backend=_backend())
    for rel in v.notes()[:2]:
        v.put(rel, v.text())
        ingest.build_index(v.root, d, backend=_backend())
    (v.root / v.notes()[-1]).unlink()
    ingest.build_index(v.root, d, backend=_backend())
    idx = store_load.load_index(d, backend=_backend())
    assert len(idx.segments) == 3 and idx.manifest["dead"]
    return v, idx


@pytest.mark.parametrize("retokenize", [0.0, 1.0], ids=["df-from-postings", "df-retokenized"])
def test_bm25_across_segments_equals_one_index_of_the_live_chunks(tmp_path, monkeypatch,
                                                                  retokenize):
    monkeypatch.setattr(bm25, "RETOKENIZE_SHARE", retokenize)
    _, idx = _segmented(tmp_path)
    bm = bm25.load_bm25(idx)
    one = bm25.build_bm25(list(idx.chunks))
    assert bm["vocab"].keys() == one["vocab"].keys()
    assert (bm["n_docs"], bm["avgdl"]) == (one["n_docs"], one["avgdl"])
    for t, c in one["vocab"].items():
        assert bm["idf"][bm["vocab"][t]] == one["idf"][c]
    cold = bm25.build_bm25(list(idx.chunks))
    cold["asked"] = -10**9                    # never keeps the per-posting saturation
    rng = random.Random(1)
    for q in QUERIES + [" ".join(rng.choices(sorted(one["vocab"]), k=3)) for _ in range(40)]:
        (ia, sa), (ib, sb) = bm25.scores(bm, q), bm25.scores(one, q)
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(sa, sb)             # bit for bit: same operations
        np.testing.assert_array_equal(sb, bm25.scores(cold, q)[1])
    assert "sat" in one["parts"][0] and "sat" not in cold["parts"][0]


def test_bm25_across_segments_matches_the_bm25s_reference(tmp_path):
    bm25s = pytest.importorskip("bm25s")
    _, idx = _segmented(tmp_path)
    bm = bm25.load_bm25(idx)
    docs = [textkit.terms(bm25.chunk_text(c)) for c in idx.chunks]
    ref = bm25s.BM25(k1=bm25.K1, b=bm25.B, method="lucene")
    ref.index([d for d in docs], show_progress=False)
    for q in QUERIES:
        terms = [t for t in textkit.terms(q) if t in ref.vocab_dict]
        want = ref.get_scores(terms) if terms else np.zeros(len(docs))
        ids, got = bm25.scores(bm, q)
        full = np.zeros(len(docs))
        full[ids] = got
        np.testing.assert_allclose(full, want * (bm25.K1 + 1), rtol=1e-5, atol=1e-6)


def test_segment_bm25_is_saved_once_and_memory_mapped(tmp_path, monkeypatch):
    _, idx = _segmented(tmp_path)
    bm25.load_bm25(idx)
    for seg in idx.segments:
        assert (idx.dir / f"{seg.name}.{bm25.BM25_META}").exists()
    assert not list(idx.dir.glob(".*tmp*"))
    again = store_load.load_index(idx.dir, backend=_backend())
    monkeypatch.setattr(bm25, "_part", lambda texts: pytest.fail("tokenized again"))
    bm = bm25.load_bm25(again)
    docs = bm["parts"][0]["docs"]
    assert isinstance(docs.base, np.memmap) or isinstance(docs, np.memmap)   # mapped
    assert bm25.scores(bm, "day rate")[1].tolist() == \
        bm25.scores(bm25.load_bm25(idx), "day rate")[1].tolist()
    monkeypatch.undo()
    (idx.dir / f"{idx.segments[0].name}.{bm25.BM25_META}").write_text("{")   # damaged
    third = store_load.load_index(idx.dir, backend=_backend())
    assert bm25.load_bm25(third)["vocab"] == bm["vocab"]       # rebuilt, same terms


def test_the_ingest_command_saves_a_large_segments_postings_and_leaves_small_ones(
        tmp_path, monkeypatch, capsys):
    """A full build's postings are made by `python ingest.py` (else the first question
    waits for them); a one-note segment's are left to its first question."""
    v = Vault(tmp_path / "vault", seed=4)
    for _ in range(20):
        v.put(v.name(), v.text())
    d = tmp_path / "idx"
    monkeypatch.setattr(ingest, "POSTINGS_AT_INGEST", 10)
    assert ingest.main([str(v.root), "--index", str(d)]) == 0
    m = json.loads((d / "manifest.json").read_text())
    assert m["segments"][0]["rows"] >= 10
    assert (d / f"{m['segments'][0]['name']}.{bm25.BM25_META}").exists()
    v.put(v.notes()[0], v.text())
    assert ingest.main([str(v.root), "--index", str(d)]) == 0
    m = json.loads((d / "manifest.json").read_text())
    assert len(m["segments"]) == 2 and m["segments"][1]["rows"] < 10
    assert not (d / f"{m['segments'][1]['name']}.{bm25.BM25_META}").exists()
    monkeypatch.setattr(bm25, "_part", lambda texts: pytest.fail("tokenized again"))
    assert ingest.main([str(v.root), "--index", str(d)]) == 0      # nothing to do: no load


def test_one_note_changes_what_other_records_say(tmp_path):
    """The fast paths of an ingest (links kept, families and duplicates from reused
    records) still update the other notes' records: a note added next to a linking
    note takes over its link, a copy turns into a duplicate and back, a newer version
    moves the latest flag, a rename leaves the link unresolved; each equals a fresh full
    build."""
    v = tmp_path / "vault"
    d = tmp_path / "idx"
    write(v, "w/plan v1.md", "---\ndate: 2026-01-05\n---\n# Plan\nfirst plan rate 100\n")
    write(v, "w/notes.md", "# Notes\nSee [[target]] and [[plan v1]].\n")
    write(v, "x/target.md", "# Target\nthe far target\n")
    ingest.build_index(v, d, backend=_backend())

    def after(change) -> dict:
        change()
        ingest.build_index(v, d, backend=_backend())
        _same_as_full_build(v, d, tmp_path)
        return {f["path"]: f for f in store_load.load_index(d, backend=_backend()).files}
    f = after(lambda: write(v, "w/target.md", "# Target\nthe near target\n"))
    assert f["w/notes.md"]["links"] == ["w/target.md", "w/plan v1.md"]
    f = after(lambda: write(v, "w/plan v2.md", "---\ndate: 2026-03-01\n---\n# Plan\nrate 2\n"))
    assert [f["w/plan v1.md"]["is_latest"], f["w/plan v2.md"]["is_latest"]] == [False, True]
    f = after(lambda: write(v, "y/target.md", (v / "w/target.md").read_text()))
    assert f["y/target.md"]["duplicate_of"] == "w/target.md"
    f = after(lambda: (v / "w/target.md").unlink())
    assert f["y/target.md"]["duplicate_of"] is None
    assert f["w/notes.md"]["links"][0] == "x/target.md"       # the shorter path
    f = after(lambda: (v / "x/target.md").rename(v / "x/elsewhere.md"))
    assert f["w/notes.md"]["links"][0] == "y/target.md"


def test_tombstone_counts_are_kept_and_grow_with_each_ingest(tmp_path, monkeypatch):
    """s<N>.bm25-dead.json: a later process tokenizes only the rows tombstoned since;
    a damaged file or one from another tombstone set is not used. Every way, the
    scores are those of one index of the live chunks, bit for bit."""
    monkeypatch.setattr(ingest, "MERGE_SHARE", 10.0)
    monkeypatch.setattr(bm25, "RETOKENIZE_SHARE", 1.0)
    v = Vault(tmp_path / "vault", seed=5)
    for _ in range(20):
        v.put(v.name(), v.text())
    d = tmp_path / "idx"
    ingest.build_index(v.root, d, backend=_backend())
    real, asked = bm25._dead_texts, []
    monkeypatch.setattr(bm25, "_dead_texts",
                        lambda seg, rows: asked.append((seg.name, list(rows))) or real(seg, rows))

    def check() -> dict:
        idx = store_load.load_index(d, backend=_backend())
        bm, one = bm25.load_bm25(idx), bm25.build_bm25(list(idx.chunks))
        assert dict(bm["vocab"].items()).keys() == one["vocab"].keys()
        assert [bm["idf"][bm["vocab"][t]] for t in one["vocab"]] == one["idf"].tolist()
        for q in QUERIES:
            np.testing.assert_array_equal(bm25.scores(bm, q)[1],
                                          bm25.scores(one, q)[1])
        return json.loads((d / f"{idx.segments[0].name}.{bm25.BM25_DEAD}").read_text())

    first = v.notes()
    v.put(first[0], v.text())
    ingest.build_index(v.root, d, backend=_backend())
    kept = check()
    assert asked and kept["rows"] == asked[0][1]           # the first edit's old rows
    asked.clear()
    check()
    assert asked == []                                     # nothing tokenized again
    v.put(first[1], v.text())
    ingest.build_index(v.root, d, backend=_backend())
    grown = check()
    assert len(asked) == 1 and set(asked[0][1]) == set(grown["rows"]) - set(kept["rows"])
    assert set(kept["rows"]) < set(grown["rows"])
    dead = d / f"{store_load.load_index(d, backend=_backend()).segments[0].name}.{bm25.BM25_DEAD}"
    for bad in ("{", json.dumps({**grown, "segment_sha": "0" * 64}),
                json.dumps({**grown, "cols": [10**9] * len(grown["cols"])}),
                json.dumps({**grown, "rows": grown["rows"] + [10**6]})):
        dead.write_text(bad)
        asked.clear()
        assert check() == grown and set(asked[0][1]) == set(grown["rows"])   # all again


def _snapshots(d: Path, tmp_path: Path, monkeypatch, run) -> list:
    """Copies of d at every replace and unlink while run() commits: what a SIGKILL at
    that instant leaves behind."""
    import os
    snaps, real_replace, real_unlink = [], os.replace, Path.unlink

    def snap():
        s = tmp_path / f"snap{len(snaps):02}"
        shutil.copytree(d, s, ignore=shutil.ignore_patterns("lock"))
        snaps.append(s)

    def replace(src, dst):
        snap()
        return real_replace(src, dst)

    def unlink(self, missing_ok=False):
        if self.parent == d:
            snap()
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "unlink", unlink)
    run()
    monkeypatch.undo()
    return snaps


def _paths_texts(d):
    return [(c["path"], c["text"]) for c in store_load.load_index(d, backend=_backend()).chunks]


@pytest.mark.parametrize("merge", [False, True], ids=["delta", "merge"])
def test_a_kill_between_segment_and_manifest_or_in_a_merge_keeps_one_index(
        tmp_path, monkeypatch, merge):
    v = Vault(tmp_path / "vault", seed=5)
    for _ in range(8):
        v.put(v.name(), v.text())
    d = (tmp_path / "idx").resolve()
    ingest.build_index(v.root, d, backend=_backend())
    v.put(v.notes()[0], v.text())
    monkeypatch.setattr(ingest, "MERGE_SHARE", 10.0)
    ingest.build_index(v.root, d, backend=_backend())       # two segments now
    old = _paths_texts(d)
    v.put(v.notes()[1], v.text())
    if merge:
        monkeypatch.setattr(ingest, "MERGE_SHARE", 0.0)     # this ingest merges all
    snaps = _snapshots(d, tmp_path, monkeypatch,
                       lambda: ingest.build_index(v.root, d, backend=_backend()))
    new = _paths_texts(d)
    assert new != old and len(store_load.load_index(d, backend=_backend()).segments) == (
        1 if merge else 3)
    outcomes, orphaned = set(), False
    for s in snaps:
        got = _paths_texts(s)
        assert got in (old, new), s.name
        outcomes.add(got == new)
        named = store._referenced(json.loads((s / "manifest.json").read_text()))[0]
        orphaned |= got == old and any(p.name.endswith(".chunks.json") and p.name not in named
                                       for p in s.iterdir())   # a segment, no manifest yet
        ingest.build_index(v.root, s, backend=_backend())   # the next ingest completes
        assert _paths_texts(s) == new
        named = store._referenced(json.loads((s / "manifest.json").read_text()))[0]
        assert {p.name for p in s.iterdir()} - {"lock"} == named   # nothing left over
    assert outcomes == {False, True} and orphaned


def test_a_failed_manifest_write_leaves_the_previous_index_and_no_segment(tmp_path,
                                                                          monkeypatch):
    v = Vault(tmp_path / "vault", seed=6)
    for _ in range(5):
        v.put(v.name(), v.text())
    d = tmp_path / "idx"
    ingest.build_index(v.root, d, backend=_backend())
    old, names = _paths_texts(d), sorted(p.name for p in d.iterdir())
    v.put(v.notes()[0], v.text())
    real = store.write_atomic

    def failing(path, data):
        if Path(path).name == "manifest.json":
            raise OSError(28, "No space left on device (simulated)")
        return real(path, data)

    monkeypatch.setattr(store, "write_atomic", failing)
    with pytest.raises(OSError, match="simulated"):
        ingest.build_index(v.root, d, backend=_backend())
    monkeypatch.undo()
    assert _paths_texts(d) == old and sorted(p.name for p in d.iterdir()) == names


def test_an_old_format_index_is_rebuilt_with_one_line(tmp_path, capsys):
    vault, d = tmp_path / "vault", tmp_path / "idx"
    write(vault, "a.md", "# A\nalpha")
    d.mkdir()
    old = {"manifest.json": json.dumps({"format": 1, "embedder": "x", "dim": 3,
                                        "vault": str(vault.resolve())}),
           "chunks.json": '{"format": 1, "chunks": []}', "files.json": "{}",
           "vectors.npy": "", "idf.npy": "", "bm25.npz": "", "bm25_vocab.json": "{}"}
    for name, text in old.items():
        (d / name).write_text(text)
    assert ingest.main([str(vault), "--index", str(d)]) == 0
    out = capsys.readouterr().out.splitlines()
    line = f"index format 1 is older than this Verso's ({store.FORMAT}); rebuilt"
    assert out.count(line) == 1 and sum("older than" in x for x in out) == 1
    assert not {p.name for p in d.iterdir()} & (set(old) - {"manifest.json"})
    assert [c["path"] for c in store_load.load_index(d).chunks] == ["a.md"]


def test_a_format_2_index_is_rebuilt_with_one_line(tmp_path, capsys):
    """Format 2 (segments, one files list) is read by no later Verso: rebuilt, and the
    files it no longer uses are removed."""
    vault, d = tmp_path / "vault", tmp_path / "idx"
    write(vault, "a.md", "# A\nalpha")
    ingest.build_index(vault, d)
    m = json.loads((d / "manifest.json").read_text())
    (d / "manifest.json").write_text(json.dumps({**m, "format": 2}))
    before = {p.name for p in d.iterdir()}
    write(vault, "b.md", "# B\nbeta")
    capsys.readouterr()
    assert ingest.main([str(vault), "--index", str(d)]) == 0
    out = capsys.readouterr().out.splitlines()
    line = f"index format 2 is older than this Verso's ({store.FORMAT}); rebuilt"
    assert out.count(line) == 1 and sum("older than" in x for x in out) == 1
    assert not {p.name for p in d.iterdir()} & (before - {"manifest.json", "lock"})
    assert [c["path"] for c in store_load.load_index(d).chunks] == ["a.md", "b.md"]


def test_a_touched_note_keeps_its_rows_and_a_text_edit_is_seen(tmp_path):
    """Same text, new mtime: re-read, found equal, no new segment. The honest limit: an
    edit that keeps size and mtime is not seen until --rebuild."""
    vault, d = tmp_path / "vault", tmp_path / "idx"
    write(vault, "a.md", "# A\nThe boat is moored at pier 4.\n", mtime=T0)
    write(vault, "b.md", "# B\nThe shed roof costs 520 pounds.\n", mtime=T0)
    ingest.build_index(vault, d)
    segs = store_load.load_index(d).manifest["segments"]
    write(vault, "a.md", "# A\nThe boat is moored at pier 4.\n", mtime=T0 + 5)
    s = ingest.build_index(vault, d)
    assert s["files_read"] == 1 and store_load.load_index(d).manifest["segments"] == segs
    write(vault, "a.md", "# A\nThe boat is moored at pier 7.\n", mtime=T0 + 5)   # same stat
    ingest.build_index(vault, d)
    assert "pier 4" in store_load.load_index(d).chunks[0]["text"]
    ingest.build_index(vault, d, rebuild=True)
    assert "pier 7" in store_load.load_index(d).chunks[0]["text"]


def test_a_damaged_text_is_one_line_when_read(tmp_path):
    vault, d = tmp_path / "vault", tmp_path / "idx"
    write(vault, "a.md", "# A\nalpha beta")
    ingest.build_index(vault, d)
    p = index_file(d, "text")
    p.write_bytes(p.read_bytes().replace(b"alpha", b"omega"))   # same size
    idx = store_load.load_index(d)
    with pytest.raises(store.IndexProblem, match="does not match its rows.*--rebuild$"):
        idx.chunks[0]


@pytest.mark.parametrize("damage", ["edited", "other base", "bad position"])
def test_a_damaged_files_delta_is_detected(tmp_path, damage):
    """An edit writes the records that differ from the base as g<N>.delta.json; a delta
    edited, pointing at another base or at a position the base lacks is one line."""
    v = Vault(tmp_path / "vault", seed=5)
    for _ in range(12):
        v.put(v.name(), v.text())
    d = tmp_path / "idx"
    ingest.build_index(v.root, d, backend=_backend())
    v.put(v.notes()[0], v.text())
    ingest.build_index(v.root, d, backend=_backend())
    m = json.loads((d / "manifest.json").read_text())
    assert m["files_delta"] and (d / m["files_delta"]).exists()
    delta = json.loads((d / m["files_delta"]).read_text())
    assert sum(isinstance(e, dict) for e in delta["files"]) <= 2   # the edited record, and
    if damage == "edited":                                          # maybe a family flag
        delta["files"][0] = delta["files"][1]
    raw = json.dumps({**delta, "base": "g99.files.json"} if damage == "other base" else delta)
    if damage == "bad position":                  # a well-formed delta, digest and all
        delta["files"][0] = 10**6
        raw = json.dumps(delta)
        m["delta_sha"] = hashlib.sha256(raw.encode()).hexdigest()
        (d / "manifest.json").write_text(json.dumps(m))
    (d / m["files_delta"]).write_text(raw)
    with pytest.raises(store.IndexProblem, match="delta.json in .* does not match its "
                                                  "manifest.*--rebuild"):
        store_load.load_index(d, backend=_backend())


def test_a_cold_builtin_question_imports_only_what_it_needs(tmp_path):
    """python harness.py "q" with the builtin backend loads no HTTP client, no report
    or server module and not numpy.ma (np.unique imports it: ~40 ms of a cold start)."""
    import subprocess
    import sys
    v = Vault(tmp_path / "vault", seed=7)
    for _ in range(30):                     # many: one edit stays a delta (no full merge)
        v.put(v.name(), v.text())
    ingest.build_index(v.root, tmp_path / "i")
    v.put(v.notes()[0], v.text() + "\nSee [[" + v.notes()[1].rsplit("/", 1)[-1][:-3] + "]].\n")
    code = ("import sys, contextlib, io\nfrom verso import harness\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    harness.main(['--vault', {str(v.root)!r}, '--index', {str(tmp_path / 'i')!r},"
            " '--backend', 'builtin', 'what is the day rate?'])\n"
            "from verso import store_load, retrieve\n"            # rows across two segments, ids unsorted
            f"idx = store_load.load_index({str(tmp_path / 'i')!r})\n"
            "assert len(idx.segments) == 2\n"
            "retrieve.closest_chunk(idx, idx.vectors[0], [len(idx.chunks) - 1, 0])\n"
            "print(sorted(m for m in ('ollama', 'httpx', 'requests', 'verso.html_report', "
            "'verso.mcp_server', 'verso.evaluate', 'numpy.ma', 'concurrent.futures') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_lazy_tables_equal_the_tables_they_replace(tmp_path, monkeypatch):
    from verso import rerank
    v = Vault(tmp_path / "vault", seed=11)
    for _ in range(25):
        v.put(v.name(), v.text())
    d = tmp_path / "idx"
    ingest.build_index(v.root, d, backend=_backend())
    monkeypatch.setattr(ingest, "MERGE_SHARE", 10.0)
    for _ in range(12):                     # tombstones: some terms left with no live doc
        v.step()
    ingest.build_index(v.root, d, backend=_backend())
    idx = store_load.load_index(d, backend=_backend())
    assert len(idx.segments) > 1
    bm = bm25.load_bm25(idx)
    assert len(bm["vocab"]) < len(bm["idf"])   # columns of terms no live doc holds
    table = {t: float(bm["idf"][i]) for t, i in bm["vocab"].items()}
    lazy = rerank.corpus_idf(idx)
    assert dict(lazy) == table and len(lazy) == len(table) and bool(lazy)
    assert lazy.keys() == table.keys() and {"rate", "nope"} & lazy.keys() == {"rate"} & table.keys()
    assert max(lazy.values()) == max(table.values()) and "nope" not in lazy
    assert sorted(lazy.values()) == sorted(table.values())
    found = {}
    for f in idx.files:
        for t in f.get("links") or []:
            if t in idx.by_path and t != f["path"]:
                found.setdefault(t, set()).add(f["path"])
    back = retrieve._backlinks(idx)
    assert found and {t: back[t] for t in found} == {t: sorted(s) for t, s in found.items()}
    assert set(back) == set(found) and back.get("nowhere.md", []) == []
    seeds = sorted(found)[:3] + [idx.files[0]["path"], "nowhere.md"]
    assert retrieve._seed_backlinks(idx, seeds) == {s: back.get(s, []) for s in seeds}
    ids_of = retrieve.chunk_ids_by_path(idx)              # without the rest of _meta
    assert "retrieve_meta" not in idx.cache
    meta = retrieve._meta(idx)["ids"]
    assert ids_of.keys() == meta.keys() and all(
        np.array_equal(ids_of[p], meta[p]) for p in meta)
    chunks = list(idx.chunks)
    some = [0, len(chunks) - 1] + list(range(1, len(chunks), 7))
    for key in ("section_date", "heading", "entry_latest", "path", "text"):
        want = [chunks[i].get(key) for i in some]
        assert store_load.chunk_column(idx.chunks, key, np.array(some)) == want
        assert store_load.chunk_column(chunks, key, some) == want
        assert store_load.chunk_column(idx.chunks, key) == [c.get(key) for c in chunks]


def test_the_stamp_hashes_each_stat_as_its_text(tmp_path):
    stats = {"a.md": [12, 1_780_000_000_123_456_789], "b/c.md": None, "d.md": [0, 5]}
    old = hashlib.sha256(json.dumps([store.FORMAT, ingest.REUSE_RULES, timewords.RULES,
                                     str(tmp_path), "builtin", [], None]).encode())
    old.update("".join(f"\0{p}\0{s}" for p, s in stats.items()).encode("utf-8", "surrogatepass"))
    assert ingest._stamp(tmp_path, stats, [], None, None) == old.hexdigest()
    assert ingest._stamp(tmp_path, {**stats, "d.md": [0, 6]}, [], None, None) != old.hexdigest()
