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
import time

from verso import builtin_writer
from verso import models
from verso import textkit

MAX_QUERIES = 3         # queries kept from a reply
MAX_WORDS = 25          # a longer line is no query (an explanation)
REPLY_TOKENS = 80       # the reply's cap: three short lines (the figures were measured so)
MEMO = 256              # questions a writer remembers its words for (asked again: no request)
HUNG_WAIT = 300.0       # seconds a writer whose model timed out is not asked for words again
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
    error, one line, is appended to `problems` when given). A model that timed out is
    not asked again for HUNG_WAIT seconds: a hung server costs one question its
    timeout, not each of them (another error is tried again at the next question)."""
    writer = models.model_of(writer)
    if writer is None:
        return []
    memo = _memo(writer)
    if question in memo:                # the same question again: the same words
        return list(memo[question])
    hung = _memo(writer, "_search_words_hung")
    if "at" in hung and (waited := time.monotonic() - hung["at"]) < HUNG_WAIT:
        return _failed(problems, f"{hung['why']}; not asked again for "
                                 f"{HUNG_WAIT - waited:.0f} s")
    try:
        text = writer.write(request(question), stage=stage, ledger=ledger).text
    except models.BackendTimeout as e:  # a hung model would cost every question its timeout
        hung.update(at=time.monotonic(), why=str(e))
        return _failed(problems, str(e))
    except models.BackendError as e:    # not kept: the next ask tries again
        return _failed(problems, str(e))
    if len(memo) >= MEMO:
        memo.pop(next(iter(memo)))
    memo[question] = parse(str(text), question)
    return list(memo[question])


def _failed(problems: list | None, why: str) -> list[str]:
    if problems is not None:
        problems.append(f"no search words ({why}): the question searched as typed")
    return []


def cleaned(words) -> list[str]:
    """Wordings given by the caller (ask(search_words=[...])): each one line of single
    spaces, the empty ones left out."""
    return [w for w in (" ".join(str(x).split()) for x in words) if w]


def request(question: str) -> builtin_writer.WriteRequest:
    """The one request for a question's search words."""
    return builtin_writer.WriteRequest([{"role": "user", "content": PROMPT.format(
        question=question)}], question=question, reply_tokens=REPLY_TOKENS)


def _memo(writer, key: str = "_search_words") -> dict:
    """The writer's own memo of questions and their words (a model at temperature 0
    with a fixed seed writes the same words again), or under another key its last
    timeout; a fresh dict where it takes none."""
    try:
        return writer.__dict__.setdefault(key, {})
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
