"""retrieve.py: top-k, BM25 (hand case + reference), RRF, search, filters, links, cache."""

import math
import random
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from verso import embedder
from verso import textkit
from verso import bm25
from verso import retrieve
from verso.retrieve import Candidate


def make_index(notes, folder=None, sha="sha-1"):
    """An Index-like object from notes: {path, texts, heading?, links?, private?, ...}."""
    files, chunks = [], []
    for n in notes:
        files.append({"path": n["path"], "links": n.get("links", []),
                      "duplicate_of": n.get("duplicate_of"), "family": n["path"],
                      "is_latest": True, "private": n.get("private", False),
                      "date": n.get("date", "2026-01-01"),
                      "date_source": n.get("date_source", "filename")})
        for text in n["texts"]:
            chunks.append({"id": len(chunks), "path": n["path"],
                           "heading": n.get("heading", ""), "section_date": None,
                           "date": n.get("date", "2026-01-01"),
                           "date_source": n.get("date_source", "filename"),
                           "family": n["path"], "is_latest": True, "entry_latest": None,
                           "private": n.get("private", False), "text": text,
                           "hash": str(len(chunks))})
    texts = [f"{c['heading']} {c['text']}" for c in chunks]
    emb = embedder.BuiltinEmbedder.fit(texts) if texts else embedder.BuiltinEmbedder()
    vectors = (emb.embed_documents(texts) if texts
               else np.zeros((0, emb.dim), dtype=np.float32))
    return SimpleNamespace(dir=folder, manifest={"format": 1, "chunks_sha": sha},
                           files=files, chunks=chunks, vectors=vectors,
                           by_path={f["path"]: f for f in files}, cache={}, embedder=emb)


THREE = [  # the hand-worked BM25 corpus: heading + file stem + text
    {"path": "pets/cat.md", "texts": ["cat sat on the mat"]},       # cat cat sat mat
    {"path": "pets/dog.md", "texts": ["the dog sat"]},              # dog dog sat
    {"path": "pets/bird.md", "heading": "Garden", "texts": ["bird in the garden"]},
]                                                                   # garden bird bird garden


# ------------------------------------------------------------------------- top_k


def _full_sort(scores, k):
    return np.lexsort((np.arange(len(scores)), -scores))[:k]


