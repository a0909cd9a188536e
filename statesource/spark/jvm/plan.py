"""The Python half of the JVM reader: options, checks and planning, handed to Java as JSON.

When the Java shim is loaded, ``format("flinkstate")`` resolves to its JVM
provider (a JVM source always wins a short name). That provider asks this
source, registered as ``flinkstate-python``, to plan: the options are parsed,
the checkpoint opened, every path confined and every data file's own schema
checked exactly as for the Python reader, so errors and schemas are the Python
source's own. The plan (the confined data files, each key group's byte range,
CRC-32 and row count, the partition slices) travels back as metadata of the
schema's first field; the JVM then reads the byte ranges itself, checks them
as the Python reader does, and returns Arrow columnar batches.

A keyed or timer state of a Flink savepoint or checkpoint is planned as its key
groups' byte ranges (of RocksDB state: its column family's live tables, per database)
and a type descriptor per column (:mod:`statesource.flink.jvm_layout`): the JVM decodes
Flink's bytes itself, straight into Spark's column vectors.

A request the JVM reader does not serve (serializers its decoders lack, operator
state, the change feed, a remote filesystem, nested collections, Arrow types
Spark's ArrowColumnVector lacks) is planned as
``servable: false`` with a reason, and the provider hands it to this Python
source unchanged.

The plan is versioned (``planVersion``, :data:`PLAN_VERSION`): the shim's
ReadPlan refuses a plan without it or of another version, naming both, and
refuses a servable plan that lacks a field. tests/jvm/test_plan_contract.py
holds this writer and that reader to one contract; change a field on both
sides and bump the version with it.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StructField, StructType

from statesource.flink.jvm_layout import JvmLayout, jvm_layout
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FLINK_METADATA
from statesource.format.ipc import check_file_schema
from statesource.format.source import StateSource
from statesource.sources import reopen
from statesource.spark.compat import is_connect
from statesource.spark.jvm.session import add_shim_jar, tell_once
from statesource.spark.options import parse_read_options
from statesource.spark.read import ReadTarget
from statesource.spark.read.changefeed import ChangeFeedTarget
from statesource.spark.read.keyed import ScanTarget
from statesource.spark.read.operator_state import OperatorStateTarget
from statesource.spark.read.pushdown import EXACT_KEY_TYPES
from statesource.spark.read.slices import plan_slices
from statesource.spark.source import FlinkStateDataSource

PYTHON_SOURCE_NAME = "flinkstate-python"
PLAN_OPTION = "statesource.jvmplan"
"""Set (to anything) by the JVM provider to ask for a plan; Spark lower-cases option keys."""
PLAN_METADATA = "statesource.jvmPlan"
PLAN_VERSION = 5
"""The version of the plan's JSON; ReadPlan.VERSION in the shim reads this version only."""


_LOG = logging.getLogger("statesource.jvm")
_logged: set[str] = set()


def load_shim(spark: Any) -> bool:
    """Put the JVM reader and functions on ``spark``; False (said once why) if unavailable.

    The Python source is registered under its second name first: the JVM
    provider plans through it and hands it what it does not serve. A Spark
    Connect client is refused before anything is added: the jar would have to
    be on the server, which starts with it instead (docs/DEPLOY.md).
    """
    if is_connect(spark):
        tell_once("a Spark Connect client cannot load the shim into the server; start the"
                  " Connect server with --jars <the jar of `statesource jvm status`> to have it")
        return False
    spark.dataSource.register(FlinkStatePythonSource)
    return add_shim_jar(spark)


class FlinkStatePythonSource(FlinkStateDataSource):
    """``flinkstate`` under the name the JVM provider delegates to, and its planner."""

    @classmethod
    def name(cls) -> str:
        return PYTHON_SOURCE_NAME

    def __init__(self, options: dict[str, str]) -> None:
        given = dict(options)
        self._plan_requested = given.pop(PLAN_OPTION, None) is not None
        super().__init__(given)

    def schema(self) -> StructType:
        schema = super().schema()
        if not self._plan_requested:
            return schema
        plan = json.dumps(jvm_plan(self._source(), self.options, self._snapshot),
                          separators=(",", ":"))
        first = schema.fields[0]
        planned = StructField(first.name, first.dataType, first.nullable,
                              {**(first.metadata or {}), PLAN_METADATA: plan})
        return StructType([planned, *schema.fields[1:]])


