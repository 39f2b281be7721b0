"""chat: a conversation over the pipeline, one turn at a time; each follow-up made into
a question by followup.py (rewritten when the rewrite is sound, else asked as written
with the previous subject searched beside it).

    python harness.py --chat [--save FILE] [--redact] [--vault DIR] [--index DIR]

In:  the user's messages, one turn at a time.
Out: per turn what was asked (shown as "→ ..." when it differs: the rewrite, or the
     follow-up as written with "(about <previous subject>)"), the answer as harness.ask
     gives it, and with --save one JSONL line per turn (question, rewrite, how, answer,
     citations, verdict, time mode), which `evaluate.py --conversations` reads; a
     transcript holding text from private notes starts with a banner line
     ({"banner": ...}: not for sharing), and with --redact it holds none (the copy to
     share, as /html's pages).
Not: the rewrite rules (followup.py), memory beyond the process, or writing into the
vault.

A follow-up asked as written ("what about the baguette?" after the sourdough loaf's
price) goes to harness.ask as typed, with context= the previous subject: retrieval
searches both, the router, the judge and the writer read the follow-up alone, so the
writer answers the baguette, not the loaf. Its turn's rewrite is what the user is shown,
"what about the baguette? (about the price of the sourdough loaf)", and how "as
written" says the part in parentheses was searched, not asked.
"""

from __future__ import annotations

if __name__ == "__main__" and not __package__:   # a program in a checkout (not -m)
    import _checkout  # noqa: F401

import argparse
import json
import sys
from pathlib import Path

from verso import followup
from verso import harness
from verso import backends
from verso import models
from verso import store


class Conversation:
    """One conversation: its turns, in the process only."""

    def __init__(self, index, backend):
        self.index, self.backend, self.turns = index, backend, []

    def ask(self, msg: str) -> dict:
        prev = self.turns[-1] if self.turns else None
        full, how = followup.model_rewrite(getattr(self.backend, "writer", None), msg, prev)
        time = followup.when(msg, prev) if how != "as asked" else {}
        context = followup.context(how, prev)     # as written: the subject, searched only
        a = harness.ask(" ".join(msg.split()) if context else full, index=self.index,
                        backend=self.backend, context=context, **time)
        turn = {"question": msg, "rewrite": full, "how": how, "context": context,
                "answer": a.answer, "shown": a.shown, "citations": a.citations,
                "verdict": a.verdict, "time_mode": a.time_mode, "trace": a}
        # what the next follow-up is about: a pronoun or a time word keeps the thread's
        # subject; a new thing ("what about the keys?") or a full question brings its own
        own = followup.subject(full if how in ("as asked", "what about", "model") else msg)
        before = (prev or {}).get("subject", "")
        keep = how in ("pronoun", "before that", "still true", "carried subject")
        self.turns.append({**turn, "question": msg if how == "as written" else full,
                           "subject": (before if keep else own) or own or before})
        return turn


def record(turn: dict, redact: bool = False) -> dict:
    """A turn as a transcript line (no trace); with redact a sentence from a private
    folder's note is left out (html_report.redact)."""
    line = {k: turn[k] for k in ("question", "rewrite", "how", "answer", "citations",
                                 "verdict", "time_mode")}
    if redact and turn.get("trace") is not None:
        from verso import html_report
        line["answer"] = html_report.redact(turn["trace"].to_dict())["answer"]
    return line


def save_turn(path, turn: dict, redact: bool = False) -> None:
    """Append the turn's line to the transcript at path; the first line holding private
    text puts the banner line at the top of the file (rewritten atomically)."""
    from verso import html_report
    path = Path(path)
    line = json.dumps(record(turn, redact), ensure_ascii=False) + "\n"
    banner = json.dumps({"banner": html_report.PRIVATE_BANNER}) + "\n"
    private = (not redact and turn.get("trace") is not None
               and html_report.holds_private(turn["trace"].to_dict()))
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    if private and not old.startswith(banner):
        store.write_atomic(path, banner + old + line)
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)


def _command(line: str, conv: Conversation, last: dict | None,
             redact: bool = False) -> bool:
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
        html_report.save_trace(Path(arg), html_report.redact(a) if redact else a,
                               Path(conv.index.manifest["vault"]))
        print(f"(trace written to {arg})")
    else:
        print("commands: /new /sources /cost /html FILE /quit")
    return True


def loop(conv: Conversation, read=input, save=None, redact=False) -> int:
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
            if not _command(line, conv, last, redact):
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
            save_turn(save, last, redact)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="harness.py --chat", description=__doc__.split("\n")[0])
    p.add_argument("--chat", action="store_true")
    p.add_argument("--save", metavar="FILE", help="append each turn to this JSONL transcript")
    p.add_argument("--redact", action="store_true", help="write --save and /html files "
                   "to share: text from private folders left out (kept by default, under "
                   "a not-for-sharing banner)")
    p.add_argument("--include-private", action="store_true", help=argparse.SUPPRESS)
    # ^ the older flag: the text is kept by default now
    p.add_argument("--vault", default=None)
    p.add_argument("--index", default=None)
    p.add_argument("--backend", choices=("auto", "builtin", "ollama"), default="auto")
    p.add_argument("--judge", choices=backends.JUDGES, default=None)
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
    return loop(Conversation(idx, be), save=args.save, redact=args.redact)


if __name__ == "__main__":
    sys.exit(main())
