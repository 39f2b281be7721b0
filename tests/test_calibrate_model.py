"""`verso calibrate` (calibrate_model.py) against the fake Ollama server scripted as two
models: one that always names the line holding the key facts, one that names a line
holding none. The first must win disagreements and ship, the second lose them and ship
nothing; a killed calibration resumes without asking a finished question again."""

import json
import re
from pathlib import Path

import pytest

from verso import calibrate
from verso import calibrate_model
from verso import evaluate
from verso import harness
from verso import measures
from verso import passages

from fakes import FakeOllama


def _facts() -> dict:
    """{question: (key facts, forbidden facts)} of every question set shipped."""
    out = {}
    for qfile in sorted(calibrate.tuning_splits()["dev"][1].parent.glob("*.jsonl")):
        for q in evaluate.load_questions(qfile):
            out[q["question"]] = (q["key_facts"] if q["answerable"] else [],
                                  q["forbidden_facts"])
    return out


FACTS = _facts()
ROOT = Path(__file__).resolve().parent.parent


def _offered(prompt: str) -> tuple[list, list, list]:
    q = re.search(r"(?im)^\s*question:\s*(.+)$", prompt).group(1).strip()
    lines = re.findall(r"(?m)^(\d+)\. (.*) \(from: [^)]*\)$", prompt)
    facts, forbidden = FACTS.get(q, ([], []))
    return facts, forbidden, [(int(n), text) for n, text in lines]


def oracle(prompt: str) -> str:
    """The lines holding the question's key facts (as many as the lines offered hold),
    none holding a forbidden fact; no line when none holds a key fact."""
    facts, forbidden, lines = _offered(prompt)
    clean = [(n, t) for n, t in lines if not any(measures.has_fact(t, f) for f in forbidden)]
    todo, picks = set(facts), []
    while todo:
        got = max(clean, key=lambda x: (sum(measures.has_fact(x[1], f) for f in todo), -x[0]),
                  default=None)
        held = {f for f in todo if got and measures.has_fact(got[1], f)}
        if not held:
            break
        picks.append(got[0])
        todo -= held
    return json.dumps({"lines": picks})


def contrary(prompt: str) -> str:
    """A line holding none of the key facts (the last such line offered)."""
    facts, _, lines = _offered(prompt)
    wrong = [n for n, t in lines if not any(measures.has_fact(t, f) for f in facts)]
    return json.dumps({"lines": wrong[-1:] or [lines[-1][0]] if lines else []})


def calibrate_with(chooser, digest, monkeypatch, argv):
    fake = FakeOllama(chooser=chooser, digest=digest)
    fake.__enter__()
    monkeypatch.setenv("OLLAMA_HOST", fake.url)
    try:
        code = calibrate_model.main(argv)
    finally:
        fake.__exit__(None, None, None)
    return code, fake


def _rows(home, digest) -> list[dict]:
    path = home / "calibrations" / f"ollama@{digest[:12]}.rows.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_model_that_names_the_answering_line_wins_disagreements_one_that_does_not_loses(
        tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    monkeypatch.setenv("VERSO_HOME", str(home))
    good, bad = "a" * 64, "b" * 64
    assert calibrate_with(oracle, good, monkeypatch, [])[0] == 0
    assert calibrate_with(contrary, bad, monkeypatch, [])[0] == 0
    out = capsys.readouterr().out
    assert "-> model" in out and "-> reader" in out
    for digest, rule in ((good, "model"), (bad, "reader")):
        cal = json.loads(calibrate.stored_path(f"ollama@{digest[:12]}").read_text())
        assert cal["on_disagreement"]["choice"] == rule
        assert cal["questions"] == sum(len(evaluate.load_questions(q))
                                       for _, q in calibrate.tuning_splits().values())
        right = cal["on_disagreement"]["right"]
        assert (right["model"] > 2 * right["reader"]) == (rule == "model")
        v = cal["verdicts"]["choose"]
        if v["threshold"] <= 1:                      # what ships holds the bound held out
            ok, ship = (sum(x[i] for x in v["held_out"].values()) for i in (0, 1))
            assert ship >= 29 and ok / ship >= 0.9
    bad_cal = json.loads(calibrate.stored_path(f"ollama@{bad[:12]}").read_text())
    assert bad_cal["verdicts"]["choose"]["threshold"] > 1       # the wrong reader: none
    # on the frozen splits the calibrated good model answers more than the reader alone
    table = json.loads((ROOT / "questions" / "splits.json").read_text())["splits"]
    rights = {"ollama": 0, "builtin": 0}
    with FakeOllama(chooser=oracle, digest=good) as fake:
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        for split in ("test", "second", "sixth"):
            for backend in rights:
                out = tmp_path / f"{split}-{backend}"
                assert evaluate.main([
                    "--vault", str(ROOT / table[split]["vault"]), "--questions",
                    str(ROOT / "questions" / f"{split}.jsonl"), "--backend", backend,
                    "--variant", "full", "--out", str(out), "--json"]) == 0
                recs = evaluate.load_records(out)
                rights[backend] += sum(r["answer_correct"] for r in recs)
                if backend == "ollama":
                    assert {r["calibration_key"] for r in recs if r["features"]} == \
                        {f"ollama@{good[:12]}"}
                    ships = [r for r in recs if r["verdict"] == "SHIP"]
                    assert sum(r["answer_correct"] for r in ships) >= 0.9 * len(ships)
    capsys.readouterr()
    assert rights["ollama"] > rights["builtin"]


