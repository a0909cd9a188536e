"""Every failure of the command line is one line on stderr and exit status 1, never a
traceback; and every path a user gives is checked where it enters.

The paths: a snapshot given by its metadata file (``<savepoint>/_metadata``, as Flink takes
it, or ``chk-<id>/_metadata.json``), a path that is a file, an output whose parent is a file,
is missing, or cannot be written, a keys file that is not one.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from statesource.cli import main
from statesource.flink.snapshot.publish import SavepointWriter

FLINK = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "mp256" / "canonical"
SECRET = "s3://AKIAKEY:wJalrSECRET@bucket/savepoints"


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("demo") / "demo"
    assert main(["demo", "--events", "2000", "--checkpoint-every", "1000", "--no-spark",
                 "--output", str(output)]) == 0
    return output


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a directory")
    return path


def failed(capsys, status: int = 1, *, argv: list[str], started: bool = False) -> str:
    """The one line a failed command printed on stderr (nothing on stdout, unless it failed
    after it ``started`` reporting)."""
    assert main(argv) == status
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert bool(captured.out) == started
    return lines[0]


def test_a_flink_metadata_file_means_its_savepoint(capsys):
    assert main(["inspect", str(FLINK)]) == 0
    by_directory = capsys.readouterr().out
    assert main(["inspect", str(FLINK / "_metadata")]) == 0
    assert capsys.readouterr().out == by_directory
    # diff(1)'s statuses: the same savepoint, named both ways, has no change
    assert main(["diff", str(FLINK / "_metadata"), str(FLINK)]) == 0


def test_a_checkpoint_metadata_file_means_its_checkpoint(demo, capsys):
    assert main(["inspect", str(demo)]) == 0
    newest = capsys.readouterr().out
    assert main(["inspect", str(demo / "chk-2" / "_metadata.json")]) == 0
    assert capsys.readouterr().out == newest


@pytest.mark.parametrize("command", [
    ["inspect"], ["import-flink", "{out}"], ["rescale", "--parallelism", "2"],
    ["erase", "--operator", "x", "--key", "k", "--output", "{out}"]])
def test_a_file_that_is_no_snapshot_is_named(demo, tmp_path, capsys, command):
    data_file = next((demo / "chk-1" / "data").iterdir())
    argv = [command[0], str(data_file), *(a.replace("{out}", str(tmp_path / "o"))
                                          for a in command[1:])]
    line = failed(capsys, argv=argv)
    assert line.startswith(f"statesource {command[0]}: error: ")
    assert str(data_file) in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", [
    ["rescale", str(FLINK), "--max-parallelism", "512", "--output", "{out}"],
    ["erase", str(FLINK), "--operator", "stateful", "--key", "1", "--output", "{out}"],
    ["drop", str(FLINK), "--operator", "stateful", "--state", "total", "--output", "{out}"],
    ["import-flink", str(FLINK), "{out}"],
])
def test_an_output_under_a_file_is_refused_naming_both(a_file, capsys, command):
    output = a_file / "new"
    line = failed(capsys, argv=[a.replace("{out}", str(output)) for a in command])
    assert f"{output} cannot be created: {a_file} is a file, not a directory" in line


def test_the_demo_output_and_a_plot_under_a_file_are_refused(demo, a_file, capsys):
    line = failed(capsys, argv=["demo", "--no-spark", "--events", "10", "--output",
                                str(a_file / "new")])
    assert line == (f"statesource demo: error: --output {a_file}/new cannot be created:"
                    f" {a_file} is a file, not a directory")
    line = failed(capsys, argv=["inspect", str(demo), "--plot", str(a_file / "state.png")])
    assert line == (f"statesource inspect: error: --plot {a_file}/state.png: {a_file} is a"
                    " file, not a directory")


def test_an_output_whose_parents_are_missing_is_created(tmp_path, capsys):
    output = tmp_path / "not" / "yet" / "there"
    assert main(["rescale", str(FLINK), "--max-parallelism", "512", "--output",
                 str(output)]) == 0
    assert (output / "_metadata").is_file()


@pytest.mark.parametrize(("read_only", "reason"), [
    (True, "is on a read-only file system"),
    (False, "is not writable by this user (permission denied)"),
])
def test_an_output_that_cannot_be_written_is_refused_before_anything_is_read(
        tmp_path, capsys, monkeypatch, read_only, reason):
    # root may write anywhere, so the refusal of the system is what is simulated
    flags = os.ST_RDONLY if read_only else 0
    statvfs = os.statvfs(tmp_path)
    monkeypatch.setattr(os, "access", lambda path, mode: not str(path).startswith(
        str(tmp_path)))
    monkeypatch.setattr(os, "statvfs", lambda path: type("F", (), {
        "f_flag": flags, "f_bsize": statvfs.f_bsize})())
    output = tmp_path / "out"
    line = failed(capsys, argv=["import-flink", str(FLINK), str(output)])
    assert line == (f"statesource import-flink: error: checkpoint root {output} cannot be"
                    f" written: {tmp_path} {reason}")


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC, errno.EACCES])
def test_an_os_error_midway_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch, code):
    def refuse(writer, chunks, name=None):
        raise OSError(code, os.strerror(code), str(writer.staging / "state-file"))

    monkeypatch.setattr(SavepointWriter, "write_file", refuse)
    output = tmp_path / "out"
    line = failed(capsys, argv=["rescale", str(FLINK), "--max-parallelism", "512",
                                "--output", str(output)], started=True)
    assert line.startswith(f"statesource rescale: error: cannot write savepoint {output}:"
                           f" {os.strerror(code)}: {tmp_path}/.out.")
    assert line.endswith("/state-file")
    assert list(tmp_path.iterdir()) == []  # the staging directory is removed


def test_a_full_disk_while_plotting_is_one_line(demo, tmp_path, capsys):
    plot = tmp_path / "state.png"
    plot.symlink_to("/dev/full")  # every write: ENOSPC
    line = failed(capsys, argv=["inspect", str(demo), "--plot", str(plot)], started=True)
    assert line.startswith("statesource inspect: error: ")
    assert os.strerror(errno.ENOSPC) in line


@pytest.mark.parametrize("keys_file", ["missing", "directory"])
def test_a_keys_file_that_is_none_is_named_before_the_snapshot_is_read(tmp_path, capsys,
                                                                        keys_file):
    path = tmp_path / keys_file
    if keys_file == "directory":
        path.mkdir()
    line = failed(capsys, argv=["erase", str(tmp_path / "no-snapshot"), "--operator", "x",
                                "--keys-file", str(path), "--output", str(tmp_path / "o")])
    reason = "No such file or directory" if keys_file == "missing" else "Is a directory"
    assert line == f"statesource erase: error: --keys-file {path}: {reason}"


@pytest.mark.parametrize("argv", [
    ["inspect", "/tmp/x", SECRET],  # unrecognized arguments
    ["inspect", SECRET, "--parallelism", SECRET],  # invalid int value
    ["diff", SECRET],  # a missing argument, and diff's own failure status
    ["keygroup", "--key-type", SECRET, "k"],  # a statesource error quoting the type
])
def test_usage_errors_are_one_line_without_credentials(capsys, argv):
    status = 2 if argv[0] == "diff" else 1
    line = failed(capsys, status, argv=argv)
    assert "AKIAKEY" not in line and "wJalrSECRET" not in line
    assert line.startswith("statesource")


def test_an_unforeseen_error_is_one_line_unless_its_traceback_is_asked_for(
        demo, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr("statesource.cli.inspect.checkpoint_report", broken)
    line = failed(capsys, argv=["inspect", str(demo)])
    assert line == ("statesource inspect: error: internal error, please report it:"
                    " ZeroDivisionError: division by zero (STATESOURCE_TRACEBACK=1 shows where)")
    monkeypatch.setenv("STATESOURCE_TRACEBACK", "1")
    with pytest.raises(ZeroDivisionError):
        main(["inspect", str(demo)])


def test_diff_exits_0_when_nothing_changed_and_1_when_something_did(demo, capsys):
    assert main(["diff", str(demo / "chk-2"), str(demo / "chk-2")]) == 0
    assert main(["diff", str(demo / "chk-1"), str(demo / "chk-2")]) == 1
    assert "clicks" in capsys.readouterr().out
