"""Ollama backend against a real HTTP fake on 127.0.0.1: requests, replies, every fault."""

import math
from pathlib import Path

import numpy as np
import pytest

import verso

from verso import embedder
from verso import builtin_writer
from verso import backends
from verso import models
from verso import line_scores
from verso import cost_ledger
from fakes import FakeOllama, closed_port_url

T = 0.5  # seconds: short client timeouts keep the fault tests fast


@pytest.fixture
def fake():
    with FakeOllama() as f:
        yield f


def ollama_embedder(fake, **kw):
    return models.OllamaEmbedder(host=fake.url, timeout=T, **kw)


def writer(fake, model=None):
    return models.OllamaWriter(model, host=fake.url, timeout=T)


def judge(fake, **kw):
    return models.OllamaJudge(writer(fake), **kw)


# ------------------------------------------------------------------------- embed

def test_embed_documents_batches_prefixes_normalises_and_records(fake):
    texts = [f"note {i} about the boiler service" for i in range(models.EMBED_BATCH + 5)]
    ledger = cost_ledger.Ledger()
    e = ollama_embedder(fake)
    m = e.embed_documents(texts, ledger=ledger)
    assert m.shape == (len(texts), 768) and m.dtype == np.float32
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)
    assert e.id == "ollama:nomic-embed-text" and e.dim == 768
    bodies = fake.bodies("/api/embed")
    assert [len(b["input"]) for b in bodies] == [models.EMBED_BATCH, 5]
    assert all(b["model"] == "nomic-embed-text" and b["truncate"] is False for b in bodies)
    assert all(t.startswith("search_document: ") for b in bodies for t in b["input"])
    row, = ledger.rows
    assert row["backend"] == "ollama" and row["stage"] == "ingest"
    assert row["input_tokens"] == sum(len(models.DOC_PREFIX + t) // 4 + 1 for t in texts)


def test_embed_query_prefix_and_dimension_from_first_reply(fake):
    e = ollama_embedder(fake)
    v = e.embed_query("when is the boiler serviced?")
    assert v.shape == (768,) and abs(float(v @ v) - 1) < 1e-5
    assert fake.bodies("/api/embed")[0]["input"] == [
        "search_query: when is the boiler serviced?"]
    doc = e.embed_documents(["The boiler is serviced in May."])[0]
    other = e.embed_documents(["Sourdough needs a warm kitchen."])[0]
    assert float(v @ doc) > float(v @ other)  # the fake's vectors share words


def test_long_text_is_cut_by_us_with_a_note(fake):
    e = ollama_embedder(fake)
    e.embed_documents(["word " * 10_000, "short"])  # 50 000 chars: the fake refuses > 2048*4
    sent = fake.bodies("/api/embed")[0]["input"]
    assert len(sent[0]) == models.EMBED_CONTEXT * models.EMBED_CHARS_PER_TOKEN
    assert sent[1] == "search_document: short"
    assert e.truncated == 1 and "cut to 6144 characters" in e.note


def test_a_text_the_server_finds_too_long_is_halved_until_it_fits(fake):
    """A table of figures runs to fewer characters a token than we reckon: the server
    refuses the batch, so each text goes alone, the long one cut to half until it fits;
    the others are sent whole and nothing is lost."""
    e = ollama_embedder(fake)
    fake.chars_per_token = 2      # 2048 tokens: 4,096 characters; we cut at 6,144
    table = "| 2026-014 | 30/06 | £1,185.00 |\n" * 400
    m = e.embed_documents(["short one", table, "short two"])
    assert m.shape == (3, 768)
    sent = [b["input"] for b in fake.bodies("/api/embed")]
    assert len(sent[0]) == 3                                   # the batch, refused
    assert sent[1] == ["search_document: short one"] and sent[-1] == ["search_document: short two"]
    fitted = [x[0] for x in sent[2:-1]]
    assert [len(x) for x in fitted] == [6144, 3072]            # whole (as we cut it), half
    assert len(fitted[-1]) / 2 <= 2048
    assert e.truncated == 1 and "or fewer" in e.note
    alone = e.embed_documents(["short one", "short two"])         # in their places
    assert (m[0] == alone[0]).all() and (m[2] == alone[1]).all()


def test_a_model_that_refuses_even_a_short_text_is_a_clear_error(fake):
    e = ollama_embedder(fake)
    fake.chars_per_token = 0.01
    with pytest.raises(models.BackendError, match="name another embedder"):
        e.embed_documents(["The boiler is serviced in May, every year, by Dave."])


def test_wrong_dimension_is_a_clear_error(fake):
    e = ollama_embedder(fake)
    e.embed_query("first reply sets the dimension")
    fake.fault("/api/embed", "dim")
    with pytest.raises(models.BackendError,
                       match="1 vectors of 769 dimensions for 1 texts, expected 768"):
        e.embed_documents(["x"])


def test_embed_model_not_pulled_names_the_pull(fake):
    e = ollama_embedder(fake, model="mxbai-embed-large")
    with pytest.raises(models.BackendError) as err:
        e.embed_query("q")
    assert "run `ollama pull mxbai-embed-large`" in str(err.value)
    assert 'model "mxbai-embed-large" not found' in str(err.value)


def test_server_down_says_start_ollama():
    url = closed_port_url()
    with pytest.raises(models.BackendError) as err:
        models.OllamaEmbedder(host=url, timeout=T).embed_query("q")
    assert str(err.value) == (f"Ollama is not answering at {url}: start it with "
                              "`ollama serve`")


def test_hang_times_out_with_one_line(fake):
    fake.fault("/api/embed", "hang")
    with pytest.raises(models.BackendError, match=r"no embed reply .* within 0.2 s"):
        models.OllamaEmbedder(host=fake.url, timeout=0.2).embed_query("q")


def test_slow_reply_within_timeout_is_fine(fake):
    fake.fault("/api/embed", "slow")
    assert ollama_embedder(fake).embed_query("q").shape == (768,)


def test_truncated_json_is_malformed(fake):
    fake.fault("/api/embed", "truncated")
    with pytest.raises(models.BackendError, match="malformed embed reply"):
        ollama_embedder(fake).embed_query("q")


def test_500_retried_once_then_a_clear_error(fake):
    fake.fault("/api/embed", "500", times=1)
    assert ollama_embedder(fake).embed_query("q").shape == (768,)  # recovered
    fake.fault("/api/embed", "500")
    with pytest.raises(models.BackendError, match=r"embed with nomic-embed-text failed \(500"):
        ollama_embedder(fake).embed_query("q")
    assert len(fake.bodies("/api/embed")) == 1 + 1 + 1 + models.OLLAMA_RETRIES


# ------------------------------------------------------------------------- write

MESSAGES = [{"role": "system", "content": "Cite every sentence."},
            {"role": "user", "content": "Notes:\n[c1] handovers/2026-10.md (2026-10-02)\n"
             "The day rate is 1550 per day from October. Parking is extra.\n"
             "[c2] handovers/2026-05.md (2026-05-01)\nThe day rate was 1510.\n\n"
             "Question: What is the day rate now?"}]
REQUEST = builtin_writer.WriteRequest(MESSAGES, "What is the day rate now?")


def test_write_request_and_ledger(fake):
    ledger = cost_ledger.Ledger()
    w = writer(fake)
    written = w.write(REQUEST, stage="generate", ledger=ledger)
    text, inp, out = written.text, written.input_tokens, written.output_tokens
    assert text == "The day rate is 1550 per day from October [c1]."
    assert written.writer == "ollama" and written.trace == {}
    body, = fake.bodies("/api/chat")
    assert body["messages"] == MESSAGES              # the messages, as they are
    assert body["model"] == "verso-writer" and body["stream"] is False
    assert body["think"] is False
    assert body["options"] == {"temperature": 0, "seed": models.WRITE_SEED,
                               "num_ctx": 2048, "num_predict": models.WRITE_MAX_TOKENS}
    row, = ledger.rows
    assert (row["input_tokens"], row["output_tokens"]) == (inp, out) and inp > 0 < out
    assert row["server_seconds"] == pytest.approx(0.837122888)  # nanoseconds -> seconds
    assert w.last_stats["load_seconds"] == pytest.approx(0.282868911)


def test_empty_reply_is_an_error_not_an_answer(fake):
    fake.fault("/api/chat", "empty")
    with pytest.raises(models.BackendError, match="empty reply"):
        writer(fake).write(REQUEST)


def test_bad_citation_is_passed_on_for_verify(fake):
    fake.fault("/api/chat", "badcite")
    assert "[c9]" in writer(fake).write(REQUEST).text


def test_writer_not_created_names_the_modelfile():
    with FakeOllama(models=["nomic-embed-text:latest"]) as f:
        with pytest.raises(models.BackendError,
                           match=r"run `ollama create verso-writer -f '\S+/Modelfile'`"):
            writer(f).write(REQUEST)


def test_model_that_cannot_chat(fake):
    with pytest.raises(models.BackendError, match="cannot chat .*does not support chat"):
        writer(fake, "nomic-embed-text").write(REQUEST)


def test_modelfile_builds_the_writer():
    lines = (Path(__file__).parents[1] / "Modelfile").read_text().splitlines()
    code = [ln.split() for ln in lines if ln.strip() and not ln.startswith("#")]
    assert ["FROM", "qwen3:8b"] in code and ["PARAMETER", "temperature", "0"] in code
    assert any(c[:2] == ["PARAMETER", "num_ctx"] and int(c[2]) >= 8192 for c in code)
    assert not any(c[0] == "SYSTEM" for c in code)


# ------------------------------------------------------------------------- judge

PASSAGES = {
    "7": {"text": "The boiler is serviced every May by Hughes Heating.", "path": "home.md",
          "heading": "Boiler", "date": "2026-05-01", "dense_score": 0.4, "private": True},
    "9": {"text": "Sourdough starter: feed twice a day.", "path": "food.md",
          "heading": "", "date": "2026-02-01", "dense_score": None, "private": False},
}


def test_relevance_by_logprobs_when_no_systemone(fake):
    ledger = cost_ledger.Ledger()
    j = judge(fake)
    p = j.relevance("When is the boiler serviced?", PASSAGES, stage="rerank", ledger=ledger)
    assert set(p) == {"7", "9"} and p["7"] > 0.5 > p["9"]
    assert j.systemone is False and "no System One (404" in j.note
    chats = fake.bodies("/api/chat")
    assert len(chats) == 2 and all(b["logprobs"] is True and b["top_logprobs"] == 5
                                   and b["options"]["num_predict"] == 1 for b in chats)
    row, = [r for r in ledger.rows]
    assert row["stage"] == "rerank" and row["input_tokens"] > 0
    j.relevance("boiler", PASSAGES)  # found out once: no second systemone request
    assert len(fake.bodies("/v1/systemone")) == 1


def test_yes_probability_is_the_softmax_of_the_two_logprobs():
    top = [("yes", math.log(0.6)), ("no", math.log(0.2)), ("Yes", math.log(0.1))]
    p = models._label_probs(top, ("yes", "no"), lambda t: t.strip().lower())
    assert p["yes"] == pytest.approx(0.7 / 0.9)


def test_support_by_logprobs(fake):
    j = judge(fake, systemone=False)
    claims = {"s1": {"sentence": "The boiler is serviced in May.",
                     "sources": ["The boiler is serviced every May."], "private": False},
              "s2": {"sentence": "The rate is 1550.", "sources": ["Parking costs 12."],
                     "private": False}}
    p = j.support(claims, stage="verify")
    assert p["s1"] > 0.5 > p["s2"]


def test_concurrency_is_bounded(fake):
    fake.fault("/api/chat", "slow")
    many = {str(i): dict(PASSAGES["9"]) for i in range(10)}
    judge(fake, systemone=False).relevance("sourdough", many)
    assert 1 < fake.max_in_flight <= models.OLLAMA_CONCURRENCY


def test_systemone_when_the_server_has_it():
    with FakeOllama(models=["verso-writer:latest", "d1-omni:600m"], systemone=True) as f:
        ledger = cost_ledger.Ledger()
        j = judge(f)
        p = j.relevance("When is the boiler serviced?", PASSAGES, ledger=ledger)
        assert p["7"] > 0.5 > p["9"] and j.systemone is True
        body, = f.bodies("/v1/systemone")
        assert body["model"] == "d1-omni:600m" and set(body["state"]["passages"]) == {"7", "9"}
        assert {q["type"] for q in body["questions"].values()} == {"noul"}
        assert not f.bodies("/api/chat")
        assert ledger.rows[0]["input_tokens"] > 0


def test_decision_model_not_pulled_falls_back_to_logprobs():
    with FakeOllama(systemone=True) as f:
        j = judge(f)
        assert j.relevance("boiler", PASSAGES)["7"] > 0.5
        assert j.systemone is False and "not found" in j.note


def test_no_logprobs_names_the_ollama_version(fake):
    fake.fault("/api/chat", "nologprobs")
    with pytest.raises(models.BackendError, match="Ollama >= 0.12.11"):
        judge(fake, systemone=False).relevance("boiler", PASSAGES)


def test_answer_that_is_not_yes_or_no(fake):
    fake.fault("/api/chat", "noyes")
    with pytest.raises(models.BackendError, match="answered 'The', not yes or no"):
        judge(fake, systemone=False).support(
            {"a": {"sentence": "x", "sources": ["y"], "private": False}})


# --------------------------------------------------------------------- selection

def test_auto_uses_ollama_when_it_has_the_models(fake):
    b = backends.load_backend("auto", host=fake.url, timeout=T)
    assert b.name == "ollama" and isinstance(b.writer.inner, models.OllamaWriter)
    assert b.writer.name == "choose" and "chooses lines" in b.note
    assert isinstance(b.embedder, models.OllamaEmbedder)
    assert isinstance(b.judge, line_scores.BuiltinJudge)
    assert b.note == ("ollama: verso-writer writes, nomic-embed-text embeds; the model "
                      "chooses lines, code writes them; judge: builtin ("
                      + backends.AUTO_JUDGE_WHY + ")")
    b = backends.load_backend("ollama", judge="builtin", host=fake.url, timeout=T,
                              writer="generate")
    assert b.note == ("ollama: verso-writer writes, nomic-embed-text embeds; the model "
                      "writes free text; judge: builtin")
    assert isinstance(b.writer, models.OllamaWriter)


def test_one_default_judge_whatever_way_the_backend_is_named(fake, monkeypatch):
    # issue 44: `--backend ollama` put the model in the judge's seat (44 s judging on the
    # rig, the rates card dropped) where `auto` paired it with the builtin judge
    auto = backends.load_backend("auto", host=fake.url, timeout=T)
    named = backends.load_backend("ollama", host=fake.url, timeout=T)
    for b in (auto, named):
        assert b.name == "ollama" and isinstance(b.judge, line_scores.BuiltinJudge)
        assert b.note.endswith(f"; judge: builtin ({backends.AUTO_JUDGE_WHY})")
    assert auto.note == named.note and "judges," not in named.note
    asked = backends.load_backend("ollama", judge="ollama", host=fake.url, timeout=T)
    assert isinstance(asked.judge, models.OllamaJudge) and asked.judge.writer is asked.writer.inner
    monkeypatch.setenv("TYPESAFE_API_KEY", "sk-env")          # a hosted judge: private
    jev = backends.load_backend("ollama", judge="jev", host=fake.url, timeout=T)  # text stays
    assert isinstance(jev.judge.local, line_scores.BuiltinJudge)   # with the default judge
    assert not fake.bodies("/api/chat")                       # no model judged anything


def test_auto_falls_back_to_builtin_and_says_why():
    url = closed_port_url()
    b = backends.load_backend("auto", host=url)
    assert b.name == "builtin" and isinstance(b.embedder, embedder.BuiltinEmbedder)
    assert b.note == (f"auto chose builtin: Ollama is not answering at {url}: start it "
                      "with `ollama serve`")
    with FakeOllama(models=["nomic-embed-text:latest"]) as f:
        b = backends.load_backend(host=f.url)
        assert b.name == "builtin" and f"`ollama create verso-writer -f '{verso.data_path('Modelfile')}'`" in b.note


def test_explicit_ollama_never_falls_back():
    with pytest.raises(models.BackendError, match="start it with `ollama serve`"):
        backends.load_backend("ollama", host=closed_port_url())
    with FakeOllama() as f, pytest.raises(models.BackendError, match="cannot do completion"):
        backends.load_backend("ollama", host=f.url, write_model="nomic-embed-text")
    with pytest.raises(models.BackendError, match="unknown backend"):
        backends.load_backend("llama")


def test_probe_hang_is_bounded(fake):
    fake.fault("/api/tags", "hang")
    b = backends.load_backend("auto", host=fake.url, probe_timeout=0.2)
    assert b.name == "builtin" and "within 0.2 s" in b.note


def test_an_index_brings_its_own_embedder():
    class Index:  # what store_load.load_index hands over: the embedder its vectors came from
        embedder = embedder.BuiltinEmbedder()
    with FakeOllama(models=["verso-writer:latest"]) as f:  # no embedding model needed
        b = backends.load_backend("auto", index=Index(), host=f.url)
        assert b.name == "ollama" and b.embedder is Index.embedder
        assert f"vectors from the index ({embedder.BUILTIN_EMBEDDER}" in b.note


def test_ingest_cli_builds_an_ollama_index(fake, tmp_path, monkeypatch):
    from verso import ingest
    from verso import store_load
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "rent.md").write_text("# Rent\nThe rent is 800 euros a month.\n")
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    idx_dir = tmp_path / "idx"
    assert ingest.main([str(vault), "--index", str(idx_dir), "--backend", "ollama"]) == 0
    idx = store_load.load_index(idx_dir, backends.load_backend("ollama", host=fake.url))
    assert idx.manifest["embedder"] == "ollama:nomic-embed-text"
    assert idx.vectors.shape == (1, 768)
    embeds = fake.bodies("/api/embed")
    docs = [t for b in embeds for t in b["input"] if t.startswith("search_document: ")]
    assert len(docs) == 1 and "The rent is 800 euros a month." in docs[0]


