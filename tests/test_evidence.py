"""The evidence handed on (evidence.py): labels rather than hiding, a word budget, several
dates routed to history, and corrections from other notes labelled, each on notes written
for it."""

import pytest

from verso import builtin_writer
from verso import evidence
from verso import evidence_fit
from verso import passages
from verso import harness
from verso import route
from verso import verify
from vaults import write


def _ask(vault, tmp_path, question, **kw):
    idx, be = harness.load(tmp_path / "idx", vault, "builtin")
    return harness.ask(question, index=idx, backend=be, **kw)


@pytest.fixture
def tenancy(tmp_path):
    """A 2025 tenancy note, the only one that gives the deposit, and a 2026 renewal of it
    that gives the new rent only."""
    v = tmp_path / "notes"
    write(v, "home/flat tenancy 2025-05.md", "# Flat tenancy\nLandlord: Mr Osei.\n"
          "Rent: £1,150 per month, paid on the 1st.\nDeposit: £1,300, held by the "
          "deposit scheme.\n")
    write(v, "home/flat tenancy 2026-05.md", "# Flat tenancy\nRenewed for a year; the "
          "deposit certificate is in the blue folder.\n"
          "Rent: £1,240 per month from June, paid on the 1st.\n")
    write(v, "garden/seeds.md", "# Seeds\nSow the broad beans in November.\n")
    return v


def test_an_older_version_that_alone_holds_the_fact_stays_labelled(tenancy, tmp_path):
    a = _ask(tenancy, tmp_path, "How much is the deposit on the flat?")
    old = [s for s in a.sources if s["path"] == "home/flat tenancy 2025-05.md"]
    assert old and "£1,300" in old[0]["text"]
    assert old[0]["superseded_by"] == "home/flat tenancy 2026-05.md"
    assert old[0]["why"] == "a newer version of this note" and not old[0]["is_latest"]
    assert not [c for c in a.candidates["version"] if c["dropped"]]     # nothing hidden


def test_an_older_version_a_newer_one_restates_is_set_aside(tenancy, tmp_path):
    a = _ask(tenancy, tmp_path, "How much is the rent on the flat now?")
    assert [s["path"] for s in a.sources][0] == "home/flat tenancy 2026-05.md"
    assert "home/flat tenancy 2025-05.md" not in [s["path"] for s in a.sources]
    dropped = [c for c in a.candidates["version"] if c["dropped"]]
    assert [c["path"] for c in dropped] == ["home/flat tenancy 2025-05.md"]
    assert "1,240" in a.answer and "1,150" not in a.answer


def test_restates_needs_the_asked_field_not_any_answer(tenancy, tmp_path):
    idx, _ = harness.load(tmp_path / "idx", tenancy, "builtin")
    by_path = {c["path"]: c for c in idx.chunks}
    old, new = (harness.retrieve.Candidate(by_path[p]) for p in (
        "home/flat tenancy 2025-05.md", "home/flat tenancy 2026-05.md"))
    assert evidence.restates("What is the rent?")(new, old)
    assert not evidence.restates("What is the deposit?")(new, old)


def test_the_evidence_fits_the_word_budget_and_long_passages_are_cut(tmp_path):
    v = tmp_path / "notes"
    for i in range(12):
        write(v, f"log/day {i}.md", f"# Day {i}\n" + " ".join(
            f"Walked the dog {j} times along the canal and fed the cat." for j in range(12))
            + f"\nThe vet bill on day {i} was £{40 + i}.\n")
    small = _ask(v, tmp_path, "How much was the vet bill?", budget=120)
    words = [len(s["text"].split()) for s in small.sources]
    assert sum(words) <= 120
    assert any(passages.ELIDED in s["text"] for s in small.sources)
    big = _ask(v, tmp_path, "How much was the vet bill?", budget=2000)
    paths = [s["path"] for s in big.sources]
    assert len(paths) == len(set(paths)) > len(small.sources)    # one passage a note
    total = sum(len(p.read_text().split()) for p in v.rglob("*.md"))
    assert 0.8 * min(2000, total) <= sum(len(s["text"].split()) for s in big.sources) <= 2000


