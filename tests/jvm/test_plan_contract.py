"""The JVM plan's contract: the JSON the Python planner writes is the JSON the shim reads.

The same plan text, taken from where the Python source hands it to the JVM provider (the
first field's metadata of the planning schema), is read by the shim's ReadPlan, run without
Spark through its ``main``, which echoes everything it parsed. The echo must equal what
Python wrote, field by field: a field one side adds or renames, a type that changes, fails
here. Plans of another version, and servable plans that lack a field or whose key-group
arrays differ in length, or whose files number their states inconsistently, are refused
with messages naming them.

No Spark session is started; the shim's jar is built (or reused from the cache) with the
machine's javac, and without one these tests skip, saying why.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from statesource import CheckpointWriter
from statesource.errors import JvmShimUnavailableError
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.jvm import ensure_jar, find_javac, spark_jars_dir
from statesource.spark.jvm.plan import (
    PLAN_METADATA,
    PLAN_OPTION,
    PLAN_VERSION,
    FlinkStatePythonSource,
)
from statesource.state.descriptors import ListStateDescriptor, ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend

READ_PLAN_CLASS = "org.statesource.shim.ReadPlan"
GROUP_FIELDS = ("keyGroup", "file", "batchCount", "offset", "length", "rows", "crc32")
Answers = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="module")
def read_in_java() -> Answers:
    """Runs ReadPlan's main on plan texts: one answer each, ``{"plan": echo}`` or
    ``{"refused": message}``."""
    try:
        javac = find_javac()
    except JvmShimUnavailableError as error:
        pytest.skip(f"the plan contract needs a JDK to build the shim, and there is none: {error}")
    java = javac.parent / "java"  # a JDK keeps both in its bin
    classpath = os.pathsep.join([str(ensure_jar()), str(spark_jars_dir() / "*")])

    def run(*plans: str) -> list[dict[str, Any]]:
        assert all("\n" not in plan for plan in plans)
        done = subprocess.run([str(java), "-cp", classpath, READ_PLAN_CLASS],
                              input="".join(plan + "\n" for plan in plans).encode(),
                              capture_output=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        answers = [json.loads(line) for line in done.stdout.decode().splitlines()]
        assert len(answers) == len(plans), answers
        return answers

    return run


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    """An incremental checkpoint keyed by string (two overlapping data files: no delta
    runs, which the JVM reader declines) beside an operator keyed by double, under a
    non-ASCII path."""
    root = tmp_path_factory.mktemp("état-plan")
    by_string = KeyedStateBackend("string", 32)
    counts = by_string.get_state(ValueStateDescriptor("counts", "long"))
    items = by_string.get_state(ListStateDescriptor("items", "string"))
    by_double = KeyedStateBackend("double", 128)
    levels = by_double.get_state(ValueStateDescriptor("levels", "string"))
    with CheckpointWriter(str(root), incremental=True, max_delta_runs=0) as writer:
        for checkpoint_id, keys in ((1, range(300)), (2, range(0, 300, 41))):
            for i in keys:
                by_string.set_current_key(f"k{i}\u00e9")
                counts.update(i * checkpoint_id)
                items.add(f"item {i}")
                by_double.set_current_key(i / 7)
                levels.update(f"level {i}")
            writer.write(checkpoint_id, {"strings": [by_string], "doubles": [by_double]})
    return str(root)


def wire_plan(**options: str) -> str:
    """The plan's JSON exactly as the Python source hands it to the JVM provider."""
    lowered = {key.lower(): value for key, value in options.items()}  # as Spark passes them
    source = FlinkStatePythonSource({**lowered, PLAN_OPTION: "true"})
    return source.schema().fields[0].metadata[PLAN_METADATA]


def servable_plan(root: str) -> str:
    return wire_plan(path=root, operator="strings", state="counts", parallelism="3")


PLANS = {
    "string keys, overlapping files": dict(operator="strings", state="counts", parallelism="3"),
    "double keys, no pushdown": dict(operator="doubles", state="levels", filterPushdown="false"),
    "flattened list": dict(operator="strings", state="items"),
}