def test_top_k_matches_full_stable_sort_with_ties():
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 60))
        scores = rng.integers(0, 5, size=n).astype(np.float32)  # many ties
        for k in (1, 2, 3, n // 2, n - 1, n, n + 5):
            got = retrieve.top_k(scores, k)
            assert got.tolist() == _full_sort(scores, k).tolist(), (trial, k)


def test_top_k_ties_at_the_cut_take_lowest_ids():
    scores = np.array([1.0, 3.0, 2.0, 2.0, 2.0, 0.5])
    assert retrieve.top_k(scores, 3).tolist() == [1, 2, 3]
    assert retrieve.top_k(scores, 0).tolist() == []
    assert retrieve.top_k(np.zeros(0), 4).tolist() == []


# -------------------------------------------------------------------------- BM25


def test_bm25_three_documents_by_hand():
    index = make_index(THREE)
    ids, scores = retrieve.bm25_ranking(index, "cat sat", 10)
    # N = 3, doc lengths 4, 3, 4, avgdl = 11/3
    # idf(cat) = ln(1 + (3 - 1 + 0.5) / (1 + 0.5)) = ln(8/3) = 0.98083
    # idf(sat) = ln(1 + (3 - 2 + 0.5) / (2 + 0.5)) = ln(1.6) = 0.47000
    # doc 0, dl 4: norm = 1.5 * (0.25 + 0.75 * 4 / (11/3)) = 1.60227
    #   cat tf 2: 0.98083 * 2 * 2.5 / (2 + 1.60227) = 1.36140
    #   sat tf 1: 0.47000 * 1 * 2.5 / (1 + 1.60227) = 0.45153   -> 1.81293
    # doc 1, dl 3: norm = 1.5 * (0.25 + 0.75 * 3 / (11/3)) = 1.29545
    #   sat tf 1: 0.47000 * 2.5 / (1 + 1.29545) = 0.51189       -> 0.51189
    # doc 2: no query term -> not a match
    norm0 = 1.5 * (0.25 + 0.75 * 4 / (11 / 3))
    norm1 = 1.5 * (0.25 + 0.75 * 3 / (11 / 3))
    doc0 = math.log(8 / 3) * 2 * 2.5 / (2 + norm0) + math.log(1.6) * 2.5 / (1 + norm0)
    doc1 = math.log(1.6) * 2.5 / (1 + norm1)
    assert ids.tolist() == [0, 1]
    assert scores == pytest.approx([doc0, doc1], rel=1e-6)
    assert scores == pytest.approx([1.81293, 0.51189], abs=1e-5)


def _reference_bm25(docs, query):
    """Straight from the formula, one document at a time."""
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    df = Counter(t for d in docs for t in set(d))
    out = []
    for d in docs:
        tf, s = Counter(d), 0.0
        for q in query:
            if tf[q]:
                idf = math.log(1 + (n - df[q] + 0.5) / (df[q] + 0.5))
                s += idf * tf[q] * (bm25.K1 + 1) / (
                    tf[q] + bm25.K1 * (1 - bm25.B + bm25.B * len(d) / avgdl))
        out.append(s)
    return np.array(out)


def test_bm25_matches_reference_on_random_corpus():
    rng = random.Random(7)
    words = [f"w{chr(97 + i)}{chr(97 + j)}" for i in range(6) for j in range(6)]
    zipf = [1 / (r + 1) for r in range(len(words))]
    notes = [{"path": f"n/doc{i}.md",
              "texts": [" ".join(rng.choices(words, zipf, k=rng.randint(1, 30)))]}
             for i in range(200)]
    index = make_index(notes)
    docs = [textkit.terms(bm25.chunk_text(c)) for c in index.chunks]
    for _ in range(40):
        query = " ".join(rng.choices(words, k=rng.randint(1, 4)))
        want = _reference_bm25(docs, textkit.terms(query))
        ids, scores = retrieve.bm25_ranking(index, query, 500)
        assert set(ids.tolist()) == set(np.flatnonzero(want).tolist())
        assert scores == pytest.approx(want[ids], rel=1e-5)
        assert np.all(np.diff(scores) <= 1e-12)
        top = retrieve.bm25_ranking(index, query, 10)[0]
        ref_top = _full_sort(want, 10)[:len(top)]
        assert want[top] == pytest.approx(want[ref_top], rel=1e-5)


def test_bm25_sparse_and_dense_scatter_agree(monkeypatch):
    index = make_index(THREE * 20)
    bm = bm25.load_bm25(index)
    got = []
    for ratio in (0, 10 ** 9):  # 0: always the np.unique path; 1e9: always n-long
        monkeypatch.setattr(bm25, "SPARSE_RATIO", ratio)
        got.append(bm25.scores(bm, "cat garden"))
    (ids_a, sc_a), (ids_b, sc_b) = got
    assert ids_a.tolist() == ids_b.tolist() == [i for i in range(60) if i % 3 != 1]
    assert np.array_equal(sc_a, sc_b)


def test_bm25_of_a_plain_chunk_list_is_built_in_memory_and_cached(tmp_path, monkeypatch):
    index = make_index(THREE, folder=tmp_path, sha="one")
    built = bm25.load_bm25(index)
    assert list(tmp_path.iterdir()) == []          # no segments: nothing written
    monkeypatch.setattr(bm25, "build_bm25", lambda chunks: pytest.fail("rebuilt"))
    assert bm25.load_bm25(index) is built and index.cache["bm25"] is built

def test_bm25_unwritable_dir_stays_in_memory(tmp_path):
    index = make_index(THREE, folder=tmp_path / "missing")
    assert bm25.load_bm25(index)["n_docs"] == 3
    assert not (tmp_path / "missing").exists()


# --------------------------------------------------------------------------- RRF


def test_rrf_hand_case():
    fused = retrieve.rrf([[3, 1, 2], [1, 4]], rrf_k=60)
    # 1: 1/62 + 1/61 = 0.032522; 3: 1/61 = 0.016393; 4: 1/62 = 0.016129; 2: 1/63
    assert [cid for cid, _ in fused] == [1, 3, 4, 2]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    assert fused[3][1] == pytest.approx(1 / 63)
    assert retrieve.rrf([[5], [2]]) == [(2, 1 / 61), (5, 1 / 61)]  # tie: lower id


# ------------------------------------------------------------------------ search

VAULT = [
    {"path": "work/rates.md", "texts": ["The consulting day rate is 1550 per day.",
                                        "Invoices go out monthly."],
     "links": ["work/clients.md"]},
    {"path": "work/clients.md", "texts": ["Acme and Globex pay on thirty day terms."]},
    {"path": "workshop/wood.md", "texts": ["Oak planks for the rate of drying."]},
    {"path": "home/garden.md", "texts": ["Tomatoes need water every morning."],
     "links": ["work/rates.md"]},
    {"path": "private/health.md", "private": True,
     "texts": ["Blood pressure reading 120 over 80, the day rate of pulse."]},
    {"path": "home/mtime.md", "date_source": "mtime", "texts": ["Bike tyres pumped."]},
]


def _search(index, query, **kw):
    return retrieve.search(index, query, index.embedder.embed_query(query), **kw)


def test_search_hybrid_keeps_both_ranks_and_fused_score():
    index = make_index(VAULT)
    cands = _search(index, "consulting day rate", k=3, expand_links=False)
    assert len(cands) == 3 and cands[0].path == "work/rates.md"
    assert cands[0].dense_rank is not None and cands[0].bm25_rank is not None
    for c in cands:
        want = sum(1 / (60 + r) for r in (c.dense_rank, c.bm25_rank) if r is not None)
        assert c.fused == pytest.approx(want)
    assert [c.fused for c in cands] == sorted((c.fused for c in cands), reverse=True)


def test_no_lexical_match_still_gets_dense_candidates():
    index = make_index(VAULT)
    cands = _search(index, "zzqx vlorp", k=4, expand_links=False)
    assert len(cands) == 4
    assert all(c.bm25_rank is None and c.dense_rank is not None for c in cands)
    assert _search(index, "zzqx vlorp", method="bm25", expand_links=False) == []


def test_single_method_rankings():
    index = make_index(VAULT)
    dense = _search(index, "day rate", k=3, method="dense", expand_links=False)
    assert all(c.bm25_rank is None for c in dense)
    assert [c.dense_rank for c in dense] == [1, 2, 3]
    bm25 = _search(index, "day rate", k=3, method="bm25", expand_links=False)
    assert all(c.dense_rank is None for c in bm25)
    assert bm25[0].bm25_score >= bm25[-1].bm25_score


def test_empty_index_and_bad_input_are_clear_errors():
    with pytest.raises(ValueError, match="empty"):
        retrieve.search(make_index([]), "anything", np.zeros(embedder.EMBED_DIM))
    index = make_index(VAULT)
    qvec = index.embedder.embed_query("rate")
    with pytest.raises(ValueError, match="unknown method"):
        retrieve.search(index, "rate", qvec, method="sparse")
    with pytest.raises(ValueError, match="dim"):
        retrieve.search(index, "rate", qvec[:10])
    with pytest.raises(ValueError, match="no chunks left"):
        retrieve.search(index, "rate", qvec, folders=["nowhere"])


def test_folder_and_privacy_filters():
    index = make_index(VAULT)
    work = _search(index, "day rate", folders=["work"], expand_links=False)
    assert work and {c.path for c in work} <= {"work/rates.md", "work/clients.md"}
    assert _search(index, "day rate", folders="./work/", expand_links=False) == work
    shared = _search(index, "blood pressure day rate", include_private=False)
    assert shared and all(not c.chunk["private"] for c in shared)
    everyone = _search(index, "blood pressure day rate")
    assert any(c.path == "private/health.md" for c in everyone)


def test_link_expansion_follows_links_and_backlinks():
    index = make_index(VAULT)
    cands = _search(index, "consulting day rate invoices", k=1)
    assert cands[0].path == "work/rates.md" and cands[0].added_by is None
    extra = {c.path: c for c in cands[1:]}
    assert set(extra) == {"work/clients.md", "home/garden.md"}  # link and backlink
    for c in extra.values():
        assert c.added_by == "link" and c.via == "work/rates.md"
        assert c.dense_score is not None
    assert len(_search(index, "consulting day rate invoices", k=1,
                       expand_links=False)) == 1
    shared = _search(index, "consulting day rate invoices", k=1, folders=["work"])
    assert [c.path for c in shared] == ["work/rates.md", "work/clients.md"]


def test_link_expansion_cap_and_closest_chunk():
    hub = {"path": "hub.md", "texts": ["zebra hub index"],
           "links": [f"leaf{i}.md" for i in range(8)] + ["Unresolved Name"]}
    leaves = [{"path": f"leaf{i}.md", "texts": [f"leaf {i} notes about lions",
                                                f"zebra stripes count {i}"]}
              for i in range(8)]
    index = make_index([hub] + leaves)
    cands = _search(index, "zebra hub", k=1)
    added = [c for c in cands if c.added_by == "link"]
    assert len(added) == retrieve.LINK_MAX
    assert all("zebra" in c.chunk["text"] for c in added)  # the closer chunk of each
    qvec = index.embedder.embed_query("lions")
    assert retrieve.closest_chunk(index, qvec, [1, 2]) == 1
    with pytest.raises(ValueError):
        retrieve.closest_chunk(index, qvec, [])


def test_candidate_properties():
    index = make_index(VAULT)
    c = Candidate(index.chunks[0])
    assert (c.id, c.path, c.date, c.is_latest) == (0, "work/rates.md", "2026-01-01", True)
    weak = Candidate(next(ch for ch in index.chunks if ch["path"] == "home/mtime.md"))
    assert weak.date == "undated"