def test_several_dates_route_to_history():
    for q in ("What was the mooring fee in March and in October?",
              "How much was the rent between June and September?",
              "What did the insurance cost in 2025 and 2026?"):
        assert route.route(q)["time_mode"] == "history", q
    assert route.route("What was the budget in April 2026?")["time_mode"] == "as_of"
    assert route.route("What was my rate in June?")["time_mode"] == "as_of"


@pytest.fixture
def launch(tmp_path):
    """A plan note states the launch date; a later meeting note of another name moves it."""
    v = tmp_path / "notes"
    write(v, "work/launch plan.md", "---\ndate: 2026-01-10\n---\n# Launch plan\n"
          "Launch date: 3 March, with the press release the week before.\n")
    write(v, "meetings/2026-02-20 launch sync.md", "# Launch sync\nWe moved the launch date "
          "to 14 April because the app review is slow.\n")
    return v


def test_a_statement_a_later_note_corrects_is_labelled_with_that_note(launch, tmp_path):
    a = _ask(launch, tmp_path, "When is the launch date?", mode="present")
    plan = next(s for s in a.sources if s["path"] == "work/launch plan.md")
    assert plan["superseded_by"] == "meetings/2026-02-20 launch sync.md"
    assert plan["why"] == evidence.WHY_STATEMENT.format("2026-02-20")
    sync = next(s for s in a.sources if s["path"].startswith("meetings/"))
    assert sync["superseded_by"] is None


def test_verify_does_not_pass_a_sentence_citing_only_a_corrected_statement(launch,
                                                                           tmp_path):
    a = _ask(launch, tmp_path, "When is the launch date?", mode="present")
    kept = [harness.retrieve.Candidate(dict(c, text=s["text"]), superseded_by=s["superseded_by"],
                                       why=s["why"])
            for s in a.sources for c in [_chunk(launch, tmp_path, s)]]
    n = next(i for i, s in enumerate(a.sources, 1) if s["path"] == "work/launch plan.md")
    v = verify.verify(f"The launch date is 3 March [c{n}].", kept, "present",
                      harness.line_scores.BuiltinJudge(), question="When is the launch date?")
    assert v.verdict != "SHIP" and not v.sentences[0]["ok"]
    (why,) = v.sentences[0]["reasons"]                  # the version check, and no other
    assert why.startswith(f"cites an older version (c{n}, 2026-01-10) while a newer one ")


def _chunk(vault, tmp_path, source):
    idx, _ = harness.load(tmp_path / "idx", vault, "builtin")
    return idx.chunks[source["id"]]


