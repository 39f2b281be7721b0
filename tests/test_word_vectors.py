"""The builtin embedder's word table: what words mean, read once, checked, summed."""

import json
import shutil

import numpy as np
import pytest

from verso import embedder
from verso import textkit
from verso import word_vectors


def _cos(a, b):
    return float(a @ b)


def test_a_question_in_other_words_is_nearer_the_note_that_answers_it():
    # the kind of note the hashed features miss: no word shared with the question
    q, right, wrong = word_vectors.vectors([
        "what did the bathroom refit cost",
        "Shower and tiles: the quote came to 4,200 pounds",
        "Took the dog to the vet on Tuesday"])
    assert _cos(q, right) > _cos(q, wrong) + 0.1
    emb = embedder.BuiltinEmbedder()
    q, right, wrong = emb.embed_documents([
        "what did the bathroom refit cost",
        "Shower and tiles: the quote came to 4,200 pounds",
        "Took the dog to the vet on Tuesday"])
    assert _cos(q, right) > _cos(q, wrong)


def test_sums_match_a_plain_loop_over_terms(monkeypatch):
    texts = ["The boiler service is booked for March", "", "Ünïcödé 1,550 and the of",
             "Prices went up: the plumber's prices and the boilers", "zzqx Marenka 07700"]
    t = word_vectors.table()
    want = np.zeros((len(texts), t.rows.shape[1]), dtype=np.float64)
    for i, text in enumerate(texts):
        for term in textkit.terms(text):
            if term in t.index:
                want[i] += t.rows[t.index[term]] * t.weight[t.index[term]]
    norms = np.linalg.norm(want, axis=1, keepdims=True)
    want = want / np.maximum(norms, 1e-12)
    np.testing.assert_allclose(word_vectors.vectors(texts), want, atol=1e-5)
    monkeypatch.setattr(word_vectors, "BATCH", 4)             # a text's words over batches
    got = word_vectors.vectors(texts * 3)
    np.testing.assert_allclose(got[:len(texts)], want, atol=1e-5)
    np.testing.assert_allclose(got[-len(texts):], want, atol=1e-5)
    assert not got[1].any() and not got[4].any()              # no word of the table


def test_the_cosine_weighs_the_two_parts_by_the_share():
    texts = ["the boiler service is booked", "annual heating check for the boiler"]
    emb = embedder.BuiltinEmbedder()
    both = emb.embed_documents(texts)
    hashed = both[:, :embedder.EMBED_DIM]
    words = word_vectors.vectors(texts)
    counts = embedder._both(texts)[0]
    raw = np.sign(counts) * np.log1p(np.abs(counts))
    raw /= np.linalg.norm(raw, axis=1, keepdims=True)
    share = embedder.WORDS_SHARE
    assert _cos(*both) == pytest.approx((1 - share) * _cos(*raw) + share * _cos(*words),
                                        abs=1e-5)
    np.testing.assert_allclose(np.linalg.norm(both, axis=1), 1.0, atol=1e-5)
    # a text with no word of the table: the hashed part alone, unit length
    alone = emb.embed_documents(["Marenka 07700 zzqx"])[0]
    assert not alone[embedder.EMBED_DIM:].any()
    assert np.linalg.norm(alone[:embedder.EMBED_DIM]) == pytest.approx(1.0, abs=1e-5)
    assert np.linalg.norm(hashed[0]) < 1.0


def _copy(tmp_path):
    for name in (word_vectors.TABLE, word_vectors.SIDECAR):
        shutil.copy(word_vectors.HERE / name, tmp_path / name)
    return tmp_path


def test_a_damaged_table_is_an_error_not_other_vectors(tmp_path):
    folder = _copy(tmp_path)
    data = bytearray((folder / word_vectors.TABLE).read_bytes())
    data[-3] ^= 0x55
    (folder / word_vectors.TABLE).write_bytes(bytes(data))
    with pytest.raises(word_vectors.TableProblem, match="does not match its sha256"):
        word_vectors.table(folder)


def test_a_missing_or_short_table_is_an_error(tmp_path):
    with pytest.raises(word_vectors.TableProblem, match="unreadable"):
        word_vectors.table(tmp_path)
    folder = _copy(tmp_path)
    meta = json.loads((folder / word_vectors.SIDECAR).read_text())
    meta["words"] = meta["words"][:-1]
    (folder / word_vectors.SIDECAR).write_text(json.dumps(meta))
    with pytest.raises(word_vectors.TableProblem, match="rows for"):
        word_vectors.table(folder)
    (folder / word_vectors.SIDECAR).write_text(json.dumps([1, 2]))
    with pytest.raises(word_vectors.TableProblem, match="names no words"):
        word_vectors.table(folder)


def test_the_embedder_id_names_the_table_and_the_share():
    emb = embedder.BuiltinEmbedder()
    assert word_vectors.table().sha256[:8] in emb.id
    assert emb.id.endswith(str(embedder.WORDS_SHARE))
    assert emb.dim == embedder.EMBED_DIM + word_vectors.dim()


def test_the_tool_makes_a_table_the_embedder_reads(tmp_path, monkeypatch):
    """tools/make_word_vectors.py against a fake Ollama: words kept in order once each
    (only plain lowercase words), rows unit length, a sidecar whose sha256 checks."""
    import sys
    from pathlib import Path
    from fakes import FakeOllama
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
    import make_word_vectors
    words = ["boiler", "Service", "don't", "x1", "boiler", "heating", "annual", "check",
             "kitchen", "tiles", "shower", "bathroom", "quote", "price"]
    (tmp_path / "words.txt").write_text("\n".join(words), encoding="utf-8")
    with FakeOllama() as fake:
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        assert make_word_vectors.main(["--words", str(tmp_path / "words.txt"), "--model",
                                       "nomic-embed-text", "--dims", "10",
                                       "--out", str(tmp_path)]) == 0
    meta = json.loads((tmp_path / word_vectors.SIDECAR).read_text())
    assert meta["words"] == ["boiler", "service", "heating", "annual", "check", "kitchen",
                             "tiles", "shower", "bathroom", "quote", "price"]
    t = word_vectors.table(tmp_path)
    assert t.sha256 == meta["sha256"] and t.rows.shape == (11, 10)
    raw = np.load(tmp_path / word_vectors.TABLE).astype(np.float32)
    np.testing.assert_allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    assert t.index["boiler"] == 0 and t.index["service"] == 1     # looked up by index term
    assert word_vectors.vectors(["the boiler"], tmp_path).any()