@pytest.mark.parametrize("options", PLANS.values(), ids=list(PLANS))
def test_java_reads_every_field_python_writes(read_in_java, root, options):
    text = wire_plan(path=root, **options)
    plan = json.loads(text)
    assert plan["planVersion"] == PLAN_VERSION and plan["servable"] is True
    [answer] = read_in_java(text)
    assert "refused" not in answer, answer["refused"]
    echo = answer["plan"]
    assert sorted(echo) == sorted(plan), "fields one side writes and the other does not read"
    for field in plan:
        if isinstance(plan[field], dict):
            assert sorted(echo[field]) == sorted(plan[field]), field
            for inner in plan[field]:
                assert echo[field][inner] == plan[field][inner], f"{field}.{inner}"
        else:
            assert echo[field] == plan[field], field
    assert echo == plan
    groups = plan["keyGroups"]
    assert sorted(groups) == sorted(GROUP_FIELDS)
    assert len(groups["keyGroup"]) > 1 and len({len(v) for v in groups.values()}) == 1
    assert plan["slices"] and plan["files"] and plan["columns"]


FLINK_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "flink"
FLINK_PLANS = {
    "Flink POJO values": ("types/canonical", dict(operator="typed", state="point_pojo")),
    "Flink Snappy, TimeWindow, Tuple key": ("mp128-snappy/canonical",
                                            dict(operator="windows", state="window-contents")),
    "Flink TTL map": ("encoding/canonical", dict(operator="edges", state="ttl_map")),
    "Flink Row values": ("encoding/canonical", dict(operator="edges", state="rows")),
    "Flink native, every state's section": ("encoding/native",
                                            dict(operator="edges", state="ttl_map")),
    "Flink native Snappy timers": ("mp128-snappy/native",
                                   dict(operator="windows",
                                        state="_timer_state/event_window-timers")),
    "Flink lazy states, RocksDB's numbering per file": ("lazy/rocksdb",
                                                        dict(operator="lazy", state="late")),
    "Flink lazy states, native, a file without the state": ("lazy/native",
                                                            dict(operator="lazy", state="rare")),
    "Flink RocksDB databases, shared tables": ("lazy/rocksdb-incremental/chk-5",
                                               dict(operator="lazy", state="late")),
    "Flink 1.x RocksDB map state": ("flink-1.20/rocksdb-checkpoint",
                                    dict(operator="stateful", state="per_user")),
}


@pytest.mark.parametrize(("snapshot", "options"), FLINK_PLANS.values(), ids=list(FLINK_PLANS))
def test_java_reads_every_field_of_a_flink_plan(read_in_java, snapshot, options):
    text = wire_plan(path=str(FLINK_FIXTURES / snapshot), **options)
    plan = json.loads(text)
    assert plan["servable"] is True and plan["flink"]["stateName"] == options["state"]
    assert plan["flink"]["native"] == snapshot.endswith("/native")
    assert ("rocksdb" in plan["flink"]) == ("rocksdb-" in snapshot)
    flink_snapshot = FlinkSnapshot.open(str(FLINK_FIXTURES / snapshot))
    header = flink_snapshot.header(flink_snapshot.operator(options["operator"]))
    assert len(plan["flink"].get("sections", ())) == (
        len(header.states) if plan["flink"]["native"] else 0)
    assert len(plan["flink"]["fileVariants"]) == len(plan["files"])
    [answer] = read_in_java(text)
    assert "refused" not in answer, answer["refused"]
    assert answer["plan"]["flink"] == plan["flink"]
    assert answer["plan"] == plan


def test_a_flink_plan_with_an_unknown_type_is_refused(read_in_java):
    plan = json.loads(wire_plan(path=str(FLINK_FIXTURES / "mp256" / "canonical"),
                                operator="stateful", state="total"))
    plan["flink"]["value"] = "decimal"
    [answer] = read_in_java(json.dumps(plan))
    assert "unknown type descriptor \"decimal\"" in answer["refused"]


