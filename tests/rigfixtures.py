"""Writer replies recorded from real models (the verso rig), and the notes they answered.

tests/fixtures/rig_replies.jsonl holds one JSON object a line: the reply shape it shows,
the question, the time mode, the notes as the writer saw them (path, section, date,
status, text: each cut to the lines the reply needs) and the raw reply. notes() turns
them back into the Candidates generate and verify take.
"""

from __future__ import annotations

import json
from pathlib import Path

from verso import builtin_writer
from verso.retrieve import Candidate

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "rig_replies.jsonl"


def load() -> dict[str, dict]:
    """shape -> fixture record."""
    rows = [json.loads(line) for line in FIXTURES.read_text().splitlines() if line.strip()]
    return {r["shape"]: r for r in rows}


def candidate(i: int, note: dict) -> Candidate:
    """A Candidate from a note as the prompt showed it (status names its version)."""
    status = note["status"]
    _, _, newer = status.partition(builtin_writer.SUPERSEDED_MARK)
    latest = status == builtin_writer.STATUS_LATEST
    family = (newer.split(builtin_writer.LOG_ENTRY_MARK)[0].strip() if newer else note["path"])
    chunk = {"id": i, "path": note["path"], "heading": note.get("section", ""),
             "section_date": None, "date": note["date"],
             "date_source": "mtime" if note["date"] == builtin_writer.UNDATED else "filename",
             "family": family, "is_latest": latest or status.startswith(
                 builtin_writer.STATUS_OLDER_ENTRY),
             "entry_latest": (False if status.startswith(builtin_writer.STATUS_OLDER_ENTRY)
                              else None),
             "private": False, "text": note["text"].strip()}
    return Candidate(chunk=chunk, superseded_by=newer.strip() or None)


def notes(record: dict) -> list[Candidate]:
    return [candidate(i, n) for i, n in enumerate(record["notes"], 1)]


def notes_from_prompt(user_message: str) -> tuple[str, str, list[Candidate]]:
    """(question, time mode, candidates) from a generate.build_messages user message."""
    question, mode, parsed = builtin_writer.parse_prompt(user_message)
    return question, mode, [candidate(i, n) for i, n in enumerate(parsed, 1)]
