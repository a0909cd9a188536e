"""``statesource rescale`` of a Flink snapshot: a new savepoint under another max parallelism.

What a real Flink restores of such a savepoint is checked in
tests/flink/operations/test_flink_savepoint_rescale.py; here, that the command reaches it,
and refuses what does not apply to a Flink snapshot with nothing written.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from statesource.cli import main
from statesource.flink.reader import FlinkCheckpoint
from statesource.keygroups import assign_to_key_group

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "mp256" / "canonical"


def _rows(path: Path, state: str) -> list[dict]:
    snapshot = FlinkCheckpoint.open(str(path))
    return pa.concat_tables(snapshot.read_keyed_state(state, operator="stateful")).to_pylist()


def test_a_new_max_parallelism_writes_a_savepoint(tmp_path, capsys):
    output = tmp_path / "savepoint-mp1024"
    assert main(["rescale", str(FIXTURE), "--max-parallelism", "1024",
                 "--output", str(output)]) == 0
    assert "pipeline.max-parallelism: 1024" in capsys.readouterr().out
    rescaled = FlinkCheckpoint.open(str(output))
    assert rescaled.operator("stateful").max_parallelism == 1024
    op = FlinkCheckpoint.open(str(FIXTURE)).operator("stateful")
    for state in op.keyed_states:
        before, after = _rows(FIXTURE, state.name), _rows(output, state.name)
        assert sorted(map(repr, (dict(r, key_group=0) for r in after))) == sorted(
            map(repr, (dict(r, key_group=0) for r in before)))
        key_type = op.keyed_key_type
        assert all(r["key_group"] == assign_to_key_group(r["key"], key_type, 1024)
                   for r in after)


@pytest.mark.parametrize(("argv", "message"), [
    (["--parallelism", "3"], "Flink restores it at any parallelism"),
    (["--max-parallelism", "512"], "give --output DIR"),
    (["--max-parallelism", "512", "--operator", "stateful", "--output", "{out}"],
     "--operator does not apply to a Flink snapshot"),
    (["--max-parallelism", "40000", "--output", "{out}"], "40000"),
])
def test_what_does_not_apply_is_refused_with_nothing_written(tmp_path, capsys, argv, message):
    output = tmp_path / "out"
    argv = [a.replace("{out}", str(output)) for a in argv]
    assert main(["rescale", str(FIXTURE), *argv]) == 1
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_output_is_for_flink_snapshots_only(tmp_path, capsys):
    from statesource import CheckpointWriter, KeyedStateBackend
    from statesource.state.descriptors import ValueStateDescriptor

    backend = KeyedStateBackend("string", 128)
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    backend.set_current_key("a")
    counts.update(1)
    CheckpointWriter(str(tmp_path / "root")).write(1, {"op": [backend]})
    assert main(["rescale", str(tmp_path / "root"), "--parallelism", "2",
                 "--output", str(tmp_path / "out")]) == 1
    assert "--output names the savepoint directory of a rescaled Flink snapshot" in (
        capsys.readouterr().err)
