"""The README's expected output of its first command is what the command prints: the
README block is compared with a run line by line, the milliseconds of the stage table
aside (they are this run's). Edit the code and not the README, and this fails."""

import re
from pathlib import Path

import pytest
import requests

from verso import cli
from verso import models

README = Path(__file__).resolve().parent.parent / "README.md"
COMMAND = "What is Maren's current day rate?"
MS_RE = re.compile(r"^(\S+)\s+\d+\.\d+\s+(\d+)\s+(\d+)\s+(\d+\.\d+)$")   # a stage table row


def _block() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index("```\n", text.index("Expected output (")) + 4
    return text[start:text.index("```", start)].rstrip("\n").split("\n")


def _plain(lines: list[str]) -> list[str]:
    return [MS_RE.sub(r"\1 MS \2 \3 \4", line) for line in lines]   # ms: this run's


def test_the_first_command_prints_what_the_readme_shows(capsys, monkeypatch):
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    try:
        requests.get(models.OLLAMA_DEFAULT_HOST, timeout=0.5)
        pytest.skip("an Ollama answers here: `auto` would choose it")
    except requests.RequestException:
        pass
    assert cli.main([COMMAND]) == 0
    out = capsys.readouterr()
    assert _plain(out.err.splitlines() + out.out.rstrip("\n").split("\n")) == _plain(_block())
