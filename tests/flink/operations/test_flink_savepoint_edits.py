"""Erased keys and dropped states: the edited savepoint restores in a real Flink 2.3.

``erase_keys`` and ``drop_state`` write a new canonical savepoint; each test restores it
through ``tests/flink_restore.py`` and compares every key of every keyed state, every timer
and every operator state with the fixture's ``expected.json`` less what was erased or
dropped (``check_fixture``). Flink refusing a savepoint raises ``FlinkRestoreError``: a
failing test, never a skip.
"""

from __future__ import annotations

import json

import pytest
from test_compressed_output import compression_flags, operator_state_flags

from flink_fixture_checks import FIXTURES, check_fixture, fixture_spec, fixture_truth
from flink_restore import FIXTURE_JOB, restore, rows_of
from statesource.cli import main
from statesource.errors import CheckpointExistsError, InvalidArgumentError
from statesource.flink.operations.edit import drop_state, erase_keys
from statesource.flink.snapshot.directory import FlinkSnapshot

MP256 = FIXTURES / "mp256" / "canonical"
TIMERS = "_timer_state/event_user-timers"


def without(spec: dict, operator: str, state: str) -> dict:
    """``spec`` with one keyed state of ``operator`` no longer declared."""
    for op in spec["operators"]:
        if op["uid"] == operator:
            op["keyed_states"] = [s for s in op["keyed_states"] if s["name"] != state]
    return spec


def test_erased_keys_are_gone_from_every_state_and_timer(tmp_path):
    truth = fixture_truth("mp256")
    erased = sorted(int(k) for k in truth["stateful"])[:3]
    output = tmp_path / "erased"
    done = erase_keys(MP256, output, "stateful", [*erased, 10**12])
    assert done.missing == (10**12,)
    removed = dict(done.removed)
    gone = [truth["stateful"][str(k)] for k in erased]
    assert removed[TIMERS] == sum(len(w["timers"]) for w in gone)
    assert removed["per_user"] == sum(len(w["per_user"]) for w in gone)
    assert all(removed[name] == len(erased) for name in ("total", "max_id", "avg", "last"))
    rows = restore(output, fixture_spec(256), java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2, erased=erased)


def test_keys_erased_from_a_native_savepoint(tmp_path):
    """The edited operator's keyed state is converted to the canonical layout; the others
    keep their native files (``opaque`` holds Kryo values a conversion could not delimit),
    and Flink restores each operator by its own handles."""
    truth = fixture_truth("mp256")
    erased = sorted(int(k) for k in truth["stateful"])[-2:]
    output = tmp_path / "erased"
    done = erase_keys(FIXTURES / "mp256" / "native", output, "stateful", erased)
    assert done.missing == ()
    snapshot = FlinkSnapshot.open(str(output))
    savepoint = {op.label: {h.savepoint for h in snapshot.keyed_handles(op)}
                 for op in snapshot.operators if snapshot.keyed_handles(op)}
    assert savepoint == {"stateful": {True}, "opaque": {False}, "windows": {False}}
    rows = restore(output, fixture_spec(256), java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2, erased=erased)


def test_tuple_keys_erased_from_a_snappy_savepoint(tmp_path):
    """Window state keyed by ``Tuple2<String, Integer>``, Snappy-compressed key groups: every
    window and window timer of the erased keys goes, the other operators are as they were.
    Written with ``compression="none"``: the operators left alone are decompressed too,
    their keyed and operator state, and restore as they were."""
    truth = fixture_truth("mp128-snappy")
    users = sorted({tuple(json.loads(name)[:2]) for name in truth["windows"]})
    erased = users[:2]
    output = tmp_path / "erased"
    done = erase_keys(FIXTURES / "mp128-snappy" / "canonical", output, "windows", erased,
                      compression="none")
    assert done.missing == () and not done.compressed
    assert compression_flags(output) == operator_state_flags(output) == {False}
    windows = {name: w for name, w in truth["windows"].items()
               if tuple(json.loads(name)[:2]) not in erased}
    assert dict(done.removed) == {
        "window-contents": len(truth["windows"]) - len(windows),
        "_timer_state/event_window-timers": len(truth["windows"]) - len(windows)}
    rows = restore(output, fixture_spec(128), java_sources=[FIXTURE_JOB])
    check_fixture(rows, {**truth, "windows": windows}, parallelism=2)


@pytest.mark.parametrize("state", ["avg", "per_user", TIMERS])
def test_a_dropped_state_is_gone_and_the_rest_restores(tmp_path, state):
    truth = fixture_truth("mp256")
    output = tmp_path / "dropped"
    done = drop_state(MP256, output, "stateful", state)
    assert done.total > 0
    header_names = {info.name for op in FlinkSnapshot.open(str(output)).operators
                    if op.uid == "stateful"
                    for info in _header(output, op).states}
    assert state not in header_names and "total" in header_names
    spec = fixture_spec(256)
    if state != TIMERS:  # a job that no longer declares it restores the rest
        rows = restore(output, without(fixture_spec(256), "stateful", state),
                       java_sources=[FIXTURE_JOB])
        check_fixture(rows, truth, parallelism=2, dropped={state})
    # a job still declaring it finds it empty
    rows = restore(output, spec, java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2, dropped={state})


