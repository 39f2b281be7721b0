"""route: one message -> intent and time mode, by rules.

In:  the user's message.
Out: {"intent": "notes"|"small_talk"|"live_data",
      "time_mode": "present"|"history"|"any"|"as_of", "as_of": asof.phrase's spec or None,
      "confidence": float (of the intent), "time_confidence": float,
      "time_cue": bool (the message names its time: a change, present or time word, a
      date, a past tense or an event; False: the mode is the rules' default or none),
      "why": the time rule and the cue it matched,
      "needs_retrieval": bool}.
Not: retrieval or answering (the harness acts on the decision); no model is asked.

Time mode rules, first match wins:
  1. change words (changed, over time, used to, originally, history, from 500 to 550,
     a verb of change after "did"/"has"/"have" with a thing as subject: "how did the
     quote change", "has the price moved" ...) -> history;
  2. present words (current, now, latest, still, these days, as of today ...) -> present;
  2b. two points in time joined (in March and in May, between June and October, from
     2025 to 2026: asof.joined_points) -> history, every version in the span;
  2b'. a question about a period (what happened / what did I do, write, note, discuss
     ... on 5 January, in March, last week: asof.period) -> any: everything dated in
     the period is evidence, not one version of it (retrieve.py restricts to it);
  2c. a point in time (in June, as of 1 May, before September, at the start of the
     year, last autumn, back in 2025, early 2026: asof.phrase) -> as_of, the version in
     force on that date;
  3. a date, a month, a past tense or an event lookup ("what did", "when was",
     "last week", "in April", "as of 2026-05") -> any;
  4. DEFAULT: any other question ("what is", "what's", "how much", "where does",
     "which ... do", "who is"; past tense was ruled out by 3) -> present, because a
     plain question about a fact that changed ("What is Maren's day rate?") expects
     today's value, and present mode only sets a version aside when a newer one answers;
  5. anything else (imperatives, fragments) -> any.
"""

from __future__ import annotations

import re

from verso import asof
from verso import textkit
from verso import timewords
from verso.textkit import one_of

SMALL_TALK_RE = re.compile(
    r"\b(?:hi|hello|hey|hiya|howdy|yo|good (?:morning|afternoon|evening|night)|"
    r"thanks?(?: you)?(?: (?:so|very) much| a lot)?|thx|ty|cheers|ok(?:ay)?|cool|great|"
    r"nice|awesome|perfect|bye|goodbye|see you(?: later)?|how are you(?: doing)?|"
    r"how's it going|how is it going|what's up|whats up|sup|who are you|are you there)\b")
LEADING_SMALL_TALK_RE = re.compile(r"^(?:" + SMALL_TALK_RE.pattern + r"[\s,.!]*)+")
SMALL_TALK_FILLER = frozenset("verso there again today all buddy mate friend so very "
                              "much a lot and oh well".split())
LIVE_DATA_RE = re.compile(
    r"\b(?:weather|forecast|temperature outside|stock price|share price|stock market|"
    r"exchange rate|fx rate|bitcoin|btc|ethereum|crypto|headlines|news|live score|"
    r"(?:match|game) score|score (?:of|in) the|who won|traffic|flight status|"
    r"what time is it|today's date)\b")
NOTES_CUE_RE = re.compile(
    r"\b(?:notes?|plan|budget|meeting|project|handover|doc|file|vault|assum\w*|"
    r"we (?:agreed|decided|used|assumed|said)|did (?:i|we)|my notes)\b")
# a verb of change after "did", "has" or "have" with a thing as its subject: "how did
# the quote change", "has the price moved", "how many times has the date shifted" (not
# "where did I move", a person moving)
CHANGE_VERB = (r"(?:chang|shift|mov|ris|rose|fall|fell|grow|grew|drop|increas|decreas|"
               r"evolv|var(?:y|i)|develop)(?:e|es|ed|ing|s|n|ped)?")   # "dropped": drop+ped
# not after a person: "we have moved" is someone moving
NOT_AFTER_PERSON = "".join(rf"(?<!\b{p} )" for p in textkit.SUBJECT_PRONOUNS)
HISTORY_STRONG_RE = re.compile(
    rf"\b(?:{one_of(timewords.CHANGE_WORDS)}|progression|progress|how (?:has|have)|"
    rf"(?:did|has|have)\s+(?!{one_of(textkit.SUBJECT_PRONOUNS)}\s)(?:[\w'-]+\s+){{1,6}}?"
    rf"{CHANGE_VERB}|{NOT_AFTER_PERSON}(?:has|have)\s+{CHANGE_VERB}|"
    r"each version|every version|all versions|timeline|"
    r"over the (?:\w+ )?(?:weeks?|months?|years?)|"
    r"(?:went|gone|go|moved|rose|fell|increased|decreased|dropped|jumped|grew) from|"
    r"from [\u00a3$\u20ac]?\d\S* to [\u00a3$\u20ac]?\d)\b")
