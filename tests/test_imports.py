"""The house: every top-level module's imports of the others (module level and inside
functions alike) form no circle, and none reaches up to a higher layer. Code under
`if __name__ == "__main__":` runs only when the file is the program, so its imports are
the program's, not the module's."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "verso"           # the modules import each other as verso.x

# Lowest first. A module may import its own layer or a lower one, never a higher one.
LAYERS = [
    {"textkit", "cost_ledger", "embedder", "selective", "asof", "timespans", "timewords",
     "wordforms", "plain_bm25", "word_vectors"},   # helpers
    {"line_scores", "builtin_writer", "choosing_writer"},        # the readers and writers
    {"models", "backends"},                                      # model clients, backends
    {"vault_walk", "dating", "families", "file_columns", "chunking", "store", "store_load",
     "bm25", "file_records"},                                                        # the index
    {"ingest", "retrieve", "version", "route", "rerank", "generate", "verify",
     "calibrate", "unsure", "registry", "evidence", "passages", "verdict_fit", "followup",
     "searchwords"},  # stages
    {"scorecard", "html_report"},                                # renderers of plain data
    {"harness"},                                                 # the pipeline
    {"evaluate", "measures", "budget_eval", "mcp_tools", "chat", "calibrate_model",
     "evidence_fit"},                                            # runs, MCP tools, fits
    {"mcp_server", "mcp_check"},                                 # the MCP face
    {"cli"},                                                     # the entry
]


def _module(dotted: str) -> str:
    """The sibling a dotted import names: verso.store -> store (store -> store)."""
    parts = dotted.split(".")
    return parts[1] if parts[0] == PACKAGE and len(parts) > 1 else parts[0]


def _is_main_guard(node) -> bool:
    t = node.test if isinstance(node, ast.If) else None
    return (isinstance(t, ast.Compare) and isinstance(t.left, ast.Name)
            and t.left.id == "__name__" and len(t.comparators) == 1
            and isinstance(t.comparators[0], ast.Constant)
            and t.comparators[0].value == "__main__")


def imports_of(source: str, known: set) -> set:
    """The modules of `known` that `source` imports anywhere but in its main guard."""
    out, todo = set(), [ast.parse(source)]
    while todo:
        node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if _is_main_guard(child):
                continue
            if isinstance(child, ast.Import):         # import verso.x, import x
                out |= {_module(a.name) for a in child.names}
            elif isinstance(child, ast.ImportFrom) and not child.level and child.module:
                if child.module == PACKAGE:           # from verso import x, y
                    out |= {a.name for a in child.names}
                else:                                 # from verso.x import f
                    out.add(_module(child.module))
            todo.append(child)
    return out & known


def graph(root: Path = ROOT) -> dict:
    files = {p.stem: p for p in root.glob("*.py") if not p.stem.startswith("_")}
    return {m: imports_of(p.read_text(encoding="utf-8"), set(files)) - {m}
            for m, p in files.items()}


def circle(g: dict) -> list:
    """One import circle of `g` as [a, b, ..., a], or [] when there is none."""
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == "open":
                return stack[stack.index(n):] + [n]
            if n not in state and (found := visit(n)):
                return found
        state[m] = "done"
        stack.pop()
        return []

    for m in sorted(g):
        if m not in state and (found := visit(m)):
            return found
    return []


def test_the_cycle_finder_finds_a_circle_and_only_a_circle():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    src = "import b\ndef f():\n    import c\nif __name__ == '__main__':\n    import d\n"
    assert imports_of(src, {"b", "c", "d"}) == {"b", "c"}
    src = "from verso import b, c as k\nfrom verso.d import f\nimport verso.e\nimport numpy\n"
    assert imports_of(src, {"b", "c", "d", "e", "f"}) == {"b", "c", "d", "e"}


def test_no_import_circle():
    assert circle(graph()) == []


def test_every_module_has_a_layer_and_imports_none_above_it():
    layer = {m: i for i, ms in enumerate(LAYERS) for m in ms}
    g = graph()
    assert set(g) - set(layer) == set(), "give the new module a layer in LAYERS"
    up = [f"{m} -> {n}" for m, ns in g.items() for n in ns if layer[n] > layer[m]]
    assert up == []