def test_evaluate_runs_end_to_end_on_the_ollama_backend(fake, tmp_path, monkeypatch,
                                                       capsys):
    import json

    from verso import evaluate
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "rent 2026-03.md").write_text("# Rent\nThe rent is 800 euros a month.\n")
    (vault / "rent 2026-09.md").write_text("# Rent\nThe rent is 850 euros a month.\n")
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps(dict(
        id="r1", question="What is the rent now?", category="current",
        time_mode="present", answer="850 euros", key_facts=["850"],
        forbidden_facts=["800"], gold_files=["rent 2026-09.md"], answerable=True)) + "\n")
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    code = evaluate.main(["--vault", str(vault), "--questions", str(questions),
                          "--backend", "ollama", "--variant", "full", "no-rerank",
                          "--out", str(tmp_path / "run"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["backend"] == "ollama" and set(out["variants"]) == {"full", "no-rerank"}
    paths = [r["path"] for r in fake.requests]
    assert "/api/embed" in paths and "/api/chat" in paths     # ollama embedded and wrote
    manifest = json.loads((tmp_path / "run" / "index" / "manifest.json").read_text())
    assert manifest["embedder"] == "ollama:nomic-embed-text"
    records = evaluate.load_records(tmp_path / "run")
    wrote = [r for r in records if r["messages"]]     # kept for replaying offline
    assert wrote and all(r["reply"] and r["question"] == "What is the rent now?"
                         and "Question: What is the rent now?" in r["messages"][-1]["content"]
                         for r in wrote)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["writer"] == "verso-writer" and config["prompt_form"] == "plain"
    chose = [r for r in records if r["choose"] and r["features"]]
    assert chose and all(r["calibration_key"] == "ollama@" + "0" * 12 for r in chose)
    # verify passed some: the calibration this model lacks (no p) is what holds them back
    assert any(r["checks_passed"] for r in chose)
    assert all(r["confidence"] is None and r["verdict"] != "SHIP" for r in chose), chose


def test_a_calibration_holds_for_the_model_it_was_fitted_on_not_its_name(fake, monkeypatch):
    from verso import calibrate
    from verso import harness
    w = writer(fake)
    assert w.identity == "0" * 12                       # the digest /api/tags lists
    monkeypatch.setattr(w.api, "call", lambda *a, **k: pytest.fail("asked twice"))
    assert w.identity == "0" * 12
    fitted = dict(calibrate.CALIBRATIONS["builtin"], threshold=0.0)
    monkeypatch.setitem(calibrate.CALIBRATIONS, "ollama@" + "0" * 12, fitted)
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    idx, be = harness.load(vault=str(Path(__file__).parent.parent / "sample-vault"),
                           backend="ollama", judge="builtin")
    a = harness.ask("What is Maren's current day rate?", index=idx, backend=be)
    assert a.checks["calibration"]["key"] == "ollama@" + "0" * 12
    assert a.checks["calibration"]["threshold"] == 0.0


def test_cascade_asks_the_model_about_the_builtin_judges_first_passages_only(fake):
    topics = ["boiler service every May", "sourdough starter feeding", "bike chain oil",
              "passport renewal form", "boiler pressure bar reading", "tax return deadline"]
    passages = {f"p{i}": {"text": f"Note about the {t}.", "heading": "", "path": f"n{i}.md",
                          "date": "2026-01-01", "dense_score": None, "private": False}
                for i, t in enumerate(topics, 1)}
    query = "When is the boiler service?"
    cheap = line_scores.BuiltinJudge().relevance(query, passages)
    first = sorted(cheap, key=lambda k: -cheap[k])[:2]
    j = models.CascadeJudge(judge(fake, systemone=False), top=2)
    got = j.relevance(query, passages, stage="rerank")
    asked = [b["messages"][-1]["content"] for b in fake.bodies("/api/chat")]
    assert len(asked) == 2 and all(any(passages[k]["text"] in a for a in asked)
                                   for k in first)
    judged = models.OllamaJudge(writer(fake), systemone=False).relevance(
        query, {k: passages[k] for k in first})
    assert {k: got[k] for k in first} == pytest.approx(judged)
    assert all(got[k] <= min(judged.values()) for k in passages if k not in first)
    assert set(got) == set(passages)


def test_cascade_judge_by_name_and_its_claims_go_to_the_model(fake):
    b = backends.load_backend("ollama", judge="cascade", host=fake.url, timeout=T)
    assert isinstance(b.judge, models.CascadeJudge)
    assert b.note == ("ollama: verso-writer writes, nomic-embed-text embeds; the model "
                      "chooses lines, code writes them; judge: cascade")
    p = b.judge.support({"s1": {"sentence": "The boiler is serviced in May.",
                                "sources": ["The boiler is serviced every May."],
                                "private": False}})
    assert p["s1"] > 0.5 and fake.bodies("/api/chat")
    with pytest.raises(models.BackendError, match="use builtin, ollama, cascade, jev"):
        backends.load_backend("builtin", judge="other")


# --------------------------------------------------------------------- the timeout setting

def test_the_timeout_is_a_setting_checked_once(monkeypatch):
    monkeypatch.delenv(models.TIMEOUT_ENV, raising=False)
    assert models.ollama_timeout() == models.OLLAMA_TIMEOUT == 120.0
    monkeypatch.setenv(models.TIMEOUT_ENV, "300")
    assert models.ollama_timeout() == 300.0 and models.ollama_timeout(5) == 5.0
    for bad in ("soon", "0", "-3", "inf"):
        monkeypatch.setenv(models.TIMEOUT_ENV, bad)
        with pytest.raises(models.BackendError, match=models.TIMEOUT_ENV):
            models.ollama_timeout()
    with pytest.raises(models.BackendError, match="--timeout"):
        models.ollama_timeout(0)


def test_a_timed_out_reply_names_the_setting_to_raise(fake, monkeypatch):
    monkeypatch.setenv(models.TIMEOUT_ENV, "0.3")            # what --timeout 0.3 sets
    fake.fault("/api/chat", "hang")
    w = models.OllamaWriter(host=fake.url)
    assert w.api.timeout == 0.3
    with pytest.raises(models.BackendTimeout, match=r"within 0.3 s: .*--timeout SECONDS"):
        w.write(builtin_writer.WriteRequest([{"role": "user", "content": "hi"}]))


def _rent_vault(tmp_path, n=3):
    import json
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "rent 2026-09.md").write_text("# Rent\nThe rent is 850 euros a month.\n")
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(dict(
        id=f"r{i}", question="What is the rent now?", category="current",
        time_mode="present", answer="850 euros", key_facts=["850"], forbidden_facts=[],
        gold_files=["rent 2026-09.md"], answerable=True)) + "\n" for i in range(n)))
    return vault, questions


