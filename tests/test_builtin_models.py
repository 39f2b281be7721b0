"""BuiltinJudge (relevance, support, choose) and BuiltinWriter on hand-worked notes."""

import math

import pytest

import models
from generate import ABSTAIN, build_messages
from retrieve import Candidate


def cand(i, path, text, date="2026-06-01", heading="", family=None, latest=True, **kw):
    chunk = {"id": i, "path": path, "heading": heading, "section_date": None,
             "date": date, "date_source": "filename", "family": family or path,
             "is_latest": latest, "entry_latest": None, "private": False, "text": text}
    return Candidate(chunk=chunk, **kw)


def write(question, notes, mode):
    text, inp, out = models.BuiltinWriter().write(build_messages(question, notes, mode))
    assert inp > 0 and out > 0
    return text


# ------------------------------------------------------------------------ helpers

def test_number_key_and_units():
    assert models.number_key("04") == "4"
    assert models.number_key("550.00") == "550"
    assert models.number_key("0.50") == "0.5"
    assert models.number_keys("£1,550/day and 91.3%") == {"1550", "91.3"}
    units = models.split_units("## Rates\n- Day rate: £550.\nMentor: Dr. Rao. He is kind.")
    assert units == ["Day rate: £550.", "Mentor: Dr. Rao.", "He is kind."]


def test_query_terms_drop_time_framing():
    assert models.query_terms("What is Maren's current day rate these days?") == [
        "maren", "day", "rate"]
    assert models.query_terms("How has the rate changed over time?") == ["rate"]
    assert models.query_terms("Who's my physio?") == ["who", "physio"]
    assert models.query_terms("When is the go-live?") == ["when", "live"]


def test_answer_type_words_are_answered_by_values():
    def kinds(text):
        return models.evidence_terms(text) & set(models.ANSWER_TYPES)
    assert {"much", "price", "fee"} <= kinds("Retainer: £3,350 per month.")
    assert "time" in kinds("A goal: 3:44:00.") and "time" not in kinds("A goal: sub four.")
    assert "who" in kinds("Appointment with Hannah on Thursday.")
    assert "who" not in kinds("See you on Thursday in May.")
    assert "when" in kinds("Flight moved to 21 November.")
    assert "percent" in kinds("Charities: 15% off.")


def test_idf_weights_hand_worked():
    docs = [{"pay", "rent"}, {"retainer"}]
    w = models.idf_weights(["paying", "pension", "retainer", "much"], docs)
    assert w["paying"] == models.ABSENT_VERB_WEIGHT       # only "pay" in the docs
    assert w["much"] == models.ANSWER_WORD_WEIGHT
    assert abs(w["pension"] - (math.log(1 + 3 / 1) + models.IDF_FLOOR)) < 1e-9   # df 0
    assert abs(w["retainer"] - (math.log(1 + 3 / 2) + models.IDF_FLOOR)) < 1e-9  # df 1
    assert models.idf_weights(["pension"], docs, absent=1.0) == {"pension": 1.0}


def test_keyed_value_after_an_asked_term():
    assert models._keyed(["goal"], "A goal: 3:44:00 at halfway")
    assert not models._keyed(["goal"], "The goal of the long slow runs was 3 weeks away")


# -------------------------------------------------------------------------- judge

PASSAGES = {
    "answer": {"text": "Maren's day rate is £550 from October.", "heading": "Rates",
               "path": "work/rates.md", "date": "2026-10-05", "dense_score": 0.5},
    "mention": {"text": "Ask Maren about her day rate before the next invoice.",
                "heading": "", "path": "journal/2026-09-06.md", "date": "2026-09-06",
                "dense_score": 0.5},
    "offtopic": {"text": "The flat in Lisbon has two bedrooms and a balcony.",
                 "heading": "", "path": "move/flat.md", "date": "2026-07-20",
                 "dense_score": 0.1},
}


def test_relevance_ranks_answer_above_mention_above_offtopic():
    ledger = models.Ledger()
    p = models.BuiltinJudge().relevance("What is Maren's day rate?", PASSAGES,
                                        ledger=ledger)
    assert p["answer"] > 0.8 > p["mention"] > p["offtopic"]
    assert p["offtopic"] < 0.1
    assert ledger.rows[0]["stage"] == "rerank"
    assert ledger.rows[0]["model"] == "builtin-judge-v1"
    assert ledger.rows[0]["input_tokens"] > 0 and ledger.rows[0]["dollars"] == 0.0
    assert len(ledger.rows) == 1


