"""Table rows as chunk text (chunking._tables), on a note written here: a header of
symbols only is left to the value that carries it, a total row reads as a total
(issue 44, item 6: "Item: Total; £: £1,920" was a row's text)."""

from verso import harness
from tests.vaults import write


def test_a_total_row_and_a_symbol_header_read_plainly(tmp_path):
    """"Item: Total; £: £1,920" was the row's text."""
    v = tmp_path / "move"
    write(v, "move budget.md", "# Move budget\n\n| Item | £ |\n|---|---|\n| Van hire | "
          "£320 |\n| Deposit | £1,600 |\n| **Total** | **£1,920** |\n")
    write(v, "packing.md", "# Packing\n\n| item | planned | spent so far |\n|---|---|---|\n"
          "| Boxes | £60 | £45 |\n| Total | £90 | £65 |\n\n| # | Room | % packed |\n"
          "|---|---|---|\n| 1 | kitchen | 80% |\n")
    idx, be = harness.load(tmp_path / "idx", v, "builtin")
    text = "\n".join(c["text"] for c in idx.chunks)
    assert "Item: Van hire; £320." in text and "Total: £1,920." in text
    assert "Total planned: £90; Total spent so far: £65." in text
    assert "#1; Room: kitchen; % packed: 80%." in text
    assert "£: " not in text and "Item: Total" not in text and "Item: **Total" not in text
    a = harness.ask("What is the total of the move budget?", index=idx, backend=be)
    assert "Total: £1,920" in a.answer
