"""mcp_server: Verso as an MCP server on stdio, handing version-aware evidence to a host.

In:  newline-delimited JSON-RPC 2.0 on stdin, one message a line (an MCP host's client).
Out: one JSON-RPC response a line on stdout; diagnostics only on stderr.
Not: retrieval, version rules, judging or writing (harness.ask and its stages do all of
     it); no framework and no SDK at run time (the official SDK is the tests' client).

Protocol: initialize (2025-06-18, 2025-11-25: the client's version when listed, else the
newest), server/discover and the per-request _meta envelope of 2026-07-28, ping,
tools/list, tools/call, resources/list (paged), resources/read. Tools: search_notes,
note_history, ask, list_folders; resources: verso://index and verso://note/PATH for each
shareable note. Only folders marked privacy = "shareable" are searched or shown, and
mcp_tools.guard checks every path and note URI again right before a reply is written.

    python harness.py --mcp [--vault DIR] [--index DIR] [--backend auto|builtin|ollama]
    python harness.py --mcp-check [--vault DIR] [--index DIR]   # try it as an app would
"""

from __future__ import annotations

if __name__ == "__main__" and not __package__:   # a program in a checkout (not -m)
    import _checkout  # noqa: F401

import argparse
import json
import sys
import traceback
from importlib import metadata
from pathlib import Path

from verso import harness
from verso import ingest
from verso import mcp_tools
from verso import backends
from verso import models
from verso import store
from verso import store_load

HANDSHAKE_VERSIONS = ("2025-06-18", "2025-11-25")    # initialize; oldest first
MODERN_VERSIONS = ("2026-07-28",)                    # per-request _meta envelope
VERSION_META = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
ARGS_AS_RPC_ERROR = ("2025-06-18",)  # bad arguments: -32602 here, later an isError result
PARSE_ERROR, INVALID_REQUEST, NOT_FOUND, INVALID_PARAMS, INTERNAL = (
    -32700, -32600, -32601, -32602, -32603)
NO_RESOURCE, UNSUPPORTED_VERSION = -32002, -32022
MAX_LINE_BYTES = 4 * 1024 * 1024    # a longer message is refused, not buffered
PAGE = 100                          # resources per resources/list page
INSTRUCTIONS = ("Verso returns evidence from the user's markdown notes, not answers. "
                "Prefer passages with is_latest true for current facts, say when a value "
                "was superseded, and cite path and date. Only folders marked shareable in "
                "verso.toml are visible; list_folders says which.")
CAPABILITIES = {"tools": {"listChanged": False},
                "resources": {"listChanged": False, "subscribe": False}}


class RpcError(Exception):
    def __init__(self, code: int, message: str, data=None):
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


EXPECTED = (mcp_tools.ToolError, ValueError, OSError, store.IndexProblem, store.IndexBusy,
            models.BackendError)


def _line(e) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def _version() -> str:
    try:
        return metadata.version("verso")
    except metadata.PackageNotFoundError:
        return "checkout"


# ------------------------------------------------------------------------- the server


class Server:
    """State between messages: the vault, the backend, the last index (refreshed before
    each call) and the protocol version the handshake settled on."""

    def __init__(self, vault, index=None, backend="builtin", judge=None, config=None):
        """vault None: answer from the index as it is (its vault was not found); config:
        the vault config each refresh uses (None: the one the index keeps)."""
        self.vault = Path(vault) if vault is not None else None
        self.index_arg, self.be, self.judge, self.config = index, backend, judge, config
        self.idx, self.negotiated = None, None

    def index(self) -> store_load.Index:
        """The index brought up to date, as the harness does before each question; the
        copy in memory is kept while neither the vault nor the index files change."""
        if self.idx is None:
            self.idx, self.be = harness.load(self.index_arg, self.vault, self.be,
                                             self.judge, config=self.config)
        elif self.vault is not None:
            self.idx = ingest.refresh(self.vault, self.idx.dir, config=self.config,
                                      backend=self.be, current=self.idx)
            self.be.embedder = self.idx.embedder
        return self.idx

    def handle(self, msg) -> dict | None:
        """One decoded message -> its response (None for notifications and responses)."""
        if isinstance(msg, list):
            return _error(None, INVALID_REQUEST, "batches are not supported (MCP dropped "
                          "JSON-RPC batching in 2025-06-18): send one message a line")
        rid = msg.get("id") if isinstance(msg, dict) else None
        rid = rid if _valid_id(rid) else None
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or not (
                isinstance(msg.get("method"), str) or {"result", "error"} & set(msg)):
            return _error(rid, INVALID_REQUEST, 'not a JSON-RPC 2.0 message: it needs '
                          '"jsonrpc": "2.0" and a "method"')
        if "method" not in msg or "id" not in msg:
            return None              # a response, or a notification: nothing to answer
        if rid is None:
            return _error(None, INVALID_REQUEST, "the id must be a string or an integer")
        try:
            result = self._dispatch(msg["method"], msg.get("params", {}))
        except RpcError as e:
            return _error(rid, e.code, e.message, e.data)
        except EXPECTED as e:         # the index or a backend failed: one line
            return _error(rid, INTERNAL, _line(e))
        except Exception as e:        # a bug: the host gets one line, stderr the trace
            traceback.print_exc(file=sys.stderr)
            return _error(rid, INTERNAL, f"internal error ({type(e).__name__}): {_line(e)}")
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def _dispatch(self, method: str, params) -> dict:
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "params must be an object")
        modern = _envelope(params)
        handler = METHODS.get(method)
        if handler is None:
            raise RpcError(NOT_FOUND, f"method {method[:80]!r} not found")
        result = handler(self, params)
        return _modern(method, result) if modern or method == "server/discover" else result


