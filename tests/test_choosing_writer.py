"""The choosing reader (choosing_writer.py): what lines a model is offered, how its reply is
read, and how code writes the answer from the chosen lines (cited verbatim, version rules
in code), with a scripted model in place of Ollama."""

import json
from types import SimpleNamespace

import pytest

from verso import choosing_writer
from verso.cost_ledger import Ledger
from verso import builtin_writer


def note(n, path, text, date="2026-05-01", status="latest", section=""):
    """Note c{n} as the builtin reader reads it (generate.reader_note)."""
    return {"id": f"c{n}", "path": path, "section": section, "date": date, "status": status,
            "text": text}


def request(question, mode, *notes, policy=None):
    """What generate hands a writer: messages (here a stand-in; the chooser sends its
    own, the free-text writer these) and the notes in the order given."""
    return builtin_writer.WriteRequest([{"role": "user", "content": f"notes, then {question}"}],
                                       question, mode, [{**n, "order": i} for i, n in
                                                        enumerate(notes)], policy)


class Model:
    """A scripted model: pick(lines) -> the numbers to reply with, from the offered lines."""

    model = "scripted"

    def __init__(self, pick):
        self.pick, self.sent, self.wrote = pick, [], 0

    def chat(self, msgs, what="chat", options=None, format=None, **kw):
        self.sent.append({"messages": msgs, "format": format, "options": options, **kw})
        lines = [ln for ln in msgs[-1]["content"].splitlines() if ln[:1].isdigit()]
        self.n = len(lines)
        reply = self.pick(lines)
        content = reply if isinstance(reply, str) else json.dumps({"lines": reply})
        return SimpleNamespace(message=SimpleNamespace(content=content),
                               prompt_eval_count=50, eval_count=5)

    def text_of(self, r):
        return r.message.content.strip()

    def write(self, req, stage="generate", ledger=None):
        self.wrote += 1
        self.free = req                      # what the free-text writer was handed
        return builtin_writer.Written("A summary [c1].", "ollama", 10, 3)


def number_of(lines, words):
    return next(int(ln.split(".")[0]) for ln in lines if words in ln)


RATES = [note(1, "work/rates 2026-09.md", "Day rate: 1550 for Kittiwake from September.",
              "2026-09-01"),
         note(2, "work/rates 2026-04.md", "Day rate: 1400 for Kittiwake.", "2026-04-01",
              "older version, superseded by work/rates 2026-09.md"),
         note(3, "home/boat.md", "The boat is moored at pier 4. Fuel costs 90 a month.")]


def test_present_mode_offers_no_line_of_a_superseded_version_and_cites_the_choice():
    m = Model(lambda lines: [number_of(lines, "1550")])
    w = choosing_writer.ChoosingWriter(m).write(request("What is my day rate for Kittiwake?",
                                                        "present", *RATES))
    shown = m.sent[0]["messages"][-1]["content"]
    assert "1400" not in shown and "1550" in shown
    assert w.text == "Day rate: 1550 [c1]."    # cut before what only the old version says
    fmt = m.sent[0]["format"]["properties"]["lines"]
    assert fmt["maxItems"] == 1 and fmt["items"]["maximum"] == m.n >= 2
    assert w.writer == "choose" and (w.input_tokens, w.output_tokens) == (50, 5)
    assert w.trace["agree"] is True and w.trace["chosen"]


def test_history_mode_offers_every_version_and_writes_them_oldest_first():
    m = Model(lambda lines: [number_of(lines, "1550"), number_of(lines, "1400")])
    text = choosing_writer.ChoosingWriter(m).write(
        request("How did my Kittiwake day rate change?", "history", *RATES)).text
    assert text == ("On 2026-04-01: Day rate: 1400 for Kittiwake [c2]. "
                    "On 2026-09-01: Day rate: 1550 for Kittiwake from September [c1].")


