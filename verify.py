"""verify: every sentence of an answer checked, rules in code first, then a judge.

In:  the answer text, the notes it was written from (numbered c1.. in order), the time
     mode and a judge (line_scores.py or models.py) with .support.
Out: Verdict(verdict "SHIP"|"ESCALATE", sentences, failing, rules_ok, on_question); each
     sentence is a dict {index, sentence, claim, citations, date, numbers, support,
     reasons, ok}. rules_ok: the citation checks passed; on_question: the question-aware
     ones did (both feed the verdict).
Not: rewriting the answer; the harness shows the verdict and the failing sentences.

Code checks per sentence: every cited id exists; every number (shown with its unit or
% sign, compared normalised: "1,550" == "1550") appears in a note it cites (its text,
section, path or date), an amount in a currency the note gives it in ("£880" fails
where the note says only "€880"), and so does every capitalised name (person, product, place)
and every day written in full (a cited note's date, a day its text states, or inside
what its time words were resolved to);
an "On 2026-04-03:" prefix names the date of a cited note (or one the sentence itself
states: a dated table row); a
factual sentence has a citation; in present mode no sentence cites an older version of
a document when a newer version that answers (relevance >= threshold, or unjudged) is
among the notes, and no sentence is contradicted by a newer dated note of another
document that restates its topic with other values (numbers or names; the writer's
"; this replaces ..." clause is not checked as a claim). An older version whose newer
version does not answer may be cited: version.settle kept it because it is the only
one that answers.
Then one batched judge.support call over the cited sentences. The abstain sentence
alone ships without checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from verso import asof
from verso import dating
from verso import generate
from verso import models
from verso import textkit
from verso import line_scores
from verso import builtin_writer
from verso import rerank
from verso import version

SUPPORT_THRESHOLD = 0.5
ANSWER_THRESHOLD = rerank.RELEVANCE_THRESHOLD   # a newer note "answers" from here up
CONFLICT_COVERAGE = 0.6    # newer unit naming this share of the sentence's terms
CURRENCIES = "\u00a3$\u20ac"   # £ $ €: a symbol written before an amount
NUMBER_SHOWN_RE = re.compile(rf"[{CURRENCIES}]?\d+(?:[.,]\d+)*(?:\s?%|/\w+)?")
MIN_TOPIC_SHARE = 0.2      # a sentence names at least this share of the question's topic
BARE_WORDS = 2             # a bare answer: its value and at most a unit or a month word
META_TERMS = frozenset("""note according based here following summary found answer sure
hope help let know notes say says said""".split())


@dataclass
class Verdict:
    verdict: str                                   # "SHIP" | "ESCALATE"
    sentences: list = field(default_factory=list)
    failing: list = field(default_factory=list)    # the sentence dicts with reasons
    rules_ok: bool = True          # every citation check passed: each cited sentence's
                                   # numbers, names and dates stand in its cited notes
    on_question: bool = True       # the question-aware checks passed (_off_question)


def _numbers_shown(body: str) -> list[tuple[str, str]]:
    """(as written, normalised key) for each number: ("£1,550/day", "1550")."""
    return [(m.group().strip(), textkit.number_key(n))
            for m in NUMBER_SHOWN_RE.finditer(body) for n in textkit.numbers(m.group())]


def _factual(body: str) -> bool:
    if body.rstrip().endswith(":") or generate.is_abstain(body):
        return False     # a lead-in, or the notes lack it ("The notes do not say ...")
    return bool(textkit.numbers(body)) or any(t not in META_TERMS for t in textkit.terms(body))


def _answers(c) -> bool:
    """Judged relevant; unjudged (--no-rerank) counts unless version.apply pulled it in."""
    if c.relevance is None:
        return c.added_by != "version"
    return c.relevance >= ANSWER_THRESHOLD


def _newer(m, c) -> bool:
    if m.is_latest and not c.is_latest:
        return True
    dated = builtin_writer.UNDATED not in (m.date, c.date)
    return dated and m.date > c.date


def _same_document(m, c) -> bool:
    fam = c.chunk.get("family")
    if fam and m.chunk.get("family") == fam:
        return True
    return bool(c.superseded_by) and m.path == re.split(r" @ |#", c.superseded_by)[0]


def _superseded_file(c) -> bool:
    """A newer file of c's own family exists (version.py set superseded_by to its path;
    a later entry of the same log is marked "path @ date" instead)."""
    return bool(c.superseded_by) and version.SECTION_MARK not in c.superseded_by


def _stale(cited: list, notes: list, ids: dict) -> list[str]:
    """Present mode: a sentence that cites a superseded version of a document escalates,
    whether or not the newer version was judged to answer, unless the same sentence also
    cites that document's newest version (a statement of what replaced what). An older
    entry of a dated log escalates only when a later entry among the notes answers: a
    log's newest entry is often about something else."""
    out = []
    for c in cited:
        if _superseded_file(c):
            if any(m is not c and _same_document(m, c) and _newer(m, c)
                   and not _superseded_file(m) for m in cited):
                continue
            newer = [m for m in notes if m is not c and _same_document(m, c)
                     and _newer(m, c)]
            out.append(f"cites an older version ({ids[id(c)]}, {c.date}) while a newer one "
                       f"({ids[id(newer[0])]}, {newer[0].date}) is among the notes" if newer
                       else f"cites an older version ({ids[id(c)]}, {c.date}), superseded "
                       f"by {c.superseded_by}")
            continue
        older = (bool(c.superseded_by) or not c.is_latest
                 or c.chunk.get("entry_latest") is False)
        newer = [m for m in notes if m is not c and older and _same_document(m, c)
                 and _newer(m, c) and _answers(m)]
        if newer:
            m = newer[0]
            out.append(f"cites an older version ({ids[id(c)]}, {c.date}) while a newer "
                       f"one ({ids[id(m)]}, {m.date}) is among the notes")
    return out


