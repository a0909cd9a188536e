"""The session helper's checks, without starting Spark."""

from __future__ import annotations

import pytest

from statesource.errors import StateSourceError
from statesource.spark import check_java


def test_missing_java_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(StateSourceError, match="Spark needs Java 17.*no java on PATH.*apt-get"):
        check_java()


def test_java_home_without_java_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(StateSourceError, match=f"JAVA_HOME={tmp_path} has no bin/java"):
        check_java()
