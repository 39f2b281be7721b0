"""The fast text and builtin-embedder code gives exactly what the first version gave.

_Ref below is a frozen copy of textkit/reader's tokenize / terms / _features / _counts /
fit / _vectors as first written (commit 9afe9d6): readable, slow, the reference; the
words' part beside the hashed one (word_vectors.py) is added to it as the embedder adds it.
"""

import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verso import embedder
from verso import textkit
from verso import word_vectors

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import synth  # noqa: E402


class _Ref:
    @staticmethod
    def norm_number(tok):
        if textkit.THOUSANDS_RE.match(tok):
            tok = tok.replace(",", "")
        return tok.rstrip(".,")

    @classmethod
    def tokenize(cls, text):
        out = []
        for tok in textkit.TOKEN_RE.findall(text.lower()):
            if tok[0].isdigit():
                tok = cls.norm_number(tok)
                if "," in tok:
                    out.extend(t for t in tok.split(",") if t)
                    continue
            out.append(tok)
        return out

    @staticmethod
    def stem(tok):
        if tok[0].isdigit() or len(tok) <= 3:
            return tok
        if tok.endswith("ies") and len(tok) > 4:
            return tok[:-3] + "y"
        if tok.endswith("s") and not tok.endswith(("ss", "us", "is")):
            return tok[:-1]
        return tok

    @classmethod
    def terms(cls, text):
        return [cls.stem(t) for t in cls.tokenize(text) if t not in textkit.STOPWORDS]

    @staticmethod
    def bucket(feature):
        h = zlib.crc32(feature.encode("utf-8"))
        return h % embedder.EMBED_DIM, (1.0 if (h >> 31) & 1 else -1.0)

    @classmethod
    def features(cls, text):
        feats = {}
        for term in cls.terms(text):
            b, s = cls.bucket("w:" + term)
            feats[b] = feats.get(b, 0.0) + s
            marked = f"<{term}>"
            for n in range(3, 6):
                for i in range(len(marked) - n + 1):
                    b, s = cls.bucket(marked[i:i + n])
                    feats[b] = feats.get(b, 0.0) + s * embedder.NGRAM_WEIGHT
        return feats

    @classmethod
    def counts(cls, texts):
        m = np.zeros((len(texts), embedder.EMBED_DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            f = cls.features(t)
            if f:
                m[i, list(f.keys())] = list(f.values())
        return m

    @classmethod
    def idf(cls, texts):
        df = np.zeros(embedder.EMBED_DIM, dtype=np.float64)
        for start in range(0, len(texts), 2048):
            df += (cls.counts(texts[start:start + 2048]) != 0).sum(axis=0)
        return (np.log((len(texts) + 1) / (df + 1)) + 1.0).astype(np.float32)

    @classmethod
    def vectors(cls, texts, idf):
        m = cls.counts(texts)
        m = np.sign(m) * np.log1p(np.abs(m)) * idf
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        return (m / np.maximum(norms, 1e-12)).astype(np.float32)

    @classmethod
    def both(cls, texts, idf):
        """The hashed part and the words' part (word_vectors.py, checked against a
        plain loop in test_word_vectors.py) weighed by the share, unit length."""
        share = embedder.WORDS_SHARE
        m = np.concatenate([cls.vectors(texts, idf) * np.sqrt(1 - share),
                            word_vectors.vectors(texts) * np.sqrt(share)], axis=1)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


@pytest.fixture(scope="module")
def texts(tmp_path_factory) -> list[str]:
    """Every note of the sample vault and of a small synthetic vault, plus edge cases."""
    tmp = tmp_path_factory.mktemp("equiv")
    synth.make_vault(tmp / "v", 150, seed=3)
    notes = [p.read_text(encoding="utf-8") for base in (ROOT / "sample-vault", tmp / "v")
             for p in sorted(base.rglob("*.md"))]
    edge = ["", "   ", "the and of", "£1,550/day", "3,4 and 1,550.50 and 12,34,567",
            "Ünïcödé café naïve ½ ² ٣٤,٥ 10,000,000", "ponies cats ss us is",
            "a1,2b x_1,2"]
    return notes + [line for n in notes[:20] for line in n.split("\n")] + edge


def test_tokens_terms_numbers_match_reference(texts):
    for text in texts:
        assert textkit.tokenize(text) == _Ref.tokenize(text)
        assert textkit.terms(text) == _Ref.terms(text)
        assert textkit.numbers(text) == [t for t in _Ref.tokenize(text) if t[0].isdigit()]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab Z9,.;1£-ßİ٣²s\n")) | st.characters(),
               max_size=60))
def test_tokenize_and_terms_match_reference_on_any_text(text):
    assert textkit.tokenize(text) == _Ref.tokenize(text)
    assert textkit.terms(text) == _Ref.terms(text)
    assert textkit.terms(text) == _Ref.terms(text)   # second call: from the memo


def _hashed(texts):
    """The embedder's hashed counts (its words' part aside)."""
    return embedder._both(texts)[0]