def test_relevance_hand_worked_logistic():
    # one passage, every feature known: coverage 1, states 1, phrase 1 (one pair),
    # numbers 0 (none asked), heading 0, focus 1 (its one unit), dense 0.35 - 0.35 = 0
    passages = {"p1": {"text": "Day rate: 550.", "heading": "", "path": "x.md",
                       "date": "2026-01-01", "dense_score": 0.35}}
    p = models.BuiltinJudge().relevance("day rate", passages)["p1"]
    w = models.REL_WEIGHTS
    z = models.REL_BIAS + w["coverage"] + w["states"] + w["phrase"] + w["focus"]
    assert abs(p - 1 / (1 + 2.718281828459045 ** -z)) < 1e-9


def test_relevance_numbers_in_query_must_match():
    passages = {"a": {"text": "Invoice 1042 was paid on time.", "path": "a.md"},
                "b": {"text": "Invoice 1043 was paid on time.", "path": "b.md"}}
    p = models.BuiltinJudge().relevance("Was invoice 1,042 paid?", passages)
    assert p["a"] > p["b"]


def test_relevance_unanswerable_term_stays_low():
    p = models.BuiltinJudge().relevance("What is Maren's pension?", PASSAGES)
    assert max(p.values()) < 0.5


def test_relevance_accepts_an_idf_table():
    passages = {"a": {"text": "Maren is a designer."}, "b": {"text": "The rate is 550."}}
    heavy_rate = models.BuiltinJudge().relevance("Maren rate", passages,
                                                 idf={"maren": 0.1, "rate": 5.0})
    assert heavy_rate["b"] > heavy_rate["a"]


def test_support_terms_and_every_number():
    src = ["Day rate: 1550 (Maren)"]
    claims = {
        "ok": {"sentence": "Maren's day rate is £1,550", "sources": src},
        "badnum": {"sentence": "Maren's day rate is £1,600", "sources": src},
        "halfnum": {"sentence": "Rate 1550 then 1600", "sources": ["Rate 1550."]},
        "offtopic": {"sentence": "The flat has a balcony", "sources": ["Day rate: 1550"]},
    }
    ledger = models.Ledger()
    s = models.BuiltinJudge().support(claims, ledger=ledger)
    assert s["ok"] > 0.9
    assert s["badnum"] < 0.2 and s["halfnum"] < 0.5 and s["offtopic"] < 0.1
    assert ledger.rows[0]["stage"] == "verify" and len(ledger.rows) == 1


def test_choose_softmax_over_overlap():
    options = {"notes": "a question about facts in my notes: rates, plans, people",
               "small_talk": "a greeting or thanks: hi, hello, thanks, how are you"}
    choice, conf, probs = models.BuiltinJudge().choose("hello, how are you?", options)
    assert choice == "small_talk" and conf == probs["small_talk"] > 0.9
    assert abs(sum(probs.values()) - 1) < 1e-9
    choice, conf, probs = models.BuiltinJudge().choose("zzz", options)
    assert choice == "notes" and conf == 0.5   # no overlap: uniform, first option


# ------------------------------------------------------------------------- writer

PLAN = cand(1, "work/kittiwake retainer_2026-06.md",
            "Kittiwake retainer plan.\nMaren's day rate is £550 for the retainer.\n"
            "Reviews happen quarterly.", date="2026-06-01", family="work/kittiwake retainer")
CORRECTION = cand(2, "work/2026-09-14 Kittiwake call.md",
                  "Notes from the call with Ana.\nCorrection: Maren's rate is now £600 "
                  "from October.", date="2026-09-14")
OLDER = cand(3, "work/2026-04-03 kittiwake retainer.md",
             "Maren's day rate is £500 for the retainer.", date="2026-04-03",
             family="work/kittiwake retainer", latest=False,
             superseded_by="work/kittiwake retainer_2026-06.md")


def test_writer_present_newest_note_wins_across_documents():
    text = write("What is Maren's day rate?", [PLAN, CORRECTION, OLDER], "present")
    assert text == "Correction: Maren's rate is now £600 from October [c2]."


def test_writer_present_never_states_older_version():
    text = write("What is Maren's day rate?", [OLDER, PLAN], "present")
    assert text == "Maren's day rate is £550 for the retainer [c2]."
    assert "500" not in text


def test_writer_any_mode_takes_the_best_scoring_unit():
    text = write("What is Maren's day rate for the retainer?", [PLAN, CORRECTION], "any")
    assert text.startswith("Maren's day rate is £550 for the retainer [c1].")


