"""The ``types`` fixture (AvroFixtureJob.java, a real Flink 2.3) decodes exactly: Avro values,
map states with Tuple, Row and POJO user keys, and Kryo values; import-flink keeps them all.

``expected.json`` is computed by generate.py from the job's numbers in plain Python.
"""

from __future__ import annotations

import base64
import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from statesource.cli import main
from statesource.errors import CorruptCheckpointError, IncompatibleCheckpointError
from statesource.flink.reader import FlinkCheckpoint
from statesource.format.columns import decode_entries
from statesource.format.reader import Checkpoint
from statesource.keygroups import assign_to_key_group
from statesource.types import LONG

TYPES = Path(__file__).resolve().parents[2] / "fixtures" / "flink" / "types"
KINDS = ["canonical", "native"]


def truth() -> dict:
    return json.loads((TYPES / "expected.json").read_text())


def rows_by_key(checkpoint, state, operator="typed") -> dict[int, list[dict]]:
    found: dict[int, list[dict]] = {}
    for table in checkpoint.read_keyed_state(state, operator=operator):
        for row in table.to_pylist():
            found.setdefault(row["key"], []).append(row)
    return found


def expected_profile(want: dict) -> dict:
    """The decoded shape of a profile: bytes, a UTC datetime, the map as its pairs."""
    return {**want, "raw": base64.b64decode(want["raw"]), "digest": base64.b64decode(
        want["digest"]), "seen": datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(
        milliseconds=want["seen"])}


def _same_profile(got: dict, want: dict) -> None:
    got = {**got, "counts": dict(got["counts"])}
    assert got == expected_profile(want)


@pytest.mark.parametrize("kind", KINDS)
def test_avro_generic_and_reflect_values_decode_to_the_expected_state(kind):
    checkpoint = FlinkCheckpoint.open(str(TYPES / kind))
    expected = truth()
    profiles = rows_by_key(checkpoint, "profile")
    points = rows_by_key(checkpoint, "point")
    pojo_points = rows_by_key(checkpoint, "point_pojo")  # the same objects, as a POJO
    scores = rows_by_key(checkpoint, "score")  # a SpecificRecord
    visits = rows_by_key(checkpoint, "visits")
    assert sorted(profiles) == sorted(points) == sorted(visits) == sorted(
        map(int, expected["keys"]))
    for key, want in expected["keys"].items():
        group = assign_to_key_group(int(key), LONG, expected["max_parallelism"])
        (profile,) = profiles[int(key)]
        assert profile["key_group"] == group
        _same_profile(profile["value"], want["profile"])
        assert [r["value"] for r in points[int(key)]] == [want["point"]]
        assert [r["value"] for r in pojo_points[int(key)]] == [want["point"]]
        assert [r["value"] for r in scores[int(key)]] == [want["score"]]
        assert [r["list_element"] for r in visits[int(key)]] == want["visits"]


def test_avro_schemas_come_from_the_snapshot():
    op = FlinkCheckpoint.open(str(TYPES / "canonical")).operator("typed")
    profile = op.keyed_state("profile").schemas["value"]
    assert profile.avro["name"] == "fixtures.Profile"
    assert str(profile.arrow_type).startswith("struct<user: string, visits: int32, total: int64")
    assert "seen: timestamp[ms, tz=UTC]" in str(profile.arrow_type)
    assert "level: string" in str(profile.arrow_type)
    point = op.keyed_state("point").schemas["value"]
    assert [f["name"] for f in point.avro["fields"]] == ["label", "x"]
    summaries = {s.state_name: s for s in FlinkCheckpoint.open(str(TYPES / "canonical"))
                 .summaries()}
    assert summaries["score"].value_types["value"]["name"] == "Score"
    snapshot = FlinkCheckpoint.open(str(TYPES / "canonical")).snapshot
    classes = {info.name: info.value.runtime_class for info in snapshot.header(
        snapshot.operator("typed")).states if info.name in ("profile", "point", "score")}
    assert classes == {"profile": "org.apache.avro.generic.GenericRecord",
                       "point": "AvroFixtureJob$Point", "score": "AvroFixtureJob$Score"}


@pytest.mark.parametrize("kind", KINDS)
def test_map_state_with_tuple_row_and_pojo_user_keys(kind):
    checkpoint = FlinkCheckpoint.open(str(TYPES / kind))
    expected = truth()["keys"]
    shapes = {"pairs": lambda u: [u["f0"], u["f1"]],
              "rows": lambda u: [u["f0"], u["f1"]] if u["row_kind"] == "+I" else None,
              "pojos": lambda u: [u["user"], u["bucket"]]}
    for state, shape in shapes.items():
        found = rows_by_key(checkpoint, state)
        got = {str(key): {json.dumps(shape(r["user_key"])): r["user_value"] for r in rows}
               for key, rows in found.items()}
        assert got == {key: want[state] for key, want in expected.items()}, state


