"""Verso: local, version-aware question answering over a folder of markdown notes.

The notebook API, each name imported on first use (so `import verso` stays instant):

    import verso
    verso.ingest("~/notes")                  # index a vault (remembered as the default)
    a = verso.ask("What is my day rate now?")   # an Answer: .answer, .citations, .verdict
    idx, be = verso.load()                   # load once, then verso.ask(q, index=idx, backend=be)
    verso.evaluate("questions.jsonl", vault="~/notes")   # a question set's figures

The modules are the stages (verso.ingest, verso.retrieve, verso.version, ...); the
repository keeps them flat at its root, and installed they are this one package.
"""

import sys
from importlib import import_module
from types import ModuleType

# name -> (module, attribute): the notebook API, resolved lazily
API = {"ask": ("harness", "ask"), "load": ("harness", "load"),
       "Answer": ("harness", "Answer")}
__all__ = ["ask", "load", "Answer", "ingest", "evaluate"]


def __getattr__(name):
    if name in API:
        module, attr = API[name]
        return getattr(import_module(f"{__name__}.{module}"), attr)
    if name in ("ingest", "evaluate"):      # callable modules: verso.ingest(vault)
        return import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def data_path(name: str):
    """A file or folder shipped inside the package (the sample vault, the splits' vaults
    and questions, the Modelfile) as a Path, wherever the package is installed."""
    from importlib import resources
    from pathlib import Path
    return Path(str(resources.files(__name__) / name))


def call_as(module_name: str, function) -> None:
    """Let the module be called as `function`: `verso.ingest(vault)` runs
    ingest.ingest_notes, while verso.ingest.build_index stays the module's own."""
    sys.modules[module_name].__class__ = type(
        "CallableModule", (ModuleType,), {"__call__": staticmethod(function)})
