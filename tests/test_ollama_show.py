"""Sizes come from the server (/api/show), not from assumptions: embedding dimension,
embedder context, the writer's num_ctx; the prompt is kept within it by the server's
own token counts."""

from pathlib import Path

from verso import builtin_writer
from verso import generate
from verso import models
from fakes import FakeOllama
from test_generate import cand

T = 0.5


class ShowFake(FakeOllama):
    """A FakeOllama whose /api/show gives other parameters (no num_ctx, say)."""

    def __init__(self, parameters="temperature 0", **kw):
        super().__init__(**kw)
        self.parameters = parameters

    def answer(self, path, body, kind, headers):
        status, payload, extra = super().answer(path, body, kind, headers)
        if path == "/api/show" and status == 200:
            payload["parameters"] = self.parameters
        return status, payload, extra


def test_embedding_dimension_is_read_from_show_without_an_embed_call():
    with FakeOllama(dim=384) as f:
        e = models.OllamaEmbedder(host=f.url, timeout=T)
        assert e.dim == 384
        assert f.bodies("/api/embed") == [] and len(f.bodies("/api/show")) == 1
        assert e.embed_query("rent").shape == (384,)


def test_embedder_context_is_read_from_show_and_texts_cut_to_it():
    with FakeOllama(dim=384, context=512) as f:
        e = models.OllamaEmbedder(host=f.url, timeout=T)
        assert e.max_chars == 512 * models.EMBED_CHARS_PER_TOKEN
        m = e.embed_documents(["word " * 1000])           # 5000 chars: over 512 tokens
        assert m.shape == (1, 384) and e.truncated == 1
        assert len(f.bodies("/api/embed")[0]["input"][0]) == e.max_chars
        assert "cut to 1536 characters" in e.note


def test_modelfile_and_writer_agree_on_num_ctx():
    lines = (Path(__file__).parents[1] / "Modelfile").read_text().splitlines()
    ctx = [int(ln.split()[2]) for ln in lines if ln.startswith("PARAMETER num_ctx")]
    assert ctx == [models.WRITE_NUM_CTX]


def test_writer_sends_the_modelfile_num_ctx_within_the_model_context():
    with FakeOllama(context=32768) as f:              # show: "num_ctx 8192"
        w = models.OllamaWriter(host=f.url, timeout=T)
        w.write(builtin_writer.WriteRequest([{"role": "user", "content": "Notes:\n\nQuestion: q"}]))
        assert f.bodies("/api/chat")[0]["options"]["num_ctx"] == 8192
    with ShowFake(parameters="temperature 0", context=4096) as f:   # no num_ctx set
        w = models.OllamaWriter(host=f.url, timeout=T)
        assert w.num_ctx == 4096                       # WRITE_NUM_CTX, capped by the model
    with ShowFake(parameters="num_ctx 2048", context=32768) as f:
        assert models.OllamaWriter(host=f.url, timeout=T).num_ctx == 2048


def test_prompt_budget_follows_the_servers_token_count():
    with FakeOllama(context=32768) as f:
        w = models.OllamaWriter(host=f.url, timeout=T)
        before = w.prompt_budget
        assert before == (8192 - models.WRITE_MAX_TOKENS) * models.WRITE_CHARS_PER_TOKEN
        text = "x" * 3000                              # the fake counts len // 4 + 1
        w.write(builtin_writer.WriteRequest([{"role": "user", "content": text}]))
        assert w.chars_per_token == 3.0                # 3000 / 751 > 3: kept conservative
        w.chars_per_token = 10.0
        w.write(builtin_writer.WriteRequest([{"role": "user", "content": text}]))
        assert abs(w.chars_per_token - 3000 / 751) < 1e-9
        assert w.prompt_budget == int((8192 - models.WRITE_MAX_TOKENS) * 3000 / 751)


class SmallWriter:
    prompt_budget = 1400

    def __init__(self):
        self.messages = self.notes = None

    def write(self, request, stage="generate", ledger=None):
        self.messages, self.notes = request.messages, request.notes
        return builtin_writer.Written("Rate £600 [c1].", "small", 1, 1)


def test_prompt_kept_within_the_budget_by_leaving_out_the_last_notes():
    notes = [cand(i, f"n{i}.md", f"Rate £{600 + i}. " + "filler words " * 20)
             for i in range(1, 6)]
    w = SmallWriter()
    d = generate.generate("What is the rate?", notes, "any", w)
    shown = w.messages[1]["content"]
    assert sum(len(m["content"]) for m in w.messages) <= SmallWriter.prompt_budget + 80
    assert "[c1]" in shown and "[c5]" not in shown and "Question: What is the rate?" in shown
    shown_ids = [f"c{i}" for i in range(1, 6) if f"[c{i}]" in shown]   # the notes left in
    assert [n["id"] for n in w.notes] == shown_ids == [n["id"] for n in d.notes]
    last = w.notes[-1]["text"]                      # as the prompt shows it
    assert last in shown and f"\n{last}\n\nTime mode: any" in shown
    assert d.text == "Rate £600 [c1]."
    full = generate.build_messages("What is the rate?", notes, "any")
    assert all(f"[c{i}]" in full[1]["content"] for i in range(1, 6))
