"""``statesource inspect`` of real Flink snapshots tells what it tells of statesource checkpoints.

Every count printed is held against one computed here from the fixtures'
expected state alone: entries and rows per state, and rows per subtask at
another parallelism from the expected keys and Flink's key-group assignment.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from flink_fixture_checks import fixture_counts
from flink_snapshots import expected, only
from statesource.cli import inspect as inspect_command
from statesource.cli import main
from statesource.errors import IncompatibleCheckpointError
from statesource.flink.operations.census import count_snapshot
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.keygroups import assign_to_key_group, operator_index_for_key_group
from statesource.types import STRING

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"
FIXTURE_CASES = [(variant, kind) for variant in ("mp256", "mp128-snappy")
                 for kind in ("canonical", "native")]
PNG = b"\x89PNG\r\n\x1a\n"
_STATE_LINE = re.compile(r"^  (\S+)\s+(\S+)\s+([\d,]+|-)\s+([\d,]+|-)\s+")
_SUBTASKS = re.compile(r"^  rows per subtask at parallelism (\d+) \((?:now|proposed)\): (.*) \(")


def _inspect(capsys, *argv: str) -> dict[str, dict]:
    """Run ``inspect`` and parse what it printed per operator: its states' entries and rows,
    rows per subtask by parallelism, and the operator's other lines."""
    assert main(["inspect", *argv]) == 0
    operators: dict[str, dict] = {}
    current: dict = {}
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("operator "):
            current = {"states": {}, "subtasks": {}, "lines": []}
            operators[line.split()[1].rstrip(":")] = current
        elif (state := _STATE_LINE.match(line)) and state[1] != "state":
            name, kind, entries, rows = state.groups()
            current["states"][name] = (kind, *(None if n == "-" else int(n.replace(",", ""))
                                               for n in (entries, rows)))
        elif subtasks := _SUBTASKS.match(line):
            current["subtasks"][int(subtasks[1])] = [
                int(part.split(": ")[1].replace(",", "")) for part in subtasks[2].split(", ")
                if ": " in part]
        elif current:
            current["lines"].append(line)
    return operators


def _per_subtask(rows_by_key_group: dict[int, int], max_parallelism: int,
                 parallelism: int) -> list[int]:
    totals = [0] * parallelism
    for group, rows in rows_by_key_group.items():
        totals[operator_index_for_key_group(max_parallelism, parallelism, group)] += rows
    return totals


@pytest.mark.parametrize("variant, kind", FIXTURE_CASES)
def test_entries_rows_and_subtasks_of_the_fixture_snapshots(variant, kind, capsys):
    truth = json.loads((FIXTURES / variant / "expected.json").read_text())
    maxp = truth["max_parallelism"]
    printed = _inspect(capsys, str(FIXTURES / variant / kind), "--parallelism", "3")
    for uid, want in fixture_counts(truth).items():
        states = printed[uid]["states"]
        assert set(states) == set(want["states"]), uid
        for name, counts in want["states"].items():
            if uid == "opaque" and kind == "native" and states[name][1:] == (None, None):
                continue  # not countable there: the next test
            assert states[name][1:] == counts, (uid, name)
        if "groups" in want:
            for parallelism in (2, 3):
                assert printed[uid]["subtasks"][parallelism] == _per_subtask(
                    want["groups"], maxp, parallelism), (uid, parallelism)
    lines = printed["stateful"]["lines"]
    assert any(line.startswith("  key-group skew (rows of all keyed states and timers): min")
               for line in lines)
    groups = maxp if kind == "native" else len(fixture_counts(truth)["stateful"]["groups"])
    assert any(f"counted by decoding {groups:,} key groups" in line for line in lines)
    assert "key groups per subtask at parallelism 3: " + (
        "85 to 86" if maxp == 256 else "42 to 43") in "\n".join(lines)


@pytest.mark.parametrize("variant", ["mp256", "mp128-snappy"])
def test_kryo_values_of_a_native_snapshot_are_reported_not_raised(variant, capsys):
    printed = _inspect(capsys, str(FIXTURES / variant / "native"))
    opaque = printed["opaque"]
    assert opaque["states"]["last_uuid"] == ("value", None, None)
    text = "\n".join(opaque["lines"])
    assert "not counted: its java.util.UUID values are Kryo bytes" in text
    assert "key-group skew (bytes of the key groups: not every state's rows could be counted)" \
        in text
    assert printed["stateful"]["states"]["total"] == ("value", 50, 50)


def test_bytes_per_state_are_their_sections_of_the_key_groups(capsys):
    printed = _inspect(capsys, str(FIXTURES / "mp128-snappy" / "canonical"))
    assert any("as serialized before Snappy compression" in line
               for line in printed["stateful"]["lines"])
    printed = _inspect(capsys, str(FIXTURES / "mp256" / "canonical"))
    assert any("its sections of the key groups' byte ranges" in line
               for line in printed["stateful"]["lines"])


@pytest.fixture
def shared_java_savepoint() -> Path:
    """Flink 2.3's canonical savepoint of the Java job in ../shared (marks the tests golden)."""
    return only("java/canonical/savepoint-*")


