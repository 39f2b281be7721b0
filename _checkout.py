"""_checkout: `python harness.py ...` (or ingest.py, evaluate.py, a tool) run in a checkout.

The modules import each other as `verso.X`. A file run as a program imports this first
(from its main guard, before anything else of Verso), so that `verso` names the folder
the program stands in, installed or not, and never an installed copy from elsewhere.
Library code never imports it.
"""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _is_here(module) -> bool:
    return Path(getattr(module, "__file__", "") or "").resolve().parent == HERE


if not _is_here(sys.modules.get("verso")):
    _spec = importlib.util.spec_from_file_location(
        "verso", HERE / "__init__.py", submodule_search_locations=[str(HERE)])
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["verso"] = _module
    _spec.loader.exec_module(_module)
