"""cli: the entry of the `verso` command, every face of it.

In:  the command line: `verso COMMAND ...` or `verso "question" [options]`.
Out: the exit code of the face that serves it: ingest (ingest.py), chat (chat.py), mcp
     and mcp check (mcp_server.py), projects (the harness's registry table), evaluate
     (evaluate.py), calibrate (calibrate_model.py); anything else is a question for harness.main. The older flags
     (`--mcp`, `--mcp-check`, `--chat`) still reach their faces.
Not: any work of its own. It sits above every module it hands to, so that no library
     module imports a face (tests/test_imports.py holds the layers).

    verso ingest ~/notes
    verso "What is my day rate now?"
"""

from __future__ import annotations

if __name__ == "__main__" and not __package__:   # a program in a checkout (not -m)
    import _checkout  # noqa: F401

import gc
import sys

MCP_FLAGS = {"--mcp", "--mcp-check"}
COMMANDS = {       # name: what it does, for `verso --help`
    "ingest": "index a folder of notes: verso ingest NOTES [--index DIR] (the last one "
              "ingested is the default of every question, from any folder)",
    "chat": "a conversation: follow-ups rewritten into full questions",
    "mcp": "serve the notes to Claude Desktop, Claude Code or Cursor over MCP (stdio); "
           "`verso mcp check` tries the server as an app would",
    "projects": "the project registry table ([registry] folders in verso.toml)",
    "evaluate": "score a question set: verso evaluate --vault DIR --questions FILE",
    "calibrate": "measure your Ollama model once (whose reading is shown, when an answer "
                 "ships); kept in Verso's home",
}
USAGE = ("usage: verso \"question\" [options]   (verso --help-question: every option)\n"
         "       verso COMMAND [options]      (verso COMMAND --help)\n\ncommands:\n"
         + "".join(f"  {name:<10}{what}\n" for name, what in COMMANDS.items()))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command, rest = (argv[0], argv[1:]) if argv else (None, [])
    if command in (None, "-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if command else 2
    if command == "mcp":
        check = rest[:1] == ["check"]
        argv = ["--mcp-check" if check else "--mcp", *rest[check:]]
    if MCP_FLAGS & set(argv):       # each face imported only when it serves this run
        from verso import mcp_server
        gc.enable()          # a long-running server: the collector on (run_cli turns it off)
        return mcp_server.main(argv)
    if command == "chat" or "--chat" in argv:
        from verso import chat
        return chat.main(rest if command == "chat" else argv)
    if command == "evaluate":
        from verso import evaluate
        return evaluate.main(rest)
    if command == "ingest":
        from verso import ingest
        return ingest.main(rest, prog="verso ingest")
    if command == "calibrate" or "--calibrate" in argv:
        from verso import calibrate_model
        return calibrate_model.main(rest if command == "calibrate" else
                                    [a for a in argv if a != "--calibrate"])
    from verso import harness
    if command == "projects":
        return harness.main(["--projects", *rest], prog="verso projects")
    return harness.main(["--help"] if command == "--help-question" else argv, prog="verso")


if __name__ == "__main__":
    sys.exit(main())