def test_the_lazy_plans_exercise_what_they_claim():
    """Files numbering the state otherwise, and a file without it, left out of the plan."""
    rocksdb = json.loads(wire_plan(path=str(FLINK_FIXTURES / "lazy" / "rocksdb"),
                                   operator="lazy", state="late"))["flink"]
    own_ids = {variant.index(rocksdb["stateId"]) for variant in rocksdb["variants"]}
    assert len(rocksdb["variants"]) > 1 and len(own_ids) > 1
    native = json.loads(wire_plan(path=str(FLINK_FIXTURES / "lazy" / "native"),
                                  operator="lazy", state="rare"))
    snapshot = FlinkSnapshot.open(str(FLINK_FIXTURES / "lazy" / "native"))
    assert 0 < len(native["files"]) < len(snapshot.keyed_handles(snapshot.operator("lazy")))


def test_inconsistent_file_variants_are_refused(read_in_java):
    plan = json.loads(wire_plan(path=str(FLINK_FIXTURES / "lazy" / "native"), operator="lazy",
                                state="vip"))
    flink = plan["flink"]
    sections = len(flink["sections"])
    (variant,) = flink["variants"]
    wanted = flink["stateId"]

    def changed(**fields: Any) -> dict[str, Any]:
        return {**plan, "flink": {**flink, **fields}}

    cases = {
        f"variants[0] does not list state id {wanted} ('vip'), the state read":
            changed(variants=[[i for i in variant if i != wanted]]),
        f"variants[0] lists state id {variant[0]} twice":
            changed(variants=[[*variant, variant[0]]]),
        f"variants[0] gives own state {len(variant)} the state id {sections}, which is not"
        f" the id of one of the {sections} sections": changed(variants=[[*variant, sections]]),
        "variants[0] gives own state 0 the state id -1": changed(variants=[[-1, *variant]]),
        "fileVariants[0] = 1 is not an index into variants (1 variants)":
            changed(fileVariants=[1]),
        "fileVariants are not a list of one variant per file (1 files)":
            changed(fileVariants=[0, 0]),
        "field flink.variants is missing": changed(variants=None),
    }
    answers = read_in_java(*(json.dumps(case) for case in cases.values()))
    for expected, answer in zip(cases, answers, strict=True):
        assert expected in answer.get("refused", ""), (expected, answer)


