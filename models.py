"""Model calls: every embed, judge and write call to a model goes through here.

In:  texts to embed, passages and claims to judge, a write request
     (builtin_writer.WriteRequest: the chat messages to write from).
Out: float32 L2-normalised vectors, probabilities, answer text (builtin_writer.Written);
     one ledger row per call (cost_ledger.Ledger: stage, backend, model, input tokens,
     output tokens, seconds, dollars).
Not: retrieval, prompts or verdicts (the stage modules own those); the builtin embedder
     (embedder.py), reader and writer (line_scores.py, builtin_writer.py); text helpers
     (textkit.py).
     Imports no stage module.

The clients: Ollama (local server) and Jev (hosted judge); backends.py chooses among them
and the builtin ones by name. Importing this module starts nothing.
Sections: ollama, jev, helpers (the writer's model, whether Ollama is ready).
"""

from __future__ import annotations

import json
import re
import os
import time

import numpy as np

import verso

from verso import builtin_writer
from verso import cost_ledger
from verso import line_scores


class BackendError(Exception):
    """A model backend failed; the message is one actionable line."""


class BackendTimeout(BackendError):
    """The server took the request and sent no reply within the timeout."""


# ------------------------------------------------------------------------ ollama
# (section owned by the backends developer: OllamaEmbedder, OllamaJudge, OllamaWriter)
# The `ollama` client does the HTTP (imported on first use); _Ollama.call turns each of its
# failures into one BackendError line naming the fix.


OLLAMA_DEFAULT_HOST = "http://127.0.0.1:11434"  # or $OLLAMA_HOST
OLLAMA_TIMEOUT = 120.0        # seconds per request (a cold model load is slow); or
TIMEOUT_ENV = "VERSO_OLLAMA_TIMEOUT"   # $VERSO_OLLAMA_TIMEOUT, or --timeout, or the config
TIMEOUT_FIX = f"raise it with --timeout SECONDS (or ${TIMEOUT_ENV}, or timeout in verso.toml)"
OLLAMA_PROBE_TIMEOUT = 1.0    # seconds for auto selection's look at /api/tags
OLLAMA_CONCURRENCY = 4        # judge requests in flight when each item needs its own
OLLAMA_RETRIES = 1            # extra tries after a 5xx or a connection broken mid-reply
EMBED_MODEL = "nomic-embed-text"  # or $VERSO_EMBED_MODEL
EMBED_BATCH = 32              # inputs per /api/embed request
EMBED_CONTEXT = 2048          # tokens, when /api/show names no <arch>.context_length
EMBED_CHARS_PER_TOKEN = 3     # conservative (English runs ~4): we cut at context * 3 chars
EMBED_MIN_CHARS = 64          # a text the server refuses at this length: an error
TOO_LONG_RE = re.compile(r"\(400: [^)]*context length", re.I)   # an input too long
DOC_PREFIX, QUERY_PREFIX = "search_document: ", "search_query: "
WRITE_MODEL = "verso-writer"  # or $VERSO_WRITE_MODEL; built from ./Modelfile
WRITE_SEED = 42
WRITE_NUM_CTX = 8192          # the Modelfile's num_ctx; sent with every chat request
WRITE_MAX_TOKENS = 400        # reply tokens (5 sentences are ~150): num_predict, kept free
WRITE_CHARS_PER_TOKEN = 3.0   # until the server has counted a prompt of ours
DECISION_MODEL = "d1-omni:600m"  # or $VERSO_DECISION_MODEL: System One judge, if pulled
JUDGE_TOP_LOGPROBS = 5
PASSAGE_FIELDS = ("path", "heading", "date", "text")
JUDGE_SYSTEM = "You are a strict judge of notes. Answer with exactly one word."
RELEVANCE_PROMPT = ("Query: {query}\n\nPassage ({path}, {date}) {heading}:\n{text}\n\n"
                    "Does the passage state something that helps answer the query? "
                    "Answer yes or no.")
SUPPORT_PROMPT = ("Sources:\n{sources}\n\nSentence: {sentence}\n\nDo the sources state "
                  "every fact in the sentence (numbers, names, dates)? Answer yes or no.")
