"""budget_eval: the evidence at equal words, Verso's beside the plain baseline's.

In:  a question set, an ask function (harness.ask bound to an index, write=False), a
     plain_bm25.Baseline of the same vault, word budgets, variants.
Out: per variant and budget: evidence recall (every key fact of an answerable question
     inside what is handed on: measures.evidence_recall), by kind of question (change:
     category change; as-of: gold time mode as_of; current: gold time mode present),
     stale evidence (measures.evidence_stale), words per question, and the labels a
     later note of another name put on a passage (why: a newer dated statement), each
     right (the passage holds a forbidden fact: a value the notes changed) or wrong (it
     holds a key fact and no forbidden one: the current value labelled old), and the
     same counts for every kind of label over the questions asking the value in force
     (labels_by_kind: LABEL_KINDS; a change question's older versions hold its key
     facts and are rightly labelled); the baseline's
     recall at each budget; found@5 (a gold note among the first five passages at the
     largest budget); why each question missed at the largest budget (why_missed), and
     why its evidence is stale there (why_stale).
     Rendered as one table.
Not: answering (no answer is written; a model writer is asked only for search words,
     searchwords.py) or scoring answers (evaluate.py).

    python evaluate.py --vault vaults/ninth-vault --questions questions/ninth.jsonl --budgets
"""

from __future__ import annotations

from verso import builtin_writer
from verso import measures
from verso import textkit
from verso import version

BUDGETS = (300, 600, 1000)
LABEL_KINDS = ("statement", "version", "entry", "as of")     # labels' kinds (labels)
IN_FORCE = version.WHY_IN_FORCE.split("{")[0]
CURRENT = ("present", "as_of")    # questions asking the value in force: labels_by_kind
WHY_MISSED = ("not in the notes", "in other words", "not retrieved", "ranked out", "cut")
WHY_STALE = ("not handed on", "one note, both", "undated", "older, not labelled", "newer")
KINDS = {"change": lambda q: q["category"] == "change",
         "as-of": lambda q: q["time_mode"] == "as_of",
         "current": lambda q: q["time_mode"] == "present"}


def _rate(hits: list) -> dict:
    return {"k": sum(hits), "n": len(hits)}


def measure(questions, ask_fn, baseline, budgets=BUDGETS, variants=("full",),
            variant_kwargs=None) -> dict:
    """{"budgets", "baseline": {budget: rate, "by_kind": ...}, "variants": {variant:
    {budget: {"recall", "by_kind", "stale", "words"}, "found_at5": rate}}, "missed":
    {variant: [ids missed at the largest budget]}, "missed_why": {variant: {id: reason
    (why_missed)}}, "stale_why": {variant: {id of a question whose evidence at the
    largest budget is stale: reason (why_stale)}}}."""
    qs = [q for q in questions if q["answerable"] and q["key_facts"]]
    out = {"budgets": list(budgets), "n": len(qs), "variants": {}, "missed": {},
           "missed_why": {}, "stale_why": {}, "baseline": {}}
    notes: dict[str, str] = {}
    for path, text in baseline.chunks:
        notes[path] = f"{notes[path]}\n{text}" if path in notes else text
    for b in budgets:
        hits = [measures.evidence_recall(q["key_facts"], baseline.evidence(q["question"], b))
                for q in qs]
        out["baseline"][b] = {"recall": _rate(hits), "by_kind": _by_kind(qs, hits)}
    for v in variants:
        kw = (variant_kwargs or {}).get(v, {})
        row, found = {}, []
        for b in budgets:
            hits, stale, words, said, marks, why, spoilt = [], [], 0, [], [], {}, {}
            for q in qs:
                a = ask_fn(q["question"], budget=b, **kw)
                a = a if isinstance(a, dict) else a.to_dict()
                src = a["sources"]
                hits.append(measures.evidence_recall(q["key_facts"], src))
                if b == budgets[-1] and not hits[-1]:
                    why[q["id"]] = why_missed(q, a, notes)
                if q["forbidden_facts"] and q["time_mode"] in ("present", "as_of"):
                    stale.append(measures.evidence_stale(q["forbidden_facts"], src,
                                                         q["key_facts"]))
                    if b == budgets[-1] and stale[-1]:
                        spoilt[q["id"]] = why_stale(q, src)
                words += measures.evidence_words(src)
                said += statement_labels(q, src)
                if q["time_mode"] in CURRENT:
                    marks += labels(q, src)
                if b == budgets[-1] and q["gold_files"]:
                    found.append(measures.source_found_at5(q["gold_files"], src))
            row[b] = {"recall": _rate(hits), "by_kind": _by_kind(qs, hits),
                      "stale": _rate(stale), "words": round(words / max(len(qs), 1)),
                      "labels": _label_counts(said),
                      "labels_by_kind": {kind: _label_counts([v for k, v in marks
                                                              if k == kind])
                                         for kind in LABEL_KINDS}}
            if b == budgets[-1]:
                out["missed"][v] = [q["id"] for q, h in zip(qs, hits) if not h]
                out["missed_why"][v] = why
                out["stale_why"][v] = spoilt
        out["variants"][v] = {"budgets": row, "found_at5": _rate(found)}
    return out


