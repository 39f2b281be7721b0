"""wordforms: the other forms of a verb a question names, for retrieval to look for too.

In:  an index term (textkit.terms: lowercase, plural folded).
Out: the forms of the same verb: "buy" -> bought, buying, buys; "filled" -> fill,
     filling; "swim" -> swam, swum, swimming. Retrieval (retrieve.bm25_ranking) adds those
     the vault holds to the question's terms.
Not: a stemmer for the index (terms stay as written: the reader and the judge read
     them), a thesaurus ("dentist" is not "tooth"), or any guess from the topic.

Why: people ask in the present and write in the past. "When did I buy the boat?" is
answered by "Bought a boat", "When did I last swim in the sea?" by "swam out to the
buoy"; a question's "buy" and a note's "bought" share no term, so BM25 never matched
them.

Rules, decided by code:
- An irregular verb (IRREGULAR: base, past, participle, the common English ones) is one
  family: any of its forms names every other, and its -ing and -s forms.
- A regular verb: the base names base+ed / +d, +ing (a final e dropped), y -> ied, and
  the doubled final consonant of a short base ("stop" -> stopped, stopping). A term
  ending in -ed (5 letters or more) names the bases it can come from (filled -> fill,
  moved -> move, carried -> carry, stopped -> stop) and their forms. A term ending in
  -ing names nothing back: too many nouns end so (evening, morning, ceiling).
- Only forms the vault holds are used (the caller checks its vocabulary), so a form
  the rules over-generate ("bed" -> "b") finds nothing.
"""

from __future__ import annotations

import functools

from verso.textkit import stem

# base past participle ("-" when the participle is the past): the common irregular
# verbs, but those a stopword covers (be, do, have) and those whose forms are common
# words of their own (bear, grind "ground", lie "lay", light, spring, wind "wound")
IRREGULAR = """
arise arose arisen; awake awoke awoken; beat beat beaten;
become became become; begin began begun; bend bent -; bet bet -; bind bound -;
bite bit bitten; bleed bled -; blow blew blown; break broke broken; breed bred -;
bring brought -; build built -; burn burnt -; burst burst -; buy bought -; catch caught -;
choose chose chosen; cling clung -; come came come; cost cost -; creep crept -;
cut cut -; deal dealt -; dig dug -; draw drew drawn; dream dreamt -;
drink drank drunk; drive drove driven; eat ate eaten; fall fell fallen; feed fed -;
feel felt -; fight fought -; find found -; flee fled -; fly flew flown;
forbid forbade forbidden; forget forgot forgotten; forgive forgave forgiven;
freeze froze frozen; get got gotten; give gave given; go went gone;
grow grew grown; hang hung -; hear heard -; hide hid hidden; hit hit -;
hold held -; hurt hurt -; keep kept -; kneel knelt -; know knew known; lay laid -;
lead led -; lean leant -; leap leapt -; learn learnt -; leave left -; lend lent -;
let let -; lose lost -; make made -; mean meant -;
meet met -; pay paid -; prove proved proven; put put -; quit quit -; read read -;
ride rode ridden; ring rang rung; rise rose risen; run ran run; say said -; see saw seen;
seek sought -; sell sold -; send sent -; set set -; sew sewed sewn; shake shook shaken;
shine shone -; shoot shot -; show showed shown; shrink shrank shrunk; shut shut -;
sing sang sung; sink sank sunk; sit sat -; sleep slept -; slide slid -; speak spoke spoken;
speed sped -; spend spent -; spill spilt -; spin spun -; split split -; spread spread -;
stand stood -; steal stole stolen; stick stuck -; sting stung -;
stink stank stunk; strike struck -; swear swore sworn; sweep swept -; swell swelled swollen;
swim swam swum; swing swung -; take took taken; teach taught -; tear tore torn; tell told -;
think thought -; throw threw thrown; understand understood -; wake woke woken;
wear wore worn; weave wove woven; weep wept -; win won -; write wrote written
"""
MIN_ED = 5            # a shorter word ending in -ed is rarely a past tense (bed, red, fed)
VOWELS = "aeiou"


def _table() -> dict[str, frozenset]:
    """form -> the family (every form) of each irregular verb."""
    out: dict[str, set] = {}
    for entry in IRREGULAR.split(";"):
        base, past, part = entry.split()
        part = past if part == "-" else part
        fam = {base, past, part, *(f for f in _regular(base) if f.endswith(("ing", "s")))}
        for form in fam:
            out.setdefault(form, set()).update(fam)
    return {k: frozenset(v) for k, v in out.items()}


def _doubles(base: str) -> bool:
    """A short base ending consonant-vowel-consonant doubles it: stop, swim, plan."""
    return (len(base) <= 4 and len(base) >= 3 and base[-1] not in VOWELS + "wxy"
            and base[-2] in VOWELS and base[-3] not in VOWELS)


def _regular(base: str) -> set[str]:
    """The regular forms of a base: +ed, +ing, +s as a regular verb makes them."""
    if base.endswith("e"):
        ing = base + "ing" if base.endswith(("ee", "ye", "oe")) else base[:-1] + "ing"
        return {base, base + "d", ing, base + "s"}
    if base.endswith("y") and len(base) > 2 and base[-2] not in VOWELS:
        return {base, base[:-1] + "ied", base + "ing", base[:-1] + "ies"}
    if _doubles(base):
        return {base, base + base[-1] + "ed", base + base[-1] + "ing", base + "s"}
    return {base, base + "ed", base + "ing", base + "s"}


def _bases(term: str) -> set[str]:
    """The bases an -ed form can come from; the term itself otherwise."""
    if len(term) < MIN_ED or not term.endswith("ed"):
        return {term}
    stem = term[:-2]
    out = {stem, term[:-1]}                               # filled -> fill; moved -> move
    if term.endswith("ied"):
        out.add(term[:-3] + "y")                          # carried -> carry
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in VOWELS + "ls":
        out.add(stem[:-1])                                # stopped -> stop
    return out


@functools.lru_cache(maxsize=4096)
def related(term: str) -> frozenset:
    """The other forms of the verb term may be (not term itself); empty for a number
    or a word of two letters that is no irregular verb's form."""
    irregular = _table_once()
    if term in irregular:
        return frozenset({stem(f) for f in irregular[term]} - {term})
    if len(term) < 3 or not term.isalpha():
        return frozenset()
    out: set[str] = set()
    for base in _bases(term):
        out |= irregular.get(base, _regular(base))
    return frozenset({stem(f) for f in out} - {term})


@functools.lru_cache(maxsize=1)
def _table_once() -> dict[str, frozenset]:
    return _table()
