"""chat: a conversation over the pipeline; follow-ups rewritten into full questions.

    python harness.py --chat [--save FILE] [--vault DIR] [--index DIR] [--backend ...]

In:  the user's messages, one turn at a time; the previous turn (its full question,
     time mode, answer, citations).
Out: per turn the rewrite (shown as "→ ..." when it differs), the answer as
     harness.ask gives it, and with --save one JSONL line per turn (question, rewrite,
     how, answer, citations, verdict), which `evaluate.py --conversations` reads.
Not: memory beyond the process, or writing into the vault.

The builtin rewrite, by rules a reader can state (rewrite()):
  1. "what about X?" / "and X?" / "how about X?": the previous question with its
     subject replaced by X ("How much is the rent?" -> "How much is the deposit?");
  2. "before that?" / "and before?": how the previous subject changed before the
     earliest date the previous answer cited;
  3. "is that still true?" / "still?": the previous question asked about now;
  4. he / she / they / it / his / her ...: the last thing named in the previous turn;
  5. a message with no subject of its own ("and in June?", "how much was it then?"):
     the previous question's subject carried into it.
A model backend rewrites with one short request; the code keeps that rewrite only when
it names every name and word of the follow-up's own (else the builtin rewrite is used).
"""

from __future__ import annotations

if __name__ == "__main__":      # run as a program in a checkout: `verso` is this folder
    import _checkout  # noqa: F401

import argparse
import calendar
import json
import re
import sys
from pathlib import Path

from verso import harness
from verso import models
from verso import store
from verso import textkit

ABOUT_RE = re.compile(r"^(?:and|so|but|ok|okay)?[\s,]*(?:what|how) about\s+(.+?)[\s?.!]*$|"
                      r"^and\s+(?:the\s+)?(.+?)\?$", re.I)
BEFORE_RE = re.compile(r"^(?:and|so)?[\s,]*(?:what about\s+)?before(?: that| then)?[\s?.!]*$",
                       re.I)
STILL_RE = re.compile(r"^(?:and|so|but)?[\s,]*(?:is|are) (?:that|this|it|they) still "
                      r"(?:true|the case|right|so|valid)|^still\??$", re.I)
LEAD_RE = re.compile(r"^(?:what(?:'s| is| are| was| were)?|how (?:much|many|long|often)"
                     r"(?: is| are| was| were| does| did| do)?|who(?:'s| is| was)?|"
                     r"where(?:'s| is| was)?|when(?:'s| is| was)?|which|is|are|did|does|do)\s+",
                     re.I)
TIME_TAIL_RE = re.compile(r"\s+(?:now|currently|today|these days|at the moment|then|"
                          r"in \w+(?: \d{4})?|as of [\w -]+|before \w+(?: \d{4})?)\s*$", re.I)
PERSON = {"he": "", "she": "", "they": "", "him": "", "them": "", "his": "'s", "her": "'s",
          "their": "'s"}                  # -> the last name of the previous turn
THING = {"it": "", "its": "'s", "that": "", "this": ""}   # -> the previous subject
TIME_LEAD_RE = re.compile(r"^(?:in|on|at|as of|before|after|by|during|since)\b", re.I)
PREPOSITION_RE = re.compile(r"\s+(?:for|of|at|in|with|on|to|from|about|under)\s+", re.I)
OWN_SKIP = frozenset("and so but then that this those these it its he she they him her "
                     "his their them one what about how still true case right".split())
REWRITE_PROMPT = ("Rewrite the user's follow-up as one full, standalone question about "
                  "their notes, using the conversation so far. Keep every name and word of "
                  "the follow-up. Reply with the question only.\n\nPrevious question: "
                  "{prev}\nPrevious answer: {answer}\nFollow-up: {msg}")


def subject(question: str) -> str:
    """What a question asks about: its words without the question words in front and
    the time words at its end ("What is the Kittiwake retainer now?" -> "the Kittiwake
    retainer")."""
    s = question.strip().rstrip("?.! ")
    s = LEAD_RE.sub("", s, count=1)
    return TIME_TAIL_RE.sub("", s).strip()


def _names(text: str) -> list[str]:
    """Capitalised names of a text in order (not its first word): "Ana", "Kittiwake"."""
    words = re.findall(r"[^\W\d_][\w'-]*", text)
    return [w.rstrip("'s") if w.endswith("'s") else w for w in words[1:]
            if w[0].isupper() and not textkit.month_term(w)]


