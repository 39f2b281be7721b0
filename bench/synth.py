"""synth: a seeded synthetic vault of a given size in chunks, and questions about it.

In:  a target number of chunks, a seed, an empty (or absent) folder.
Out: markdown notes shaped like a personal vault (folders, `# Title`, `##` sections,
     frontmatter and "Updated:" dates, version families (dated names, v1/v2/final),
     exact duplicates, dated logs, a diary folder, tables, wikilinks, "Key: value" lines
     with numbers) over a Zipf-distributed vocabulary; a verso.toml; and a list of
     questions, each with the note it was drawn from. Same seed, same bytes.
Not: indexing or timing (bench/run.py does that). The chunk count is an estimate from
     the section layout; the benchmark reports the count ingest actually made.

    python bench/synth.py OUT_DIR --chunks 10000 [--seed 0] [--shape plain|real|families]

--shape real (bench/real.py) draws every note date from a pool of 140 days and adds the
shapes that make incremental indexing hard: meetings by the dozen per day, monthly
reports dated the 1st, long dated logs, families of 10..30 versions, and an imported/
folder of 5,000 notes from one template with one modified time. --shape families
(issue 37): almost every note its own family, ~5 chunks a note (20k notes at 100k).

Sections hold 40..150 words (one chunk each: ingest merges below 30 and windows above
180); about 1 in 25 is one long line of 250..450 words (several windowed chunks). Notes
average ~10 chunks, so 100k chunks is a vault of ~10k notes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

VOCAB_SIZE = 40_000        # distinct content words
ZIPF_S = 1.07              # p(rank r) ~ 1 / r^s
STOPWORD_SHARE = 0.35      # share of running words that are stopwords
NUMBER_SHARE = 0.03        # share of running words that are numbers / money
START, END = np.datetime64("2023-01-01"), np.datetime64("2026-10-31")
FOLDERS = ["work", "work/clients", "projects", "projects/archive", "people", "areas",
           "finance", "health", "training", "reading", "home", "travel", "ideas"]
LOG_FOLDER, DIARY_FOLDER = "logs", "journal"
KINDS = {"topic": 0.56, "family": 0.14, "log": 0.08, "diary": 0.17, "duplicate": 0.05}
QUESTION_TEMPLATES = [
    "what is the {0} {1}", "what is my current {0} for {1}", "how did the {0} {1} change",
    "{0} {1} {2}", "when did i last note {0} and {1}", "which {0} has the {1} {2}",
    "what did i decide about {0} {1}", "latest {0} {1} figure",
]
STOPWORDS = ("the of and to a in is that for it on was with as at by this be from or "
             "are have but not an they which you we his her had were their there been "
             "has more when will would can about into than then them these so its "
             "our out what who some could up other also only over after").split()
SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"] + ["ar", "en", "or", "il"]


@dataclass
class Vault:
    root: Path
    notes: int = 0
    est_chunks: int = 0
    bytes: int = 0
    questions: list = field(default_factory=list)   # {"question", "path"}
    counts: dict = field(default_factory=dict)       # notes by kind


class _Words:
    """Zipf vocabulary of pronounceable pseudo-words plus stopwords and numbers."""

    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        syl = np.array(SYLLABLES, dtype=object)
        words: dict[str, None] = {}
        while len(words) < VOCAB_SIZE:            # 2..4 syllables, first spelling kept
            picks = syl[rng.integers(0, len(SYLLABLES), (VOCAB_SIZE, 4))]
            sizes = rng.integers(2, 5, VOCAB_SIZE)
            words.update(dict.fromkeys("".join(p[:k]) for p, k in zip(picks, sizes)))
        self.vocab = np.array(list(words)[:VOCAB_SIZE], dtype=object)
        p = 1.0 / np.arange(1, VOCAB_SIZE + 1) ** ZIPF_S
        self.cdf = np.cumsum(p / p.sum())
        self.stop = np.array(STOPWORDS, dtype=object)

    def ranks(self, n: int) -> np.ndarray:
        return np.searchsorted(self.cdf, self.rng.random(n)).clip(0, VOCAB_SIZE - 1)

    def content(self, n: int) -> list[str]:
        return list(self.vocab[self.ranks(n)])

    def number(self) -> str:
        r = self.rng
        kind = int(r.integers(0, 5))
        if kind == 0:
            return f"£{int(r.integers(1, 40)) * 50 + 1000:,}"
        if kind == 1:
            return f"{r.integers(1, 99)}.{r.integers(0, 10)}"
        if kind == 2:
            return f"{int(r.integers(2, 90))}%"
        if kind == 3:
            return str(int(r.integers(1, 400)))
        return f"{int(r.integers(1, 60)) * 250:,}"

    def sentences(self, n_words: int) -> str:
        """About n_words running words in sentences of 8..20 words."""
        r = self.rng
        kinds = r.random(n_words)
        content = iter(self.content(n_words))
        stops = self.stop[r.integers(0, len(self.stop), n_words)]
        out, sentence, left = [], [], int(r.integers(8, 21))
        for i in range(n_words):
            if kinds[i] < NUMBER_SHARE:
                w = self.number()
            elif kinds[i] < NUMBER_SHARE + STOPWORD_SHARE:
                w = stops[i]
            else:
                w = next(content)
                if kinds[i] > 0.93:
                    w += "s"            # plurals for the stemmer
            sentence.append(w)
            left -= 1
            if left == 0 or i == n_words - 1:
                sentence[0] = sentence[0].capitalize()
                out.append(" ".join(sentence) + ".")
                sentence, left = [], int(r.integers(8, 21))
        return " ".join(out)


def _date(rng) -> np.datetime64:
    return START + np.timedelta64(int(rng.integers(0, int((END - START).astype(int)))), "D")


def _name(words: _Words, taken: set, n: int = 2) -> str:
    while True:
        stem = " ".join(words.vocab[words.rng.integers(200, 6000, n)])
        if stem not in taken:
            taken.add(stem)
            return stem


class _Writer:
    def __init__(self, root: Path, seed: int, dates: int = 0):
        self.root, self.rng = root, np.random.default_rng(seed)
        self.pool = (sorted({_date(self.rng) for _ in range(dates * 2)})[::2][:dates]
                     if dates else None)    # real shape: every note date from this pool
        self.words = _Words(self.rng)
        self.taken: set = set()
        self.stems: list[str] = []      # link targets
        self.files: dict[str, str] = {}  # rel path -> text
        self.chunks = 0
        self.sections: list[tuple[str, list[str]]] = []  # (path, content words) samples
        self.counts = {k: 0 for k in KINDS}

    def _day(self) -> np.datetime64:
        if self.pool is None:
            return _date(self.rng)
        return self.pool[int(self.rng.integers(0, len(self.pool)))]

    # -- pieces
    def _link(self) -> str:
        if not self.stems:
            return ""
        target = self.stems[int(self.rng.integers(0, len(self.stems)))]
        return f" See [[{target}]]." if self.rng.random() < 0.8 else f" See [[{target}|that]]."

    def _table(self) -> tuple[str, int]:
        r, w = self.rng, self.words
        cols = [c.capitalize() for c in w.content(3)]
        rows = [f"| {' | '.join(cols)} |", "|---|---|---|"]
        n = int(r.integers(2, 6))
        for _ in range(n):
            rows.append(f"| {w.content(1)[0]} | {w.number()} | {' '.join(w.content(2))} |")
        return "\n".join(rows), n * 7

    def _section_text(self, path: str) -> tuple[str, int]:
        """(markdown text, chunks it makes)."""
        r, w = self.rng, self.words
        u = r.random()
        if u < 0.04:                                   # one long line: windows
            n = int(r.integers(250, 451))
            return w.sentences(n), math.ceil((n - 40) / 140)
        parts, budget = [], int(r.integers(40, 151))
        if u < 0.14:                                   # a table and a little text
            table, words = self._table()
            parts.append(table)
            budget = max(30, min(budget, 150 - words) - 0)
        elif u < 0.30:                                 # key: value state lines
            for _ in range(int(r.integers(2, 5))):
                key = " ".join(w.content(int(r.integers(1, 3)))).capitalize()
                parts.append(f"- {key}: {w.number()}")
            budget = max(30, budget - 12)
        text = w.sentences(budget)
        if r.random() < 0.3:
            text += self._link()
        parts.insert(0, text)
        self._sample(path, text)
        return "\n\n".join(parts), 1

    def _sample(self, path: str, text: str) -> None:
        if self.rng.random() < 0.2:
            words = [t.strip(".,").lower() for t in text.split()]
            content = [t for t in words if t.isalpha() and t not in STOPWORDS]
            if len(content) >= 4:
                self.sections.append((path, content))

    def _sections(self, path: str, n: int, dated: list | None = None) -> str:
        out = []
        for i in range(n):
            title = (str(dated[i]) if dated else
                     " ".join(self.words.content(int(self.rng.integers(1, 4)))).capitalize())
            text, chunks = self._section_text(path)
            self.chunks += chunks
            out.append(f"## {title}\n\n{text}\n")
        return "\n".join(out)

    def _put(self, rel: str, text: str) -> None:
        self.files[rel] = text

    # -- note kinds
    def topic(self) -> None:
        r = self.rng
        folder = FOLDERS[int(r.integers(0, len(FOLDERS)))]
        stem = _name(self.words, self.taken)
        rel = f"{folder}/{stem}.md"
        head = ""
        if r.random() < 0.3:
            tags = ", ".join(self.words.content(2))
            head = f"---\nupdated: {self._day()}\ntags: [{tags}]\n---\n"
        body = f"# {stem.title()}\n\n"
        if r.random() < 0.2:
            body += f"Updated: {self._day()}\n\n"
        n = min(60, 1 + int(r.geometric(1 / 9)))
        self._put(rel, head + body + self._sections(rel, n))
        self.stems.append(stem)
        self.counts["topic"] += 1

    def family(self) -> None:
        """2..4 versions: dated names or v1/v2/final; later ones edit a few sections."""
        r = self.rng
        folder = FOLDERS[int(r.integers(0, len(FOLDERS)))]
        stem = _name(self.words, self.taken)
        n_ver = int(r.integers(2, 5))
        n_sec = min(30, 1 + int(r.geometric(1 / 6)))
        dates = sorted({self._day() for _ in range(n_ver)})
        style = int(r.integers(0, 3))
        sections = self._sections(f"{folder}/{stem}.md", n_sec).split("\n## ")
        for i, d in enumerate(dates):
            name = (f"{stem} {d}" if style == 0 else f"{stem}_{str(d)[:7]}" if style == 1
                    else f"{stem} {'final' if i == len(dates) - 1 else f'v{i + 1}'}")
            if i:                                   # a new version: rewrite one section
                j = int(r.integers(0, len(sections)))
                text, chunks = self._section_text(f"{folder}/{name}.md")
                sections[j] = sections[j].split("\n", 1)[0] + f"\n\n{text}\n"
            self.chunks += n_sec if i else 0
            rel = f"{folder}/{name}.md"
            self._put(rel, f"# {stem.title()}\n\nUpdated: {d}\n\n## " + "\n## ".join(
                s.removeprefix("## ") for s in sections))
            self.counts["family"] += 1
        self.stems.append(name)

    def log(self) -> None:
        r = self.rng
        stem = _name(self.words, self.taken) + " log"
        n = min(50, 2 + int(r.geometric(1 / 12)))
        days = sorted({self._day() for _ in range(n)})
        rel = f"{LOG_FOLDER}/{stem}.md"
        self._put(rel, f"# {stem.title()}\n\n" + self._sections(rel, len(days), days))
        self.stems.append(stem)
        self.counts["log"] += 1

    def diary(self) -> None:
        r = self.rng
        d = self._day()
        rel = f"{DIARY_FOLDER}/{d}.md"
        if rel in self.files:
            return
        self._put(rel, f"# {d}\n\n" + self._sections(rel, int(r.integers(1, 4))))
        self.counts["diary"] += 1

    def duplicate(self) -> None:
        """An exact copy ("name (1).md", "name copy.md") of an earlier note: no chunks."""
        if not self.files:
            return
        paths = list(self.files)
        src = paths[int(self.rng.integers(0, len(paths)))]
        if src.startswith(DIARY_FOLDER):
            return
        base = src[:-3]
        rel = f"{base} (1).md" if self.rng.random() < 0.5 else f"{base} copy.md"
        if rel not in self.files:
            self._put(rel, self.files[src])
            self.counts["duplicate"] += 1


class _RealWriter(_Writer):
    """The shapes that make real vaults hard to index incrementally (issue 27): a note
    date pool of REAL_DATES days (so hundreds of notes share each date), meeting notes
    by the dozen per day, monthly reports dated the 1st, long dated logs, version
    families of 10..30 files, and an imported/ folder of IMPORTED notes from one
    template, half with one shared `created:` date and all with one modified time."""

    def meeting(self) -> None:
        r, d = self.rng, self._day()
        stem = _name(self.words, self.taken) + " meeting"
        rel = f"meetings/{d}/{stem}.md"
        who = ", ".join(self.words.content(3))
        head = f"---\ndate: {d}\ntype: meeting\nattendees: [{who}]\n---\n"
        self._put(rel, head + f"# {stem.title()}\n\n" + self._sections(rel, int(r.integers(1, 4))))
        self.counts["meeting"] += 1

    def monthly(self) -> None:
        d = str(self._day())[:7]
        stem = _name(self.words, self.taken, 1) + f" report {d}"
        rel = f"reports/{stem}.md"
        self._put(rel, f"---\ndate: {d}-01\n---\n# {stem.title()}\n\n"
                  + self._sections(rel, int(self.rng.integers(2, 7))))
        self.counts["monthly"] += 1

    def long_log(self) -> None:
        r = self.rng
        stem = _name(self.words, self.taken) + " journal"
        days = sorted({_date(r) for _ in range(int(r.integers(150, 400)))})
        rel = f"{LOG_FOLDER}/{stem}.md"
        self._put(rel, f"# {stem.title()}\n\n" + self._sections(rel, len(days), days))
        self.counts["long_log"] += 1

    def big_family(self) -> None:
        r = self.rng
        stem = _name(self.words, self.taken)
        n_sec = int(r.integers(2, 6))
        sections = self._sections(f"docs/{stem}.md", n_sec).split("\n## ")
        dates = sorted({self._day() for _ in range(int(r.integers(10, 31)))})
        for i, d in enumerate(dates):
            j = int(r.integers(0, len(sections)))
            text, _ = self._section_text(f"docs/{stem} {d}.md")
            sections[j] = sections[j].split("\n", 1)[0] + f"\n\n{text}\n"
            self.chunks += n_sec if i else 0
            self._put(f"docs/{stem} {d}.md", f"# {stem.title()}\n\nUpdated: {d}\n\n## "
                      + "\n## ".join(x.removeprefix("## ") for x in sections))
            self.counts["big_family"] += 1
        self.stems.append(f"{stem} {dates[-1]}")

    def imported(self, n: int) -> None:
        shared = self._day()
        for i in range(n):
            stem = _name(self.words, self.taken)
            head = (f"---\ncreated: {shared}\nsource: evernote\ntags: [imported]\n---\n"
                    if i % 2 == 0 else "")
            rel = f"imported/{stem}.md"
            self._put(rel, head + f"# {stem.title()}\n\nImported from the old notebook.\n\n"
                      + self._sections(rel, int(self.rng.integers(1, 3))))
            self.counts["imported"] += 1


REAL_KINDS = {"topic": 0.30, "family": 0.10, "big_family": 0.008, "log": 0.04,
              "long_log": 0.004, "diary": 0.10, "duplicate": 0.05, "meeting": 0.30,
              "monthly": 0.098}
REAL_DATES = 140
IMPORTED = 5000


class _FamiliesWriter(_Writer):
    """Almost every note its own family (issue 37): topic notes of about FAMILY_CHUNKS
    sections each in many folders, so 100k chunks is a vault of ~20k notes; a few
    version families and exact copies keep the cross-note rules at work."""

    def single(self) -> None:
        r = self.rng
        folder = f"{FOLDERS[int(r.integers(0, len(FOLDERS)))]}/{int(r.integers(0, 40)):02d}"
        stem = _name(self.words, self.taken, 3)
        rel = f"{folder}/{stem}.md"
        head = f"---\nupdated: {self._day()}\n---\n" if r.random() < 0.3 else ""
        n = min(20, int(r.geometric(1 / FAMILY_CHUNKS)))
        self._put(rel, head + f"# {stem.title()}\n\n" + self._sections(rel, n))
        self.stems.append(stem)
        self.counts["single"] += 1


FAMILIES_KINDS = {"single": 0.98, "family": 0.005, "duplicate": 0.015}
FAMILY_CHUNKS = 5


def _questions(w: _Writer, n: int) -> list[dict]:
    r = np.random.default_rng(w.rng.integers(0, 2**32))
    out = []
    for i in range(n):
        path, content = w.sections[int(r.integers(0, len(w.sections)))]
        picks = list(dict.fromkeys(content[j] for j in r.permutation(len(content))[:4]))
        template = QUESTION_TEMPLATES[i % len(QUESTION_TEMPLATES)]
        need = template.count("{")
        picks = (picks * 3)[:need]
        out.append({"question": template.format(*picks) + "?", "path": path})
    return out


CONFIG = """# synthetic vault (bench/synth.py)
ignore = ["templates/**"]