def why_missed(q: dict, answer: dict, notes: dict) -> str | None:
    """Why question q's key facts did not all reach the evidence `answer` handed on
    (None when they did): of its key facts outside every passage, the reason furthest
    up the pipeline, in the order of WHY_MISSED. `notes`: {path: text} of every note of
    the vault (as the plain baseline reads it: a note Verso does not index, such as one
    its config leaves out, counts as a note here).
    - "not in the notes": no note's text holds it as written (a day a journal writes
      only as "on Friday", a name only in a file name): no passage text holds it unless
      Verso's time words write the day in;
    - "in other words": no note holding it was retrieved, and none names a word of the
      question, in its text or its path;
    - "not retrieved": no note holding it was retrieved, though one names a word of the
      question;
    - "ranked out": one was retrieved but not handed on within the budget;
    - "cut": one was handed on, but not its part holding the fact."""
    src = answer.get("sources") or []
    handed = set(measures.source_paths(src))
    retrieved = set(measures.source_paths(answer.get("retrieved")))
    asked = set(textkit.terms(q["question"]))
    reasons = []
    for fact in q["key_facts"]:
        if measures.evidence_recall([fact], src):
            continue
        holding = {p for p, text in notes.items() if measures.has_fact(text, fact)}
        reasons.append(
            "not in the notes" if not holding else "cut" if handed & holding else
            "ranked out" if retrieved & holding else
            "not retrieved" if any(asked & set(textkit.terms(f"{p}\n{notes[p]}"))
                                   for p in holding) else "in other words")
    return min(reasons, key=WHY_MISSED.index) if reasons else None


def why_stale(q: dict, sources: list[dict]) -> str | None:
    """Why question q's evidence is stale (None when it is not): of the passages that
    make it so (measures.stale_passages), the reason first in WHY_STALE's order.
    - "not handed on": some key fact (the current value) is in no passage, so nothing
      stood to label the old one by;
    - "one note, both": the passage holding the outdated value holds a key fact too
      (two things asked, one changed elsewhere): a passage's label cannot mark a line;
    - "undated": it, or every passage holding a key fact, is undated (its file's time
      only), so no date orders the two;
    - "older, not labelled": it is dated before a passage holding a key fact and was
      not labelled superseded by it;
    - "newer": it is dated on or after every passage holding a key fact (a later note
      repeating the old value, or a version set aside as of a date)."""
    bad = measures.stale_passages(q["forbidden_facts"], sources, q["key_facts"])
    if not bad:
        return None
    if not measures.evidence_recall(q["key_facts"], sources):
        return "not handed on"

    def holds_key(s):
        return any(measures.has_fact(measures.passage_text(s), k) for k in q["key_facts"])
    latest = max((s.get("date") or "" for s in sources if isinstance(s, dict)
                  and holds_key(s) and s.get("date") != builtin_writer.UNDATED), default="")
    reasons = [
        "one note, both" if holds_key(s) else
        "undated" if not latest or (s.get("date") or builtin_writer.UNDATED)
        == builtin_writer.UNDATED else
        "older, not labelled" if s["date"] < latest else "newer"
        for s in bad]
    return min(reasons, key=WHY_STALE.index)


