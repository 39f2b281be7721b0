"""The choosing reader: a model picks the lines that answer, code writes and cites them.

In:  a builtin_writer.WriteRequest (generate.request: the messages, and the question, time
     mode and notes they were written from; the model's calibrated policy), and a model
     writer with chat() (models.OllamaWriter).
Out: a builtin_writer.Written: an answer whose sentences are note lines verbatim with their
     [cN] citations (valid, and every number and name in the cited note, by
     construction), or the abstain sentence, and its trace (the lines offered and
     chosen, the builtin reader's answer, whether the two readers agree, what is shown);
     one ledger row per call carrying that trace.
Not: scoring lines (line_scores.py, builtin_writer.unit_rows) or writing free text: a
     question that asks for synthesis ("summarise", "compare", "give an overview") goes
     to the model
     writer as before (SYNTHESIS_RE), and generate + verify check it as any writer's.

Rules, decided by code, not by the model:
- The lines offered: the reader's units (sentence, list item, table row with its
  header, log entry with its date) of the kept notes, best evidence first, at most
  MAX_LINES and MAX_PROMPT_TOKENS. A question asking for a set, or a history, takes
  them in turns across notes (each note's best line first). Numbered by score, so the
  model's pull towards the first lines (docs/real-models.md) leans towards the builtin
  reader's own pick; ASK_AGAIN asks once more in reverse order when the two readers
  disagree, to tell the model's reading from that pull.
- Present mode: a line of a version superseded by another kept note is not offered; a
  chosen line whose value a newer dated note of another document replaces is overruled
  (the builtin writer's present-mode rule) and the trace says so. History mode: every
  version's lines are offered and the chosen ones are written oldest first, each with
  its date.
- The reply is JSON {"lines": [n, ...]} under Ollama's `format` schema; any digits are
  read when a server ignores the schema. No line chosen: the abstain sentence.
- Two readers, one decision: the builtin reader answers the same notes; where the two
  state different facts, the model's policy says what is shown (calibrate.policy: what
  `verso calibrate` measured for this model): the model's answer, the reader's, the
  model's when it picks the same first line with the lines in reverse ("again"), or,
  until the model is calibrated, both ("both": the model's answer, and the reader's as
  the alternate, which harness verifies and shows beside it). The policy also says who
  answers a synthesis question and a change (history) question: the chooser or the
  model's free text.
"""

from __future__ import annotations

import json
import math
import re
import time

from verso import builtin_writer
from verso import cost_ledger
from verso.line_scores import analyse
from verso.textkit import count_tokens, number_keys

CHOOSER_MODEL_PREFIX = "choose:"
# The lines offered: as many as the 8-second target leaves room for. The 1.5B model on
# the 2-core rig reads about 85 prompt tokens a second; a model's tokenizer counts about
# 1.5x textkit.count_tokens, so 400 of ours are about 600 of its, 7 s with the rest of the
# prompt. tools/choose_reach.py: 12 lines hold every key fact for 0.66 of the answerable
# tuning questions (40 lines: 0.77; 1 line, the builtin reader's own: 0.35).
MAX_LINES = 12
MAX_PROMPT_TOKENS = 400
MAX_CHOSEN = builtin_writer.MAX_SENTENCES
CHOOSE_PREDICT = 32                 # tokens of reply: a short list of line numbers
LINE_CHARS = 300                    # a longer line is shown cut (it is cited whole)
# Until a model is calibrated: where its reading and the builtin reader's disagree both
# are shown; synthesis goes to the free-text writer, a change to the chooser
UNCALIBRATED_POLICY = {"on_disagreement": "both", "synthesis": "generate", "change": "choose"}
# Where the model's lines and the builtin reader's state different facts, the policy
# "again" asks once more with the offered lines in reverse order: a line chosen in both
# orders is the model's own reading, not the pull of a position (trace "again").
# `verso calibrate` asks again on every disagreement (policy "ask_again") to measure it.
SYNTHESIS_RE = re.compile(r"^\s*(?:please\s+)?(?:summari[sz]e|sum up|compare|contrast|"
                          r"give (?:me )?(?:an? )?(?:overview|summary))", re.I)