def test_java_savepoint_counts_equal_its_expected_state(shared_java_savepoint, tmp_path,
                                                        capsys):
    truth = expected("java")
    maxp = truth["max_parallelism"]
    keys = truth["state"]
    plot = tmp_path / "java.png"
    printed = _inspect(capsys, str(shared_java_savepoint), "--parallelism", "3", "--plot",
                       str(plot))
    assert plot.read_bytes()[:8] == PNG  # one operator with keyed state: the name as given
    states = printed["stateful"]["states"]
    assert states["count"][1:] == (len(keys), len(keys))
    assert states["last_seq_ttl"][1:] == (len(keys), len(keys))
    assert states["tags"][1:] == (len(keys), sum(len(k["tags"]) for k in keys.values()))
    assert states["sum_by_tag"][1:] == (len(keys),
                                        sum(len(k["sum_by_tag"]) for k in keys.values()))
    groups: dict[int, int] = {}
    for key, want in keys.items():
        group = assign_to_key_group(key, STRING, maxp)
        groups[group] = groups.get(group, 0) + 2 + len(want["tags"]) + len(want["sum_by_tag"])
    assert printed["stateful"]["subtasks"][3] == _per_subtask(groups, maxp, 3)
    assert printed["stateful"]["subtasks"][2] == _per_subtask(groups, maxp, 2)


def test_plot_writes_one_png_per_keyed_operator(tmp_path, capsys):
    plot = tmp_path / "state.png"
    assert main(["inspect", str(FIXTURES / "mp256" / "native"), "--parallelism", "3",
                 "--plot", str(plot)]) == 0
    out = capsys.readouterr().out
    for uid in ("stateful", "windows", "opaque"):
        path = tmp_path / f"state-{uid}.png"
        assert f"wrote {path}" in out
        assert path.read_bytes()[:8] == PNG


@pytest.mark.parametrize("variant, parallelism", [("mp256", 300), ("mp128-snappy", 129)])
def test_a_parallelism_above_the_max_parallelism_is_named(variant, parallelism, capsys):
    assert main(["inspect", str(FIXTURES / variant / "canonical"), "--parallelism",
                 str(parallelism)]) == 1
    err = capsys.readouterr().err
    maxp = 256 if variant == "mp256" else 128
    assert f"parallelism {parallelism} is outside [1, {maxp}]" in err
    assert f"whose max parallelism is {maxp}" in err


def test_verify_says_what_decoding_checked(capsys):
    assert main(["inspect", str(FIXTURES / "mp256" / "canonical"), "--verify"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"verified: \d+ files present with their recorded sizes, [\d,]+ key"
                     r" groups \([\d.]+ KiB\) decoded: their framing holds", out)
    assert main(["inspect", str(FIXTURES / "mp256" / "native"), "--verify"]) == 0
    assert ("not decoded, so neither counted nor checked: states 'last_uuid',"
            " '_timer_state/processing_user-timers', '_timer_state/event_user-timers' of"
            " operator 'opaque'") in capsys.readouterr().out


def test_a_truncated_state_file_fails_naming_it(tmp_path, capsys):
    copy = tmp_path / "savepoint"
    shutil.copytree(FIXTURES / "mp256" / "canonical", copy)
    victim = max((p for p in copy.iterdir() if p.name != "_metadata"),
                 key=lambda p: p.stat().st_size)
    victim.write_bytes(victim.read_bytes()[:-3])
    assert main(["inspect", str(copy)]) == 1
    assert f"{victim} has" in capsys.readouterr().err


def test_progress_of_decoding_goes_to_stderr(monkeypatch, capsys):
    monkeypatch.setattr(inspect_command, "PROGRESS_AFTER_SECONDS", 0.0)
    monkeypatch.setattr(inspect_command, "PROGRESS_EVERY_SECONDS", 0.0)
    assert main(["inspect", str(FIXTURES / "mp256" / "native")]) == 0
    captured = capsys.readouterr()
    assert "decoding operator stateful: 256 of 256 key groups" in captured.err
    assert "decoding operator" not in captured.out


def test_an_operator_whose_keyed_state_cannot_be_read_is_reported(monkeypatch, capsys):
    original = FlinkSnapshot.header

    def custom_serializer(self, op):
        if op.uid == "windows":
            raise IncompatibleCheckpointError("a serializer statesource does not know")
        return original(self, op)

    monkeypatch.setattr(FlinkSnapshot, "header", custom_serializer)
    printed = _inspect(capsys, str(FIXTURES / "mp256" / "canonical"), "--parallelism", "3")
    assert "  keyed state not counted: a serializer statesource does not know" in \
        printed["windows"]["lines"]
    assert printed["windows"]["states"] == {}
    assert printed["stateful"]["states"]["total"] == ("value", 50, 50)
    assert ("not decoded, so neither counted nor checked: the keyed state of operator"
            " 'windows'") in printed["broadcaster"]["lines"]


@pytest.mark.parametrize("kind, framing", [("canonical", 2), ("native", 4)])
def test_state_sections_and_key_group_framing_make_up_the_byte_ranges(kind, framing):
    """Uncompressed, a key group is its states' sections and its framing: the end marker
    (canonical) or the key-group id (native)."""
    counted = count_snapshot(FlinkCheckpoint.open(str(FIXTURES / "mp256" / kind)))
    for op in counted.operators:
        if op.distribution is None or any(s.unreadable for s in op.states):
            continue  # no keyed state, or the Kryo state of the native snapshot
        groups = sum(1 for size in op.distribution.bytes if size)
        assert sum(s.size_bytes for s in op.states if not s.kind.startswith("operator-")) \
            + framing * groups == sum(op.distribution.bytes), op.uid
