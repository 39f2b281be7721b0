"""report: the benchmark's JSON -> the text table printed by bench/run.py.

In:  the run dict bench/run.py writes (also readable back from bench/out/*.json).
Out: one plain-text report: machine, per-size figures, ratios Verso / alternative,
     growth between sizes, the targets of issues 6 and 14.

    python bench/report.py bench/out/latest.json
"""

from __future__ import annotations

import json
import sys

LABEL = 34
GROWTH_SLACK = 1.1        # a growth factor up to 1.1x the chunks factor counts as linear
COL = 18


def _num(x, fmt="{:,.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _lat(st: dict | None) -> str:
    if not st or st.get("p50") is None:
        return "-"
    return f"{st['p50']:.2f} / {st['p95']:.2f}"


def _row(label: str, cells) -> str:
    return f"{label:<{LABEL}}" + "".join(f"{c:>{COL}}" for c in cells)


def _skip(a: dict, name: str):
    return a.get(name, {}).get("skipped")


def _header(run: dict) -> list[str]:
    m = run["machine"]
    blas = ", ".join(f"{b.get('internal_api')} {b.get('architecture')} "
                     f"{b.get('num_threads', '?')} threads" for b in m.get("blas", []))
    env = {k: v for k, v in m.get("env", {}).items() if v}
    bw = run["bandwidth"]
    steal = run.get("steal_share")
    steal = "" if steal is None else f"; CPU stolen by the hypervisor: {steal:.1%}"
    return [f"Verso scale benchmark: {run['command']}",
            f"machine: {m.get('cores')} cores, {m.get('cpu', '?')}, {m.get('mem_gib', '?')} GiB; "
            f"Python {m['python']}, numpy {m['numpy']} ({blas}), SQLite {m['sqlite']}",
            f"env: {env or 'no OPENBLAS_*/OMP_* set'}; seed {run['seed']}, "
            f"{run['queries']} questions per size; run took {run.get('seconds', 0):.0f} s{steal}",
            f"memory bandwidth (same run, {bw['bytes'] / 2**30:.0f} GiB array on "
            f"{bw.get('threads', 1)} threads): read (sum) "
            f"{bw['read_bytes_per_s'] / 1e9:.1f} GB/s, "
            f"copy {bw['copy_bytes_per_s'] / 1e9:.1f} GB/s (read + write); first touch of "
            f"new memory {bw.get('first_touch_bytes_per_s', 0) / 1e9:.2f} GB/s", ""]


def _sizes(run: dict) -> list[str]:
    S = run["sizes"]
    rows = [_row("size (target chunks)", [f"{s['size']:,}" for s in S])]
    add = lambda label, f: rows.append(_row(label, [f(s) for s in S]))  # noqa: E731
    add("chunks / notes", lambda s: f"{s['chunks']:,} / {s['notes']:,}")
    add("vault MB", lambda s: _num(s["vault_bytes"] / 2**20, "{:.1f}"))
    ing = lambda s: s["ingest"]  # noqa: E731
    add("ingest from scratch s", lambda s: _num(ing(s)["scratch"]["total_s"]))
    add("  of which BM25 arrays s", lambda s: _num(ing(s)["scratch"]["bm25_s"]))
    add("  chunks/s", lambda s: _num(s["chunks"] / ing(s)["scratch"]["total_s"], "{:,.0f}"))
    add("  peak RSS (child) MB", lambda s: _num(ing(s)["scratch"]["rss_mb"], "{:,.0f}"))
    add("incremental, 1 note changed s", lambda s: _num(ing(s)["incremental"]["total_s"]))
    add("  of which BM25 arrays s", lambda s: _num(ing(s)["incremental"]["bm25_s"]))
    pr = lambda s, k, f="{:,.2f}": _num(ing(s).get("process", {}).get(k), f)  # noqa: E731
    rows.append("whole processes, wall s (median of fresh runs)")
    for label, key in (("  python ingest.py, 1 note edited", "edit_wall_s"),
                       ("    1 note added", "add_wall_s"), ("    1 note deleted", "delete_wall_s"),
                       ("    1 note renamed", "rename_wall_s"),
                       ("  python harness.py \"q\", unchanged", "harness_wall_s"),
                       ("  python -c \"import numpy, json\"", "numpy_json_s"),
                       ("  vault scan (in process)", "scan_s")):
        add(label, lambda s, key=key: pr(s, key, "{:.3f}"))
    add("  harness peak RSS MB", lambda s: pr(s, "harness_rss_mb", "{:,.0f}"))
    add("  segments after the edits", lambda s: pr(s, "segments", "{:d}"))
    add("  FTS5 delete + insert 1 note (process)", lambda s: _num(
        s["alt"]["fts5"].get("replace_note_s"), "{:.3f}"))
    add("index on disk MB", lambda s: _num(ing(s)["disk_bytes"] / 2**20, "{:.1f}"))
    add("load cold: process wall s", lambda s: _num(ing(s)["cold"]["wall_s"]))
    add("  load_index + BM25 in it s", lambda s: _num(ing(s)["cold"]["load_s"]
                                                      + ing(s)["cold"]["bm25_s"]))
    add("load warm ms p50 / p95", lambda s: _lat(s["warm_load"]))
    rows.append("latency ms, p50 / p95")
    v = lambda s: s["verso"]  # noqa: E731
    for label, key in (("  query embedding (builtin)", "embed"),
                       ("  dense search (top 60)", "dense"),
                       ("    plain matmul floor", "matmul_floor"),
                       ("  BM25 (top 60)", "bm25"),
                       ("  fusion (RRF + links)", "fusion"),
                       ("  version filter (present)", "version"),
                       ("  fusion + version filter", "fusion_version"),
                       ("  retrieve stage", "retrieve"),
                       ("  builtin ask()", "ask")):
        add(label, lambda s, key=key: _lat(v(s)[key]))
    bw = lambda s: (s.get("bandwidth") or run["bandwidth"])["read_bytes_per_s"]  # noqa: E731
    add("    bandwidth floor (bytes/bw) ms", lambda s: _num(s["vector_bytes"] / bw(s) * 1000))
    add("    read bandwidth then GB/s", lambda s: _num(bw(s) / 1e9, "{:.1f}"))
    add("  ask() questions / abstained", lambda s: f"{v(s)['ask']['n']} / "
        f"{v(s)['ask_abstained']:.0%}")
    add("hybrid found@10 (synthetic qs)", lambda s: _num(s["found_at_10"], "{:.2f}"))
    rows.append("alternatives, same chunks and questions")
    a = lambda s: s["alt"]  # noqa: E731
    add("  FTS5 insert s", lambda s: _skip(a(s), "fts5") and "skipped"
        or _num(a(s)["fts5"]["insert_s"]))
    add("  FTS5 OR all words ms", lambda s: _lat(a(s)["fts5"].get("or_words")))
    add("  FTS5 OR our terms ms", lambda s: _lat(a(s)["fts5"].get("or_terms")))
    add("  FTS5 top-10 overlap w/ BM25", lambda s: _num(a(s)["fts5"].get("overlap"),
                                                         "{:.2f}"))
    for name in ("rank_bm25", "bm25s"):
        add(f"  {name} build s", lambda s, n=name: _skip(a(s), n) and "not installed"
            or _num(a(s)[n]["build_s"]))
        add(f"  {name} query ms", lambda s, n=name: _lat(a(s)[n].get("query")))
        add(f"  {name} top-10 overlap", lambda s, n=name: _num(a(s)[n].get("overlap"),
                                                                 "{:.3f}"))
        add(f"  {name} top 10 valid (ties ok)", lambda s, n=name: _num(
            a(s)[n].get("agreement"), "{:.3f}"))
    add("  our tokenization of the chunks s", lambda s: _num(a(s)["tokenize_s"]))
    notes = sorted({x for s in S for x in (_skip(a(s), "rank_bm25"), _skip(a(s), "bm25s"))
                    if x})
    return rows + [f"note: {n}" for n in notes] + [
        "note: rank_bm25 timed on its first 50 questions (it scores every chunk in Python)",
        ""]


RATIO_LABELS = (("dense_vs_floor", "dense / plain matmul"),
                ("dense_vs_bandwidth", "dense / bandwidth floor"),
                ("floor_vs_bandwidth", "plain matmul / bandwidth floor"),
                ("bm25_vs_fts5", "BM25 / FTS5 OR (our terms)"),
                ("bm25_vs_fts5_seed", "BM25 / FTS5 OR (all words)"),
                ("bm25_vs_rank_bm25", "BM25 / rank_bm25"),
                ("bm25_vs_bm25s", "BM25 / bm25s"),
                ("ingest_vs_fts5_insert", "ingest / FTS5 insert"),
                ("disk_vs_fts5", "index disk / FTS5 disk"))


def _ratios(run: dict) -> list[str]:
    sizes = [s["size"] for s in run["sizes"]]
    rat = {int(k): v for k, v in run["ratios"].items()}
    rows = [_row("Verso / alternative (p50)", [f"{n:,}" for n in sizes])]
    for key, label in RATIO_LABELS:
        rows.append(_row(f"  {label}", [_num(rat[n].get(key), "{:.2f}x") for n in sizes]))
    return rows + [""]


def _growth(run: dict) -> list[str]:
    if not run["growth"]:
        return []
    g = run["growth"]
    rows = [_row("growth between sizes", [f"{x['from']:,}->{x['to']:,}" for x in g]),
            _row("  chunks", [f"x{x['chunks_x']:.1f}" for x in g])]
    over = set()
    for key in g[0]:
        if key in ("from", "to", "chunks_x"):
            continue
        cells = []
        for x in g:
            worse = x[key] is not None and x[key] > GROWTH_SLACK * x["chunks_x"]
            cells.append(_num(x[key], "x{:.2f}") + (" *" if worse else "  "))
            over |= {key} if worse else set()
        rows.append(_row(f"  {key}", cells))
    note = (f"* grew faster than the chunks (more than {GROWTH_SLACK:g}x their factor): "
            f"{', '.join(sorted(over))}" if over else "every cost grew linearly or better")
    return rows + [note, ""]


def _targets(run: dict) -> list[str]:
    rows = [f"{'target (issues 6, 14)':<52}{'limit':>10}{'measured':>12}{'at':>14}  met"]
    for t in run["targets"]:
        met = {True: "yes", False: "MISSED", None: "-"}[t["met"]]
        if not t["measured_at_target_size"] and t["value"] is not None:
            met += " (not at target size)"
        at = f"{t['at']:,}" if isinstance(t["at"], int) else str(t["at"])
        rows.append(f"{t['what']:<52}{t['limit']:>10}{_num(t['value'], '{:.3f}'):>12}"
                    f"{at:>14}  {met}")
    return rows


def render(run: dict) -> str:
    lines = _header(run) + _sizes(run) + _ratios(run) + _growth(run) + _targets(run)
    if run.get("cli"):
        lines.append(f"CLI: {run['cli']['command']}: p50 {run['cli']['p50_s']:.3f} s "
                     f"over {run['cli']['runs']} runs")
    if run.get("json"):
        lines.append(f"JSON: {run['json']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python bench/report.py bench/out/latest.json", file=sys.stderr)
        return 2
    print(render(json.loads(open(argv[0], encoding="utf-8").read())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
