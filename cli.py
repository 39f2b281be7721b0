"""cli: the entry of the `verso` command.

In:  the command line.
Out: the exit code of the face that serves it: `--mcp` and `--mcp-check` go to the MCP
     server (mcp_server.py), `--chat` to a conversation (chat.py), anything else is a
     question for harness.main (`python harness.py --mcp` or `--chat` reaches the same
     face by running its program).
Not: any work of its own. It sits above every module it hands to, so that no library
     module imports a face (tests/test_imports.py holds the layers).
"""

from __future__ import annotations

import gc
import sys

MCP_FLAGS = {"--mcp", "--mcp-check"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if MCP_FLAGS & set(argv):       # each face imported only when it serves this run
        import mcp_server
        gc.enable()          # a long-running server: the collector on (run_cli turns it off)
        return mcp_server.main(argv)
    if "--chat" in argv:
        import chat
        return chat.main(argv)
    import harness
    return harness.main(argv)