def test_evaluate_records_a_question_that_timed_out_and_goes_on(fake, tmp_path, monkeypatch,
                                                                capsys):
    from verso import evaluate
    vault, questions = _rent_vault(tmp_path)
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    monkeypatch.setenv(models.TIMEOUT_ENV, "")
    fake.fault("/api/chat", "hang", times=2)     # the first question's search words, reply
    code = evaluate.main(["--vault", str(vault), "--questions", str(questions),
                          "--backend", "ollama", "--judge", "builtin", "--variant", "full",
                          "--timeout", "0.5", "--out", str(tmp_path / "run")])
    assert code == 0
    err = capsys.readouterr().err
    assert "1 of 3 answers failed and were scored wrong (first: full r0:" in err
    records = evaluate.load_records(tmp_path / "run")
    assert [r.get("error") is not None for r in records] == [True, False, False]
    assert "within 0.5 s" in records[0]["error"] and not records[0]["answer_correct"]
    assert records[0]["verdict"] == evaluate.FAILED and records[1]["answer_correct"]
    summary = (tmp_path / "run" / "summary.json").read_text()
    assert '"failed": 1' in summary
    from fakes import SEARCH_WORDS_ASK                   # the words timed out once: not asked again
    asked = [b for b in fake.bodies("/api/chat")
             if b["messages"][-1]["content"].startswith(SEARCH_WORDS_ASK)]
    assert len(asked) == 1


