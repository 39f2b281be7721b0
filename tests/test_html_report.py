"""html_report: the trace page and the evaluation index, as HTML and in headless Chromium."""

import json
import re
from pathlib import Path

import pytest

from verso import evaluate as ev
from verso import scorecard
from verso import harness
from verso import html_report
from tests import browser
from tests.vaults import write

RATE_Q = "What is Maren's current day rate?"
HOSTILE = {  # note text that would run, fetch or break the page if it were not escaped
    "home/boiler 2026-03.md": "# Boiler <script>alert(1)</script>\n\nThe boiler service "
    "costs 90 pounds. <script>console.error('pwned')</script> <img src=x "
    "onerror=\"console.error('img')\"> & \"quotes\" </td></table>\n",
    "home/boiler 2026-06.md": "# Boiler\n\nThe boiler service costs 110 pounds now. "
    "<script>console.error('pwned')</script>\n",
    "home/garden.md": "# Garden\n\nThe shed roof quote is 480 pounds.\n",
}
ATTR_RE = re.compile(r'\b(?:src|href)="([^"]*)"')


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return harness.load(tmp_path_factory.mktemp("idx"), harness.SAMPLE_VAULT, "builtin")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    vault = tmp_path_factory.mktemp("hostile")
    for rel, text in HOSTILE.items():
        write(vault, rel, text)
    idx, be = harness.load(tmp_path_factory.mktemp("hidx"), vault, "builtin")
    return vault, idx, be


def _ask(loaded, q, **kw):
    idx, be = loaded[-2:]
    return harness.ask(q, index=idx, backend=be, **kw)


def test_trace_has_every_section_and_each_citation_links_to_its_passage(sample):
    page = _ask(sample, RATE_Q).to_html()
    for name in html_report.SECTIONS:
        assert f'<h2 id="{name.lower()}">{name}</h2>' in page
    cites = re.findall(r'href="#(c\d+)"', page)
    assert cites and all(f'id="{c}"' in page for c in cites)
    assert page.startswith("<!doctype html>") and "<script" not in page
    assert all(u.startswith(("#", "data:")) for u in ATTR_RE.findall(page))  # no fetch
    assert "<svg" in page and "<details>" in page      # timeline/bars, writer messages
    assert "judged by the calibration builtin (shipped)" in page   # which calibration


def test_note_text_and_question_are_escaped(hostile):
    a = _ask(hostile, "What does the <b>boiler</b> service cost now?")
    page = a.to_html()
    assert "boiler" in a.answer.lower() and "<script" not in page.lower()
    assert "&lt;script&gt;console.error(&#x27;pwned&#x27;)&lt;/script&gt;" in page
    assert "<img" not in page and "<b>boiler" not in page and "</td></table>" not in page
    assert "&lt;b&gt;boiler&lt;/b&gt;" in page


def test_gold_files_are_marked_in_every_stage_table(sample):
    a = _ask(sample, RATE_Q)
    gold = "work/rates card 2026-10-05.md"
    plain, marked = a.to_html(), a.to_html(gold=[gold])
    assert 'class="gold"' not in plain
    for section in ("retrieve", "version", "rerank"):
        part = marked.split(f'<h2 id="{section}">')[1].split("<h2")[0]
        rows = re.findall(r'<tr(?: class="([^"]*)")?>(.*?)</tr>', part)[1:]   # no header
        notes = [next(c for c in re.findall(r"<td[^>]*>(.*?)</td>", r) if not c.isdigit())
                 for _, r in rows]                        # the note cell of each row
        is_gold = [re.match(re.escape(gold) + "(?: |<|$)", n) is not None for n in notes]
        assert any(is_gold) and [("gold" in cls) for cls, _ in rows] == is_gold, section


def test_cost_table_shows_the_text_reports_figures(sample):
    a = _ask(sample, RATE_Q)
    text, page = harness.render(a), a.to_html()
    cost = page.split('<h2 id="cost">')[1]
    for line in text.splitlines():
        if line.split() and line.split()[0] in harness.STAGES + ("total",):
            name, ms, tin, tout, usd = line.split()
            assert f'{ms}</td><td class="n">{tin}</td><td class="n">{tout}</td>' \
                   f'<td class="n">{usd}' in cost, name


def test_abstain_and_bad_citation_render_plainly(sample):
    a = _ask(sample, "What's the name of my dentist?")
    page = a.to_html()
    assert "ABSTAIN \u2014 no passage reached" in page
    assert "the writer was not called" in page
    d = _ask(sample, RATE_Q).to_dict()
    d["answer"] = d["shown"] = "Rate is 760 [c1, c9]."
    page = html_report.trace_page(d)
    assert 'href="#c1"' in page and 'href="#c9"' not in page and "c9?" in page


def test_failing_sentence_is_highlighted_with_its_reason(sample):
    d = _ask(sample, RATE_Q).to_dict()
    row = d["checks"]["sentences"][0]
    row.update(ok=False, reasons=["760 not in the cited c1 <b>"])
    d["verdict"] = "ESCALATE"
    page = html_report.trace_page(d)
    assert "ESCALATE \u2014 1 of 1 sentences failed: 760 not in the cited c1 &lt;b&gt;" in page
    verify_part = page.split('<h2 id="verify">')[1]
    assert '<tr class="fail">' in verify_part and "c1 &lt;b&gt;</td></tr>" in verify_part


