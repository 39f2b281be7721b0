"""registry: a status table of the vault's projects, built once at ingest.

In:  the folders `[registry] folders = [...]` in verso.toml names; the file records
     ingest made (path, date, family, is_latest, duplicate_of) and each project note's
     text (its latest version only: newest version wins, as everywhere).
Out: build() -> [{"name", "status", "why", "result", "date", "path"}], one per project,
     kept in the manifest; asks(question, projects) -> what a registry question wants
     ({"status": ...} for "which projects are paused?", {"name": ...} for "what is the
     status of PixelNet?", {} for "list every project"), or None; rows_for() -> its
     rows; sentences() -> the cited sentences; passages() -> the candidates they cite.
Not: free-text guessing by rules. The status comes from a field people write, in any
     form one parser (_fields) reads: frontmatter (`status: done`, `tags: [status/done]`),
     `Status: on hold - waiting for funding`, `**Status**: done`, `## Status: PAUSED`,
     `### Status — on hold`, `| Status | Paused |`, `#status/paused`; why is the rest of
     that line, else the line(s) under it, else a `Why:` field. Its words are read
     against a fixed list for each status. A note without one is "unknown", unless a
     model writer (Ollama) picks a status from the list and quotes the line that says
     it: the pick is kept only when the quote stands in the note ("by": "model").
"""

from __future__ import annotations

import collections
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
             "launched", "released", "published", "wrapped up", "signed off"),
    "paused": ("paused", "on hold", "on pause", "parked", "stalled", "blocked", "on ice",
               "waiting", "inactive", "dormant", "hiatus"),
    "abandoned": ("abandoned", "cancelled", "canceled", "dropped", "scrapped", "killed",
                  "shelved", "dead", "discontinued", "gave up", "given up", "won't do"),
    "active": ("active", "ongoing", "in progress", "underway", "live", "running", "started",
               "wip", "on track", "in development"),
    "planned": ("planned", "proposed", "not started", "not yet started", "backlog",
                "upcoming", "idea", "to do", "todo", "next", "someday"),
}
STATUS_KEYS = ("status", "state", "stage")     # "Current status", "Project state" too
WHY_KEYS = ("why", "reason", "because", "blocker", "blocked", "blocked by", "blocked on",
            "waiting for", "waiting on", "note")
RESULT_KEYS = ("key result", "result", "results", "outcome", "deliverable", "shipped")
KEYS = frozenset(STATUS_KEYS + WHY_KEYS + RESULT_KEYS)
FIELD_RE = re.compile(r"^\W*?([^\W\d_][\w '/&()-]{0,38}?)\s*(?::{1,2}\s*|\s[-\u2013\u2014]+\s+|"
                      r"[\u2013\u2014]\s*|\s*=\s*)(\S.*)$")    # key, then : :: - — or =
HEADING_RE = re.compile(r"^#{1,6}\s+(.*?)[\s#]*$")
TABLE_RULE_RE = re.compile(r"^\|?[\s:|-]*-[\s:|-]*$")
TAG_RE = re.compile(r"(?<![\w#&/])#((?:[^\W\d_][\w-]*/)+)([\w-]+)")   # #status/on-hold
EMPH_RE = re.compile(r"(?<!\w)[*_]+|[*_]+(?!\w)")      # *Status:* -> Status:
STRUCK_RE = re.compile(r"~~.*?~~|^\[![^\]]*\][+-]?")   # ~~struck out~~, a callout's "[!info]"
INLINE_RE = re.compile(r"\[([^\[\]:]{1,40})::\s*([^\]]+)\]")      # [status:: paused]
ITEM_RE = re.compile(r"^\s*(?:[-*+\u2022]|\d+[.)])\s")     # a list item (no quote mark)
NOW_RE = re.compile(r"\s*(?:\u2192|->|=>)\s*")     # "active -> paused": the last one holds
STOP_RE = re.compile(r"^(?:#|\||[-*+]\s+\[.\])")     # no why under: heading, table, task
# a why on the status line: after a dash, colon, semicolon, parenthesis, comma or full
# stop ("on hold - waiting for the grant"), or "because"
WHY_SPLIT_RE = re.compile(r"\s[-\u2013\u2014]+\s|[\u2013\u2014]|\s*[:;(]\s*|[.,]\s+|"
                          r"\s(?=because\b)", re.I)