def test_counts_are_bit_identical(texts):
    np.testing.assert_array_equal(_hashed(texts), _Ref.counts(texts))
    np.testing.assert_array_equal(_hashed(texts[:1]), _Ref.counts(texts[:1]))
    assert _hashed([]).shape == (0, embedder.EMBED_DIM)
    short = [t for t in texts if 0 < len(_Ref.terms(t)) <= embedder.SMALL_BATCH_TERMS][:300]
    assert len(short) > 50                   # queries: the small-batch Python path
    for t in short:
        np.testing.assert_array_equal(_hashed([t]), _Ref.counts([t]))
    np.testing.assert_array_equal(_hashed(short[:3]), _Ref.counts(short[:3]))


def test_embedder_fit_and_vectors_match_reference(texts):
    emb = embedder.BuiltinEmbedder.fit(texts)
    idf = _Ref.idf(texts)
    np.testing.assert_array_equal(emb.idf, idf)      # same idf -> same embedder id
    assert emb.id == embedder.BuiltinEmbedder(idf).id
    np.testing.assert_allclose(emb.embed_documents(texts), _Ref.both(texts, idf),
                               rtol=0, atol=1e-6)
    np.testing.assert_allclose(emb.embed_query(texts[5]), _Ref.both(texts[5:6], idf)[0],
                               rtol=0, atol=1e-6)
    fresh = embedder.BuiltinEmbedder.fit(texts[:40] + texts[:2])   # counts kept by fit ...
    mixed = ["never fitted text", texts[1], texts[1], texts[1], texts[0]]   # ... and not
    np.testing.assert_allclose(fresh.embed_documents(mixed),
                               _Ref.both(mixed, _Ref.idf(texts[:40] + texts[:2])),
                               rtol=0, atol=1e-6)


# ------------------------------------------------------------------- BM25 arrays

def _chunks(texts):
    """Chunk records whose path and heading follow from their text."""
    return [{"id": i, "path": f"notes/n{len(t) % 7}.md", "heading": f"H{len(t) % 3}",
             "text": t} for i, t in enumerate(texts)]


def _ref_bm25(chunks):
    """The first build_bm25 (commit 935d2ca): per-chunk vocab.setdefault, np.unique."""
    from verso import bm25
    n, vocab, flat = len(chunks), {}, []
    lens = np.zeros(n, dtype=np.int64)
    for i, c in enumerate(chunks):
        cols = [vocab.setdefault(t, len(vocab)) for t in textkit.terms(bm25.chunk_text(c))]
        lens[i] = len(cols)
        flat.append(np.asarray(cols, dtype=np.int64))
    cols = np.concatenate(flat)
    docs = np.repeat(np.arange(n, dtype=np.int64), lens)
    keys, tf = np.unique(cols * n + docs, return_counts=True)
    term, doc = keys // n, keys % n
    df = np.bincount(term, minlength=len(vocab)).astype(np.float64)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    avgdl = float(lens.mean())
    norm = bm25.K1 * (1.0 - bm25.B + bm25.B * lens[doc] / avgdl)
    weights = idf[term] * tf * (bm25.K1 + 1.0) / (tf + norm)
    indptr = np.r_[0, np.cumsum(df.astype(np.int64))]
    return (vocab, indptr, doc.astype(np.int32), weights.astype(np.float32),
            idf.astype(np.float32))


def _synthetic_texts(tmp_path, chunks=120, seed=5):
    synth.make_vault(tmp_path / f"v{seed}", chunks, seed=seed)
    out = []
    for p in sorted((tmp_path / f"v{seed}").rglob("*.md")):
        out += [s for s in p.read_text(encoding="utf-8").split("\n## ") if s.strip()]
    return out


def _scores(bm, queries):
    from verso import bm25
    return [bm25.scores(bm, q) for q in queries]


def test_build_bm25_equals_first_version(tmp_path):
    """Same postings term by term as the first build_bm25 (commit 935d2ca), and the same
    scores (its float32 weights, summed)."""
    from verso import bm25
    chunks = _chunks(_synthetic_texts(tmp_path))
    bm = bm25.build_bm25(chunks)
    vocab, indptr, docs, weights, idf = _ref_bm25(chunks)
    part = bm["parts"][0]
    assert list(bm["vocab"]) == sorted(vocab)           # columns numbered alphabetically
    for t, c in vocab.items():                          # same postings, term by term
        j = bm["vocab"][t]
        got, ref = slice(*part["indptr"][j:j + 2]), slice(*indptr[c:c + 2])
        np.testing.assert_array_equal(part["docs"][got], docs[ref])
        assert bm["idf"][j] == pytest.approx(idf[c], rel=1e-6)
    rng = np.random.default_rng(0)
    for q in [" ".join(rng.choice(sorted(vocab), 3)) for _ in range(40)]:
        ids, scores = bm25.scores(bm, q)
        want = np.zeros(len(chunks))
        for t in textkit.terms(q):
            c = vocab[t]
            np.add.at(want, docs[indptr[c]:indptr[c + 1]], weights[indptr[c]:indptr[c + 1]])
        np.testing.assert_array_equal(ids, np.flatnonzero(want))
        np.testing.assert_allclose(scores, want[ids], rtol=1e-6)