def _own_words(msg: str) -> set[str]:
    """The follow-up's own content terms: what a rewrite must keep."""
    return {t for t in textkit.terms(msg) if t not in OWN_SKIP}


def _month_year(day: str) -> str:
    """"2026-06-01" -> "June 2026"."""
    return f"{calendar.month_name[int(day[5:7])]} {day[:4]}"


def _replace_subject(prev: str, new: str) -> str:
    """The previous question with the head of its subject replaced by `new`: the last
    word before the subject's first preposition ("the rent for the flat": rent; "the
    Kittiwake retainer": retainer)."""
    new = re.sub(r"^(?:the|a|an|my|our)\s+", "", new.strip(), flags=re.I)
    s = subject(prev)
    words = PREPOSITION_RE.split(s, maxsplit=1)[0].split() if s else []
    if not words:
        return f"What about {new}?"
    head = words[-1]
    at = prev.find(s)
    cut = at + s.find(head, len(" ".join(words[:-1])))
    return prev[:cut] + new + prev[cut + len(head):]


def rewrite(msg: str, prev: dict | None) -> tuple[str, str]:
    """(the full question, the rule that made it: "as asked" when none applied)."""
    msg = " ".join(msg.split())
    if not prev:
        return msg, "as asked"
    pq, subj = prev["question"], subject(prev["question"])
    if BEFORE_RE.match(msg):
        dates = sorted(c["date"] for c in prev.get("citations", [])
                       if re.match(r"\d{4}-\d\d-\d\d$", c.get("date", "")))
        when = f" before {_month_year(dates[0])}" if dates else " before that"
        return f"How did {subj} change{when}?", "before that"
    if STILL_RE.match(msg):
        return f"{LEAD_RE.match(pq).group(0) if LEAD_RE.match(pq) else 'What is '}{subj} now?", \
            "still true"
    m = ABOUT_RE.match(msg)
    about = (m.group(1) or m.group(2)).strip() if m else None
    if about and TIME_LEAD_RE.match(about):        # "and in June?": the subject, then
        lead = LEAD_RE.match(pq)
        return f"{lead.group(0) if lead else 'What is '}{subj} {about}?", "carried subject"
    if about and not _pronouns(msg):
        names = _names(pq)
        if about[:1].isupper() and names:      # "what about Aireside?": the name swapped
            return re.sub(rf"\b{re.escape(names[-1])}\b", about, pq, count=1), "what about"
        return _replace_subject(pq, about), "what about"
    if _pronouns(msg):
        names = _names(pq) or _names(prev.get("answer", ""))
        return _fill_pronouns(msg, names[-1] if names else None, subj), "pronoun"
    if subj and not any(not textkit.month_term(t) for t in _own_words(msg)):
        lead = msg.rstrip("?.! ")
        return f"{lead} — {subj}?", "carried subject"
    return msg, "as asked"


def _pronouns(msg: str) -> bool:
    return any(w.lower() in PERSON or w.lower() in THING for w in re.findall(r"[\w']+", msg))


def _fill_pronouns(msg: str, name: str | None, subj: str) -> str:
    """he/she/they... -> the last name; it/that/this -> the previous subject."""
    def sub(m):
        w = m.group(0).lower()
        if w in PERSON:
            return (name + PERSON[w]) if name else m.group(0)
        return (subj + THING[w]) if subj else m.group(0)
    return re.sub(r"\b(?:" + "|".join([*PERSON, *THING]) + r")\b", sub, msg, flags=re.I)


def keeps(msg: str, full: str) -> bool:
    """A rewrite keeps every name and own word of the follow-up."""
    have = set(textkit.terms(full))
    return all(t in have for t in _own_words(msg)) and all(
        n.lower() in full.lower() for n in _names(" " + msg))


def model_rewrite(writer, msg: str, prev: dict | None) -> tuple[str, str]:
    """One short request to the writer model; the builtin rewrite when the model's
    drops a name or word of the follow-up, or fails."""
    builtin = rewrite(msg, prev)
    if not prev or writer is None or getattr(writer, "name", "builtin") == "builtin":
        return builtin
    prompt = REWRITE_PROMPT.format(prev=prev["question"], answer=prev.get("answer", "")[:400],
                                   msg=msg)
    writer = getattr(writer, "inner", writer)   # the model itself, not the line chooser
    try:
        text = writer.write([{"role": "user", "content": prompt}], stage="route")[0]
    except models.BackendError:
        return builtin
    text = " ".join(str(text).split()).strip('"')
    question = text.endswith("?")                # a rewrite is a question, not an answer
    return (text, "model") if question and keeps(msg, text) else builtin


