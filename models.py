"""Model calls: every embed, judge and write call goes through here, and into the ledger.

In:  texts to embed, passages and claims to judge, chat messages to write from.
Out: float32 L2-normalised vectors, probabilities, answer text; one ledger row per call
     (stage, backend, model, input tokens, output tokens, seconds, dollars).
Not: retrieval, prompts or verdicts (the stage modules own those).

Backends are chosen by name with load_backend(): `builtin` (offline, numpy only),
`ollama` (local server) and `jev` (hosted judge). Importing this module starts nothing.
"""

from __future__ import annotations

import re
import time
import zlib
from dataclasses import dataclass, field

import numpy as np

# ---------------------------------------------------------------------------- text

TOKEN_RE = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+", re.UNICODE)
THOUSANDS_RE = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before
being below between both but by can could did do does doing down during each few for
from further had has have having he her here hers herself him himself his how i if in
into is it its itself just me more most my myself no nor not now of off on once only
or other our ours ourselves out over own same she should so some such than that the
their theirs them themselves then there these they this those through to too under
until up very was we were what when where which while who whom why will with would
you your yours yourself yourselves s t d ll m re ve
""".split())


def _norm_number(tok: str) -> str:
    if THOUSANDS_RE.match(tok):
        tok = tok.replace(",", "")
    return tok.rstrip(".,")


def tokenize(text: str) -> list[str]:
    """Lowercase word and number tokens; "1,550" -> "1550", "3.5" stays "3.5"."""
    out = []
    for tok in TOKEN_RE.findall(text.lower()):
        if tok[0].isdigit():
            tok = _norm_number(tok)
            if "," in tok:  # a list like "3,4" that is no thousands group
                out.extend(t for t in tok.split(",") if t)
                continue
        out.append(tok)
    return out


def _stem(tok: str) -> str:
    if tok[0].isdigit() or len(tok) <= 3:
        return tok
    if tok.endswith("ies") and len(tok) > 4:
        return tok[:-3] + "y"
    if tok.endswith("s") and not tok.endswith(("ss", "us", "is")):
        return tok[:-1]
    return tok


def terms(text: str) -> list[str]:
    """Index terms: tokens without stopwords, plurals folded. BM25, embedder, judge."""
    return [_stem(t) for t in tokenize(text) if t not in STOPWORDS]


def numbers(text: str) -> list[str]:
    """Numeric mentions, normalised like tokenize(): "£1,550/day" -> ["1550"]."""
    return [t for t in tokenize(text) if t[0].isdigit()]


def count_tokens(text: str) -> int:
    """A model-free token estimate (about 4 characters a token) for the ledger."""
    return max(1, (len(text) + 3) // 4) if text else 0


# -------------------------------------------------------------------------- ledger


class BackendError(Exception):
    """A model backend failed; the message is one actionable line."""


@dataclass
class Ledger:
    """Every model call of one question (or one run), attributed to a stage."""

    rows: list = field(default_factory=list)

    def record(self, stage, backend, model, input_tokens=0, output_tokens=0,
               seconds=0.0, dollars=0.0):
        self.rows.append({"stage": stage, "backend": backend, "model": model,
                          "input_tokens": int(input_tokens),
                          "output_tokens": int(output_tokens),
                          "seconds": float(seconds), "dollars": float(dollars)})

    def by_stage(self) -> dict:
        out: dict = {}
        for r in self.rows:
            t = out.setdefault(r["stage"], {"calls": 0, "input_tokens": 0,
                                            "output_tokens": 0, "seconds": 0.0,
                                            "dollars": 0.0})
            t["calls"] += 1
            for k in ("input_tokens", "output_tokens", "seconds", "dollars"):
                t[k] += r[k]
        return out


def _record(ledger, stage, backend, model, started, inp=0, out=0, dollars=0.0):
    if ledger is not None:
        ledger.record(stage, backend, model, inp, out, time.perf_counter() - started,
                      dollars)


# ------------------------------------------------------------- builtin embedder

EMBED_DIM = 384          # hashed feature buckets (one float32 row per chunk)
NGRAM_RANGE = (3, 5)     # character n-grams of each term, with boundary marks
NGRAM_WEIGHT = 0.35      # a char n-gram counts this much against a whole term
BUILTIN_EMBEDDER = "builtin-hash-v1"


def _bucket(feature: str) -> tuple[int, float]:
    h = zlib.crc32(feature.encode("utf-8"))
    return h % EMBED_DIM, (1.0 if (h >> 31) & 1 else -1.0)


def _features(text: str) -> dict[int, float]:
    """Signed hashed counts of terms and their char n-grams (crc32: stable everywhere)."""
    feats: dict[int, float] = {}
    for term in terms(text):
        b, s = _bucket("w:" + term)
        feats[b] = feats.get(b, 0.0) + s
        marked = f"<{term}>"
        lo, hi = NGRAM_RANGE
        for n in range(lo, hi + 1):
            for i in range(len(marked) - n + 1):
                b, s = _bucket(marked[i:i + n])
                feats[b] = feats.get(b, 0.0) + s * NGRAM_WEIGHT
    return feats


def _counts(texts: list[str]) -> np.ndarray:
    m = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
    for i, t in enumerate(texts):
        f = _features(t)
        if f:
            m[i, list(f.keys())] = list(f.values())
    return m  # [n, EMBED_DIM] signed raw counts


class BuiltinEmbedder:
    """Hashed word + char n-gram TF-IDF vectors; IDF is fitted once per index."""

    name = "builtin"
    dim = EMBED_DIM

    def __init__(self, idf: np.ndarray | None = None):
        self.idf = (np.ones(EMBED_DIM, dtype=np.float32) if idf is None
                    else np.asarray(idf, dtype=np.float32))
        digest = zlib.crc32(self.idf.tobytes()) if idf is not None else 0
        self.id = f"{BUILTIN_EMBEDDER}-{EMBED_DIM}-{digest:08x}"

    @classmethod
    def fit(cls, texts: list[str]) -> "BuiltinEmbedder":
        """IDF per bucket from document frequencies: log((n + 1) / (df + 1)) + 1."""
        df = np.zeros(EMBED_DIM, dtype=np.float64)
        for start in range(0, len(texts), 2048):
            df += (_counts(texts[start:start + 2048]) != 0).sum(axis=0)
        idf = np.log((len(texts) + 1) / (df + 1)) + 1.0
        return cls(idf.astype(np.float32))

    def _vectors(self, texts: list[str]) -> np.ndarray:
        m = _counts(texts)
        m = np.sign(m) * np.log1p(np.abs(m)) * self.idf  # sublinear tf, idf weight
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return (m / np.maximum(norms, 1e-12)).astype(np.float32)

    def embed_documents(self, texts, ledger=None, stage="ingest"):
        started = time.perf_counter()
        out = self._vectors(list(texts))
        _record(ledger, stage, "builtin", self.id, started,
                sum(count_tokens(t) for t in texts))
        return out

    def embed_query(self, text, ledger=None, stage="retrieve"):
        started = time.perf_counter()
        out = self._vectors([text])[0]
        _record(ledger, stage, "builtin", self.id, started, count_tokens(text))
        return out


# ---------------------------------------------------------------- builtin judge
# (section owned by the pipeline developer: BuiltinJudge)


# --------------------------------------------------------------- builtin writer
# (section owned by the pipeline developer: BuiltinWriter)


# ------------------------------------------------------------------------ ollama
# (section owned by the backends developer: OllamaEmbedder, OllamaJudge, OllamaWriter)


# --------------------------------------------------------------------------- jev
# (section owned by the backends developer: JevJudge)


# --------------------------------------------------------------------- selection


@dataclass
class Backend:
    name: str
    embedder: object
    judge: object
    writer: object
    note: str = ""


def load_backend(name: str = "builtin", judge: str | None = None, idf=None) -> Backend:
    """The embed/judge/write trio for a backend name; `idf` restores a builtin index."""
    if name == "builtin":
        return Backend("builtin", BuiltinEmbedder(idf), BuiltinJudge(), BuiltinWriter(),
                       "builtin backend (offline)")
    raise BackendError(f"unknown backend {name!r}: use builtin, ollama or auto")
