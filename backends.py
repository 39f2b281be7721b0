"""backends: the embed/judge/write trio a run uses, chosen by name.

In:  a backend name (auto, builtin, ollama), a judge name, the models to embed and
     write with, the index (whose vectors name their embedder), the Ollama host.
Out: a Backend (embedder, judge, writer, and a note saying what was chosen and why).
Not: the model clients themselves (models.py), the builtin embedder, reader and writer
     (embedder.py, line_scores.py, builtin_writer.py). Importing this module starts
     nothing.

auto is Ollama when it answers and has the models, else builtin (the note says why); a
backend or judge named explicitly never falls back.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from verso import builtin_writer
from verso import choosing_writer
from verso import embedder
from verso import line_scores
from verso import models


@dataclass
class Backend:
    name: str
    embedder: object
    judge: object
    writer: object
    note: str = ""


JUDGES = ("builtin", "ollama", "cascade", "jev")   # the --judge choices
DEFAULT_JUDGE = "builtin"     # whatever way the backend is named (auto, ollama): the model
                              # judges only when asked (--judge ollama or cascade)
# Why a model writer is paired with the builtin judge (README "Measured with real models")
AUTO_JUDGE_WHY = ("on dev a 1.5B local judge gave no more right answers and took 24 s a "
                  "question more: --judge cascade or ollama to use one")


WRITERS = ("choose", "generate")    # a model backend's writer: chooses lines, or free text


def load_backend(name: str = "auto", judge: str | None = None, idf=None, embed_model=None,
                 write_model=None, index=None, host=None, timeout=None,
                 probe_timeout=models.OLLAMA_PROBE_TIMEOUT, writer: str | None = None) -> Backend:
    """The embed/judge/write trio for a backend name; `idf` restores a builtin index and
    `index` (a store_load.Index) brings the embedder its vectors were made with.
    auto: Ollama when it answers and has the models, else builtin (the note says why).
    A backend or judge named explicitly never falls back: models.BackendError instead. The
    judge is DEFAULT_JUDGE unless `judge` names another, however the backend is named."""
    if name not in ("auto", "builtin", "ollama"):
        raise models.BackendError(f"unknown backend {name!r}: use auto, builtin or ollama")
    if judge not in (None,) + JUDGES:
        raise models.BackendError(f"unknown judge {judge!r}: use {', '.join(JUDGES)}")
    writer = writer or os.environ.get("VERSO_WRITER") or WRITERS[0]
    if writer not in WRITERS:
        raise models.BackendError(f"unknown writer {writer!r}: use {' or '.join(WRITERS)}")
    em = embed_model or os.environ.get("VERSO_EMBED_MODEL") or models.EMBED_MODEL
    wm = write_model or os.environ.get("VERSO_WRITE_MODEL") or models.WRITE_MODEL
    emb, note, default_judge = getattr(index, "embedder", None), "", False
    if name != "builtin":
        needs = [(wm, "completion")] + ([] if emb else [(em, "embedding")])
        if (why := models.ollama_unready(host, needs, probe_timeout)) and name == "ollama":
            raise models.BackendError(why)
        default_judge = judge is None and not why     # auto or named: the one default
        name = "builtin" if why else "ollama"
        note = (f"auto chose builtin: {why}" if why else f"ollama: {wm} writes, "
                + (f"vectors from the index ({emb.id})" if emb else f"{em} embeds"))
        judge = DEFAULT_JUDGE if default_judge else judge
    w = None
    if name == "builtin":
        b = Backend("builtin", emb or embedder.BuiltinEmbedder(idf), line_scores.BuiltinJudge(),
                    builtin_writer.BuiltinWriter(), note or "builtin backend (offline)")
    else:
        w = models.OllamaWriter(wm, host, timeout)
        b = Backend("ollama", emb or models.OllamaEmbedder(em, host, timeout),
                    line_scores.BuiltinJudge(),
                    choosing_writer.ChoosingWriter(w) if writer == "choose" else w,
                    note + ("; the model chooses lines, code writes them" if writer == "choose"
                            else "; the model writes free text"))
    if judge in ("ollama", "cascade"):       # the model judges: only when asked
        if w is None:
            if why := models.ollama_unready(host, [(wm, "completion")], probe_timeout):
                raise models.BackendError(why)
            w = models.OllamaWriter(wm, host, timeout)
        judged = models.OllamaJudge(w)
        b.judge = models.CascadeJudge(judged) if judge == "cascade" else judged
    elif judge == "jev":
        b.judge = models.JevJudge(local=b.judge)
    if judge:
        b.note += f"; judge: {judge}" + (f" (private text judged locally by "
                                         f"{b.judge.local.name})" if judge == "jev" else "")
        b.note += f" ({AUTO_JUDGE_WHY})" if default_judge else ""
    return b