def test_an_older_statement_a_newer_note_replaces_is_overruled_with_the_reason():
    notes = [note(1, "meetings/march.md", "Proposal: the deposit is 500.", "2026-03-02"),
             note(2, "meetings/june.md", "Agreed on the call: the deposit is 800.",
                  "2026-06-10")]
    m = Model(lambda lines: [number_of(lines, "500")])        # the model picks the old one
    w = choosing_writer.ChoosingWriter(m).write(request("How much is the deposit?", "present",
                                                        *notes))
    assert w.text.startswith("Agreed on the call: the deposit is 800 [c2]")
    assert "this replaces the statement in march (2026-03-02) [c1]" in w.text
    assert w.trace["overruled"][0]["chosen"] == "Proposal: the deposit is 500."


def test_no_line_chosen_is_the_abstain_sentence_and_a_list_keeps_several():
    m = Model(lambda lines: [])
    q = request("What is my day rate?", "present", *RATES)
    assert choosing_writer.ChoosingWriter(m, policy={"on_disagreement": "model"}).write(q).text == \
        builtin_writer.ABSTAIN_SENTENCE
    w = choosing_writer.ChoosingWriter(m).write(q)   # uncalibrated: no reading of its own to show
    assert w.text != builtin_writer.ABSTAIN_SENTENCE and w.trace["shown"] == "reader"
    assert w.trace["model_answer"] == builtin_writer.ABSTAIN_SENTENCE
    shop = [note(1, "home/shopping.md", "- Oat milk\n- Brown bread\n- Six eggs")]
    m = Model(lambda lines: [number_of(lines, "eggs"), number_of(lines, "milk")])
    text = choosing_writer.ChoosingWriter(m).write(
        request("Which things are on my shopping list?", "present", *shop)).text
    assert "Six eggs [c1]" in text and "Oat milk [c1]" in text
    m = Model(lambda lines: [number_of(lines, "pier"), number_of(lines, "Fuel")])
    text = choosing_writer.ChoosingWriter(m).write(
        request("Where is the boat moored?", "present", *RATES)).text
    assert text == "The boat is moored at pier 4 [c3]."       # one thing asked: one line


def test_replies_are_read_as_json_or_digits_within_the_lines():
    assert choosing_writer.parse_reply('{"lines": [3, 1, 3]}', 5) == [3, 1]
    assert choosing_writer.parse_reply("[2]", 5) == [2]
    assert choosing_writer.parse_reply("Lines 2 and 9, then 4.", 5) == [2, 4]
    assert choosing_writer.parse_reply('{"lines": ["2", -1, "x"]}', 5) == [2]
    assert choosing_writer.parse_reply("", 5) == []


def test_lines_are_best_first_within_the_budget_and_without_repeats(monkeypatch):
    many = [note(i, f"log/day {i}.md", f"Day rate was {1000 + i} on that job. Filler text "
                 f"about nothing at all number {i}.", f"2026-05-{i % 28 + 1:02d}")
            for i in range(1, 40)]
    many.append(note(40, "log/copy.md", "Day rate was 1001 on that job."))
    notes = request("What was the day rate?", "any", *many).notes
    lines, _ = choosing_writer.offered("What was the day rate?", "any", notes)
    assert len(lines) <= choosing_writer.MAX_LINES
    assert [u.score for u in lines] == sorted((u.score for u in lines), reverse=True)
    assert len({u.text for u in lines}) == len(lines)
    monkeypatch.setattr(choosing_writer, "MAX_PROMPT_TOKENS", 60)
    few, _ = choosing_writer.offered("What was the day rate?", "any", notes)
    assert 0 < len(few) < len(lines)


def test_a_synthesis_question_goes_to_the_free_text_writer():
    m = Model(lambda lines: pytest.fail("no lines chosen for a summary"))
    q = request("Summarise my notes on rates", "any", *RATES)
    w = choosing_writer.ChoosingWriter(m).write(q)
    assert (w.text, w.writer, w.input_tokens) == ("A summary [c1].", "generate", 10)
    assert m.wrote == 1 and m.free is q and "free-text writer" in w.trace["why"]
    calibrated = {**choosing_writer.UNCALIBRATED_POLICY, "synthesis": "choose"}   # the request's
    m = Model(lambda lines: [number_of(lines, "1550")])
    w = choosing_writer.ChoosingWriter(m).write(request("Summarise my notes on rates", "any",
                                                        *RATES, policy=calibrated))
    assert m.wrote == 0 and w.writer == "choose" and "1550" in w.text
    assert not choosing_writer.SYNTHESIS_RE.match("Why did I switch race shoes?")


