"""run: the scale benchmark, Verso side by side with the alternatives, one command.

In:  sizes in chunks (default 1k, 10k, 100k; --big adds 200k), a seed, a query count.
Out: a table on stdout and bench/out/bench-<time>.json (+ bench/out/latest.json).
Per size, on one seeded synthetic vault (bench/synth.py) and its questions:
  ingest from scratch (a fresh child process: chunks/s, peak RSS = its ru_maxrss),
  incremental ingest after one note changes (another child), index load cold (a fresh
  process: imports + load + BM25 arrays + first query) and warm (same process), query
  embedding, dense search, BM25, fusion + version filter, the whole retrieve stage
  (embed + search + version.apply), the whole builtin ask() (route to verify), index
  size on disk; and in the same run SQLite FTS5 (insert, OR query, top-10 overlap),
  rank_bm25 and bm25s (when installed: build, query, top-10 agreement with our BM25),
  the plain-matmul dense floor and the memory-bandwidth floor. Then ratios Verso /
  alternative, growth factors between sizes, and the targets of issues 6 and 14
  (whole-process walls: ingest after an edit, add, delete, rename; harness cold),
  met or missed.
Not: a timed test (tests/test_bench.py only runs the machinery at a tiny size).

    python bench/run.py [--sizes 1k,10k,100k] [--big] [--quick] [--queries 200]
                        [--seed 0] [--out bench/out] [--work DIR]
    python bench/run.py --real [--shape real|families] [--chunks 100k]
                        [--baseline REV|DIR] [--runs 5] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

import alternatives as alt  # noqa: E402
import synth  # noqa: E402

DEFAULT_SIZES = (1_000, 10_000, 100_000)
BIG_SIZE = 200_000
QUICK_SIZES = (1_000, 10_000)
DEFAULT_QUERIES = 200
QUICK_QUERIES = 50
ASK_QUERIES = 100            # ask() is slower: at most this many per size
RANK_BM25_QUERIES = 50       # rank_bm25 scores every document in Python: at most this many
COLD_RUNS = 3                # fresh processes for the cold load
WARM_RUNS = 5
WARMUP = 3                   # untimed queries before each timed loop
TOP = 10                     # top-k compared between engines
MODE = "present"             # time mode for the version filter
SAMPLE_QUESTION = "What is Maren's current day rate?"
CLI_RUNS = 5
TARGETS = {  # key: (description, limit, "<=" | "<" | ">=", size in chunks or None)
    "edit_wall_s": ("one changed note, python ingest.py (s wall)", 0.5, "<", 100_000),
    "edit_vs_fts5": ("  / FTS5 delete + insert of its rows (process)", 5.0, "<=", 100_000),
    "add_wall_s": ("one new note, python ingest.py (s wall)", 0.5, "<", 100_000),
    "delete_wall_s": ("one deleted note, python ingest.py (s wall)", 0.5, "<", 100_000),
    "rename_wall_s": ("one renamed note, python ingest.py (s wall)", 0.5, "<", 100_000),
    "harness_wall_s": ("python harness.py \"q\", nothing changed (s wall)", 0.6, "<",
                       100_000),
    "harness_vs_numpy": ("  / python -c \"import numpy, json\"", 3.0, "<", 100_000),
    "scan_s": ("vault scan, nothing changed (s)", 0.15, "<", 100_000),
    "harness_rss_mb": ("peak memory of python harness.py (MB)", 300.0, "<", 100_000),
    "peak_rss_mb": ("peak memory of ingest from scratch (MB)", 2048.0, "<", 100_000),
    "retrieve_p50_ms": ("retrieve stage p50 (ms)", 12.0, "<", 100_000),
    "bm25_vs_bm25s": ("BM25 p50 / bm25s p50", 1.0, "<=", 100_000),
    "dense_vs_floor": ("dense search / plain matmul floor", 1.2, "<=", 100_000),
    "bm25_ref_agreement": ("BM25 top 10 valid under bm25s (lucene) scores", 0.999, ">=",
                           100_000),
    "bm25_vs_fts5": ("BM25 p50 / FTS5 OR p50 (our terms)", 1.0, "<=", 100_000),
    "ask_p50_ms": ("builtin ask() p50 (ms)", 50.0, "<", 10_000),
    "cli_wall_s": ("python harness.py \"q\" on the sample vault (s wall)", 0.5, "<", None),
    "ingest_s": ("ingest from scratch incl. BM25 (s)", 60.0, "<", 100_000),
}
PROCESS_RUNS = 5             # fresh processes per wall-clock figure (median)


# ------------------------------------------------------------------------ helpers


def _size(text: str) -> int:
    text = text.strip().lower()
    mult = 1_000 if text.endswith("k") else 1
    return int(float(text.rstrip("k")) * mult)


def _stats(seconds: list[float]) -> dict:
    ms = np.asarray(seconds, dtype=np.float64) * 1000
    if ms.size == 0:
        return {"n": 0, "p50": None, "p95": None, "mean": None}
    return {"n": int(ms.size), "p50": float(np.percentile(ms, 50)),
            "p95": float(np.percentile(ms, 95)), "mean": float(ms.mean())}


def _timed(fn, items, warmup=WARMUP) -> tuple[dict, list]:
    """Latency stats of fn(item) over items (after a few untimed calls), and results."""
    for item in items[:warmup]:
        fn(item)
    out, times = [], []
    for item in items:
        t = time.perf_counter()
        out.append(fn(item))
        times.append(time.perf_counter() - t)
    return _stats(times), out


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def _child(args: list[str], env=None) -> tuple[dict, float]:
    """Run this script in a fresh process; (its JSON line, wall seconds)."""
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), *args],
                          capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"bench child {args[:2]} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def _rss_mb() -> float:
    """Peak resident memory of this process in MB: VmHWM (Linux; counts only since
    exec), else ru_maxrss, which on Linux also carries the parent's peak at fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KB


