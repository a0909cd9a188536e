"""Every "Try next" hint the demo prints runs as printed, on the demo's own output.

The demo runs as a user starts it: the installed ``statesource`` script, in a directory of
its own (which holds the repository's examples/ and docs/, as a clone's root does), and each
hint runs in a shell there, exactly as printed.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from statesource.format import Checkpoint

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "statesource"


@pytest.fixture(scope="module")
def hints(tmp_path_factory) -> tuple[Path, list[str]]:
    """The demo's hints, and the directory it ran in (a stand-in for a clone's root)."""
    where = tmp_path_factory.mktemp("clone")
    for name in ("examples", "docs"):
        (where / name).symlink_to(ROOT / name)
    done = subprocess.run([str(SCRIPT), "demo", "--events", "3000", "--checkpoint-every", "1000",
                           "--no-spark", "--output", "demo output"], cwd=where,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = done.stdout.split("Try next:\n", 1)[1].splitlines()
    return where, [line.strip() for line in printed if line.strip()]


def run_hint(where: Path, hint: str) -> subprocess.CompletedProcess:
    return subprocess.run(hint, shell=True, cwd=where, capture_output=True, text=True,
                          timeout=240)


def test_the_hints_are_the_expected_ones(hints):
    where, printed = hints
    output = str(where / "demo output")
    assert [shlex.split(hint)[1:] for hint in printed[:3]] == [
        ["inspect", output, "--verify"],
        ["inspect", output, "--parallelism", "3", "--plot", "state.png"],
        ["examples/read_dataframes.py", output]]
    assert len(printed) == 4


def test_the_inspect_hints_run_as_printed(hints):
    where, printed = hints
    for hint in printed[:2]:
        done = run_hint(where, hint)
        assert done.returncode == 0, (hint, done.stderr)
        assert "operator user-activity" in done.stdout
    files = len(Checkpoint.open(str(where / "demo output")).metadata.referenced_files())
    assert f"verified: {files} data files" in run_hint(where, printed[0]).stdout
    assert (where / "state.png").read_bytes().startswith(b"\x89PNG")


def test_the_documents_a_hint_names_exist(hints):
    where, printed = hints
    named = [part.split(" ")[0] for part in printed[3].split(", ")]
    assert named == ["docs/SPARK.md", "docs/FORMAT.md"]
    assert all((where / name).is_file() for name in named)


@pytest.mark.spark
def test_the_example_hint_reads_the_demo_states(hints):
    where, printed = hints
    done = run_hint(where, printed[2])
    assert done.returncode == 0, done.stderr
    for state in ("clicks", "clicks_per_minute", "last_seen", "page_counts", "recent_pages"):
        assert f" state {state} of operator user-activity" in done.stdout
    assert "|user-activity|source_offset    |operator-split|" in done.stdout