WHY_MAX = 200
NO_PROJECTS = ("no projects in the registry: name the folders that hold your project "
               "notes in verso.toml at the vault root, a line `[registry]` and under it "
               "`folders = [\"projects\"]` (read by the next command)")


def _status(value: str) -> str:
    low = f" {NOW_RE.split(value)[-1].lower()} "
    hits = [(low.find(f" {w}"), s) for s, ws in WORDS.items() for w in ws
            if re.search(rf"(?<![a-z]){re.escape(w)}(?![a-z])", low)]
    return min(hits)[1] if hits else "unknown"


def _key(label: str) -> str:
    words = re.sub(r"[_-]|\(.*?\)|\bas of\b.*", " ", EMPH_RE.sub("", label)).lower().split()
    return words[-1] if 1 < len(words) <= 3 and words[-1] in STATUS_KEYS[:2] else " ".join(words)


def _plain(line: str) -> str:
    line = STRUCK_RE.sub("", textkit.BULLET_RE.sub("", line).strip())
    return " ".join(EMPH_RE.sub("", textkit.plain(line)).split())


def _below(lines: list[str], i: int, heading: bool = False) -> str:
    """The first sentence of the line(s) directly under line i that are no field, heading,
    table or task (a bullet's: lines indented deeper; a heading's: its first paragraph)."""
    bullet = ITEM_RE.match(lines[i]) and not heading
    depth = len(lines[i]) - len(lines[i].lstrip())
    j, out = i + 1, []
    while heading and j < len(lines) and not lines[j].strip():
        j += 1
    for raw in lines[j:]:
        s = raw.strip()
        if (not s or STOP_RE.match(s) or (out and textkit.BULLET_RE.match(raw))
                or ((k := textkit.KEY_RE.match(_plain(s))) and len(k.group(1).split()) <= 3)
                or (bullet and len(raw) - len(raw.lstrip()) <= depth)):
            break
        out.append(_plain(s))
    return next((x for x in textkit.sentences(" ".join(out)) if x.strip()), "")[:WHY_MAX]


def _tag(m: re.Match, rest: str = "") -> tuple[str, str]:
    return _key(m.group(1).split("/")[-2]), m.group(2).replace("-", " ") + rest


def _fields(text: str) -> list[tuple[str, str, str]]:
    """Every registry field a note writes, in its order (frontmatter first): (key, value,
    the text directly under it)."""
    meta, body = dating.frontmatter(text)
    out = []
    for k, v in meta.items():
        if k == "tags":
            out += [(*_tag(m), "") for t in (v if isinstance(v, list) else re.split(r"[,\s]+", v))
                    if (m := TAG_RE.search("#" + t.strip().lstrip("#")))]
        else:
            out.append((_key(k), ", ".join(map(str, v)) if isinstance(v, list) else str(v), ""))
    lines = body.splitlines()
    for i, raw in enumerate(lines):
        s, head = raw.strip(), HEADING_RE.match(raw.strip())
        if s.startswith("|"):
            out += _table_fields(lines, i)
            continue
        out += [(*_tag(m, re.sub(r"#\S+", "", s[m.end():])), _below(lines, i))
                for m in ([] if head else TAG_RE.finditer(s))]
        out += [(_key(k), v, "") for k, v in INLINE_RE.findall(s)]
        label = _plain(head.group(1) if head else s)
        if (m := FIELD_RE.match(label)) and _key(m.group(1)) in KEYS:
            out.append((_key(m.group(1)), m.group(2), _below(lines, i, heading=bool(head))))
        elif (head or label.endswith(":")) and _key(label.rstrip(":")) in KEYS:
            j = next((j for j in range(i + 1, len(lines)) if lines[j].strip()), None)
            if j is not None and not STOP_RE.match(lines[j].strip()):   # "## Status" over it
                out.append((_key(label.rstrip(":")), _plain(lines[j]), _below(lines, j)))
    return [(k, " ".join(v.split()), b) for k, v, b in out if v.strip()]


def _table_fields(lines: list[str], i: int) -> list[tuple[str, str, str]]:
    """A row `| Status | Paused |` (key, the rest of the row), or a header row naming
    fields (`| Project | Status | Why |`) over its first row of values."""
    cells = [_plain(c) for c in lines[i].strip().strip("|").split("|")]
    if TABLE_RULE_RE.match(lines[i].strip()) or len(cells) < 2:
        return []
    keys = [_key(c) for c in cells]
    if (i + 2 < len(lines) and TABLE_RULE_RE.match(lines[i + 1].strip())
            and (keys[0] not in KEYS or keys[1] in KEYS)):
        values = [_plain(c) for c in lines[i + 2].strip().strip("|").split("|")]
        return [(k, v, "") for k, v in zip(keys, values) if k in KEYS]
    return [(keys[0], " - ".join(c for c in cells[1:] if c), "")] if keys[0] in KEYS else []