# The batched judge: one request per stage, the query first (a prefix the server can
# reuse), every item numbered, a 0-10 score per item forced by a JSON schema (`format`).
JUDGE_BATCH = False           # or $VERSO_JUDGE_BATCH=1; default from the README's figures
BATCH_SCALE = 10              # scores 0..10, read as P = score / 10
BATCH_RELEVANCE = ("Query: {query}\n\nRate how much each numbered passage below states "
                   "something that helps answer the query: 0 (nothing) to 10 (it states the "
                   "answer).\n\n{items}\n\nReply with a JSON object giving every passage "
                   "number its score.")
BATCH_SUPPORT = ("Rate how fully the sources of each numbered sentence below state every "
                 "fact in it (numbers, names, dates): 0 (not at all) to 10 (every fact)."
                 "\n\n{items}\n\nReply with a JSON object giving every sentence number its "
                 "score.")
S1_RELEVANCE = 'The passage under key "{key}" in passages helps answer the query.'
S1_SUPPORT = ('The sources of the claim under key "{key}" state every fact in its '
              "sentence (numbers, names, dates).")


def _first_line(e) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:160]


def _tagged(model: str) -> str:
    return model if ":" in model else model + ":latest"


def _bare(model: str) -> str:
    return model.removesuffix(":latest")


def _fix(model: str) -> str:
    return (f"ollama create verso-writer -f '{verso.data_path('Modelfile')}'"
            if _bare(model) == WRITE_MODEL
            else f"ollama pull {model}")


def ollama_timeout(seconds=None) -> float:
    """Seconds one Ollama request may take: `seconds` when given, else $VERSO_OLLAMA_TIMEOUT,
    else OLLAMA_TIMEOUT. Anything but a positive number is a BackendError."""
    raw, where = ((seconds, "--timeout") if seconds is not None
                  else (os.environ.get(TIMEOUT_ENV), TIMEOUT_ENV))
    if raw is None or raw == "":
        return OLLAMA_TIMEOUT
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise BackendError(f"{where} {raw!r} is not a number of seconds above 0")
    return value


def use_timeout(seconds) -> None:
    """--timeout for this process: every Ollama client made from now on waits `seconds`
    (checked as ollama_timeout checks it; None leaves the setting as it is)."""
    if seconds is not None:
        os.environ[TIMEOUT_ENV] = f"{ollama_timeout(seconds):g}"


class _Ollama:
    """One ollama.Client with a timeout; the one place its errors become one line."""

    def __init__(self, host=None, timeout=None):
        import ollama
        self.host = host or os.environ.get("OLLAMA_HOST") or OLLAMA_DEFAULT_HOST
        self.timeout = ollama_timeout(timeout)
        self.client = ollama.Client(host=self.host, timeout=self.timeout)

    def call(self, method, what, passthrough=(), **kw):
        import httpx
        import ollama
        model = kw.get("model", "")
        for attempt in range(OLLAMA_RETRIES + 1):
            last = attempt == OLLAMA_RETRIES
            try:
                return getattr(self.client, method)(**kw)
            except ConnectionError:  # the client's own: nothing listens at host
                raise BackendError(f"Ollama is not answering at {self.host}: start it with "
                                   "`ollama serve`") from None
            except httpx.TimeoutException:
                raise BackendTimeout(f"Ollama at {self.host} sent no {what} reply from {model} "
                                   f"within {self.timeout:g} s: check `ollama ps`, or "
                                   f"{TIMEOUT_FIX}") from None
            except ollama.ResponseError as e:
                status, err = e.status_code, _first_line(e.error)
                if status in passthrough:
                    raise
                if status == 404:
                    raise BackendError(f"Ollama has no model {model!r} ({err}): run "
                                       f"`{_fix(model)}`") from None
                if "does not support" in err:
                    raise BackendError(f"Ollama model {model!r} cannot {what} ({err}): name "
                                       f"another model or run `{_fix(model)}`") from None
                if status < 500 or last:
                    raise BackendError(f"Ollama {what} with {model} failed ({status}: "
                                       f"{err})") from None
            except httpx.TransportError as e:  # the connection broke mid-reply
                if last:
                    raise BackendError(f"Ollama at {self.host} broke off the {what} reply "
                                       f"({_first_line(e)}): see the server log") from None
            except ValueError as e:  # invalid JSON, or JSON of the wrong shape
                raise BackendError(f"Ollama sent a malformed {what} reply from {model}: "
                                   f"{_first_line(e)}") from None


def _model_info(api, model) -> tuple[dict, str]:
    """(model_info, parameters) from /api/show: what the server says the model is."""
    r = api.call("show", "show", model=model)
    return dict(r.modelinfo or {}), r.parameters or ""