def jvm_plan(target: ReadTarget,
             options: Mapping[str, str], snapshot: StateSource | None = None) -> dict[str, Any]:
    """What the JVM reads for ``target``, or why it cannot serve it (``snapshot``: the
    snapshot the target names, where it is open already).

    Every plan has ``planVersion`` and ``servable``; an unservable one only a
    ``reason`` besides. A servable one has, all required:
    ``maxParallelism``, ``parallelism``; ``exactKeys`` (Spark's equality on the
    key is Java's, so key filters may prune); ``filterPushdown``;
    ``fileSchema`` (the data files' Arrow schema, IPC-serialized, base64);
    ``columns`` (the output columns in order); ``files`` (``path``, the
    confined real path, ``name`` for errors, ``sizeBytes``); ``keyGroups``,
    parallel arrays of one length, one entry per non-empty key group in
    ascending order: ``keyGroup``, ``file`` (an index into ``files``),
    ``batchCount``, ``offset``, ``length``, ``rows``, ``crc32``; and
    ``slices``, ``[first, last]`` key-group ranges, a Spark partition each.
    A Flink snapshot's plan adds ``flink`` (how to decode the state, and how
    each file numbers its states: :func:`~statesource.flink.jvm_layout.jvm_layout`);
    its ``files`` are those holding the state, ``offset`` and ``length`` each key
    group's byte range in them, and ``fileSchema``, ``batchCount``, ``rows`` and
    ``crc32`` are empty or zero. Of RocksDB state (``flink.rocksdb``: each database a run
    of ``files``, the live tables of the state's column family), each key group's
    ``file`` is its database's first table and ``length`` its share of the tables' bytes
    (what it holds is known only once its keys are read).
    """
    if isinstance(target, ChangeFeedTarget):
        return _unservable("the change feed is read by the Python source")
    if isinstance(target, OperatorStateTarget):
        return _unservable("operator state is read by the Python source")
    reason = _unservable_target(target)
    if reason is not None:
        return _unservable(reason)
    source = reopen(target.source) if snapshot is None else snapshot
    if isinstance(source, FlinkCheckpoint):
        flink = jvm_layout(source, target.operator, target.state)
        if isinstance(flink, str):
            return _unservable(flink)
        return _flink_plan(target, options, source, flink)
    layout = source.arrow_layout(target.operator, target.state)
    if layout is None:
        return _unservable(f"a {source.kind} is decoded by the Python source")
    if layout.delta_key_groups:
        return _unservable(f"{len(layout.delta_key_groups)} key groups have delta runs (format"
                           " version 4), which the Python source merges")
    unreadable = [f"{f.name} ({f.type})" for f in layout.schema
                  if not _jvm_readable(f.type, True)]
    if unreadable:
        return _unservable(f"Arrow types the JVM reader does not convert: {', '.join(unreadable)}")
    first_ranges: dict[int, int] = {}
    for index, loc in layout.key_groups:
        first_ranges[index] = min(first_ranges.get(index, loc.offset), loc.offset)
    for index, first_range in first_ranges.items():
        check_file_schema(layout.files[index][0], layout.schema, first_range)
    files = [{"path": os.path.realpath(location.path), "name": str(location), "sizeBytes": size}
             for location, size in layout.files]
    groups: dict[str, list[int]] = {name: [] for name in
                                    ("keyGroup", "file", "batchCount", "offset", "length",
                                     "rows", "crc32")}
    for index, loc in layout.key_groups:
        for name, value in (("keyGroup", loc.key_group), ("file", index),
                            ("batchCount", loc.batch_count), ("offset", loc.offset),
                            ("length", loc.length), ("rows", loc.rows), ("crc32", loc.crc32)):
            groups[name].append(value)
    schema = base64.b64encode(layout.schema.serialize().to_pybytes()).decode("ascii")
    return _servable(target, options, source, schema, files, groups)