def test_writer_history_one_sentence_per_version_in_date_order():
    text = write("How has Maren's day rate changed?", [PLAN, CORRECTION, OLDER], "history")
    assert text == ("On 2026-04-03: Maren's day rate is £500 for the retainer [c3]. "
                    "On 2026-06-01: Maren's day rate is £550 for the retainer [c1]. "
                    "On 2026-09-14: Correction: Maren's rate is now £600 from October [c2].")


def test_writer_abstains_without_evidence():
    assert write("What is Maren's pension?", [PLAN, CORRECTION], "present") == ABSTAIN
    assert write("What is Maren's day rate?", [], "present") == ABSTAIN
    mention = cand(4, "journal/x.md", "Ask Maren about her day rate next week.")
    assert write("What is Maren's day rate?", [mention], "present") == ABSTAIN


def test_writer_adds_a_second_note_for_a_second_part():
    manager = cand(5, "people/Maren.md", "Maren's manager is Tomas Reid.", date="2026-02-01")
    text = write("What is Maren's day rate and who is her manager?", [PLAN, manager], "present")
    assert "£550" in text and "[c1]" in text and "Tomas Reid [c2]" in text


def test_writer_how_much_needs_an_amount():
    older = cand(6, "work/kw.md", "Invoicing on the 1st of the month, 14 days to pay.\n"
                 "Retainer: £3,350 per month.", heading="Kittiwake retainer")
    text = write("How much is Kittiwake paying me a month?", [older], "present")
    assert text == "Retainer: £3,350 per month [c1]."


def test_writer_who_wants_a_name():
    budget = cand(7, "finance/budget.md", "Running (kit, races, physio): 85 a month.",
                  date="2026-05-14")
    physio = cand(8, "health/physio notes.md",
                  "Appointment with Hannah at the physio clinic on Thursday.", date="2026-07-09")
    diary = cand(9, "training/log.md", "Achilles grumbly, so physio on Thursday.",
                 date="2026-07-11")
    text = write("Who's my physio?", [physio, budget, diary], "present")
    assert text == "Appointment with Hannah at the physio clinic on Thursday [c1]."


def test_writer_caps_at_five_sentences():
    notes = [cand(i, f"log/{i}.md", f"Maren's day rate is £{500 + i}.", date=f"2026-0{i}-01")
             for i in range(1, 8)]
    text = write("How has Maren's day rate changed?", notes, "history")
    assert text.count("[c") == 5
    assert text.startswith("On 2026-01-01") and "On 2026-07-01" in text


def test_parse_prompt_round_trip():
    msgs = build_messages("What is the rate?", [PLAN, OLDER], "present")
    q, mode, notes = models.parse_prompt(msgs[-1]["content"])
    assert (q, mode) == ("What is the rate?", "present")
    assert [n["id"] for n in notes] == ["c1", "c2"]
    assert notes[1]["status"].startswith("older version, superseded by")
    assert notes[1]["date"] == "2026-04-03" and "£500" in notes[1]["text"]


# ------------------------------------------------------ focus, qualifiers, corpus idf

def test_question_focus_is_the_phrase_the_wh_word_asks_about():
    assert models.question_focus("Which bank is my Portuguese account with?") == ["bank"]
    assert models.question_focus("What's Maren's day rate?") == ["day", "rate"]
    assert models.question_focus("What's the name of my dentist?") == ["dentist"]
    assert models.question_focus("How long is my apartment contract for?") == [
        "apartment", "contract"]
    assert models.question_focus("How many reps did she do?") == ["rep"]
    assert models.question_focus("How much do I save each month?") == []   # no noun asked
    assert models.question_focus("who's my physio") == []


def test_possessive_names_qualify_and_weigh_half():
    assert models.qualifier_terms("What's Maren's day rate?") == {"maren"}
    assert models.qualifier_terms("Is Maren flying?") == set()
    docs = [{"rate"}, {"maren"}]
    w = models.idf_weights(["maren", "rate"], docs)
    wq = models.idf_weights(["maren", "rate"], docs, qualifiers={"maren"})
    assert wq["maren"] == pytest.approx(models.QUALIFIER_WEIGHT * w["maren"])
    assert wq["rate"] == w["rate"]


def test_corpus_idf_of_a_word_family():
    idf = {"pay": 1.0, "payment": 3.0, "rate": 2.0, "zebra": 5.0}
    docs = [{"pay", "paying", "rate"}]
    w = models.idf_weights(["paying", "rate", "pension"], docs, idf=idf)
    assert w["paying"] == pytest.approx(1.0 + models.IDF_FLOOR)   # as common as "pay"
    assert w["rate"] == pytest.approx(2.0 + models.IDF_FLOOR)
    assert w["pension"] == pytest.approx(5.0 + models.IDF_FLOOR)  # nowhere: the rarest