def test_a_state_dropped_from_a_native_savepoint_restores(tmp_path):
    """The edited operator is converted without re-keying: a native key group whose only
    entries belong to the dropped state (or to none) is not written, never an empty one."""
    truth = fixture_truth("mp256")
    output = tmp_path / "dropped"
    drop_state(FIXTURES / "mp256" / "native", output, "stateful", "avg")
    rows = restore(output, without(fixture_spec(256), "stateful", "avg"),
                   java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2, dropped={"avg"})


def test_a_dropped_operator_state_restores_empty(tmp_path):
    truth = fixture_truth("mp256")
    output = tmp_path / "dropped"
    done = drop_state(MP256, output, "stateful", "seen")
    assert done.removed == (("seen", len(truth["seen"])),)
    rows = restore(output, fixture_spec(256), java_sources=[FIXTURE_JOB])
    assert [row["value"] for row in rows_of(rows, "stateful", "seen", "split")] in ([], [[], []])
    union = rows_of(rows, "stateful", "subtasks", "union")
    assert all(sorted(row["value"]) == sorted(sum(truth["subtasks"], [])) for row in union)


def _header(output, op):
    from statesource.flink.binary.reader import BinaryReader
    from statesource.flink.statefiles.keyed_header import read_keyed_header

    snapshot = FlinkSnapshot.open(str(output))
    (handle, *_) = snapshot.keyed_handles(op)
    data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
    return read_keyed_header(BinaryReader(data, handle.stream.path))


@pytest.mark.parametrize("edit, error, words", [
    (lambda out: erase_keys(MP256, out, "nope", [1]), InvalidArgumentError,
     ["no operator 'nope'", "stateful", "windows"]),
    (lambda out: erase_keys(MP256, out, "stateful", [1, "7"]), InvalidArgumentError,
     ["'7'", "long"]),
    (lambda out: erase_keys(MP256, out, "windows", [("u0", "0")]), InvalidArgumentError,
     ["('u0', '0')"]),
    (lambda out: drop_state(MP256, out, "stateful", "nope"), InvalidArgumentError,
     ["no state 'nope'", "per_user", "seen"]),
    (lambda out: drop_state(MP256, out, "nope", "avg"), InvalidArgumentError,
     ["no operator 'nope'"]),
], ids=["unknown-operator", "key-of-another-type", "tuple-key-of-another-type",
        "unknown-state", "drop-unknown-operator"])
def test_refusals_write_nothing(tmp_path, edit, error, words):
    output = tmp_path / "out"
    with pytest.raises(error) as raised:
        edit(output)
    assert all(word in str(raised.value) for word in words), str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_an_existing_output_is_refused(tmp_path):
    output = tmp_path / "out"
    output.mkdir()
    (output / "keep").write_text("mine")
    with pytest.raises(CheckpointExistsError):
        erase_keys(MP256, output, "stateful", [1])
    with pytest.raises(CheckpointExistsError):
        drop_state(MP256, output, "stateful", "avg")
    assert [p.name for p in output.iterdir()] == ["keep"]


def test_the_commands(tmp_path, capsys):
    """``statesource erase`` with --key and --keys-file (tuple keys as JSON arrays), then
    ``statesource drop`` on its output: Flink restores what is left."""
    truth = fixture_truth("mp256")
    users = sorted({tuple(json.loads(name)[:2]) for name in truth["windows"]})
    keys_file = tmp_path / "keys.jsonl"
    keys_file.write_text(f"{json.dumps(list(users[1]))}\n\n[\"nobody\", 0]\n")
    erased = tmp_path / "erased"
    assert main(["erase", str(MP256), "--operator", "windows", "--key",
                 json.dumps(list(users[0])), "--keys-file", str(keys_file),
                 "--output", str(erased)]) == 0
    out = capsys.readouterr().out
    assert "not present: ('nobody', 0)" in out and "2 of 3 keys found" in out
    dropped = tmp_path / "dropped"
    assert main(["drop", str(erased), "--operator", "stateful", "--state", "last",
                 "--output", str(dropped)]) == 0
    assert "state 'last' of operator stateful dropped (50 entries" in capsys.readouterr().out
    windows = {name: w for name, w in truth["windows"].items()
               if tuple(json.loads(name)[:2]) not in users[:2]}
    rows = restore(dropped, without(fixture_spec(256), "stateful", "last"),
                   java_sources=[FIXTURE_JOB])
    check_fixture(rows, {**truth, "windows": windows}, parallelism=2, dropped={"last"})


@pytest.mark.parametrize("argv, words", [
    (["erase", str(MP256), "--operator", "stateful", "--key", "abc"], ["'abc'", "long"]),
    (["erase", str(MP256), "--operator", "stateful"], ["--key"]),
    (["erase", str(MP256), "--operator", "nope", "--key", "1"], ["no operator 'nope'"]),
    (["drop", str(MP256), "--operator", "stateful", "--state", "nope"], ["no state 'nope'"]),
], ids=["key-of-another-type", "no-keys", "unknown-operator", "unknown-state"])
def test_the_commands_refuse(tmp_path, capsys, argv, words):
    assert main([*argv, "--output", str(tmp_path / "out")]) == 1
    error = capsys.readouterr().err
    assert all(word in error for word in words), error
    assert list(tmp_path.iterdir()) == []
