"""word_vectors: what words mean, a static vector per word: for the builtin embedder,
and for how alike two statement lines are (evidence.py, whatever the embedder).

In:  texts (chunks at ingest, a question or statement lines at ask time); the shipped
     table word_vectors.npy (one float16 row per word, unit length) and its sidecar
     word_vectors.json (the words, most frequent first; the table's sha256; how it was
     made: tools/make_word_vectors.py, from an Ollama embedder's vector of each word).
Out: float32 [n, DIM] vectors, each text's words' rows summed (a rare word weighs more:
     a word's weight grows with the log of its place in the frequency order), unit
     length; a text with no word of the table gives a zero row.
Not: the hashed features (embedder.py), model calls or writing anything. Offline and
     deterministic. Names, numbers and words the table lacks add nothing here: they
     still count in the hashed features and BM25.

Why: the hashed features match a word only by its letters, so a note that says "shower
and tiles" is far from a question about the "bathroom"; every word's vector from a
sentence embedder puts those near each other. The table is read once, and checked
against its sha256: a damaged table is an error, never a quiet fall to other vectors.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np

from verso import textkit

HERE = Path(__file__).resolve().parent
TABLE = "word_vectors.npy"
SIDECAR = "word_vectors.json"
BATCH = 65536            # word rows gathered at once (16 MB of float32 at 64 axes)
_loaded: dict = {}


@dataclasses.dataclass(frozen=True)
class Table:
    """The word table as read: each index term's row, the rows (unit length), each
    word's weight (the log of its place in the frequency order: a rare word weighs
    more), the .npy file's sha256."""
    index: dict
    rows: np.ndarray
    weight: np.ndarray
    sha256: str


class TableProblem(ValueError):
    """The shipped word table is missing or does not match its sha256."""


def table(folder: Path = HERE) -> Table:
    """The word table of `folder`, read once. A word is looked up by its index term
    (textkit.stem), the most frequent word of a term giving its row."""
    got = _loaded.get(folder)
    if got is None:
        got = _loaded[folder] = _read(folder)
    return got


def _read(folder: Path) -> Table:
    try:
        meta = json.loads((folder / SIDECAR).read_text(encoding="utf-8"))
        raw = (folder / TABLE).read_bytes()
    except (OSError, ValueError) as e:
        raise TableProblem(f"the word table in {folder} is unreadable ({e}): "
                           "reinstall Verso") from None
    digest = hashlib.sha256(raw).hexdigest()
    if not isinstance(meta, dict) or not isinstance(meta.get("words"), list):
        raise TableProblem(f"{folder / SIDECAR} names no words: reinstall Verso, or run "
                           "tools/make_word_vectors.py")
    if digest != meta.get("sha256"):
        raise TableProblem(f"{folder / TABLE} does not match its sha256 in {SIDECAR}: "
                           "reinstall Verso, or run tools/make_word_vectors.py")
    rows = np.load(folder / TABLE).astype(np.float32)
    words = meta["words"]
    if rows.shape[0] != len(words):
        raise TableProblem(f"{folder / TABLE} holds {rows.shape[0]} rows for "
                           f"{len(words)} words: run tools/make_word_vectors.py")
    weight = np.log(2.0 + np.arange(len(words))) / np.log(2.0 + len(words))
    index: dict[str, int] = {}
    for i, w in enumerate(words):
        index.setdefault(textkit.stem(w), i)
    return Table(index, rows, weight.astype(np.float32), digest)


def dim(folder: Path = HERE) -> int:
    return table(folder).rows.shape[1]


def vectors(texts: list[str], folder: Path = HERE) -> np.ndarray:
    """[n, DIM] unit rows: the weighted sum of each text's words' rows (zero: no word)."""
    return unit(sums(*textkit.term_occurrences(texts), folder=folder))


def unit(m: np.ndarray) -> np.ndarray:
    """Each row of m scaled to unit length (a zero row stays zero)."""
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def sums(occ: np.ndarray, lens: np.ndarray, names: list, folder: Path = HERE) -> np.ndarray:
    """[texts, DIM] float32: each text's words' weighted rows summed, from the texts'
    term occurrences (textkit.term_occurrences: ids into names, terms per text)."""
    t = table(folder)
    out = np.zeros((len(lens), t.rows.shape[1]), dtype=np.float32)
    at, text = _rows_of(occ, lens, names, t)
    keep = at >= 0
    at, text = at[keep], text[keep]
    for start in range(0, at.size, BATCH):          # a bounded gather of rows at a time
        a, x = at[start:start + BATCH], text[start:start + BATCH]
        starts = np.flatnonzero(np.r_[True, x[1:] != x[:-1]])
        np.add.at(out, x[starts],
                  np.add.reduceat(t.rows[a] * t.weight[a, None], starts, axis=0))
    return out


def _rows_of(occ, lens, names, t: Table) -> tuple[np.ndarray, np.ndarray]:
    """(each term occurrence's table row, -1 where the table lacks it; its text)."""
    if not occ.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    uniq, inv = np.unique(occ, return_inverse=True)
    row_of = np.array([t.index.get(names[i], -1) for i in uniq.tolist()], dtype=np.int64)
    return row_of[inv], np.repeat(np.arange(len(lens)), lens)

