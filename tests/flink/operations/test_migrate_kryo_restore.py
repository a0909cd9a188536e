"""Kryo state migrated from Flink 1.20 restores in a real Flink 2.3, and the job goes on with it.

The ``kryo`` fixture (tests/kryo_fixture.py) is one job's canonical savepoints on the heap
backend and RocksDB, by Flink 1.20 and by Flink 2.3 (KryoJob.java, one source compiled for
each). Each restore is one JVM:

- Flink 1.20 itself restores its savepoint with the model's state (the fixture's truth);
- Flink 2.3 cannot restore it: the POJO's Kryo 2 collection fields fail the heap backend and
  are incompatible on RocksDB, and the ``UUID`` state on RocksDB restores without a word but
  with every value wrong. That is why ``migrate`` exists;
- the migrated savepoint (the user class that cannot migrate left out) restores in Flink 2.3
  with every key of the model;
- the 2.3 job continues on it: fed events EVENTS..MORE-1, it emits what the model of all
  events says (and so it does on Flink 2.3's own savepoint: the harness's check).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from kryo_fixture import (
    EVENTS,
    JOB,
    KRYO,
    MORE,
    UIDS,
    java_map,
    job_source,
    run,
    spec,
    timer_lines,
    truth,
)

from flink_restore import (
    FLINK_1X_VERSION,
    JVM_FLAGS,
    LOG4J,
    STDERR_TAIL_LINES,
    FlinkRestoreError,
    compiled_classes,
    flink_lib,
    restore,
    timers,
    values,
)
from statesource.flink.handles import operator_id_of
from statesource.flink.operations.migrate import migrate

pytestmark = pytest.mark.realflink

BACKENDS = {"canonical": "hashmap", "rocksdb": "rocksdb"}
"""The fixture's savepoint directory of each backend, and the backend restoring it."""


def migrated(kind: str, tmp_path: Path) -> Path:
    output = tmp_path / "migrated"
    done = migrate(str(KRYO / "flink-1.20" / kind), str(output), skip_unmigratable=True,
                   uids={operator_id_of(uid): uid for uid in UIDS})
    assert [(s.operator, s.state) for s in done.unmigratable] == [
        (operator_id_of("notes"), "note")]
    return output


def restored_state(rows: list[dict], states: dict[str, list[str]]) -> dict[str, dict]:
    """``state -> {key: value}`` of what Flink restored, in the model's shapes: maps as
    dicts, a HashMap under Kryo parsed from its ``toString``, timers as sorted timestamps."""
    found: dict[str, dict] = {}
    for uid, names in states.items():
        for name in names:
            found[name] = {key: shaped(name, value)
                           for key, value in values(rows, uid, name).items()}
    if "profiles" in states:
        found["timers"] = {key: [ts for _, ts in entries]
                           for key, entries in timers(rows, "profiles", "user-timers").items()}
    return found


def shaped(state: str, value):
    if state == "profile" and value is not None:
        counts = value["counts"]
        tags = value["tags"]
        return {**value,
                # Flink 2.3 renders the POJO's Map field as pairs; 1.20 (Kryo) as HashMap text
                "counts": java_map(counts) if isinstance(counts, str) else dict(counts),
                "tags": tags if not isinstance(tags, str) else (
                    None if tags == "null" else tags.removeprefix("[").removesuffix("]")
                    .split(", "))}
    if state == "per_tag":
        return dict(value)
    if state == "bag":
        return java_map(value)
    return value


def expected_state(states: dict[str, list[str]]) -> dict[str, dict]:
    model = truth()
    wanted = {name: {key: s[name] for key, s in model.items()}
              for names in states.values() for name in names}
    if "profiles" in states:
        wanted["timers"] = {key: s["timers"] for key, s in model.items()}
    return wanted


ALL = {"profiles": ["profile", "total", "per_tag"], "uuids": ["last_uuid", "bag"]}
"""Every state that migrates (``notes``' ``note`` cannot)."""