def test_a_backend_that_keeps_failing_stops_asking_after_a_streak():
    from verso import evaluate
    qs = [dict(id=f"q{i}", question="q?", category="lookup", time_mode="any", answer="",
               key_facts=["x"], forbidden_facts=[], gold_files=["a.md"], answerable=True)
          for i in range(5)]
    asked = []

    def ask(question, **kw):
        asked.append(question)
        raise evaluate.QuestionFailed("Ollama is not answering")
    records = evaluate.run_variant(qs, ask, "full")
    assert len(asked) == evaluate.FAIL_STREAK and len(records) == 5
    assert records[-1]["error"].startswith("not asked: 3 questions in a row failed")


def test_the_vault_config_sets_the_timeout_unless_the_flag_or_env_does(fake, tmp_path,
                                                                      monkeypatch):
    from verso import harness
    vault, _ = _rent_vault(tmp_path, 1)
    (vault / "verso.toml").write_text("timeout = 7\n")
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    monkeypatch.delenv(models.TIMEOUT_ENV, raising=False)
    idx, be = harness.load(tmp_path / "idx", vault, "ollama", judge="builtin")
    assert be.writer.api.timeout == 7.0
    monkeypatch.setenv(models.TIMEOUT_ENV, "9")                # --timeout 9 or the env
    _, be = harness.load(tmp_path / "idx", vault, "ollama", judge="builtin")
    assert be.writer.api.timeout == 9.0
    (vault / "verso.toml").write_text("timeout = -1\n")
    monkeypatch.delenv(models.TIMEOUT_ENV)
    with pytest.raises(ValueError, match="timeout = -1 is invalid"):
        harness.load(tmp_path / "idx", vault, "ollama", judge="builtin")
