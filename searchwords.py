"""searchwords: the question in other words, from the user's model, searched beside it.

Stage: retrieve (harness.ask calls it before search when the writer is a model).
In:  the question as searched; the backend's writer; the cost ledger.
Out: find() -> up to MAX_QUERIES short queries in words a note might use ("who does my
     books" -> "accountant contact details"); [] for the builtin writer, on any model
     error, or when the reply holds nothing but the question.
Not: searching (retrieve.search fuses the queries), routing or time words (read from
     the question as typed), or what the reader reads: the evidence is chosen and read
     for the question itself; the queries only widen what is searched and how a
     section's words are matched (passages: its BM25 is the best of the question's and
     theirs).

Why: people ask in other words than they wrote ("shut-eye" for sleep, "family doctor"
for GP, "per year" for an annual fee). BM25 cannot bridge that and a small embedder
barely does; a host that rephrases its own searches over MCP finds those notes. A
model writer can rephrase for the readers that cannot: one short request per question,
its tokens and seconds are the retrieve stage's (the ledger row names the model).
"""

from __future__ import annotations

import re

from verso import builtin_writer
from verso import models

MAX_QUERIES = 3         # queries kept from a reply
MAX_WORDS = 25          # a longer line is no query (an explanation)
MEMO = 256              # questions a writer remembers its words for (asked again: no request)
PROMPT = ("Someone searches their own personal notes with the question below. Write "
          f"{MAX_QUERIES} short search queries, one per line, using other words their notes "
          "would likely use for the same thing (synonyms, the formal name, the kind of note "
          "it is in). No numbering, no explanation.\n\nQuestion: {question}")
LEAD_RE = re.compile(r"^\s*(?:[-*•]|\d+[.)]|query\s*\d*:)\s*", re.IGNORECASE)


def find(question: str, writer, ledger=None, stage: str = "retrieve") -> list[str]:
    """Up to MAX_QUERIES other wordings of the question from the writer's model; [] for
    the builtin writer or on a model error (the question is searched as typed)."""
    writer = getattr(writer, "inner", writer)   # the model itself, not a line chooser
    if writer is None or getattr(writer, "name", "builtin") == "builtin":
        return []
    memo = _memo(writer)
    if question in memo:                # the same question again: the same words
        return list(memo[question])
    request = builtin_writer.WriteRequest([{"role": "user", "content": PROMPT.format(
        question=question)}], question=question)
    try:
        text = writer.write(request, stage=stage, ledger=ledger).text
    except models.BackendError:
        return []                       # not kept: the next ask tries again
    if len(memo) >= MEMO:
        memo.pop(next(iter(memo)))
    memo[question] = parse(str(text), question)
    return list(memo[question])


def _memo(writer) -> dict:
    """The writer's own memo of questions and their words (a model at temperature 0
    with a fixed seed writes the same words again); a fresh dict where it takes none."""
    try:
        return writer.__dict__.setdefault("_search_words", {})
    except AttributeError:
        return {}


def parse(text: str, question: str) -> list[str]:
    """The queries of a reply: one a line, list marks and quotes taken off, the question
    itself, repeats and lines of more than MAX_WORDS words left out."""
    out: list[str] = []
    seen = {" ".join(question.lower().split())}
    for line in text.splitlines():
        line = LEAD_RE.sub("", line).strip().strip("\"'`").strip()
        key = " ".join(line.lower().split())
        if line and key not in seen and len(line.split()) <= MAX_WORDS:
            seen.add(key)
            out.append(line)
    return out[:MAX_QUERIES]