def _newer_conflict(body: str, cited: list, notes: list, ids: dict) -> list:
    """A newer dated note (another document, judged to answer) has a line on the same
    topic (CONFLICT_COVERAGE of the sentence's words other than its values) that states
    values (numbers, names), none of them the sentence's."""
    values = builtin_writer.values(body)
    words = {t for t in textkit.terms(body) if not t[0].isdigit()} - META_TERMS - values
    dates = [c.date for c in cited if c.date != builtin_writer.UNDATED]
    if not values or not words or not dates:
        return []
    for m in notes:
        if any(m is c for c in cited) or m.date == builtin_writer.UNDATED or m.date <= max(dates):
            continue
        if not _answers(m) or any(_same_document(m, c) for c in cited):
            continue  # the same document's newer version is the stale rule's case
        for unit in textkit.split_units(m.chunk.get("text", "")):
            theirs = builtin_writer.values(unit)
            share = len(words & set(textkit.terms(unit))) / len(words)
            if theirs and not theirs & values and share >= CONFLICT_COVERAGE:
                return [f"a newer note ({ids[id(m)]}, {m.date}) states otherwise: "
                        f"\"{unit}\""]
    return []


def _own_clause(body: str) -> str:
    """The sentence without the writer's "; this replaces ..." clause naming the older
    statement it supersedes (that clause cites the older note on purpose)."""
    return body.split(builtin_writer.REPLACES.split("{")[0])[0]


def _injected(body: str, shown: list, cited: list, ids: dict) -> list[str]:
    """A sentence that carries a number or the words of an instruction addressed to the
    assistant inside a cited note (prompt injection) is not a fact the notes state."""
    out = []
    for c in cited:
        for line in textkit.sentences(c.chunk.get("text", "")):
            if not textkit.INSTRUCTION_RE.search(line):
                continue
            keys = textkit.number_keys(line)
            if textkit.INSTRUCTION_RE.search(body) or any(k in keys for _, k in shown):
                out.append(f"repeats an instruction planted in {ids[id(c)]}: "
                           f"'{line.strip()[:60]}'")
                break
    return out


def _check_rules(index: int, sentence: str, cites: list, notes: list, mode: str) -> dict:
    ids = {id(c): f"c{i}" for i, c in enumerate(notes, 1)}
    by_id = {f"c{i}": c for i, c in enumerate(notes, 1)}
    date, body = generate.split_date(sentence)
    shown = _numbers_shown(body)
    row = {"index": index, "sentence": sentence, "claim": body, "citations": cites,
           "date": date, "numbers": [s for s, _ in shown], "support": None, "reasons": []}
    reasons = row["reasons"]
    reasons += [f"cites {i}, which is not among the notes" for i in cites if i not in by_id]
    cited = [by_id[i] for i in cites if i in by_id]
    if not cites:
        if _factual(body):
            reasons.append("states a fact without a citation")
        return row
    if cited:
        have = "\n".join(generate.visible(c) for c in cited)
        allowed = textkit.number_keys(have)
        missing = [s for s, k in shown if k not in allowed]
        if missing:
            reasons.append(f"{', '.join(missing)} not in the cited {', '.join(cites)}")
        reasons += _currency_changed(shown, have, cites)
        reasons += _names_missing(body, have, cites)
        reasons += _days_missing(body, have, cited, cites)
        if date and date not in {c.date for c in cited} and date not in body:
            reasons.append(f"dated {date} but {', '.join(cites)} is dated "
                           f"{', '.join(sorted({c.date for c in cited}))}")
        reasons += _injected(body, shown, cited, ids)
        if mode == "present":
            reasons += _stale(cited, notes, ids)
            reasons += _newer_conflict(_own_clause(body), cited, notes, ids)
    return row


