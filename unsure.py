"""unsure: what Verso says when it is not sure, so that the person knows where to look.

In:  an answer's verdict, its text and verify's rows (ESCALATE), or its abstain reason
     (ABSTAIN); the kept candidates, in the order the pipeline ranked them.
Out: `shown`, the text a person reads: the answer as it is (SHIP); the answer marked
     unchecked, "Not sure — check [c1]: ..." (ESCALATE); two readers' answers, each
     with its cited lines, where an uncalibrated model and the builtin reader disagree
     (both()); "I don't know from my notes",
     why in plain words, and the notes most likely to hold the answer (ABSTAIN). And
     `look_at`: [{"id", "path", "date", "line"}], the notes to open (for ESCALATE the
     cited ones with the line each sentence came from; for ABSTAIN the LOOK_AT best).
Not: deciding the verdict (verify, calibrate) or changing the answer text itself, which
     evaluate scores as written.
"""

from __future__ import annotations

from verso import builtin_writer
from verso import generate
from verso import line_scores
from verso import textkit

LOOK_AT = 3              # notes listed under an abstention
UNSURE = "Not sure — check {ids}: "
BOTH = "Not sure — two readings of your notes disagree; check them:"
PLAIN = {                # the writer's and the router's own reasons, as a person says them
    "the writer found no answer in the kept passages":
        "the notes closest to the question do not state it",
}


def _notes(cands: list) -> list[dict]:
    """Candidates as the note dicts the builtin reader reads (builtin_writer.unit_rows)."""
    return [{"id": f"c{i}", "path": c.path, "section": c.chunk.get("heading", ""),
             "date": c.date, "status": generate.note_status(c), "order": i - 1,
             "text": c.chunk.get("text", "")} for i, c in enumerate(cands, 1)]


def _best_lines(question: str, notes: list[dict]) -> dict:
    """{note id: its line the builtin reader scores highest for the question}."""
    best: dict = {}
    for u in builtin_writer.unit_rows(line_scores.analyse(question), notes):
        if u.note["id"] not in best or u.ev > best[u.note["id"]].ev:
            best[u.note["id"]] = u
    return {k: u.text for k, u in best.items()}


def _line_for(claim: str, text: str) -> str:
    """The line of a note a sentence came from: the one sharing most of its terms."""
    words = set(textkit.terms(claim))
    units = textkit.split_units(text)
    return max(units, key=lambda u: len(words & set(textkit.terms(u))), default="")


def plain_reason(reason: str | None) -> str:
    """An abstain reason in the words a person uses."""
    if not reason:
        return "the notes do not state it"
    if reason.startswith("no passage reached"):
        return "none of the notes found is about this"
    return PLAIN.get(reason, reason)


def escalated(answer: str, rows: list, cands: list) -> tuple[str, list[dict]]:
    """(the marked answer, the cited notes with the line each sentence came from)."""
    by_id = {f"c{i}": c for i, c in enumerate(cands, 1)}
    look, ids = [], []
    for r in rows:
        for cid in r.get("citations", []):
            if cid in by_id and cid not in ids:
                ids.append(cid)
                c = by_id[cid]
                look.append({"id": cid, "path": c.path, "date": c.date,
                             "line": _line_for(r.get("claim", ""), c.chunk.get("text", ""))})
    mark = UNSURE.format(ids=", ".join(f"[{i}]" for i in ids) or "the notes")
    return mark + answer, look


def abstained(question: str, reason: str | None, cands: list) -> tuple[str, list[dict]]:
    """(why, in plain words, with where to look; the LOOK_AT likeliest notes)."""
    seen, top = set(), []
    for c in cands:
        if c.path not in seen:
            seen.add(c.path)
            top.append(c)
    top = top[:LOOK_AT]
    notes = _notes(top)
    lines = _best_lines(question, notes)
    look = [{"id": n["id"], "path": n["path"], "date": n["date"], "line": lines.get(n["id"], "")}
            for n in notes]
    text = f"{generate.ABSTAIN} {plain_reason(reason).capitalize()}."
    if look:
        text += " The likeliest notes to look in: " + "; ".join(
            f"{x['path']} ({x['date']})" for x in look) + "."
    return text, look


def advise(verdict: str, question: str, answer: str, reason: str | None, rows: list,
           cands: list) -> tuple[str, list[dict]]:
    """(shown, look_at) for an answer with this verdict."""
    if verdict == "SHIP":
        return answer, []
    if verdict == "ESCALATE":
        return escalated(answer, rows, cands)
    return abstained(question, reason, cands)


def both(first: tuple, second: tuple, cands: list, hint: str) -> tuple[str, list[dict]]:
    """(shown, look_at) of two readers' answers, each (who, answer, verify's rows): both
    marked unsure, each with the lines it cites, and the hint on how to settle it."""
    lines, look = [BOTH], []
    for who, answer, rows in (first, second):
        lines.append(f"  {who}: {answer}")
        look += [x for x in escalated(answer, rows, cands)[1] if x not in look]
    return "\n".join(lines + [hint + "."]), look

