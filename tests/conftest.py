"""Every test runs with $VERSO_HOME set to a folder of its own: no test reads or writes
the user's own index, default or state (with $VERSO_HOME set, Verso looks in no other
place, not even ./.verso), and no test sees what another ingested as the default.
Module and session fixtures get one shared folder; a test of the defaults themselves
sets its own."""

import os
import tempfile

import pytest


def pytest_configure(config):
    os.environ["VERSO_HOME"] = tempfile.mkdtemp(prefix="verso-home-")


@pytest.fixture(autouse=True)
def _own_verso_home(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("VERSO_HOME", str(tmp_path_factory.mktemp("verso-home")))
