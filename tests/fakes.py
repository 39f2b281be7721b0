"""Fake model servers on 127.0.0.1 for tests: real HTTP, the documented field names.

    with FakeOllama() as ollama_fake:          # /api/tags /api/show /api/embed /api/chat
        embedder = models.OllamaEmbedder(host=ollama_fake.url, timeout=0.5)
    with FakeJev(key="k") as jev:              # /v1/systemone with Bearer auth
        judge = models.JevJudge(local, api_key="k", url=jev.url)

Both answer deterministically from the request text (word overlap; FakeOllama answers
searchwords' request from `.rephrase`, question -> reply, else with the question itself, which
searchwords drops), record every request
(`.requests`: method, path, headers, raw body, parsed JSON) and take faults for the next
requests to a path: `fake.fault("/api/embed", "500", times=1)`. Faults common to both:
"500", "hang" (accepts, never answers: the client times out), "slow" (waits `.delay` s),
"truncated" (half a JSON body). FakeOllama also: "notfound" (404 with Ollama's error text),
"dim" (wrong embedding dimension), "empty" (empty chat reply), "badcite" (a reply citing
[c9]), "nochat" (400 does not support chat), "nologprobs", "noyes" (judge token not
yes/no). FakeJev also: "429" (retry-after-ms `.retry_after_ms`), "429s" (retry-after in
seconds), "401", "422". Servers stop, and release any hanging request, on exit.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANG_MAX = 10.0   # seconds a "hang" fault holds a request at most (released on exit)
SEARCH_WORDS_ASK = "Someone searches their own personal notes"   # searchwords.PROMPT's start
WORD_RE = re.compile(r"[a-z0-9]+(?:[.,][0-9]+)*")
SMALL = frozenset("the a an and or of to in on for is are was were be by with at as it "
                  "this that what which who does do did how when where yes no".split())


def words(text: str) -> set[str]:
    return {w.replace(",", "") for w in WORD_RE.findall(text.lower())
            if w not in SMALL and len(w) > 1}


def overlap(needle: str, hay: str) -> float:
    """Share of the needle's words found in the haystack (0 when the needle has none)."""
    n = words(needle)
    return len(n & words(hay)) / len(n) if n else 0.0


def clip(p: float) -> float:
    return min(0.97, max(0.03, p))


