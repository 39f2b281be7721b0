"""measures: how an answer and its evidence are scored against a question's gold.

Stage: runs (evaluate.py, budget_eval.py and the tools read them).
In:  a question's key facts, forbidden facts and gold files; an answer (its text,
     sources, retrieved paths) or the evidence handed on.
Out: booleans and numbers: a fact found in a text, an answer correct, a gold file found
     at 5, evidence recall and stale evidence, percentiles, exact McNemar.
Not: asking anything (harness.py), loading question sets or summarising runs
     (evaluate.py).
"""

from __future__ import annotations

import math
import re
import unicodedata

from verso import textkit

MAX_SENTENCES = 5
SOURCE_K = 5              # source found@5: among the kept passages
RECALL_K = 10             # recall_all@10: among the first 10 distinct retrieved paths
THOUSANDS_RE = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
CITATION_RE = re.compile(r"\[c\d+\]")
SENTENCE_SPLIT_RE = re.compile(r"[.!?]+[\"')\]]*\s+|\n+")
FOLD = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                      "\u2013": "-", "\u2014": "-", "\u2212": "-"})


def normalise(text: str) -> str:
    """Lowercase, NFKC, curly quotes/dashes folded, "1,550" -> "1550", spaces collapsed."""
    text = unicodedata.normalize("NFKC", text).translate(FOLD).lower()
    return " ".join(THOUSANDS_RE.sub("", text).split())


def has_fact(text: str, fact: str) -> bool:
    """The normalised fact occurs in the normalised text, not inside a longer word/number:
    "1550" is found in "£1,550/day" but not in "11550" or "1550.5"."""
    f = normalise(fact)
    if not f:
        return False
    left = r"(?<!\w)(?<!\d[.,])" if f[0].isalnum() else ""
    right = r"(?!\w)(?![.,]\d)" if f[-1].isalnum() else ""
    return re.search(left + re.escape(f) + right, normalise(text)) is not None


def written_as(text: str, fact: str) -> str | None:
    """The word or number of text that holds the fact only inside it ("£2,250" in
    "£2,250.00", "Thursday" in "Thursdays"), normalised as has_fact reads it; None when
    text holds the fact itself or not at all. For a question writer: has_fact counts
    only the whole word or number."""
    f = normalise(fact)
    if not f or has_fact(text, fact):
        return None
    m = re.search(r"[\w£$€]*" + re.escape(f) + r"(?:[.,]\d+|\w)*", normalise(text))
    return m.group(0) if m else None


def has_any(text: str, facts) -> bool:
    """Some fact of `facts` inside text (has_fact)."""
    return any(has_fact(text, f) for f in facts)


def count_sentences(text: str) -> int:
    """Sentences and lines with words in them; citation markers are ignored."""
    parts = SENTENCE_SPLIT_RE.split(CITATION_RE.sub("", text).strip())
    return sum(1 for p in parts if re.search(r"\w", p))


def answer_correct(q: dict, a: dict) -> bool:
    """Answerable: all key facts, no forbidden fact, <= 5 sentences. Else: abstained."""
    if not q["answerable"] or a.get("abstained"):
        return not q["answerable"] and bool(a.get("abstained"))
    text = CITATION_RE.sub("", a.get("answer") or "")
    return (all(has_fact(text, f) for f in q["key_facts"])
            and not has_any(text, q["forbidden_facts"])
            and count_sentences(text) <= MAX_SENTENCES)


def source_paths(items) -> list[str]:
    """Distinct paths in first-seen order; items are paths or dicts with a path."""
    out = [(it["path"] if isinstance(it, dict) else it).replace("\\", "/")
           for it in items or []]
    return list(dict.fromkeys(out))


def source_found_at5(gold_files, sources) -> bool:
    """Any gold file among the first 5 kept passages."""
    return bool(set(gold_files) & set(source_paths(list(sources or [])[:SOURCE_K])))