def test_flink_1_20_restores_its_savepoint_with_the_model_state(tmp_path):
    states = {**ALL, "notes": ["note"]}
    rows = restore(KRYO / "flink-1.20" / "canonical", spec("hashmap"),
                   java_sources=[job_source(tmp_path, 1)], flink=FLINK_1X_VERSION)
    assert restored_state(rows, states) == expected_state(states)


@pytest.mark.parametrize("kind, failure", [
    ("canonical", r"Can not set long field KryoJob\$Profile.visits to null value"),
    ("rocksdb", "The new state serializer .*PojoSerializer.* must not be incompatible with the"
                " old state serializer"),
], ids=["heap", "rocksdb"])
def test_flink_2_3_cannot_restore_the_1_20_pojo_state(kind, failure):
    with pytest.raises(FlinkRestoreError, match=failure):
        restore(KRYO / "flink-1.20" / kind,
                spec(BACKENDS[kind], {"profiles": ["profile"]}, timers=False),
                java_sources=[JOB])


def test_flink_2_3_restores_the_1_20_uuid_state_silently_wrong():
    """On RocksDB each value is read alone: Kryo 5 reads its 16 bytes of a UUID from the
    18 to 20 bytes Kryo 2 wrote (two variable-length longs), and no error says so."""
    rows = restore(KRYO / "flink-1.20" / "rocksdb",
                   spec("rocksdb", {"uuids": ["last_uuid"]}), java_sources=[JOB])
    found = values(rows, "uuids", "last_uuid")
    model = {key: s["last_uuid"] for key, s in truth().items()}
    assert set(found) == set(model)
    assert all(found[key] != model[key] for key in model)  # every one of them


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_migrated_savepoint_restores_in_flink_2_3_with_every_key(kind, tmp_path):
    rows = restore(migrated(kind, tmp_path), spec(BACKENDS[kind], ALL), java_sources=[JOB])
    assert restored_state(rows, ALL) == expected_state(ALL)


@pytest.mark.parametrize("source", ["flink-2.3/canonical", "migrated/canonical",
                                    "migrated/rocksdb"])
def test_the_2_3_job_continues_on_the_savepoint(source, tmp_path):
    """Fed events EVENTS..MORE-1 (every key gets more), the job emits per event the state
    after it (the UUID before it), then every timer fires: all of it as the model of all
    events says. On Flink 2.3's own savepoint, this checks the harness and the model."""
    origin, kind = source.split("/")
    savepoint = KRYO / origin / kind if origin != "migrated" else migrated(kind, tmp_path)
    held = truth()
    state, lines = run(EVENTS, MORE, held)
    assert {int(line.split()[1]) for line in lines} == set(held)  # every key is fed
    assert continued(savepoint, BACKENDS[kind], tmp_path) == sorted(lines + timer_lines(state))


# ------------------------------------------------------------------ the continuing job


def continued(savepoint: Path, backend: str, work: Path, timeout: float = 180) -> list[str]:
    """KryoJob ``continue``: restores ``savepoint`` in a real Flink 2.3 on
    ``backend``, feeds events EVENTS..MORE-1, and returns the lines its operators emitted,
    sorted. A failure raises FlinkRestoreError with the tail of the JVM's stderr."""
    classes = compiled_classes([JOB])
    lib = flink_lib()
    log4j = work / "log4j2.properties"
    log4j.write_text(LOG4J.format(log=work / "flink.log"))
    out = work / "lines.txt"
    with tempfile.TemporaryDirectory(prefix="kryo-continue-", dir=work) as scratch:
        command = ["java", *JVM_FLAGS, f"-Djava.io.tmpdir={scratch}",
                   f"-Dlog4j2.configurationFile={log4j}",
                   "-cp", os.pathsep.join([str(classes), f"{lib}/*"]), "KryoJob", "continue",
                   backend, str(savepoint.resolve()), str(EVENTS), str(MORE), str(out)]
        try:
            job = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise FlinkRestoreError(f"KryoJob continue did not end within {timeout:g} s") from None
    if job.returncode != 0:
        tail = "\n".join(job.stderr.splitlines()[-STDERR_TAIL_LINES:])
        raise FlinkRestoreError(f"KryoJob continue from {savepoint} failed:\n{tail}",
                                job.returncode, job.stderr)
    return out.read_text().splitlines()
