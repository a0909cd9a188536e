"""import-flink writes a statesource checkpoint holding exactly what the Flink snapshot holds."""

from __future__ import annotations

import pytest

from flink_fixture_checks import FIXTURES
from flink_snapshots import only
from statesource.cli import main
from statesource.flink.declarations import UNKNOWN_TTL
from statesource.flink.reader import FlinkCheckpoint
from statesource.format.reader import Checkpoint


@pytest.mark.parametrize("pattern", ["java/canonical/savepoint-*", "java/checkpoints/chk-7",
                                     "pyflink/savepoint-*"])
def test_import_is_lossless(tmp_path, capsys, pattern):
    source = str(only(pattern))
    assert main(["import-flink", source, str(tmp_path)]) == 0
    assert "skipped timer state stateful/_timer_state/event_user-timers" in capsys.readouterr().out
    flink = FlinkCheckpoint.open(source)
    imported = Checkpoint.open(str(tmp_path))
    assert imported.checkpoint_id == flink.checkpoint_id
    flink_op, op = flink.operator("stateful"), imported.operator("stateful")
    assert (op.key_type, op.parallelism, op.max_parallelism) == (
        flink_op.key_type, flink_op.parallelism, flink_op.max_parallelism)
    for state in flink_op.keyed_states:
        assert imported.operator("stateful").keyed_state(state.name).declaration == \
            state.declaration
        assert state.ttl in (None, UNKNOWN_TTL)
        want = [t.to_pylist() for t in flink.read_keyed_state(state.name, operator="stateful")]
        got = [t.to_pylist() for t in imported.read_keyed_state(state.name, operator="stateful")]
        assert got == want and sum(map(len, got)) > 0
    assert imported.read_operator_state("SourceReaderState", operator="src") == [[]]


def test_inspect_reads_a_flink_snapshot(capsys):
    assert main(["inspect", str(only("java/checkpoints/chk-4").parent)]) == 0
    out = capsys.readouterr().out
    assert "Flink snapshot 7" in out
    assert "_timer_state/event_user-timers" in out and 'element="string"' in out


def test_import_into_an_existing_checkpoint_fails_and_leaves_nothing(tmp_path, capsys):
    source = str(only("java/canonical/savepoint-*"))
    assert main(["import-flink", source, str(tmp_path)]) == 0
    before = sorted(p.name for p in (tmp_path / "chk-5" / "data").iterdir())
    assert main(["import-flink", source, str(tmp_path)]) == 1
    assert "error" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "chk-5" / "data").iterdir()) == before


def test_a_failed_import_leaves_no_empty_checkpoint(tmp_path, capsys):
    """Bug fixed: an import failing while it decodes left an empty ``chk-N/data`` behind."""
    source = str(FIXTURES / "mp256" / "native")  # Kryo 5 values in a native layout: refused
    root = tmp_path / "root"
    assert main(["import-flink", source, str(root)]) == 1
    assert "last_uuid" in capsys.readouterr().err
    assert not root.exists() or list(root.iterdir()) == []