# ("why" is not here: a reason is usually one line of a note, and "why did I ..." is how
# a question with a false premise reads; a free-text writer answered those worse)
# A question asking for a set: the reader's lists ("list", "all", "what are") and a
# wh-word before a plural noun ("which projects use ...", "what tools ..."), the way
# people ask for every note that holds one. Its lines are offered in turns across notes
# and the model may name several (by_turns, picks_allowed).
SET_RE = re.compile(r"\b(?:which|what)\s+(?!(?:does|goes|has|was)\b)"
                    r"[a-z]+(?<![isu])s\b", re.I)
MODE_HINT = {"present": "the newest statement counts; older versions are left out",
             "history": "every version counts: pick the line of each version, any order",
             "any": "any dated statement may answer"}
SYSTEM = ("You choose lines from a person's notes. Each line has a number. Reply with "
          "JSON {\"lines\": [numbers]}: the lines that state the answer to the question, "
          "best first. Pick one line unless the question asks for several things (a "
          "list, each version, a change). Reply {\"lines\": []} when no line answers. "
          "Numbers only; no other text.")


def offered(question: str, mode: str, notes: list[dict]) -> tuple[list, list]:
    """(the units a model is shown, best first; every unit of the notes), see the
    module rules."""
    ask = analyse(question)
    paths = {n["path"] for n in notes}
    units = builtin_writer.unit_rows(ask, notes)
    pool = units
    if mode == "present":          # a version another kept note supersedes
        pool = [u for u in units if builtin_writer._document(u.note) == u.note["path"]
                or builtin_writer._document(u.note) not in paths]
    pool = sorted(pool, key=lambda u: (-u.score, u.note["order"], u.at))
    if asks_set(question) or mode == "history":
        pool = by_turns(pool)
    out, seen, tokens = [], set(), 0
    for u in pool:
        key = " ".join(u.text.split()).lower()
        if not key or key in seen:
            continue
        cost = count_tokens(_line(0, u)) + 1
        if len(out) >= MAX_LINES or tokens + cost > MAX_PROMPT_TOKENS:
            break
        seen.add(key)
        out.append(u)
        tokens += cost
    return out, units


def by_turns(pool: list) -> list:
    """A set or a history gathers across notes: each note's best line, then each note's
    second best, and so on (notes in the order of their best line), so the lines offered
    reach every kept note before one note's many lines fill the budget."""
    ranked, turns = [], {}
    for i, u in enumerate(pool):
        k = turns[u.note["id"]] = turns.get(u.note["id"], -1) + 1
        ranked.append((k, i, u))
    return [u for _, _, u in sorted(ranked, key=lambda x: x[:2])]


def _line(n: int, u) -> str:
    """"3. Day rate: 760 per day. (from: rates card > Rates, 2026-10-05, latest)": the
    number first and the line's own words next, so a model reads no date as a number
    to reply with before it has read the line."""
    note = u.note
    title = note["path"].rsplit("/", 1)[-1].rsplit(".", 1)[0]
    where = title + (f" > {note['section'].split(' > ')[-1]}" if note["section"] else "")
    text = " ".join(u.text.split())
    text = text if len(text) <= LINE_CHARS else text[:LINE_CHARS - 1] + "…"
    status = ("latest" if note["status"] == builtin_writer.STATUS_LATEST
              else note["status"].split(",")[0])
    return f"{n}. {text} (from: {where}, {builtin_writer._when(u)}, {status})"


def schema(n: int, most: int) -> dict:
    """The reply's JSON schema: at most `most` line numbers, each between 1 and n."""
    return {"type": "object", "required": ["lines"],
            "properties": {"lines": {"type": "array", "maxItems": most,
                                     "items": {"type": "integer", "minimum": 1,
                                               "maximum": max(1, n)}}}}


def messages_for(question: str, mode: str, lines: list) -> list[dict]:
    body = [f"Question: {' '.join(question.split())}",
            f"Time mode: {mode} ({MODE_HINT.get(mode, MODE_HINT['any'])})", "", "Lines:"]
    body += [_line(i, u) for i, u in enumerate(lines, 1)]
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(body)}]