def test_the_ledger_row_carries_what_was_offered_and_chosen():
    ledger = Ledger()
    m = Model(lambda lines: [number_of(lines, "pier")])
    choosing_writer.ChoosingWriter(m).write(request("Where is the boat moored?", "present", *RATES),
                                            ledger=ledger)
    row = ledger.rows[-1]
    assert row["model"] == "choose:scripted" and row["input_tokens"] == 50
    assert row["choose"]["chosen"] and "messages" not in row["choose"]
    assert row["choose"]["writer"] == "choose"
    assert row["choose"]["builtin"].startswith("The boat is moored at pier 4")


def test_a_change_answered_from_one_version_is_a_disagreement_the_policy_decides():
    m = Model(lambda lines: [number_of(lines, "1550")])          # the latest version only
    q = request("How did my Kittiwake day rate change?", "history", *RATES)
    w = choosing_writer.ChoosingWriter(m, policy={"on_disagreement": "reader"}).write(q)
    assert choosing_writer.versions_in(w.text) == 2
    assert w.text.startswith("On 2026-04-01: Day rate: 1400")
    assert w.trace["agree"] is False and w.trace["shown"] == "reader"
    text = choosing_writer.ChoosingWriter(m, policy={"on_disagreement": "model"}).write(q).text
    assert choosing_writer.versions_in(text) == 1 and "1550" in text


def test_two_answers_agree_when_they_state_the_same_numbers():
    assert choosing_writer.same_facts("Rate: GBP 760; EUR 880 [c1].",
                                      "Day rate 760, or 880 in euro [c2].")
    assert not choosing_writer.same_facts("Rate 760 [c1].", "Rate 640 [c1].")
    assert choosing_writer.same_facts("The boat is at pier four [c1].",
                                      "The boat is at pier four [c2].")
    assert not choosing_writer.same_facts("The boat is at pier four [c1].", "Moored in town [c1].")


def test_where_the_readers_disagree_the_reader_answers_and_the_model_is_traced():
    m = Model(lambda lines: [number_of(lines, "Fuel")])        # not what is asked
    q = request("Where is the boat moored?", "present", *RATES)
    w = choosing_writer.ChoosingWriter(m, policy={"on_disagreement": "reader"}).write(q)
    assert w.text == "The boat is moored at pier 4 [c3]."
    assert w.trace["agree"] is False and w.trace["shown"] == "reader"
    assert w.trace["model_answer"] == "Fuel costs 90 a month [c3]."
    m = Model(lambda lines: [number_of(lines, "pier")])
    w = choosing_writer.ChoosingWriter(m, policy={"on_disagreement": "reader"}).write(q)
    assert w.trace["agree"] is True and w.trace["shown"] == "model"


def test_until_the_model_is_calibrated_both_readings_are_kept():
    """An uncalibrated model (no identity, no stored calibration) is not overruled: its
    answer is given, and the reader's stands beside it as the alternate."""
    m = Model(lambda lines: [number_of(lines, "Fuel")])
    q = request("Where is the boat moored?", "present", *RATES)
    assert choosing_writer.ChoosingWriter(m).policy_for(q)["on_disagreement"] == "both"
    w = choosing_writer.ChoosingWriter(m).write(q)
    assert w.text == "Fuel costs 90 a month [c3]."
    assert w.trace["alternate"] == {"by": "reader",
                                    "text": "The boat is moored at pier 4 [c3]."}
    assert w.trace["shown"] == "model" and len(m.sent) == 1    # not asked again
    m = Model(lambda lines: [number_of(lines, "Fuel")])   # calibrated: the request says
    w = choosing_writer.ChoosingWriter(m).write(request("Where is the boat moored?", "present",
                                                        *RATES, policy={"on_disagreement": "reader",
                                                                        "synthesis": "generate",
                                                                        "change": "choose"}))
    assert w.text == "The boat is moored at pier 4 [c3]." and "alternate" not in w.trace
    assert w.trace["policy"] == "reader"


