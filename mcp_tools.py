"""mcp_tools: what the MCP tools and resources return, and the privacy guard.

In:  a refreshed Index (and, for search_notes and ask, the harness pipeline on it).
Out: plain dicts matching each tool's outputSchema (TOOLS); resource listings and texts.
Not: the protocol (mcp_server.py), ranking, version rules or writing (harness.ask).

Privacy: retrieval runs with include_private=False, private notes are never listed or
read, and guard() checks every path, superseded_by, copy_of and note URI of a reply
against the index's privacy flags right before mcp_server writes it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import quote, unquote

from verso import asof
from verso import evidence
from verso import file_columns
from verso import harness
from verso import registry
from verso import retrieve
from verso import route
from verso import vault_walk
from verso import version

INDEX_URI, NOTE_URI = "verso://index", "verso://note/"
OPEN_LINE = '[folders.{}]\nprivacy = "shareable"'   # a TOML table: two lines
T = {t: {"type": t} for t in ("string", "integer", "number", "boolean")}
OPT = {"type": ["string", "null"]}


def _obj(props: dict, **extra) -> dict:
    """A JSON Schema object whose properties are all required (unless extra says not)."""
    return {"type": "object", "properties": props, "required": list(props), **extra}


def _arr(items: dict) -> dict:
    return {"type": "array", "items": items}


PASSAGE = _obj({k: T["string"] for k in ("path", "heading", "date", "found_by", "text")}
               | {"is_latest": T["boolean"], "superseded_by": OPT, "why": OPT,
                  "relevance": T["number"]})
SET_ASIDE = _obj({k: T["string"] for k in ("path", "heading", "date", "reason", "text")}
                 | {"relevance": T["number"]})
VERSION = _obj({"kind": {"enum": ["version", "entry"]}, "path": T["string"],
                "date": T["string"], "is_latest": T["boolean"], "unchanged": T["integer"],
                "passages": {"type": "array", "items": _obj({"heading": T["string"],
                                                             "text": T["string"]})}})
PROJECT = _obj({"name": T["string"], "status": T["string"], "why": T["string"],
                "result": T["string"], "date": OPT, "path": T["string"]})
FOLDER = _obj({"folder": T["string"], "privacy": {"enum": ["private", "shareable"]},
               "versioned": T["boolean"], "notes": T["integer"], "copies": T["integer"],
               "open_with": OPT})
SOURCE = _obj({"path": T["string"], "heading": T["string"], "date": T["string"],
               "is_latest": T["boolean"], "score": T["number"]})
STAGE = _obj({"name": T["string"], "ms": T["number"], "input_tokens": T["integer"],
              "output_tokens": T["integer"], "dollars": T["number"]})
QUERY = {"type": "string", "minLength": 1, "maxLength": harness.MAX_QUESTION_CHARS}

TOOLS = [
    {"name": "search_notes", "title": "Search notes (version-aware evidence)",
     "description": "Evidence from the user's shareable notes for a query: one passage "
     "per note (the sections that answer, in note order, each later one under its '## "
     "heading trail'; a short note whole; '…' where lines are left out), notes ranked by "
     "Verso's fitted ranker, filled to about `budget` words (default "
     f"{evidence.MCP_WORDS}; ask for more, up to 5000, when your context allows, or read "
     "a whole note as the resource verso://note/PATH). Each passage: path, heading, date "
     "('undated' = file time only), is_latest, superseded_by and why (a newer version or "
     "log entry: answer from the newer one, cite the older only for what only it says; "
     "a newer dated statement in another note: a fitted guess that the later note "
     "replaced the value, right more often than wrong: read both); older versions are "
     "labelled, never left out; a log's older entry (is_latest false) with no "
     "superseded_by stands: no later entry was found answering the same; as of a date, "
     "a passage not in force then is handed on with is_latest false and a why ('not yet "
     "written on DAY ...', or undated and 'not known to be in force'): do not answer "
     "from it. "
     "time_mode: present = current values, history = how something changed (every "
     "version that names the asked terms, oldest first), any = no filter, as_of = the "
     "notes as they stood on the date given in as_of (YYYY-MM-DD), auto = Verso decides "
     "from the query. k: at most this many notes (default: as many as the budget holds).",
     "inputSchema": _obj({"query": QUERY, "time_mode": {
         "type": "string", "enum": ["auto", "present", "history", "any", "as_of"],
         "default": "auto"},
         "as_of": {"type": "string", "pattern": r"^\d{4}-\d{2}(-\d{2})?$"},
         "budget": {"type": "integer", "minimum": 50, "maximum": 5000},
         "k": {"type": "integer", "minimum": 1, "maximum": 20}},
         additionalProperties=False) | {"required": ["query"]},
     "outputSchema": _obj({"time_mode": T["string"], "chosen_by": T["string"],
                           "as_of": OPT, "passages": _arr(PASSAGE),
                           "set_aside": _arr(SET_ASIDE), "note": OPT,
                           "also_searched": _arr(T["string"])})},
    {"name": "note_history", "title": "Every version of a note",
     "description": "Every version of a note's family (v1/v2/dated copies) and every "
     "dated entry of a log, oldest first, each with date, path and the passages that "
     "differ from the version before.",
     "inputSchema": _obj({"path": {"type": "string", "minLength": 1, "maxLength": 1000}},
                         additionalProperties=False),
     "outputSchema": _obj({"path": T["string"], "family": T["string"],
                           "versions": _arr(VERSION),
                           "copies": _arr(_obj({"path": T["string"],
                                                "copy_of": T["string"]}))})},
    {"name": "ask", "title": "Ask Verso (its own cited answer)",
     "description": "Verso's whole pipeline on the shareable notes: a cited answer, the "
     "verdict (SHIP: checked and calibrated as right; ESCALATE: shown marked 'Not sure', "
     "check the cited lines; ABSTAIN: the notes to look in), its confidence and the "
     "calibration that judged it, sources and per-stage cost.",
     "inputSchema": _obj({"question": QUERY}, additionalProperties=False),
     "outputSchema": _obj({"answer": T["string"], "verdict": T["string"],
                           "shown": T["string"], "confidence": {"type": ["number", "null"]},
                           "checks_passed": {"type": "boolean"},
                           "look_at": _arr(_obj({"id": T["string"], "path": T["string"],
                                                 "date": T["string"], "line": T["string"]})),
                           "abstain_reason": OPT, "time_mode": T["string"],
                           "citations": _arr(_obj({"id": T["string"], "path": T["string"],
                                                   "date": T["string"]})),
                           "sources": _arr(SOURCE), "stages": _arr(STAGE),
                           "backend": T["string"],
                           "calibration": {"type": ["object", "null"]},
                           "alternate": {"type": ["object", "null"]}})},
    {"name": "list_projects", "title": "The project registry",
     "description": "Every project of the registry folders (verso.toml [registry]) in a "
     "shareable folder, from each project note's latest version: name, status (active, "
     "paused, done, abandoned, planned or unknown), why, key result, date, source note.",
     "inputSchema": _obj({"status": {"type": "string", "enum": list(registry.STATUSES)}},
                         additionalProperties=False) | {"required": []},
     "outputSchema": _obj({"projects": _arr(PROJECT), "note": OPT})},
    {"name": "project_status", "title": "One project's status",
     "description": "One project's registry row by its name (as list_projects gives it).",
     "inputSchema": _obj({"name": {"type": "string", "minLength": 1, "maxLength": 300}},
                         additionalProperties=False) | {"required": ["name"]},
     "outputSchema": PROJECT},
    {"name": "list_folders", "title": "Folders and their privacy",
     "description": "The vault's folders with privacy, versioned setting and note count, "
     "and for a private folder the verso.toml line that would open it.",
     "inputSchema": _obj({}, additionalProperties=False),
     "outputSchema": _obj({"config": T["string"], "folders": _arr(FOLDER)})},
]


class ToolError(Exception):
    """A tool that cannot answer: one line for the host, as an isError result."""


class Missing(ToolError):
    """No such resource (or a private one): JSON-RPC error -32002."""


# ---------------------------------------------------------------------------- privacy


def shareable(idx, path: str) -> bool:
    f = idx.by_path.get(path)
    return f is not None and f.get("private") is False


def guard(idx, payload) -> None:
    """The last check before a message is written: every path, superseded_by and note
    URI in payload must name a note of a shareable folder; else nothing is sent."""
    stack = [payload]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
            for key in ("path", "superseded_by", "copy_of", "uri"):
                value = x.get(key)
                if not isinstance(value, str) or value == INDEX_URI:
                    continue
                path = unquote(value[len(NOTE_URI):]) if key == "uri" else value
                path = path.split(version.SECTION_MARK)[0]
                named = key != "uri" or value.startswith(NOTE_URI)
                if named and not shareable(idx, path):
                    print(f"verso mcp: privacy guard stopped a reply naming {path}",
                          file=sys.stderr)
                    raise ToolError("privacy check failed: a passage from a private folder "
                                    "reached the reply, so nothing was sent")


def _open_with(idx, folder: str) -> str:
    """"add to CONFIG:" and the table that opens this one folder (valid TOML)."""
    key = (folder if folder and all(c.isalnum() or c in "_-" for c in folder)
           else json.dumps(folder))
    cfg = (idx.manifest.get("config")
           or str(Path(idx.manifest["vault"]) / vault_walk.CONFIG_NAME))
    return f"add to {cfg}:\n{OPEN_LINE.format(key)}"


def _nothing_shareable(idx) -> str | None:
    """Why every search comes back empty: no note of the index is shareable. It names the
    folders and the form that opens one, NAME a placeholder: never a ready line per
    folder, which pasted whole would share the private ones too."""
    if any(x is False for x in file_columns.column(idx.files, "private")):
        return None
    top = sorted({p.partition("/")[0] for p in file_columns.column(idx.files, "path") if "/" in p})
    cfg = (idx.manifest.get("config")
           or str(Path(idx.manifest["vault"]) / vault_walk.CONFIG_NAME))
    folders = ", ".join(top) if top else "none: the notes sit at the vault's top level"
    return (f"no folder is shareable, so nothing is searched (folders: {folders}). Every "
            f"folder stays private until {cfg} opens it; to share one, add\n"
            '[folders.NAME]\nprivacy = "shareable"\n'
            "with NAME the one folder you choose, one such table per folder; open only "
            "folders you want an app to read")


# ------------------------------------------------------------------------------ tools


def search_notes(srv, args: dict) -> dict:
    idx = srv.index()
    mode = args.get("time_mode", "auto")
    if (mode == "as_of") != ("as_of" in args):
        raise ToolError("time_mode as_of and an as_of date (YYYY-MM-DD) go together")
    try:
        day = asof.parse(args["as_of"]) if "as_of" in args else None
    except ValueError as e:
        raise ToolError(str(e)) from None
    out = {"time_mode": mode, "as_of": day,
           "chosen_by": "router" if mode == "auto" else "caller",
           "passages": [], "set_aside": [], "note": _nothing_shareable(idx),
           "also_searched": []}
    if out["note"]:
        if mode == "auto":     # the mode a search would have used
            out["time_mode"] = route.route(args["query"], idx.date_order)["time_mode"]
        return out
    a = harness.ask(args["query"], index=idx, backend=srv.be,
                    keep=args.get("k"), budget=args.get("budget", evidence.MCP_WORDS),
                    mode=None if mode in ("auto", "as_of") else mode,
                    as_of=day, include_private=False,
                    write=False)
    trace = {c["id"]: c for c in a.candidates.get("version", [])}
    for s in a.sources:
        out["passages"].append({
            "path": s["path"], "heading": s["heading"], "date": s["date"],
            "is_latest": s["is_latest"], "superseded_by": s["superseded_by"],
            "why": s["why"], "found_by": s["found_by"],
            "relevance": s["score"], "text": s["text"]})
    if a.time_mode == "history":     # each document's versions oldest first (undated last)
        family = {s["path"]: idx.chunks[s["id"]]["family"] for s in a.sources}
        rank = {}
        for p in out["passages"]:
            rank.setdefault(family[p["path"]], len(rank))
        out["passages"].sort(key=lambda p: (rank[family[p["path"]]], p["date"] == "undated",
                                            p["date"]))
    for c in trace.values():
        if c.get("dropped"):
            out["set_aside"].append({
                "path": c["path"], "heading": c["heading"], "date": c["date"],
                "reason": c["dropped"], "relevance": round(float(c["relevance"] or 0), 4),
                "text": idx.chunks[c["id"]]["text"]})
    out["time_mode"], out["note"], out["as_of"] = a.time_mode, a.abstain_reason, a.as_of
    out["also_searched"] = list(a.search_words)   # the server model's wordings of the query
    return out


def _find_note(idx, path: str) -> str:
    """The shareable note a path names (exact, or ignoring case and a missing .md). A
    private note is answered exactly as a missing one: a client cannot probe which
    private files exist."""
    want = path.strip().strip("/").replace("\\", "/")
    for p in (want, want + ".md"):
        if p in idx.by_path and shareable(idx, p):
            return p
    folded = [p for p in idx.by_path if p.lower() in (want.lower(), want.lower() + ".md")
              and shareable(idx, p)]
    if len(folded) == 1:
        return folded[0]
    raise ToolError(f"no note {path[:200]!r} in the index: give a vault-relative path like "
                    "'folder/name.md' (resources/list lists the shareable notes)")


def note_history(srv, args: dict) -> dict:
    idx = srv.index()
    path = _find_note(idx, args["path"])
    path = idx.by_path[path].get("duplicate_of") or path
    if not shareable(idx, path):
        raise ToolError(f"{args['path'][:200]!r} is an exact copy of a note in a private "
                        "folder; Verso keeps the text under that note and shows no history")
    family = idx.by_path[path]["family"]
    members = [idx.files[i] for i, fam in enumerate(file_columns.column(idx.files, "family"))
               if fam == family]
    ids = retrieve.chunk_ids_by_path(idx)
    versions, before = [], set()
    live = [f for f in members if not f["duplicate_of"]]
    for f in sorted(live, key=version._display_key):      # oldest first, undated last
        chunks = [idx.chunks[i] for i in ids.get(f["path"], [])]
        body = [c for c in chunks if not c.get("section_date")]
        if body or not chunks:
            texts = [" ".join(c["text"].split()) for c in body]
            new = [c for c, t in zip(body, texts) if t not in before]
            versions.append(_version_item("version", f["path"], f, f.get("is_latest"),
                                          new, len(body) - len(new)))
            before = set(texts)
        for day in sorted({c["section_date"] for c in chunks if c.get("section_date")}):
            entry = [c for c in chunks if c.get("section_date") == day]
            versions.append(_version_item("entry", f["path"], {"date": day},
                                          bool(entry[0].get("entry_latest")), entry, 0))
    copies = [{"path": f["path"], "copy_of": f["duplicate_of"]}
              for f in members if f["duplicate_of"]]
    return {"path": path, "family": family, "versions": versions, "copies": copies}


def _version_item(kind, path, f, latest, chunks, unchanged) -> dict:
    weak = f.get("date_source") == version.WEAK_SOURCE
    day = "undated" if weak else f.get("date") or "undated"
    return {"kind": kind, "path": path, "date": day, "is_latest": bool(latest),
            "unchanged": unchanged,
            "passages": [{"heading": c["heading"], "text": c["text"]} for c in chunks]}


def ask(srv, args: dict) -> dict:
    idx = srv.index()
    if why := _nothing_shareable(idx):
        raise ToolError(why)
    a = harness.ask(args["question"], index=idx, backend=srv.be, include_private=False)
    return {"answer": a.answer, "verdict": a.verdict, "shown": a.shown,
            "confidence": a.confidence, "checks_passed": bool(a.checks.get("passed")),
            "look_at": a.look_at, "abstain_reason": a.abstain_reason,
            "time_mode": a.time_mode, "citations": a.citations,
            "sources": [{k: s[k] for k in SOURCE["properties"]} for s in a.sources],
            "stages": a.stages, "backend": a.backend,
            # which calibration judged it ({"key", "source"}: "shipped", its file, or
            # null for a model not yet calibrated); the other reader's answer, if shown
            "calibration": (a.checks.get("calibration") or {}).get("by"),
            "alternate": a.alternate and {"by": a.alternate["by"],
                                          "answer": a.alternate["answer"]}}


def list_folders(srv, args: dict) -> dict:
    idx = srv.index()
    folders: dict[str, dict] = {}
    for f in idx.files:
        name = f["path"].rpartition("/")[0]
        d = folders.setdefault(name, {
            "folder": name or ".", "privacy": "private" if f["private"] else "shareable",
            "versioned": bool(f["versioned"]), "notes": 0, "copies": 0,
            "open_with": _open_with(idx, name) if f["private"] else None})
        d["copies" if f["duplicate_of"] else "notes"] += 1
    cfg = idx.manifest.get("config") or f"none (write {vault_walk.CONFIG_NAME} in the vault)"
    return {"config": cfg, "folders": [folders[k] for k in sorted(folders)]}


def list_projects(srv, args: dict) -> dict:
    """The project registry's rows in shareable folders (one status, if asked)."""
    idx = srv.index()
    rows = harness.shareable_projects(idx)
    if args.get("status"):
        rows = [p for p in rows if p["status"] == args["status"]]
    return {"projects": [_project(p) for p in rows],
            "note": None if idx.manifest.get("projects") else
            "no registry: name its folders in verso.toml, [registry] folders = [\"projects\"]"}