def test_match_ignores_a_silent_e():
    assert models._match("moving", {"move"}) == models.PARTIAL_CREDIT
    assert models._match("moving", {"mow"}) == 0.0


def test_focus_boost_in_the_judge():
    passages = {"bank": {"text": "Bank: the account is with Banco Norte.", "path": "a.md"},
                "other": {"text": "The Portuguese account fee is 4.50.", "path": "b.md"}}
    p = models.BuiltinJudge().relevance("Which bank is my Portuguese account with?",
                                        passages)
    assert p["bank"] > p["other"]


def test_writer_needs_the_focus_and_a_specific():
    shoes = cand(1, "training/log.md", "Changing shoes two weeks out was scary but right.\n"
                 "Swapped race shoes: racing in the Pacewell Tempo X now.", date="2026-09-20")
    kit = cand(2, "training/kit.md", "Race kit: racing socks and a cap.", date="2026-10-01")
    text = write("Which shoes am I racing in?", [shoes, kit], "any")
    assert text == "Swapped race shoes: racing in the Pacewell Tempo X now [c1]."


def test_writer_present_cuts_the_contrast_clause():
    note = cand(1, "training/log.md", "Swapped race shoes: racing in the Pacewell Tempo X now "
                "instead of the Asterra Cloudline 4.", date="2026-09-20")
    q = "Which shoes am I racing in?"
    assert write(q, [note], "present") == (
        "Swapped race shoes: racing in the Pacewell Tempo X now [c1].")
    assert "Asterra" in write(q, [note], "any")


# ------------------------------------------------------------------ history (round 2)

def test_family_is_the_version_that_supersedes():
    assert models._family({"path": "a/plan v1.md", "status":
                           "older version, superseded by a/plan final.md"}) == "a/plan final.md"
    assert models._family({"path": "log.md", "status":
                           "older entry, superseded by log.md @ 2026-05-02"}) == "log.md"
    assert models._family({"path": "a/plan final.md", "status": "latest"}) == "a/plan final.md"


def _unit(text, note="c1"):
    return models._Unit({"id": note}, text, 0.5, True, True, frozenset())


def test_changed_line_hand_worked():
    other = [_unit("Status: documents ready, booked for 16 June."),
             _unit("Goal time: 3:58 for the race.")]
    assert models._changed(_unit("Status: not started."), other) == 1.0   # same key, new value
    assert models._changed(_unit("Goal time: 3:58 for the race."), other) == 0.0  # nothing new
    # no shared key: Jaccard of the words {revising, goal} and {goal, time, race} = 1/4
    assert models._changed(_unit("Revising the goal to 3:49."), other) == pytest.approx(0.25)
    assert models._changed(_unit("Status: not started."), []) == 0.0


V1 = cand(1, "move/plan v1.md", "Read up on the visa status rules.\nStatus: not started.",
          date="2026-03-01", family="move/plan", latest=False,
          superseded_by="move/plan final.md")
V2 = cand(2, "move/plan v2.md", "Read up on the visa status rules.\n"
          "Status: documents ready, appointment on 16 June.", date="2026-06-01",
          family="move/plan", latest=False, superseded_by="move/plan final.md")
V3 = cand(3, "move/plan final.md", "Visa status: approved on 27 August.", date="2026-09-01",
          family="move/plan")


def test_writer_history_gives_every_version_its_changed_line():
    # v1's unchanged "Read up ..." line names more of the question, but its changed line
    # is the one that says where the visa stood; another note joins only as a changed
    # line of the document (same key), an unrelated mention sharing 2 of 11 words not.
    email = cand(4, "inbox/visa centre.md", "Visa status: appointment moved to 18 June.",
                 date="2026-06-10")
    lunch = cand(5, "journal/2026-07-01.md", "Lunch with Ana and Tom, and a long talk "
                 "about visa status politics and 3 other things.", date="2026-07-01")
    text = write("How did my visa status change?", [V3, lunch, email, V2, V1], "history")
    assert text == ("On 2026-03-01: Status: not started [c5]. "
                    "On 2026-06-01: Status: documents ready, appointment on 16 June [c4]. "
                    "On 2026-06-10: Visa status: appointment moved to 18 June [c3]. "
                    "On 2026-09-01: Visa status: approved on 27 August [c1].")


