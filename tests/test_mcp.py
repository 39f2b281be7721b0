"""mcp_server: the MCP server as a subprocess, driven by the official SDK client
(stdio_client + ClientSession) the way Claude Code drives it, and by raw JSON lines for
the faults no client library sends. One server process per scripted session; the vault is
a temporary copy of the sample vault and the index a temporary dir."""

import asyncio
import hashlib
import json
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import tomllib
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from verso import harness
from verso import mcp_server
from verso import mcp_tools

ROOT = Path(__file__).resolve().parent.parent
MARKER = "VERSO-PRIVATE-MARKER-7f3a"
PRIVATE_NOTE = "health/physio notes.md"
PROBES = [MARKER, "physio clinic ref", "Achilles tendinopathy eccentric heel drops",
          "What did Hannah at the physio clinic find?"]
RATE_Q = "What is Maren's current day rate?"
RATES = ["work/rates card (March 2026).md", "work/rates card_2026-07.md",
         "work/rates card 2026-10-05.md"]
RETAINERS = ["work/2026-04-03 kittiwake retainer.md", "work/kittiwake retainer_2026-06.md",
             "work/kittiwake retainer (Sept 2026).md", "work/kittiwake retainer-oct2026.md"]
NEW_NOTE = "work/mcp probe note.md"


