"""The project registry (registry.py): rows built at ingest from status fields people
write, project questions answered from it with citations, --projects, the MCP tools,
and the config."""

import json

import pytest

from verso import harness
from verso import ingest
from verso import mcp_server
from verso import registry
from tests.vaults import write


@pytest.mark.parametrize("text,status,why,result", [
    ("# PixelNet\nStatus: on hold - waiting for the GPU grant\nKey result: 91% top-1\n",
     "paused", "waiting for the GPU grant", "91% top-1"),
    ("---\nstatus: done\n---\n# Orchard\nShipped in May.\nOutcome: 1,200 installs\n",
     "done", "", "1,200 installs"),
    ("# Tide\n- **Status:** cancelled (the API closed)\n", "abandoned", "the API closed", ""),
    ("# Kiln\nState: WIP\nWhy: the glaze tests\n", "active", "the glaze tests", ""),
    ("# Loom\nStatus: not started yet\n", "planned", "", ""),
    ("# Garden\nI gave up on this in March.\n", "unknown", "", ""),
    ("# Zine\nStatus: whatever\n", "unknown", "", ""),
])
def test_a_row_from_the_status_field_as_people_write_it(text, status, why, result):
    p = registry.project("projects/x.md", text, "2026-05-01")
    assert (p["status"], p["why"], p["result"]) == (status, why, result)
    assert p["name"] == text.split("# ", 1)[1].split("\n", 1)[0]


def test_registry_questions_are_told_apart():
    rows = [{"name": "PixelNet", "status": "paused"}, {"name": "Orchard", "status": "done"}]
    assert registry.asks("Which projects are paused?", rows) == {"status": "paused"}
    assert registry.asks("which projects are on hold?", rows) == {"status": "paused"}
    assert registry.asks("What is the status of PixelNet?", rows) == {"name": "PixelNet"}
    assert registry.asks("List every project and its status", rows) == {}
    assert registry.asks("What is my day rate?", rows) is None
    assert registry.asks("Which projects are paused?", []) is None


@pytest.fixture
def lab(tmp_path):
    v = tmp_path / "notes"
    write(v, "verso.toml", '[registry]\nfolders = ["projects"]\n[folders.projects]\n'
          'privacy = "shareable"\n')
    write(v, "projects/pixelnet.md", "# PixelNet\nStatus: on hold - waiting for the GPU "
          "grant\nKey result: 91.3% accuracy on the test set\n")
    write(v, "projects/orchard.md", "---\nstatus: done\nupdated: 2026-05-20\n---\n# Orchard "
          "app\nShipped to the app store.\nOutcome: 1,200 installs\n")
    write(v, "projects/tide tables 2026-02.md", "# Tide tables\nStatus: in progress\n")
    write(v, "projects/tide tables 2026-06.md", "# Tide tables\nStatus: abandoned (the "
          "API closed)\n")
    write(v, "private/secret project.md", "# Secret\nStatus: active\n")
    write(v, "notes/shop.md", "# Shopping\nmilk, eggs\n")
    return v, tmp_path / "idx"


def test_ingest_builds_the_table_from_the_newest_versions(lab):
    ingest.build_index(lab[0], lab[1])
    idx, _ = harness.load(lab[1], lab[0], "builtin")
    rows = {p["name"]: p for p in idx.manifest["projects"]}
    assert set(rows) == {"PixelNet", "Orchard app", "Tide tables"}      # registry folder only
    assert rows["Tide tables"]["status"] == "abandoned"                 # the June version
    assert rows["Tide tables"]["path"] == "projects/tide tables 2026-06.md"
    assert rows["Orchard app"]["date"] == "2026-05-20" and rows["PixelNet"]["status"] == "paused"


def test_project_questions_are_answered_from_the_registry_with_citations(lab, capsys):
    a = harness.ask("Which projects are paused?", vault=lab[0], index=lab[1], backend="builtin")
    assert a.answer == "PixelNet: paused (status: on hold - waiting for the GPU grant); key " \
        "result: 91.3% accuracy on the test set [c1]."
    assert [c["path"] for c in a.citations] == ["projects/pixelnet.md"]
    assert a.checks["rules_ok"] and "registry" in a.route["why"]
    b = harness.ask("List every project and its status", vault=lab[0], index=lab[1],
                    backend="builtin")
    assert "Abandoned projects: Tide tables" in b.answer and b.checks["rules_ok"]
    assert harness.main(["--projects", "--index", str(lab[1]), "--json"]) == 0
    assert {p["name"] for p in json.loads(capsys.readouterr().out)} == {
        "PixelNet", "Orchard app", "Tide tables"}
    assert harness.main(["--projects", "--index", str(lab[1])]) == 0
    assert capsys.readouterr().out.splitlines()[0].split()[:3] == ["project", "status",
                                                                   "updated"]


