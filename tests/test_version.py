"""version.py: present / history / any on hand-made families, logs and weak dates."""

from types import SimpleNamespace

import pytest

from verso import embedder
from verso import version
from verso.retrieve import Candidate

H = "handovers/{} handover.md"
PLAN = "plans/career plan {}.md"
LOG = "logs/standup.md"
SERVER_REAL, SERVER_WEAK = "notes/server 2026-02.md", "notes/server.md"

FILES = [
    # a four-version family
    dict(path=H.format("2026-06"), family="handover", date="2026-06-01",
         texts=["Codeforces rating is 1420."]),
    dict(path=H.format("2026-07"), family="handover", date="2026-07-01",
         texts=["Codeforces rating is 1510."]),
    dict(path=H.format("2026-08"), family="handover", date="2026-08-01",
         texts=["Codeforces rating is 1480."]),
    dict(path=H.format("2026-10"), family="handover", date="2026-10-01", latest=True,
         texts=["New gym routine on Mondays.", "Codeforces rating is 1550."]),
    # v1 / v2 / final on one date (ingest flags final) and an exact backup copy
    dict(path=PLAN.format("v1"), family="plan", date="2026-03-01", source="frontmatter",
         texts=["Career goal: frontend internship."]),
    dict(path=PLAN.format("v2"), family="plan", date="2026-03-01", source="frontmatter",
         texts=["Career goal: backend internship."]),
    dict(path=PLAN.format("final"), family="plan", date="2026-03-01", latest=True,
         source="frontmatter", texts=["Career goal: AI backend internship."]),
    dict(path="plans/career plan_backup.md", family="plan", date="2026-03-01",
         source="frontmatter", duplicate_of=PLAN.format("final"),
         texts=["Career goal: AI backend internship."]),
    # a log whose newest entry is about something else
    dict(path=LOG, family=LOG, date="2026-05-20", source="frontmatter", latest=True,
         texts=["Weekly standup notes for the pilot project."],
         sections=[("2026-05-02", "Pilot budget approved at 40k."),
                   ("2026-05-09", "Pilot budget raised to 55k after review."),
                   ("2026-05-16", "Office party on Friday with pizza.")]),
    # a weak (mtime) date against a real one; ingest flagged the mtime file latest
    dict(path=SERVER_REAL, family="server", date="2026-02-01",
         texts=["Server IP address is 10.0.0.5."]),
    dict(path=SERVER_WEAK, family="server", date="2026-01-15", source="mtime",
         latest=True, texts=["Server IP address is 10.0.0.9."]),
    dict(path="misc/recipes.md", family="misc/recipes.md", date="2026-01-05",
         latest=True, texts=["Pancakes need flour and eggs."]),
]


def make_index(specs=FILES):
    files, chunks = [], []
    for s in specs:
        source = s.get("source", "filename")
        f = {"path": s["path"], "family": s["family"], "date": s["date"],
             "date_source": source, "is_latest": s.get("latest", False),
             "duplicate_of": s.get("duplicate_of"), "private": False,
             "versioned": True, "links": [], "tags": [], "title": s["path"]}
        files.append(f)
        parts = [(None, t) for t in s["texts"]] + list(s.get("sections", []))
        newest = max((d for d, _ in s.get("sections", [])), default=None)
        for day, text in parts:
            chunks.append({"id": len(chunks), "path": f["path"], "heading": day or "",
                           "section_date": day, "date": day or f["date"],
                           "date_source": "section" if day else source,
                           "family": f["family"], "is_latest": f["is_latest"],
                           "entry_latest": (day == newest) if day else None,
                           "private": False, "text": text, "hash": str(len(chunks))})
    texts = [c["text"] for c in chunks]
    emb = embedder.BuiltinEmbedder.fit(texts)
    return SimpleNamespace(dir=None, manifest={"chunks_sha": "v"}, files=files,
                           chunks=chunks, vectors=emb.embed_documents(texts),
                           by_path={f["path"]: f for f in files}, cache={},
                           embedder=emb)


@pytest.fixture(scope="module")
def index():
    return make_index()


def cand(index, path, needle="", **kw):
    chunk = next(c for c in index.chunks if c["path"] == path and needle in c["text"])
    return Candidate(chunk, **kw)


def paths(cands):
    return [(c.path, c.chunk["section_date"]) if c.chunk["section_date"] else c.path
            for c in cands]


def settled(cands, mode, threshold=None, index=None):
    """The kept list; checks the (kept, dropped) contract on the way."""
    kept, dropped = version.settle(cands, mode, threshold, index=index)
    assert kept == [c for c in cands if not c.dropped]
    assert dropped == [c for c in cands if c.dropped]
    return kept


