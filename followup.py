"""followup: a chat follow-up made into a question: rewritten into a full one when the
rewrite is sound, else asked as written with the previous subject searched beside it.

In:  the follow-up as typed; the previous turn (question, subject, answer, citations).
Out: rewrite() -> (the question to ask, how); context() -> the words searched beside a
     follow-up asked as written; when() -> the mode its time words set; subject();
     keeps() -> whether a rewrite is sound; model_rewrite() -> a model's, when it keeps.
Not: asking (chat.Conversation does), or remembering turns.

A follow-up's subject is the previous turn's first noun phrase, time words left out
("What is the current price of the sourdough loaf?" -> "the price of the sourdough
loaf"), with the phrase that holds each name the question gives after it ("What
annealing temperature do I use for the Taq PCR now?" -> "the annealing temperature for
the Taq PCR"). The builtin rewrite fills pronouns (a name of the previous turn, or its
subject), asks a time-only follow-up ("and before that?", "is that still true?", "and in
June?") of the previous subject, and a "what about X?" of a name or a value (price,
deposit, number ...) in the previous one's place. It, or a model's rewrite, is kept only
when keeps(): one well-formed question, every content word of the follow-up kept, what
it adds taken from the previous turn. Otherwise the follow-up is asked as written: the
previous subject is searched beside it (harness.ask(context=)) and shown to the user
("what about the baguette? (about the price of the sourdough loaf)"), but the writer
reads the follow-up alone: a baguette is no value of a loaf, and handed the loaf's
subject the writer answered the loaf. Time words set the mode (when()): "before that",
"earlier", "previously" -> as of the day before the newest note the previous answer
cited (history when none); "now", "currently", "still" -> present.
"""

from __future__ import annotations

import datetime
import re

from verso import asof
from verso import builtin_writer
from verso import models
from verso import textkit
from verso import timewords
from verso.textkit import one_of

ABOUT_RE = re.compile(r"^(?:and|so|but|ok|okay|also)?[\s,]*(?:(?:what|how) about|and|also)\s+"
                      r"(?!(?:what|how|who|when|where|which|why|is|are|did|does|do)\b)"
                      r"(.+?)[\s?.!]*$", re.I)
# how people point back in time in a follow-up ("before that", "and before?", "earlier",
# "previously"): timewords' earlier words but "before" and "previous" alone, which name
# another time there ("before the move", "the previous flat")
BACK_WORDS = tuple(w for w in timewords.EARLIER_WORDS if w not in ("before", "previous"))
EARLIER_RE = re.compile(rf"\b(?:{one_of(BACK_WORDS)}|before (?:then|this|it)|before\s*[?.!]*$)",
                        re.I)
# ... and to the present: "now", "currently", "still", "these days"
NOW_RE = re.compile(rf"\b{one_of(timewords.NOW_WORDS)}\b", re.I)
# time phrases are not part of a subject: the time of a follow-up is its own
TIME_PHRASE_RE = re.compile(
    rf"\b(?:(?:back |early |late )?(?:in|on|by|before|after|since|during|as of) (?:\d\d? )?(?:"
    rf"(?:early|mid|late)[- ]?)?(?:{textkit.MONTH_WORD}|\d{{4}})(?: \d{{4}})?|"
    rf"{one_of(timewords.NOW_WORDS + timewords.LATEST_WORDS + BACK_WORDS + ('yet', 'then'))})\b",
    re.I)
CONTINUE_RE = re.compile(r"^(?:and|so|but|also|then|ok|okay)\b", re.I)  # "and what's ...?"
DETERMINERS = frozenset("the my our your his her their a an".split())
PREPOSITIONS = frozenset("of for to at in on with from about under by".split())
# words that end a noun phrase: verbs of a clause, pronouns, question words, conjunctions
CLAUSE = frozenset(textkit.WH_WORDS + textkit.AUX_WORDS + textkit.SUBJECT_PRONOUNS + tuple(
    "be been being shall may might must it me us them that this and or but if so than s".split()))
QUESTION_START = frozenset(textkit.WH_WORDS + textkit.AUX_WORDS)
WH = frozenset("what how who why".split())        # a second one means two questions glued
# what people ask the value of: a "what about X?" with X among these asks the same thing's X
VALUE_WORDS = frozenset(
    "price prices cost costs rent deposit fee fees rate rates salary wage budget total balance "
    "amount number phone email address date deadline time name status target goal size "
    "score weight length duration limit quote invoice bill tax".split())
LEAD_RE = re.compile(r"^(?:what|how (?:much|many|long|often)|who|where|when|which)"
                     r"(?:'s| is| are| was| were| does| did| do)?\s+", re.I)
