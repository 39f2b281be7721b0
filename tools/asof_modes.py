"""The as-of questions of the frozen asof split answered in each time mode.

    python tools/asof_modes.py

as_of (the router's reading), then every one forced to present and to any: how many
hold their key facts (measures.answer_correct), builtin backend.
"""

import sys, tempfile
from pathlib import Path
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)
from verso import evaluate
from verso import harness
from verso import measures
qs = [q for q in evaluate.load_questions(ROOT / "questions" / "asof.jsonl") if q["category"] == "as_of"]
with tempfile.TemporaryDirectory() as tmp:
    idx, be = harness.load(index=tmp, vault=ROOT / "vaults" / "seventh-vault", backend="builtin")
    for mode in ("as_of", "present", "any"):
        ok = 0
        for q in qs:
            a = harness.ask(q["question"], index=idx, backend=be, mode=None if mode == "as_of" else mode)
            ok += measures.answer_correct(q, a.to_dict())
        print(mode, f"{ok}/{len(qs)}")
