"""Verso installs as one package, `verso`: nothing else at the top of site-packages, so a
notebook folder's own models.py, chat.py or version.py never shadows Verso's; the data
it needs (the sample vault, the splits, the Modelfile) ships inside it; and a plain
(non-editable) install answers its first question from any folder."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import ollama
import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
SHADOWS = ("models", "chat", "version", "harness", "store", "cli")
ASK = ("import verso; a = verso.ask(\"What is Maren's current day rate?\", backend='builtin'); "
       "print(a.sample_vault, '760' in a.answer)")


def _shadowed_folder(tmp_path: Path) -> Path:
    """A notebook folder whose own modules carry Verso's module names and raise."""
    folder = tmp_path / "notebook"
    folder.mkdir()
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(f"raise ImportError('the user\\'s own {name}.py')\n")
    return folder


def _env(tmp_path: Path, **extra) -> dict:
    return dict(os.environ, VERSO_HOME=str(tmp_path / "home"), **extra)


def _bare(code: str, *paths) -> list[str]:
    """Python running code without site-packages (-S: no .pth, so no editable install
    of Verso), seeing numpy, requests and ollama where they are, and the paths given."""
    deps = {str(Path(m.__file__).resolve().parent.parent) for m in (np, requests, ollama)}
    return [sys.executable, "-S", "-c",
            f"import sys; sys.path[1:1] = {[*map(str, paths), *sorted(deps)]!r}; {code}"]


def test_a_folder_with_its_own_models_py_does_not_shadow_verso(tmp_path):
    folder = _shadowed_folder(tmp_path)
    run = subprocess.run([sys.executable, "-c", ASK], cwd=folder, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                          str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    if run.returncode != 0 and "No matching distribution" in run.stderr:
        pytest.skip("pip cannot fetch setuptools to build the wheel here")
    assert run.returncode == 0, run.stderr
    return next(out.glob("verso-*.whl"))


@pytest.mark.slow
def test_the_wheel_holds_the_verso_package_and_its_data_only(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"verso", next(t for t in tops if t.endswith(".dist-info"))}
    for needed in ("verso/harness.py", "verso/__init__.py", "verso/Modelfile",
                   "verso/sample-vault/work/rates card 2026-10-05.md",
                   "verso/questions/dev.jsonl", "verso/questions/splits.json",
                   "verso/vaults/second-vault/verso.toml", "verso/line_scores.py",
                   "verso/builtin_writer.py", "verso/choosing_writer.py",
                   "verso/file_columns.py", "verso/file_records.py",
                   "verso/word_vectors.npy", "verso/word_vectors.json"):
        assert needed in names, needed
    assert not any(n.startswith("verso/tests/") for n in names)
    gone = ("reader", "extract", "choose", "filecols", "catalogue")   # renamed in issue 45
    assert not [n for n in names if n in {f"verso/{m}.py" for m in gone}]


@pytest.mark.slow
def test_a_plain_install_answers_its_first_question_from_another_folder(wheel, tmp_path):
    target = tmp_path / "site"
    run = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                          "--target", str(target), str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert sorted(p.name for p in target.iterdir() if p.name != "bin")[0] == "verso"
    folder = _shadowed_folder(tmp_path)
    run = subprocess.run(_bare(ASK, target), cwd=folder,
                         env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True"]
    assert "site/verso/sample-vault" in (tmp_path / "home" / "sample" / "manifest.json"
                                         ).read_text()


def test_python_harness_py_runs_in_a_checkout_without_an_install(tmp_path):
    run_file = ("import runpy; sys.path.insert(0, {root!r}); sys.argv = ['harness.py', "
                "\"What is Maren's current day rate?\", '--backend', 'builtin']; "
                "runpy.run_path({root!r} + '/harness.py', run_name='__main__')")
    run = subprocess.run(_bare(run_file.format(root=str(ROOT))), cwd=tmp_path,
                         env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "760" in run.stdout