NAME_RE = re.compile(r"(?<![\w'])[A-Z][\w'-]*(?: [A-Z][\w'-]*)*")
NOT_NAMES = textkit.STOPWORDS | QUESTION_START | frozenset(("i", *textkit.WEEKDAYS))
PERSON = {"he": "", "she": "", "they": "", "him": "", "them": "", "his": "'s", "her": "'s",
          "their": "'s"}                  # -> the last name of the previous turn
THING = {"it": "", "its": "'s"}           # -> the previous subject ("that" may be a clause)
OWN_SKIP = frozenset("and so but then that this those these it its he she they him her "
                     "his their them one what about how still true case right also ok okay "
                     "currently".split()) | {w for w in BACK_WORDS if " " not in w}
REWRITE_PROMPT = ("Rewrite the user's follow-up as one full, standalone question about "
                  "their notes, using the conversation so far. Keep every name and word of "
                  "the follow-up. Reply with the question only.\n\nPrevious question: "
                  "{prev}\nPrevious answer: {answer}\nFollow-up: {msg}")


def subject(question: str) -> str:
    """What a question asks about: its first noun phrase, without its time words ("What
    is the current price of the sourdough loaf?" -> "the price of the sourdough loaf");
    "" when it has none ("and before that?")."""
    words = re.findall(r"[\w'-]+", TIME_PHRASE_RE.sub(" ", question))
    low = [w.lower() for w in words]
    for i, w in enumerate(words):
        after_wh = i > 0 and low[i - 1] in ("which", "what") and low[i] not in CLAUSE | PREPOSITIONS
        if not (low[i] in DETERMINERS or (i and w[0].isupper() and low[i] != "i") or after_wh):
            continue
        j = i + 1
        while j < len(words) and low[j].split("'")[0] not in CLAUSE:
            j += 1
        np_ = words[i:j]
        if i and low[i - 1] in ("did", "does", "do") and len(np_) > 1:
            cut = next((k for k, w in enumerate(np_) if w.lower() in PREPOSITIONS), len(np_))
            np_ = np_[:max(1, cut - 1)]   # "what did the physio find": do, subject, verb
        while np_ and low[i + len(np_) - 1] in PREPOSITIONS | DETERMINERS:
            np_ = np_[:-1]                # "... about" left by a clause word after it
        if any(t not in OWN_SKIP and not textkit.month_term(t) for t in textkit.terms(" ".join(np_))):
            return " ".join([*(["the"] if after_wh else []), *np_,
                             *_name_phrases(words, i + len(np_), question)])
    return ""


def _name_phrases(words: list[str], start: int, question: str) -> list[str]:
    """The words of each phrase after words[start] that holds a name of the question,
    from the preposition in front of it ("for the Taq PCR", "in Lisbon"): a name is the
    rarest word a question has, and a subject without it asks about something else
    ("the annealing temperature" of which method?). A name with no preposition in front
    (the one who did it: "did Maren sign") is left to the pronoun rules."""
    low = [w.lower() for w in words]
    out = []
    for name in _names(question):
        part = name.split()
        at = next((m for m in range(start, len(words) - len(part) + 1)
                   if [w.removesuffix("'s") for w in words[m:m + len(part)]] == part), None)
        if at is None:
            continue                  # in the noun phrase already, or before it
        k = at - 1                    # "for the new Taq PCR": back to the preposition
        while k >= start and at - k <= 3 and low[k] not in PREPOSITIONS | CLAUSE:
            k -= 1
        if k >= start and low[k] in PREPOSITIONS:
            end = at + len(part)      # on to the phrase's end: "for Western blots",
            while end < len(words) and (low[end] not in PREPOSITIONS | CLAUSE or (
                    low[end] in ("and", "or") and _named_next(words, end + 1))):
                end += 1              # "... and the Lowry assay"
            out += words[k:end]
            start = end
    return out


def _named_next(words: list[str], k: int) -> bool:
    """Whether words[k:] opens with a name, a determiner or two before it allowed."""
    while k < len(words) and words[k].lower() in DETERMINERS:
        k += 1
    return k < len(words) and words[k][:1].isupper() and words[k].lower() not in NOT_NAMES


def _names(text: str) -> list[str]:
    """Names in order, a run of capitalised words as one ("Priya Nandakumar", "Ana"). A
    lone capital opening a sentence or clause is grammar, not a name ("Existing
    clients ...", "Role: ..."); months, weekdays and common words are not names."""
    out = []
    for m in NAME_RE.finditer(text):
        words = [w[:-2] if w.endswith("'s") else w for w in m.group(0).split()]
        words = [w for w in words if w.lower() not in NOT_NAMES and not textkit.month_term(w)]
        opens = not text[:m.start()].strip() or text[:m.start()].rstrip()[-1] in ".:;!?(]"
        if words and (len(words) > 1 or not opens):
            out.append(" ".join(words))
    return out