def test_repr_html_is_a_scoped_fragment(sample):
    frag = _ask(sample, RATE_Q)._repr_html_()
    assert frag.startswith('<div class="verso"><style>') and "<html" not in frag
    css = frag.split("<style>")[1].split("</style>")[0]
    assert all(rule.strip().startswith(".verso") for rule in re.findall(r"[^{}]+(?={)", css)
               if rule.strip())


def test_cli_writes_the_page_and_never_into_the_vault(hostile, tmp_path, capsys):
    vault, idx, _ = hostile
    out = tmp_path / "pages" / "trace.html"
    base = ["How much is the boiler service?", "--vault", str(vault), "--index",
            str(idx.dir), "--backend", "builtin"]
    assert harness.main(base + ["--html", str(out)]) == 0       # the asker's own: the text
    page = out.read_text()
    assert "110 pounds" in page and html_report._e(html_report.PRIVATE_BANNER) in page
    assert page.index("Not for sharing") < page.index("<h1>")   # at the top
    assert "holds text from private notes" in capsys.readouterr().err
    assert harness.main(base + ["--html", str(out), "--redact"]) == 0   # the copy to share
    page = out.read_text()
    assert "110 pounds" not in page and "private: text not included" in page
    assert "Not for sharing" not in page and "A copy to share (--redact)" in page
    assert "holds text" not in capsys.readouterr().err
    before = sorted(vault.rglob("*"))
    assert harness.main(base + ["--html", str(vault / "trace.html")]) == 2
    assert "inside the vault" in capsys.readouterr().err
    assert sorted(vault.rglob("*")) == before


def _eval_run(vault: Path, tmp_path: Path) -> tuple[Path, dict]:
    qs = [dict(id="b/1", question="How much is the boiler service now?", category="current",
               time_mode="present", answer="110 pounds", key_facts=["110"],
               forbidden_facts=["90"], gold_files=["home/boiler 2026-06.md"],
               answerable=True),
          dict(id="g", question="What is the shed roof quote?", category="lookup",
               time_mode="present", answer="480 pounds", key_facts=["480"],
               forbidden_facts=[], gold_files=["home/garden.md"], answerable=True),
          dict(id="n", question="What is my plumber called?", category="refuse",
               time_mode="present", answer="", key_facts=[], forbidden_facts=[],
               gold_files=[], answerable=False)]
    qf = tmp_path / "q.jsonl"
    qf.write_text("".join(json.dumps(q) + "\n" for q in qs))
    out = tmp_path / "html"
    assert ev.main(["--vault", str(vault), "--questions", str(qf), "--backend", "builtin",
                    "--index", str(tmp_path / "eidx"), "--variant", "full", "hybrid",
                    "--html", str(out), "--json"]) == 0
    return out, qs


def test_evaluate_html_index_links_every_trace_page(hostile, tmp_path, capsys):
    vault = hostile[0]
    out, qs = _eval_run(vault, tmp_path)
    result = json.loads(capsys.readouterr().out)
    index = (out / "index.html").read_text()
    for _, header, rows in scorecard.report_tables(result):      # the text report's tables
        for cell in header + [c for r in rows for c in r]:
            assert f">{html_report._e(cell)}</t" in index, cell
    links = [u for u in ATTR_RE.findall(index) if not u.startswith(("#", "data:"))]
    assert len(links) == len(qs) * 2 and all((out / u).is_file() for u in links)
    page = (out / "full" / html_report._page_name("b/1")).read_text()
    assert 'href="../index.html"' in page and 'class="gold"' in page
    assert "exact McNemar p" in index and "<svg" in index
    assert ev.main(["--vault", str(vault), "--questions", str(tmp_path / "q.jsonl"),
                    "--html", str(vault / "html")]) == 2
    assert not (vault / "html").exists()


@pytest.mark.skipif(browser.find() is None, reason="no Chromium: apt-get install chromium "
                    "(.ci/run does) to run the browser check")
@pytest.mark.slow
def test_pages_load_in_headless_chromium(sample, hostile, tmp_path, capsys):
    trace = tmp_path / "trace.html"
    html_report.save_trace(trace, _ask(sample, RATE_Q).to_dict())
    escaped = tmp_path / "hostile.html"
    html_report.save_trace(escaped, _ask(hostile, "How much is the boiler service?").to_dict())
    out, _ = _eval_run(hostile[0], tmp_path)
    capsys.readouterr()
    blank, half, bad = (tmp_path / n for n in ("blank.html", "half.html", "bad.html"))
    blank.write_text("<!doctype html><title>b</title><body style='margin:0'></body>")
    half.write_text("<!doctype html><body style='margin:0'><div style='width:500px;"
                    "height:1300px;background:#000'></div></body>")
    bad.write_text("<!doctype html><script>console.error('boom')</script><img src='no.png'>")
    pages = [trace, escaped, out / "index.html", blank, half, bad]
    got = dict(zip(pages, browser.load(pages)))
    for p in (trace, escaped, out / "index.html"):
        g = got[p]
        assert g["errors"] == [], (p, g["errors"])
        assert g["requests"] == [p.resolve().as_uri()]         # the page, nothing else
        assert browser.non_white(g["png"]) > 0.03, p
    assert got[trace]["title"].startswith("Verso trace: What is Maren")
    assert browser.non_white(got[blank]["png"]) == 0.0        # the controls: the checks
    assert abs(browser.non_white(got[half]["png"]) - 0.5) < 0.01   # can fail
    assert any("boom" in e for e in got[bad]["errors"])
    assert any("load failed" in e for e in got[bad]["errors"])