def test_states_a_specific_the_question_does_not_name():
    unit = "Coaches a group at the Aire Valley Striders on Tuesday nights."
    assert models.states(unit, known={"coach", "club"})        # where and when, no copula
    assert not models.states("Coaches a group of friends and runs with them.")
    assert not models.states("Ask Maren about her day rate.", known={"maren", "day", "rate"})
    assert not models.states("Running coach, see [[Dev Okafor]].")   # a link is no value


# -------------------------------------------------------------- several parts (round 2)

def test_question_parts():
    assert models.question_parts("Who signs off the milestones, and what's their phone?") == [
        "Who signs off the milestones", "what's their phone"]
    assert models.question_parts("Which invoice is unpaid and when is it due?") == [
        "Which invoice is unpaid", "when is it due"]
    # a piece that asks nothing is context of the next part, or of the last one
    assert models.question_parts("For the test rounds, how many take part and what do "
                                 "they get?") == ["how many take part For the test rounds",
                                                  "what do they get"]
    assert models.question_parts("My moving date keeps shifting. What were the dates?") == [
        "What were the dates My moving date keeps shifting"]
    assert models.question_parts("What is the rate and fee for Ana?") == [
        "What is the rate and fee for Ana"]        # "and" joining nouns splits nothing
    assert models.question_parts("What is my day-rate?") == ["What is my day-rate"]


def test_part_weights_hand_worked():
    w = {"sign": 3.0, "phone": 2.0, "number": 0.6}
    # own terms phone and number, both the part's focus: 1.5x; "sign" is context: 0.5x
    assert models.part_weights(w, "what's their phone number") == pytest.approx(
        {"sign": 1.5, "phone": 3.0, "number": 0.9})


def test_relevance_of_a_passage_answering_one_part():
    passages = {"who": {"text": "Priya Reid signs off every milestone.", "path": "a.md"},
                "phone": {"text": "Contacts: Priya Reid, phone 0113 496 0721.",
                          "path": "b.md"}}
    q = "Who signs off the milestones, and what's their phone number?"
    judge = models.BuiltinJudge()
    table = judge.relevance_by_part(q, passages)
    assert all(len(v) == 3 for v in table.values())         # whole, part 1, part 2
    assert table["phone"][2] > table["phone"][0]             # its part scores it higher
    assert table["who"][1] > table["who"][2]
    assert judge.relevance(q, passages) == {k: max(v) for k, v in table.items()}


def test_writer_answers_each_part_with_a_new_value():
    rounds = cand(1, "work/client.md", "One usability test round per quarter, 5 participants.")
    again = cand(2, "work/client v2.md", "One usability test round per quarter, "
                 "5 participants (remote is fine).")
    voucher = cand(3, "work/about.md", "Quarterly test rounds recruit from the newsletter "
                   "with a £30 voucher each.")
    q = "For the quarterly test rounds, how many people take part and what do they get?"
    text = write(q, [rounds, again, voucher], "any")
    assert text == ("One usability test round per quarter, 5 participants [c1]. Quarterly "
                    "test rounds recruit from the newsletter with a £30 voucher each [c3].")


def test_writer_prefers_the_line_naming_the_focus_over_its_section_heading():
    nif = cand(1, "move/NIF and bank.md", "NIF (Portuguese tax number) is done: issued "
               "27 May, €95.\nBank: account opened remotely with Banco Norte.",
               heading="NIF and bank account")
    q = "Which bank is my Portuguese account with?"
    assert write(q, [nif], "any") == "Bank: account opened remotely with Banco Norte [c1]."
    # no line of the note names the focus itself: the heading still counts
    hr = cand(2, "health/heart rate.md", "49 bpm, lowest ever.",
              heading="Resting heart rate > Readings")
    assert write("What's my resting heart rate?", [hr], "any") == "49 bpm, lowest ever [c1]."


def test_writer_history_line_holds_the_kind_of_value_asked():
    # "what dates": v1's money line names "moving" and has a number, but only the
    # line holding a date answers; the date kind comes from the line, not the note date
    v1 = cand(1, "move/plan v1.md", "Savings before moving: £15,000.\n"
              "Target: around 26 September.", date="2026-03-01", family="move/plan",
              latest=False, superseded_by="move/plan v2.md")
    v2 = cand(2, "move/plan v2.md", "New target: move on 31 October.", date="2026-06-01",
              family="move/plan")
    text = write("What have all the moving dates been?", [v2, v1], "history")
    assert text == ("On 2026-03-01: Target: around 26 September [c2]. "
                    "On 2026-06-01: New target: move on 31 October [c1].")