def test_kryo_values_of_a_canonical_savepoint_read_as_bytes_naming_the_class():
    checkpoint = FlinkCheckpoint.open(str(TYPES / "canonical"))
    (summary,) = [s for s in checkpoint.summaries() if s.state_name == "money"]
    assert summary.value_types == {
        "value": {"type": "bytes", "java-class": "AvroFixtureJob$Money"}}
    found = rows_by_key(checkpoint, "money", operator="kryo")
    assert sorted(found) == sorted(map(int, truth()["keys"]))
    for rows in found.values():
        (row,) = rows
        # Kryo's FieldSerializer writes the String field ASCII with the last byte's high bit set
        assert row["value"].endswith(b"EU" + bytes([ord("R") | 0x80]))


def test_kryo_values_of_a_native_savepoint_fail_that_state_naming_it():
    checkpoint = FlinkCheckpoint.open(str(TYPES / "native"))
    with pytest.raises(IncompatibleCheckpointError,
                       match=r"state 'money' of a native snapshot.*Money.*take a canonical"):
        list(checkpoint.read_keyed_state("money", operator="kryo"))
    assert {s.state_name for s in checkpoint.summaries()} >= {"money", "profile", "pairs"}
    assert rows_by_key(checkpoint, "profile")


def test_avro_keys_are_refused_naming_why():
    op = FlinkCheckpoint.open(str(TYPES / "canonical"))
    info = op.snapshot.keyed_state_info(op.snapshot.operator("typed"), "profile")
    with pytest.raises(IncompatibleCheckpointError, match="keys of Avro .*GenericRecord.*hashCode"):
        info.value.data_type()


def test_import_flink_keeps_avro_values_and_struct_user_keys(tmp_path, capsys):
    source = str(TYPES / "canonical")
    assert main(["import-flink", source, str(tmp_path)]) == 0
    flink = FlinkCheckpoint.open(source)
    imported = Checkpoint.open(str(tmp_path))
    for state in ("profile", "point", "score", "visits", "pairs", "rows", "pojos"):
        assert imported.operator("typed").keyed_state(state).declaration == \
            flink.operator("typed").keyed_state(state).declaration
        want = [t.to_pylist() for t in flink.read_keyed_state(state, operator="typed")]
        got = [t.to_pylist() for t in imported.read_keyed_state(state, operator="typed")]
        assert got == want and sum(map(len, got)) > 0, state
    # the imported map state regroups into one dict per key, keyed by hashable records
    op = imported.operator("typed")
    declaration = op.keyed_state("pojos").declaration
    regrouped = {key: stored for table in imported.read_keyed_state("pojos", operator="typed")
                 for key, _, stored in decode_entries(op.keyed_key_type, declaration, table)}
    assert {k: {json.dumps([u["user"], u["bucket"]]): v for u, v in m.items()}
            for k, m in regrouped.items()} == {
        int(k): w["pojos"] for k, w in truth()["keys"].items()}


def _corrupted(tmp_path, kind, old: bytes, new: bytes) -> str:
    """A copy of the fixture with ``old`` replaced by ``new`` (same length) in its state files."""
    target = tmp_path / kind
    shutil.copytree(TYPES / kind, target)
    changed = False
    for path in target.iterdir():
        data = path.read_bytes()
        if path.name != "_metadata" and old in data:
            path.write_bytes(data.replace(old, new))
            changed = True
    assert changed
    return str(target)


def test_garbage_schema_json_names_the_file_and_offset(tmp_path):
    path = _corrupted(tmp_path, "canonical", b'{"type":"record","name":"Visit"',
                      b'{"type":"record","name":"Visit"'.replace(b"{", b"<", 1))
    checkpoint = FlinkCheckpoint.open(path)
    with pytest.raises(CorruptCheckpointError, match=r"Avro schema of .* at byte offset \d+ is"
                                                     r" not valid JSON"):
        checkpoint.operator("typed")


def test_schema_that_is_not_avro_names_the_file_and_offset(tmp_path):
    path = _corrupted(tmp_path, "native", b'"name":"Visit","fields"', b'"name":"Visit","fieldz"')
    with pytest.raises(CorruptCheckpointError, match=r"byte offset \d+ is not valid Avro"):
        FlinkCheckpoint.open(path).operator("typed")


def test_inspect_gives_the_reason_a_native_kryo_state_cannot_be_read(capsys):
    assert main(["inspect", str(TYPES / "native")]) == 0
    out = capsys.readouterr().out
    money = out[out.index("  money "):]
    assert "not counted: its AvroFixtureJob$Money values are Kryo bytes" in money
    assert out.count("values are Kryo bytes") == 1
    assert "not counted: it follows 'money' in the key groups of this native snapshot" in money
    assert main(["inspect", str(TYPES / "canonical")]) == 0
    assert "not counted" not in capsys.readouterr().out


def test_import_flink_of_a_native_kryo_state_fails_naming_it_and_leaves_nothing(tmp_path, capsys):
    assert main(["import-flink", str(TYPES / "native"), str(tmp_path)]) == 1
    assert "state 'money' of a native snapshot" in capsys.readouterr().err
    assert not [path for path in tmp_path.rglob("*") if path.is_file()]