def _snapshot(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def vault(tmp_path_factory):
    dest = tmp_path_factory.mktemp("mcp") / "vault"
    shutil.copytree(harness.SAMPLE_VAULT, dest)
    return dest


@pytest.fixture(scope="module")
def cmd(vault, tmp_path_factory):
    index = tmp_path_factory.mktemp("mcp-index")
    return [sys.executable, str(ROOT / "harness.py"), "--mcp", "--vault", str(vault),
            "--index", str(index), "--backend", "builtin"]


async def _session(cmd, script, modern=False):
    params = StdioServerParameters(command=cmd[0], args=cmd[1:])
    with tempfile.TemporaryFile("w+") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as s:
                opened = await (s.discover() if modern else s.initialize())
                return {"opened": opened, "version": s.protocol_version,
                        **await script(s)}


async def _catch(coro):
    try:
        return await coro
    except MCPError as e:
        return e


async def _legacy_script(s, vault: Path) -> dict:
    out = {"tools": await s.list_tools(), "ping": await s.send_ping()}
    call = s.call_tool
    out["present"] = await call("search_notes", {"query": RATE_Q})
    out["present_k2"] = await call("search_notes", {"query": "day rate", "k": 2,
                                                    "time_mode": "present"})
    out["budgeted"] = await call("search_notes", {"query": RATE_Q, "budget": 60, "k": 8})
    out["history"] = await call("search_notes", {
        "query": "How did the Kittiwake retainer change over time?"})
    out["note_history"] = await call("note_history", {"path": RETAINERS[-1]})
    out["log_history"] = await call("note_history", {"path": "training/training log.md"})
    out["ask"] = await call("ask", {"question": RATE_Q})
    out["folders"] = await call("list_folders", {})
    pages = [await s.list_resources()]
    while pages[-1].next_cursor:
        pages.append(await s.list_resources(params={"cursor": pages[-1].next_cursor}))
    out["resources"] = [r for page in pages for r in page.resources]
    out["index"] = await s.read_resource("verso://index")
    out["note"] = await s.read_resource(out["resources"][1].uri)
    out["probes"] = [await call("search_notes", {"query": q, "time_mode": m})
                     for q in PROBES for m in ("auto", "any", "history")]
    out["probe_history"] = await call("note_history", {"path": PRIVATE_NOTE})
    out["missing_history"] = await call("note_history", {"path": "health/no such note.md"})
    out["probe_read"] = await _catch(s.read_resource(
        "verso://note/" + PRIVATE_NOTE.replace(" ", "%20")))
    out["probe_ask"] = await call("ask", {"question": "What is the clinic ref of my physio?"})
    (vault / NEW_NOTE).write_text("# Probe\n\nThe zorblatt widget costs 999 quatloos.\n")
    out["changed"] = await call("search_notes", {"query": "zorblatt widget quatloos"})
    (vault / NEW_NOTE).unlink()
    out["changed_back"] = await call("search_notes", {"query": "zorblatt widget quatloos"})
    return out


@pytest.fixture(scope="module")
def sdk(cmd, vault):
    return asyncio.run(_session(cmd, lambda s: _legacy_script(s, vault)))


def _everything(results: dict) -> str:
    """Every reply of a session as one text: pydantic models dumped whole."""
    parts = []
    for v in results.values():
        for x in v if isinstance(v, list) else [v]:
            parts.append(x.model_dump_json(by_alias=True) if hasattr(x, "model_dump_json")
                         else repr(x))
    return "\n".join(parts)


# ------------------------------------------------------------------ over the SDK client


def test_handshake_and_tool_listing(sdk):
    assert sdk["version"] == "2025-11-25"
    assert sdk["opened"].server_info.name == "verso"
    tools = {t.name: t for t in sdk["tools"].tools}
    assert set(tools) == {"search_notes", "note_history", "ask", "list_folders",
                          "list_projects", "project_status"}
    for t in tools.values():
        assert t.input_schema["type"] == "object" and t.output_schema["type"] == "object"
    assert tools["search_notes"].input_schema["required"] == ["query"]


def test_current_value_comes_newest_first_with_older_versions_labelled_after_it(sdk):
    r = sdk["present"]
    assert not r.is_error and json.loads(r.content[0].text) == r.structured_content
    out = r.structured_content
    assert out["time_mode"] == "present" and out["chosen_by"] == "router"
    top = out["passages"][0]
    assert (top["path"], top["date"], top["is_latest"]) == (RATES[-1], "2026-10-05", True)
    assert "£760" in top["text"] and top["superseded_by"] is None
    assert out["set_aside"] == []          # versions label and order, never remove
    older = [p for p in out["passages"] if p["path"] in RATES[:2]]
    assert older and all(p["superseded_by"] == RATES[-1] and not p["is_latest"]
                         for p in older)
    paths = [p["path"] for p in out["passages"]]
    assert len(paths) == len(set(paths))   # one passage a note
    assert 0.8 * 1000 <= sum(len(p["text"].split()) for p in out["passages"]) <= 1000
    assert len(sdk["present_k2"].structured_content["passages"]) == 2


def test_a_word_budget_gives_cut_passages_that_fit_it_and_labels(sdk):
    whole = sdk["present"].structured_content["passages"]
    cut = sdk["budgeted"].structured_content["passages"]
    words = [len(p["text"].split()) for p in cut]
    assert sum(words) <= 60 or len(cut) == 1
    assert sum(words) < sum(len(p["text"].split()) for p in whole)
    assert cut[0]["path"] == RATES[-1] and "760" in cut[0]["text"]
    assert all("why" in p for p in whole + cut)
    older = [p for p in sdk["history"].structured_content["passages"] if p["superseded_by"]]
    assert older and all(p["why"] == "a newer version of this note" for p in older)


def test_history_search_lists_the_versions_oldest_first(sdk):
    out = sdk["history"].structured_content
    assert out["time_mode"] == "history"
    got = [p["path"] for p in out["passages"] if p["path"] in RETAINERS]
    assert got == RETAINERS
    assert [p["is_latest"] for p in out["passages"][:4]] == [False, False, False, True]


def test_note_history_gives_every_version_in_date_order_with_what_differs(sdk):
    out = sdk["note_history"].structured_content
    assert [v["path"] for v in out["versions"]] == RETAINERS
    dates = [v["date"] for v in out["versions"]]
    assert dates == sorted(dates) and dates[0] == "2026-04-03"
    assert [v["is_latest"] for v in out["versions"]] == [False, False, False, True]
    assert all(v["passages"] for v in out["versions"])
    assert out["copies"] == [{"path": "work/kittiwake retainer (Sept 2026) (1).md",
                              "copy_of": "work/kittiwake retainer (Sept 2026).md"}]
    log = sdk["log_history"].structured_content["versions"]
    entries = [v for v in log if v["kind"] == "entry"]
    assert len(entries) >= 3 and [v["date"] for v in entries] == sorted(
        v["date"] for v in entries)
    assert [v["is_latest"] for v in entries][-1] is True
    assert not any(v["is_latest"] for v in entries[:-1])


def test_ask_gives_the_cited_current_answer_with_costs(sdk):
    out = sdk["ask"].structured_content
    assert out["checks_passed"] and "760" in out["answer"] and "640" not in out["answer"]
    assert [c["path"] for c in out["citations"]] == [RATES[-1]]
    assert [s["name"] for s in out["stages"]] == list(harness.STAGES)
    assert out["calibration"] == {"key": "builtin", "source": "shipped"}   # who judged it
    assert out["alternate"] is None


def test_list_folders_says_what_is_private_and_how_to_open_it(sdk):
    out = sdk["folders"].structured_content
    by = {f["folder"]: f for f in out["folders"]}
    assert by["work"]["privacy"] == "shareable" and by["work"]["open_with"] is None
    assert by["health"]["privacy"] == "private" and by["health"]["notes"] == 4
    table = by["health"]["open_with"].split(":\n", 1)[1]
    assert tomllib.loads(table) == {"folders": {"health": {"privacy": "shareable"}}}
    assert by["journal"]["versioned"] is False
    assert by["finance"]["privacy"] == "private"      # not in verso.toml: private


def test_resources_list_every_shareable_note_and_the_index(sdk, vault):
    uris = [r.uri for r in sdk["resources"]]
    assert uris[0] == "verso://index" and len(uris) == len(set(uris))
    names = {r.name for r in sdk["resources"][1:]}
    shareable = {p for p in _snapshot(vault) if p.split("/")[0] in
                 ("work", "training", "move", "people")}
    assert names == shareable
    summary = json.loads(sdk["index"].contents[0].text)
    assert summary["notes"]["shareable"] + summary["notes"]["copies"] == len(names)
    assert summary["families_with_versions"] >= 5 and summary["backend"] == "builtin"
    note = sdk["note"].contents[0]
    assert note.text == (vault / sdk["resources"][1].name).read_text(encoding="utf-8")


def test_private_marker_never_reaches_the_client(sdk):
    assert all(not r.is_error for r in sdk["probes"])
    assert all(not p["path"].startswith("health/") for r in sdk["probes"]
               for p in r.structured_content["passages"] + r.structured_content["set_aside"])
    assert sdk["probe_history"].is_error and sdk["missing_history"].is_error
    said = sdk["probe_history"].content[0].text          # a private note reads as missing
    assert said.replace(PRIVATE_NOTE, "X") == sdk["missing_history"].content[0].text.replace(
        "health/no such note.md", "X") and "private" not in said
    assert isinstance(sdk["probe_read"], MCPError) and sdk["probe_read"].error.code == -32002
    assert not any(r.name.startswith("health/") for r in sdk["resources"])
    assert MARKER not in _everything(sdk) and "Clinic ref" not in _everything(sdk)


def test_a_vault_change_is_seen_on_the_next_call(sdk):
    found = [p["path"] for p in sdk["changed"].structured_content["passages"]]
    assert found[0] == NEW_NOTE
    assert NEW_NOTE not in [p["path"] for p in
                            sdk["changed_back"].structured_content["passages"]]


async def _modern_script(s) -> dict:
    return {"tools": await s.list_tools(),
            "present": await s.call_tool("search_notes", {"query": RATE_Q}),
            "index": await s.read_resource("verso://index")}


def test_the_2026_protocol_over_discover(cmd):
    got = asyncio.run(_session(cmd, _modern_script, modern=True))
    assert got["version"] == "2026-07-28"
    assert "2026-07-28" in got["opened"].supported_versions
    assert got["tools"].result_type == "complete" and got["tools"].cache_scope == "private"
    assert got["present"].structured_content["passages"][0]["path"] == RATES[-1]
    assert got["index"].ttl_ms == 0


# ------------------------------------------------------------------------ raw JSON lines


class Raw:
    """The server with raw lines in and out; every byte it wrote is kept."""

    def __init__(self, cmd):
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.out, self.lines = [], queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.out.append(line)
            self.lines.put(json.loads(line))

    def send(self, msg) -> dict:
        raw = msg if isinstance(msg, bytes) else json.dumps(msg).encode() + b"\n"
        self.proc.stdin.write(raw)
        self.proc.stdin.flush()
        return self.lines.get(timeout=60)

    def call(self, rid, method, params=None) -> dict:
        reply = self.send({"jsonrpc": "2.0", "id": rid, "method": method,
                           "params": params or {}})
        assert reply["id"] == rid
        return reply

    def tool(self, rid, name, args) -> dict:
        return self.call(rid, "tools/call", {"name": name, "arguments": args})


def _init(raw, rid, version) -> str:
    return raw.call(rid, "initialize", {"protocolVersion": version, "capabilities": {},
                                        "clientInfo": {"name": "t", "version": "0"}}
                    )["result"]["protocolVersion"]


@pytest.fixture(scope="module")
def raw(cmd, vault):
    before = _snapshot(vault)
    server = Raw(cmd)
    yield server
    server.proc.stdin.close()
    assert server.proc.wait(timeout=30) == 0
    assert _snapshot(vault) == before          # faults or not, nothing written to the vault
    assert not any(MARKER.encode() in line for line in server.out)


def test_version_negotiation_and_argument_errors_per_version(raw):
    assert _init(raw, 1, "2025-06-18") == "2025-06-18"
    bad = raw.tool(2, "search_notes", {"query": 42})
    assert bad["error"]["code"] == -32602 and "must be a string" in bad["error"]["message"]
    assert _init(raw, 3, "2024-11-05") == "2025-11-25"     # not supported: our newest
    assert _init(raw, 4, "2025-11-25") == "2025-11-25"
    for rid, args in enumerate([{"query": 42}, {"query": "x", "k": "5"}, {"query": "x",
                                "k": 0}, {"query": "x", "time_mode": "later"},
                                {"query": "x", "extra": 1}, {}, {"query": "   "}], 10):
        r = raw.tool(rid, "search_notes", args)["result"]
        assert r["isError"] is True and "\n" not in r["content"][0]["text"], args
    assert raw.call(30, "ping")["result"] == {}


def test_malformed_lines_get_json_rpc_errors_and_the_server_goes_on(raw):
    cases = [(b"{not json\n", -32700), (b"\xff\xfe\n", -32700), (b"[]\n", -32600),
             (b'"hello"\n', -32600), (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}\n',
                                      -32600),
             (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}\n', -32600),
             (b'{"jsonrpc": "2.0", "id": 5, "method": 7}\n', -32600)]
    for line, code in cases:
        assert raw.send(line)["error"]["code"] == code, line
    assert raw.send(b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {}}\n'
                    b'{"jsonrpc": "2.0", "id": 40, "method": "ping"}\n') == {
        "jsonrpc": "2.0", "id": 40, "result": {}}