def test_mcp_lists_only_shareable_projects(lab):
    write(lab[0], "verso.toml", '[registry]\nfolders = ["projects", "private"]\n'
          '[folders.projects]\nprivacy = "shareable"\n')
    srv = mcp_server.Server(lab[0], lab[1], "builtin")

    def call(name, args):
        return srv.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": name, "arguments": args}})["result"]
    listed = call("list_projects", {})["structuredContent"]["projects"]
    assert {p["name"] for p in listed} == {"PixelNet", "Orchard app", "Tide tables"}
    assert "Secret" not in json.dumps(call("list_projects", {"status": "active"}))
    one = call("project_status", {"name": "pixelnet"})["structuredContent"]
    assert one["status"] == "paused" and one["path"] == "projects/pixelnet.md"
    assert call("project_status", {"name": "Secret"})["isError"]


def test_a_bad_registry_config_is_one_line(lab):
    write(lab[0], "verso.toml", '[registry]\nfolders = "projects"\n')
    with pytest.raises(ValueError, match=r"\[registry\] takes folders"):
        ingest.build_index(lab[0], lab[1])


class ChatWriter:
    """A model writer's .chat with a canned JSON reply; counts its calls."""

    def __init__(self, reply):
        self.reply, self.calls = reply, 0

    def chat(self, messages, what="", options=None, format=None):
        self.calls += 1
        assert format["properties"]["status"]["enum"] == list(registry.STATUSES)
        msg = type("M", (), {"content": json.dumps(self.reply)})
        return type("R", (), {"message": msg})


PROSE = "# Podcast\nWe recorded two episodes.\nI gave up on this in March: no time.\n"


def test_a_model_status_is_kept_only_with_a_quote_the_note_holds():
    good = ChatWriter({"status": "abandoned", "quote": "I gave up on this in March: no time."})
    assert registry.model_status(good, PROSE) == ("abandoned",
                                                  "I gave up on this in March: no time.")
    made_up = ChatWriter({"status": "abandoned", "quote": "The podcast was cancelled."})
    assert registry.model_status(made_up, PROSE) is None
    assert registry.model_status(ChatWriter({"status": "sunset", "quote": "We recorded two "
                                             "episodes."}), PROSE) is None


def test_ingest_asks_the_model_only_for_notes_without_a_field_and_keeps_rows(tmp_path):
    v = tmp_path / "v"
    write(v, "verso.toml", '[registry]\nfolders = ["projects"]\n')
    write(v, "projects/podcast.md", PROSE)
    write(v, "projects/kiln.md", "# Kiln\nStatus: WIP\n")
    files = [{"path": p, "is_latest": True, "duplicate_of": None, "date": "2026-03-01",
              "date_source": "filename", "sha256": p} for p in
             ("projects/kiln.md", "projects/podcast.md")]
    model = ChatWriter({"status": "abandoned", "quote": "I gave up on this in March: no time."})
    rows = registry.build(v, files, ["projects"], model)
    assert [(p["name"], p["status"], p["by"]) for p in rows] == [
        ("Kiln", "active", "field"), ("Podcast", "abandoned", "model")]
    assert model.calls == 1
    again = registry.build(v, files, ["projects"], model, previous=rows)
    assert again == rows and model.calls == 1           # unchanged notes are not re-read
    offline = registry.build(v, files, ["projects"], None)
    assert offline[1]["status"] == "unknown" and offline[1]["by"] == "none"


# Status as people write it (issue 37): headings, bold labels, tables, tags; why on the
# status line or the line(s) under it. Each note: (text, status, why).
@pytest.mark.parametrize("text,status,why", [
    ("# Kiln\n\n## Status: PAUSED\n\nThe element burned out. A new one is on order.\n",
     "paused", "The element burned out."),
    ("# Kiln\n### Status — on hold\nWaiting for the grant decision in May.\n## Log\n",
     "paused", "Waiting for the grant decision in May."),
    ("# Kiln\n## Status: ACTIVE (main build as of October 2026)\n", "active",
     "main build as of October 2026"),
    ("# Kiln\n## Current status\n\nDone - delivered to the studio in May.\n", "done",
     "delivered to the studio in May"),
])
def test_a_status_written_as_a_heading(text, status, why):
    p = registry.project("projects/kiln.md", text, None)
    assert (p["name"], p["status"], p["why"]) == ("Kiln", status, why)


@pytest.mark.parametrize("text,status,why", [
    ("# Loom\n**Status:** on hold\nThe vendor went quiet after the March call.\n",
     "paused", "The vendor went quiet after the March call."),
    ("# Loom\n- **State:** shipped\n  - launched at the craft fair\n- **Owner:** Ines\n",
     "done", "launched at the craft fair"),
    ("# Loom\n**Status** — paused because the grant ran out\n", "paused",
     "the grant ran out"),
    ("# Loom\n*Status:* dropped; nobody wanted it\n", "abandoned", "nobody wanted it"),
    ("# Loom\nProject status:: in progress\n", "active", ""),
])
def test_a_status_written_as_a_bold_label(text, status, why):
    p = registry.project("projects/loom.md", text, None)
    assert (p["status"], p["why"]) == (status, why)


