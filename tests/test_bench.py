"""bench/: the synthetic vault generator and the benchmark machinery, at a tiny size.

Timings are not asserted (benchmarks are scripts that print figures); what is checked
is that every figure is produced, is the right kind of number, and that the generator
is deterministic, so `python bench/run.py` cannot rot unnoticed.
"""

import functools
import importlib.util
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import alternatives as alt  # noqa: E402
import report  # noqa: E402
import synth  # noqa: E402

_spec = importlib.util.spec_from_file_location("verso_bench_run", BENCH / "run.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _files(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_synth_is_seeded_and_shaped_like_a_vault(tmp_path):
    a = synth.make_vault(tmp_path / "a", 200, seed=6, questions=12)
    b = synth.make_vault(tmp_path / "b", 200, seed=6, questions=12)
    c = synth.make_vault(tmp_path / "c", 50, seed=5, questions=12)
    assert _files(a.root) == _files(b.root) and a.questions == b.questions
    assert _files(a.root) != _files(c.root)
    assert a.est_chunks >= 200 and all(n > 0 for n in a.counts.values())
    text = "\n".join(t.decode() for t in _files(a.root).values())
    for shape in ("\n## ", "[[", "|---|", "updated: ", "Updated: ", "£", "[folders.journal]"):
        assert shape in text
    assert any(p.startswith("journal/") for p in _files(a.root))
    assert any(p.endswith((" (1).md", " copy.md")) for p in _files(a.root))
    assert len(a.questions) == 12 and all(q["question"].endswith("?") for q in a.questions)
    assert all((a.root / q["path"]).is_file() for q in a.questions)
    with pytest.raises(ValueError):
        synth.make_vault(a.root, 10)                # never writes into a non-empty folder


def test_overlap_and_reference_agreement():
    import numpy as np
    assert alt.overlap([1, 2, 3], [3, 2, 9]) == pytest.approx(2 / 3)
    assert alt.overlap([], []) is None
    ref = np.array([0.0, 5.0, 3.0, 3.0, 1.0])
    assert alt.agreement([1, 2], ref, k=2) == 1.0
    assert alt.agreement([1, 3], ref, k=2) == 1.0    # a tie at the k-th score agrees
    assert alt.agreement([1, 4], ref, k=2) == 0.5
    assert alt.FTS5.or_query(['a"b', "c", "c"]) == '"a""b" OR "c"'


@pytest.mark.slow
def test_run_all_end_to_end_at_a_tiny_size(tmp_path, monkeypatch):
    small = functools.partial(alt.bandwidth, 2**20, 1)
    monkeypatch.setattr(alt, "bandwidth", lambda **_: small())
    run = bench.run_all([60], seed=1, n_queries=4, work=tmp_path / "work",
                        out_dir=tmp_path / "out", cold_runs=1, cli=False, log=lambda m: None)
    (size,) = run["sizes"]
    assert size["chunks"] > 30 and size["notes"] > 3
    ing = size["ingest"]
    assert ing["scratch"]["total_s"] > 0 and ing["scratch"]["rss_mb"] > 10
    assert ing["incremental"]["embedded"] <= 3 and ing["incremental"]["reused"] > 0
    assert ing["cold"]["runs"] == 1 and ing["disk_bytes"] > 0
    for key in ("embed", "dense", "matmul_floor", "bm25", "fusion", "version",
                "fusion_version", "retrieve", "search", "ask"):
        assert size["verso"][key]["n"] >= 1 and size["verso"][key]["p50"] > 0, key
    fts = size["alt"]["fts5"]
    if "skipped" not in fts:
        assert fts["insert_s"] > 0 and 0 <= fts["overlap"] <= 1
    ratios = run["ratios"][60]
    assert ratios["dense_vs_floor"] > 0 and ratios["dense_vs_bandwidth"] > 0
    assert {t["target"] for t in run["targets"]} == set(bench.TARGETS)
    saved = json.loads((tmp_path / "out" / "latest.json").read_text())
    text = report.render(saved)                         # the JSON renders the same table
    assert "dense / plain matmul" in text and "target (issues 6, 14)" in text


def test_size_argument():
    assert bench._size("10k") == 10_000 and bench._size("2500") == 2_500
    assert bench._size("0.5k") == 500


@pytest.mark.slow
def test_the_real_shape_puts_many_notes_on_one_date_and_an_import_on_one_mtime(tmp_path):
    a = synth.make_vault(tmp_path / "a", 2000, seed=2, questions=1, shape="real")
    b = synth.make_vault(tmp_path / "b", 2000, seed=2, questions=1, shape="real")
    assert _files(a.root) == _files(b.root)
    assert all(a.counts[k] > 0 for k in ("meeting", "monthly", "big_family", "imported"))
    files = _files(a.root)
    created = [t for p, t in files.items() if p.startswith("imported/") and b"created: " in t]
    assert len({t.split(b"created: ")[1][:10] for t in created}) == 1 and len(created) >= 5
    dated = [t.split(b"date: ")[1][:10] for p, t in files.items()
             if p.startswith("meetings/") and b"date: " in t]
    assert len(dated) >= a.counts["meeting"] and len(set(dated)) <= synth.REAL_DATES
    assert len(dated) > len(set(dated))              # dates shared by several meetings
    assert all(t.split(b"date: ")[1][8:10] == b"01" for p, t in files.items()
               if p.startswith("reports/"))
    with pytest.raises(ValueError, match="shape"):
        synth.make_vault(tmp_path / "c", 50, shape="square")


@pytest.mark.slow
def test_the_real_bench_times_both_trees_at_a_tiny_size(tmp_path):
    import real
    res = real.run(tmp_path / "work", 120, "HEAD", runs=1, log=lambda m: None)
    for side in res["sides"].values():
        for key in ("ingest_s", "edit_s", "harness_s", "harness_peak_mb", "numpy_s"):
            assert len(side[key]) == 1 and side[key][0] > 0
    table = real.render(res)
    assert "one edited note" in table and res["baseline"][:10] in table
    assert (tmp_path / "work" / "vault-this" / res["edited"][0]).read_text().count(
        "Edited for the benchmark") == 1


def test_the_families_shape_gives_almost_every_note_a_family_of_its_own(tmp_path):
    """bench/run.py --real --shape families (issue 37): ~5 chunks a note, seeded."""
    a = synth.make_vault(tmp_path / "a", 600, seed=3, questions=1, shape="families")
    b = synth.make_vault(tmp_path / "b", 600, seed=3, questions=1, shape="families")
    assert _files(a.root) == _files(b.root)
    assert a.counts["single"] >= 0.9 * a.notes and 80 <= a.notes <= 200
    from verso import ingest
    s = ingest.build_index(a.root, tmp_path / "idx")
    assert s["families"] >= 0.9 * s["indexed"] and s["chunks"] >= 4 * s["indexed"]


@pytest.mark.slow
def test_the_real_bench_takes_a_folder_as_its_baseline(tmp_path):
    import real
    root = BENCH.parent
    res = real.run(tmp_path / "work", 120, str(root), runs=1, log=lambda m: None,
                   shape="families")
    assert res["shape"] == "families" and res["baseline"] == f"folder {root.resolve()}"
    assert "families-shaped vault" in real.render(res)


def test_the_phases_script_times_an_edit_and_a_question(tmp_path, capsys):
    import phases
    v = synth.make_vault(tmp_path / "v", 60, seed=1, questions=1, shape="families")
    from verso import ingest
    ingest.build_index(v.root, tmp_path / "idx")
    note = sorted(p.relative_to(v.root).as_posix() for p in v.root.rglob("*.md"))[0]
    assert phases.main([str(v.root), "--index", str(tmp_path / "idx"), "--edit", note]) == 0
    out = capsys.readouterr().out
    assert "file_records.changes" in out and "vault_walk.scan" in out
    assert phases.main([str(v.root), "--index", str(tmp_path / "idx"), "--question",
                        "what is the rate"]) == 0
    assert "store_load.load_index" in capsys.readouterr().out


def test_a_benchmark_never_changes_the_users_default_index(tmp_path, monkeypatch):
    """bench/run.py runs `python ingest.py` as a user would, and ingest makes the index
    it builds the default of its home: the benchmark's children get a home of its own."""
    import subprocess
    user = tmp_path / "user-home"
    monkeypatch.setenv("VERSO_HOME", str(user))
    home = bench._own_home(tmp_path / "work")
    vault = tmp_path / "notes"
    vault.mkdir()
    (vault / "a.md").write_text("# A\nThe vendor rate is 1,200 a day.\n", encoding="utf-8")
    subprocess.run([sys.executable, str(BENCH.parent / "ingest.py"), str(vault), "--index",
                    str(tmp_path / "idx")], check=True, capture_output=True,
                   env=bench._user_env())
    assert (home / "default-index.json").is_file()
    assert not (user / "default-index.json").exists()