def _own_words(msg: str) -> set[str]:
    """The follow-up's own content terms: what a rewrite must keep."""
    return {t for t in textkit.terms(msg) if t not in OWN_SKIP}


def _lead(question: str, past: bool | None = None) -> str:
    """The question words in front ("How much is "), put in the past or present tense;
    "What is " when the question has none it can lend."""
    m = LEAD_RE.match(question)
    lead = m.group(0) if m else "What is "
    lead = lead.replace("'s ", " is ")
    if not re.search(r"\b(?:is|are|was|were|does|did|do)\s*$", lead):
        lead = lead.rstrip() + " is "
    swap = {"is": "was", "are": "were"} if past else {"was": "is", "were": "are"} \
        if past is False else {}
    return re.sub(r"\b(is|are|was|were)(\s*)$", lambda x: swap.get(x.group(1), x.group(1))
                  + x.group(2), lead)


def when(msg: str, prev: dict | None) -> dict:
    """The time mode the follow-up's own time words set, as harness.ask keywords: {} when
    it has none (the router decides)."""
    if prev and EARLIER_RE.search(msg):
        day = _newest_cited(prev)
        if day:                       # the version before the one just answered
            return {"as_of": (day - datetime.timedelta(days=1)).isoformat()}
        return {"mode": "history"}
    if prev and NOW_RE.search(msg):
        return {"mode": "present"}
    return {}


def _newest_cited(prev: dict) -> datetime.date | None:
    days = asof.real_days([c.get("date") for c in prev.get("citations", [])])
    return days[-1] if days else None


def rewrite(msg: str, prev: dict | None) -> tuple[str, str]:
    """(the question to ask, how: "as asked", "as written", or the rule whose rewrite
    keeps() kept)."""
    msg = " ".join(msg.split())
    if not prev:
        return msg, "as asked"
    subj = _prior_subject(prev)
    full, how = _rule(msg, prev, subj)
    if full is not None and keeps(msg, full, prev, subj):
        return full, how
    follow = _pronouns(msg) or CONTINUE_RE.match(msg) or ABOUT_RE.match(msg)
    if full is None and subject(msg) and not follow:
        return msg, "as asked"        # a question with a subject of its own
    return as_written(msg, subj), "as written"


def as_written(msg: str, subj: str) -> str:
    """The follow-up as the user wrote it, the previous subject beside it: what the
    user is shown (retrieval gets the subject through context(), the writer never)."""
    return f"{msg} (about {subj})" if subj else msg


def context(how: str, prev: dict | None) -> str | None:
    """The words retrieval searches beside a follow-up asked as written: the previous
    subject (harness.ask(context=)); None for a rewrite or a question of its own."""
    return (_prior_subject(prev) or None) if how == "as written" and prev else None


def _prior_subject(prev: dict) -> str:
    """What the conversation is about so far: the subject carried with the previous
    turn, else its question's."""
    return prev.get("subject") or subject(prev["question"])


def _rule(msg: str, prev: dict, subj: str) -> tuple[str | None, str]:
    """The builtin rewrite of a follow-up, checked by keeps() afterwards; None if no rule
    applies."""
    if not subj:
        return None, ""
    pq, rest = prev["question"], TIME_PHRASE_RE.sub(" ", msg)
    time_only = not _own_words(rest) and not _pronouns(msg)
    if time_only and EARLIER_RE.search(msg):
        return f"{_lead(pq, past=True)}{subj} before that?", "before that"   # when(): the date
    if time_only and NOW_RE.search(msg):
        return f"{_lead(pq, past=False)}{subj} now?", "still true"
    point = TIME_PHRASE_RE.search(msg)
    if time_only and point:           # "and in June?": the subject at that time
        return f"{_lead(pq)}{subj} {point.group(0)}?", "carried subject"
    m = ABOUT_RE.match(msg)
    about = re.sub(r"^(?:the|a|an|my|our)\s+", "", m.group(1), flags=re.I) if m else ""
    if about and not _pronouns(msg):
        names = _names(pq)
        if about[:1].isupper() and names:   # "what about Aireside?": the name swapped
            return re.sub(rf"\b{re.escape(names[-1])}\b", about, pq, count=1), "what about"
        head = about.split()[-1].lower()
        asked = _ask_value(pq, subj, about) if head in VALUE_WORDS else None
        # a thing is no value: of the previous one, or beside it? (asked as written)
        return (asked, "what about") if asked else (None, "")
    if _pronouns(msg):                # "and" / "so" in front: how a follow-up is typed
        return _fill_pronouns(CONTINUE_RE.sub("", msg).strip(" ,"), _person(prev), subj), \
            "pronoun"
    return None, ""