class Conversation:
    """One conversation: its turns, in the process only."""

    def __init__(self, index, backend):
        self.index, self.backend, self.turns = index, backend, []

    def ask(self, msg: str) -> dict:
        prev = self.turns[-1] if self.turns else None
        full, how = model_rewrite(getattr(self.backend, "writer", None), msg, prev)
        a = harness.ask(full, index=self.index, backend=self.backend)
        turn = {"question": msg, "rewrite": full, "how": how, "answer": a.answer,
                "shown": a.shown, "citations": a.citations, "verdict": a.verdict,
                "time_mode": a.time_mode, "trace": a}
        self.turns.append({**turn, "question": full})
        return turn


def record(turn: dict, include_private: bool = False) -> dict:
    """A turn as a transcript line (no trace); a sentence from a private folder's note is
    left out (html_report.redact) unless include_private."""
    line = {k: turn[k] for k in ("question", "rewrite", "how", "answer", "citations",
                                 "verdict", "time_mode")}
    if not include_private and turn.get("trace") is not None:
        from verso import html_report
        line["answer"] = html_report.redact(turn["trace"].to_dict())["answer"]
    return line


def _command(line: str, conv: Conversation, last: dict | None,
             include_private: bool = False) -> bool:
    """Handle a /command; False to end the conversation loop."""
    cmd, _, arg = line.partition(" ")
    if cmd == "/quit":
        return False
    if cmd == "/new":
        conv.turns.clear()
        print("(a new conversation)")
    elif last is None:
        print("(nothing asked yet)")
    elif cmd == "/sources":
        for i, s in enumerate(last["trace"].sources, 1):
            print(f"  [c{i}] {s['date']}  {s['path']}: {' '.join(s['text'].split())[:100]}")
    elif cmd == "/cost":
        print(harness.render(last["trace"]).split("\n\n", 1)[-1].split("\ntime mode")[0])
    elif cmd == "/html" and arg:
        from verso import html_report
        a = last["trace"].to_dict()
        html_report.save_trace(Path(arg), a if include_private else html_report.redact(a),
                               Path(conv.index.manifest["vault"]))
        print(f"(trace written to {arg})")
    else:
        print("commands: /new /sources /cost /html FILE /quit")
    return True


def loop(conv: Conversation, read=input, save=None, include_private=False) -> int:
    last = None
    while True:
        try:
            line = read("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if not line:
            continue
        if line.startswith("/"):
            if not _command(line, conv, last, include_private):
                return 0
            continue
        try:
            last = conv.ask(line)
        except (ValueError, models.BackendError) as e:
            print(f"error: {e}")
            continue
        if last["rewrite"] != line:
            print(f"→ {last['rewrite']}")
        print(f"{last['shown'] or last['answer']}\n[{last['verdict']}]")
        if save:
            with open(save, "a", encoding="utf-8") as f:
                f.write(json.dumps(record(last, include_private), ensure_ascii=False) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="harness.py --chat", description=__doc__.split("\n")[0])
    p.add_argument("--chat", action="store_true")
    p.add_argument("--save", metavar="FILE", help="append each turn to this JSONL transcript")
    p.add_argument("--include-private", action="store_true", help="let --save and /html "
                   "files hold text from private folders (left out by default)")
    p.add_argument("--vault", default=None)
    p.add_argument("--index", default=None)
    p.add_argument("--backend", choices=("auto", "builtin", "ollama"), default="auto")
    p.add_argument("--judge", choices=models.JUDGES, default=None)
    args = p.parse_args(argv)
    try:
        import readline          # line editing and history, where the platform has it
        del readline             # (importing it is what turns them on for input())
    except ImportError:
        pass
    try:
        idx, be = harness.load(args.index, args.vault, args.backend, args.judge)
    except (ValueError, OSError, models.BackendError, store.IndexProblem) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"verso chat over {idx.manifest['vault']} ({be.note}); /quit ends, /new starts "
          "over", file=sys.stderr)
    return loop(Conversation(idx, be), save=args.save, include_private=args.include_private)


if __name__ == "__main__":
    sys.exit(main())
