"""mcp_check: start the MCP server the way an app does and try everything once.

In:  the server's options (vault, index, backend, judge), from `harness.py --mcp-check`.
Out: a short pass/fail report on stdout, one line per step; exit 0 when all pass.
Not: a test suite (tests/test_mcp.py drives the server with the official SDK client);
     this speaks the same newline-delimited JSON-RPC with the stdlib only.

    python harness.py --mcp-check [--vault DIR] [--index DIR] [--backend builtin]
"""

from __future__ import annotations

import json
import queue
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HARNESS = Path(__file__).resolve().parent / "harness.py"
STEP_TIMEOUT = 300.0     # seconds per reply: the first tool call may build the index
EXIT_TIMEOUT = 10.0      # seconds the server may take to exit once stdin closes
TOOLS = ("search_notes", "note_history", "ask", "list_projects", "project_status",
         "list_folders")


class Client:
    """A server subprocess and one JSON-RPC request at a time over its pipes."""

    def __init__(self, cmd: list[str]):
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, method: str, params: dict | None = None, notify=False) -> dict | None:
        msg = {"jsonrpc": "2.0", "method": method, "params": params or {}}
        if not notify:
            self.next_id += 1
            msg["id"] = self.next_id
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        self.proc.stdin.flush()
        if notify:
            return None
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if line is None:
                self.lines.put(None)   # stays closed for the steps after this one
                raise RuntimeError("the server closed stdout: " + self.stderr_tail())
            reply = json.loads(line)   # anything but JSON on stdout is a failure
            if reply.get("id") == msg["id"]:
                return reply

    def stderr_tail(self) -> str:
        self.err.seek(0)
        lines = self.err.read().decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else "(nothing on stderr)"

    def close(self) -> int | None:
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass                       # it has exited already
        try:
            return self.proc.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None


def _tool(client: Client, name: str, args: dict) -> dict:
    reply = client.send("tools/call", {"name": name, "arguments": args})
    if "error" in reply:
        raise RuntimeError(f"JSON-RPC error {reply['error']['code']}: "
                           f"{reply['error']['message']}")
    result = reply["result"]
    if result.get("isError"):
        raise RuntimeError(result["content"][0]["text"])
    return result["structuredContent"]


def _steps(client: Client):
    """(name, function -> detail) in order; a later step may use an earlier result."""
    seen: dict = {}

    def initialize():
        r = client.send("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                       "clientInfo": {"name": "verso-mcp-check",
                                                      "version": "1"}})["result"]
        client.send("notifications/initialized", notify=True)
        return f"protocol {r['protocolVersion']}, server {r['serverInfo']['name']}"

    def tools_list():
        names = [t["name"] for t in client.send("tools/list")["result"]["tools"]]
        if sorted(names) != sorted(TOOLS):
            raise RuntimeError(f"tools {names}, expected {list(TOOLS)}")
        return ", ".join(names)

    def list_folders():
        folders = _tool(client, "list_folders", {})["folders"]
        open_ = [f["folder"] for f in folders if f["privacy"] == "shareable"]
        seen["open"] = open_
        return f"{len(folders)} folders, shareable: {', '.join(open_) or 'none'}"

    def resources_list():
        res = client.send("resources/list")["result"]["resources"]
        seen["notes"] = [r for r in res if r["uri"].startswith("verso://note/")]
        return f"{len(res)} on the first page"

    def search_notes():
        note = (seen.get("notes") or [{}])[0]
        query = note.get("title") or "notes"
        r = _tool(client, "search_notes", {"query": query})
        if seen.get("notes") and not r["passages"]:
            raise RuntimeError(f"no passage for {query!r}, the title of a shareable note")
        return f"{len(r['passages'])} passages for {query!r}, time mode {r['time_mode']}"

    def note_history():
        if not seen.get("notes"):
            return "skipped: no shareable note (list_folders says how to open a folder)"
        r = _tool(client, "note_history", {"path": seen["notes"][0]["name"]})
        n = len(r['versions'])
        return f"{n} version{'' if n == 1 else 's'} of {r['path']}"

    def ask():
        r = _tool(client, "ask", {"question": "What do my notes say about "
                                  + ((seen.get("notes") or [{}])[0].get("title") or "this")})
        return f"verdict {r['verdict']}, {len(r['citations'])} citations"

    def list_projects():
        r = _tool(client, "list_projects", {})
        return r["note"] or f"{len(r['projects'])} shareable projects"

    def read_index():
        text = client.send("resources/read", {"uri": "verso://index"})["result"]
        counts = json.loads(text["contents"][0]["text"])
        return f"{counts['notes']['shareable']} shareable notes, {counts['chunks']} chunks"

    def ping():
        return "ok" if client.send("ping")["result"] == {} else "unexpected reply"

    return [("initialize", initialize), ("tools/list", tools_list),
            ("list_folders", list_folders), ("resources/list", resources_list),
            ("search_notes", search_notes), ("note_history", note_history), ("ask", ask),
            ("list_projects", list_projects),
            ("resources/read", read_index), ("ping", ping)]


def run(vault: Path | None, args) -> int:
    """The report for the server these options start; 0 when every step passes."""
    cmd = [sys.executable, str(HARNESS), "--mcp", "--backend", args.backend]
    cmd += ["--vault", str(vault)] if vault else []
    cmd += ["--index", str(Path(args.index).expanduser().resolve())] if args.index else []
    cmd += ["--judge", args.judge] if args.judge else []
    print(f"starting: {shlex.join(cmd)}")
    client, failed = Client(cmd), 0
    for name, step in _steps(client):
        started = time.perf_counter()
        try:
            detail, ok = step(), True
        except (RuntimeError, KeyError, TypeError, ValueError, OSError, queue.Empty) as e:
            detail, ok = (str(e) or "no reply in time").splitlines()[0][:200], False
            failed += 1
        ms = (time.perf_counter() - started) * 1000
        print(f"  {'pass' if ok else 'FAIL'}  {name:<15}{ms:>8.0f} ms  {detail}")
        if not ok:
            print("  later steps not run")
            break
    code = client.close()
    ok = code == 0
    failed += not ok
    print(f"  {'pass' if ok else 'FAIL'}  {'exit on EOF':<15}{'':>11}  exit code {code}")
    if failed:
        print(f"{failed} step(s) failed: fix the first one before wiring up an app")
    else:
        print(f"all steps passed; add it to Claude Code with:\n  claude mcp add verso -- "
              f"{shlex.join(cmd)}")
    return 1 if failed else 0