def test_unknown_methods_tools_and_bad_params(raw):
    assert raw.call(50, "prompts/list")["error"]["code"] == -32601
    assert raw.tool(51, "delete_notes", {})["error"]["code"] == -32602
    assert raw.call(52, "tools/call", {"name": "ask", "arguments": [1]})["error"][
        "code"] == -32602
    assert raw.send({"jsonrpc": "2.0", "id": 53, "method": "ping", "params": [1]})[
        "error"]["code"] == -32602
    assert raw.call(54, "initialize", {})["error"]["code"] == -32602
    assert raw.call(55, "resources/list", {"cursor": "abc"})["error"]["code"] == -32602
    assert raw.call(56, "resources/read", {"uri": "verso://note/nope.md"})["error"][
        "code"] == -32002
    env = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}}
    err = raw.call(57, "tools/list", env)["error"]
    assert err["code"] == -32022 and err["data"]["supported"] == ["2026-07-28"]


def test_a_100_kb_query_is_refused_in_one_line(raw):
    r = raw.tool(60, "search_notes", {"query": "rate " * 20_000})["result"]
    assert r["isError"] and "100000 characters; at most 4000" in r["content"][0]["text"]
    r = raw.tool(61, "search_notes", {"query": RATE_Q})["result"]
    assert r["structuredContent"]["passages"][0]["path"] == RATES[-1]