def judged(cands, relevance):
    """Set relevance by (path or (path, section date)) key; others 0."""
    for c, key in zip(cands, paths(cands)):
        c.relevance = relevance.get(key, 0.0)
    return cands


# ----------------------------------------------------------------------- present


def test_present_pulls_in_missing_latest_and_marks_older(index):
    q = index.embedder.embed_query("Codeforces rating")
    before = [cand(index, H.format("2026-06")), cand(index, "misc/recipes.md"),
              cand(index, H.format("2026-07"))]
    out = version.apply(index, before, "present", q)
    assert paths(out) == [H.format("2026-06"), H.format("2026-10"), "misc/recipes.md",
                          H.format("2026-07")]
    latest = out[1]
    assert latest.added_by == "version" and "1550" in latest.chunk["text"]  # closest
    assert latest.is_latest and latest.superseded_by is None
    assert latest.dense_score is not None
    assert out[0].superseded_by == out[3].superseded_by == H.format("2026-10")
    assert [c.date for c in out] == ["2026-06-01", "2026-10-01", "2026-01-05",
                                     "2026-07-01"]
    assert not any(c.dropped for c in out)           # apply never drops
    assert all(c.superseded_by is None for c in before)  # input untouched


def test_present_settle_four_versions(index):
    q = index.embedder.embed_query("Codeforces rating")
    four = [cand(index, H.format(d), "rating") for d in
            ("2026-08", "2026-06", "2026-10", "2026-07")]
    out = version.apply(index, four, "present", q)
    assert len(out) == 4                               # latest already there
    judged(out, {H.format(d): 0.9 for d in ("2026-06", "2026-07", "2026-08", "2026-10")})
    kept = settled(out, "present", threshold=0.5)
    assert paths(kept) == paths(out)                  # labelled, never removed
    assert {c.superseded_by for c in out if c.path != H.format("2026-10")} == {
        H.format("2026-10")}
    # the newest version does not answer: the next newest that does wins
    out = version.apply(index, four, "present", q)
    judged(out, {H.format("2026-06"): 0.9, H.format("2026-07"): 0.9,
                 H.format("2026-08"): 0.9, H.format("2026-10"): 0.1})
    kept = settled(out, "present", threshold=0.5)
    assert paths(kept) == paths(out)
    assert out[1].superseded_by == H.format("2026-08")


def test_present_v1_v2_final(index):
    q = index.embedder.embed_query("career goal internship")
    out = version.apply(index, [cand(index, PLAN.format("v1")),
                                cand(index, PLAN.format("v2"))], "present", q)
    assert paths(out) == [PLAN.format("v1"), PLAN.format("final"), PLAN.format("v2")]
    assert out[0].superseded_by == out[2].superseded_by == PLAN.format("final")
    kept = settled([c for c in out], "present")   # no rerank: final is present
    assert paths(kept) == paths(out) and kept[1].superseded_by is None
    assert kept[0].superseded_by == kept[2].superseded_by == PLAN.format("final")
    # final says nothing useful: v1 and v2 share a date, so neither hides the other
    out = judged(version.apply(index, [cand(index, PLAN.format("v1")),
                                       cand(index, PLAN.format("v2"))], "present", q),
                 {PLAN.format("v1"): 0.8, PLAN.format("v2"): 0.8})
    kept = settled(out, "present", threshold=0.5)
    assert paths(kept) == [PLAN.format("v1"), PLAN.format("final"), PLAN.format("v2")]


def test_present_date_tie_flagged_latest_pulls_in_all_and_hides_none():
    tie = make_index([dict(s, latest=True) if s["family"] == "plan" and
                      not s.get("duplicate_of") else s for s in FILES])
    q = tie.embedder.embed_query("career goal internship")
    out = version.apply(tie, [cand(tie, PLAN.format("v2"))], "present", q)
    assert paths(out) == [PLAN.format("v2"), PLAN.format("final"), PLAN.format("v1")]
    assert all(c.superseded_by is None for c in out)
    assert len(settled(out, "present")) == 3


def test_log_newest_entry_about_something_else_never_hides_the_answer(index):
    q = index.embedder.embed_query("pilot budget")
    out = version.apply(index, [cand(index, LOG, "40k")], "present", q)
    assert paths(out) == [(LOG, "2026-05-02"), (LOG, "2026-05-16")]
    assert out[1].added_by == "version" and out[1].chunk["entry_latest"]
    assert out[0].superseded_by is None     # a log's entries are a series: no label yet
    judged(out, {(LOG, "2026-05-02"): 0.9, (LOG, "2026-05-16"): 0.05})
    assert paths(settled(out, "present", threshold=0.5)) == paths(out)
    assert out[0].superseded_by is None     # the newest entry does not answer: no label
    # no rerank: an entry pulled in only by apply is no evidence either
    fresh = version.apply(index, [cand(index, LOG, "40k")], "present", q)
    assert len(settled(fresh, "present")) == 2


