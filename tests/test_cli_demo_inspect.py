"""``statesource demo`` and ``statesource inspect`` end to end."""

from __future__ import annotations

import collections

import pytest

from statesource.cli import main
from statesource.demo.clickstream import clicks
from statesource.format import Checkpoint


@pytest.fixture(scope="module")
def demo_output(tmp_path_factory, spark):
    output = tmp_path_factory.mktemp("demo")
    return output


def test_demo_processes_checkpoints_and_queries(demo_output, capsys):
    assert main(["demo", "--events", "30000", "--checkpoint-every", "10000",
                 "--output", str(demo_output)]) == 0
    out = capsys.readouterr().out
    counts = collections.Counter(click.user for click in clicks(30000))
    top_user, top_clicks = counts.most_common(1)[0]
    assert f"|{top_user}|{top_clicks}" in out.replace(" ", "")
    assert "Entries per subtask if the job ran with parallelism 3" in out
    checkpoint = Checkpoint.open(str(demo_output))
    assert checkpoint.checkpoint_id == 3
    assert checkpoint.operator().keyed_state("clicks").entries == len(counts)
    assert checkpoint.read_operator_state("source_offset") == [[30000], [30000]]
    assert f"statesource inspect {demo_output}" in out


def test_inspect_summarises_and_plots(demo_output, tmp_path, capsys):
    if not (demo_output / "chk-1").exists():
        main(["demo", "--events", "3000", "--checkpoint-every", "1000", "--no-spark",
              "--output", str(demo_output)])
    capsys.readouterr()
    plot = tmp_path / "state.png"
    assert main(["inspect", str(demo_output), "--parallelism", "3", "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    op = Checkpoint.open(str(demo_output)).operator()
    clicks_state = op.keyed_state("clicks")
    assert f"{clicks_state.entries:,}" in out
    assert "rows per subtask at parallelism 3 (proposed)" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_inspect_without_matplotlib_says_how_to_install(demo_output, tmp_path, monkeypatch,
                                                        capsys):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    main(["demo", "--events", "2000", "--checkpoint-every", "1000", "--no-spark",
          "--output", str(tmp_path / "small")])
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert main(["inspect", str(tmp_path / "small"), "--plot", str(tmp_path / "x.png")]) == 1
    assert "pip install 'statesource[plot]'" in capsys.readouterr().err


def test_inspect_reports_a_missing_checkpoint(tmp_path, capsys):
    assert main(["inspect", str(tmp_path / "nothing")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_demo_checks_java_before_processing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["demo", "--events", "10", "--output", str(tmp_path / "out")]) == 1
    assert "Spark needs Java 17" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