def test_private_probes_over_raw_lines(raw):
    for rid, q in enumerate(PROBES, 70):
        r = raw.tool(rid, "search_notes", {"query": q, "time_mode": "any", "k": 20})["result"]
        assert not r["isError"]
    r = raw.call(80, "resources/read", {"uri": "verso://note/health/physio%20notes.md"})
    gone = raw.call(81, "resources/read", {"uri": "verso://note/health/nothing%20here.md"})
    assert r["error"]["code"] == gone["error"]["code"] == -32002      # private reads as missing
    assert r["error"]["message"].replace("physio%20notes", "X") == gone["error"][
        "message"].replace("nothing%20here", "X") and "private" not in r["error"]["message"]
    # the fixture's teardown checks every byte written for the marker


def _segment_chunks(index: Path) -> Path:
    """The chunks.json of the index's first live segment (format 2)."""
    name = json.loads((index / "manifest.json").read_text())["segments"][0]["name"]
    return index / f"{name}.chunks.json"


def test_a_damaged_index_is_rebuilt_or_reported_and_serving_goes_on(raw, cmd):
    index = Path(cmd[cmd.index("--index") + 1])
    _segment_chunks(index).write_text("{ damaged")
    r = raw.tool(90, "search_notes", {"query": RATE_Q})["result"]
    assert not r["isError"] and r["structuredContent"]["passages"][0]["path"] == RATES[-1]
    json.loads(_segment_chunks(index).read_text())          # rebuilt from the vault
    (index / "manifest.json").unlink()
    (index / "manifest.json").mkdir()                      # beyond repair
    r = raw.tool(91, "search_notes", {"query": RATE_Q})["result"]
    assert r["isError"] and "\n" not in r["content"][0]["text"]
    assert raw.call(92, "resources/list")["error"]["code"] == -32603
    (index / "manifest.json").rmdir()
    r = raw.tool(93, "search_notes", {"query": RATE_Q})["result"]
    assert r["structuredContent"]["passages"][0]["path"] == RATES[-1]