def _days_missing(body: str, have: str, cited: list, cites: list) -> list[str]:
    """Dates are checked as numbers are: each day the sentence writes in full (2026-01-09,
    9 January 2026) is a cited note's date, a day its text writes, or inside a day,
    range, month or year its time words were resolved to ("on Friday [2026-01-09]"):
    a model that works out "last Friday" itself and gets it wrong is caught."""
    days = dating.days_in(body)
    if not days:
        return []
    spans = asof.stated(have) + [(d, d) for d in dating.days_in(have)]
    spans += [(c.date, c.date) for c in cited if c.date != builtin_writer.UNDATED]
    wrong = [d for d in dict.fromkeys(days) if not any(lo <= d <= hi for lo, hi in spans)]
    return [f"states {', '.join(wrong)}, a day the cited {', '.join(cites)} "
            f"neither states nor is dated"] if wrong else []


def _currency_changed(shown: list, have: str, cites: list) -> list[str]:
    """An amount written in a currency its cited notes never give it in ("£880" where
    the note says "€880 per day"); one the notes also write bare is let be."""
    given: dict[str, set] = {}           # number key -> the symbols written before it
    for m in NUMBER_SHOWN_RE.finditer(have):
        sym = m.group()[0] if m.group()[0] in CURRENCIES else ""
        for n in textkit.numbers(m.group()):
            given.setdefault(textkit.number_key(n), set()).add(sym)
    out = []
    for s, k in shown:
        if s[0] in CURRENCIES and k in given and s[0] not in given[k] and "" not in given[k]:
            out.append(f"{s}: the cited {', '.join(cites)} give it as "
                       f"{' or '.join(sorted(x + s[1:] for x in given[k]))}")
    return out


def _names_missing(body: str, have: str, cites: list) -> list[str]:
    """Names are checked as numbers are: each capitalised name of the sentence (product,
    place, person, several words or one) stands in a note it cites."""
    shown = generate.NAME_RE.findall(body)
    missing = generate.claim_facts(body)[1] - textkit.evidence_terms(have)
    names = [n for n in shown if set(textkit.terms(n)) & missing]
    if not names:
        return []
    return [f"names {', '.join(dict.fromkeys(names))}, not in the cited {', '.join(cites)}"]


def _judge_support(rows: list, notes: list, judge, ledger) -> None:
    """One batched judge.support call over the cited sentences whose ids all exist."""
    by_id = {f"c{i}": c for i, c in enumerate(notes, 1)}
    claims = {}
    for r in rows:
        if r["citations"] and all(i in by_id for i in r["citations"]) and r["claim"]:
            cited = [by_id[i] for i in r["citations"]]
            claims[f"s{r['index']}"] = {
                "sentence": r["claim"], "sources": [generate.visible(c) for c in cited],
                "private": any(bool(c.chunk.get("private")) for c in cited)}
    if not claims:
        return
    probs = judge.support(claims, stage="verify", ledger=ledger)
    for r in rows:
        key = f"s{r['index']}"
        if key not in claims:
            continue
        if key not in probs:
            raise models.BackendError(f"the judge returned no support for {key}: "
                                      "check the judge backend")
        r["support"] = float(probs[key])
        if r["support"] < SUPPORT_THRESHOLD:
            r["reasons"].append(f"support {r['support']:.2f} < {SUPPORT_THRESHOLD:g}")


def _bare_value(claim: str, ask) -> bool:
    """The sentence is a value of the kind asked and little else ("£3,840", "On 2
    December at 10:30"): the question says what it is about, not the sentence."""
    words = [t for t in textkit.terms(claim) if not t[0].isdigit()]
    return bool(ask.kinds) and len(words) <= BARE_WORDS and line_scores.holds(claim, ask.kinds) > 0