def project_status(srv, args: dict) -> dict:
    """One project's row (shareable folders only), matched by name, case-insensitive."""
    idx = srv.index()
    want = args["name"].strip().lower()
    rows = [p for p in harness.shareable_projects(idx) if p["name"].lower() == want]
    if not rows:
        raise ToolError(f"no shareable project named {args['name'][:200]!r}: "
                        "list_projects names them all")
    return _project(rows[0])


def _project(p: dict) -> dict:
    return {k: p.get(k) or ("" if k != "date" else None)
            for k in ("name", "status", "why", "result", "date", "path")}


RUN = {"search_notes": search_notes, "note_history": note_history, "ask": ask,
       "list_folders": list_folders, "list_projects": list_projects,
       "project_status": project_status}


# -------------------------------------------------------------------------- resources


def shareable_notes(idx) -> list[dict]:
    """The shareable notes in path order, cached on this index."""
    if "mcp_notes" not in idx.cache:
        idx.cache["mcp_notes"] = sorted((f for f in idx.files if f.get("private") is False),
                                        key=lambda f: f["path"])
    return idx.cache["mcp_notes"]


def resource(f: dict) -> dict:
    day = "undated" if f["date_source"] == version.WEAK_SOURCE else f["date"]
    tag = "copy of " + f["duplicate_of"] if f["duplicate_of"] else (
        "latest version" if f["is_latest"] else "older version")
    return {"uri": NOTE_URI + quote(f["path"]), "name": f["path"], "title": f["title"],
            "mimeType": "text/markdown" if f["path"].endswith(".md") else "text/plain",
            "description": f"{day}, {tag}", "size": f["size"]}