def _info_int(info: dict, field: str) -> int | None:
    """model_info's "<arch>.<field>" (embedding_length, context_length), if given."""
    v = info.get(f"{info.get('general.architecture', '')}.{field}")
    return int(v) if isinstance(v, (int, float)) and v > 0 else None


class OllamaEmbedder:
    """Vectors from /api/embed in batches; texts cut by us (never by the server) to fit."""

    name = "ollama"

    def __init__(self, model=None, host=None, timeout=None, dim=None,
                 context=None):
        self.model = model or os.environ.get("VERSO_EMBED_MODEL") or EMBED_MODEL
        self.id, self.api = "ollama:" + _bare(self.model), _Ollama(host, timeout)
        self._dim, self.truncated, self.context = dim, 0, context

    def _show(self) -> None:
        """Dimension and context size as /api/show gives them (asked once)."""
        info, _ = _model_info(self.api, self.model)
        self._dim = self._dim or _info_int(info, "embedding_length")
        self.context = self.context or _info_int(info, "context_length") or EMBED_CONTEXT

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._show()
        if self._dim is None:  # the server does not say: ask the model once
            self._embed([QUERY_PREFIX + "dimension"], None, "probe")
        return self._dim

    @property
    def max_chars(self) -> int:
        if self.context is None:
            self._show()
        return self.context * EMBED_CHARS_PER_TOKEN

    @property
    def note(self) -> str:
        return self.truncated and (f"{self.truncated} text(s) cut to {self.max_chars} "
                                   f"characters or fewer to fit {self.model}'s context") or ""

    def _fit(self, prefix: str, text: str) -> str:
        if len(prefix) + len(text) > self.max_chars:
            self.truncated += 1
            text = text[:self.max_chars - len(prefix)]
        return prefix + text

    def _embed(self, texts, ledger, stage) -> np.ndarray:
        started, tokens, rows = time.perf_counter(), 0, []
        for s in range(0, len(texts), EMBED_BATCH):
            batch = texts[s:s + EMBED_BATCH]
            vectors, n = self._batch(batch)
            self._dim = self._dim or len(vectors[0] if vectors else [])
            bad = {len(v) for v in vectors} - {self._dim}
            if len(vectors) != len(batch) or bad:
                raise BackendError(
                    f"Ollama model {self.model} sent {len(vectors)} vectors of "
                    f"{bad.pop() if bad else self._dim} dimensions for {len(batch)} texts, "
                    f"expected {self._dim}: if the model changed, run `verso ingest "
                    "VAULT --rebuild`")
            rows.extend(vectors)
            tokens += n
        m = np.asarray(rows, dtype=np.float32).reshape(len(texts), self._dim)
        norms = np.linalg.norm(m, axis=1, keepdims=True)
        if not norms.all():
            raise BackendError(f"Ollama model {self.model} sent an all-zero vector")
        cost_ledger.record(ledger, stage, "ollama", self.model, started, tokens)
        return m / norms  # [n, dim] float32, L2-normalised

    def _batch(self, batch: list[str], cut: bool = False) -> tuple[list, int]:
        """(vectors, tokens) of one batch. A text the server finds longer than the model's
        context (a table of figures runs to fewer characters a token than we reckon) is
        sent alone and cut to half until it fits, counted once in `truncated`."""
        try:
            r = self.api.call("embed", "embed", model=self.model, input=batch, truncate=False)
        except BackendError as e:
            if not TOO_LONG_RE.search(str(e)):
                raise
            if len(batch) > 1:
                got = [self._batch([t]) for t in batch]
                return [v for vs, _ in got for v in vs], sum(n for _, n in got)
            text = batch[0]
            if len(text) <= EMBED_MIN_CHARS:
                raise BackendError(f"{e}: even {len(text)} characters are too long; name "
                                   "another embedder with VERSO_EMBED_MODEL") from None
            self.truncated += not cut and len(text) < self.max_chars   # else _fit counted it
            return self._batch([text[:len(text) // 2]], cut=True)
        return list(r.embeddings), r.prompt_eval_count or 0

    def embed_documents(self, texts, ledger=None, stage="ingest") -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._embed([self._fit(DOC_PREFIX, t) for t in texts], ledger, stage)

    def embed_query(self, text, ledger=None, stage="retrieve") -> np.ndarray:
        return self._embed([self._fit(QUERY_PREFIX, text)], ledger, stage)[0]

    def embed_words(self, words, ledger=None, stage="words") -> np.ndarray:
        """Each text as it is, with no search prefix (tools/make_word_vectors.py)."""
        return self._embed(list(words), ledger, stage)


class OllamaWriter:
    """/api/chat with thinking off, temperature 0 and a fixed seed, not streamed; every
    request names num_ctx (the Modelfile's, from /api/show, within the model's context)
    so that the server's default context never cuts a prompt silently."""

    name = "ollama"
    reply_tokens = WRITE_MAX_TOKENS   # kept free in num_ctx for the reply

    def __init__(self, model=None, host=None, timeout=None):
        self.model = model or os.environ.get("VERSO_WRITE_MODEL") or WRITE_MODEL
        self.api, self.last_stats, self._ctx = _Ollama(host, timeout), {}, None
        self.chars_per_token = WRITE_CHARS_PER_TOKEN

    @property
    def num_ctx(self) -> int:
        """num_ctx from the model's parameters (its Modelfile), else WRITE_NUM_CTX; never
        above the model's own context_length."""
        if self._ctx is None:
            info, params = _model_info(self.api, self.model)
            m = re.search(r"(?m)^\s*num_ctx\s+(\d+)", params)
            ctx = int(m.group(1)) if m else WRITE_NUM_CTX
            self._ctx = min(ctx, _info_int(info, "context_length") or ctx)
        return self._ctx

    @property
    def prompt_budget(self) -> int:
        """Characters of prompt that fit num_ctx with WRITE_MAX_TOKENS left for the reply,
        at the fewest characters per token the server has counted for our prompts."""
        return int(max(self.num_ctx - WRITE_MAX_TOKENS, 256) * self.chars_per_token)

    @property
    def identity(self) -> str | None:
        """What the model is, whatever it is called: the first 12 hex digits of its digest
        in /api/tags (a name is not enough: verso-writer may be built from any model).
        None when the server lists no digest for it. Asked once."""
        if not hasattr(self, "_identity"):
            listed = {m.model: m.digest for m in self.api.call("list", "list models").models}
            digest = listed.get(_tagged(self.model)) or listed.get(self.model) or ""
            self._identity = digest.split(":")[-1][:12] or None
        return self._identity

    def chat(self, messages, what="chat", options=None, **kw):
        opts = {"temperature": 0, "seed": WRITE_SEED, "num_ctx": self.num_ctx,
                "num_predict": WRITE_MAX_TOKENS, **(options or {})}
        r = self.api.call("chat", what, model=self.model, messages=messages, think=False,
                          stream=False, options=opts, **kw)
        chars = sum(len(m.get("content", "")) for m in messages)
        if getattr(r, "prompt_eval_count", None):   # the server's own count of our prompt
            self.chars_per_token = min(self.chars_per_token, chars / r.prompt_eval_count)
        return r

    def text_of(self, r) -> str:
        """A chat reply's text; an empty one is a BackendError (a model that says
        nothing is broken, not unsure)."""
        if not (text := (r.message.content or "").strip()):
            raise BackendError(f"Ollama model {self.model} sent an empty reply: try "
                               f"`ollama run {self.model}` to see why")
        return text

    def write(self, request: builtin_writer.WriteRequest, stage="generate",
              ledger=None) -> builtin_writer.Written:
        """The request's messages answered in free text (builtin_writer's writer protocol)."""
        started = time.perf_counter()
        r = self.chat(request.messages, options={"num_predict": request.reply_tokens}
                      if request.reply_tokens else None)
        text = self.text_of(r)
        inp, out = r.prompt_eval_count or 0, r.eval_count or 0
        self.last_stats = {k.replace("duration", "seconds"): (getattr(r, k) or 0) / 1e9
                           for k in ("total_duration", "load_duration",
                                     "prompt_eval_duration", "eval_duration")}  # ns -> s
        cost_ledger.record(ledger, stage, "ollama", self.model, started, inp, out)
        if ledger is not None:
            ledger.rows[-1]["server_seconds"] = self.last_stats["total_seconds"]
        return builtin_writer.Written(text, self.name, inp, out)


# System One (/v1/systemone on Ollama and Jev): yes/no questions over one shared state.

def _s1_questions(keys, template):
    names = {f"q{i}": k for i, k in enumerate(keys)}
    return ({n: {"type": "noul", "instructions": template.format(key=k)}
             for n, k in names.items()}, names)


def _s1_relevance(query, passages):
    state = {"query": query, "passages": {k: {f: p.get(f) for f in PASSAGE_FIELDS}
                                          for k, p in passages.items()}}
    return (state, *_s1_questions(passages, S1_RELEVANCE))


def _s1_support(claims):
    return ({"claims": {k: {"sentence": c["sentence"], "sources": list(c["sources"])}
                        for k, c in claims.items()}}, *_s1_questions(claims, S1_SUPPORT))


def _s1_nouls(answers, names, who) -> dict:
    try:
        return {k: float(answers[n]["noul"]) for n, k in names.items()}
    except (KeyError, TypeError, ValueError) as e:
        raise BackendError(f"{who} sent a malformed answer set ({_first_line(e)})") from None


def _label_probs(top, labels, norm):
    """Softmax over labels of one token's top log-probabilities; a label missing from the
    top gets the smallest logprob seen (its upper bound). None if no label is there."""
    lps: dict = {}
    for tok, lp in top:
        if (key := norm(tok)) in labels:
            lps[key] = float(np.logaddexp(lps.get(key, -np.inf), lp))
    if not lps:
        return None
    v = np.array([lps.get(lab, min(lp for _, lp in top)) for lab in labels])
    p = np.exp(v - v.max())
    return dict(zip(labels, (p / p.sum()).tolist()))


class OllamaJudge:
    """System One on the server when it has it (found out once: a 404 means no), else the
    writer model's one-token yes/no (or option letter) log-probabilities, one request per
    item; with batch, one request per stage (_batch) and per-item requests only for what
    its reply left out."""

    name = "ollama"

    def __init__(self, writer=None, decision_model=None, host=None, timeout=None,
                 systemone=None, batch=None):
        self.writer = writer or OllamaWriter(host=host, timeout=timeout)
        self.batch = (batch if batch is not None else
                      os.environ.get("VERSO_JUDGE_BATCH", "1" if JUDGE_BATCH else "0") == "1")
        self.decision_model = (decision_model or os.environ.get("VERSO_DECISION_MODEL")
                               or DECISION_MODEL)
        self.systemone, self.note = systemone, ""  # None: not found out yet

    def _s1(self, state, questions, stage, ledger):
        """Answers from /v1/systemone, or None when this server cannot give them."""
        import ollama
        if self.systemone is False:
            return None
        started = time.perf_counter()
        try:
            r = self.writer.api.call("systemone", "judge", model=self.decision_model,
                                     passthrough=(400, 404) if self.systemone is None else (),
                                     state=state, questions=questions)
        except ollama.ResponseError as e:
            self.systemone, self.note = False, (
                f"yes/no logprobs of {self.writer.model}; no System One "
                f"({e.status_code}: {_first_line(e.error)})")
            return None
        self.systemone, self.note = True, f"System One with {self.decision_model}"
        cost_ledger.record(ledger, stage, "ollama", self.decision_model, started,
                r.usage.input_tokens, r.usage.output_tokens)
        return {k: a.model_dump() for k, a in r.answers.items()}

    def _top(self, prompt, n=JUDGE_TOP_LOGPROBS):
        """The first reply token's top log-probabilities [(token, logprob)], what was
        said, and the token counts."""
        r = self.writer.chat([{"role": "system", "content": JUDGE_SYSTEM},
                              {"role": "user", "content": prompt}], what="judge",
                             options={"num_predict": 1}, logprobs=True, top_logprobs=n)
        if not r.logprobs:
            raise BackendError(f"Ollama sent no logprobs for {self.writer.model}: the judge "
                               "needs Ollama >= 0.12.11 (or use --judge builtin)")
        first = r.logprobs[0]
        top = [(t.token, t.logprob) for t in (first.top_logprobs or [first])]
        return top, r.message.content, r.prompt_eval_count or 0, r.eval_count or 0

    def _yes(self, prompt):
        top, said, inp, out = self._top(prompt)
        p = _label_probs(top, ("yes", "no"), lambda t: t.strip().strip(".!").lower())
        if p is None:
            raise BackendError(f"Ollama model {self.writer.model} answered {said!r}, not yes "
                               "or no: use the Modelfile's model or --judge builtin")
        return p["yes"], inp, out

    def _nouls(self, s1, prompts: dict, stage, ledger) -> dict:
        if not prompts:
            return {}
        if s1 is not None and (answers := self._s1(s1[0], s1[1], stage, ledger)) is not None:
            return _s1_nouls(answers, s1[2], "Ollama System One")
        from concurrent.futures import ThreadPoolExecutor   # here: not on the builtin path
        started, keys = time.perf_counter(), list(prompts)
        pool = ThreadPoolExecutor(OLLAMA_CONCURRENCY)  # one request per item, 4 at a time
        try:
            got = list(pool.map(lambda k: self._yes(prompts[k]), keys))
        finally:
            pool.shutdown(cancel_futures=True)
        cost_ledger.record(ledger, stage, "ollama", self.writer.model, started,
                sum(g[1] for g in got), sum(g[2] for g in got))
        return {k: g[0] for k, g in zip(keys, got)}

    def _batch(self, prompt: str, keys: list, stage, ledger) -> dict:
        """One request scoring every key 0..BATCH_SCALE through a JSON schema; a key the
        reply leaves out, or scores out of range, is None (judged one by one instead)."""
        started = time.perf_counter()
        schema = {"type": "object", "required": [str(i) for i in range(1, len(keys) + 1)],
                  "properties": {str(i): {"type": "integer", "minimum": 0,
                                          "maximum": BATCH_SCALE}
                                 for i in range(1, len(keys) + 1)}}
        r = self.writer.chat([{"role": "user", "content": prompt}], what="judge",
                             options={"num_predict": 8 * len(keys) + 16}, format=schema)
        cost_ledger.record(ledger, stage, "ollama", self.writer.model, started,
                r.prompt_eval_count or 0, r.eval_count or 0)
        try:
            got = json.loads(r.message.content or "{}")
        except ValueError:
            got = {}
        out = {}
        for i, k in enumerate(keys, 1):
            v = got.get(str(i)) if isinstance(got, dict) else None
            ok = isinstance(v, (int, float)) and 0 <= v <= BATCH_SCALE
            out[k] = float(v) / BATCH_SCALE if ok else None
        return out

    def _batched(self, prompt, keys, single: dict, stage, ledger) -> dict:
        got = self._batch(prompt, keys, stage, ledger)
        missing = {k: single[k] for k, v in got.items() if v is None}
        return {**got, **self._nouls(None, missing, stage, ledger)}

    def relevance(self, query, passages, stage="rerank", ledger=None) -> dict:
        single = {k: RELEVANCE_PROMPT.format(
            query=query, **{f: p.get(f) or "" for f in PASSAGE_FIELDS})
            for k, p in passages.items()}
        if self.batch and passages and self.systemone is not True:
            items = "\n\n".join(f"[{i}] ({p.get('path') or ''}, {p.get('date') or ''}) "
                                 f"{p.get('heading') or ''}:\n{p.get('text') or ''}"
                                 for i, p in enumerate(passages.values(), 1))
            return self._batched(BATCH_RELEVANCE.format(query=query, items=items),
                                 list(passages), single, stage, ledger)
        return self._nouls(_s1_relevance(query, passages), single, stage, ledger)

    def support(self, claims, stage="verify", ledger=None) -> dict:
        single = {k: SUPPORT_PROMPT.format(
            sentence=c["sentence"], sources="\n".join(f"- {s}" for s in c["sources"]))
            for k, c in claims.items()}
        if self.batch and claims and self.systemone is not True:
            items = "\n\n".join(f"[{i}] Sentence: {c['sentence']}\nSources:\n" + "\n".join(
                f"- {s}" for s in c["sources"]) for i, c in enumerate(claims.values(), 1))
            return self._batched(BATCH_SUPPORT.format(items=items), list(claims), single,
                                 stage, ledger)
        return self._nouls(_s1_support(claims), single, stage, ledger)


CASCADE_TOP = 5   # the passages the writer would read (rerank.KEEP), judged by the model


class CascadeJudge:
    """The builtin judge ranks every passage; the local model judges only the CASCADE_TOP
    it ranks first (the ones the writer would read; one request each, the query first, a
    prefix the server reuses), which take the model's probability: it orders them and
    decides the gate. The rest stay at or below the lowest of them. Claims (verify) go
    to the model. A local judge of every passage costs 20 requests a question; on a CPU
    that is most of a minute (README "Measured with real models")."""

    name = "cascade"

    def __init__(self, model_judge, top: int = CASCADE_TOP):
        self.cheap, self.model, self.top = line_scores.BuiltinJudge(), model_judge, top

    @property
    def note(self) -> str:
        return self.model.note

    def relevance_by_part(self, query, passages, stage="rerank", ledger=None, idf=None):
        table = self.cheap.relevance_by_part(query, passages, idf=idf)
        first = sorted(table, key=lambda k: -table[k][0])[:self.top]
        got = self.model.relevance(query, {k: passages[k] for k in first}, stage, ledger)
        floor = min(got.values(), default=1.0)
        return {k: [got[k] if k in got else min(v[0], floor)] + list(v[1:])
                for k, v in table.items()}

    def relevance(self, query, passages, stage="rerank", ledger=None, idf=None):
        table = self.relevance_by_part(query, passages, stage, ledger, idf)
        return {k: v[0] for k, v in table.items()}

    def support(self, claims, stage="verify", ledger=None):
        return self.model.support(claims, stage, ledger)


# --------------------------------------------------------------------------- jev
# (section owned by the backends developer: JevJudge)
# Private passages and claims never leave the machine (the local judge takes them); the
# rest go as ONE request per stage over one shared state, split only past the budget.

JEV_URL = "https://api.typesafe.ai"   # or $JEV_URL
JEV_MODEL = "jev-latest"
JEV_KEY_FILE = "~/.config/typesafe/key"  # or $TYPESAFE_API_KEY; the file must be chmod 600
JEV_TIMEOUT = 30.0           # seconds per request
JEV_STATE_BUDGET = 32_000    # bytes of JSON state per request; split only above it
JEV_RETRIES = 4              # retries after 408 / 429 / 5xx / no answer
JEV_RETRY_BUDGET = 60.0      # seconds for one request, all tries, timeouts and waits together
JEV_BACKOFF = 0.5            # first wait when the server names none; doubles
PRICE_PER_INPUT_TOKEN = 0.042 / 1e6  # dollars (Jev, at the time of writing)


def _jev_key(key_file=None) -> str:
    if key := os.environ.get("TYPESAFE_API_KEY", "").strip():
        return key
    path = os.path.expanduser(key_file or JEV_KEY_FILE)
    if not os.path.exists(path):
        raise BackendError(f"no Jev API key: set TYPESAFE_API_KEY or save it in {path} "
                           "(chmod 600)")
    if os.stat(path).st_mode & 0o077:
        raise BackendError(f"refusing the Jev key file {path}: others can read it; run "
                           f"`chmod 600 {path}`")
    with open(path, encoding="utf-8") as f:
        if key := f.read().strip():
            return key
    raise BackendError(f"the Jev key file {path} is empty")


def _retry_after(r):
    """Seconds the server asks us to wait (retry-after-ms, else retry-after), or None."""
    for name, scale in (("retry-after-ms", 1e-3), ("retry-after", 1.0)):
        try:
            return max(0.0, float(r.headers[name]) * scale)
        except (KeyError, ValueError, TypeError, AttributeError):
            continue
    return None


def _error_text(r) -> str:
    try:
        e = r.json()
    except ValueError:
        return r.text[:160]
    e = e.get("error", e) if isinstance(e, dict) else e
    return str(e.get("message", e) if isinstance(e, dict) else e)[:160]


class JevJudge:
    """TypeSafe's Jev over POST /v1/systemone; `local` judges whatever is private
    (.last_routing shows which keys went where; local ledger rows get a routed_local note)."""

    name = "jev"

    def __init__(self, local, api_key=None, url=None, model=JEV_MODEL, key_file=None,
                 timeout=JEV_TIMEOUT, retries=JEV_RETRIES, retry_budget=JEV_RETRY_BUDGET,
                 budget=JEV_STATE_BUDGET):
        self.local, self.key = local, api_key or _jev_key(key_file)
        self.url = (url or os.environ.get("JEV_URL") or JEV_URL).rstrip("/") + "/v1/systemone"
        self.model, self.timeout, self.retries = model, timeout, retries
        self.retry_budget, self.budget, self.last_routing = retry_budget, budget, {}

    def _post(self, state, questions, stage, ledger) -> dict:
        import requests
        body = {"model": self.model, "state": state, "questions": questions}
        started = time.perf_counter()
        for attempt in range(self.retries + 1):
            try:
                r = requests.post(self.url, json=body, timeout=self.timeout,
                                  headers={"Authorization": f"Bearer {self.key}"})
            except (requests.ConnectionError, requests.Timeout) as e:
                r, why = None, f"no answer from {self.url}: {type(e).__name__}"
            else:
                if r.status_code == 200:
                    break
                why = f"{r.status_code} {_error_text(r)}"
                if r.status_code in (401, 403):
                    raise BackendError(f"Jev refused the API key ({why}): check "
                                       f"TYPESAFE_API_KEY or {JEV_KEY_FILE}")
                if r.status_code not in (408, 429) and r.status_code < 500:
                    raise BackendError(f"Jev rejected the request ({why})")
            wait = _retry_after(r)
            wait = JEV_BACKOFF * 2 ** attempt if wait is None else wait
            spent = time.perf_counter() - started   # tries that timed out count too
            if attempt == self.retries or spent + wait > self.retry_budget:
                raise BackendError(f"Jev failed after {attempt + 1} tries ({why}): try "
                                   "later, or use --judge builtin")
            time.sleep(wait)
        try:
            data = r.json()
            answers, usage = data["answers"], data.get("usage") or {}
            inp, out = int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise BackendError(f"Jev sent a malformed reply ({_first_line(e)})") from None
        cost_ledger.record(ledger, stage, "jev", data.get("model", self.model), started, inp, out,
                inp * PRICE_PER_INPUT_TOKEN)
        return answers

    def _judge(self, items, stage, ledger, build, local_fn) -> dict:
        """Private (or unmarked) items to the local judge, the rest to Jev in groups whose
        JSON stays under the budget: one group unless the budget is passed."""
        local = [k for k, v in items.items() if v.get("private") is not False]
        groups, size = [[]], 0
        for k in (k for k in items if k not in local):
            n = len(json.dumps(items[k], default=str))
            if groups[-1] and size + n > self.budget:
                groups, size = groups + [[]], 0
            groups[-1].append(k)
            size += n
        out, n_rows = {}, len(ledger.rows) if ledger is not None else 0
        if local:
            out.update(local_fn({k: items[k] for k in local}))
            for row in (ledger.rows[n_rows:] if ledger is not None else []):
                row["note"] = f"routed_local: {len(local)} private"
        for g in filter(None, groups):
            state, questions, names = build({k: items[k] for k in g})
            out.update(_s1_nouls(self._post(state, questions, stage, ledger), names, "Jev"))
        self.last_routing = {"stage": stage, "local": local,
                             "jev": [k for g in groups for k in g]}
        return out

    def relevance(self, query, passages, stage="rerank", ledger=None) -> dict:
        return self._judge(passages, stage, ledger, lambda s: _s1_relevance(query, s),
                           lambda s: self.local.relevance(query, s, stage, ledger))

    def support(self, claims, stage="verify", ledger=None) -> dict:
        return self._judge(claims, stage, ledger, _s1_support,
                           lambda s: self.local.support(s, stage, ledger))


# ----------------------------------------------------------------------- helpers


def model_of(writer):
    """The model a writer asks for free text (a line chooser's inner model), None for
    the builtin writer or none."""
    writer = getattr(writer, "inner", writer)
    return None if writer is None or getattr(writer, "name", "builtin") == "builtin" \
        else writer


def _listening(host: str, timeout) -> bool:
    """A bare TCP connect: tells "nothing runs there" without importing the client,
    whose import alone costs about half a second of every offline run."""
    import socket
    import urllib.parse
    u = urllib.parse.urlsplit(host if "://" in host else "http://" + host)
    try:
        with socket.create_connection((u.hostname or "127.0.0.1", u.port or 11434),
                                      timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


def ollama_unready(host, needs: list, timeout) -> str | None:
    """None when Ollama answers and has each (model, capability), else why not."""
    where = host or os.environ.get("OLLAMA_HOST") or OLLAMA_DEFAULT_HOST
    if not _listening(where, timeout):
        return f"Ollama is not answering at {where}: start it with `ollama serve`"
    api = _Ollama(host, timeout)
    try:
        have = {m.model for m in api.call("list", "list models").models}
        for model, cap in needs:
            if _tagged(model) not in have:
                return f"Ollama at {api.host} has no {model}: run `{_fix(model)}`"
            caps = api.call("show", "show", model=model).capabilities
            if caps is not None and cap not in caps:
                return f"Ollama model {model} cannot do {cap} (it has {', '.join(caps)})"
    except BackendError as e:
        return str(e)
    return None
