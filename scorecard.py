"""Evaluation results as tables: the text report of evaluate.py and the tables the HTML
run page draws.

In:  a result as evaluate.summarise gives it (per variant: overall metrics, by category,
     verdicts, stage costs) with its paired tests; the flips of evaluate --compare.
Out: strings and (title, header, rows) tables; nothing is computed here that a JSON
     reader of summary.json could not see.
Not: scoring or running questions (evaluate.py), HTML (html_report.py).
"""

from __future__ import annotations

from verso import textkit

TABLE = (("found@5", "source_found_at5"), ("recall@10", "recall_all_at10"),
         ("MRR", "mrr"), ("correct", "answer_correct"), ("current", "current_correct"),
         ("stale", "stale_rate"), ("abstain ok", "abstain_correct"),
         ("false abst", "false_abstain"), ("cite valid", "citation_valid"),
         ("on question", "on_question"), ("route", "route_accuracy"))
EVIDENCE = (("evidence recall", "evidence_recall"), ("stale evidence", "evidence_stale"),
            ("recall all (change)", "evidence_recall_all"))


def fmt_rate(r: dict) -> str:
    """`k/n (p%)`, or `-` when nothing was counted."""
    return f"{r['k']}/{r['n']} ({100 * r['p']:.0f}%)" if r["n"] else "-"


def _ms(x) -> str:
    return "-" if x is None else f"{x:.0f}"


def categories(result: dict) -> list[str]:
    """The categories of every variant, in first-seen order."""
    return list(dict.fromkeys(c for s in result["variants"].values()
                              for c in s["by_category"]))


def _words(w: dict) -> str:
    return "-" if w.get("mean") is None else f"{w['mean']:.0f} / {w['p95']}"


def _evidence_table(vs: dict) -> tuple[str, list, list]:
    """(title, header, rows): the evidence measures of each variant's overall summary
    (`-` for a summary written before they existed)."""
    none = {"k": 0, "n": 0, "p": None}
    return ("evidence handed on (stale: a passage marked current holds a forbidden "
            "fact):", ["variant", *(c for c, _ in EVIDENCE), "words/q mean / p95"], [
        [n, *(fmt_rate(o.get(m, none)) for _, m in EVIDENCE),
         _words(o.get("evidence_words", {}))] for n, o in vs.items()])


def report_tables(result: dict) -> list[tuple[str, list, list]]:
    """(title, header, rows of strings) of each table in the report (text and HTML)."""
    vs = {n: s["overall"] for n, s in result["variants"].items()}
    out = [("", ["variant", *(c for c, _ in TABLE), "p50 ms", "p95 ms"], [
        [n, *(f"{o[m]['p']:.3f}" if m == "mrr" and o[m]["n"] else fmt_rate(o[m])
              for _, m in TABLE), _ms(o["stages"]["total"]["p50_ms"]),
         _ms(o["stages"]["total"]["p95_ms"])] for n, o in vs.items()])]
    out.append(_evidence_table(vs))
    cats = categories(result)
    out.append(("answer correct by category:", ["variant", *cats], [
        [n, *(fmt_rate(s["by_category"][c]["answer_correct"]) if c in s["by_category"]
              else "-" for c in cats)] for n, s in result["variants"].items()]))
    out.append(("", ["variant", "ship", "escalate", "abstain", "failed", "esc|correct",
                     "esc|wrong", "tokens/q", "$/q"], [
        [n, *(str(o["verdicts"].get(v, 0)) for v in ("SHIP", "ESCALATE", "ABSTAIN")),
         str(o.get("failed", 0)),
         fmt_rate(o["escalate_on_correct"]), fmt_rate(o["escalate_on_incorrect"]),
         f"{o['stages']['total']['tokens_per_question']:.0f}",
         f"{o['stages']['total']['dollars_per_question']:.5f}"] for n, o in vs.items()]))
    out.append(("selective answering (SHIP precision: right among SHIP; coverage: SHIP "
                "among answerable):", ["variant", "ship precision", "coverage",
                                       "right shipped", "wrong ship", "refusals shipped",
                                       "AURC"], [
        [n, fmt_rate(s["ship_precision"]), fmt_rate(s["coverage"]),
         fmt_rate(s["right_shipped"]), str(s["wrong_ship"]), str(s["refusals_shipped"]),
         "-" if s["aurc"] is None else f"{s['aurc']:.3f}"]
        for n, s in ((n, o["selective"]) for n, o in vs.items())]))
    lead = "full" if "full" in vs else next(iter(vs), None)
    if lead is not None:
        out.append((f"reliability ({lead}): confidence bins", ["confidence", "answers",
                                                             "mean confidence", "right"], [
            [f"{b['lo']:.1f}-{b['hi']:.1f}", str(b["n"]),
             "-" if b["mean_p"] is None else f"{b['mean_p']:.2f}", fmt_rate(b["right"])]
            for b in vs[lead]["selective"]["reliability"]]))
    stages = list(dict.fromkeys(st for o in vs.values() for st in o["stages"]))
    out.append(("ms per stage, p50/p95:", ["variant", *stages], [
        [n, *(f"{_ms(o['stages'][st]['p50_ms'])}/{_ms(o['stages'][st]['p95_ms'])}"
              if st in o["stages"] else "-" for st in stages)] for n, o in vs.items()]))
    return out


def pair_line(p: dict) -> str:
    return (f"{p['a']} vs {p['b']}  {p['metric']}: wins {p['wins']}, losses "
            f"{p['losses']} (of {p['n']}), exact McNemar p = {p['p']:.4f}")


def render(result: dict) -> str:
    """Variant table, evidence, answer_correct by category, verdicts, stage costs,
    paired tests."""
    out = (["evidence only (--evidence-only: no answer written): the answer measures mean "
            "nothing here", ""] if result.get("evidence_only") else [])
    for title, header, rows in report_tables(result):
        out += ([""] if out else []) + ([title] if title else []) + textkit.columns(header, rows)
    out += [""] + [pair_line(p) for p in result.get("pairs", [])]
    return "\n".join(out).rstrip()


def render_compare(flips: dict) -> str:
    return "\n".join(f"{v} {m}: fixed {', '.join(f['fixed']) or '-'}; broken "
                     f"{', '.join(f['broken']) or '-'}" for v, ms in flips.items()
                     for m, f in ms.items()) or "no question flipped"


def render_conversations(c: dict) -> str:
    """A conversation run: answers over all turns and follow-ups, referents kept, and
    the same per rewrite rule."""
    rows = [["all turns", fmt_rate(c["turns"]), "-"],
            ["follow-ups", fmt_rate(c["follow_ups"]), fmt_rate(c["referent_kept"])]]
    rows += [[f"  {h}", fmt_rate(v["answer_correct"]), fmt_rate(v["referent_kept"])]
             for h, v in c["by_rule"].items()]
    s = c["selective"]
    return "\n".join(textkit.columns(["turns", "answer correct", "rewrite keeps referent"], rows) + [
        "", f"SHIP precision {fmt_rate(s['ship_precision'])}, wrong SHIPs {s['wrong_ship']}"])