def test_inconsistent_rocksdb_databases_are_refused(read_in_java):
    plan = json.loads(wire_plan(path=str(FLINK_FIXTURES / "lazy" / "rocksdb-incremental"
                                         / "chk-5"), operator="lazy", state="count"))
    flink = plan["flink"]
    databases = flink["rocksdb"]
    assert len(databases) == 4 and len(plan["files"]) == 4

    def changed(rocksdb: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        return {**plan, "flink": {**flink, "rocksdb": rocksdb, **fields}}

    second = databases[1]
    cases = {
        "flink.rocksdb[1] names files 0 on, 1 of them": changed(
            [databases[0], {**second, "firstFile": 0}, *databases[2:]]),
        "flink.rocksdb[3] names files 3 on, 2 of them": changed(
            [*databases[:3], {**databases[3], "fileCount": 2}]),
        "flink.rocksdb[0] names files 0 on, 0 of them": changed(
            [{**databases[0], "fileCount": 0}, *databases[1:]]),
        "field flink.rocksdb is not a list of databases of canonical, uncompressed key groups":
            changed(databases, compressed=True),
        "keyGroups.file[0] = 0 is not the first file of a database": changed(databases[1:]),
        "field flink.source is missing": changed([{**second, "source": None}]),
        "flink.rocksdb[0] has not one largest sequence number per file": changed(
            [{**databases[0], "largestSeqnos": []}, *databases[1:]]),
    }
    answers = read_in_java(*(json.dumps(case) for case in cases.values()))
    for expected, answer in zip(cases, answers, strict=True):
        assert expected in answer.get("refused", ""), (expected, answer)


def test_the_plans_exercise_what_they_claim(root):
    """Overlapping files, non-ASCII paths, both pushdown settings and exactness."""
    strings = json.loads(servable_plan(root))
    doubles = json.loads(wire_plan(path=root, operator="doubles", state="levels",
                                   filterPushdown="false"))
    assert len(strings["files"]) == 2 and len(set(strings["keyGroups"]["file"])) == 2
    assert all("état" in f["path"] for f in strings["files"])
    assert (strings["exactKeys"], strings["filterPushdown"]) == (True, True)
    assert (doubles["exactKeys"], doubles["filterPushdown"]) == (False, False)


def test_a_state_with_delta_runs_is_left_to_the_python_source(tmp_path):
    backend = KeyedStateBackend("long", 16)
    counts = backend.get_state(ValueStateDescriptor("counts", "long"))
    with CheckpointWriter(str(tmp_path), incremental=True) as writer:
        for checkpoint_id, keys in ((1, range(1000)), (2, range(0, 1000, 97))):
            for key in keys:
                backend.set_current_key(key)
                counts.update(key * checkpoint_id)
            writer.write(checkpoint_id, {"op": [backend]})
    plan = json.loads(wire_plan(path=str(tmp_path), operator="op", state="counts"))
    assert plan["servable"] is False
    assert "have delta runs" in plan["reason"] and "Python source" in plan["reason"]
    full = json.loads(wire_plan(path=str(tmp_path), operator="op", state="counts",
                                checkpointId="1"))
    assert full["servable"] is True


MILLIS = {"type": "long", "logicalType": "timestamp-millis"}
STAMPS = {
    "top": MILLIS,
    "in_record": {"type": "record", "name": "R", "fields": [{"name": "at", "type": MILLIS}]},
    "in_array": {"type": "array", "items": MILLIS},
    "in_map": {"type": "map", "values": MILLIS},
    "micros": {"type": "array", "items": {"type": "long", "logicalType": "timestamp-micros"}},
}


@pytest.mark.parametrize("state, servable", [
    ("top", True), ("in_record", False), ("in_array", False), ("in_map", False),
    ("micros", True)])
def test_millisecond_timestamps_are_served_at_the_top_level_only(tmp_path, state, servable):
    """Spark's ArrowColumnVector reads microsecond timestamps only; the shim widens a
    top-level millisecond column (KeyGroupBatchReader.sparkReady) and nothing nested, so a
    millisecond timestamp in a record, list or map leaves the state to the Python source."""
    backend = KeyedStateBackend("string", 8)
    backend.get_state(ValueStateDescriptor(state, STAMPS[state]))
    CheckpointWriter(str(tmp_path)).write(1, {"op": [backend]})
    plan = json.loads(wire_plan(path=str(tmp_path), operator="op", state=state))
    assert plan["servable"] is servable, plan
    if not servable:
        assert plan["reason"].startswith("Arrow types the JVM reader does not convert: value (")
        assert "timestamp[ms" in plan["reason"]


def test_an_unservable_plan_round_trips_its_reason(read_in_java, root):
    text = wire_plan(path=root, operator="strings", state="items", flattenCollections="false")
    plan = json.loads(text)
    assert plan == {"planVersion": PLAN_VERSION, "servable": False,
                    "reason": "flattenCollections=false nests rows, which the JVM reader"
                              " does not do"}
    assert read_in_java(text) == [{"plan": plan}]


def test_a_plan_of_another_version_is_refused_naming_both(read_in_java, root):
    servable = json.loads(servable_plan(root))
    unservable = {"planVersion": PLAN_VERSION, "servable": False, "reason": "why"}
    newer = {**servable, "planVersion": PLAN_VERSION + 1}
    unversioned = {k: v for k, v in servable.items() if k != "planVersion"}
    answers = read_in_java(*(json.dumps(p) for p in (
        newer, unversioned, {**unservable, "planVersion": PLAN_VERSION + 1},
        {**servable, "planVersion": str(PLAN_VERSION)})))
    written = [f"plan version {PLAN_VERSION + 1}", "no plan version",
               f"plan version {PLAN_VERSION + 1}", f'plan version "{PLAN_VERSION}"']
    for answer, version in zip(answers, written, strict=True):
        assert "plan" not in answer, answer
        message = answer["refused"]
        assert "the statesource Python package and its JVM shim disagree on the plan version" \
            in message
        assert f"the Python package wrote {version}" in message
        assert f"this shim reads plan version {PLAN_VERSION}." in message
        assert "`statesource jvm build`" in message


def field_paths(plan: dict[str, Any]) -> list[tuple[str, ...]]:
    """Every required field of a servable plan, as a path into it (the version aside)."""
    paths: list[tuple[str, ...]] = []
    for field, value in plan.items():
        if field == "planVersion":
            continue
        paths.append((field,))
        if field == "keyGroups":
            paths.extend((field, inner) for inner in value)
        if field == "files":
            paths.extend((field, "0", inner) for inner in value[0])
    return paths


def without(plan: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    changed = copy.deepcopy(plan)
    node: Any = changed
    for step in path[:-1]:
        node = node[int(step)] if isinstance(node, list) else node[step]
    del node[path[-1]]
    return changed


def test_a_servable_plan_missing_a_field_is_refused_naming_it(read_in_java, root):
    plan = json.loads(servable_plan(root))
    paths = field_paths(plan)
    assert len(paths) == 10 + len(GROUP_FIELDS) + 3
    answers = read_in_java(*(json.dumps(without(plan, path)) for path in paths))
    for path, answer in zip(paths, answers, strict=True):
        name = ".".join(path).replace(".0.", "[0].")
        assert answer.get("refused", "").endswith(f"field {name} is missing"), (name, answer)
    unservable = {"planVersion": PLAN_VERSION, "servable": False}
    [answer] = read_in_java(json.dumps(unservable))
    assert answer["refused"].endswith("field reason is missing")


def test_malformed_key_groups_and_fields_are_refused_naming_them(read_in_java, root):
    plan = json.loads(servable_plan(root))
    groups = len(plan["keyGroups"]["keyGroup"])

    def changed(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        mutated = copy.deepcopy(plan)
        edit(mutated)
        return mutated

    cases = {
        f"keyGroups.keyGroup has {groups} entries, keyGroups.crc32 has {groups - 1}":
            changed(lambda p: p["keyGroups"]["crc32"].pop()),
        f"keyGroups.keyGroup has {groups} entries, keyGroups.file has {groups + 1}":
            changed(lambda p: p["keyGroups"]["file"].append(0)),
        "field maxParallelism is not a 32-bit integer: \"32\"":
            changed(lambda p: p.update(maxParallelism="32")),
        "field exactKeys is not a boolean: 1": changed(lambda p: p.update(exactKeys=1)),
        "field keyGroups.offset[0] is not a 64-bit integer: 1.5":
            changed(lambda p: p["keyGroups"]["offset"].__setitem__(0, 1.5)),
        'field files[1].sizeBytes is not a 64-bit integer: "12"':
            changed(lambda p: p["files"][1].update(sizeBytes="12")),
        "keyGroups.file[0] = 2 is not an index into files (2 files)":
            changed(lambda p: p["keyGroups"]["file"].__setitem__(0, 2)),
        "keyGroups.keyGroup[0] = 32 is outside [0, maxParallelism 32)":
            changed(lambda p: p["keyGroups"]["keyGroup"].__setitem__(0, 32)),
        "key groups out of order at entry 1":
            changed(lambda p: p["keyGroups"]["keyGroup"].__setitem__(1, 0)),
        "field slices[0] is not a [first, last] pair":
            changed(lambda p: p["slices"][0].append(9)),
        "field fileSchema is not base64": changed(lambda p: p.update(fileSchema="not base64!")),
        "the plan is not a JSON object": [plan],
    }
    answers = read_in_java(*(json.dumps(case) for case in cases.values()))
    for expected, answer in zip(cases, answers, strict=True):
        assert expected in answer.get("refused", ""), (expected, answer)
