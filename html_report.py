"""html_report: one question's trace, and an evaluation run, as self-contained HTML pages.

In:  an Answer as a dict (harness.Answer.to_dict()), optionally the gold files of its
     question; an evaluation result with its records and questions (evaluate.py).
Out: HTML strings: trace_page / trace_fragment (every stage of one question),
     index_page (variants side by side, each question linked to its trace pages).
     save_trace and TracePages write them atomically (store.write_atomic).
     A page holds the notes' text, private folders' too, under PRIVATE_BANNER (it is
     the asker's own); redact(a) first makes the copy to share (`--redact`).
Not: numbers of its own: every score, count and rate comes from the trace or from
     evaluate's summary, which the text reports (harness.render, scorecard.render) read
     too. It imports neither harness nor evaluate: it renders plain dicts. No JavaScript, no network fetch: inline CSS and SVG; every note text escaped.

    python harness.py "What is Maren's current day rate?" --html trace.html
    python evaluate.py --vault sample-vault --questions questions/dev.jsonl --html runs/html
"""

from __future__ import annotations

import datetime as dt
import hashlib
import html
import re
from pathlib import Path
from urllib.parse import quote

from verso import cost_ledger
from verso import generate
from verso import rerank
from verso import scorecard
from verso import store
from verso import verify

VERDICT_COLOURS = {"SHIP": "#1e7b34", "ESCALATE": "#b35c00", "ABSTAIN": "#5a6270"}
VARIANT_COLOURS = ("#3b6fb6", "#d08a2c", "#4c9a5a", "#b0483e", "#7d5ba6", "#5a8f97")
SECTIONS = ("Answer", "Route", "Retrieve", "Version", "Rerank", "Generate", "Verify",
            "Cost")          # the trace page's sections, in order (h2 ids: lowercase)
BAR_W = 160                   # px: relevance bars in the rerank table
CSS = """
.verso{font:14px/1.45 system-ui,sans-serif;color:#1d2330;max-width:1100px;margin:0 auto;
 padding:12px 18px}
.verso h1{font-size:20px;margin:4px 0 10px}.verso h2{font-size:16px;margin:22px 0 6px;
 border-bottom:1px solid #d8dce3;padding-bottom:3px}
.verso table{border-collapse:collapse;margin:4px 0 8px;font-size:13px}
.verso th,.verso td{border:1px solid #d8dce3;padding:2px 6px;text-align:left;
 vertical-align:top}
.verso th{background:#eef1f5}.verso td.n{text-align:right;font-variant-numeric:tabular-nums;
 white-space:nowrap}
.verso .banner{color:#fff;padding:8px 12px;border-radius:4px;font-weight:600}
.verso .answer{font-size:15px;background:#f6f8fb;padding:8px 12px;border-left:4px solid
 #3b6fb6;white-space:pre-wrap}
.verso .gold td:first-child{box-shadow:inset 4px 0 #e0b000}.verso tr.gold{background:#fff8d6}
.verso tr.out{color:#7a808c}.verso tr.fail{background:#fde8e6}
.verso .tag{font-size:11px;padding:0 4px;border-radius:3px;background:#e4e8ee}
.verso .tag.gold{background:#f3d35b}.verso .tag.kept{background:#cfe9d5}
.verso .tag.bad{background:#f5c6c1}
.verso .note{white-space:pre-wrap;background:#fafbfc;border:1px solid #e3e6eb;max-height:7.5em;
 overflow:auto;
 padding:6px 8px;margin:2px 0 10px;font-size:13px}
.verso pre{white-space:pre-wrap;font-size:12px;background:#fafbfc;padding:6px;margin:2px 0}
.verso .muted{color:#6b7280}.verso a{color:#2a5db0}.verso td a{white-space:nowrap}
.verso .wide{overflow-x:auto}.verso .wide table{font-size:12px}
.verso .wide td,.verso .wide th{padding:2px 4px}
"""


def _e(x) -> str:
    """Escaped text; None as an en dash."""
    return "\u2013" if x is None else html.escape(str(x))


