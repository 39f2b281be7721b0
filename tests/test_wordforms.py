"""The other forms of a question's verbs (wordforms.py) and retrieval looking for them
(retrieve.bm25_ranking): people ask in the present and write in the past."""

import pytest

from verso import wordforms


@pytest.mark.parametrize("term,forms", [
    ("buy", {"bought", "buying"}),                   # irregular, from the base
    ("bought", {"buy", "buying"}),                   # ... and back from the past
    ("swam", {"swim", "swum", "swimming"}),
    ("go", {"went", "gone", "going"}),               # two letters: an irregular base
    ("fill", {"filled", "filling"}),                 # regular
    ("filled", {"fill", "filling"}),                 # a participle names its base
    ("move", {"moved", "moving"}),                   # a final e
    ("moved", {"move", "moving"}),
    ("carry", {"carried", "carrying"}),              # y -> ied
    ("carried", {"carry", "carrying"}),
    ("stop", {"stopped", "stopping"}),               # a doubled consonant
    ("stopped", {"stop", "stopping"}),
    ("visit", {"visited", "visiting"}),              # a long base is not doubled
])
def test_the_forms_of_a_verb_name_each_other(term, forms):
    assert forms <= wordforms.related(term)
    assert term not in wordforms.related(term)


@pytest.mark.parametrize("term", ["evening", "morning", "ceiling", "bed", "12", "at"])
def test_nouns_in_ing_short_words_and_numbers_name_no_base(term):
    """-ing words are too often nouns to name a base ("evening" is no form of "even")."""
    related = wordforms.related(term)
    assert "even" not in related and "morn" not in related and "ceil" not in related
    if term in ("bed", "12", "at"):
        assert related == frozenset() or "b" not in related


def test_a_question_in_the_present_finds_the_note_written_in_the_past(tmp_path):
    from verso import ingest
    from verso import retrieve
    from verso import store_load
    from vaults import write
    v = tmp_path / "notes"
    write(v, "journal/2025-09-14.md", "# Sunday\nBought a boat today. She is called Puffin.\n")
    write(v, "journal/2025-09-20.md", "# Saturday\nThe boat club meets on Sundays. "
          "Puffin needs new varnish before the boat goes in.\n")
    write(v, "shopping.md", "# Shopping\nThings to buy: milk, eggs.\n")
    ingest.build_index(v, tmp_path / "idx")
    index = store_load.load_index(tmp_path / "idx")
    vocab = retrieve.bm25.load_bm25(index)["vocab"]
    assert retrieve.verb_forms("When did I buy the boat?", vocab) == " bought"
    ids, _ = retrieve.bm25_ranking(index, "When did I buy the boat?", 3)
    assert index.chunks[int(ids[0])]["path"] == "journal/2025-09-14.md"
    assert retrieve.verb_forms("the boat", vocab) == ""      # no verb form to add
