"""registry: a status table of the vault's projects, built once at ingest.

In:  the folders `[registry] folders = [...]` in verso.toml names; the file records
     ingest made (path, date, family, is_latest, duplicate_of) and each project note's
     text (its latest version only: newest version wins, as everywhere).
Out: build() -> [{"name", "status", "why", "result", "date", "path"}], one per project,
     kept in the manifest; asks(question, projects) -> what a registry question wants
     ({"status": ...} for "which projects are paused?", {"name": ...} for "what is the
     status of PixelNet?", {} for "list every project"), or None; sentences() -> the
     cited sentences; passages() -> the candidates they cite.
Not: free-text guessing by rules. The status comes from a field people write ("Status:
     on hold - waiting for funding", frontmatter `status: done`), read against a fixed
     list of words for each status. A note without one is "unknown", unless a model
     writer (Ollama) picks a status from the fixed list and quotes the line that says it:
     the code keeps the pick only when the quote stands in the note ("by": "model").
"""

from __future__ import annotations

import json
import re

from verso import dating
from verso import models
from verso import retrieve
from verso import textkit
from verso import vault_walk

STATUSES = ("active", "paused", "done", "abandoned", "planned", "unknown")
WORDS = {   # each status and the words people write for it, longest first when matching
    "done": ("done", "complete", "completed", "finished", "shipped", "delivered", "closed",
             "launched", "wrapped up", "signed off"),
    "paused": ("paused", "on hold", "parked", "stalled", "blocked", "on ice"),
    "abandoned": ("abandoned", "cancelled", "canceled", "dropped", "scrapped", "killed",
                  "shelved", "dead"),
    "active": ("active", "ongoing", "in progress", "underway", "live", "running", "started",
               "wip"),
    "planned": ("planned", "proposed", "not started", "backlog", "upcoming", "idea",
                "to do", "todo", "next"),
}
STATUS_KEYS = ("status", "state", "stage")
WHY_KEYS = ("why", "reason", "because", "blocker", "blocked by", "note")
RESULT_KEYS = ("key result", "result", "results", "outcome", "deliverable", "shipped")
ASK_RE = re.compile(r"\bprojects?\b|\bstatus\b", re.I)


def _status(value: str) -> str:
    low = f" {value.lower()} "
    hits = [(low.find(f" {w}"), s) for s, ws in WORDS.items() for w in ws
            if re.search(rf"(?<![a-z]){re.escape(w)}(?![a-z])", low)]
    return min(hits)[1] if hits else "unknown"


def _fields(text: str) -> tuple[dict, list[str]]:
    """({key: value} of its key: value lines and frontmatter, its lines)."""
    meta, body = dating.frontmatter(text)
    out = {k.lower(): str(v) for k, v in meta.items()}
    lines = [textkit.plain(x).strip() for x in body.splitlines()]
    for line in lines:
        m = textkit.KEY_RE.match(textkit.BULLET_RE.sub("", line))
        if m:
            key = m.group(1).strip().lower()
            out.setdefault(key, textkit.BULLET_RE.sub("", line)[m.end(1) + 1:].strip())
    return out, [x for x in lines if x]


def _name(path: str, lines: list[str], text: str) -> str:
    head = next((m.group(1).strip() for m in re.finditer(r"(?m)^#\s+(.+)$", text)), None)
    return head or path.rpartition("/")[2].rsplit(".", 1)[0]


def project(path: str, text: str, date: str | None) -> dict:
    """One project's row from its note."""
    fields, lines = _fields(text)
    raw = next((fields[k] for k in STATUS_KEYS if k in fields), "")
    status = _status(raw) if raw else "unknown"
    why = next((fields[k] for k in WHY_KEYS if k in fields), "")
    if not why and raw:     # "Status: paused - waiting for the grant": the rest says why
        why = re.split(r"\s[-\u2013\u2014:;]\s|\s\(", raw, maxsplit=1)[1:2]
        why = why[0].strip(" )") if why else ""
    result = next((fields[k] for k in RESULT_KEYS if k in fields), "")
    return {"name": _name(path, lines, text), "status": status, "said": raw, "why": why,
            "result": result, "date": date, "path": path, "by": "field" if raw else "none"}


MODEL_PROMPT = ("A note about one project is below. Which status does it give the "
                "project now: one of " + ", ".join(STATUSES) + "? Quote the one line of "
                "the note that says so, word for word.\n\nNote:\n{text}")
MODEL_CHARS = 3000       # the note text a model reads