def parse_reply(text: str, n: int) -> list[int]:
    """Line numbers (1-based, within 1..n, first mention kept) from a reply: the JSON
    object's "lines", else every number in the text."""
    try:
        data = json.loads(text)
        nums = data.get("lines") if isinstance(data, dict) else data
        nums = ([int(x) for x in nums if str(x).strip().isdigit()]   # not 2.0, True, "x"
                if isinstance(nums, list) else None)
    except (ValueError, TypeError):
        nums = None
    if nums is None:
        nums = [int(x) for x in re.findall(r"\d+", text or "")]
    return list(dict.fromkeys(x for x in nums if 1 <= x <= n))[:MAX_CHOSEN]


def first_pick_p(logprobs) -> float | None:
    """The model's probability for the first line number of its reply: the product over
    that number's digit tokens (None when the server sent no logprobs or no number)."""
    total, seen = 0.0, False
    for e in logprobs or ():            # the ollama client's Logprob entries
        tok, lp = e.token or "", e.logprob
        if not re.search(r"\d", tok) or lp is None:
            if seen:
                break
            continue
        total, seen = total + float(lp), True
        if not re.fullmatch(r"\D*\d+", tok.strip()):   # "3]": the number ends here
            break
    return math.exp(total) if seen else None


def picks_allowed(question: str, mode: str) -> int:
    """How many lines a reply may name: one per part asked, more for a list or a history."""
    if asks_set(question) or mode == "history":
        return MAX_CHOSEN
    return max(1, len(analyse(question).parts))


def asks_set(question: str) -> bool:
    """Whether a question asks for a set of things (SET_RE, or the reader's list)."""
    return analyse(question).is_list or bool(SET_RE.search(question))


def compose(question: str, mode: str, chosen: list, units: list) -> tuple[str, list]:
    """(the cited answer, what code overruled) from the chosen units; units: every unit
    of the notes (offered's second value), which the present-mode rules read."""
    if not chosen:
        return builtin_writer.ABSTAIN_SENTENCE, []
    ask = analyse(question)
    chosen = chosen[:picks_allowed(question, mode)]
    if mode == "history":
        return _history(chosen), []
    lines, overruled = [], []
    for u in chosen:
        old, text = None, u.text
        if mode == "present":
            win, old = builtin_writer._newest(u, units, ask.parts[0] if ask.parts else ask)
            if old is not None:
                overruled.append({"chosen": u.text, "by": win.text, "note": win.note["path"],
                                  "why": "a newer dated note of another document states "
                                         "another value"})
                u = win
            text = builtin_writer._without_superseded(u, units, ask.kinds)
        cited = builtin_writer._cite(u, old, text)
        if cited not in lines:
            lines.append(cited)
    return " ".join(lines), overruled


def _history(chosen: list) -> str:
    """A change: one chosen line per version (the first picked), oldest first."""
    per: dict = {}
    for u in chosen:
        per.setdefault((builtin_writer._when(u), u.note["path"]), u)
    return " ".join(builtin_writer.dated_line(u) for u in sorted(per.values(), key=_oldest_first))


def versions_in(answer: str) -> int:
    """How many dated versions a history answer cites ("On DATE: ... [cN]" lines)."""
    return len(set(re.findall(r"(?:^|\. )On (\d{4}-\d{2}-\d{2}): ", answer)))


def _oldest_first(u) -> tuple:
    when = builtin_writer._when(u)
    return (when if when != builtin_writer.UNDATED else "9999", u.note["order"], u.at)


