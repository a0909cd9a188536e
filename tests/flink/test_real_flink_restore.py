"""Snapshots restore in a real Apache Flink 2.3 with exactly the expected state.

The truth for Flink compatibility is a real Flink, never statesource's reader: these tests
restore snapshots through ``tests/flink_restore.py``, which compiles
``tests/flinkrestore/RestoreDump.java`` against the jars of the ``apache-flink-libraries``
package (cached per source hash under the temp dir) and runs it in a JVM: a local
MiniCluster restores the snapshot (NO_CLAIM, the snapshot's max parallelism), an operator
per uid registers the states in ``open()`` and dumps every key, timer and operator state
through Flink's own state API. The dumps are compared, key by key, with the state the
fixture generators computed from the input events alone (``tests/fixtures/flink/*/
expected.json``, ``../shared/flink-savepoints/java/expected_state.json``). The savepoints
our writer produces are to be checked the same way.

Needs ``apache-flink-libraries==2.3.0`` (in the ``test`` extra), ``java`` and ``javac``
(17); without them each test fails, saying which is missing (tests/conftest.py: a skip
would hide that nothing was restored). Each restore is one JVM, about 3 s on 2 cores; marked
``realflink`` (``-m "not realflink"`` leaves them out).
"""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
from pathlib import Path

import pytest

from flink_fixture_checks import (
    FIXTURES,
    check_fixture,
    check_placement,
    check_pyflink,
    check_shared_java,
    fixture_spec,
    pyflink_spec,
    shared_java_spec,
)
from flink_restore import (
    FIXTURE_JOB,
    FlinkRestoreError,
    restore,
    rows_of,
    subtasks,
)
from flink_snapshots import expected, only


@pytest.mark.parametrize("variant, kind", [("mp256", "canonical"), ("mp256", "native"),
                                           ("mp128-snappy", "canonical"),
                                           ("mp128-snappy", "native")])
def test_fixture_savepoint_restores_with_the_expected_state(variant, kind):
    truth = json.loads((FIXTURES / variant / "expected.json").read_text())
    rows = restore(FIXTURES / variant / kind, fixture_spec(truth["max_parallelism"]),
                   java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2)


def _flink_temp_files() -> set[str]:
    """What a Flink JVM unpacks into java.io.tmpdir and leaves: its RPC jar (24 MB), the
    MiniCluster's directories, RocksDB's native library."""
    return {p.name for p in Path(tempfile.gettempdir()).iterdir()
            if p.name.startswith(("flink-rpc-akka", "minicluster_", "librocksdbjni"))}


def test_canonical_savepoint_rescaled_on_rocksdb():
    """Another parallelism and another backend: Flink re-splits key groups and operator state;
    and the restore leaves nothing in the temp directory."""
    truth = json.loads((FIXTURES / "mp256" / "expected.json").read_text())
    before = _flink_temp_files()
    rows = restore(FIXTURES / "mp256" / "canonical", fixture_spec(256, 3, "rocksdb"),
                   java_sources=[FIXTURE_JOB])
    assert _flink_temp_files() <= before
    assert {d["keyedBackend"] for d in subtasks(rows, "stateful").values()} == {
        "RocksDBKeyedStateBackend"}
    check_fixture(rows, truth, parallelism=3, heap=False)


@pytest.fixture(scope="module")
def shared_java_canonical() -> Path:
    return only("java/canonical/savepoint-*")


@pytest.fixture(scope="module")
def shared_pyflink_savepoint() -> Path:
    return only("pyflink/savepoint-*")


def test_shared_java_savepoint_restores_with_the_expected_state(shared_java_canonical):
    truth = expected("java")
    rows = restore(shared_java_canonical,
                   shared_java_spec(truth["max_parallelism"], truth["parallelism"]),
                   java_sources=[FIXTURE_JOB])
    check_shared_java(rows, truth)
    state = truth["state"]
    for row in rows_of(rows, "stateful", "count"):
        assert row["keyGroup"] == state[row["key"]]["key_group_if_plain_string_key"]


def test_a_misplaced_entry_is_caught(tmp_path):
    """The harness sees an entry stored under another key group than its key's (which the
    state API cannot read): the first entry of key group 1 in mp256/canonical (state
    max_id, key 39) moved to key group 2 by its composite key's prefix."""
    savepoint = tmp_path / "savepoint"
    shutil.copytree(FIXTURES / "mp256" / "canonical", savepoint)
    data = savepoint / "160e1efc-ec06-4615-9bac-42079a4724da"
    data.chmod(0o644)
    raw = bytearray(data.read_bytes())
    offset = 3789  # of key group 1, in _metadata: short state id, int length, composite key
    prefix = struct.pack(">H", 0x8000 | 1)  # the last key of its state, key group 1
    assert raw[offset + 6:offset + 17] == prefix + struct.pack(">q", 39) + b"\0"
    raw[offset + 7] = 2
    data.write_bytes(bytes(raw))
    rows = restore(savepoint, fixture_spec(256), java_sources=[FIXTURE_JOB])
    (moved,) = [row for row in rows if row.get("storedKeyGroup") != row.get("keyGroup")]
    assert (moved["state"], moved["key"], moved["keyGroup"], moved["storedKeyGroup"],
            moved["value"]) == ("max_id", 39, 1, 2, None)
    with pytest.raises(AssertionError):
        check_placement(rows, heap=True)


def test_shared_pyflink_savepoint_restores_with_row_keys(shared_pyflink_savepoint):
    """Row keys; PyFlink's Python values are bytes to Java (the serializers of its map
    state, ByteArrayWrapper, come from flink-python, in pyflink/opt)."""
    truth = expected("pyflink")
    rows = restore(shared_pyflink_savepoint,
                   pyflink_spec(truth["max_parallelism"], truth["parallelism"]),
                   opt_jars=["flink-python"])
    check_pyflink(rows, truth)
    state = truth["state"]
    for row in rows_of(rows, "stateful", "python-state-count"):
        assert row["keyGroup"] == state[row["key"]["f0"]]["key_group_row_key"]


@pytest.mark.parametrize("change, messages", [
    ({"max_parallelism": 128}, ["Max parallelism mismatch between checkpoint/savepoint state and"
                                " new program. Cannot map operator 2bf2326fd66dcbd2442fd50df173e152"
                                " with max parallelism 256 to new program with max parallelism"
                                " 128"]),
    ({"total": "Long"}, ["the new state serializer (org.apache.flink.api.common.typeutils.base."
                         "LongSerializer", "must not be incompatible with the old state"
                         " serializer (org.apache.flink.api.common.typeutils.base."
                         "DoubleSerializer"]),
], ids=["max-parallelism", "serializer"])
def test_flink_refuses_what_does_not_fit(change, messages):
    spec = fixture_spec(change.get("max_parallelism", 256))
    if "total" in change:
        spec["operators"][0]["keyed_states"][0]["value"] = change["total"]
    with pytest.raises(FlinkRestoreError) as refused:
        restore(FIXTURES / "mp256" / "canonical", spec, java_sources=[FIXTURE_JOB])
    assert refused.value.returncode == 1
    for message in messages:
        assert message in str(refused.value)


def test_an_operator_missing_from_the_snapshot_is_an_error():
    """Flink itself would start an unknown uid empty, without a word."""
    spec = fixture_spec(256)
    spec["operators"].append({"uid": "no-such-operator", "operator_states": []})
    with pytest.raises(FlinkRestoreError, match="'no-such-operator' .* is not in the snapshot"):
        restore(FIXTURES / "mp256" / "canonical", spec, java_sources=[FIXTURE_JOB])