def test_log_newer_entry_that_answers_wins(index):
    q = index.embedder.embed_query("pilot budget")
    out = version.apply(index, [cand(index, LOG, "40k"), cand(index, LOG, "55k")],
                        "present", q)
    judged(out, {(LOG, "2026-05-02"): 0.9, (LOG, "2026-05-09"): 0.8})
    kept = settled(out, "present", threshold=0.5)
    assert paths(out) == [(LOG, "2026-05-02"), (LOG, "2026-05-16"), (LOG, "2026-05-09")]
    assert paths(kept) == paths(out)
    assert out[0].superseded_by == LOG + " @ 2026-05-09"
    assert out[0].why == version.WHY_ENTRY
    fresh = version.apply(index, [cand(index, LOG, "40k"), cand(index, LOG, "55k")],
                          "present", q)   # both found by search, no rerank
    assert paths(settled(fresh, "present")) == paths(kept)


def test_weak_mtime_date_never_beats_a_real_date(index):
    q = index.embedder.embed_query("server IP address")
    out = version.apply(index, [cand(index, SERVER_REAL)], "present", q)
    assert paths(out) == [SERVER_REAL, SERVER_WEAK]    # ingest's latest is pulled in
    assert out[1].date == "undated" and out[0].date == "2026-02-01"
    assert out[0].superseded_by is None and out[1].superseded_by is None
    judged(out, {SERVER_REAL: 0.9, SERVER_WEAK: 0.9})
    assert len(settled(out, "present", threshold=0.5)) == 2
    assert len(settled(out, "present")) == 2
    # the other way round a real date may set aside an mtime-dated copy
    specs = [dict(s, latest=(s["path"] == SERVER_REAL)) if s["family"] == "server"
             else s for s in FILES]
    flipped = make_index(specs)
    out = version.apply(flipped, [cand(flipped, SERVER_WEAK),
                                  cand(flipped, SERVER_REAL)], "present", q)
    assert out[0].superseded_by == SERVER_REAL
    judged(out, {SERVER_REAL: 0.9, SERVER_WEAK: 0.9})
    kept = settled(out, "present", threshold=0.5)
    assert paths(kept) == [SERVER_WEAK, SERVER_REAL] and kept[0].superseded_by == SERVER_REAL


# ----------------------------------------------------------------------- history


def test_history_pulls_in_versions_and_orders_oldest_to_newest(index):
    q = index.embedder.embed_query("Codeforces rating")
    before = [cand(index, H.format("2026-08")), cand(index, "misc/recipes.md"),
              cand(index, H.format("2026-10"), "rating")]
    out = version.apply(index, before, "history", q)
    assert paths(out) == [H.format(d) for d in
                          ("2026-06", "2026-07", "2026-08", "2026-10")] + ["misc/recipes.md"]
    assert [c.added_by for c in out] == ["version", "version", None, None, None]
    assert [c.superseded_by for c in out[:4]] == [H.format("2026-10")] * 3 + [None]
    assert settled(out, "history", threshold=0.5) == out   # nothing dropped


def test_history_logs_sections_weak_dates_last_and_no_duplicates(index):
    q = index.embedder.embed_query("budget server career")
    before = [cand(index, "misc/recipes.md"), cand(index, SERVER_WEAK),
              cand(index, LOG, "55k"), cand(index, PLAN.format("v2"))]
    out = version.apply(index, before, "history", q)
    # families in fused order (server, log, plan), each oldest -> newest, undated last
    assert paths(out) == [SERVER_REAL, SERVER_WEAK, (LOG, "2026-05-02"),
                          (LOG, "2026-05-09"), (LOG, "2026-05-16"), PLAN.format("v1"),
                          PLAN.format("v2"), PLAN.format("final"), "misc/recipes.md"]
    assert out[1].date == "undated" and out[0].date == "2026-02-01"
    assert {c.path for c in out if c.added_by} == {SERVER_REAL, PLAN.format("v1"),
                                                   PLAN.format("final"), LOG}
    assert "plans/career plan_backup.md" not in paths(out)
    assert [c.superseded_by for c in out[2:5]] == [None] * 3   # dated entries, in order


def test_history_caps_additions(index, monkeypatch):
    monkeypatch.setattr(version, "HISTORY_MAX_ADDED", 2)
    q = index.embedder.embed_query("budget rating")
    out = version.apply(index, [cand(index, H.format("2026-10"), "rating"),
                                cand(index, LOG, "55k")], "history", q)
    added = [c for c in out if c.added_by == "version"]
    assert len(added) == 2 and {c.path for c in added} == {H.format("2026-06"),
                                                           H.format("2026-07")}


# --------------------------------------------------------------------------- any