def _valid_id(rid) -> bool:
    return isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))


def _error(rid, code: int, message: str, data=None) -> dict:
    err = {"code": code, "message": message} | ({"data": data} if data is not None else {})
    return {"jsonrpc": "2.0", "id": rid, "error": err}


def _envelope(params: dict) -> bool:
    """A 2026-07-28 request (its version in _meta)? Unsupported versions: -32022."""
    meta = params.get("_meta")
    asked = meta.get(VERSION_META) if isinstance(meta, dict) else None
    if asked is None:
        return False
    if asked not in MODERN_VERSIONS:
        raise RpcError(UNSUPPORTED_VERSION, f"protocol version {str(asked)[:40]!r} is not "
                       "supported in the request envelope",
                       {"supported": list(MODERN_VERSIONS), "requested": str(asked)})
    return True


def _modern(method: str, result: dict) -> dict:
    """The fields 2026-07-28 results carry: resultType, and cache hints on lists/reads."""
    out = {**result, "resultType": "complete"}
    if method in ("server/discover", "tools/list", "resources/list", "resources/read",
                  "resources/templates/list"):
        out |= {"cacheScope": "private", "ttlMs": 0}    # notes change: never cached
    return out


def _info() -> dict:
    return {"name": "verso", "title": "Verso", "version": _version()}


def _initialize(srv: Server, params: dict) -> dict:
    asked = params.get("protocolVersion")
    if not isinstance(asked, str):
        raise RpcError(INVALID_PARAMS, "initialize needs params.protocolVersion (a string)")
    srv.negotiated = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {"protocolVersion": srv.negotiated, "capabilities": CAPABILITIES,
            "serverInfo": _info(), "instructions": INSTRUCTIONS}


def _discover(srv: Server, params: dict) -> dict:
    return {"supportedVersions": [*HANDSHAKE_VERSIONS, *MODERN_VERSIONS],
            "capabilities": CAPABILITIES, "instructions": INSTRUCTIONS,
            "_meta": {SERVER_INFO_META: _info()}}


def _call_tool(srv: Server, params: dict) -> dict:
    name, args = params.get("name"), params.get("arguments", {})
    tool = next((t for t in mcp_tools.TOOLS if t["name"] == name), None)
    if tool is None:
        raise RpcError(INVALID_PARAMS, f"unknown tool {str(name)[:80]!r}: tools/list "
                       f"names {', '.join(t['name'] for t in mcp_tools.TOOLS)}")
    if not isinstance(args, dict):
        raise RpcError(INVALID_PARAMS, "arguments must be an object")
    problem = _check_args(tool["inputSchema"], args)
    if problem and srv.negotiated in ARGS_AS_RPC_ERROR:
        raise RpcError(INVALID_PARAMS, f"{name}: {problem}")
    try:
        if problem:
            raise mcp_tools.ToolError(f"{name}: {problem}")
        out = mcp_tools.RUN[name](srv, args)
        mcp_tools.guard(srv.idx, out)
    except EXPECTED as e:
        return {"content": [{"type": "text", "text": _line(e)}], "isError": True}
    text = json.dumps(out, ensure_ascii=False, indent=1)
    return {"content": [{"type": "text", "text": text}], "structuredContent": out,
            "isError": False}


def _check_args(schema: dict, args: dict) -> str | None:
    """Why args do not fit the tool's inputSchema (the subset our schemas use), or None."""
    props = schema["properties"]
    for key in args:
        if key not in props:
            return f"unknown argument {key[:40]!r} (known: {', '.join(props) or 'none'})"
    for key in schema["required"]:
        if key not in args:
            return f"missing argument {key!r}"
    for key, value in args.items():
        p, kind = props[key], _json_type(value)
        if p["type"] != kind and not (p["type"] == "number" and kind == "integer"):
            article = "an" if p["type"] == "integer" else "a"
            return f"{key} must be {article} {p['type']}, not {kind}"
        if "enum" in p and value not in p["enum"]:
            return f"{key} must be one of {', '.join(p['enum'])}"
        low, high = p.get("minimum", value), p.get("maximum", value)
        if kind == "integer" and not low <= value <= high:
            return f"{key} must be between {p['minimum']} and {p['maximum']}, not {value}"
        if kind == "string" and len(value) > p.get("maxLength", len(value)):
            return f"{key} is {len(value)} characters; at most {p['maxLength']}: shorten it"
        if kind == "string" and not value.strip():
            return f"{key} is empty"
    return None