def _tool(name):
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_disagreement_tally_counts_who_was_right(tmp_path, capsys):
    from verso import evaluate
    q = [{"id": "a", "question": "What is my day rate?", "category": "current",
          "time_mode": "present", "answer": "1550", "key_facts": ["1550"],
          "forbidden_facts": ["1400"], "gold_files": ["r.md"], "answerable": True},
         {"id": "b", "question": "Where is the boat?", "category": "lookup",
          "time_mode": "any", "answer": "pier 4", "key_facts": ["pier 4"],
          "forbidden_facts": [], "gold_files": ["b.md"], "answerable": True}]
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(x) for x in q) + "\n")
    recs = [{"id": "a", "variant": "full", "answer": "Rate 1400 [c1].", "answer_correct": False,
             "choose": {"writer": "choose", "chosen": [1], "agree": False, "builtin":
                        "Rate 1400 [c1].", "model_answer": "Rate 1550 [c2]."}},
            {"id": "b", "variant": "full", "answer": "At pier 4 [c1].", "answer_correct": True,
             "choose": {"writer": "choose", "chosen": [2], "agree": True,
                        "builtin": "At pier 4 [c1]."}}]
    run = tmp_path / "run"
    run.mkdir()
    (run / "records.jsonl").write_text("\n".join(json.dumps(x) for x in [
        {"format": evaluate.FORMAT, "kind": "verso-eval-records"}] + recs) + "\n")
    t = _tool("choose_agree").tally(run, tmp_path / "q.jsonl")
    assert (t["answers"], t["agree"], t["agree_right"], t["first_line"]) == (2, 1, 1, 1)
    assert (t["model_only"], t["reader_only"], t["both"], t["neither"]) == (1, 0, 0, 0)
    assert _tool("choose_agree").main([f"{run}={tmp_path / 'q.jsonl'}"]) == 0
    assert "model only" in capsys.readouterr().out


def test_first_pick_p_multiplies_the_digit_tokens_of_the_first_number_only():
    toks = [("{\"", -0.01), ("lines", -0.01), ("\":", -0.01), (" [", -0.02), ("1", -0.5),
            ("2", -0.1), (",", -0.3), (" ", -0.1), ("3", -2.0), ("]}", -0.01)]
    p = choosing_writer.first_pick_p([SimpleNamespace(token=t, logprob=lp) for t, lp in toks])
    assert p == pytest.approx(2.718281828 ** -0.6)
    def entries(*pairs):
        return [SimpleNamespace(token=t, logprob=lp) for t, lp in pairs]
    merged = entries(("[7", -0.25), ("]", -0.01))
    assert choosing_writer.first_pick_p(merged) == pytest.approx(2.718281828 ** -0.25)
    assert choosing_writer.first_pick_p(entries(("[7]", -1.0), ("8", -3.0))) == pytest.approx(
        2.718281828 ** -1.0)
    assert choosing_writer.first_pick_p(None) is None
    assert choosing_writer.first_pick_p(entries(("[]", -0.1))) is None


def test_the_trace_keeps_the_models_probability_for_its_first_line():
    class WithLogprobs(Model):
        def chat(self, msgs, **kw):
            r = super().chat(msgs, **kw)
            first = str(json.loads(r.message.content)["lines"][0])
            r.logprobs = [SimpleNamespace(token=d, logprob=-0.35) for d in first]
            return r
    m = WithLogprobs(lambda lines: [number_of(lines, "1550")])
    w = choosing_writer.ChoosingWriter(m).write(request("What is the day rate?", "present", *RATES))
    assert m.sent[-1]["logprobs"] is True
    assert w.trace["model_p"] == pytest.approx(2.718281828 ** (-0.35 * len(str(
        w.trace["chosen"][0]))))