def test_any_mode_keeps_everything_in_order_but_marks(index):
    q = index.embedder.embed_query("rating")
    before = [cand(index, H.format("2026-07")), cand(index, "misc/recipes.md")]
    out = version.apply(index, before, "any", q)
    assert paths(out) == paths(before)
    assert out[0].superseded_by == H.format("2026-10")
    assert settled(out, "any") == out


def test_settle_keeps_order_skips_dropped_and_checks_mode(index):
    a, b = cand(index, "misc/recipes.md"), cand(index, SERVER_REAL)
    b.dropped = "cut by rerank"
    assert version.settle([a, b], "present") == ([a], [b])
    assert b.dropped == "cut by rerank"
    with pytest.raises(ValueError, match="time mode"):
        version.apply(index, [a], "latest", None)
    with pytest.raises(ValueError, match="time mode"):
        settled([a], "past")


def test_sectioned_versions_compare_by_file_date_only_when_known():
    specs = [dict(path="journal/log 2026-04.md", family="jl", date="2026-04-30",
                  texts=[], sections=[("2026-04-01", "Rent is 900.")]),
             dict(path="journal/log 2026-05.md", family="jl", date="2026-05-31",
                  latest=True, texts=[], sections=[("2026-05-01", "Rent is 950.")])]
    idx = make_index(specs)
    cands = [Candidate(c) for c in idx.chunks]
    assert len(settled(cands, "present")) == 2        # file dates unknown: keep
    kept = settled(cands, "present", index=idx)
    assert len(kept) == 2
    assert cands[0].superseded_by == "journal/log 2026-05.md"


def test_versions_answer_only_where_what_answers_can_hold_versions(index):
    recipe = cand(index, "misc/recipes.md", relevance=0.9)
    other = cand(index, SERVER_REAL, relevance=0.1)
    # one answering file with no other versions: the present filter had nothing to do
    assert not version.versions_answer(index, [recipe, other], 0.5)
    # nothing answers: no version of the answer was chosen either
    assert not version.versions_answer(index, [other], 0.5)
    assert not version.versions_answer(index, [], 0.5)
    # the answer comes from a family of versions, or from a dated log
    newest = cand(index, H.format("2026-10"), "1550", relevance=0.9)
    assert version.versions_answer(index, [newest, recipe], 0.5)
    entry = cand(index, LOG, "55k", relevance=0.9)
    assert version.versions_answer(index, [entry], 0.5)
    # two different files answer: a newer document may correct an older one
    both = [recipe, cand(index, SERVER_REAL, relevance=0.8)]
    assert version.versions_answer(index, both, 0.5)


def test_history_settle_moves_the_lead_documents_versions_to_the_front(index):
    recipe = cand(index, "misc/recipes.md", relevance=0.95)
    lead = cand(index, H.format("2026-08"), relevance=0.9)
    other = cand(index, SERVER_REAL, relevance=0.8)
    older = cand(index, H.format("2026-06"), relevance=0.2)
    kept, dropped = version.settle([recipe, lead, other, older], "history", 0.5, index=index)
    # the recipe answers best but has no versions; the handover family leads the history
    assert [c.path for c in kept] == [H.format("2026-08"), H.format("2026-06"),
                                      "misc/recipes.md", SERVER_REAL]
    assert dropped == []
    # nothing versioned answers: order unchanged
    kept, _ = version.settle([recipe, older], "history", 0.5, index=index)
    assert [c.path for c in kept] == ["misc/recipes.md", H.format("2026-06")]


def test_history_pulls_each_versions_chunk_parallel_to_a_candidate():
    # both versions are present, each through its other section: the query-closest
    # pull adds nothing, the parallel pull adds v1's "move date" and v2's "rent" chunks
    specs = [dict(path="move/plan v1.md", family="plan", date="2026-03-01",
                  texts=["Move date: 26 September, before the race.",
                         "Rent budget: 1150 per month, central one-bed."]),
             dict(path="move/plan v2.md", family="plan", date="2026-06-01", latest=True,
                  texts=["Move date: 31 October, after the race.",
                         "Rent budget: 1300 per month, central one-bed."])]
    idx = make_index(specs)
    q = idx.embedder.embed_query("plan")
    before = [cand(idx, "move/plan v2.md", "Move"), cand(idx, "move/plan v1.md", "Rent")]
    out = version.apply(idx, before, "history", q)
    added = sorted((c.path, c.chunk["text"][:4]) for c in out if c.added_by == "version")
    assert added == [("move/plan v1.md", "Move"), ("move/plan v2.md", "Rent")]
    assert all(c.dense_score is not None for c in out if c.added_by)
    assert [c.path for c in out] == ["move/plan v1.md"] * 2 + ["move/plan v2.md"] * 2
    assert [c.id for c in version.apply(idx, before, "any", q)] == [c.id for c in before]