def test_a_killed_calibration_resumes_without_asking_a_finished_question(tmp_path,
                                                                          monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("VERSO_HOME", str(home))
    real, asked = calibrate_model.measure, []

    def dies_on_the_fourth(q, *a, **k):
        asked.append(q["id"])
        if len(asked) == 4:
            raise KeyboardInterrupt
        return real(q, *a, **k)
    monkeypatch.setattr(calibrate_model, "measure", dies_on_the_fourth)
    argv = ["--splits", "dev3", "dev5", "--limit", "3"]
    with pytest.raises(KeyboardInterrupt):
        calibrate_with(oracle, "d" * 64, monkeypatch, argv)
    assert len(_rows(home, "d" * 64)) == 3                 # kept as they came
    first = list(asked)
    asked.clear()
    assert calibrate_with(oracle, "d" * 64, monkeypatch, argv)[0] == 0
    assert asked[0] == first[3] and len(asked) == 3               # the rest only
    assert not set(asked) & set(first[:3])
    rows = _rows(home, "d" * 64)
    assert sorted((r["split"], r["id"]) for r in rows) == sorted(
        {(r["split"], r["id"]) for r in rows}) and len(rows) == 6
    cal = json.loads(calibrate.stored_path("ollama@" + "d" * 12).read_text())
    assert cal["questions"] == 6 and cal["splits"] == ["dev3", "dev5"]
    assert cal["format"] == calibrate.STORED_FORMAT and cal["date"] and cal["verso"]
    asked.clear()                                         # --refit asks nothing
    assert calibrate_with(oracle, "d" * 64, monkeypatch, argv + ["--refit"])[0] == 0
    assert asked == []


def test_the_evidence_ranker_is_fitted_to_the_embedder_once_asking_the_model_nothing(
        tmp_path, monkeypatch, capsys):
    """`verso calibrate --evidence` gathers the embedder's pools of the tuning questions
    and stores its ranker, asking the model nothing (whatever judge is named); a
    calibration of the model keeps that fit while it asks no more questions than the
    fit was made on, fits it again when it asks more or the file is damaged, and
    --refit never fits it."""
    home = tmp_path / "home"
    monkeypatch.setenv("VERSO_HOME", str(home))
    argv = ["--splits", "dev2", "dev3", "--limit", "3"]           # one vault, two splits
    code, fake = calibrate_with(oracle, "e" * 64, monkeypatch,
                                argv + ["--evidence", "--judge", "ollama"])
    assert code == 0 and fake.bodies("/api/chat") == []
    n = sum(q["answerable"] and bool(q["key_facts"]) for s in ("dev2", "dev3")
            for q in evaluate.load_questions(calibrate.tuning_splits()[s][1])[:3])
    assert f"evidence ranker for ollama:nomic-embed-text: {n} questions" in \
        capsys.readouterr().out
    path = calibrate.stored_path(passages.stored_key("ollama:nomic-embed-text"))
    ev = json.loads(path.read_text())
    assert ev["splits"] == ["dev2", "dev3"] and ev["limit"] == 3 and ev["sections"] > 0
    assert ev["use"] == "shipped" and ev["held_out"] is None    # nothing to hold out
    assert set(ev["weights"]) == set(passages.FEATURES) and ev["ranker"] == passages.RANKER
    before = path.stat().st_mtime_ns
    assert calibrate_with(oracle, "e" * 64, monkeypatch, ["--splits", "dev2", "--limit",
                                                          "2"])[0] == 0   # asks fewer
    assert path.stat().st_mtime_ns == before
    assert "the shipped one" in capsys.readouterr().out
    assert calibrate_with(oracle, "e" * 64, monkeypatch, ["--splits", "dev4", "dev5",
                                                          "--limit", "5"])[0] == 0
    ev = json.loads(path.read_text())              # asks more: fitted again
    assert ev["questions"] > n
    assert ev["splits"] == ["dev4", "dev5"] and ev["held_out"] is not None
    assert ev["use"] == "shipped" and "too few to use it" in ev["why"]   # a quick pass
    capsys.readouterr()
    path.write_text(json.dumps({"format": 1, "key": ev["key"], "ranker": passages.RANKER,
                                "weights": {"bm25": None}}))
    before = path.stat().st_mtime_ns
    assert calibrate_with(oracle, "e" * 64, monkeypatch, ["--splits", "dev4", "--limit",
                                                          "1", "--refit"])[0] == 0
    assert path.stat().st_mtime_ns == before and "damaged" in capsys.readouterr().out
    assert calibrate_with(oracle, "e" * 64, monkeypatch, ["--splits", "dev4", "--limit",
                                                          "1"])[0] == 0
    assert json.loads(path.read_text())["ranker"] == passages.RANKER     # mended
    with pytest.raises(SystemExit):                   # two asks that cannot both hold
        calibrate_model.main(["--evidence", "--refit"])


def test_until_a_model_is_calibrated_both_readings_are_shown_then_its_policy_holds(
        tmp_path, monkeypatch):
    monkeypatch.setenv("VERSO_HOME", str(tmp_path / "home"))
    vault, _ = calibrate.tuning_splits()["dev"]
    with FakeOllama(chooser=contrary, digest="e" * 64) as fake:
        monkeypatch.setenv("OLLAMA_HOST", fake.url)
        idx, be = harness.load(index=str(tmp_path / "idx"), vault=vault, backend="ollama",
                               judge="builtin")
        for x in evaluate.load_questions(calibrate.tuning_splits()["dev"][1]):
            a = harness.ask(x["question"], index=idx, backend=be)
            if a.alternate and a.checks["passed"]:   # readers disagree, checks pass
                q = x["question"]
                break
        # verify passed it: the calibration this model lacks is what escalates it
        assert a.alternate["by"] == "reader" and a.verdict == "ESCALATE"
        assert a.checks["calibration"]["threshold"] is None and a.confidence is None
        assert a.checks["calibration"]["why"] == calibrate.MODEL_NOT_CALIBRATED
        assert a.shown.startswith("Not sure — two readings") and a.alternate["answer"] in a.shown
        assert a.answer in a.shown and "verso calibrate" in a.shown
        assert a.checks["calibration"]["by"] == {"key": "ollama@" + "e" * 12, "source": None}
        path = calibrate.stored_path("ollama@" + "e" * 12)
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({
            "format": calibrate.STORED_FORMAT, "key": "ollama@" + "e" * 12, "date": "2026-12-03",
            "on_disagreement": {"choice": "reader"}, "synthesis": {"choice": "generate"},
            "change": {"choice": "choose"},
            "verdicts": {"choose": dict(calibrate.CALIBRATIONS["builtin"],
                                        features=list(calibrate.feature_names("ollama")),
                                        mean=calibrate.CALIBRATIONS["builtin"]["mean"] + [0.5],
                                        scale=calibrate.CALIBRATIONS["builtin"]["scale"] + [1],
                                        weights=calibrate.CALIBRATIONS["builtin"]["weights"]
                                        + [0]), "generate": None}}))
        b = harness.ask(q, index=idx, backend=be)
    assert b.alternate is None and b.answer == a.alternate["answer"]     # the reader's
    assert b.checks["calibration"]["by"]["source"] == str(path) and b.confidence is not None