@pytest.mark.parametrize("written, replies", [
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"na', [-32700]),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}\n', [None]),
    (b"", [])])
def test_stdin_closed_mid_request_ends_cleanly(cmd, written, replies):
    proc = subprocess.run(cmd, input=written, capture_output=True, timeout=60)
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr
    assert [r.get("error", {}).get("code") for r in got] == replies


# --------------------------------------------------------------------------- in process


def test_the_guard_stops_a_private_path_at_the_last_step(cmd, vault, monkeypatch):
    srv = mcp_server.Server(vault, cmd[cmd.index("--index") + 1], "builtin")
    srv.index()
    with pytest.raises(mcp_tools.ToolError):
        mcp_tools.guard(srv.idx, {"passages": [{"path": PRIVATE_NOTE, "text": "x"}]})
    mcp_tools.guard(srv.idx, {"passages": [{"path": RATES[0], "superseded_by": RATES[2]}]})
    leak = {"time_mode": "any", "chosen_by": "caller", "note": None, "set_aside": [],
            "passages": [{"path": PRIVATE_NOTE, "text": MARKER}]}
    monkeypatch.setitem(mcp_tools.RUN, "search_notes", lambda srv, args: leak)
    reply = srv.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "search_notes", "arguments": {"query": "q"}}})
    assert reply["result"]["isError"] and MARKER not in json.dumps(reply)


def test_with_nothing_shareable_the_note_names_the_folders_and_opens_none(tmp_path):
    """The hint names each folder and the form that opens one (NAME a placeholder), never
    a ready line per folder: pasted whole, that would share health/ too (issue 44)."""
    for folder in ("health", "money", "work"):
        (tmp_path / "v" / folder).mkdir(parents=True)
        (tmp_path / "v" / folder / "a.md").write_text(f"# {folder}\n\nHow it changed.\n")
    srv = mcp_server.Server(tmp_path / "v", tmp_path / "idx", "builtin")
    out = srv.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "search_notes", "arguments": {"query": "How did my rent change?"}}}
    )["result"]["structuredContent"]
    assert "folders: health, money, work" in out["note"]
    assert '[folders.NAME]\nprivacy = "shareable"' in out["note"]
    assert not any(f"[folders.{f}]" in out["note"] for f in ("health", "money", "work"))
    assert out["time_mode"] == "history" and out["chosen_by"] == "router"
    form = out["note"].split("add\n")[1].split("\nwith")[0]     # the form, as TOML
    assert tomllib.loads(form.replace("NAME", "work")) == {
        "folders": {"work": {"privacy": "shareable"}}}


def test_a_fresh_vault_returns_nothing_and_names_the_config_line(tmp_path):
    (tmp_path / "v" / "notes").mkdir(parents=True)
    (tmp_path / "v" / "notes" / "a.md").write_text("# A\n\nThe boiler code is 4417.\n")
    srv = mcp_server.Server(tmp_path / "v", tmp_path / "idx", "builtin")

    def call(name, args):
        return srv.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": name, "arguments": args}})["result"]
    out = call("search_notes", {"query": "boiler code"})["structuredContent"]
    assert out["passages"] == [] and "(folders: notes)" in out["note"]
    assert '[folders.NAME]\nprivacy = "shareable"' in out["note"]
    assert out["time_mode"] == "any"            # what the router chose, never "auto"
    assert call("ask", {"question": "What is the boiler code?"})["isError"]
    assert "4417" not in json.dumps(call("note_history", {"path": "notes/a.md"}))
    assert _snapshot(tmp_path / "v") == {"notes/a.md": hashlib.sha256(
        b"# A\n\nThe boiler code is 4417.\n").hexdigest()}