# route's own words beside timewords' vocabularies: weak change cues (nouns of change),
# the newest by another name, and what a question asks of an event
CHANGE_NOUNS = ("change", "trend", "since when")
PRESENT_ALSO = ("final", "up to date", "up-to-date", "as of this week", "as of this month",
                "as of this year")
EVENT_VERBS = ("happened", "decided", "agreed", "said")
HISTORY_WEAK_RE = re.compile(rf"\b{one_of(CHANGE_NOUNS + timewords.EARLIER_WORDS)}\b")
PRESENT_RE = re.compile(
    rf"\b{one_of(timewords.NOW_WORDS + timewords.LATEST_WORDS + PRESENT_ALSO)}\b")
PAST_OR_EVENT_RE = re.compile(
    rf"\b(?:{one_of(timewords.PAST_WORDS + EVENT_VERBS)}|last (?:week|month|year|time)|"
    rf"yesterday|ago|as of|(?:on|in) {textkit.MONTH_WORD}|"
    r"\d{4}-\d{2}(?:-\d{2})?|(?:19|20)\d{2})\b")
PRESENT_QUESTION_RE = re.compile(  # past and event cues were ruled out before this
    r"^(?:what|whats|which|who|whose|where|how|when(?:'s| is| are| does| do)|"
    r"is|are|does|do|has|have|can|should)\b")
STRONG, WEAK, DEFAULT, LOW = 0.9, 0.7, 0.6, 0.5
TIME_RULES = ((HISTORY_STRONG_RE, "history", STRONG, "change words"),   # first match wins
              (PRESENT_RE, "present", STRONG, "present words"),
              (HISTORY_WEAK_RE, "history", WEAK, "weak change words"),
              (PAST_OR_EVENT_RE, "any", WEAK, "a date, past tense or event"),
              (PRESENT_QUESTION_RE, "present", DEFAULT, "a plain question (default)"))
AS_OF_AFTER = 2          # the as-of rule comes after change words and present words


def _norm(message: str) -> str:
    return " ".join(message.replace("\u2019", "'").lower().split())


def _intent(msg: str) -> tuple[str, float]:
    if SMALL_TALK_RE.search(msg):  # small talk only when nothing else is asked
        rest = re.sub(r"[^\w' ]", " ", SMALL_TALK_RE.sub(" ", msg)).split()
        if all(w in SMALL_TALK_FILLER for w in rest):
            return "small_talk", STRONG
    if LIVE_DATA_RE.search(msg):
        return ("notes", DEFAULT) if NOTES_CUE_RE.search(msg) else ("live_data", STRONG)
    return "notes", STRONG if "?" in msg or len(msg.split()) > 2 else DEFAULT


def _time_mode(msg: str, date_order: str = "ymd") -> tuple[str, float, str, dict | None]:
    """(mode, confidence, why, as-of spec): the first rule whose cue matches, the cue."""
    for i, (regex, mode, conf, rule) in enumerate(TIME_RULES):
        if i == AS_OF_AFTER and (pair := asof.joined_points(msg)):
            return "history", WEAK, f"two points in time {' and '.join(pair)!r}", None
        if i == AS_OF_AFTER and (span := asof.period(msg, asof.ANY_DAY, date_order)):
            return "any", WEAK, f"a period {span['text']!r}", None
        if i == AS_OF_AFTER and (spec := asof.phrase(msg, date_order)):
            return "as_of", WEAK, f"a point in time {spec['text']!r}", spec
        m = regex.search(msg)
        if m:
            return mode, conf, f"{rule} {m.group().strip()!r}", None
    return "any", LOW, "no time cue", None


def route(message: str, date_order: str = "ymd") -> dict:
    """Intent and time mode; retrieval when the intent is notes (the rules name another
    intent only on a strong cue). Rules call no model, so nothing is recorded. A date in
    digits is read in the vault's date_order (asof.phrase)."""
    msg = _norm(message)
    intent, conf = _intent(msg)
    mode, tconf, why, spec = _time_mode(LEADING_SMALL_TALK_RE.sub("", msg), date_order)
    return {"intent": intent, "time_mode": mode, "as_of": spec, "confidence": float(conf),
            "time_confidence": float(tconf), "time_cue": tconf > DEFAULT, "why": why,
            "needs_retrieval": intent == "notes"}