def model_status(writer, text: str) -> tuple[str, str] | None:
    """(status, quote) a model picks with one constrained request, or None when it
    fails, picks outside the list or quotes a line the note does not hold."""
    schema = {"type": "object", "required": ["status", "quote"],
              "properties": {"status": {"enum": list(STATUSES)}, "quote": {"type": "string"}}}
    try:
        r = writer.chat([{"role": "user", "content": MODEL_PROMPT.format(
            text=text[:MODEL_CHARS])}], what="registry", options={"num_predict": 80},
            format=schema)
        got = json.loads(r.message.content or "{}")
    except (ValueError, AttributeError, models.BackendError):
        return None
    status, quote = got.get("status"), " ".join(str(got.get("quote", "")).split())
    if status not in STATUSES or status == "unknown" or len(quote) < 4:
        return None
    return (status, quote) if quote.lower() in " ".join(text.split()).lower() else None



def in_registry(path: str, folders) -> bool:
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def build(vault, files: list[dict], folders, writer=None, previous=()) -> list[dict]:
    """One row per project note (latest version, no copies) in the registry folders.
    A row of `previous` (the last build) is kept while its note's sha256 is the same
    (and a model has nothing to add to it); writer: a model writer with .chat, or None."""
    model = writer if hasattr(writer, "chat") else None
    old = {p["path"]: p for p in previous if p.get("sha256")}
    out = []
    for f in sorted(files, key=lambda f: f["path"]):
        if (not folders or f.get("duplicate_of") or not f.get("is_latest")
                or not in_registry(f["path"], folders)):
            continue
        was = old.get(f["path"])
        if was and was["sha256"] == f.get("sha256") and not (model and was["by"] == "none"):
            out.append(was)
            continue
        text, _, _ = vault_walk.read(vault / f["path"])
        if text is None:
            continue
        day = None if f.get("date_source") == "mtime" else f.get("date")
        row = {**project(f["path"], text, day), "sha256": f.get("sha256")}
        if row["by"] == "none" and model and (pick := model_status(model, text)):
            row.update(status=pick[0], said=pick[1], by="model")
        out.append(row)
    return out


def asks(question: str, projects: list[dict]) -> dict | None:
    """What a registry question asks for, or None when it is not one."""
    if not projects:
        return None
    q = question.lower()
    named = [p for p in projects if p["name"].lower() in q]
    if named and re.search(r"\bstatus\b|\bhow is\b|\bwhere (?:is|are)\b|\bstate of\b", q):
        return {"name": named[0]["name"]}
    if not re.search(r"\bprojects?\b", q):
        return None
    for status in STATUSES[:-1]:
        if _status(q) == status:
            return {"status": status}
    if re.search(r"\b(?:list|every|all|which|what)\b", q):
        return {}
    return None


def rows_for(want: dict, projects: list[dict]) -> list[dict]:
    if "name" in want:
        return [p for p in projects if p["name"] == want["name"]]
    if "status" in want:
        return [p for p in projects if p["status"] == want["status"]]
    return list(projects)


def sentence(p: dict, cid: str) -> str:
    """"PixelNet: paused (status: on hold - waiting for the grant); key result: ... [c1]."
    with the status as the note writes it, so that verify finds its words there."""
    said = f" (status: {p['said']})" if p["said"] and p["said"] != p["status"] else ""
    why = p["why"] if p["why"] and p["why"] not in p["said"] else ""
    extra = "".join(f"; {label}: {v}" for label, v in (("why", why),
                                                       ("key result", p["result"])) if v)
    return f"{p['name']}: {p['status']}{said}{extra} [{cid}]."


def passages(index, rows: list[dict]) -> list:
    """Each row's note as a candidate: its chunk holding the status line (else its
    first), judged fully relevant: the registry chose it, not retrieval."""
    ids_of, out = retrieve.chunk_ids_by_path(index), []
    for p in rows:
        ids = list(ids_of.get(p["path"], ()))
        if not ids:
            continue
        chunks = [index.chunks[int(i)] for i in ids]
        best = next((c for c in chunks if p["said"] and p["said"] in textkit.plain(
            c.get("text", ""))), chunks[0])
        out.append(retrieve.Candidate(best, relevance=1.0, added_by="registry"))
    return out


def sentences(rows: list[dict], ids: list[str]) -> str:
    """One project: its whole row. Several: one sentence per status, each project
    cited ("Paused projects: PixelNet [c1], Orchard [c3]."), so that a list of many stays a
    few sentences."""
    if len(rows) == 1:
        return sentence(rows[0], ids[0])
    out = []
    for status in STATUSES:
        group = [(p, i) for p, i in zip(rows, ids) if p["status"] == status]
        if group:
            out.append(f"{status.capitalize()} projects: " + ", ".join(
                f"{p['name']} [{i}]" for p, i in group) + ".")
    return " ".join(out)


def table(projects: list[dict]) -> str:
    """The registry as aligned columns (--projects)."""
    head = ["project", "status", "updated", "why", "key result", "note"]
    body = [[p["name"], p["status"], p["date"] or "undated", p["why"][:50],
             p["result"][:40], p["path"]] for p in projects]
    return "\n".join(textkit.columns(head, body)) if body else "no projects in the registry"