def _f(x, fmt: str = ".3f") -> str:
    return "\u2013" if x is None else format(x, fmt)


def _table(header, rows, classes=None) -> str:
    """header: plain strings; rows: lists of HTML cells (numbers right-aligned)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = (classes or [""] * len(rows))[i]
        cells = "".join(f'<td class="n">{c}</td>' if re.fullmatch(r"[-\d.,/%() \u2013]+", c)
                        else f"<td>{c}</td>" for c in row)
        body.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return f"<table><tr>{head}</tr>{''.join(body)}</table>"


def _h2(title: str, anchor: str | None = None) -> str:
    return f'<h2 id="{anchor or title.lower()}">{_e(title)}</h2>'


def _note(c: dict, gold) -> str:
    """path / heading of a candidate, with a gold mark."""
    head = f' <span class="muted">/ {_e(c["heading"])}</span>' if c.get("heading") else ""
    mark = ' <span class="tag gold">gold</span>' if c["path"] in gold else ""
    return f"{_e(c['path'])}{head}{mark}"


def _row_classes(cands, gold, out=frozenset()) -> list[str]:
    return [" ".join(x for x in ("gold" if c["path"] in gold else "",
                                 "out" if c["id"] in out or c.get("dropped") else "") if x)
            for c in cands]


# ------------------------------------------------------------------ trace sections

def _cited(text: str, ids) -> str:
    """Escaped answer text with each [cN] a link to passage cN (when it exists)."""
    parts = generate.CITATION_RE.split(text or "")
    out = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(_e(part))
            continue
        refs = [r.strip().lower() for r in re.split(r"[,;]", part)]
        out.append("[" + ", ".join(f'<a href="#{r}">{r}</a>' if r in ids else
                                   f'<span class="tag bad">{_e(r)}?</span>'
                                   for r in refs) + "]")
    return "".join(out)


def _banner(a: dict) -> str:
    failing = [s for s in a["checks"].get("sentences", []) if not s.get("ok", True)]
    if a["verdict"] == "ABSTAIN":
        why = a.get("abstain_reason") or "abstained"
    elif failing:
        why = (f"{len(failing)} of {len(a['checks']['sentences'])} sentences failed: "
               f"{'; '.join(failing[0].get('reasons', []))}")
    else:
        cal = (a["checks"].get("calibration") or {})
        why = ("every sentence passed the code checks and the judge" if a["verdict"] == "SHIP"
               else f"the checks passed, but {cal.get('why') or 'it is not calibrated'}")
    if a.get("confidence") is not None:
        why += f" \u00b7 confidence {a['confidence']:.2f}"
    by = ((a["checks"].get("calibration") or {}).get("by") or {})
    if by:
        why += (f" \u00b7 judged by the calibration {by['key']} ({by['source']})"
                if by.get("source") else f" \u00b7 no calibration for {by['key']}")
    colour = VERDICT_COLOURS.get(a["verdict"], "#5a6270")
    return (f'<div class="banner" style="background:{colour}">{_e(a["verdict"])}'
            f' \u2014 {_e(why)}</div>')


def _answer(a: dict, gold) -> str:
    ids = {f"c{i}" for i in range(1, len(a["sources"]) + 1)}
    shown = a.get("shown") or a["answer"]
    out = [_banner(a), f'<p class="answer">{_cited(shown, ids)}</p>', _look_at(a)]
    out.append(_h2("Kept passages", "passages") if a["sources"] else "")
    for i, s in enumerate(a["sources"], 1):
        tag = ("aside: " + (s.get("why") or "") if s.get("set_aside") else
               "latest" if s["is_latest"] else "older")
        out.append(f'<div id="c{i}"><b>[c{i}]</b> {_note(s, gold)} \u00b7 {_e(s["date"])}'
                   f' \u00b7 <span class="tag">{_e(tag)}</span> \u00b7 score {_f(s["score"])}'
                   f'<div class="note">{_e(s.get("text", ""))}</div></div>')
    return "".join(out)


def _look_at(a: dict) -> str:
    """Where to look when unsure: each note with the line to check."""
    rows = [[_e(x["id"]), _e(x["path"]), _e(x["date"]), _e(x["line"])]
            for x in a.get("look_at") or []]
    return ("<h3>Where to look</h3>" + _table(["", "note", "date", "line"], rows)
            if rows else "")


def _route(a: dict) -> str:
    r = a["route"]
    rows = [["intent", _e(r.get("intent")), _f(r.get("confidence"), ".2f"), ""],
            ["time mode (router)", _e(r.get("time_mode")),
             _f(r.get("time_confidence"), ".2f"), _e(r.get("why"))],
            ["time mode used", _e(a["time_mode"]), "", "" if a["time_mode"] == r.get(
                "time_mode") else "--mode, or present with no versions among what answers"]]
    if a.get("search_words"):
        rows.append(["also searched", _e(" | ".join(a["search_words"])), "",
                     "the writer's model, in other words (--no-search-words: none)"])
    return _h2("Route") + _table(["decision", "value", "confidence", "why"], rows)


VIA = {"version": "missing version pulled in", "period": "a note of the period asked",
       "mention": "a latest or earliest mention"}   # Candidate.added_by, as the trace says it


def _via(c: dict) -> str:
    if c.get("via"):
        return f"link from {_e(c['via'])}"
    return VIA.get(c.get("added_by"), "search")


def _retrieve(a: dict, gold) -> str:
    cands = a["candidates"].get("retrieve", [])
    rows = [[str(i), _note(c, gold), _f(c["dense_rank"], "d"), _f(c["dense_score"]),
             _f(c["bm25_rank"], "d"), _f(c["bm25_score"]), _f(c["fused"], ".4f"),
             _via(c)] for i, c in enumerate(cands, 1)]
    if not cands:
        return _h2("Retrieve") + "<p>nothing retrieved</p>"
    return _h2("Retrieve") + _table(["#", "note", "dense rank", "dense", "bm25 rank", "bm25",
                                     "fused", "via"], rows, _row_classes(cands, gold))


def _status_text(c: dict, kept) -> str:
    if c.get("dropped"):
        return f"set aside: {c['dropped']}"
    return "kept" if c["id"] in kept else "not kept"


def _status(c: dict, kept) -> str:
    text = _status_text(c, kept)
    return '<span class="tag kept">kept</span>' if text == "kept" else _e(text)


def _version(a: dict, gold) -> str:
    cands = a["candidates"].get("version")
    if cands is None:
        return _h2("Version") + "<p>version filter off</p>"
    kept = {s["id"] for s in a["sources"]}
    rows = [[_note(c, gold), _e(c["date"]), "latest" if c["is_latest"] else "older",
             _via(c), _e(c.get("superseded_by")), _status(c, kept)] for c in cands]
    return (_h2("Version") + _timeline(cands, kept) + _table(
        ["note", "date", "version", "pulled in by", "superseded by", "status"], rows,
        _row_classes(cands, gold)))


def _day(date: str):
    try:
        return dt.date.fromisoformat(date).toordinal()
    except (TypeError, ValueError):
        return None


def _timeline(cands, kept) -> str:
    """Inline SVG: one line per family (or log) with two or more candidates, a dot per
    candidate at its date (undated at the right end); kept versions filled green."""
    groups: dict = {}
    for c in cands:
        groups.setdefault(c.get("family") or c["path"], []).append(c)
    groups = {k: v for k, v in groups.items() if len(v) > 1}
    days = [d for v in groups.values() for c in v if (d := _day(c["date"])) is not None]
    if not groups or not days:
        return ""
    lo, hi, x0, x1 = min(days), max(days), 260, 900
    def x(c):
        d = _day(c["date"])
        return x1 + 40 if d is None else x0 + (x1 - x0) * ((d - lo) / ((hi - lo) or 1))
    h, out = 34 * len(groups) + 34, []
    for i, (name, cs) in enumerate(groups.items()):
        y = 20 + 34 * i
        out.append(f'<text x="4" y="{y + 4}" font-size="12">{_e(name[:38])}</text>'
                   f'<line x1="{x0}" y1="{y}" x2="{x1 + 40}" y2="{y}" stroke="#c5cad3"/>')
        for j, c in enumerate(sorted(cs, key=lambda c: (_day(c["date"]) is None, c["date"]))):
            fill = "#2e9d4c" if c["id"] in kept else "#fff"
            stroke = "#9aa1ad" if c.get("dropped") else "#2a5db0"
            out.append(f'<circle cx="{x(c):.1f}" cy="{y}" r="6" fill="{fill}" '
                       f'stroke="{stroke}" stroke-width="2"><title>{_e(c["path"])} '
                       f'{_e(c["date"])}: {_e(_status_text(c, kept))}</title></circle>'
                       f'<text x="{x(c):.1f}" y="{y + (-10 if j % 2 else 19)}" '
                       f'font-size="10" text-anchor="middle">{_e(c["date"])}</text>')
    legend = (f'<text x="{x0}" y="{h - 4}" font-size="11" fill="#555">filled: kept \u00b7 '
              f'hollow: not kept \u00b7 grey ring: set aside \u00b7 right end: undated</text>')
    return (f'<svg width="980" height="{h}" viewBox="0 0 980 {h}" role="img" '
            f'aria-label="version timeline">{legend}{"".join(out)}</svg>')


def _bar(value, threshold) -> str:
    if value is None:
        return "\u2013"
    w, t = BAR_W * max(0.0, min(1.0, value)), BAR_W * threshold
    colour = "#2e9d4c" if value >= threshold else "#c9ced6"
    return (f'<svg width="{BAR_W + 2}" height="12"><rect width="{w:.1f}" height="12" '
            f'fill="{colour}"/><line x1="{t:.1f}" y1="0" x2="{t:.1f}" y2="12" '
            f'stroke="#b0483e" stroke-width="2" stroke-dasharray="2,1"/></svg>')


def _rerank(a: dict, gold) -> str:
    cands = a["candidates"].get("rerank")
    if cands is None:
        return _h2("Rerank") + "<p>rerank off: fused order, no gate</p>"
    kept, thr = {s["id"] for s in a["sources"]}, rerank.RELEVANCE_THRESHOLD
    dropped = {c["id"]: c for c in a["candidates"].get("version", []) if c.get("dropped")}
    rows = [[str(i), _note(c, gold), _f(c["relevance"]), _bar(c["relevance"], thr),
             _status(dropped.get(c["id"], c), kept)] for i, c in enumerate(cands, 1)]
    return (_h2("Rerank") + f"<p>gate threshold {thr:g} (red line): no kept passage "
            f"reaching it means abstain</p>" + _table(
                ["#", "note", "relevance", "against the gate", "status"], rows,
                _row_classes(cands, gold, set(dropped))))


def _generate(a: dict) -> str:
    gen = next((s for s in a["stages"] if s["name"] == "generate"), {})
    if not a.get("messages"):
        return _h2("Generate") + "<p>the writer was not called</p>"
    msgs = "".join(f"<details><summary>{_e(m['role'])} message ({len(m['content'])} "
                   f"characters)</summary><pre>{_e(m['content'])}</pre></details>"
                   for m in a["messages"])
    return (_h2("Generate") + f"<p>{gen.get('input_tokens', 0)} tokens in, "
            f"{gen.get('output_tokens', 0)} out</p>{msgs}")


def _verify(a: dict) -> str:
    sents = a["checks"].get("sentences", [])
    if not sents:
        return _h2("Verify") + "<p>nothing to verify</p>"
    ids = {f"c{i}" for i in range(1, len(a["sources"]) + 1)}
    rows = [[str(s.get("index", "")), _e(s.get("sentence", "")),
             _cited("".join(f"[{c}]" for c in s.get("citations", [])), ids),
             _e(", ".join(s.get("numbers", []))), _f(s.get("support"), ".2f"),
             "ok" if s.get("ok", True) else "<br>".join(map(_e, s.get("reasons", [])))]
            for s in sents]
    rules = "passed" if a["checks"].get("rules_ok") else "failed"
    asked = "passed" if a["checks"].get("on_question", True) else "failed"
    return (_h2("Verify") + f"<p>citation checks {rules}; question checks {asked}; "
            f"judge support needed: "
            f"{verify.SUPPORT_THRESHOLD:g}</p>"
            + _table(["#", "sentence", "cites", "numbers", "support", "result"], rows,
                     ["" if s.get("ok", True) else "fail" for s in sents]))


def _cost(a: dict) -> str:
    st, tot = a["stages"], cost_ledger.stage_totals(a["stages"])
    rows = [[_e(s["name"]), f"{s['ms']:.1f}", str(s["input_tokens"]),
             str(s["output_tokens"]), f"{s['dollars']:.6f}"] for s in st]
    rows.append(["<b>total</b>", f"{tot['ms']:.1f}", str(tot["input_tokens"]),
                 str(tot["output_tokens"]), f"{tot['dollars']:.6f}"])
    top = max([s["ms"] for s in st] + [1e-9])
    bars = "".join(f'<text x="0" y="{16 * i + 12}" font-size="11">{_e(s["name"])}</text>'
                   f'<rect x="110" y="{16 * i + 3}" height="11" fill="#3b6fb6" '
                   f'width="{400 * s["ms"] / top:.1f}"/>' for i, s in enumerate(st))
    calls = [[_e(c["stage"]), _e(c["backend"]), _e(c["model"]), str(c["input_tokens"]),
              str(c["output_tokens"]), f"{1000 * c['seconds']:.1f}"]
             for c in a.get("calls", [])]
    return (_h2("Cost") + _table(["stage", "ms", "tokens in", "out", "$"], rows)
            + f'<svg width="520" height="{16 * len(st) + 6}" role="img" aria-label="ms per '
            f'stage">{bars}</svg>' + ("<h3>Model calls</h3>" + _table(
                ["stage", "backend", "model", "tokens in", "out", "ms"], calls)
                if calls else ""))


def _provenance(a: dict) -> str:
    """Where the index came from: the sample vault, the config it was built with."""
    cfg, out = a.get("index_config") or {}, ""
    if cfg.get("path"):
        out += (f" \u00b7 config {_e(cfg['path'])} (sha256 {_e((cfg.get('sha256') or '')[:12])}"
                f"{', kept from --config' if cfg.get('given') else ''})")
    if a.get("sample_vault"):
        out += " \u00b7 <strong>answered from the bundled sample vault</strong>"
    return out


def _privacy(a: dict) -> str:
    """The banner over a page that holds private text; a line over the copy to share."""
    if holds_private(a):
        return (f'<div class="banner" role="alert" style="background:{PRIVATE_COLOUR}">'
                f'{_e(PRIVATE_BANNER)}</div>')
    return f'<p class="muted">{_e(REDACTED_LINE)}</p>' if a.get("redacted") else ""


def trace_fragment(a: dict, gold=(), back: str | None = None, facts=None) -> str:
    """Every stage of one answer as a <div class="verso"> (styles scoped to it);
    `facts` ({label: value}) is shown under the question (the evaluation's scoring)."""
    gold = set(gold)
    nav = f'<p><a href="{_e(back)}">\u2190 evaluation index</a></p>' if back else ""
    legend = ('<p><span class="tag gold">gold</span> marks the question\'s gold files</p>'
              if gold else "")
    if facts:
        legend += _table(["", ""], [[_e(k), _e(v)] for k, v in facts.items()])
    head = (f"<h1>{_e(a['question'])}</h1><p class=\"muted\">backend {_e(a['backend'])}"
            f" ({_e(a.get('backend_note', ''))}) \u00b7 time mode {_e(a['time_mode'])}"
            f"{_provenance(a)}</p>")
    body = [_answer(a, gold), _route(a), _retrieve(a, gold), _version(a, gold),
            _rerank(a, gold), _generate(a), _verify(a), _cost(a)]
    links = " \u00b7 ".join(f'<a href="#{s.lower()}">{s}</a>' for s in SECTIONS[1:])
    return (f'<div class="verso"><style>{CSS}</style>{_privacy(a)}{nav}{head}<p>{links}'
            f'</p>{legend}{_h2("Answer")}{"".join(body)}</div>')


def _page(title: str, body: str) -> str:
    return ('<!doctype html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>{_e(title)}</title></head>'
            f'<body style="margin:0;background:#fff">{body}</body></html>\n')


def trace_page(a: dict, gold=(), back: str | None = None, facts=None) -> str:
    """A whole self-contained page: trace_fragment in an HTML document."""
    return _page(f"Verso trace: {a['question'][:80]}",
                 trace_fragment(a, gold, back, facts))


# ------------------------------------------------------------------ evaluation index

def _category_bars(result: dict) -> str:
    """Inline SVG: answer correct per category (groups), one bar per variant."""
    cats, names = scorecard.categories(result), list(result["variants"])
    bw, gap, top = 12, 18, 150
    gw = bw * len(names) + gap
    out = []
    for i, cat in enumerate(cats):
        gx = 40 + gw * i
        for j, v in enumerate(names):
            r = result["variants"][v]["by_category"].get(cat, {}).get("answer_correct")
            if not r or not r["n"]:
                continue
            h = max(top * r["p"], 1.5)       # a 0% bar stays visible as a sliver
            out.append(f'<rect x="{gx + bw * j}" y="{20 + top - h:.1f}" width="{bw - 1}" '
                       f'height="{h:.1f}" fill="{VARIANT_COLOURS[j % 6]}"><title>'
                       f'{_e(v)} {_e(cat)}: {_e(scorecard.fmt_rate(r))}</title></rect>')
        out.append(f'<text x="{gx + bw * len(names) / 2:.1f}" y="{top + 34}" font-size="11"'
                   f' text-anchor="middle">{_e(cat)}</text>')
    axis = "".join(f'<text x="30" y="{20 + top - top * t + 4:.1f}" font-size="10" '
                   f'text-anchor="end">{int(100 * t)}%</text><line x1="34" x2="'
                   f'{40 + gw * len(cats)}" y1="{20 + top - top * t:.1f}" y2="'
                   f'{20 + top - top * t:.1f}" stroke="#e3e6eb"/>' for t in (0, .5, 1))
    legend = "".join(f'<rect x="{40 + 110 * j}" y="{top + 46}" width="10" height="10" '
                     f'fill="{VARIANT_COLOURS[j % 6]}"/><text x="{54 + 110 * j}" '
                     f'y="{top + 55}" font-size="11">{_e(v)}</text>'
                     for j, v in enumerate(names))
    w = max(60 + gw * len(cats), 60 + 110 * len(names))
    return (f'<svg width="{w}" height="{top + 64}" role="img" aria-label="answer correct '
            f'by category">{axis}{"".join(out)}{legend}</svg>')


def _questions(records, questions, links) -> str:
    names = list(dict.fromkeys(r["variant"] for r in records))
    by = {(r["variant"], r["id"]): r for r in records}
    rows = []
    for q in questions:
        cells = [_e(q["id"]), _e(q["category"]), _e(q["question"]),
                 "<br>".join(f'<span class="tag gold">{_e(g)}</span>'
                             for g in q["gold_files"]) or "\u2013"]
        for v in names:
            r = by.get((v, q["id"]))
            mark = "\u2013" if r is None else (
                ("\u2713 " if r["answer_correct"] else "\u2717 ") + _e(r["verdict"]))
            href = (links or {}).get((v, q["id"]))
            cells.append(f'<a href="{_e(quote(href))}">{mark}</a>' if href else mark)
        rows.append(cells)
    return _table(["id", "category", "question", "gold files", *names], rows)


def _risk_coverage(result: dict) -> str:
    """Inline SVG: each variant's risk-coverage curve (answers taken most confident
    first: share of questions answered across, share of them wrong up)."""
    w, h, pad = 360, 200, 34
    out = [f'<line x1="{pad}" y1="{pad + h}" x2="{pad + w}" y2="{pad + h}" stroke="#888"/>',
           f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{pad + h}" stroke="#888"/>',
           f'<text x="{pad + w / 2}" y="{pad + h + 28}" font-size="11" text-anchor="middle">'
           'coverage (share of questions answered)</text>',
           f'<text x="10" y="{pad - 12}" font-size="11">risk (share wrong)</text>']
    for j, (name, s) in enumerate(result["variants"].items()):
        pts = s["overall"].get("selective", {}).get("risk_coverage") or []
        if not pts:
            continue
        xy = " ".join(f"{pad + w * c:.1f},{pad + h * (1 - r):.1f}" for c, r in pts)
        colour = VARIANT_COLOURS[j % 6]
        out.append(f'<polyline points="{xy}" fill="none" stroke="{colour}" stroke-width="2">'
                   f'<title>{_e(name)}</title></polyline>')
        out.append(f'<text x="{pad + w + 6}" y="{pad + 14 * (j + 1)}" font-size="11" '
                   f'fill="{colour}">{_e(name)}</text>')
    return (f'<svg role="img" aria-label="risk-coverage curves" width="{w + 2 * pad + 80}" '
            f'height="{h + 2 * pad + 10}">{"".join(out)}</svg>')


def index_page(result: dict, records, questions, links=None) -> str:
    """The evaluation: the text report's tables, answer correct per category as bars,
    the McNemar tests, and one row per question linking to its trace pages
    (links: {(variant, question id): relative href})."""
    tables = "".join((f"<h3>{_e(t)}</h3>" if t else "") + '<div class="wide">' + _table(
        h, [[_e(c) for c in r] for r in rows]) + "</div>"
        for t, h, rows in scorecard.report_tables(result))
    pairs = _table(["a", "b", "metric", "wins", "losses", "of", "exact McNemar p"],
                   [[_e(p["a"]), _e(p["b"]), _e(p["metric"]), str(p["wins"]),
                     str(p["losses"]), str(p["n"]), f"{p['p']:.4f}"]
                    for p in result.get("pairs", [])]) if result.get("pairs") else ""
    head = (f"<h1>Verso evaluation</h1><p class=\"muted\">{_e(result.get('questions'))}"
            f" \u00b7 {_e(result.get('n_questions'))} questions \u00b7 vault "
            f"{_e(result.get('vault'))} \u00b7 backend {_e(result.get('backend'))}</p>")
    body = (f"{head}<h2>Variants</h2>{tables}<h2>Answer correct by category</h2>"
            f"{_category_bars(result)}<h2>Risk and coverage</h2>{_risk_coverage(result)}"
            f"<h2>Paired tests</h2>{pairs}<h2>Questions</h2>"
            f"<p>each mark links to that variant's trace page</p>"
            f"{_questions(records, questions, links)}")
    return _page("Verso evaluation", f'<div class="verso"><style>{CSS}</style>{body}</div>')


# ----------------------------------------------------------------------- writing

def _outside(path: Path, vault) -> None:
    if vault is not None and path.resolve().is_relative_to(Path(vault).resolve()):
        raise ValueError(f"{path} is inside the vault {vault}: write the page outside it")


PRIVATE_TEXT = "private: text not included"
PRIVATE_BANNER = ("Not for sharing: this holds text from private notes. For a copy to "
                  "share, write it again with --redact.")
PRIVATE_COLOUR = "#8a1c1c"
REDACTED_LINE = ("A copy to share (--redact): text from private folders is left out, "
                 "their paths kept.")
SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+")
NOT_SHARED = "(not included: it holds text from private notes)"


def _private_paths(a: dict) -> set:
    return {s["path"] for s in a.get("sources", []) if s.get("private")} | {
        c["path"] for cs in (a.get("candidates") or {}).values() for c in cs
        if c.get("private")}


def holds_private(a: dict) -> bool:
    """Whether an answer's dict holds text from a private folder's note (not redacted)."""
    return not a.get("redacted") and bool(_private_paths(a))


def redact(a: dict) -> dict:
    """An answer's dict as a file meant to be shared may hold it (`--redact`): each
    passage from a private folder is its path and PRIVATE_TEXT (heading and lines too),
    a sentence citing one is replaced likewise, and the prompt, the reply and the
    models' line choices, which quote the notes, are left out; "redacted" is set.
    Unchanged when nothing is private."""
    private = _private_paths(a)
    if not private:
        return a
    ids = {f"c{i}" for i, s in enumerate(a.get("sources", []), 1) if s.get("private")}

    def said(text: str) -> str:
        out = []
        for sentence in SENTENCE_END_RE.split(text or ""):
            cited = sorted({c.strip().lower() for g in generate.CITATION_RE.findall(sentence)
                            for c in re.split(r"[,;]", g)})
            out.append(f"({PRIVATE_TEXT}) " + " ".join(f"[{c}]" for c in cited)
                       if ids & set(cited) else sentence)
        return " ".join(out)

    out = dict(a, answer=said(a.get("answer", "")), shown=said(a.get("shown", "")),
               messages=[], reply=NOT_SHARED, redacted=True,
               calls=[{k: v for k, v in c.items() if k != "choose"} for c in a.get("calls", [])])
    out["sources"] = [dict(s, text=PRIVATE_TEXT, heading="") if s["path"] in private else s
                      for s in a.get("sources", [])]
    out["look_at"] = [dict(x, line=PRIVATE_TEXT) if x["path"] in private else x
                      for x in a.get("look_at", [])]
    out["candidates"] = {stage: [dict(c, heading="") if c["path"] in private else c
                                 for c in cs] for stage, cs in (a.get("candidates") or {}).items()}
    checks = dict(a.get("checks") or {})
    checks["sentences"] = [dict(x, sentence=PRIVATE_TEXT, claim=PRIVATE_TEXT, numbers=[])
                           if ids & set(x.get("citations") or []) else x
                           for x in checks.get("sentences", [])]
    out["checks"] = checks
    if alt := a.get("alternate"):              # the other reader's answer (harness)
        out["alternate"] = dict(alt, answer=said(alt.get("answer", "")), sentences=[
            dict(x, sentence=PRIVATE_TEXT, claim=PRIVATE_TEXT, numbers=[])
            if ids & set(x.get("citations") or []) else x for x in alt.get("sentences", [])])
    return out


def save_trace(path, a: dict, vault=None, gold=()) -> None:
    """Write trace_page(a) to path (atomically); never inside the vault."""
    path = Path(path)
    _outside(path, vault)
    path.parent.mkdir(parents=True, exist_ok=True)
    store.write_atomic(path, trace_page(a, gold))


def _page_name(qid: str) -> str:
    """A file name for a question id: safe characters only, a hash when changed."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", qid)[:60]
    if safe != qid:
        safe += "-" + hashlib.sha256(qid.encode()).hexdigest()[:8]
    return safe + ".html"


class TracePages:
    """evaluate.run_variant's on_answer: one trace page per question and variant under
    FOLDER/<variant>/, then save_index writes FOLDER/index.html linking them; with
    redact=True the pages are the copy to share (redact)."""

    def __init__(self, folder, vault=None, redact=False):
        self.folder, self.links, self.redact = Path(folder), {}, redact
        _outside(self.folder, vault)

    def __call__(self, q: dict, a: dict, record: dict) -> None:
        a = redact(a) if self.redact else a
        rel = f"{record['variant']}/{_page_name(q['id'])}"
        facts = {"question": f"{q['id']} ({q['category']})", "variant": record["variant"],
                 "reference answer": q["answer"],
                 "answer correct": "yes" if record["answer_correct"] else "no"}
        (self.folder / record["variant"]).mkdir(parents=True, exist_ok=True)
        store.write_atomic(self.folder / rel, trace_page(
            a, q["gold_files"], back="../index.html", facts=facts))
        self.links[(record["variant"], q["id"])] = rel

    def save_index(self, result: dict, records, questions) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        store.write_atomic(self.folder / "index.html",
                           index_page(result, records, questions, self.links))