def recall_all_at10(gold_files, retrieved) -> bool:
    """Every gold file among the first 10 distinct paths retrieved."""
    return set(gold_files) <= set(source_paths(retrieved)[:RECALL_K])


def reciprocal_rank(gold_files, ranking) -> float:
    """1 / rank of the first gold file among the distinct paths of the ranking; 0 if none."""
    ranks = [i for i, p in enumerate(source_paths(ranking), 1) if p in gold_files]
    return 1.0 / ranks[0] if ranks else 0.0


def percentile(values, p: float):
    """Nearest-rank percentile: sorted[ceil(p/100 * n) - 1]; None for no values."""
    xs = sorted(values)
    return xs[max(0, math.ceil(p / 100 * len(xs)) - 1)] if xs else None


def mcnemar(wins: int, losses: int) -> float:
    """Two-sided exact McNemar p: binomial(b + c, 1/2) on the discordant pairs."""
    n = wins + losses
    tail = sum(math.comb(n, i) for i in range(min(wins, losses) + 1))
    return min(1.0, 2 * tail / 2 ** n) if n else 1.0


def numbers_cited(a: dict) -> bool:
    """Every number of every sentence of the answer stands in a source the sentence cites
    (its text, heading, path or date); an "On YYYY-MM-DD:" lead is not a claim."""
    from verso import generate   # only scoring needs it; --check and --compare stay light
    by_id = {f"c{i}": s for i, s in enumerate(a.get("sources") or [], 1)
             if isinstance(s, dict)}
    for sentence, ids in generate.parse_citations(a.get("answer") or ""):
        _, body = generate.split_date(sentence)
        have = set().union(*(textkit.number_keys(
            f"{s.get('text', '')} {s.get('heading', '')} {s['path']} {s.get('date', '')}")
            for s in (by_id[i] for i in ids if i in by_id)))
        if not textkit.number_keys(body) <= have:
            return False
    return True


def _passages(sources) -> list[str]:
    """Each source dict as its reader gets it (passage_text; bare paths: none)."""
    return [passage_text(s) for s in sources or [] if isinstance(s, dict)]


def passage_text(source: dict) -> str:
    """A source dict as its reader gets it: heading, then text."""
    return f"{source.get('heading') or ''}\n{source.get('text') or ''}"


def evidence_recall(key_facts, sources) -> bool:
    """Every key fact inside the evidence: the dates, headings and texts of all the
    sources joined, so two facts may stand in two passages (every reader is shown each
    passage's date: the day a journal note was written answers "when")."""
    dates = [s.get("date") or "" for s in sources or [] if isinstance(s, dict)]
    joined = "\n".join(f"{d}\n{p}" for d, p in zip(dates, _passages(sources)))
    return all(has_fact(joined, f) for f in key_facts)


def evidence_stale(forbidden_facts, sources, key_facts=()) -> bool:
    """Some passage marked current (latest, and superseded_by None) holds a forbidden
    fact (an outdated value) and not every key fact (the current value: a passage that
    states both, a note of what changed, is not stale); one labelled older or
    superseded may hold it."""
    return bool(stale_passages(forbidden_facts, sources, key_facts))


def stale_passages(forbidden_facts, sources, key_facts=()) -> list[dict]:
    """The sources that make the evidence stale (evidence_stale), in order."""
    current = [s for s in sources or [] if isinstance(s, dict)
               and s.get("superseded_by") is None and s.get("is_latest", True)]
    return [s for s, t in zip(current, _passages(current)) if has_any(t, forbidden_facts)
            and not (key_facts and all(has_fact(t, k) for k in key_facts))]


def evidence_recall_all(gold_files, sources) -> bool:
    """Every gold file among the paths of the sources handed on."""
    return set(gold_files) <= set(source_paths(s for s in sources or [] if isinstance(s, dict)))


def evidence_words(sources) -> int:
    """Words (whitespace split) of the sources' texts; 0 for none."""
    return sum(len((s.get("text") or "").split()) for s in sources or []
               if isinstance(s, dict))