@pytest.mark.parametrize("text,status,why", [
    ("# Reef\n| Field | Value |\n|---|---|\n| Status | Paused |\n| Why | no boat until June |\n",
     "paused", "no boat until June"),
    ("# Reef\n| Project | Status | Why |\n|---|---|---|\n| Reef | on hold | the permit |\n",
     "paused", "the permit"),
    ("# Reef\n| Status | Cancelled | the site was closed |\n| Owner | me |\n", "abandoned",
     "the site was closed"),
])
def test_a_status_written_in_a_table(text, status, why):
    p = registry.project("projects/reef.md", text, None)
    assert (p["status"], p["why"]) == (status, why)


@pytest.mark.parametrize("text,status,why", [
    ("# Zine\n#project #status/paused\nThe printer is broken.\n", "paused",
     "The printer is broken."),
    ("---\ntags: [project, status/on-hold]\n---\n# Zine\nA zine about tide pools.\n\n",
     "paused", ""),
    ("# Zine\nTags: #status/abandoned because the shop closed\n", "abandoned",
     "the shop closed"),
])
def test_a_status_written_as_a_tag(text, status, why):
    p = registry.project("projects/zine.md", text, None)
    assert (p["status"], p["why"]) == (status, why)


def test_why_is_the_status_line_s_own_before_the_lines_under_it_or_a_why_field():
    same = "# Dive\nStatus: on hold (waiting for the ethics approval)\nWhy: no old data\n"
    assert registry.project("p/d.md", same, None)["why"] == "waiting for the ethics approval"
    under = "# Dive\nStatus: paused\nThe boat is in dry dock until June.\nOwner: Ida\n"
    assert registry.project("p/d.md", under, None)["why"] == "The boat is in dry dock until June."
    field = "# Dive\nStatus: paused\nOwner: Ida\nReason: no boat\n"      # a field, no why
    assert registry.project("p/d.md", field, None)["why"] == "no boat"
    because = "# Dive\nStatus: paused because the boat broke\n"
    assert registry.project("p/d.md", because, None)["why"] == "the boat broke"


def test_a_question_naming_one_project_wants_that_project_only():
    rows = [{"name": "Orchard app", "path": "projects/orchard.md", "status": "done"},
            {"name": "Tide pool ID app", "path": "projects/tide-pool-app v2.md",
             "status": "paused"},
            {"name": "Kiln", "path": "projects/kiln.md", "status": "active"}]
    assert registry.asks("What's the status of the Orchard project?", rows) == {
        "name": "Orchard app"}
    assert registry.asks("how is the tide pool app going?", rows) == {
        "name": "Tide pool ID app"}
    assert registry.asks("Is the kiln done?", rows) == {"name": "Kiln"}
    assert registry.asks("What is the status of the Bergen project?", rows) is None
    assert registry.asks("What is the status of each project?", rows) == {}
    assert registry.rows_for({"name": "orchard app"}, rows) == rows[:1]


def test_one_named_project_asked_is_answered_alone_in_a_vault_of_every_form(tmp_path):
    """Five notes, a status in a different form each (one with none); asking about one
    answers that one, its status unknown when the note writes none."""
    v = tmp_path / "notes"
    write(v, "verso.toml", '[registry]\nfolders = ["projects"]\n')
    write(v, "projects/orchard.md", "# Orchard app\n## Status: DONE\n\nShipped in May.\n")
    write(v, "projects/kiln.md", "# Kiln\n**Status:** on hold\nThe element burned out.\n")
    write(v, "projects/reef.md", "# Reef survey\n| Status | Paused |\n|---|---|\n")
    write(v, "projects/zine.md", "# Zine\n#status/abandoned\n")
    write(v, "projects/garden.md", "# Garden beds\n#garden/veg\nStarted digging in April."
          "\n## Status of the soil\nHeavy clay, still wet.\n| Bed | Crop |\n|---|---|\n| North "
          "| leeks |\nState of the art: raised beds.\n")          # no status, in any form
    ingest.build_index(v, tmp_path / "idx")
    idx, _ = harness.load(tmp_path / "idx", v, "builtin")
    rows = {p["name"]: (p["status"], p["why"]) for p in idx.manifest["projects"]}
    assert rows == {"Orchard app": ("done", "Shipped in May."),
                    "Kiln": ("paused", "The element burned out."),
                    "Reef survey": ("paused", ""), "Zine": ("abandoned", ""),
                    "Garden beds": ("unknown", "")}
    a = harness.ask("What's the status of the kiln project?", vault=v, index=tmp_path / "idx",
                    backend="builtin")
    assert [c["path"] for c in a.citations] == ["projects/kiln.md"]
    assert a.answer.startswith("Kiln: paused (status: on hold); why: The element burned out.")
    b = harness.ask("How are the garden beds going?", vault=v, index=tmp_path / "idx",
                    backend="builtin")
    assert [c["path"] for c in b.citations] == ["projects/garden.md"]
    assert b.answer.startswith("Garden beds: unknown")
