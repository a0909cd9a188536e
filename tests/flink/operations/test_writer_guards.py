"""What the savepoint writers report, refuse and carry, against what the source holds.

The issue 39 audit's mutation check found these unguarded, and the writers' own mutation
run (tests/mutation/run.py --writers) others: the counts of pairs, timers and elements in
the reports of a rescale, an erase, a drop and an export; raw keyed state (refused where it
would be re-keyed or would keep erased keys, else carried byte for byte) and raw operator
state's offsets; an output that is a symbolic link; files of one operator whose headers
list the states in different orders; refusals of several operators; the properties of an
edited native savepoint; Kryo values of a native snapshot met by an edit; keys statesource
cannot hash; the edit of an operator named by its hex id; a savepoint target's checkpoint
id and Flink version.

The expected counts are read from the source (or the output) by the reader
(tests/flink_entries.py), whose values real Flink restores check elsewhere; none is
computed by the writers' code.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest
from flink_entries import entries_by_state, key_stateful_by_its_event_pojo

from flink_fixture_checks import FIXTURES
from statesource.cli import main
from statesource.errors import (
    CheckpointExistsError,
    CorruptCheckpointError,
    IncompatibleCheckpointError,
    InvalidArgumentError,
)
from statesource.flink.handles import (
    OperatorHandle,
    OperatorSnapshot,
    SubtaskState,
    operator_id_of,
)
from statesource.flink.operations.edit import drop_state, erase_keys, operator_key_type
from statesource.flink.operations.export import export_flink
from statesource.flink.operations.migrate import migrate
from statesource.flink.operations.rescale import (
    SavepointRewrite,
    is_canonical_savepoint,
    rescale_max_parallelism,
    rewrite_savepoint,
)
from statesource.flink.operations.savepoint_plan import Edit
from statesource.flink.operations.savepoint_target import FlinkSavepointTarget
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.metadata_writer import write_metadata
from statesource.flink.snapshot.publish import SavepointWriter
from statesource.format.reader import Checkpoint
from statesource.keygroups import assign_to_key_group
from statesource.model import StateKind
from statesource.sources import open_target
from statesource.spark.write.rewrite import Rewrite

MP256 = FIXTURES / "mp256" / "canonical"


def _pairs_and_timers(source: Path, operator: str, erased: frozenset = frozenset(),
                      only: str | None = None) -> tuple[int, int]:
    """The pairs a canonical savepoint holds of ``operator`` (one per value-state entry,
    list, map user key and timer) and its timers, but for the keys ``erased``; of state
    ``only``, if given."""
    checkpoint = FlinkCheckpoint.open(str(source))
    header = checkpoint.snapshot.header(checkpoint.snapshot.operator(operator))
    assert header is not None
    pairs = timers = 0
    for info in header.states if only is None else [i for i in header.states
                                                    if i.name == only]:
        stored = [(key, namespace, value) for _, keys, namespaces, values
                  in checkpoint.entries(info.name, operator=operator)
                  for key, namespace, value in zip(keys, namespaces, values)
                  if key not in erased]
        if info.is_timer:
            timers += len(stored)
            pairs += len(stored)
        elif info.kind is StateKind.MAP:
            pairs += sum(len(value) for _, _, value in stored)
        elif info.kind is StateKind.LIST:
            pairs += len({(repr(key), repr(namespace)) for key, namespace, _ in stored})
        else:
            pairs += len(stored)
    return pairs, timers


@pytest.mark.parametrize("variant", ["mp256", "mp128-snappy"])
def test_a_rescale_reports_the_pairs_and_timers_the_source_holds(variant, tmp_path):
    source = FIXTURES / variant / "canonical"
    done = rescale_max_parallelism(source, tmp_path / "out", 1024)
    assert done.operators
    for op in done.operators:
        assert (op.entries, op.timers) == _pairs_and_timers(source, op.operator), op.operator
    assert sum(op.timers for op in done.operators) > 0


def test_an_erase_reports_the_pairs_and_timers_it_kept(tmp_path):
    """Keys are compared one by one (no column-wise move): what stays is counted there."""
    done = rewrite_savepoint(MP256, tmp_path / "out", None, edit=Edit("stateful", erase=(39,)))
    (op,) = [op for op in done.operators if op.operator == "stateful"]
    kept = _pairs_and_timers(MP256, "stateful", frozenset({39}))
    assert (op.entries, op.timers) == kept
    assert kept != _pairs_and_timers(MP256, "stateful") and kept[1] > 0


@pytest.mark.parametrize("state", ["per_user", "events", "_timer_state/event_user-timers"])
def test_a_dropped_keyed_state_reports_its_pairs(state, tmp_path):
    done = drop_state(MP256, tmp_path / "out", "stateful", state)
    pairs = _pairs_and_timers(MP256, "stateful", only=state)[0]
    assert done.removed == ((state, pairs),) and pairs > 0


@pytest.mark.parametrize(("operator", "state"), [("stateful", "subtasks"),
                                                  ("broadcaster", "rules")])
def test_a_dropped_operator_state_reports_its_elements(operator, state, tmp_path):
    """A list state's elements, a broadcast state's map entries, over every subtask (one
    offset per element of a list, but one per map of a broadcast state)."""
    held = FlinkCheckpoint.open(str(MP256)).read_operator_state(state, operator=operator)
    done = drop_state(MP256, tmp_path / "out", operator, state)
    assert done.removed == ((state, sum(map(len, held))),)
    names = [{s.name for sub in FlinkSnapshot.open(str(path)).operator(operator).subtasks
              for h in sub.operator for s in h.states} for path in (MP256, tmp_path / "out")]
    assert names[1] == names[0] - {state} and state in names[0]


def _with_raw_keyed_state(tmp_path: Path) -> Path:
    """mp256 whose operator ``stateful`` also records raw keyed state in every subtask (here
    the bytes of its managed keyed-state files: raw state is the operator's own format)."""
    source = tmp_path / "source"
    shutil.copytree(MP256, source)
    snapshot = FlinkSnapshot.open(str(source))
    operators = tuple(
        dataclasses.replace(op, subtasks=tuple(dataclasses.replace(s, raw_keyed=s.keyed)
                                               for s in op.subtasks))
        if op.label == "stateful" else op for op in snapshot.metadata.operators)
    (source / "_metadata").chmod(0o644)
    (source / "_metadata").write_bytes(write_metadata(
        dataclasses.replace(snapshot.metadata, operators=operators)))
    return source


def _raw_keyed_bytes(path: Path, operator: str) -> list[tuple[tuple[int, ...], bytes]]:
    snapshot = FlinkSnapshot.open(str(path))
    return [(h.offsets, snapshot.read_bytes(h.stream, 0, h.stream.size))
            for s in snapshot.operator(operator).subtasks for h in s.raw_keyed]


def test_raw_keyed_state_is_refused_where_it_would_be_re_keyed_or_keep_erased_keys(tmp_path):
    source = _with_raw_keyed_state(tmp_path)
    with pytest.raises(IncompatibleCheckpointError,
                       match="operator 'stateful' has raw keyed state .* its max parallelism"
                             " cannot change"):
        rescale_max_parallelism(source, tmp_path / "out", 1024)
    with pytest.raises(IncompatibleCheckpointError,
                       match="operator 'stateful' has raw keyed state .* the keys to erase"
                             " could stay there"):
        erase_keys(source, tmp_path / "out", "stateful", [39])
    assert sorted(os.listdir(tmp_path)) == ["source"]


@pytest.mark.parametrize(("operator", "state"), [("stateful", "events"), ("windows",
                                                                          "window-contents")])
def test_an_edit_carries_raw_keyed_state_over_byte_for_byte(operator, state, tmp_path):
    """A drop keeps the max parallelism and the parallelism: the raw keyed state of the
    edited operator, and of the others, stays valid as it is."""
    source = _with_raw_keyed_state(tmp_path)
    expected = _raw_keyed_bytes(source, "stateful")
    assert len(expected) == 2
    drop_state(source, tmp_path / "out", operator, state)
    assert _raw_keyed_bytes(tmp_path / "out", "stateful") == expected


@pytest.mark.parametrize("target", ["nowhere", "a-directory"])
def test_an_output_that_is_a_symbolic_link_is_refused(target, tmp_path):
    """Dangling or not, the link exists: it is not replaced, and nothing is written where it
    leads."""
    link = tmp_path / "out"
    link.symlink_to(tmp_path / target)
    if target == "a-directory":
        (tmp_path / target).mkdir()
    with pytest.raises(CheckpointExistsError, match=f"{link} already exists"):
        rescale_max_parallelism(MP256, link, 1024)
    assert os.path.islink(link) and not os.path.exists(tmp_path / "nowhere")
    assert sorted(os.listdir(tmp_path)) == sorted({"out", target} - {"nowhere"})


@pytest.mark.parametrize("kind", ["canonical", "native"])
@pytest.mark.parametrize("edit", ["rescale", "drop"])
def test_files_listing_states_in_other_orders_keep_each_state(edit, kind, tmp_path):
    """``lazy``'s subtasks registered their states in different orders (and not all of
    them): each file's state ids are mapped to the merged header's, and every entry stays
    in its own state, in the key group of its key (a native snapshot's pairs are moved one
    by one, a canonical one's key groups column-wise)."""
    source = FIXTURES / "lazy" / kind
    snapshot = FlinkSnapshot.open(str(source))
    op = snapshot.operator("lazy")
    assert any(snapshot.state_ids(op, h) is not None for h in snapshot.keyed_handles(op))
    before = entries_by_state(source)
    if edit == "rescale":
        rescale_max_parallelism(source, tmp_path / "out", 256)
    else:
        drop_state(source, tmp_path / "out", "lazy", "rare")
        del before[("lazy", "rare")]
    assert entries_by_state(tmp_path / "out") == before
    assert sum(map(len, before.values())) > 0
    written = FlinkCheckpoint.open(str(tmp_path / "out"))
    meta = written.operator("lazy")
    for table in written.read_keyed_state("count", operator="lazy"):
        keys = meta.key_type.from_arrow(table.column("key"))
        for key, key_group in zip(keys, table.column("key_group").to_pylist()):
            assert key_group == assign_to_key_group(key, meta.key_type, meta.max_parallelism)


def test_refusals_of_several_kinds_are_one_error_of_the_graver_kind(tmp_path, monkeypatch):
    """Every operator is planned first: a bad argument for one (operator state in a subtask
    the new parallelism lacks) and keys statesource cannot hash in others are one
    ``IncompatibleCheckpointError`` naming each; bad arguments alone, an
    ``InvalidArgumentError``."""
    key_stateful_by_its_event_pojo(monkeypatch, MP256)
    with pytest.raises(IncompatibleCheckpointError) as refused:
        rescale_max_parallelism(MP256, tmp_path / "out", 1024, parallelism=1)
    message = str(refused.value)
    assert "operators cannot be rewritten: " in message
    assert "holds operator state in subtasks [1]" in message and "keyed by POJO" in message
    with pytest.raises(InvalidArgumentError, match="operators cannot be rewritten: .*above the"
                                                   " new max parallelism 1"):
        rescale_max_parallelism(MP256, tmp_path / "out", 1)
    assert os.listdir(tmp_path) == []


def test_an_edit_of_a_native_snapshot_says_it_is_a_savepoint_of_its_own(tmp_path):
    """A drop of an operator state from a native savepoint converts no keyed state (the
    files are carried): the output still records the properties of a canonical savepoint,
    as every rewrite's output does unless its source is one and nothing was converted."""
    source = FIXTURES / "isolation" / "native"
    assert not is_canonical_savepoint(FlinkSnapshot.open(str(source)).metadata.properties)
    drop_state(source, tmp_path / "out", "counts", "seen")
    assert is_canonical_savepoint(FlinkSnapshot.open(str(tmp_path / "out")).metadata.properties)


def test_an_edit_walking_kryo_values_of_a_native_snapshot_is_refused(tmp_path):
    """The edited operator's key groups are walked; Kryo values in a native snapshot cannot
    be delimited, so the edit is refused before anything is written, advising a canonical
    savepoint."""
    with pytest.raises(IncompatibleCheckpointError,
                       match="operator 'opaque', state 'last_uuid' of a native snapshot: .*take"
                             " a canonical savepoint"):
        drop_state(FIXTURES / "mp256" / "native", tmp_path / "out", "opaque",
                   "_timer_state/event_user-timers")
    assert os.listdir(tmp_path) == []


def test_keys_to_erase_from_an_operator_without_keyed_state_are_refused(tmp_path):
    """Refused, not an erase that silently finds none of the keys."""
    with pytest.raises(InvalidArgumentError,
                       match="operator 'broadcaster' has no keyed state: no keys to edit"):
        erase_keys(MP256, tmp_path / "out", "broadcaster", [39])
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("offset", ["end", "negative", "inside"])
def test_raw_operator_state_is_copied_only_with_its_offsets_inside_its_file(offset, tmp_path):
    """Raw operator state is the operator's own format, so only its offsets are checked:
    each must lie inside the file (one at its very end, or before its start, is corrupt)."""
    source = tmp_path / "source"
    shutil.copytree(MP256, source)
    snapshot = FlinkSnapshot.open(str(source))
    (handle,) = snapshot.operator("stateful").subtasks[0].operator
    at = {"end": handle.stream.size, "negative": -1, "inside": 0}[offset]
    raw = dataclasses.replace(handle, states=tuple(
        dataclasses.replace(s, offsets=(at,)) for s in handle.states[:1]))
    operators = tuple(dataclasses.replace(op, subtasks=(dataclasses.replace(
        op.subtasks[0], raw_operator=(raw,)), *op.subtasks[1:]))
        if op.label == "stateful" else op for op in snapshot.metadata.operators)
    (source / "_metadata").chmod(0o644)
    (source / "_metadata").write_bytes(write_metadata(
        dataclasses.replace(snapshot.metadata, operators=operators)))
    if offset == "inside":
        drop_state(source, tmp_path / "out", "stateful", "events")
        (copied,) = FlinkSnapshot.open(str(tmp_path / "out")).operator(
            "stateful").subtasks[0].raw_operator
        assert copied.states == raw.states
        return
    with pytest.raises(CorruptCheckpointError,
                       match=f"raw operator state '{raw.states[0].name}' has offset {at},"
                             f" outside the file's {handle.stream.size} bytes"):
        drop_state(source, tmp_path / "out", "stateful", "events")
    assert sorted(os.listdir(tmp_path)) == ["source"]


def test_keys_statesource_cannot_hash_are_carried_in_their_key_group(tmp_path):
    """An edit of an operator keyed by a type statesource cannot hash (a POJO, Kryo or
    Avro key: no fixture holds one whose state decodes) walks its pairs without decoding a
    key, each kept in its key group: here mp256's plan, as it would be for such keys."""
    snapshot = FlinkSnapshot.open(str(MP256))
    rewrite = SavepointRewrite.plan(snapshot, None, None, [Edit("stateful", drops=("events",))])
    assert any(plan.key_type is not None for plan in rewrite.plans)
    rewrite = dataclasses.replace(rewrite, plans=tuple(
        dataclasses.replace(plan, key_type=None) for plan in rewrite.plans))
    with SavepointWriter(tmp_path / "out") as writer:
        operators, done = rewrite.write(writer)
        writer.publish(rewrite.metadata(operators))
    expected = entries_by_state(MP256)
    del expected[("stateful", "events")]
    assert entries_by_state(tmp_path / "out") == expected
    assert [op.removed for op in done] == [(("events", 50),)]


def test_an_erase_by_hex_id_reports_what_it_erased(tmp_path):
    hex_id = operator_id_of("stateful")
    done = erase_keys(MP256, tmp_path / "out", hex_id, [39, 123456])
    assert done.missing == (123456,) and dict(done.removed)["max_id"] == 1


def test_the_key_type_of_an_operator_without_keyed_state_is_refused():
    with pytest.raises(InvalidArgumentError,
                       match="operator 'broadcaster' has no keyed state: no keys to erase"):
        operator_key_type(MP256, "broadcaster")


@pytest.mark.parametrize("checkpoint_id", [-1, 2**63])
def test_a_savepoint_target_refuses_a_checkpoint_id_flink_does_not_have(checkpoint_id,
                                                                        tmp_path):
    with pytest.raises(InvalidArgumentError, match=str(checkpoint_id)):
        FlinkSavepointTarget.open(None, str(tmp_path / "out"), checkpoint_id=checkpoint_id)
    assert os.listdir(tmp_path) == []


def test_a_savepoint_target_refuses_a_flink_version_other_than_its_bases(tmp_path):
    with pytest.raises(InvalidArgumentError, match="Flink version 1.20: .* was written by Flink"
                                                   " 2"):
        FlinkSavepointTarget.open(str(MP256), str(tmp_path / "out"), flink_version="1.20")
    FlinkSavepointTarget.open(str(MP256), str(tmp_path / "out"), flink_version="2.3")
    assert os.listdir(tmp_path) == []


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("demo") / "checkpoints"
    assert main(["demo", "--events", "500", "--checkpoint-every", "500", "--no-spark",
                 "--output", str(output)]) == 0
    return output


@pytest.mark.parametrize("keyed", [True, False])
def test_an_export_reports_the_pairs_and_elements_it_wrote(keyed, demo, tmp_path):
    """Counted in the savepoint written, by the reader; an operator holding only operator
    state (the demo's, its keyed states dropped) is exported too."""
    source = tmp_path / "checkpoints"
    shutil.copytree(demo, source)
    if not keyed:
        (op,) = Checkpoint.open(str(source)).metadata.operators
        staged = Rewrite(open_target(str(source)))
        for state in op.keyed_states:
            staged.drop(op.uid, state.name)
        staged.commit()
    done = export_flink(source, tmp_path / "out")
    written = FlinkCheckpoint.open(str(tmp_path / "out"))
    assert [op.uid for op in done.operators] == ["user-activity"]
    for op in done.operators:
        pairs = _pairs_and_timers(tmp_path / "out", op.uid)[0] if op.states else 0
        elements = sum(len(share) for name in op.operator_states
                       for share in written.read_operator_state(name, operator=op.uid))
        assert (op.entries, op.operator_elements) == (pairs, elements), op.uid
        assert bool(op.entries) is keyed and op.operator_elements > 0


@pytest.mark.parametrize("writer", ["export", "migrate", "rescale", "drop"])
def test_an_existing_output_is_refused_before_the_source_is_read(writer, tmp_path):
    """The output is checked first: no source (here none at all) is opened for nothing."""
    (tmp_path / "out").mkdir()
    missing, out = tmp_path / "no-source", tmp_path / "out"
    with pytest.raises(CheckpointExistsError, match=f"{out} already exists"):
        if writer == "export":
            export_flink(missing, out)
        elif writer == "migrate":
            migrate(missing, out)
        elif writer == "rescale":
            rescale_max_parallelism(missing, out, 1024)
        else:
            drop_state(missing, out, "stateful", "events")
    assert os.listdir(tmp_path) == ["out"] and os.listdir(out) == []


def test_publish_refuses_metadata_recording_another_size_than_was_written(tmp_path):
    """A ``_metadata`` whose handle says 4 bytes of a file written with 3 would make Flink
    read past its end: not published."""
    source = FlinkSnapshot.open(str(MP256)).metadata
    with pytest.raises(CorruptCheckpointError, match="records 4 bytes for '.*', which has 3:"
                                                     " not publishing"), \
            SavepointWriter(tmp_path / "out") as writer:
        written = writer.write_file(b"abc")
        handle = OperatorHandle((), dataclasses.replace(written, size=4))
        op = OperatorSnapshot("op", "op", operator_id_of("op"), 1, 128,
                              (SubtaskState(0, (), (handle,)),))
        writer.publish(dataclasses.replace(source, operators=(op,), master_states=()))
    assert os.listdir(tmp_path) == []