# ------------------------------------------------------------------ child processes


def child_ingest(vault: str, index: str, rebuild: bool) -> dict:
    """build_index (from scratch or incremental) then the BM25 arrays, in this process."""
    from verso import ingest
    from verso import store_load
    from verso import bm25
    t0 = time.perf_counter()
    s = ingest.build_index(vault, index, rebuild=rebuild, backend="builtin")
    t1 = time.perf_counter()
    idx = store_load.load_index(index)
    bm25.load_bm25(idx)
    t2 = time.perf_counter()
    return {"build_s": t1 - t0, "bm25_s": t2 - t1, "total_s": t2 - t0,
            "chunks": s["chunks"], "indexed": s["indexed"], "files": s["files_seen"],
            "embedded": s["embedded"], "reused": s["reused"], "rss_mb": _rss_mb()}


def child_load(index: str, question: str) -> dict:
    """A cold start: imports, load_index, BM25 arrays from disk, one question retrieved."""
    t0 = time.perf_counter()
    from verso import bm25
    from verso import store_load
    from verso import retrieve
    from verso import version
    t1 = time.perf_counter()
    idx = store_load.load_index(index)
    t2 = time.perf_counter()
    bm25.load_bm25(idx)
    t3 = time.perf_counter()
    qvec = idx.embedder.embed_query(question)
    version.apply(idx, retrieve.search(idx, question, qvec), MODE, qvec)
    t4 = time.perf_counter()
    return {"import_s": t1 - t0, "load_s": t2 - t1, "bm25_s": t3 - t2,
            "first_query_s": t4 - t3, "rss_mb": _rss_mb()}


# --------------------------------------------------------------------- per size


