"""``--json``: each command prints one JSON document on stdout, shaped as docs/CLI.md shows it
and saying what the snapshots themselves say (read back independently)."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.cli import build_parser, main
from statesource.flink.reader import FlinkCheckpoint
from statesource.format import Checkpoint
from statesource.keygroups import assign_to_key_group, operator_index_for_key_group
from statesource.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend
from statesource.types import STRING, key_type

ROOT = Path(__file__).resolve().parents[2]
FLINK = ROOT / "tests" / "fixtures" / "flink" / "mp256" / "canonical"
FREE_FORM = {"types", "removed"}
"""Objects whose keys are data (value roles, state names), not part of the shape."""
KEYS = {"key", "missing"}
"""Keys of the snapshot (or lists of them): JSON values of whatever type the keys have."""


def documented() -> dict[str, list]:
    """The JSON examples of docs/CLI.md, by the commands of their heading, in order."""
    text = (ROOT / "docs" / "CLI.md").read_text()
    examples: dict[str, list] = {}
    for heading, body in re.findall(r"^### ([^\n]+)\n(.*?)(?=^#|\Z)", text, flags=re.M | re.S):
        blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", body, flags=re.S)]
        for command in re.findall(r"`statesource ([\w-]+) --json`", heading):
            examples[command] = blocks
    return examples


DOCUMENTED = documented()


def assert_shape(example, actual, where="$"):
    """``actual`` has the keys ``example`` has, everywhere (a list's elements as the example's
    first), and values of the same JSON type; ``null`` stands for a value that does not
    apply, on either side."""
    if example is None or actual is None:
        return
    if isinstance(example, dict):
        assert isinstance(actual, dict), where
        if where.rsplit(".", 1)[-1] not in FREE_FORM:
            assert sorted(actual) == sorted(example), where
            for key in set(example) - KEYS:
                assert_shape(example[key], actual[key], f"{where}.{key}")
    elif isinstance(example, list):
        assert isinstance(actual, list), where
        for item in actual if example else ():
            assert_shape(example[0], item, f"{where}[]")
    else:
        kinds = (bool, (int, float), str)
        assert [isinstance(example, k) for k in kinds] == [isinstance(actual, k)
                                                           for k in kinds], where


def run_json(capsys, argv: list[str], status: int = 0) -> dict:
    assert main([*argv, "--json"]) == status
    return json.loads(capsys.readouterr().out)  # the whole of stdout is one document


def test_every_command_with_json_is_documented():
    commands = next(a for a in build_parser()._actions
                    if isinstance(a, argparse._SubParsersAction)).choices
    with_json = sorted(name for name, parser in commands.items()
                       if any("--json" in a.option_strings for a in parser._actions))
    assert sorted(DOCUMENTED) == with_json
    assert {"diff", "drop", "erase", "export-flink", "import-flink", "inspect", "keygroup",
            "rescale"} <= set(with_json)
    assert [len(DOCUMENTED[c]) for c in ("rescale", "erase", "drop")] == [2, 2, 2]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("demo") / "demo"
    assert main(["demo", "--events", "3000", "--checkpoint-every", "1000", "--no-spark",
                 "--output", str(output)]) == 0
    return output


def test_inspect_of_a_checkpoint(demo, capsys):
    document = run_json(capsys, ["inspect", str(demo), "--parallelism", "3"])
    assert_shape(DOCUMENTED["inspect"][0], document)
    meta = Checkpoint.open(str(demo)).metadata
    assert (document["kind"], document["checkpoint_id"], document["format_version"],
            document["timestamp_ms"]) == ("statesource", 3, 2, meta.timestamp_ms)
    [op] = document["operators"]
    keyed = {s.name: s for s in meta.operator("user-activity").keyed_states}
    counted = {s["name"]: (s["entries"], s["rows"], s["bytes"]) for s in op["states"]}
    assert {name: counted[name] for name in keyed} == {
        name: (s.entries, s.rows, s.size_bytes) for name, s in keyed.items()}
    assert counted["source_offset"][:2] == (2, 2)
    skew = op["skew"]
    rows = sum(s.rows for s in keyed.values())
    assert skew["by"] == "rows" and sum(skew["per_key_group"]) == rows
    assert [(s["parallelism"], s["now"], sum(s["per_subtask"]), s["key_groups_per_subtask"])
            for s in skew["subtasks"]] == [(2, True, rows, [64, 64]), (3, False, rows, [42, 43])]


def test_inspect_of_a_flink_snapshot_names_its_operators(capsys):
    document = run_json(capsys, ["inspect", str(FLINK)])
    assert_shape(DOCUMENTED["inspect"][0], document)
    snapshot = FlinkCheckpoint.open(str(FLINK)).snapshot
    assert [(op["uid"], op["name"], op["operator_id"]) for op in document["operators"]] == [
        (op.uid, op.name, op.operator_id) for op in snapshot.operators]
    assert (document["kind"], document["format_version"]) == ("flink", None)


def test_diff(tmp_path, capsys):
    backend = KeyedStateBackend("string", 128)
    value = backend.get_state(ValueStateDescriptor("v", "long"))
    for i in range(100):
        backend.set_current_key(f"k{i}")
        value.update(i)
    with CheckpointWriter(str(tmp_path)) as writer:
        writer.write(1, {"op": [backend]})
        backend.set_current_key("k5")
        value.update(-5)
        backend.set_current_key("new")
        value.update(1)
        writer.write(2, {"op": [backend]})
    document = run_json(capsys, ["diff", str(tmp_path / "chk-1"), str(tmp_path / "chk-2")], 1)
    assert_shape(DOCUMENTED["diff"][0], document)
    groups = sorted({assign_to_key_group(k, STRING, 128) for k in ("k5", "new")})
    holding = {assign_to_key_group(k, STRING, 128) for k in [f"k{i}" for i in range(100)]}
    assert document["changed"] and document["errors"] == []
    assert document["operators"] == [{"uid": "op", "states": [
        {"name": "v", "inserts": 1, "updates": 1, "deletes": 0, "key_groups_changed": groups,
         "key_groups_read": len(holding | set(groups))}]}]
    same = run_json(capsys, ["diff", str(tmp_path / "chk-2"), str(tmp_path / "chk-2")])
    assert not same["changed"]


def test_rescale_of_a_checkpoint(demo, tmp_path, capsys):
    copy = tmp_path / "demo"
    shutil.copytree(demo, copy)
    assert main(["rescale", str(copy), "--parallelism", "3", "--json"]) == 0
    captured = capsys.readouterr()
    assert "rows per subtask now" in captured.err  # the report goes to stderr
    document = json.loads(captured.out)
    assert_shape(DOCUMENTED["rescale"][0], document)
    rescaled = Checkpoint.open(str(copy), checkpoint_id=document["checkpoint_id"])
    rows = Counter(operator_index_for_key_group(128, 3, key_group)
                   for state in rescaled.operator().keyed_states
                   for table in rescaled.read_keyed_state(state.name)
                   for key_group in table.column("key_group").to_pylist())
    assert document["operators"] == [{"uid": "user-activity", "parallelism": 3,
                                      "max_parallelism": 128,
                                      "rows_per_subtask": [rows[0], rows[1], rows[2]]}]


def test_rescale_of_a_flink_snapshot(tmp_path, capsys):
    output = tmp_path / "mp512"
    document = run_json(capsys, ["rescale", str(FLINK), "--max-parallelism", "512",
                                 "--output", str(output)])
    assert_shape(DOCUMENTED["rescale"][1], document)
    rescaled = FlinkCheckpoint.open(document["location"])
    assert document["location"] == str(output)
    by_uid = {op["uid"]: op for op in document["operators"]}
    for uid in ("stateful", "opaque", "windows"):
        assert (by_uid[uid]["max_parallelism_before"], by_uid[uid]["max_parallelism"]) == (
            256, rescaled.operator(uid).max_parallelism)
    assert document["entries"] == sum(op["entries"] for op in document["operators"])


def _rows(path: str, state: str) -> list[dict]:
    return pa.concat_tables(FlinkCheckpoint.open(path).read_keyed_state(
        state, operator="stateful")).to_pylist()


def test_erase(tmp_path, capsys):
    key = _rows(str(FLINK), "total")[0]["key"]
    document = run_json(capsys, ["erase", str(FLINK), "--operator", "stateful", "--key",
                                 str(key), "--key", "424242", "--output", str(tmp_path / "e")])
    assert_shape(DOCUMENTED["erase"][0], document)
    assert (document["keys"], document["missing"]) == (2, [424242])
    assert document["total_removed"] == sum(document["removed"].values())
    assert document["removed"]["total"] == sum(r["key"] == key for r in _rows(str(FLINK),
                                                                              "total")) == 1
    assert not any(r["key"] == key for r in _rows(document["location"], "total"))


def test_drop(tmp_path, capsys):
    document = run_json(capsys, ["drop", str(FLINK), "--operator", "stateful", "--state",
                                 "total", "--output", str(tmp_path / "d")])
    assert_shape(DOCUMENTED["drop"][1], document)
    assert document["removed"] == {"total": len(_rows(str(FLINK), "total"))}
    assert "total" not in {s.name for s in FlinkCheckpoint.open(
        document["location"]).operator("stateful").keyed_states}


def test_export_flink(tmp_path, capsys):
    backend = KeyedStateBackend("string", 128)
    totals = backend.get_state(ValueStateDescriptor("totals", "long"))
    orders = backend.get_state(ListStateDescriptor("orders", "long"))
    offsets = OperatorStateBackend()
    offsets.get_list_state("offsets", "long").add(7)
    for i in range(60):
        backend.set_current_key(f"c{i % 20}")
        totals.update(i)
        orders.add(i)
    with CheckpointWriter(str(tmp_path / "orders")) as writer:
        writer.write(1, {"orders-by-customer": [SubtaskBackends(backend, offsets)]})
    output = tmp_path / "savepoint"
    document = run_json(capsys, ["export-flink", str(tmp_path / "orders"), "--output",
                                 str(output), "--keyed-only"])
    assert_shape(DOCUMENTED["export-flink"][0], document)
    [op] = document["operators"]
    # one canonical pair per value, and per key's list
    assert (op["uid"], sorted(op["states"]), op["entries"]) == (
        "orders-by-customer", ["orders", "totals"], 20 + 20)
    assert document["skipped_operator_states"] == [{"operator": "orders-by-customer",
                                                    "state": "offsets"}]
    exported = FlinkCheckpoint.open(document["location"])
    assert exported.operator("orders-by-customer").max_parallelism == op["max_parallelism"]


def test_import_flink(tmp_path, capsys):
    document = run_json(capsys, ["import-flink", str(FLINK), str(tmp_path / "imported")])
    assert_shape(DOCUMENTED["import-flink"][0], document)
    imported = Checkpoint.open(document["location"])
    assert document["checkpoint_id"] == imported.checkpoint_id
    assert document["operators"] == [
        {"uid": op.uid, "states": [s.name for s in op.keyed_states],
         "operator_states": [s.name for s in op.operator_states]}
        for op in imported.metadata.operators]
    assert "stateful/_timer_state/event_user-timers" in document["skipped_timers"]


def test_keygroup(capsys):
    document = run_json(capsys, ["keygroup", "--key-type", "tuple<string,long>",
                                 "--max-parallelism", "128", "--parallelism", "4",
                                 '["a", 3]', '["b", 4]'])
    assert_shape(DOCUMENTED["keygroup"][0], document)
    declared = key_type("tuple<string,long>")
    expected = []
    for key in (("a", 3), ("b", 4)):
        group = assign_to_key_group(key, declared, 128)
        expected.append({"key": list(key), "key_group": group,
                         "subtask": operator_index_for_key_group(128, 4, group)})
    assert document == {"key_type": "tuple<string,long>", "max_parallelism": 128,
                        "parallelism": 4, "keys": expected}


def test_migrate_dry_run(capsys):
    snapshot = ROOT / "tests" / "fixtures" / "flink" / "flink-1.20" / "canonical"
    document = run_json(capsys, ["migrate", str(snapshot), "--dry-run"])
    assert_shape(DOCUMENTED["migrate"][0], document)
    assert document["output"] is None
    stateful = FlinkCheckpoint.open(str(snapshot)).operator("stateful")
    assert {s.name for s in stateful.keyed_states} <= {
        s["state"] for s in document["states"] if s["operator"] == stateful.uid}


def test_migrate_says_where_it_wrote_and_whether_compressed(tmp_path, capsys):
    snapshot = ROOT / "tests" / "fixtures" / "flink" / "flink-1.20" / "canonical"
    output = tmp_path / "for-2.3"
    document = run_json(capsys, ["migrate", str(snapshot), "--to", "2.3", "--output",
                                 str(output), "--compression", "snappy", "--skip-unmigratable"])
    assert_shape(DOCUMENTED["migrate"][0], document)
    assert document["output"] == str(output) and document["compressed"] is True
    assert FlinkCheckpoint.open(str(output)).snapshot.operators


def test_clean_savepoints(tmp_path, capsys):
    staging = tmp_path / f".out.tmp-{'0' * 32}"
    staging.mkdir()
    (staging / "state").write_bytes(b"x" * 10)
    for path in (staging / "state", staging):
        os.utime(path, (0, 0))  # a killed write's, long ago
    document = run_json(capsys, ["clean-savepoints", str(tmp_path), "--dry-run"])
    assert_shape(DOCUMENTED["clean-savepoints"][0], document)
    assert document == {"location": str(tmp_path), "dry_run": True, "bytes": 10,
                        "staging_directories": [{"path": str(staging), "bytes": 10}],
                        "orphaned_files": []}
    assert staging.is_dir()