def read(idx, uri: str) -> tuple[str, str]:
    """(text, MIME type) of verso://index or of a shareable note's URI; else Missing."""
    if uri == INDEX_URI:
        return json.dumps(summary(idx), indent=1), "application/json"
    path = unquote(uri[len(NOTE_URI):]) if uri.startswith(NOTE_URI) else None
    if path not in idx.by_path or not shareable(idx, path):    # private: as if missing
        raise Missing(f"no resource {uri[:200]!r}: resources/list names them")
    text = (Path(idx.manifest["vault"]) / path).read_text(encoding="utf-8",
                                                            errors="replace")
    return text, resource(idx.by_path[path])["mimeType"]


def summary(idx) -> dict:
    """verso://index: what is indexed, counted over the shareable notes only."""
    notes = shareable_notes(idx)
    live = [f for f in notes if not f["duplicate_of"]]
    families: dict[str, int] = {}
    for f in live:
        families[f["family"]] = families.get(f["family"], 0) + 1
    dated = sorted(f["date"] for f in live if f["date_source"] != version.WEAK_SOURCE)
    logs = {c["path"] for c in idx.chunks if c.get("section_date") and not c["private"]}
    m = idx.manifest
    return {"vault": m["vault"], "index": str(idx.dir), "backend": m.get("backend"),
            "embedder": m["embedder"], "built": m.get("created"),
            "notes": {"shareable": len(live), "copies": len(notes) - len(live),
                      "private_left_out": sum(map(bool, file_columns.column(idx.files,
                                                                            "private")))},
            "chunks": sum(1 for c in idx.chunks if not c["private"]),
            "families": len(families),
            "families_with_versions": sum(1 for n in families.values() if n > 1),
            "dated_logs": len(logs),
            "date_range": {"first": dated[0], "last": dated[-1]} if dated else None,
            "undated_notes": len(live) - len(dated)}


