"""Make the builtin embedder's word table (word_vectors.npy and word_vectors.json) from
an Ollama embedder: each word's vector, centred, cut to its first DIMS principal axes,
unit length, stored as float16.

In:  a word list, most frequent first: --words FILE (one word a line) or --tokenizer
     tokenizer.json (a WordPiece vocabulary's whole lowercase words, in its order; the
     shipped table used all-MiniLM-L6-v2's, the BERT uncased vocabulary); an Ollama
     server (OLLAMA_HOST) serving --model.
Out: word_vectors.npy and word_vectors.json beside the modules (or --out DIR); the
     sidecar holds the words, the sha256 of the .npy and how the table was made.
     Every builtin index made before is rebuilt by the next `verso ingest` (the
     embedder's id names the table).

    python tools/make_word_vectors.py --tokenizer tokenizer.json --model all-minilm

The shipped table: all-minilm (all-MiniLM-L6-v2) on the rig of docs/real-models.md,
21,745 words, 64 axes; about a minute.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import _checkout  # noqa: E402,F401  (`verso` is this checkout)

import numpy as np  # noqa: E402

from verso import models  # noqa: E402
from verso import store  # noqa: E402
from verso import word_vectors  # noqa: E402

WORD_RE = re.compile(r"[a-z]+")
BATCH = 512


def words_of(args) -> list[str]:
    if args.words:
        text = Path(args.words).read_text(encoding="utf-8")
        words = [w.strip().lower() for w in text.splitlines()]
    else:
        vocab = json.loads(Path(args.tokenizer).read_text(encoding="utf-8"))["model"]["vocab"]
        words = [w for w, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    return list(dict.fromkeys(w for w in words if WORD_RE.fullmatch(w)))


def reduce(vectors: np.ndarray, dims: int) -> np.ndarray:
    """Centred, projected on the first `dims` principal axes, each row unit length."""
    x = vectors.astype(np.float64)
    x -= x.mean(axis=0)
    _, _, axes = np.linalg.svd(x, full_matrices=False)
    return word_vectors.unit(x @ axes[:dims].T)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--words", help="a word a line, most frequent first")
    src.add_argument("--tokenizer", help="a tokenizer.json with a WordPiece vocabulary")
    ap.add_argument("--model", default="all-minilm", help="the Ollama embedder")
    ap.add_argument("--dims", type=int, default=64)
    ap.add_argument("--out", default=str(ROOT), help="the folder to write the two files to")
    args = ap.parse_args(argv)
    words = words_of(args)
    if len(words) < args.dims:
        ap.error(f"{len(words)} words: fewer than --dims {args.dims}")
    emb, got, started = models.OllamaEmbedder(args.model), [], time.time()
    for start in range(0, len(words), BATCH):
        got.append(emb.embed_words(words[start:start + BATCH]))
        print(f"\r{start + len(got[-1])}/{len(words)} words", end="", file=sys.stderr)
    print(f" in {time.time() - started:.0f} s", file=sys.stderr)
    table = reduce(np.concatenate(got), args.dims).astype(np.float16)
    buf = io.BytesIO()
    np.save(buf, table)
    out = Path(args.out)
    store.write_atomic(out / word_vectors.TABLE, buf.getvalue())
    meta = {"sha256": hashlib.sha256(buf.getvalue()).hexdigest(), "model": args.model,
            "dims": args.dims, "made_by": "tools/make_word_vectors.py",
            "source": args.words or "the whole words of " + Path(args.tokenizer).name,
            "words": words}
    store.write_atomic(out / word_vectors.SIDECAR, json.dumps(meta).encode("utf-8"))
    print(f"{len(words)} words x {args.dims} written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
