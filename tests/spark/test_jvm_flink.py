"""The JVM reader of Flink savepoints (FlinkKeyGroupReader.java) against the Python source:
identical rows, every column, in order, on every keyed state of every real-Flink snapshot
there is; which states the JVM decodes; key-group pushdown; hostile bytes refused with the
file and the byte offset.

The truth is the Python source, whose decoders tests/flink holds to Flink's own expected
state and to the per-value decoder.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import jvm_reader_loaded
from generated_savepoints import (
    ENTRIES,
    corrupted_copy,
    damaged,
    export_savepoint,
    wrong_length_after_a_key,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from flink_snapshots import SAVEPOINTS, only
from statesource.flink.jvm_layout import jvm_layout
from statesource.flink.layouts.canonical_writer import prefix_bytes
from statesource.flink.layouts.framing import canonical_sections
from statesource.flink.layouts.keyed import native_key_group_reader
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.keygroups import assign_to_key_group
from statesource.spark.jvm.plan import FlinkStatePythonSource
from statesource.types import LONG

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"
JVM_SCAN = "Flink key groups"


def _snapshot_dirs() -> list[Path]:
    return sorted({p.parent for root in (SAVEPOINTS, FIXTURES) for p in root.rglob("_metadata")})


@pytest.fixture
def jvm(spark):
    spark.dataSource.register(FlinkStatePythonSource)
    jvm_reader_loaded(spark)
    return spark


def _read(spark, fmt: str, path: Path, operator: str, state: str, where: str | None = None
          ) -> tuple[list[str], str, str] | tuple[str, str]:
    """Rows as JSON in order, the schema and the executed plan; or the error's class and
    message."""
    try:
        df = (spark.read.format(fmt).option("operator", operator).option("state", state)
              .option("filterPushdown", "true").load(str(path)))
        if where is not None:
            df = df.filter(where)
        rows = [json.dumps(r.asDict(recursive=True), default=repr) for r in df.collect()]
    except Exception as error:  # noqa: BLE001 - the test compares failures
        return (type(error).__name__, str(error))
    return rows, df.schema.json(), df._jdf.queryExecution().executedPlan().toString()


def _states(path: Path) -> list[tuple[str, str, bool]]:
    """Every keyed and timer state: (operator id, state name, whether the JVM decodes it)."""
    checkpoint = FlinkCheckpoint.open(str(path))
    found = []
    for op in checkpoint.snapshot.operators:
        if checkpoint.snapshot.undecodable(op) is not None:  # see test_operator_isolation
            continue
        header = checkpoint.snapshot.header(op)
        for info in header.states if header else ():
            served = not isinstance(jvm_layout(checkpoint, op.operator_id, info.name), str)
            found.append((op.operator_id, info.name, served))
    return found


def _compare_all(spark, path: Path, operators: set[str] | None = None) -> int:
    """Every state of the snapshot (of ``operators``: all) read on both paths: the same rows
    or both refused; how many states the JVM decodes."""
    decoded = 0
    for operator, state, served in _states(path):
        if operators is not None and operator not in operators:
            continue
        where = f"{path} {operator} {state}"
        on_jvm = _read(spark, "flinkstate", path, operator, state)
        on_python = _read(spark, "flinkstate-python", path, operator, state)
        if len(on_python) == 2:  # the Python source refuses: so must the JVM
            assert len(on_jvm) == 2, (where, on_python)
            continue
        assert len(on_jvm) == 3, (where, on_jvm)
        assert on_jvm[1] == on_python[1], where
        assert on_jvm[0] == on_python[0], where
        assert (JVM_SCAN in on_jvm[2]) == served, (where, on_jvm[2])
        decoded += served
    return decoded


@pytest.mark.parametrize("path", _snapshot_dirs(), ids=lambda p: str(p).split("flink")[-1])
def test_every_state_reads_the_same_on_both_paths(jvm, path):
    _compare_all(jvm, path)


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=ENTRIES)
def test_generated_states_read_the_same(jvm, tmp_path_factory, entries):
    """Any text (the JVM decodes UTF-16 units itself), null map values, empty lists."""
    assert _compare_all(jvm, export_savepoint(tmp_path_factory.mktemp("jvm-gen"), entries)) == 5


@settings(max_examples=5, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(at=st.floats(0, 1, exclude_max=True), data=st.binary(min_size=1, max_size=6),
       snappy=st.booleans(), layout=st.sampled_from(["canonical", "native"]))
@example(at=0.337890625, data=b"\x01", snappy=False, layout="canonical")  # a map entry apart
def test_corrupt_key_groups_fail_or_read_the_same(jvm, tmp_path_factory, at, data, snappy,
                                                  layout):
    source = FIXTURES / ("mp128-snappy" if snappy else "mp256") / layout
    broken = corrupted_copy(source, tmp_path_factory.mktemp("jvm-broken") / "sp", at, data)
    _compare_all(jvm, broken, damaged(broken))


def test_the_jvm_decodes_the_common_serializers():
    """Not vacuous: the fixtures hold Long, String, Double, Tuple2, Row and POJO values, TTL,
    lists, maps, timers, TimeWindow namespaces, plain and Snappy, canonical and native; each is
    decoded by the JVM."""
    served = {(variant, layout): {state for _, state, ok in _states(FIXTURES / variant / layout)
                                  if ok}
              for variant in ("mp256", "mp128-snappy", "types", "encoding")
              for layout in ("canonical", "native")}
    # types/native: state 0 has Avro values, which the shim cannot pass to reach the others
    assert not served.pop(("types", "native"))
    blocked = FlinkCheckpoint.open(str(FIXTURES / "types" / "native"))
    assert "state 'score' has" in jvm_layout(blocked, "typed", "point_pojo")
    assert all(served.values()), served
    for layout in ("canonical", "native"):
        assert sum(len(s) for (_, written), s in served.items() if written == layout) >= 15, served
    assert any(s.startswith("_timer_state") for names in served.values() for s in names)


LOOKUPS = {
    "long key": ("mp256", "stateful", "total", "key = {0}"),
    "long keys, one absent": ("mp128-snappy", "stateful", "events", "key IN ({0}, {1}, -1)"),
    "string key, TTL value": ("java", "stateful", "last_seq_ttl", "key = '{0}'"),
    "two key filters": ("java", "stateful", "sum_by_tag", "key IN ('{0}', '{1}') AND key = '{1}'"),
    "absent key": ("mp256", "stateful", "per_user", "key = -5"),
}


@pytest.mark.parametrize(("variant", "operator", "state", "where"), LOOKUPS.values(),
                         ids=list(LOOKUPS))
def test_key_lookups_are_answered_on_the_driver(jvm, variant, operator, state, where):
    """`key = v` / `key IN` alone: decoded on the driver, no Spark job (a local table scan),
    the filter applied exactly there."""
    path = only("java/canonical/savepoint-*") if variant == "java" else \
        FIXTURES / variant / "canonical"
    keys = [k for t in FlinkCheckpoint.open(str(path)).read_keyed_state(state, operator=operator)
            for k in t.column("key").unique().to_pylist()]
    where = where.format(*keys[:2], *keys[:2])
    on_jvm = _read(jvm, "flinkstate", path, operator, state, where)
    on_python = _read(jvm, "flinkstate-python", path, operator, state, where)
    assert on_jvm[0] == on_python[0] and on_jvm[1] == on_python[1], (on_jvm, on_python)
    assert on_jvm[2].startswith("LocalTableScan"), on_jvm[2]
    assert bool(on_jvm[0]) == (where != "key = -5")
    projected = [(fmt, jvm.read.format(fmt).option("operator", operator).option("state", state)
                  .load(str(path)).filter(where).select("key_group", "key").collect())
                 for fmt in ("flinkstate", "flinkstate-python")]
    assert projected[0][1] == projected[1][1]


def test_other_filters_beside_a_key_read_one_key_group_in_a_task(jvm):
    path = FIXTURES / "mp256" / "canonical"
    checkpoint = FlinkCheckpoint.open(str(path))
    op = checkpoint.snapshot.operator("stateful")
    (key,) = next(checkpoint.read_keyed_state("total", operator="stateful")
                  ).column("key").to_pylist()[:1]
    where = f"key = {key} AND value > -1e300"
    on_jvm = _read(jvm, "flinkstate", path, "stateful", "total", where)
    assert on_jvm[0] == _read(jvm, "flinkstate-python", path, "stateful", "total", where)[0]
    assert len(on_jvm[0]) == 1
    assert json.loads(on_jvm[0][0])["key_group"] == assign_to_key_group(key, LONG,
                                                                          op.max_parallelism)
    assert JVM_SCAN in on_jvm[2] and "EqualTo(key" in on_jvm[2]
    scan = (jvm.read.format("flinkstate").option("operator", "stateful").option("state", "total")
            .load(str(path)).filter(where))
    assert scan.rdd.getNumPartitions() == 1


def test_a_lookup_in_a_damaged_key_group_is_refused(jvm, tmp_path):
    path, name, where = _damaged(tmp_path, "mp256/canonical", _value_length_huge)
    snapshot = FlinkSnapshot.open(str(path))
    piece = snapshot.key_group_bytes(snapshot.operator("stateful"))[3]
    key = next(k for k in range(10_000)
               if assign_to_key_group(k, LONG, 256) == piece.key_group)
    on_jvm = _read(jvm, "flinkstate", path, "stateful", "total", f"key = {key}")
    assert len(on_jvm) == 2 and name in on_jvm[1] and "invalid value length" in on_jvm[1]


# -- hostile bytes ------------------------------------------------------------------------

def _damaged(tmp_path: Path, variant: str, damage) -> tuple[Path, str, range]:
    """A copy of a fixture with one key group of state 'total' damaged by ``damage(raw,
    begin, end)``; the copy, the damaged file's name and the key group's byte range."""
    source = FIXTURES / variant
    target = tmp_path / "copy"
    shutil.copytree(source, target)
    snapshot = FlinkSnapshot.open(str(target))
    op = snapshot.operator("stateful")
    piece = snapshot.key_group_bytes(op)[3]
    victim = Path(snapshot.file_location(piece.handle.stream).path)
    raw = bytearray(victim.read_bytes())
    damage(raw, piece.begin, piece.end)
    victim.write_bytes(bytes(raw))
    return target, victim.name, range(piece.begin, piece.end)


def _value_length_huge(raw: bytearray, begin: int, end: int) -> None:
    key_length = int.from_bytes(raw[begin + 2:begin + 6], "big")
    value_at = begin + 6 + key_length
    raw[value_at:value_at + 4] = (1 << 30).to_bytes(4, "big")


def _key_length_negative(raw: bytearray, begin: int, end: int) -> None:
    raw[begin + 2:begin + 6] = (-5 & 0xFFFFFFFF).to_bytes(4, "big")


def _state_id_unknown(raw: bytearray, begin: int, end: int) -> None:
    raw[begin:begin + 2] = b"\x00\x63"


def _key_group_id_other(raw: bytearray, begin: int, end: int) -> None:
    raw[begin:begin + 4] = (int.from_bytes(raw[begin:begin + 4], "big") + 1).to_bytes(4, "big")


def _entry_count_huge(raw: bytearray, begin: int, end: int) -> None:
    raw[begin + 6:begin + 10] = (1 << 30).to_bytes(4, "big")


def _after_the_id(damage):
    """``damage`` to a native key group: past its key-group id."""
    def shifted(raw: bytearray, begin: int, end: int) -> None:
        damage(raw, begin + 4, end)
    shifted.__name__ = damage.__name__
    return shifted


def _snappy_payload_flipped(raw: bytearray, begin: int, end: int) -> None:
    raw[begin + 10 + 8] ^= 0x5A  # inside the first data chunk, past its header and CRC


def _snappy_chunk_too_long(raw: bytearray, begin: int, end: int) -> None:
    raw[begin + 11:begin + 14] = (0xFFFFFF).to_bytes(3, "little")


@pytest.mark.parametrize(("variant", "damage", "message"), [
    ("mp256/canonical", _value_length_huge, "invalid value length"),
    ("mp256/canonical", _key_length_negative, "invalid key length"),
    ("mp256/canonical", _state_id_unknown, "unknown state id 99"),
    ("mp128-snappy/canonical", _snappy_payload_flipped, ""),
    ("mp128-snappy/canonical", _snappy_chunk_too_long, "runs past the range"),
    ("mp256/native", _key_group_id_other, "expected key group"),
    ("mp256/native", _entry_count_huge, "invalid entry count 1073741824"),
    ("mp256/native", _after_the_id(_state_id_unknown), "unknown state id 99"),
    ("mp128-snappy/native", _key_group_id_other, "expected key group"),
    ("mp128-snappy/native", _after_the_id(_snappy_chunk_too_long), "runs past the range"),
])
def test_hostile_key_groups_are_refused_with_file_and_offset(jvm, tmp_path, variant, damage,
                                                             message):
    path, name, where = _damaged(tmp_path, variant, damage)
    on_jvm = _read(jvm, "flinkstate", path, "stateful", "total")
    on_python = _read(jvm, "flinkstate-python", path, "stateful", "total")
    assert len(on_python) == 2, "the Python source reads the damaged copy"
    assert len(on_jvm) == 2, "the JVM reader reads the damaged copy"
    error = on_jvm[1].split("\n\tat ")[0]
    assert name in error and message in error and "CorruptCheckpointError" in error, error
    offsets = [int(o) for o in re.findall(r"at byte offset (\d+)", error)]
    assert offsets and all(o in where for o in offsets), (where, error)


def test_a_null_value_in_a_ttl_map_is_refused_on_both_paths(jvm, tmp_path):
    """Flink wraps every value of a map with TTL, a null too: a set null flag is corrupt, and
    the per-value decoder refuses it (it once failed on it with a bare TypeError)."""
    path = tmp_path / "copy"
    shutil.copytree(FIXTURES / "encoding" / "canonical", path)
    snapshot = FlinkSnapshot.open(str(path))
    op = snapshot.operator("edges")
    info = snapshot.keyed_state_info(op, "ttl_map")
    for piece in snapshot.key_group_bytes(op):
        data = snapshot.piece_bytes(piece)
        found = canonical_sections(data, piece.key_group, prefix_bytes(op.max_parallelism),
                                   len(snapshot.header(op).states), (info.state_id,))
        if found:
            break
    flag = int(found[0].value_start[0])  # the first value's null flag
    _rewrite(snapshot, piece, flag, flag + 1, b"\x01")
    victim = Path(snapshot.file_location(piece.handle.stream).path)
    on_jvm = _read(jvm, "flinkstate", path, "edges", "ttl_map")
    on_python = _read(jvm, "flinkstate-python", path, "edges", "ttl_map")
    assert len(on_jvm) == len(on_python) == 2, (on_jvm, on_python)
    for error in (on_jvm[1], on_python[1]):
        assert "a null value in a map with TTL" in error and victim.name in error, error


def test_a_wrong_length_after_a_key_is_refused_on_both_paths(jvm, tmp_path):
    """The length Flink writes after a key, changed: both paths refuse it, naming the file
    (the JVM tells map entries apart by their bytes, which other lengths would change)."""
    savepoint, victim = wrong_length_after_a_key(tmp_path)
    on_jvm = _read(jvm, "flinkstate", savepoint, "op", "named")
    on_python = _read(jvm, "flinkstate-python", savepoint, "op", "named")
    assert len(on_jvm) == len(on_python) == 2, (on_jvm, on_python)
    for error in (on_jvm[1], on_python[1]):
        assert "the length after the key" in error and victim in error, error


def _first_entry(snapshot: FlinkSnapshot, op, state: str | None = None):
    """``(key group bytes, reader at it, state)``: the reader at the first entry of the first
    section (in file order) of ``state`` (None: any keyed state) that holds entries."""
    header = snapshot.header(op)
    for piece in snapshot.key_group_bytes(op):
        reader = native_key_group_reader(snapshot.piece_bytes(piece), "", 0, piece.key_group,
                                         header)
        while not reader.at_end():
            info, entries = header.states[reader.i16()], reader.count("entries")
            if entries and not info.is_timer and state in (None, info.name):
                return piece, reader, info
            for _ in range(entries):
                info.timer.read(reader) if info.is_timer else (
                    info.namespace.read(reader), header.key.read(reader),
                    info.value.read(reader))
    raise AssertionError(f"no entry of {state or 'a keyed state'}")


def _rewrite(snapshot: FlinkSnapshot, piece, start: int, end: int, new: bytes) -> None:
    """Bytes ``start .. end`` of a key group replaced in place (as many)."""
    assert len(new) == end - start
    victim = Path(snapshot.file_location(piece.handle.stream).path)
    raw = bytearray(victim.read_bytes())
    raw[piece.begin + start:piece.begin + end] = new
    victim.write_bytes(bytes(raw))


def _lone_surrogate_in_a_key(path: Path) -> str:
    """The String key of the first keyed entry of the native snapshot ``path`` (in file
    order), rewritten in place to begin with a lone surrogate (a legal Java string) in as
    many bytes; the name of the state whose section holds that entry."""
    snapshot = FlinkSnapshot.open(str(path))
    (op,) = [op for op in snapshot.operators if snapshot.header(op)]
    piece, reader, info = _first_entry(snapshot, op)
    info.namespace.read(reader)
    at, key = reader.pos, snapshot.header(op).key.read(reader)
    assert 3 <= len(key) < 127 and key.isascii(), key
    # a length varint, then a byte per character; U+D800 takes three
    _rewrite(snapshot, piece, at, reader.pos,
             bytes([len(key) - 1, 0x80, 0xB0, 0x03]) + key[3:].encode())
    return info.name


def test_a_lone_surrogate_in_a_section_passed_over_is_no_fault(jvm, tmp_path):
    """A Java string may hold a lone surrogate; only a row's text cannot. The states whose
    sections follow it in a native key group read the same rows on both routes; the state
    holding it is refused on both."""
    path = tmp_path / "copy"
    shutil.copytree(only("java/native/savepoint-*"), path)
    holder = _lone_surrogate_in_a_key(path)
    assert len(_read(jvm, "flinkstate-python", path, "stateful", holder)) == 2
    assert _compare_all(jvm, path) >= 4


def test_a_map_key_flink_would_encode_otherwise_is_refused_not_misread(jvm, tmp_path):
    """The JVM tells map keys apart by their bytes, the per-value decoder by their values:
    a user key in bytes Flink never writes ("u" with a non-minimal character varint, where
    another "u" would be a duplicate) is refused by the JVM rather than compared wrongly."""
    path = tmp_path / "copy"
    shutil.copytree(FIXTURES / "mp256" / "native", path)
    snapshot = FlinkSnapshot.open(str(path))
    op = snapshot.operator("stateful")
    piece, reader, per_user = _first_entry(snapshot, op, "per_user")
    per_user.namespace.read(reader)
    snapshot.header(op).key.read(reader)
    reader.count("map size")
    at, user = reader.pos, per_user.value.key.read(reader)
    assert len(user) == 2 and reader.pos == at + 3, user
    _rewrite(snapshot, piece, at, at + 3, bytes([2, 0x80 | ord("u"), 0]))
    on_python = _read(jvm, "flinkstate-python", path, "stateful", "per_user")
    assert len(on_python) == 3 and '"user_key": "u"' in "".join(on_python[0])
    on_jvm = _read(jvm, "flinkstate", path, "stateful", "per_user")
    assert len(on_jvm) == 2 and "a map key encoded as Flink never encodes it" in on_jvm[1]


@pytest.mark.parametrize(("state", "loose"), [
    ("pojos", 0x06),  # POJO flags: "no subclass" with another bit set, read alike
    ("rows", 0x01),  # a Row's null mask with an unused last bit set
])
def test_a_map_key_repeated_in_other_bytes_is_refused_on_both_paths(jvm, tmp_path, state,
                                                                    loose):
    """The second entry of a map gets the first one's user key, in bytes that Flink reads as
    the same value though it never writes them: the per-value decoder finds the key twice;
    the JVM, which tells keys apart by their bytes, must not return both."""
    path = tmp_path / "copy"
    shutil.copytree(FIXTURES / "types" / "canonical", path)
    snapshot = FlinkSnapshot.open(str(path))
    op = snapshot.operator("typed")
    info = snapshot.keyed_state_info(op, state)
    piece = snapshot.key_group_bytes(op)[0]
    data = snapshot.piece_bytes(piece)
    (section,) = canonical_sections(data, piece.key_group, prefix_bytes(op.max_parallelism),
                                    len(snapshot.header(op).states), (info.state_id,))
    user_key = 1 + 8 + 1  # after the key-group prefix, the Long key and the void namespace
    first, second = (int(section.key_start[i]) + user_key for i in (0, 1))
    ends = [int(section.key_end[i]) for i in (0, 1)]
    assert ends[0] - first == ends[1] - second and data[first - 9:first] == data[second - 9:second]
    _rewrite(snapshot, piece, second, ends[1],
             bytes([loose]) + data[first + 1:ends[0]])
    on_python = _read(jvm, "flinkstate-python", path, "typed", state)
    on_jvm = _read(jvm, "flinkstate", path, "typed", state)
    assert len(on_python) == 2 and "holds the user key" in on_python[1], on_python
    assert len(on_jvm) == 2 and "a map key encoded as Flink never encodes it" in on_jvm[1], \
        on_jvm


def test_a_truncated_file_is_refused_naming_it(jvm, tmp_path):
    def cut(raw: bytearray, begin: int, end: int) -> None:
        del raw[end - 3:]

    path, name, _ = _damaged(tmp_path, "mp256/canonical", cut)
    on_jvm = _read(jvm, "flinkstate", path, "stateful", "total")
    assert len(on_jvm) == 2 and name in on_jvm[1], on_jvm


def test_a_replaced_savepoint_is_planned_anew(jvm, tmp_path):
    """The JVM provider reuses a plan per options while _metadata is unchanged
    (FlinkPlanCache.java): a savepoint written over the same path is read afresh."""
    path = tmp_path / "savepoint"
    shutil.copytree(FIXTURES / "mp256" / "canonical", path)
    first = _read(jvm, "flinkstate", path, "stateful", "total")
    assert _read(jvm, "flinkstate", path, "stateful", "total")[0] == first[0]
    shutil.rmtree(path)
    shutil.copytree(FIXTURES / "mp128-snappy" / "canonical", path)
    again = _read(jvm, "flinkstate", path, "stateful", "total")
    assert again[0] == _read(jvm, "flinkstate-python", path, "stateful", "total")[0]
    assert again[0] != first[0] and JVM_SCAN in again[2]


def test_counts_and_projections_decode_what_they_need(jvm):
    """No column (count), a column per key group, and one value column: the same answers."""
    path = str(FIXTURES / "mp128-snappy" / "canonical")
    frames = [jvm.read.format(fmt).option("operator", "stateful").option("state", "events")
              .load(path) for fmt in ("flinkstate", "flinkstate-python")]
    assert JVM_SCAN in frames[0]._jdf.queryExecution().executedPlan().toString()
    counts = [df.count() for df in frames]
    assert counts[0] == counts[1] > 0
    per_group = [sorted(df.groupBy("key_group").count().collect()) for df in frames]
    assert per_group[0] == per_group[1]
    values = [[r[0] for r in df.select("list_element").collect()] for df in frames]
    assert values[0] == values[1]


def test_a_data_file_removed_after_planning_is_named(jvm, tmp_path):
    path = tmp_path / "savepoint"
    shutil.copytree(FIXTURES / "mp256" / "canonical", path)
    assert len(_read(jvm, "flinkstate", path, "stateful", "total")) == 3  # planned, kept
    snapshot = FlinkSnapshot.open(str(path))
    pieces = snapshot.key_group_bytes(snapshot.operator("stateful"))
    victim = Path(snapshot.file_location(pieces[-1].handle.stream).path)
    victim.unlink()
    on_jvm = _read(jvm, "flinkstate", path, "stateful", "total")
    assert len(on_jvm) == 2 and victim.name in on_jvm[1], on_jvm