def test_asked_again_in_reverse_a_position_pull_is_not_the_models_reading():
    """A model that always replies with the last line picks two lines in the two orders:
    the reader's answer is shown; one that picks by content is shown under "again"."""
    again = {"on_disagreement": "again"}
    q = request("Where is the boat moored?", "present", *RATES)
    reader_says = builtin_writer.extract_answer(q.question, q.mode, q.notes)
    assert "pier 4" in reader_says
    by_content = Model(lambda lines: [number_of(lines, "Fuel")])
    w = choosing_writer.ChoosingWriter(by_content, policy=again).write(q)
    assert len(by_content.sent) == 2 and w.trace["again"] is True
    assert w.text.startswith("Fuel costs 90 a month") and w.trace["shown"] == "model"
    first = Model(lambda lines: [len(lines)])          # always the last line shown
    w = choosing_writer.ChoosingWriter(first, policy=again).write(q)
    assert w.trace["again"] is False and w.text == reader_says
    agreeing = Model(lambda lines: [number_of(lines, "pier")])
    choosing_writer.ChoosingWriter(agreeing, policy=again).write(q)
    assert len(agreeing.sent) == 1                  # no second request when they agree


def test_the_option_picked_is_the_one_right_most_often_ties_to_the_first():
    from verso import verdict_fit
    rows = [{"split": s, "right": {"model": m, "reader": r}}
            for s, m, r in [("a", 1, 0), ("a", 1, 0), ("b", 0, 1), ("b", 1, 0), ("c", 1, 1)]]
    got = verdict_fit.pick(rows, ("model", "reader", "again"))     # no "again" measured
    assert got["choice"] == "model" and got["right"] == {"model": 4, "reader": 2}
    assert got["held_out"] == 4         # each split under the pick of the other two
    tie = [{"split": "a", "right": {"model": 1, "reader": 0}},
           {"split": "b", "right": {"model": 0, "reader": 1}}]
    assert verdict_fit.pick(tie, ("reader", "model"))["choice"] == "reader"
    assert verdict_fit.pick(tie, ("model", "reader"))["choice"] == "model"
    assert verdict_fit.pick(tie, ("model", "reader"))["held_out"] == 0


def test_a_set_question_offers_every_notes_best_line_before_one_notes_many():
    crowded = note(1, "tools/kit.md", "\n".join(f"- Project Alder uses tool kit part {i}."
                                                for i in range(30)))
    others = [note(2, "projects/birch.md", "Birch uses the soldering kit."),
              note(3, "projects/cedar.md", "Cedar also uses the kit now.")]
    notes = request("q", "any", crowded, *others).notes
    lines, _ = choosing_writer.offered("Which projects use the kit?", "any", notes)
    assert {u.note["path"] for u in lines[:3]} == {"tools/kit.md", "projects/birch.md",
                                                    "projects/cedar.md"}
    one, _ = choosing_writer.offered("What does the kit cost?", "any", notes)   # no set asked
    assert [u.note["path"] for u in one[:3]] == ["tools/kit.md"] * 3


@pytest.mark.parametrize("q,want", [
    ("Which projects use the kit?", True), ("what tools did I buy for the shed", True),
    ("List the rooms we painted.", True), ("What are the ferry times?", True),
    ("Which firm did my rewire?", False), ("What does the kit cost?", False),
    ("What was the address?", False), ("What's the status of the roof?", False),
    ("Which bus goes to the depot?", False), ("What has changed?", False)])
def test_a_set_is_a_list_or_a_wh_word_before_a_plural_noun(q, want):
    assert choosing_writer.asks_set(q) is want


def test_an_answer_with_the_numbers_but_not_the_name_asked_beside_them_is_not_the_same():
    both = "electrician, Sparkright Electrical [c1]. mobile: 07700 900731 [c1]."
    assert not choosing_writer.same_facts("mobile: 07700 900731 [c1].", both)
    assert choosing_writer.same_facts("Mobile: 07700 900731 [c2]. Electrician, Sparkright "
                                      "Electrical [c1].", both)              # in another order
    assert choosing_writer.same_facts("Electrician,  sparkright electrical [c3]. Mobile "
                                      "07700 900731 [c1].", both)