def test_mcp_takes_the_config_of_the_users_choosing(tmp_path):
    """`verso mcp --config FILE` (issue 37): a config kept outside the vault marks a
    folder shareable, and the server's refreshes use it."""
    (tmp_path / "v" / "notes").mkdir(parents=True)
    (tmp_path / "v" / "notes" / "a.md").write_text("# A\n\nThe boiler code is 4417.\n")
    cfg = tmp_path / "mine.toml"
    cfg.write_text('[folders.notes]\nprivacy = "shareable"\n')
    assert mcp_server._parser().parse_args(["--mcp", "--config", str(cfg)]).config == str(cfg)
    srv = mcp_server.Server(tmp_path / "v", tmp_path / "idx", "builtin", config=str(cfg))
    out = srv.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "search_notes", "arguments": {"query": "boiler code"}}})["result"]
    assert "4417" in json.dumps(out["structuredContent"]["passages"])
    (tmp_path / "v" / "notes" / "b.md").write_text("# B\n\nThe gate code is 9021.\n")
    out = srv.handle({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "search_notes", "arguments": {"query": "gate code"}}})["result"]
    assert "9021" in json.dumps(out["structuredContent"]["passages"])   # refreshed with it
    assert not (tmp_path / "v" / "verso.toml").exists()


def test_the_index_stays_in_memory_until_the_vault_or_index_changes(cmd, vault):
    srv = mcp_server.Server(vault, cmd[cmd.index("--index") + 1], "builtin")
    first = srv.index()
    assert srv.index() is first                       # nothing changed: no second parse
    (first.dir / first.manifest["files_file"]).touch()  # the index files changed on disk
    second = srv.index()
    assert second is not first and srv.index() is second


def test_mcp_check_reports_every_step(cmd, vault):
    index = cmd[cmd.index("--index") + 1]
    proc = subprocess.run([sys.executable, str(ROOT / "harness.py"), "--mcp-check",
                           "--vault", str(vault), "--index", index, "--backend", "builtin"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    steps = [line.split()[1] for line in proc.stdout.splitlines()
             if line.startswith("  pass") or line.startswith("  FAIL")]
    assert steps == ["initialize", "tools/list", "list_folders", "resources/list",
                     "search_notes", "note_history", "ask", "list_projects",
                     "resources/read", "ping", "exit"]
    assert "FAIL" not in proc.stdout and "all steps passed" in proc.stdout


def test_the_verso_console_script_runs_the_same_check(vault, cmd):
    verso = Path(sys.executable).with_name("verso")
    if not verso.exists():
        pytest.skip("the verso console script is not installed here (pip install -e .)")
    proc = subprocess.run([str(verso), "--mcp-check", "--vault", str(vault), "--index",
                           cmd[cmd.index("--index") + 1], "--backend", "builtin"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "all steps passed" in proc.stdout, proc.stdout


def test_resources_are_listed_in_pages_that_cover_every_note_once(cmd, vault, monkeypatch):
    srv = mcp_server.Server(vault, cmd[cmd.index("--index") + 1], "builtin")
    monkeypatch.setattr(mcp_server, "PAGE", 10)
    uris, cursor, pages = [], None, 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        page = srv.handle({"jsonrpc": "2.0", "id": pages, "method": "resources/list",
                           "params": params})["result"]
        uris += [r["uri"] for r in page["resources"]]
        pages += 1
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    notes = mcp_tools.shareable_notes(srv.idx)
    assert pages == -(-len(notes) // 10) and len(uris) == len(set(uris)) == len(notes) + 1
    assert uris[0] == mcp_tools.INDEX_URI


def test_an_oversized_line_is_refused_and_the_next_one_served(monkeypatch, tmp_path):
    import io
    monkeypatch.setattr(mcp_server, "MAX_LINE_BYTES", 64)
    out = io.BytesIO()
    lines = (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "'
             + b"x" * 500 + b'"}}\n\n{"jsonrpc": "2.0", "id": 2, "method": "ping"}\n')
    code = mcp_server.serve(mcp_server.Server(tmp_path, tmp_path / "idx"), io.BytesIO(lines),
                            out)
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    assert code == 0 and [r.get("error", {}).get("code") for r in replies] == [-32600, None]
    assert replies[1] == {"jsonrpc": "2.0", "id": 2, "result": {}}
