"""Data files rewritten with other rows, their metadata following: hostile files whose CRCs,
sizes and byte ranges all hold, so that only the reader's checks of the rows can refuse them."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from statesource.format.datafile import _write_groups
from statesource.format.storage import resolve

_RANGE = ("batchStart", "batchCount", "offset", "length", "crc32")


def rewrite_data_file(root: str | Path, checkpoint_id: int, path: str,
                      change: Callable[[int, list[pa.RecordBatch]], list[pa.RecordBatch]]
                      ) -> None:
    """Rewrite data file ``path`` (relative to ``root``), each byte range that checkpoint
    ``checkpoint_id``'s metadata lists in it as ``change(n, its batches)`` (n counting the
    ranges in file order), and record the new ranges, CRCs and size in that metadata."""
    metadata = Path(root) / f"chk-{checkpoint_id}" / "_metadata.json"
    document = json.loads(metadata.read_text())
    listings = [part for op in document["operators"] for state in op["keyedStates"]
                for data_file in state["files"] + state.get("deltaFiles", [])
                if data_file["path"] == path
                for part in (data_file["keyGroups"], data_file.get("priorKeyGroups"))
                if part]
    ranges = sorted({(start, count) for part in listings
                     for start, count in zip(part["batchStart"], part["batchCount"])})
    file = Path(root) / path
    reader = pa.ipc.open_file(file)
    groups = [change(index, [reader.get_batch(b) for b in range(start, start + count)])
              for index, (start, count) in enumerate(ranges)]
    size, written = _write_groups(resolve(str(file) + ".new"), reader.schema, groups)
    os.replace(str(file) + ".new", file)
    new = dict(zip(ranges, written))
    for part in listings:
        for i, old in enumerate(zip(part["batchStart"], part["batchCount"])):
            byte_range = new[old]
            for field, value in zip(_RANGE, (byte_range.batch_start, byte_range.batch_count,
                                             byte_range.offset, byte_range.length,
                                             byte_range.crc32)):
                part[field][i] = value
    for op in document["operators"]:
        for state in op["keyedStates"]:
            for data_file in state["files"] + state.get("deltaFiles", []):
                if data_file["path"] == path:
                    data_file["sizeBytes"] = size
    metadata.write_text(json.dumps(document))


def with_column(batch: pa.RecordBatch, name: str, values: list) -> pa.RecordBatch:
    """``batch`` with column ``name`` holding ``values`` (of its type)."""
    index = batch.schema.get_field_index(name)
    return batch.set_column(index, batch.schema.field(index),
                            pa.array(values, batch.schema.field(index).type))