def _why_on(value: str) -> str:
    """"on hold - waiting for X" -> "waiting for X"; "paused because X" -> "X"."""
    value = NOW_RE.split(value)[-1]
    m = WHY_SPLIT_RE.search(value)
    why = value[m.end():] if m else ""
    return re.sub(r"^because\s+", "", why.strip(" ).\u2013\u2014-"), flags=re.I)[:WHY_MAX]


def project(path: str, text: str, date: str | None) -> dict:
    """One project's row from its note: its first status field whose words name a
    status (else its first), why (that line's rest, the line(s) under it, a why field)."""
    fields = _fields(text)
    said = [f for f in fields if f[0] in STATUS_KEYS]
    first = next((f for f in said if _status(f[1]) != "unknown"), said[0] if said else None)
    raw = first[1] if first else ""
    why = (_why_on(raw) or first[2]) if first else ""
    why = why or next((v for k, v, _ in fields if k in WHY_KEYS), "")
    name = next((m.group(1).strip() for m in re.finditer(r"(?m)^#\s+(.+)$", text)), None)
    return {"name": name or path.rpartition("/")[2].rsplit(".", 1)[0],
            "status": _status(raw) if raw else "unknown", "said": raw, "why": why,
            "result": next((v for k, v, _ in fields if k in RESULT_KEYS), ""),
            "date": date, "path": path, "by": "field" if raw else "none"}


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


NAMED_RE = re.compile(r"\bstatus\b|\bhow(?:'s| is| are)\b|\bwhere (?:is|are)\b|\bstate of\b|"
                      r"\bprogress\b|\bgoing\b|\bhappened\b|^(?:is|are|has|have|was|did)\b")
LIST_RE = re.compile(r"\b(?:list|every|each|all|which|projects)\b")
FRAME = frozenset(("project", "status", "state"))   # textkit.terms of the frame words
VERSION_RE = re.compile(r"^(?:v\d+|\d+)$")      # "tide-pool-app v2", "thesis plan 2026-06"


def named(question: str, projects: list[dict]) -> list[dict]:
    """The projects a question names: all the words of a name or of its note's file name
    (less version, date and frame words: "v2", "project"); else at least half of them
    with one no other project's name holds. A name held whole wins over one in part."""
    q, names = set(textkit.terms(question)), []
    for p in projects:
        stem = p.get("path", "").rpartition("/")[2].rsplit(".", 1)[0]
        sets = [{t for t in textkit.terms(x) if not VERSION_RE.match(t)}
                for x in (p["name"], stem)]
        names.append((p, [ts - FRAME or ts for ts in sets if ts]))
    count = collections.Counter(t for _, sets in names for t in set().union(*sets))
    whole = [p for p, sets in names if any(ts <= q for ts in sets)]
    part = [p for p, sets in names if any(2 * len(ts & q) >= len(ts) and any(
        count[t] == 1 for t in ts & q) for ts in sets)]
    return whole or part


def asks(question: str, projects: list[dict]) -> dict | None:
    """What a registry question asks for, or None when it is not one: the projects it
    names ({"name"} for one, {"names"} for several), the projects of a status, or all;
    None for a question about one project the registry does not hold, as retrieval may."""
    if not projects:
        return None
    q = question.lower()
    hit = named(question, projects)
    if hit and (NAMED_RE.search(q) or re.search(r"\bprojects?\b", q)):
        return {"name": hit[0]["name"]} if len(hit) == 1 else {
            "names": [p["name"] for p in hit]}
    if not re.search(r"\bprojects?\b", q):
        return None
    status = _status(q)
    return {"status": status} if status != "unknown" else {} if LIST_RE.search(q) else None


def rows_for(want: dict, projects: list[dict]) -> list[dict]:
    """The rows a question wants: the named project(s) only, a status's, or all."""
    if "name" in want or "names" in want:
        names = {n.lower() for n in want.get("names") or [want["name"]]}
        return [p for p in projects if p["name"].lower() in names]
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
    return "\n".join(textkit.columns(head, body)) if body else NO_PROJECTS