[folders.journal]
versioned = false

[folders.work]
privacy = "shareable"

[folders.projects]
privacy = "shareable"
"""


SHAPES = {"plain": KINDS, "real": REAL_KINDS, "families": FAMILIES_KINDS}


def make_vault(root, chunks: int, seed: int = 0, questions: int = 200,
               shape: str = "plain") -> Vault:
    """Write a vault of about `chunks` chunks into root (created; must be empty).
    shape "real": _RealWriter's shapes (the imported folder scaled down below 50k chunks);
    "families": _FamiliesWriter's, one family per note (about 5 chunks a note)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise ValueError(f"{root} is not empty: pass a new folder")
    if shape not in SHAPES:
        raise ValueError(f"shape {shape!r}: one of {', '.join(SHAPES)}")
    kinds = SHAPES[shape]
    if shape == "plain":
        w = _Writer(root, seed)
    elif shape == "families":
        w = _FamiliesWriter(root, seed)
        w.counts = dict.fromkeys(FAMILIES_KINDS, 0)
    else:
        w = _RealWriter(root, seed, REAL_DATES)
        w.counts = dict.fromkeys(list(REAL_KINDS) + ["imported"], 0)
        w.imported(min(IMPORTED, chunks // 20))
    kinds, probs = list(kinds), np.array(list(kinds.values()))
    while w.chunks < chunks:
        getattr(w, kinds[int(np.searchsorted(np.cumsum(probs), w.rng.random()))])()
    total = 0
    for rel, text in w.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        total += len(data)
    (root / "verso.toml").write_text(CONFIG, encoding="utf-8")
    # mtimes are fixed so "undated" notes date the same on every run
    stamp = float((np.datetime64("2026-11-01") - np.datetime64("1970-01-01")).astype(int) * 86400)
    for rel in w.files:
        os.utime(root / rel, (stamp, stamp))
    return Vault(root, len(w.files), w.chunks, total, _questions(w, questions), w.counts)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="synth.py", description=__doc__.split("\n")[0])
    p.add_argument("out", help="new folder for the vault")
    p.add_argument("--chunks", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--shape", choices=tuple(SHAPES), default="plain",
                   help="real: many notes per date, imports, long logs, big families; "
                   "families: one family per note, ~5 chunks each")
    a = p.parse_args(argv)
    try:
        v = make_vault(a.out, a.chunks, a.seed, shape=a.shape)
    except ValueError as e:
        print(f"synth: {e}", file=sys.stderr)
        return 2
    print(json.dumps({"root": str(v.root), "notes": v.notes, "est_chunks": v.est_chunks,
                      "bytes": v.bytes, "kinds": v.counts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