class _Handler(BaseHTTPRequestHandler):
    fake: "_Fake"

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        self._dispatch("")

    def do_POST(self):
        self._dispatch(self.rfile.read(int(self.headers.get("Content-Length") or 0))
                       .decode("utf-8"))

    def _dispatch(self, raw: str):
        fake = self.fake
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return self.send(400, {"error": "invalid JSON"})
        with fake.lock:
            fake.requests.append({"method": self.command, "path": self.path,
                                  "headers": dict(self.headers), "raw": raw, "json": body})
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        left = []

        def leave():        # before the reply goes out: a client that has read it may send
            if not left:    # its next request before this thread ends
                left.append(True)
                with fake.lock:
                    fake.in_flight -= 1
        try:
            kind = fake.take_fault(self.path)
            if kind == "hang":
                fake.stopped.wait(HANG_MAX)
                return
            if kind == "slow":
                time.sleep(fake.delay)
            if kind == "500":
                leave()
                return self.send(500, {"error": "internal server error"})
            status, payload, headers = fake.answer(self.path, body, kind, self.headers)
            leave()
            self.send(status, payload, headers, truncated=kind == "truncated")
        finally:
            leave()

    def send(self, status, payload, headers=None, truncated=False):
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        if truncated:
            data = data[:len(data) // 2]
        self.send_response(status)
        ctype = "text/plain" if isinstance(payload, str) else "application/json"
        for k, v in {"Content-Type": ctype, **(headers or {})}.items():
            self.send_header(k, str(v))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Fake:
    """A ThreadingHTTPServer on 127.0.0.1, port 0, served from a daemon thread."""

    def __init__(self):
        self.requests: list[dict] = []
        self.faults: dict[str, list] = {}
        self.lock, self.stopped = threading.Lock(), threading.Event()
        self.delay, self.in_flight, self.max_in_flight = 0.05, 0, 0
        handler = type("Handler", (_Handler,), {"fake": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.01}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=2)

    def fault(self, path: str, kind: str, times: int | None = None):
        """The next `times` requests to path (all of them if None) get this fault."""
        self.faults[path] = [kind, times]

    def take_fault(self, path: str) -> str | None:
        with self.lock:
            f = self.faults.get(path)
            if not f:
                return None
            if f[1] is not None:
                f[1] -= 1
                if f[1] <= 0:
                    del self.faults[path]
            return f[0]

    def bodies(self, path: str | None = None) -> list[dict]:
        return [r["json"] for r in self.requests if path is None or r["path"] == path]

    def answer(self, path, body, kind, headers):
        raise NotImplementedError


def systemone_answers(state, questions) -> dict:
    """Deterministic System One answers for Verso's states (passages / claims / text)."""
    text = state if isinstance(state, str) else json.dumps(state)
    out = {}
    for name, q in questions.items():
        key = (re.findall(r'"([^"]+)"', q.get("instructions", "")) or [name])[0]
        if q["type"] == "noul":
            if isinstance(state, dict) and key in state.get("passages", {}):
                p = overlap(state["query"], state["passages"][key].get("text") or "")
            elif isinstance(state, dict) and key in state.get("claims", {}):
                c = state["claims"][key]
                p = overlap(c["sentence"], " ".join(c["sources"]))
            else:
                p = overlap(q["instructions"], text)
            out[name] = {"type": "noul", "noul": round(clip(p), 4)}
        else:
            crit = q["criteria"]
            labels = list(crit) if isinstance(crit, dict) else [str(i) for i in range(len(crit))]
            descs = list(crit.values()) if isinstance(crit, dict) else list(crit)
            scores = [math.exp(4 * overlap(f"{lab} {d or ''}", text))
                      for lab, d in zip(labels, descs)]
            probs = {lab: round(s / sum(scores), 4) for lab, s in zip(labels, scores)}
            best = max(labels, key=lambda lab: (probs[lab], -labels.index(lab)))
            a = {"type": q["type"], "probabilities": probs, "confidence": probs[best]}
            if q["type"] == "choice":
                a["choice"] = best
            else:
                a.update(score=float(labels.index(best)), legend=dict(zip(labels, descs)))
            out[name] = a
    n_in = (len(text) + len(json.dumps(questions))) // 4
    return {"answers": out, "usage": {"input_tokens": n_in, "output_tokens": len(out)}}


class FakeOllama(_Fake):
    """Ollama's /api/tags, /api/show, /api/embed, /api/chat (with logprobs) and, when
    `systemone` is set, /v1/systemone (else a 404 like a server without it)."""

    def __init__(self, models=("nomic-embed-text:latest", "verso-writer:latest"), dim=768,
                 systemone=False, context=2048, chooser=None, digest="0" * 64):
        super().__init__()
        self.models, self.dim = list(models), dim
        self.systemone, self.context = systemone, context
        self.chars_per_token = 4                   # /api/embed's reckoning of an input
        self.chooser = chooser or choose_reply     # prompt -> the choosing reply
        self.digest = digest                       # every model's, in /api/tags
        self.rephrase = {}     # question -> the reply to searchwords' request (else itself)

    def _known(self, model: str) -> bool:
        return (model if ":" in model else model + ":latest") in self.models

    def answer(self, path, body, kind, headers):
        model = body.get("model", "")
        if path == "/api/tags":
            return 200, {"models": [{"name": m, "model": m, "size": 1000, "digest": self.digest,
                                     "modified_at": "2026-01-01T00:00:00Z"}
                                    for m in self.models]}, None
        if path == "/v1/systemone" and not self.systemone:
            return 404, "404 page not found", None
        if kind == "notfound" or (path != "/api/tags" and not self._known(model)):
            return 404, {"error": f'model "{model}" not found, try pulling it first'}, None
        embeds = "embed" in model
        if path == "/api/show":
            return 200, {"modelfile": "", "parameters": "num_ctx 8192\ntemperature 0",
                         "template": "", "details": {"format": "gguf"},
                         "model_info": {"general.architecture": "fake",
                                        "fake.context_length": self.context,
                                        "fake.embedding_length": self.dim},
                         "capabilities": ["embedding"] if embeds else ["completion"]}, None
        if path == "/api/embed":
            return self._embed(body, kind)
        if path == "/api/chat":
            if embeds or kind == "nochat":
                return 400, {"error": f'"{model}" does not support chat'}, None
            return self._chat(body, kind)
        if path == "/v1/systemone":
            return 200, {"model": model, **systemone_answers(body["state"],
                                                              body["questions"])}, None
        return 404, "404 page not found", None

    def vector(self, text: str, dim: int) -> list[float]:
        v = [0.0] * dim
        v[0] = 0.1  # never all zero
        for w in words(text.split(": ", 1)[-1]):
            h = zlib.crc32(w.encode())
            v[h % dim] += 1.0 if h & 1 else -1.0
        return v

    def _embed(self, body, kind):
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if body.get("truncate") is False and any(len(t) / self.chars_per_token > self.context
                                                 for t in texts):
            return 400, {"error": "the input length exceeds the context length"}, None
        dim = self.dim + 1 if kind == "dim" else self.dim
        return 200, {"model": body["model"], "embeddings": [self.vector(t, dim) for t in texts],
                     "total_duration": 14_143_917, "load_duration": 1_019_500,
                     "prompt_eval_count": sum(len(t) // 4 + 1 for t in texts)}, None

    def _chat(self, body, kind):
        prompt = body["messages"][-1]["content"]
        logprobs = None
        if isinstance(body.get("format"), dict):          # the choosing reader's schema
            content = self.chooser(prompt)
            if body.get("logprobs") and kind != "nologprobs":
                logprobs = [{"token": t, "logprob": -0.2 if t.isdigit() else -0.01}
                            for t in re.findall(r"\d|\D+", content)]
        elif body.get("logprobs"):
            content, top = judge_tokens(prompt)
            if kind == "noyes":
                content, top = "The", [("The", -0.1), ("It", -2.5)]
            if kind != "nologprobs":
                logprobs = [{"token": content, "logprob": top[0][1],
                             "top_logprobs": [{"token": t, "logprob": lp}
                                              for t, lp in top[:body.get("top_logprobs", 0)]]}]
        elif prompt.startswith(SEARCH_WORDS_ASK):         # searchwords.PROMPT
            question = prompt.rsplit("Question: ", 1)[-1]
            content = self.rephrase.get(question, question)
        else:
            content = write_reply(prompt)
        if kind == "empty":
            content = ""
        elif kind == "badcite":
            content = "The day rate is 1550 [c9]."
        reply = {"model": body["model"], "created_at": "2026-01-01T00:00:00Z",
                 "message": {"role": "assistant", "content": content}, "done": True,
                 "done_reason": "stop", "total_duration": 837_122_888,
                 "load_duration": 282_868_911, "prompt_eval_count": len(prompt) // 4 + 1,
                 "prompt_eval_duration": 40_953_169, "eval_count": len(content) // 4 + 1,
                 "eval_duration": 450_009_439}
        if logprobs is not None:
            reply["logprobs"] = logprobs
        return 200, reply, None


def judge_tokens(prompt: str):
    """The first token and its top log-probabilities for a one-token judge prompt: an
    option letter when the prompt lists "A) ..." options, else yes / no."""
    options = re.findall(r"(?m)^([A-Z])\) (.*)$", prompt)
    if options:
        text = prompt.split("\nOptions:")[0]
        scores = [4 * overlap(o, text) for _, o in options]
        z = math.log(sum(math.exp(s) for s in scores))
        top = sorted(((c, s - z) for (c, _), s in zip(options, scores)), key=lambda t: -t[1])
        return top[0][0], top
    needle = re.search(r"(?m)^(?:Query|Sentence): (.*)$", prompt)
    rest = "\n\n".join(prompt.replace(needle.group(0), "").split("\n\n")[:-1]) if needle else ""
    p = clip(overlap(needle.group(1), rest)) if needle else 0.5
    top = sorted([("yes", math.log(p)), ("no", math.log(1 - p)), ("Yes", math.log(p) - 3),
                  ("The", -9.0), ("I", -9.5)], key=lambda t: -t[1])
    return top[0][0], top


def choose_reply(prompt: str) -> str:
    """{"lines": [n]}: the numbered line sharing most words with the question."""
    q = re.search(r"(?im)^\s*question:\s*(.+)$", prompt)
    lines = re.findall(r"(?m)^(\d+)\. (.*) \(from: [^)]*\)$", prompt)
    scored = [(overlap(q.group(1), text), int(n)) for n, text in lines] if q else []
    best = max(scored, default=(0.0, 0))
    return json.dumps({"lines": [best[1]] if best[0] > 0 else []})


def write_reply(prompt: str) -> str:
    """A fixed extractive reply: the note sentence sharing most words with the question,
    cited with its [cN] label."""
    q = re.search(r"(?im)^\s*question:\s*(.+)$", prompt)
    question = q.group(1) if q else prompt.strip().splitlines()[-1]
    parts = re.split(r"\[(c\d+)\]", prompt.replace(q.group(0), "") if q else prompt)
    best = (0.0, "", "")
    for cid, seg in zip(parts[1::2], parts[2::2]):
        for s in re.split(r"(?<=[.!?])\s+|\n", seg):
            s = s.strip(" -:*#")
            if s.startswith(("path:", "Time mode:")):  # a note header, the mode line
                continue
            if len(s) > 12 and (score := overlap(question, s)) > best[0]:
                best = (score, s, cid)
    if not best[1]:
        return "The notes do not say."
    return f"{best[1].rstrip('.')} [{best[2]}]."


class FakeJev(_Fake):
    """TypeSafe's POST /v1/systemone with Bearer auth; every body kept in `.requests`."""

    def __init__(self, key="test-key", retry_after_ms=20):
        super().__init__()
        self.key, self.retry_after_ms = key, retry_after_ms

    def answer(self, path, body, kind, headers):
        if path != "/v1/systemone":
            return 404, {"error": {"type": "not_found", "message": "no such route"}}, None
        if kind == "401" or headers.get("Authorization") != f"Bearer {self.key}":
            return 401, {"error": {"type": "authentication_error",
                                   "message": "invalid API key"}}, None
        if kind == "429":
            return 429, {"error": {"type": "rate_limit", "message": "slow down"}}, {
                "retry-after-ms": self.retry_after_ms}
        if kind == "429s":
            return 429, {"error": {"type": "rate_limit", "message": "slow down"}}, {
                "retry-after": self.retry_after_ms / 1000}
        if kind == "422" or not body.get("questions"):
            return 422, {"error": {"type": "invalid_request",
                                   "message": "questions: at least one question"}}, None
        return 200, {"model": "jev-1.13.0", **systemone_answers(body["state"],
                                                                body["questions"])}, None


def closed_port_url() -> str:
    """A 127.0.0.1 URL where nothing listens (connection refused)."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"