def _flink_plan(target: ScanTarget, options: Mapping[str, str], source: FlinkCheckpoint,
                layout: JvmLayout) -> dict[str, Any]:
    files = [{"path": path, "name": name, "sizeBytes": size} for path, name, size in
             layout.files]
    count = len(layout.key_groups)
    groups = {"keyGroup": [r.key_group for r in layout.key_groups],
              "file": [r.file for r in layout.key_groups],
              "batchCount": [0] * count,
              "offset": [r.offset for r in layout.key_groups],
              "length": [r.length for r in layout.key_groups],
              "rows": [0] * count, "crc32": [0] * count}
    flink = dict(layout.state)
    stamp = _stamp(options, source)
    if stamp is not None:
        flink["stamp"] = stamp
    return {**_servable(target, options, source, "", files, groups), "flink": flink}


def _stamp(options: Mapping[str, str], source: FlinkCheckpoint) -> dict[str, Any] | None:
    """The snapshot's ``_metadata`` as it is (real path, size, modification time), for the JVM
    provider to reuse this plan while it is unchanged (FlinkPlanCache.java); None unless the
    options name the snapshot itself: a directory of checkpoints, or a chosen checkpoint id,
    resolves anew each time."""
    parsed = parse_read_options(options)
    location = source.location
    if parsed.checkpoint_id is not None or not location.is_local or \
            os.path.realpath(parsed.path) != os.path.realpath(location.path):
        return None
    metadata = os.path.realpath(os.path.join(location.path, FLINK_METADATA))
    stat = os.stat(metadata)
    return {"path": metadata, "sizeBytes": stat.st_size, "modifiedNs": stat.st_mtime_ns}


def _servable(target: ScanTarget, options: Mapping[str, str], source: StateSource,
              file_schema: str, files: list[dict[str, Any]], groups: dict[str, list[int]]
              ) -> dict[str, Any]:
    weights = source.key_group_weights(target.operator, target.state)
    slices = plan_slices(weights, target.max_parallelism, target.parallelism, None)
    key_type = source.operator(target.operator).keyed_key_type
    return {
        "planVersion": PLAN_VERSION,
        "servable": True,
        "maxParallelism": target.max_parallelism,
        "parallelism": target.parallelism,
        "exactKeys": key_type in EXACT_KEY_TYPES,
        "filterPushdown": parse_read_options(options).jvm_filter_pushdown(),
        "fileSchema": file_schema,
        "columns": target.output.arrow.names,
        "files": files,
        "keyGroups": groups,
        "slices": [[s.start, s.end] for s in slices],
    }


def _unservable(reason: str) -> dict[str, Any]:
    if reason not in _logged:
        _logged.add(reason)
        _LOG.warning("statesource: this read uses the Python reader, not the JVM reader: %s",
                     reason)
    return {"planVersion": PLAN_VERSION, "servable": False, "reason": reason}


def _unservable_target(target: ScanTarget) -> str | None:
    if not target.source.location.is_local:
        return f"{target.source.location} is not on the local filesystem"
    if target.output.nested:
        return "flattenCollections=false nests rows, which the JVM reader does not do"
    return None


def _jvm_readable(arrow_type: pa.DataType, top_level: bool) -> bool:
    """Types ArrowColumnVector reads as they are, and millisecond timestamps at the top level."""
    if pa.types.is_timestamp(arrow_type):
        return arrow_type.unit == "us" or (top_level and arrow_type.unit == "ms")
    if pa.types.is_list(arrow_type):
        return _jvm_readable(arrow_type.value_type, False)
    if pa.types.is_map(arrow_type):
        return (_jvm_readable(arrow_type.key_type, False)
                and _jvm_readable(arrow_type.item_type, False))
    if pa.types.is_struct(arrow_type):
        return all(_jvm_readable(f.type, False) for f in arrow_type)
    return (pa.types.is_signed_integer(arrow_type) or pa.types.is_decimal128(arrow_type)
            or arrow_type in _PLAIN)


_PLAIN = {pa.bool_(), pa.float32(), pa.float64(), pa.string(), pa.binary(), pa.null(),
          pa.date32()}