def test_evaluate_can_stop_at_the_evidence(tenancy, tmp_path, capsys):
    import json
    from verso import evaluate
    qf = tmp_path / "q.jsonl"
    qf.write_text(json.dumps({"id": "d1", "question": "How much is the deposit on the flat?",
                              "category": "lookup", "time_mode": "present", "answer": "£1,300",
                              "key_facts": ["1,300"], "forbidden_facts": [],
                              "gold_files": ["home/flat tenancy 2025-05.md"],
                              "answerable": True}) + "\n")
    argv = ["--vault", str(tenancy), "--questions", str(qf), "--variant", "full",
            "--backend", "builtin", "--out", str(tmp_path / "run")]
    assert evaluate.main(argv + ["--evidence-only", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["evidence_only"] is True
    assert result["variants"]["full"]["overall"]["evidence_recall"]["k"] == 1
    record = evaluate.load_records(tmp_path / "run")[0]
    written = next(s for s in record["stages"] if s["name"] == "generate")
    assert (written["ms"], written["input_tokens"], record["answer"]) == (0, 0, "")
    assert evaluate.main(argv[:-2] + []) == 0
    assert "evidence only" not in capsys.readouterr().out


def test_a_rewrite_that_drops_a_qualifier_still_restates_the_field(tmp_path):
    v = tmp_path / "notes"
    write(v, "move/move plan v2.md", "---\ndate: 2026-06-05\n---\n# Move plan\n"
          "Lisbon rent budget raised to €1,300 per month.\n")
    write(v, "move/move plan final.md", "---\ndate: 2026-09-12\n---\n# Move plan\n"
          "Rent budget: €1,450 per month, the chosen flat is €1,420.\n")
    idx, _ = harness.load(tmp_path / "idx", v, "builtin")
    by_path = {c["path"]: c for c in idx.chunks}
    old, new = (harness.retrieve.Candidate(by_path[p]) for p in (
        "move/move plan v2.md", "move/move plan final.md"))
    question = "How much rent can I afford per month in Lisbon?"
    assert evidence.restates(question)(new, old)        # rent, month named; Lisbon dropped
    two = "What is the Lisbon rent?"                    # two fields: both must stay
    assert not evidence.restates(two)(new, old)


def test_a_period_question_keeps_every_passage_of_the_period_up_to_period_keep():
    # retrieval kept the candidates inside the period; a period question asks for all
    cands = [harness.retrieve.Candidate({"id": i, "path": f"journal/2026-02-{i + 1:02d}.md",
                                         "text": f"note {i}"}) for i in range(12)]
    assert len(evidence.select("What did I note about the lodger in February 2026?",
                               cands)) == evidence.PERIOD_KEEP
    assert len(evidence.select("What did I note about the lodger?", cands)) == evidence.KEEP
    assert len(evidence.select("What did I write last week?", cands, keep=3)) == 3


@pytest.fixture
def climbing(tmp_path):
    """Climbing-gym visits over a year: the early notes talk about the gym at length, the
    latest mentions it once, in passing, and says when in words ("on Saturday")."""
    v = tmp_path / "notes"
    for n, day in enumerate(("2026-01-10", "2026-02-14", "2026-03-07", "2026-04-11",
                             "2026-05-16", "2026-06-13", "2026-06-27", "2026-07-25")):
        write(v, f"journal/{day}.md", f"# Journal\nWent to the climbing gym with Ana, "
              f"route {n + 3} of the new set. The climbing gym was busy; the climbing gym "
              f"cafe was shut. Climbing gym again soon, the membership is worth it.\n")
    for day in range(1, 25):
        write(v, f"journal/2026-07-{day:02d}.md", f"# Journal\nWork, then cooked dal. "
              f"Read {day} pages of the novel.\n")
    write(v, "journal/2026-09-21.md", "# Journal\nShopping, laundry, a long call with Mum."
          "\n\nI went to the climbing gym on Saturday, legs still sore.\n")
    write(v, "reference/climbing gym.md", "# Climbing gym\nOpen 7am to 10pm. Day pass £14.\n")
    return v


@pytest.mark.parametrize("question,day", [
    ("When did I last go to the climbing gym?", "2026-09-19"),
    ("When was the most recent time I went to the climbing gym?", "2026-09-19"),
    ("When did I first go to the climbing gym?", "2026-01-10"),
])
def test_the_latest_or_earliest_mention_is_handed_on_first(climbing, tmp_path, question, day):
    """"The last time" is the latest mention, whatever its rank; "the first time" the
    earliest; the day is the one the sentence states, not only the note's date."""
    a = _ask(climbing, tmp_path, question)
    first = a.sources[0]
    assert day in first["text"] or first["date"] == day
    plain = _ask(climbing, tmp_path, "Did I go to the climbing gym?")
    assert "journal/2026-09-21.md" not in [s["path"] for s in plain.sources]


def test_last_and_first_are_read_from_the_question():
    from verso import asof
    assert asof.ordinal("When did I last see the dentist?") == "last"
    assert asof.ordinal("When was the last time we spoke?") == "last"
    assert asof.ordinal("When did I first meet Oskar?") == "first"
    assert asof.ordinal("What did I do last week?") is None          # a period
    assert asof.ordinal("When was my first on-call?") is None        # one event
    words = asof.mention_terms("When did I last swim in the sea?")
    assert asof.mention(words, "Swam out on Friday [2026-05-01]. The sea was cold.",
                        "2026-05-03") == (1, "2026-05-01")
    assert asof.mention(words, "Swam in the sea.", "2026-05-03") == (2, "2026-05-03")


def _venue(tmp_path):
    """A plan naming a venue as a field ("**Venue:** Aldhelm Hall"), a later meeting note
    that moves it, and a note that shares no asked term."""
    v = tmp_path / "notes"
    write(v, "choir/concert plan.md", "---\ndate: 2026-01-12\n---\n# Plans for March\n"
          "- **Venue:** Aldhelm Hall\n- **Tickets:** £12 on the door\n")
    write(v, "meetings/2026-02-10 committee.md", "---\ndate: 2026-02-10\n---\n# Committee\n"
          "- The concert venue moved to the Corn Exchange: the hall roof is being fixed.\n")
    write(v, "garden/seeds.md", "# Seeds\nSow the broad beans in November, Gareth says.\n")
    return v


def _kept(vault, tmp_path, question, monkeypatch):
    """The evidence label_statements is given for `question` at 300 words, and its index."""
    seen, real = [], evidence.label_statements

    def spy(q, kept, index=None):
        seen.append((list(kept), index))
        return real(q, kept, index)
    monkeypatch.setattr(evidence, "label_statements", spy)
    _ask(vault, tmp_path, question, budget=300)
    monkeypatch.setattr(evidence, "label_statements", real)
    return seen[0]


def test_a_statement_pair_needs_a_shared_asked_field_and_a_new_value(tmp_path, monkeypatch):
    """The one pair the venue vault holds is the plan's venue and the meeting's new one:
    the seeds note shares no asked term, the plan's tickets line names no asked field."""
    question = "Where is the concert venue?"
    kept, idx = _kept(_venue(tmp_path), tmp_path, question, monkeypatch)
    pairs = evidence.statement_pairs(question, kept, idx)
    assert [(kept[i].path, kept[j].path, o.text, n.text) for i, j, o, n, _ in pairs] == [
        ("choir/concert plan.md", "meetings/2026-02-10 committee.md", "Venue: Aldhelm Hall",
         "The concert venue moved to the Corn Exchange: the hall roof is being fixed.")]
    (features,) = [f for *_, f in pairs]
    assert set(features) == set(evidence.STATEMENT_FEATURES)
    assert features["new_revises"] == 1.0 and features["old_revises"] == 0.0
    assert features["restates"] == 0.0 and features["covered"] == 1.0
    assert features["days"] == pytest.approx(29 / 365)      # 12 January -> 10 February
    assert features["title"] == 0.0 and features["undated"] == 0.0
    assert features["revised_field"] == features["shared"] > 0


def test_two_lines_that_mean_alike_make_the_likelier_pair(tmp_path, monkeypatch):
    """A reference note's insurance line and its tyres line both pair with a later
    budget line naming the car's insurance: the pair whose words mean alike (the word
    table) has the larger `meaning`, which raises its P."""
    v = tmp_path / "notes"
    write(v, "home/car.md", "# Car\n- Insurance: Admiral, £46.20 a month\n"
          "- Tyres: £95 each, pressures 2.3 bar front\n")
    write(v, "money/budget nov.md", "---\ndate: 2026-11-01\n---\n# Budget\n"
          "- Car (insurance now £39.80) + fuel: £140\n")
    question = "How much is the car insurance now?"
    kept, idx = _kept(v, tmp_path, question, monkeypatch)
    got = {o.text: f for i, j, o, n, f in evidence.statement_pairs(question, kept, idx)}
    insured = got["Insurance: Admiral, £46.20 a month"]
    tyres = got["Tyres: £95 each, pressures 2.3 bar front"]
    assert insured["meaning"] > tyres["meaning"] + 0.1
    assert evidence.replaces(insured) > evidence.replaces({**insured, "meaning": 0.0})
    assert evidence.replaces(insured) > evidence.replaces(tyres)


def test_a_pair_labels_exactly_when_the_model_reaches_the_cut(tmp_path, monkeypatch):
    """label_statements labels the older passage when the fitted P(the newer line
    replaces it) reaches STATEMENT_CUT, and nothing else; the newer passage never. (At
    the shipped cut this pair is not labelled: P is about 0.03, docs/results.md.)"""
    question = "Where is the concert venue?"
    kept, idx = _kept(_venue(tmp_path), tmp_path, question, monkeypatch)
    (p,) = [evidence.replaces(f) for *_, f in evidence.statement_pairs(question, kept, idx)]
    for cut, labelled in ((p, True), (min(1.0, p + 1e-6), False)):
        monkeypatch.setattr(evidence, "STATEMENT_CUT", cut)
        out = {c.path: c for c in evidence.label_statements(question, kept, idx)}
        plan = out["choir/concert plan.md"]
        assert (plan.superseded_by == "meetings/2026-02-10 committee.md") is labelled
        assert (plan.why or "").startswith(evidence.WHY_STATEMENT.split(" (")[0]) is labelled
        assert all(c.superseded_by is None for path, c in out.items() if path != plan.path)


def test_a_newer_line_restating_the_same_value_is_no_pair(tmp_path, monkeypatch):
    """A later note that gives the same venue again replaces nothing."""
    v = _venue(tmp_path)
    write(v, "meetings/2026-02-10 committee.md", "---\ndate: 2026-02-10\n---\n# Committee\n"
          "- The concert venue stays Aldhelm Hall.\n")
    question = "Where is the concert venue?"
    kept, idx = _kept(v, tmp_path, question, monkeypatch)
    assert evidence.statement_pairs(question, kept, idx) == []


def test_as_of_a_date_a_note_written_after_it_replaces_nothing(tmp_path, monkeypatch):
    """As of the end of January the committee's February note is handed on labelled (not
    yet written), and no statement in it labels the plan in force then."""
    question = "Where was the concert venue at the end of January?"
    kept, idx = _kept(_venue(tmp_path), tmp_path, question, monkeypatch)
    later = [c for c in kept if c.path == "meetings/2026-02-10 committee.md"]
    assert later and later[0].chunk.get(builtin_writer.SET_ASIDE) and not later[0].is_latest
    assert evidence.statement_pairs(question, kept, idx) == []


@pytest.mark.slow
def test_the_shipped_statement_weights_are_what_the_fit_gives(tmp_path):
    """evidence.py's FITTED block and STATEMENT_CUT are what tools/fit_statements.py fits
    and picks on the tuning splits today: refit (--write) whenever the evidence before
    the labels changes."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import fit_evidence
    import fit_statements
    from verso import verdict_fit
    sets = fit_evidence.tuning_sets()
    loaded = {name: harness.load(index=str(tmp_path / name), vault=vault, backend="builtin")
              for name, vault, _ in sets}
    rows, cases = fit_statements.collect(sets, loaded)
    bias, weights = evidence_fit.raw(verdict_fit.fit(rows, evidence.STATEMENT_FEATURES))
    assert bias == pytest.approx(evidence.STATEMENT_BIAS, abs=2e-3)
    assert weights == pytest.approx(evidence.STATEMENT_WEIGHTS, abs=2e-3)
    assert fit_statements.pick_cut(sets, rows, cases, (bias, weights)) == evidence.STATEMENT_CUT

def test_the_statement_cut_is_the_lowest_right_twice_as_often_as_wrong(monkeypatch):
    """tools/fit_statements.pick_cut on made-up held-out counts: the most labels whose
    right are at least PRECISION times the wrong, else the fewest labels."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import fit_statements
    from verso import verdict_fit
    monkeypatch.setattr(verdict_fit, "fit", lambda rows, names: None)
    monkeypatch.setattr(evidence_fit, "raw", lambda fitted: (0.0, {}))
    table = {0.5: (5, 3), 0.3: (13, 5), 0.2: (20, 10), 0.1: (27, 16), 0.05: (46, 33)}

    def score(cases, bias, weights):
        right, wrong = table[evidence.STATEMENT_CUT]
        return {"right": right, "wrong": wrong, "other": 0, "stale": 0, "one_version": 0}
    monkeypatch.setattr(fit_statements, "score", score)
    sets = [("a", "vault-a", [])]
    assert fit_statements.pick_cut(sets, [], [], (0.0, {})) == 0.2   # 46/33 is not enough
    table.update({0.3: (13, 7), 0.2: (20, 11)})
    assert fit_statements.pick_cut(sets, [], [], (0.0, {})) == 0.5   # none: fewest labels