class ChoosingWriter:
    """A model writer used as a reader: it chooses lines, this class writes them."""

    name = "choose"

    def __init__(self, inner, policy: dict | None = None):
        self.inner = inner
        self.model = getattr(inner, "model", "model")
        self.policy = policy          # fixed (tests, `verso calibrate`), else the request's

    def policy_for(self, request: builtin_writer.WriteRequest) -> dict:
        """The fixed policy, else the model's calibrated one the request carries
        (calibrate.policy), else UNCALIBRATED_POLICY."""
        return self.policy or request.policy or dict(UNCALIBRATED_POLICY)

    @property
    def prompt_budget(self):
        return None                   # every kept note: the lines are chosen from them

    def __getattr__(self, name):      # the model writer's own: api, num_ctx, last_stats
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def _ask(self, question: str, mode: str, lines: list) -> dict:
        """One choosing request: {"picks", "reply", "model_p", "inp", "out", "messages"}."""
        msgs = messages_for(question, mode, lines)
        r = self.inner.chat(msgs, what="chat", options={"num_predict": CHOOSE_PREDICT},
                            format=schema(len(lines), picks_allowed(question, mode)),
                            logprobs=True)      # its probability for its first line
        reply = self.inner.text_of(r)
        return {"picks": parse_reply(reply, len(lines)), "reply": reply, "messages": msgs,
                "model_p": first_pick_p(getattr(r, "logprobs", None)),
                "inp": r.prompt_eval_count or 0, "out": r.eval_count or 0}

    def write(self, request: builtin_writer.WriteRequest, stage="generate",
              ledger=None) -> builtin_writer.Written:
        question, mode, notes = request.question, request.mode, request.notes
        policy = self.policy_for(request)
        kind = "synthesis" if SYNTHESIS_RE.match(question) else \
            "change" if mode == "history" else None
        if kind and policy.get(kind, "choose") == "generate":
            free = self.inner.write(request, stage=stage, ledger=ledger)
            return builtin_writer.Written(free.text, "generate", free.input_tokens,
                                          free.output_tokens, {"why": f"a {kind} question: "
                                          "the model's policy gives it to the free-text "
                                          "writer"})
        started = time.perf_counter()
        lines, units = offered(question, mode, notes)
        builtin = builtin_writer.extract_answer(question, mode, notes)
        trace = {"offered": len(lines), "builtin": builtin}
        asked = self._ask(question, mode, lines) if lines else {"picks": [], "inp": 0,
                                                                 "out": 0}
        trace.update(chosen=asked["picks"], **{k: asked[k] for k in
                                               ("reply", "messages", "model_p") if k in asked})
        text, overruled = compose(question, mode, [lines[i - 1] for i in asked["picks"]],
                                  units)
        agree = same_facts(text, builtin)     # (a change from one version against the
        # reader's several is a disagreement too: the model's policy decides it)
        inp, out = asked["inp"], asked["out"]
        rule = policy["on_disagreement"]
        if not agree and (rule == "again" or policy.get("ask_again")) and asked["picks"]:
            again = self._ask(question, mode, lines[::-1])
            inp, out = inp + again["inp"], out + again["out"]
            first = lines[asked["picks"][0] - 1]
            trace["again"] = bool(again["picks"]) and \
                lines[::-1][again["picks"][0] - 1] is first
        shown = "model" if agree or _model_shown(rule, trace) else "reader"
        if rule == "both" and text == builtin_writer.ABSTAIN_SENTENCE:
            shown = "reader"          # no reading of its own: the reader's answer stands
        if not agree and rule == "both" and shown == "model":
            trace["alternate"] = {"by": "reader", "text": builtin}
        elif shown == "reader":
            trace["model_answer"] = text
            text = builtin
        trace.update(overruled=overruled, agree=agree, shown=shown, policy=rule)
        cost_ledger.record(ledger, stage, "ollama", CHOOSER_MODEL_PREFIX + self.model,
                           started, inp, out)
        if ledger is not None:
            ledger.rows[-1]["choose"] = {"writer": self.name, **{
                k: v for k, v in trace.items() if k != "messages"}}
        return builtin_writer.Written(text, self.name, inp, out, trace)


def _model_shown(rule: str, trace: dict) -> bool:
    """Whether a disagreement shows the model's answer first ("model", "both", or
    "again" when the model chose the same first line in both orders)."""
    return rule in ("model", "both") or (rule == "again" and bool(trace.get("again")))


def same_facts(a: str, b: str) -> bool:
    """Whether two answers state the same thing: the same numbers (a table row and a
    sentence may give one rate) and the same lines among those that state no number
    (a name asked beside a phone number is a fact the numbers do not speak for)."""
    def facts(text):
        lines = [" ".join(x.split()).lower() for x in
                 re.split(r"\s*\[c\d+\][^.]*\.\s*", text) if x.strip()]
        nums = number_keys(re.sub(r"\[c\d+\]", " ", text))
        return frozenset(nums), frozenset(x for x in lines if not number_keys(x))
    return facts(a) == facts(b)
