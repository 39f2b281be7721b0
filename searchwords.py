"""searchwords: the question in other words, from the user's model, searched beside it.

Stage: retrieve (harness.ask calls it before search when the writer is a model).
In:  the question as searched; the backend's writer; the cost ledger.
Out: find() -> up to MAX_QUERIES short queries in words a note might use ("who does my
     books" -> "accountant contact details"); [] for the builtin writer, on any model
     error, or when the reply holds nothing but the question. cleaned() -> a caller's
     own wordings (ask(search_words=[...])), searched the same way.
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
from verso import textkit

MAX_QUERIES = 3         # queries kept from a reply
MAX_WORDS = 25          # a longer line is no query (an explanation)
REPLY_TOKENS = 80       # the reply's cap: three short lines (the figures were measured so)
MEMO = 256              # questions a writer remembers its words for (asked again: no request)
PROMPT = ("Someone searches their own personal notes with the question below. Write "
          f"{MAX_QUERIES} short search queries, one per line, using other words their notes "
          "would likely use for the same thing (synonyms, the formal name, the kind of note "
          "it is in). No numbering, no explanation.\n\nQuestion: {question}")
QUERY_RE = re.compile(r"^query\s*\d*:\s*", re.IGNORECASE)   # "Query 2: ..."
MARKS = "\"'`*_ "      # quotes and emphasis around a query


def find(question: str, writer, ledger=None, stage: str = "retrieve",
         problems: list | None = None) -> list[str]:
    """Up to MAX_QUERIES other wordings of the question from the writer's model; [] for
    the builtin writer or on a model error (the question is searched as typed, and the
    error, one line, is appended to `problems` when given)."""
    writer = models.model_of(writer)
    if writer is None:
        return []
    memo = _memo(writer)
    if question in memo:                # the same question again: the same words
        return list(memo[question])
    try:
        text = writer.write(request(question), stage=stage, ledger=ledger).text
    except models.BackendError as e:
        if problems is not None:
            problems.append(f"no search words ({e}): the question searched as typed")
        return []                       # not kept: the next ask tries again
    if len(memo) >= MEMO:
        memo.pop(next(iter(memo)))
    memo[question] = parse(str(text), question)
    return list(memo[question])


def cleaned(words) -> list[str]:
    """Wordings given by the caller (ask(search_words=[...])): each one line of single
    spaces, the empty ones left out."""
    return [w for w in (" ".join(str(x).split()) for x in words) if w]


def request(question: str) -> builtin_writer.WriteRequest:
    """The one request for a question's search words."""
    return builtin_writer.WriteRequest([{"role": "user", "content": PROMPT.format(
        question=question)}], question=question, reply_tokens=REPLY_TOKENS)


def _memo(writer) -> dict:
    """The writer's own memo of questions and their words (a model at temperature 0
    with a fixed seed writes the same words again); a fresh dict where it takes none."""
    try:
        return writer.__dict__.setdefault("_search_words", {})
    except AttributeError:
        return {}


def parse(text: str, question: str) -> list[str]:
    """The queries of a reply: one a line, list marks, "Query 2:", quotes and emphasis
    taken off; left out: a line adding no word to the question's (the question again,
    reworded only in function words), a repeat, a line ending in ":" (a preamble, "Here
    are three queries:") and one of more than MAX_WORDS words (an explanation)."""
    out: list[str] = []
    seen = [set(textkit.terms(question))]
    for line in text.splitlines():
        line = QUERY_RE.sub("", textkit.BULLET_RE.sub("", line.strip())).strip(MARKS)
        words = set(textkit.terms(line))
        if (words and not any(words <= s for s in seen) and not line.endswith(":")
                and len(line.split()) <= MAX_WORDS):
            seen.append(words)
            out.append(line)
    return out[:MAX_QUERIES]
