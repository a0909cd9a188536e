"""``statesource demo`` and ``statesource inspect`` end to end."""

from __future__ import annotations

import collections
import shlex
import shutil
import sys
import time

import pytest

import statesource
from statesource.cli import main
from statesource.cli.demo import try_next
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


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory):
    output = tmp_path_factory.mktemp("small") / "demo"
    assert main(["demo", "--events", "3000", "--checkpoint-every", "1000", "--no-spark",
                 "--output", str(output)]) == 0
    return output


def copy_of(small_demo, tmp_path):
    copied = tmp_path / "copy"
    shutil.copytree(small_demo, copied)
    return copied


def test_version_names_the_package_and_the_formats_written(small_demo, capsys):
    with pytest.raises(SystemExit) as exit_code:
        main(["--version"])
    assert exit_code.value.code == 0
    assert capsys.readouterr().out.strip() == (
        f"statesource {statesource.__version__} (writes checkpoint format v2, an incremental"
        " checkpoint up to v5; reads 1, 2, 3, 4, 5)")
    # what the demo writes (no incremental checkpoint) is the version named first
    assert Checkpoint.open(str(small_demo)).metadata.format_version == 2


def test_inspect_says_what_it_checked(small_demo, capsys):
    assert main(["inspect", str(small_demo)]) == 0
    out = capsys.readouterr().out
    files = len(Checkpoint.open(str(small_demo)).metadata.referenced_files())
    assert f"{files} data files present with their recorded sizes; their contents were not" \
        " read (--verify checks every byte range)" in out
    assert main(["inspect", str(small_demo), "--verify"]) == 0
    checkpoint = Checkpoint.open(str(small_demo))
    ranges = sum(len(f.locations) for op in checkpoint.metadata.operators
                 for s in op.keyed_states for f in s.files) + 2  # two subtasks' offsets
    assert f"verified: {files} data files, {ranges:,} byte ranges match" in capsys.readouterr().out


def _clicks_file(root):
    checkpoint = Checkpoint.open(str(root))
    data_file = checkpoint.operator().keyed_state("clicks").files[0]
    return root / data_file.path, data_file.locations[0]


def test_inspect_verify_fails_on_a_flipped_bit_naming_the_file(small_demo, tmp_path, capsys):
    root = copy_of(small_demo, tmp_path)
    path, location = _clicks_file(root)
    payload = bytearray(path.read_bytes())
    payload[location.offset + location.length // 2] ^= 0x01
    path.write_bytes(bytes(payload))
    assert main(["inspect", str(root)]) == 0  # sizes are intact: the default cannot tell
    capsys.readouterr()
    assert main(["inspect", str(root), "--verify"]) == 1
    err = capsys.readouterr().err
    assert f"{path}: checksum mismatch" in err


@pytest.mark.parametrize("damage", ["truncate", "remove"])
def test_inspect_fails_on_a_missing_or_truncated_file_even_without_verify(small_demo, tmp_path,
                                                                        capsys, damage):
    root = copy_of(small_demo, tmp_path)
    path, _ = _clicks_file(root)
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[:-10])
    else:
        path.unlink()
    assert main(["inspect", str(root)]) == 1
    err = capsys.readouterr().err
    relative = path.relative_to(root).as_posix()
    assert f"data file {relative} under {root} is" in err
    assert ("missing" if damage == "remove" else "bytes, the metadata says") in err


@pytest.mark.parametrize(("arguments", "message"), [
    (["--parallelism", "0"], "--parallelism 0 must be at least 1"),
    (["--parallelism", "129"], "parallelism 129 is outside [1, 128] for operator 'user-activity'"),
    (["--plot", "state.txt"], "--plot state.txt: the file name must end in one of"),
    (["--plot", "no/such/dir/state.png"], "does not exist"),
    (["--checkpoint-id", "-1"], "checkpoint id -1"),
])
def test_inspect_refuses_bad_arguments(small_demo, capsys, arguments, message):
    assert main(["inspect", str(small_demo), *arguments]) == 1
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err
    assert "checkpoint 3 at" not in captured.out  # refused before printing a report


def test_demo_refuses_an_output_that_holds_checkpoints_before_processing(small_demo, capsys):
    started = time.perf_counter()
    assert main(["demo", "--events", "3000", "--checkpoint-every", "1000", "--no-spark",
                 "--output", str(small_demo)]) == 1
    err = capsys.readouterr().err
    assert f"--output {small_demo} already holds checkpoints" in err
    assert f"rm -r {small_demo}" in err and "leave --output out" in err
    assert time.perf_counter() - started < 5  # checked up front, not after processing
    assert sorted(p.name for p in small_demo.iterdir()) == ["chk-1", "chk-2", "chk-3"]


def test_demo_without_output_uses_a_fresh_directory_each_run(capsys):
    outputs = []
    for _ in range(2):
        assert main(["demo", "--events", "1000", "--checkpoint-every", "1000",
                     "--no-spark"]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        outputs.append(first.rsplit(" into ", 1)[1])
    assert outputs[0] != outputs[1]
    for output in outputs:
        assert Checkpoint.open(output).checkpoint_id == 1
        shutil.rmtree(output)


@pytest.mark.parametrize(("arguments", "message"), [
    (["--parallelism", "0"], "--parallelism 0 is outside [1, 128]"),
    (["--parallelism", "129"], "--parallelism 129 is outside [1, 128]"),
    (["--events", "0"], "--events 0 must be at least 1"),
    (["--checkpoint-every", "-5"], "--checkpoint-every -5 must be at least 1"),
])
def test_demo_refuses_bad_arguments(tmp_path, capsys, arguments, message):
    assert main(["demo", "--no-spark", "--output", str(tmp_path / "out"), *arguments]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_demo_hints_run_as_printed(small_demo, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the plot hint writes state.png here
    hints = try_next(str(small_demo))
    for hint in hints:
        words = shlex.split(hint)
        if words[0] == "statesource":
            capsys.readouterr()
            assert main(words[1:]) == 0, hint
    assert any("--verify" in hint for hint in hints)
    assert (tmp_path / "state.png").read_bytes()[:4] == b"\x89PNG"


def test_demo_hints_name_an_unactivated_venv_by_path(tmp_path, monkeypatch):
    venv_bin = tmp_path / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "statesource").write_text("#!/bin/sh\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [str(venv_bin / "statesource"), "demo"])
    monkeypatch.setenv("PATH", "/nonexistent")
    hints = try_next("/tmp/demo")
    assert hints[0] == ".venv/bin/statesource inspect /tmp/demo --verify"