def statement_labels(q: dict, sources: list[dict]) -> list[str]:
    """For each passage labelled superseded by a dated statement in another note:
    "right" when it holds a forbidden fact of question q, else "wrong" when it holds a
    key fact, else "other"."""
    return [verdict for kind, verdict in labels(q, sources) if kind == "statement"]


def labels(q: dict, sources: list[dict]) -> list[tuple[str, str]]:
    """(kind, verdict) of every passage labelled superseded: kind "statement" (a dated
    statement in another note), "entry" (a later entry of its log), "as of" (the
    version in force on a date) or "version" (a newer version of its note); verdict as
    statement_labels gives it."""
    out = []
    for s in sources:
        why = s.get("why") or ""
        if not s.get("superseded_by"):
            continue
        kind = ("statement" if why.startswith(builtin_writer.STATEMENT_WHY) else
                "entry" if why == version.WHY_ENTRY else
                "as of" if why.startswith(IN_FORCE) else "version")
        text = measures.passage_text(s)
        out.append((kind, "right" if measures.has_any(text, q["forbidden_facts"]) else
                    "wrong" if measures.has_any(text, q["key_facts"]) else "other"))
    return out


def _label_counts(verdicts: list[str]) -> dict:
    return {"n": len(verdicts), **{v: verdicts.count(v) for v in ("right", "wrong", "other")}}


def _by_kind(qs, hits) -> dict:
    return {kind: _rate([h for q, h in zip(qs, hits) if test(q)])
            for kind, test in KINDS.items()}


def why_counts(why: dict | None, order=WHY_MISSED) -> str:
    """"ranked out 3, cut 1": the questions by reason, in `order` (WHY_MISSED, or
    WHY_STALE for why_stale's); "-" for none, "n/a" for a result made before the
    reasons were counted (None)."""
    if why is None:
        return "n/a"
    got = list(why.values())
    return ", ".join(f"{w} {got.count(w)}" for w in order if w in got) or "-"


def cell(r: dict) -> str:
    """A rate as printed: "k/n", "-" when it counts nothing."""
    return f"{r['k']}/{r['n']}" if r["n"] else "-"


def render(result: dict) -> str:
    """One row per variant and the baseline: recall at each budget, then by kind."""
    budgets = result["budgets"]
    head = ["evidence", *[f"{b} words" for b in budgets],
            *[f"{k} @{b}" for b in budgets for k in KINDS], "stale", "words", "found@5",
            "labels (right/wrong)"]
    rows = [head]
    base = result["baseline"]
    rows.append(["plain BM25", *[cell(base[b]["recall"]) for b in budgets],
                 *[cell(base[b]["by_kind"][k]) for b in budgets for k in KINDS],
                 "-", "-", "-", "-"])
    for v, got in result["variants"].items():
        row = got["budgets"]
        rows.append([f"verso {v}", *[cell(row[b]["recall"]) for b in budgets],
                     *[cell(row[b]["by_kind"][k]) for b in budgets for k in KINDS],
                     " ".join(cell(row[b]["stale"]) for b in budgets),
                     " ".join(str(row[b]["words"]) for b in budgets),
                     cell(got["found_at5"]),
                     " ".join(f"{row[b]['labels']['n']} ({row[b]['labels']['right']}/"
                              f"{row[b]['labels']['wrong']})" for b in budgets)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    for v, ids in result["missed"].items():
        lines.append(f"missed by verso {v} at {budgets[-1]} words: {' '.join(ids) or '-'}")
        if ids:
            lines.append(f"  why: {why_counts(result.get('missed_why', {}).get(v))}")
        stale = result.get("stale_why", {}).get(v)
        if stale:
            lines.append(f"stale at {budgets[-1]} words, why: "
                         f"{why_counts(stale, WHY_STALE)}")
    return "\n".join(lines)