def _ask_value(pq: str, subj: str, value: str) -> str | None:
    """"what about the deposit?" after "How much is the rent for the Lisbon flat?": the
    previous value replaced ("... the deposit for the Lisbon flat?"); after a question
    about a thing with no value in front ("Which flat did I take?"), the value of it;
    None after a value with no thing named ("my day rate": whose deposit?)."""
    m = re.match(r"(.+?)\s+(of|for)\s+(.+)$", subj)
    if m and m.group(1).split()[-1].lower() in VALUE_WORDS:
        return f"{_lead(pq)}the {value} {m.group(2)} {m.group(3)}?"
    if subj.split()[-1].lower() in VALUE_WORDS:
        return None
    return f"What is the {value} of {subj}?"


def _person(prev: dict) -> str | None:
    """Who he / she / they is: after a "who" question the name its answer gave (a full
    name first); else the last name of the previous question, or the answer's first."""
    asked, said = _names(prev["question"]), _names(prev.get("answer", ""))
    if prev["question"].lower().startswith("who"):
        said = sorted(said, key=lambda n: " " not in n)
        return (said or asked[-1:] or [None])[0]
    return (asked[-1:] or said[:1] or [None])[0]


def _pronouns(msg: str) -> bool:
    return any(w.lower() in PERSON or w.lower() in THING for w in re.findall(r"[\w']+", msg))


def _fill_pronouns(msg: str, name: str | None, subj: str) -> str:
    """he/she/they... -> the person; it/its -> the previous subject."""
    def sub(m):
        w = m.group(0).lower()
        if w in PERSON:
            return (name + PERSON[w]) if name else m.group(0)
        return (subj + THING[w]) if subj else m.group(0)
    return re.sub(r"\b(?:" + "|".join([*PERSON, *THING]) + r")\b", sub, msg, flags=re.I)


def keeps(msg: str, full: str, prev: dict, subj: str) -> bool:
    """A rewrite worth asking: one well-formed question (a question word in front, a "?"
    at the end, no second question word glued in, no word twice in a row, no pronoun
    left unfilled, no thing of the follow-up put as a value "of" another), every name
    and content word of the follow-up kept, and what it adds taken from the previous
    turn (its subject, a name it gave; never words from nowhere)."""
    raw = [w.split("'")[0] for w in re.findall(r"[\w'-]+", full)]
    words = [w.lower() for w in raw]
    if not (full.endswith("?") and words and words[0] in QUESTION_START):
        return False
    if any(w in WH or w in QUESTION_START and r[0].isupper() for w, r in zip(words[1:], raw[1:])):
        return False                 # a second question glued in ("... hand Has my ...")
    if any(a == b for a, b in zip(words, words[1:])):
        return False
    if any(w in PERSON or w in THING for w in words):
        return False                 # a pronoun no name or subject could fill
    have = set(textkit.terms(full))
    if not (all(t in have for t in _own_words(msg)) and all(
            n.lower() in full.lower() for n in _names(msg))):
        return False
    for w in set(re.findall(r"[\w'-]+", msg.lower())) - VALUE_WORDS - CLAUSE - DETERMINERS:
        of = re.compile(rf"\b{re.escape(w)}\s+(?:of|for)\s")
        if of.search(full.lower()) and not of.search(msg.lower()):
            return False    # "the current baguette of the loaf": only a value is "of" a thing
    before = set(textkit.terms(" ".join([prev["question"], subj, prev.get("answer", "")])))
    added = {t for t in have - set(textkit.terms(msg))
             if not (t.isdigit() or textkit.month_term(t) or t in OWN_SKIP)}
    return bool(added) and added <= before


def model_rewrite(writer, msg: str, prev: dict | None) -> tuple[str, str]:
    """One short request to the writer model; its rewrite kept only when keeps() holds,
    else the builtin's (which may be the follow-up as written)."""
    builtin = rewrite(msg, prev)
    writer = models.model_of(writer)            # the model itself, not the line chooser
    if not prev or writer is None:
        return builtin
    prompt = REWRITE_PROMPT.format(prev=prev["question"], answer=prev.get("answer", "")[:400],
                                   msg=msg)
    try:
        text = writer.write(builtin_writer.WriteRequest([{"role": "user", "content": prompt}]),
                            stage="route").text
    except models.BackendError:
        return builtin
    text = " ".join(str(text).split()).strip('"')
    return (text, "model") if keeps(msg, text, prev, _prior_subject(prev)) else builtin