def _leading_name(row: dict, by_id: dict, kinds) -> bool:
    """A name asked for stands first in the sentence ("Hannah is my physio."): its first
    word is one a cited note writes as a name (capitalised inside a sentence)."""
    first = re.match(r"[^\W\d_][\w'\u2019-]*", row["claim"])
    if "name" not in kinds or not first:
        return False
    cited = " ".join(generate.visible(by_id[i]) for i in row["citations"] if i in by_id)
    return first.group() in line_scores.VALUE_RES["name"].findall(cited)


def _off_question(rows: list, notes: list, question: str) -> None:
    """Question-aware checks: a cited sentence that names (with its note's section)
    under MIN_TOPIC_SHARE of the question's topic terms is off-topic; an answer to
    "how much / when / who ..." holding no value of that kind does not answer; the
    notes an answer cites name the role or attribute asked about (models focus_terms)."""
    ask = line_scores.analyse(question)
    by_id = {f"c{i}": c for i, c in enumerate(notes, 1)}
    weights = {t: 1.0 for t in ask.terms}
    cited = [r for r in rows if r["citations"]]
    for r in cited:
        heads = " ".join(by_id[i].chunk.get("heading", "") for i in r["citations"]
                         if i in by_id)
        if _bare_value(r["claim"], ask):    # "£3,840 [c2]": about what its note is about
            heads += " " + " ".join(generate.visible(by_id[i]) for i in r["citations"]
                                    if i in by_id)
        found = textkit.evidence_terms(f"{r['claim']} {heads}")
        if weights and line_scores.term_share(weights, found) < MIN_TOPIC_SHARE:
            r["reasons"].append("names nothing the question asks about")
    if ask.kinds and cited and not any(line_scores.holds(r["claim"], ask.kinds)
                                       or _leading_name(r, by_id, ask.kinds) for r in cited):
        cited[0]["reasons"].append(f"holds no value of the kind asked "
                                   f"({', '.join(sorted(ask.kinds))})")
    ids = list(dict.fromkeys(i for r in cited for i in r["citations"] if i in by_id))
    if not ids:
        return
    tset = textkit.evidence_terms(" ".join(generate.visible(by_id[i]) for i in ids))
    lacking = [t for t in ask.focus if not line_scores.term_share({t: 1.0}, tset)]
    if lacking:
        cited[0]["reasons"].append(f"the cited {', '.join(ids)} never name "
                                   f"{', '.join(lacking)}, which the question asks about")


def verify(text: str, notes: list, time_mode: str, judge, ledger=None,
           question: str | None = None, repairs=()) -> Verdict:
    """SHIP when every sentence passes the code checks and the judge, else ESCALATE.
    With the question, also the question-aware checks (_off_question). `repairs` (the
    Draft's) puts each citation repair's note on its sentence's row ("repair")."""
    text = (text or "").strip()
    if generate.is_abstain(text):
        row = {"index": 1, "sentence": generate.ABSTAIN, "claim": generate.ABSTAIN,
               "citations": [], "date": None, "numbers": [], "support": None,
               "reasons": [], "ok": True, "abstain": True}
        return Verdict("SHIP", [row], [], True)
    rows = [_check_rules(i, s, ids, notes, time_mode)
            for i, (s, ids) in enumerate(generate.parse_citations(text), 1)]
    for fix in repairs:
        if 0 < fix["index"] <= len(rows):
            rows[fix["index"] - 1]["repair"] = fix["note"]
    if not rows:
        rows = [{"index": 1, "sentence": "", "claim": "", "citations": [], "date": None,
                 "numbers": [], "support": None, "reasons": ["the answer is empty"]}]
    for r in rows[generate.MAX_SENTENCES:]:
        r["reasons"].append(f"beyond the {generate.MAX_SENTENCES}-sentence limit")
    rules_ok = not any(r["reasons"] for r in rows)
    if question:
        before = sum(len(r["reasons"]) for r in rows)
        _off_question(rows, notes, question)
        on_question = sum(len(r["reasons"]) for r in rows) == before
    else:
        on_question = True
    _judge_support(rows, notes, judge, ledger)
    for r in rows:
        r["ok"] = not r["reasons"]
    failing = [r for r in rows if not r["ok"]]
    return Verdict("ESCALATE" if failing else "SHIP", rows, failing, rules_ok, on_question)