def _change_one_note(vault: Path, target: Path | None = None) -> str:
    """Append a line to one note (default: a mid-sized versioned one); its vault path."""
    notes = sorted(p for p in vault.rglob("*.md") if "journal" not in p.parts)
    target = target or notes[len(notes) // 2]
    with open(target, "a", encoding="utf-8") as f:
        f.write("\n\nEdited for the benchmark: one more line about the vendor rate.\n")
    return target.relative_to(vault).as_posix()


def _user_env() -> dict:
    """The environment of a user's shell: Python caches compiled modules (__pycache__).
    A sandbox may set PYTHONDONTWRITEBYTECODE, which makes every process compile
    ingest/models/... again (~0.1 s); the process figures are a user's."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _wall(cmd: list[str], runs: int = 1, before=None, **kw) -> float:
    """Median wall seconds of a command in a fresh process (before(i) runs untimed
    ahead of run i)."""
    walls = []
    for i in range(runs):
        if before:
            before(i)
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=True, env=_user_env(), **kw)
        walls.append(time.perf_counter() - t)
    return float(np.median(walls))


def _process_figures(vault: Path, index: Path, question: str) -> dict:
    """Whole-process walls, each the median of PROCESS_RUNS fresh processes: python
    ingest.py after one edited, added, deleted and renamed note (another note each
    run); python harness.py with nothing changed (and its peak memory, VmHWM); the
    vault scan; python -c "import numpy, json" for reference."""
    from verso import vault_walk
    ing = [sys.executable, str(ROOT / "ingest.py"), str(vault), "--index", str(index)]
    _wall(ing)                      # nothing changed: compiled modules cached, as a user's
    notes = sorted(p for p in vault.rglob("*.md") if "journal" not in p.parts)
    k = max(1, min(PROCESS_RUNS, len(notes) // 3))
    spread = [notes[j * len(notes) // (3 * k)] for j in range(3 * k)]   # distinct notes
    edited = []
    out = {"edit_wall_s": _wall(ing, k, lambda i: edited.append(
        _change_one_note(vault, spread[i])))}
    out["edited"] = edited[0]
    (vault / "work").mkdir(exist_ok=True)
    out["add_wall_s"] = _wall(ing, k, lambda i: (
        vault / "work" / f"a note added by the benchmark {i}.md").write_text(
        f"# Added {i}\nA new note about the vendor rate, 1,55{i} a day.\n", encoding="utf-8"))
    out["delete_wall_s"] = _wall(ing, k, lambda i: spread[k + i].unlink())
    out["rename_wall_s"] = _wall(ing, k, lambda i: spread[2 * k + i].rename(
        spread[2 * k + i].with_name("renamed by the benchmark " + spread[2 * k + i].name)))
    out["process_runs"] = k
    har = [sys.executable, str(ROOT / "harness.py"), "--vault", str(vault), "--index",
           str(index), "--backend", "builtin", question]
    _wall(har)                      # the new segments' BM25 once
    out["harness_wall_s"] = _wall(har, PROCESS_RUNS)
    out["numpy_json_s"] = _wall([sys.executable, "-c", "import numpy, json"], PROCESS_RUNS)
    peak = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child",
                           "harness", *har[2:]], capture_output=True, text=True, check=True)
    out["harness_rss_mb"] = json.loads(peak.stdout.strip().splitlines()[-1])["rss_mb"]
    cfg, _ = vault_walk.load_config(vault.resolve())
    scans = []
    for _ in range(PROCESS_RUNS):
        t = time.perf_counter()
        vault_walk.scan(vault.resolve(), cfg, {})
        scans.append(time.perf_counter() - t)
    out["scan_s"], out["segments"] = float(np.median(scans)), len(
        json.loads((index / "manifest.json").read_text())["segments"])
    return out


def child_harness(argv: list[str]) -> dict:
    """python harness.py ARGV in this process; its peak memory (VmHWM)."""
    import contextlib
    import io
    from verso import harness
    with contextlib.redirect_stdout(io.StringIO()):
        harness.main(argv)
    return {"rss_mb": _rss_mb()}


def _ingest_all(vault: Path, index: Path, question: str, cold_runs: int,
                processes: bool = True) -> dict:
    out = {}
    out["scratch"], _ = _child(["--child", "ingest", str(vault), str(index), "--rebuild"])
    out["disk_bytes"] = _dir_bytes(index)
    out["changed"] = _change_one_note(vault)
    out["incremental"], _ = _child(["--child", "ingest", str(vault), str(index)])
    if processes:
        out["process"] = _process_figures(vault, index, question)
    colds = [_child(["--child", "load", str(index), question]) for _ in range(cold_runs)]
    walls = [w for _, w in colds]
    out["cold"] = {"wall_s": float(np.median(walls)), "runs": len(walls),
                   **{k: float(np.median([c[k] for c, _ in colds])) for k in colds[0][0]}}
    return out


def _warm_load(index: Path) -> dict:
    from verso import store_load
    from verso import bm25
    times = []
    for _ in range(WARM_RUNS):
        t = time.perf_counter()
        idx = store_load.load_index(index)
        bm25.load_bm25(idx)
        times.append(time.perf_counter() - t)
    return _stats(times)


def _verso_queries(idx, questions: list[str], n_ask: int) -> tuple[dict, dict]:
    """Stage latencies over the questions; and the rankings for the comparisons."""
    from verso import harness
    from verso import backends
    from verso import retrieve
    from verso import version
    depth = max(3 * retrieve.DEFAULT_K, retrieve.FUSE_DEPTH_MIN)
    r = {}
    r["embed"], qvecs = _timed(idx.embedder.embed_query, questions)
    pairs = list(zip(questions, qvecs))
    r["dense"], dense = _timed(lambda qv: retrieve.dense_ranking(idx, qv, depth), qvecs)
    flat = np.ascontiguousarray(np.asarray(idx.vectors))   # the same rows in one array
    r["matmul_floor"], _ = _timed(lambda qv: alt.matmul_floor(flat, qv), qvecs)
    r["bm25"], bm25 = _timed(lambda q: retrieve.bm25_ranking(idx, q, depth), questions)
    lists = [{"dense": d, "bm25": b} for d, b in zip(dense, bm25)]
    items = list(zip(lists, qvecs))
    r["fusion"], cands = _timed(lambda it: retrieve._fuse(idx, it[0], it[1],
                                                            retrieve.DEFAULT_K), items)
    r["version"], _ = _timed(lambda it: version.apply(idx, it[0], MODE, it[1]),
                             list(zip(cands, qvecs)))
    r["fusion_version"], _ = _timed(lambda it: version.apply(
        idx, retrieve._fuse(idx, it[0], it[1], retrieve.DEFAULT_K), MODE, it[1]), items)

    def stage(q):
        qv = idx.embedder.embed_query(q)
        return version.apply(idx, retrieve.search(idx, q, qv), MODE, qv)
    r["retrieve"], staged = _timed(stage, questions)
    r["search"], _ = _timed(lambda p: retrieve.search(idx, p[0], p[1]), pairs)
    be = backends.load_backend("builtin")
    r["ask"], answers = _timed(lambda q: harness.ask(q, index=idx, backend=be),
                               questions[:n_ask])
    r["ask_abstained"] = sum(a.abstained for a in answers) / max(1, len(answers))
    ranked = {"bm25": [ids[:TOP].tolist() for ids, _ in bm25],
              "retrieve": [[c.path for c in cs] for cs in staged]}
    return r, ranked


def _alternatives(idx, questions: list[str], ours_top: list, work: Path,
                  edited: str | None = None) -> dict:
    """FTS5 (both query styles), rank_bm25 and bm25s on the same chunks and questions."""
    from verso import bm25
    from verso import textkit
    texts = [bm25.chunk_text(c) for c in idx.chunks]
    t = time.perf_counter()
    docs = [textkit.terms(x) for x in texts]
    out = {"tokenize_s": time.perf_counter() - t}
    words = [textkit.tokenize(q) for q in questions]
    qterms = [textkit.terms(q) for q in questions]
    if alt.fts5_available():
        fts = alt.FTS5(work / "fts5.sqlite")
        res = {"insert_s": fts.build(texts)}
        res["or_words"], _ = _timed(lambda w: fts.query(w, TOP), words)
        res["or_terms"], top = _timed(lambda w: fts.query(w, TOP), qterms)
        res["overlap"] = _mean_overlap(ours_top, top)
        res["disk_bytes"] = fts.disk_bytes()
        fts.close()
        if edited:                    # the note the ingest figures re-indexed
            rows = {i: t for i, (c, t) in enumerate(zip(idx.chunks, texts))
                    if c["path"] == edited}
            res["replace_note_s"] = float(np.median([fts.replace_process(rows)
                                                     for _ in range(PROCESS_RUNS)]))
        out["fts5"] = res
    else:
        out["fts5"] = {"skipped": "this sqlite3 has no FTS5"}
    bm = bm25.load_bm25(idx)
    k1b = (bm25.K1, bm25.B)
    for engine, module, n in ((alt.RankBM25(), "rank_bm25", RANK_BM25_QUERIES),
                              (alt.BM25S(), "bm25s", len(questions))):
        if not alt.installed(module):
            out[engine.name] = {"skipped": f"{module} not installed "
                                           "(pip install -e '.[bench]')"}
            continue
        res = {"build_s": engine.build(docs, *k1b)}
        known = [[w for w in q if w in bm["vocab"]] for q in qterms[:n]]
        res["query"], top = _timed(lambda q: engine.query(q, TOP), known)
        res["overlap"] = _mean_overlap(ours_top[:n], top)
        agree = [alt.agreement(o, engine.scores(q), TOP) for o, q in zip(ours_top, known)]
        res["agreement"] = float(np.mean([x for x in agree if x is not None]))
        out[engine.name] = res
    return out


def _mean_overlap(a: list, b: list) -> float | None:
    vals = [v for v in (alt.overlap(x, y, TOP) for x, y in zip(a, b)) if v is not None]
    return float(np.mean(vals)) if vals else None


def _found(ranked_paths: list, truth: list[str], k: int = TOP) -> float:
    return float(np.mean([t in paths[:k] for paths, t in zip(ranked_paths, truth)]))


def bench_size(n_chunks: int, work: Path, seed: int, n_queries: int,
               cold_runs: int = COLD_RUNS, log=print, processes: bool = True) -> dict:
    """Every figure for one size; the vault and index live under work/."""
    from verso import store_load
    from verso import bm25
    work.mkdir(parents=True, exist_ok=True)
    vault, index = work / "vault", work / "index"
    t = time.perf_counter()
    v = synth.make_vault(vault, n_chunks, seed=seed, questions=n_queries)
    res = {"size": n_chunks, "notes": v.notes, "vault_bytes": v.bytes,
           "synth_s": time.perf_counter() - t, "kinds": v.counts}
    questions = [q["question"] for q in v.questions]
    log(f"[{n_chunks}] vault: {v.notes} notes, {v.bytes / 2**20:.1f} MB; ingesting")
    res["ingest"] = _ingest_all(vault, index, questions[0], cold_runs, processes)
    res["chunks"] = res["ingest"]["scratch"]["chunks"]
    res["warm_load"] = _warm_load(index)
    idx = store_load.load_index(index)
    bm25.load_bm25(idx)
    res["bandwidth"] = alt.bandwidth(repeats=3)    # next to the dense timing it bounds
    log(f"[{n_chunks}] {res['chunks']} chunks; timing {len(questions)} questions")
    res["verso"], ranked = _verso_queries(idx, questions, min(n_queries, ASK_QUERIES))
    res["found_at_10"] = _found(ranked["retrieve"], [q["path"] for q in v.questions])
    log(f"[{n_chunks}] alternatives")
    res["alt"] = _alternatives(idx, questions, ranked["bm25"], work,
                               res["ingest"].get("process", {}).get("edited"))
    res["vector_bytes"] = int(idx.vectors.nbytes)
    res["segments"] = len(getattr(idx, "segments", []) or [1])
    del idx
    return res


# --------------------------------------------------------------------- run level


def machine() -> dict:
    info = {"python": platform.python_version(), "numpy": np.__version__,
            "sqlite": sqlite3.sqlite_version, "cores": os.cpu_count(),
            "platform": platform.platform(),
            "env": {k: os.environ.get(k) for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                                    "OPENBLAS_NUM_THREADS",
                                                    "OMP_NUM_THREADS")}}
    try:
        cpu = Path("/proc/cpuinfo").read_text()
        info["cpu"] = next(line.split(":", 1)[1].strip() for line in cpu.splitlines()
                           if line.startswith("model name"))
        mem = Path("/proc/meminfo").read_text().split("\n")[0].split()
        info["mem_gib"] = round(int(mem[1]) / 2**20, 1)
    except (OSError, StopIteration, IndexError, ValueError):
        pass
    try:
        from threadpoolctl import threadpool_info
        info["blas"] = [{k: d.get(k) for k in ("internal_api", "architecture",
                                               "num_threads", "version")}
                        for d in threadpool_info()]
    except ImportError:
        blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {})
        info["blas"] = [{"internal_api": blas.get("name"), "architecture":
                         "unknown (pip install threadpoolctl)", "version": blas.get("version")}]
    return info


def cpu_ticks() -> dict:
    """/proc/stat cpu totals: all ticks and those stolen by the hypervisor (Linux)."""
    try:
        vals = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return {}
    return {"total": sum(vals[:8]), "steal": vals[7] if len(vals) > 7 else 0}


def cli_wall(work: Path) -> dict:
    """`python harness.py "q"` on the sample vault with its index already built."""
    env = {**os.environ, "VERSO_HOME": str(work / "sample-index")}
    cmd = [sys.executable, str(ROOT / "harness.py"), SAMPLE_QUESTION, "--backend", "builtin"]
    subprocess.run(cmd, capture_output=True, env=env, check=True, cwd=work)
    walls = []
    for _ in range(CLI_RUNS):
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, env=env, check=True, cwd=work)
        walls.append(time.perf_counter() - t)
    return {"p50_s": float(np.median(walls)), "min_s": min(walls), "runs": len(walls),
            "command": f'python harness.py "{SAMPLE_QUESTION}" --backend builtin'}


def derive(run: dict) -> dict:
    """Ratios Verso / alternative per size, growth between sizes, targets."""
    ratios = {}
    for s in run["sizes"]:
        v, a = s["verso"], s["alt"]
        bw = s["bandwidth"]["read_bytes_per_s"]
        r = {"dense_vs_floor": v["dense"]["p50"] / v["matmul_floor"]["p50"],
             "dense_vs_bandwidth": v["dense"]["p50"] / (s["vector_bytes"] / bw * 1000),
             "floor_vs_bandwidth": v["matmul_floor"]["p50"] / (s["vector_bytes"] / bw * 1000)}
        if "or_terms" in a["fts5"]:
            r["bm25_vs_fts5"] = v["bm25"]["p50"] / a["fts5"]["or_terms"]["p50"]
            r["bm25_vs_fts5_seed"] = v["bm25"]["p50"] / a["fts5"]["or_words"]["p50"]
            r["ingest_vs_fts5_insert"] = (s["ingest"]["scratch"]["total_s"]
                                          / a["fts5"]["insert_s"])
            r["disk_vs_fts5"] = s["ingest"]["disk_bytes"] / a["fts5"]["disk_bytes"]
        for name in ("rank_bm25", "bm25s"):
            if "query" in a[name]:
                r[f"bm25_vs_{name}"] = v["bm25"]["p50"] / a[name]["query"]["p50"]
        ratios[s["size"]] = r
    growth = []
    for lo, hi in zip(run["sizes"], run["sizes"][1:]):
        g = {"from": lo["size"], "to": hi["size"], "chunks_x": hi["chunks"] / lo["chunks"]}
        for key, get in GROWTH.items():
            a, b = get(lo), get(hi)
            g[key] = b / a if a and b else None
        growth.append(g)
    return {"ratios": ratios, "growth": growth, "targets": _targets(run, ratios)}


GROWTH = {
    "ingest_s": lambda s: s["ingest"]["scratch"]["total_s"],
    "peak_rss_mb": lambda s: s["ingest"]["scratch"]["rss_mb"],
    "incremental_s": lambda s: s["ingest"]["incremental"]["total_s"],
    "load_cold_s": lambda s: s["ingest"]["cold"]["wall_s"],
    "load_warm_ms": lambda s: s["warm_load"]["p50"],
    "disk_bytes": lambda s: s["ingest"]["disk_bytes"],
    "embed_ms": lambda s: s["verso"]["embed"]["p50"],
    "dense_ms": lambda s: s["verso"]["dense"]["p50"],
    "matmul_floor_ms": lambda s: s["verso"]["matmul_floor"]["p50"],
    "bm25_ms": lambda s: s["verso"]["bm25"]["p50"],
    "fusion_version_ms": lambda s: s["verso"]["fusion_version"]["p50"],
    "retrieve_ms": lambda s: s["verso"]["retrieve"]["p50"],
    "ask_ms": lambda s: s["verso"]["ask"]["p50"],
}


def _proc(s: dict, key: str):
    return s["ingest"].get("process", {}).get(key)


def _targets(run: dict, ratios: dict) -> list[dict]:
    by = {s["size"]: s for s in run["sizes"]}
    got = {
        "dense_vs_floor": lambda s: ratios[s["size"]]["dense_vs_floor"],
        "retrieve_p50_ms": lambda s: s["verso"]["retrieve"]["p50"],
        "bm25_vs_fts5": lambda s: ratios[s["size"]].get("bm25_vs_fts5"),
        "bm25_vs_fts5_seed": lambda s: ratios[s["size"]].get("bm25_vs_fts5_seed"),
        "bm25_ref_agreement": lambda s: s["alt"]["bm25s"].get("agreement"),
        "ask_p50_ms": lambda s: s["verso"]["ask"]["p50"],
        "ingest_s": lambda s: s["ingest"]["scratch"]["total_s"],
        "peak_rss_mb": lambda s: s["ingest"]["scratch"]["rss_mb"],
        "bm25_vs_bm25s": lambda s: ratios[s["size"]].get("bm25_vs_bm25s"),
        "edit_vs_fts5": lambda s: (_proc(s, "edit_wall_s") / s["alt"]["fts5"]["replace_note_s"]
                                   if s["alt"]["fts5"].get("replace_note_s") else None),
        "harness_vs_numpy": lambda s: (_proc(s, "harness_wall_s") / _proc(s, "numpy_json_s")
                                       if _proc(s, "numpy_json_s") else None),
        **{k: (lambda s, k=k: _proc(s, k)) for k in (
            "edit_wall_s", "add_wall_s", "delete_wall_s", "rename_wall_s", "harness_wall_s",
            "scan_s", "harness_rss_mb")},
    }
    out = []
    for key, (desc, limit, op, size) in TARGETS.items():
        if key == "cli_wall_s":
            value, at = run.get("cli", {}).get("p50_s"), "sample vault"
        else:
            at = size if size in by else (max(by) if by else None)
            value = got[key](by[at]) if at is not None else None
        ok = None if value is None else {"<=": value <= limit, "<": value < limit,
                                         ">=": value >= limit}[op]
        out.append({"target": key, "what": desc, "limit": f"{op} {limit:g}", "at": at,
                    "value": value, "met": ok,
                    "measured_at_target_size": at == size or size is None})
    return out


def run_all(sizes, seed: int, n_queries: int, work: Path, out_dir: Path,
            cold_runs: int = COLD_RUNS, cli: bool = True, log=print) -> dict:
    started = time.perf_counter()
    run = {"command": " ".join(["python", "bench/run.py", *sys.argv[1:]]),
           "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "seed": seed,
           "queries": n_queries, "machine": machine()}
    ticks = cpu_ticks()
    log("measuring memory bandwidth")
    run["bandwidth"] = alt.bandwidth()
    run["sizes"] = [bench_size(n, work / f"size-{n}", seed, n_queries, cold_runs, log,
                               processes=cli) for n in sizes]
    if cli:
        log("timing the CLI on the sample vault")
        run["cli"] = cli_wall(work)
    run.update(derive(run))
    run["seconds"] = time.perf_counter() - started
    end = cpu_ticks()
    if ticks and end and end["total"] > ticks["total"]:
        run["steal_share"] = (end["steal"] - ticks["steal"]) / (end["total"] - ticks["total"])
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in (f"bench-{stamp}.json", "latest.json"):
        (out_dir / name).write_text(json.dumps(run, indent=1, default=float))
    run["json"] = str(out_dir / f"bench-{stamp}.json")
    return run


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        kind, rest = argv[1], argv[2:]
        if kind == "ingest":
            res = child_ingest(rest[0], rest[1], rebuild="--rebuild" in rest)
        elif kind == "harness":
            res = child_harness(rest)
        else:
            res = child_load(rest[0], rest[1])
        print(json.dumps(res))
        return 0
    p = argparse.ArgumentParser(prog="bench/run.py", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default=None, help="chunk counts, e.g. 1k,10k,100k")
    p.add_argument("--big", action="store_true", help=f"add {BIG_SIZE:,} chunks")
    p.add_argument("--quick", action="store_true",
                   help=f"sizes {','.join(map(str, QUICK_SIZES))}, {QUICK_QUERIES} questions")
    p.add_argument("--queries", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(HERE / "out"), help="JSON output folder")
    p.add_argument("--work", default=None, help="folder for vaults and indexes "
                   "(default: a temp dir, removed afterwards)")
    p.add_argument("--real", action="store_true", help="the real-shaped vault beside a "
                   "baseline commit (bench/real.py): edit, cold question, full ingest")
    p.add_argument("--chunks", default="100k", help="--real: the vault's size in chunks")
    p.add_argument("--baseline", default="HEAD~1", help="--real: the revision to compare, "
                   "or a folder holding a Verso tree (used as it is)")
    p.add_argument("--runs", type=int, default=5, help="--real: fresh processes per figure")
    p.add_argument("--shape", choices=("real", "families"), default="real",
                   help="--real: the vault's shape: real (bench/synth.py --shape real) or "
                   "families (one family per note, ~5 chunks each: 20k notes at 100k)")
    a = p.parse_args(argv)
    if a.real:
        return _real(a, p)
    try:
        sizes = ([_size(x) for x in a.sizes.split(",")] if a.sizes
                 else list(QUICK_SIZES if a.quick else DEFAULT_SIZES))
    except ValueError:
        p.error(f"--sizes {a.sizes!r}: give chunk counts like 1k,10k,100k")
    if any(n < 20 for n in sizes):
        p.error("--sizes: each size needs at least 20 chunks")
    if a.big and BIG_SIZE not in sizes:
        sizes.append(BIG_SIZE)
    n_queries = a.queries or (QUICK_QUERIES if a.quick else DEFAULT_QUERIES)
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="verso-bench-"))
    if a.work and work.exists() and any(work.iterdir()):
        print(f"bench: --work {work} is not empty: pass a new folder", file=sys.stderr)
        return 2
    _own_home(work)
    try:
        import report
        run = run_all(sorted(sizes), a.seed, n_queries, work, Path(a.out),
                      log=lambda m: print(m, file=sys.stderr, flush=True))
        print(report.render(run))
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _own_home(work: Path) -> Path:
    """Give the benchmark (this process and every child) a Verso home in its work
    folder: its `python ingest.py` makes the index it builds the default of the home it
    runs in, and a user's own default index and calibration must stay theirs."""
    home = work / "verso-home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["VERSO_HOME"] = str(home)
    return home


def _real(a, p) -> int:
    import real
    try:
        chunks = _size(a.chunks)
    except ValueError:
        p.error(f"--chunks {a.chunks!r}: give a chunk count like 100k")
    work = Path(a.work) if a.work else Path(tempfile.mkdtemp(prefix="verso-real-"))
    if a.work and work.exists() and any(work.iterdir()):
        print(f"bench: --work {work} is not empty: pass a new folder", file=sys.stderr)
        return 2
    _own_home(work)
    try:
        return real.main(work, chunks, a.baseline, max(1, a.runs), Path(a.out),
                         log=lambda m: print(m, file=sys.stderr, flush=True),
                         shape=a.shape)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"bench: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