def _json_type(v) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
        return "integer"
    return {float: "number", str: "string", type(None): "null", list: "array",
            dict: "object"}.get(type(v), "unknown")


def _list_resources(srv: Server, params: dict) -> dict:
    cursor = params.get("cursor") or "0"
    if not (isinstance(cursor, str) and cursor.isdigit()):
        raise RpcError(INVALID_PARAMS, "invalid cursor: pass back a nextCursor unchanged")
    start, notes = int(cursor), mcp_tools.shareable_notes(srv.index())
    page = [mcp_tools.resource(f) for f in notes[start:start + PAGE]]
    if start == 0:
        page.insert(0, {"uri": mcp_tools.INDEX_URI, "name": "index",
                        "title": "What Verso has indexed", "mimeType": "application/json"})
    more = {"nextCursor": str(start + PAGE)} if start + PAGE < len(notes) else {}
    return _guarded(srv, {"resources": page, **more})


def _read_resource(srv: Server, params: dict) -> dict:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise RpcError(INVALID_PARAMS, "resources/read needs params.uri (a string)")
    try:
        text, mime = mcp_tools.read(srv.index(), uri)
    except mcp_tools.Missing as e:
        raise RpcError(NO_RESOURCE, _line(e), {"uri": uri[:200]}) from None
    return _guarded(srv, {"contents": [{"uri": uri, "mimeType": mime, "text": text}]})


def _guarded(srv: Server, out: dict) -> dict:
    try:
        mcp_tools.guard(srv.idx, out)
    except mcp_tools.ToolError as e:
        raise RpcError(INTERNAL, _line(e)) from None
    return out


METHODS = {"initialize": _initialize, "server/discover": _discover,
           "ping": lambda srv, params: {},
           "tools/list": lambda srv, params: {"tools": mcp_tools.TOOLS},
           "tools/call": _call_tool, "resources/list": _list_resources,
           "resources/read": _read_resource,
           "resources/templates/list": lambda srv, params: {"resourceTemplates": []}}


# -------------------------------------------------------------------------- stdio loop


def serve(srv: Server, stdin=None, stdout=None) -> int:
    """Answer one message a line until stdin closes; 0 on EOF or when the host leaves."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    while raw := stdin.readline(MAX_LINE_BYTES + 1):
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := stdin.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            reply = _error(None, INVALID_REQUEST, f"message over {MAX_LINE_BYTES} bytes")
        elif not raw.strip():
            continue
        else:
            try:
                msg = json.loads(raw)
            except ValueError:       # bad JSON or bad UTF-8
                reply = _error(None, PARSE_ERROR, "parse error: each line must be one "
                               "JSON-RPC message in UTF-8 JSON")
            else:
                reply = srv.handle(msg)
        if reply is not None:
            try:
                stdout.write(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
                stdout.flush()
            except BrokenPipeError:
                return 0             # the host went away
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness.py --mcp", description=__doc__.split("\n")[0])
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--mcp", action="store_true", help="serve MCP on stdin/stdout")
    mode.add_argument("--mcp-check", action="store_true",
                      help="start the server as an app would and try every tool once")
    p.add_argument("--vault", default=None, help="notes folder (default: the vault the "
                   "index was built from; the sample vault when there is no index yet)")
    p.add_argument("--index", default=None,
                   help="index dir (default: the one ingested last)")
    p.add_argument("--config", metavar="FILE", default=None, help="vault config for "
                   "each refresh (default: the one the index keeps, else VAULT/verso.toml)")
    p.add_argument("--backend", choices=("auto", "builtin", "ollama"), default="auto")
    p.add_argument("--judge", choices=backends.JUDGES, default=None)
    p.add_argument("--timeout", type=float, default=None, help="seconds one Ollama request may take (default 120, or $VERSO_OLLAMA_TIMEOUT)")
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:    # as the harness: --vault, else the index's own vault, else the sample vault
        models.use_timeout(args.timeout)
        index, vault, notes = harness.resolve(args.index, args.vault)
    except (ValueError, store.IndexProblem, models.BackendError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    vault = vault.expanduser().resolve() if vault else None
    if args.mcp_check:
        from verso import mcp_check
        return mcp_check.run(vault, args)
    if vault and not vault.is_dir():
        print(f"error: vault {vault} is not a folder: pass --vault DIR", file=sys.stderr)
        return 2
    for note in notes:
        print(note, file=sys.stderr)
    try:
        be = backends.load_backend(args.backend, judge=args.judge)
    except models.BackendError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"verso mcp: serving {vault or 'the index as it is'} on stdio ({be.note})",
          file=sys.stderr)
    try:
        return serve(Server(vault, index, be, config=args.config))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
