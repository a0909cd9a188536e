"""Races between real processes (tests/race.py) over copies of one demo root."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.race import write_demo


@pytest.fixture(scope="module")
def demo_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo(tmp_path_factory.mktemp("demo") / "root")


@pytest.fixture
def root(demo_checkpoints: Path, tmp_path: Path) -> Path:
    """A fresh copy of the demo checkpoints, for one race to damage."""
    copy = tmp_path / "root"
    shutil.copytree(demo_checkpoints, copy)
    return copy
