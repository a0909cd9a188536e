"""Lazily registered states: every reader decodes each file with its own header.

The ``lazy`` fixture is LazyJob.java run by a real Flink 2.3 (generate.py ``--only-lazy``):
one operator whose subtasks obtain states inside ``processElement``, on some keys only, so
its files list different states (heap: some lack ``vip`` or ``rare``) and number them
differently (RocksDB: registration order). Every state reads as the job's model says (from
the events alone, generate.py), value by value and column-wise, from every kind of snapshot
(RocksDB's native savepoint and incremental checkpoint too: its databases' files);
``inspect`` counts, the metadata, ``import-flink`` and ``diff`` see every state; Flink 2.3
restores the rescaled savepoint, a RocksDB one into either backend
(test_real_flink_restore.py has the harness; here restores are ``realflink``).
"""

from __future__ import annotations

import pytest
from lazy_fixture import KINDS, LAZY, STATES, by_key, expected

from flink_restore import restore, values
from statesource.cli import main
from statesource.flink.operations.census import count_snapshot
from statesource.flink.operations.importer import import_flink
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.reader import FlinkCheckpoint
from statesource.format.reader import Checkpoint


def _value_by_value(checkpoint: FlinkCheckpoint, state: str) -> dict:
    found = {}
    for _, keys, _, stored in checkpoint.entries(state, operator="lazy"):
        for key, value in zip(keys, stored):
            assert key not in found, (state, key)
            found[key] = value
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_the_files_list_and_number_states_differently(kind):
    snapshot = FlinkCheckpoint.open(str(LAZY / kind)).snapshot
    op = snapshot.operator("lazy")
    own = [snapshot.handle_header(op, h) for h in snapshot.keyed_handles(op)]
    assert any(len(h.states) < len(snapshot.header(op).states) for h in own)
    assert any(snapshot.state_ids(op, h) is not None for h in snapshot.keyed_handles(op))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("state", STATES)
def test_every_state_reads_exactly(kind, state):
    checkpoint = FlinkCheckpoint.open(str(LAZY / kind))
    assert _value_by_value(checkpoint, state) == expected(state)
    tables = checkpoint.read_keyed_state(state, operator="lazy")
    assert by_key(state, (row for table in tables for row in table.to_pylist())) == \
        expected(state)


@pytest.mark.parametrize("kind", KINDS)
def test_inspect_counts_every_state(kind, capsys):
    counts = count_snapshot(FlinkCheckpoint.open(str(LAZY / kind)))
    (lazy,) = [op for op in counts.operators if op.uid == "lazy"]
    counted = {s.name: (s.entries, s.rows) for s in lazy.states
               if not s.name.startswith("_timer")}
    assert counted == {name: (len(expected(name)), sum(
        len(v) if STATES[name] in ("map", "list") else 1 for v in expected(name).values()))
        for name in STATES}
    assert counts.unchecked == ()
    assert main(["inspect", str(LAZY / kind)]) == 0
    assert "vip" in capsys.readouterr().out


@pytest.mark.parametrize("kind", KINDS)
def test_the_metadata_lists_every_state(kind):
    summaries = FlinkCheckpoint.open(str(LAZY / kind)).summaries()
    named = {s.state_name: s for s in summaries if s.operator_uid == "lazy"}
    assert set(STATES) <= set(named)
    assert all(named[name].unreadable is None for name in STATES)


@pytest.mark.parametrize("kind", ["canonical", "rocksdb", "rocksdb-native", "rocksdb-incremental"])
def test_import_keeps_every_state(kind, tmp_path):
    result = import_flink(str(LAZY / kind), str(tmp_path))
    assert result.skipped_operators == ()
    imported = Checkpoint.open(str(tmp_path))
    counts = {row["key"]: row["value"] for table in imported.read_keyed_state(
        "count", operator="lazy") for row in table.to_pylist()}
    assert counts == expected("count")


def test_diff_of_the_heap_and_rocksdb_savepoints_finds_no_change(capsys):
    assert main(["diff", str(LAZY / "canonical"), str(LAZY / "rocksdb")]) == 0
    out = capsys.readouterr().out
    for state in STATES:
        assert f"  {state:<20} {0:>9,} {0:>9,} {0:>9,}  0 (of" in out


def _spec(max_parallelism: int, backend: str = "hashmap") -> dict:
    states = [{"name": "count", "kind": "value", "value": "Long"},
              {"name": "last", "kind": "value", "value": "String"},
              {"name": "vip", "kind": "map", "user_key": "String", "user_value": "Long"},
              {"name": "rare", "kind": "list", "element": "Long"},
              {"name": "late", "kind": "reducing", "value": "Long"}]
    return {"max_parallelism": max_parallelism, "parallelism": 3, "state_backend": backend,
            "operators": [{"uid": "lazy", "key": "String", "keyed_states": states}]}


@pytest.mark.realflink
@pytest.mark.parametrize("kind, backend", [
    ("canonical", "hashmap"), ("rocksdb", "hashmap"), ("rocksdb-native", "hashmap"),
    ("rocksdb-native", "rocksdb"), ("rocksdb-incremental", "hashmap"),
    ("rocksdb-incremental", "rocksdb")])
def test_a_new_max_parallelism_restores_every_key(kind, backend, tmp_path):
    rescale_max_parallelism(str(LAZY / kind), str(tmp_path / "out"), 256)
    rows = restore(tmp_path / "out", _spec(256, backend))
    for state, kind_of in STATES.items():
        restored = values(rows, "lazy", state)
        if kind_of == "map":
            restored = {key: dict(pairs) for key, pairs in restored.items()}
        assert restored == expected(state), state


def test_a_rewrite_of_rocksdb_state_says_its_output_is_canonical(tmp_path, capsys):
    assert main(["rescale", str(LAZY / "rocksdb-native"), "--max-parallelism", "256",
                 "--output", str(tmp_path / "out")]) == 0
    assert (f"wrote canonical savepoint {tmp_path / 'out'} (Flink restores it into the heap or"
            " the RocksDB backend)") in capsys.readouterr().out
    assert FlinkCheckpoint.open(str(tmp_path / "out")).snapshot.operator("lazy").subtasks[
        0].keyed[0].savepoint  # the canonical layout
