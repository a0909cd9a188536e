"""``statesource export-flink``: a statesource checkpoint as a Flink savepoint.

What a real Flink restores of such a savepoint is checked in
tests/flink/operations/test_flink_export.py; here, that the command writes it, and refuses with
nothing written.
"""

from __future__ import annotations

import pyarrow as pa

from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.cli import main
from statesource.flink.reader import FlinkCheckpoint
from statesource.format import Checkpoint
from statesource.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend


def _checkpoints(root, *, operator_state=False):
    keyed = KeyedStateBackend("string", 128)
    count = keyed.get_state(ValueStateDescriptor("count", "long"))
    seen = keyed.get_state(ListStateDescriptor("seen", "string"))
    for i in range(50):
        keyed.set_current_key(f"k{i}")
        count.update(i)
        seen.add_all([f"x{j}" for j in range(i % 3 + 1)])
    operator = None
    if operator_state:
        operator = OperatorStateBackend()
        operator.get_list_state("offsets", "long").add_all([4, 5])
    with CheckpointWriter(str(root)) as writer:
        writer.write(3, {"op": [SubtaskBackends(keyed, operator)]})
        count.update(-1)
        writer.write(4, {"op": [SubtaskBackends(keyed, operator)]})
    return root


def _rows(table_parts) -> list:
    rows = pa.concat_tables(list(table_parts)).to_pylist()
    return sorted(map(repr, rows))


def test_export_writes_a_savepoint_flink_reads_back(tmp_path, capsys):
    root = _checkpoints(tmp_path / "checkpoints")
    output = tmp_path / "savepoint"
    assert main(["export-flink", str(root), "--output", str(output),
                 "--checkpoint-id", "3"]) == 0
    assert f"wrote savepoint {output} of checkpoint 3" in capsys.readouterr().out
    exported = FlinkCheckpoint.open(str(output))
    source = Checkpoint.open(str(root), checkpoint_id=3)
    assert exported.checkpoint_id == 3
    op = exported.operator("op")
    assert (op.parallelism, op.max_parallelism) == (1, 128)
    for state in ("count", "seen"):
        assert _rows(exported.read_keyed_state(state, operator="op")) == _rows(
            source.read_keyed_state(state, operator="op"))


def test_operator_state_is_exported_unless_keyed_only(tmp_path, capsys):
    root = _checkpoints(tmp_path / "checkpoints", operator_state=True)
    assert main(["export-flink", str(root), "--output", str(tmp_path / "out")]) == 0
    assert "1 operator states" in capsys.readouterr().out
    exported = FlinkCheckpoint.open(str(tmp_path / "out"))
    source = Checkpoint.open(str(root), checkpoint_id=3)
    assert exported.read_operator_state("offsets", operator="op") == source.read_operator_state(
        "offsets", operator="op")
    assert main(["export-flink", str(root), "--output", str(tmp_path / "keyed"),
                 "--keyed-only"]) == 0
    assert "left out operator state 'offsets' of operator 'op'" in capsys.readouterr().out


def test_an_existing_output_is_refused(tmp_path, capsys):
    root = _checkpoints(tmp_path / "checkpoints")
    (tmp_path / "out").mkdir()
    assert main(["export-flink", str(root), "--output", str(tmp_path / "out")]) == 1
    assert "already exists" in capsys.readouterr().err
    assert list((tmp_path / "out").iterdir()) == []
