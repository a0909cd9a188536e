"""The JVM reader's binary rows (FlinkBinaryRowDecoder.java) hold what the Python decoder reads.

Rows of random types and values are written by the independent writer of
``tests/binary_rows_truth.py`` and framed as Flink frames them; the shim decodes them into a
Spark column vector, without a Spark session (``tests/jvm/BinaryRowEcho.java`` echoes the
vector), and statesource's per-value decoder (``binary_rows.py``) reads the same bytes. Every
field must agree as Spark keeps it (floats by their bits, decimals by their unscaled value,
dates in days, timestamps in microseconds). Lying rows are refused by both.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from binary_rows_truth import write_row
from hypothesis import given, settings
from hypothesis import strategies as st
from jvm_echo import jvm_echo
from test_binary_row_columns import COLUMNAR_LEAVES, LYING_ROWS, _ascii
from test_sql_rows import sql_type, values_of

from statesource.errors import (
    CorruptCheckpointError,
    IncompatibleCheckpointError,
)
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.jvm_layout import _descriptor
from statesource.flink.serializers.binary_row_columns import row_columns
from statesource.flink.serializers.binary_rows import RowReader
from statesource.types import RowKind, SqlType

ECHO = Path(__file__).parents[2] / "jvm" / "BinaryRowEcho.java"
EPOCH = dt.datetime(1970, 1, 1)
JVM_LEAVES = COLUMNAR_LEAVES.filter(lambda t: t[0] != "TIME_WITHOUT_TIME_ZONE")
"""The column decoder's types but TIME, which the JVM reader leaves to the Python source."""


class Echo:
    """One JVM running BinaryRowEcho: a request line in, an answer line out."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def decode(self, sql: list[SqlType], rows: bytes, with_kind: bool = True) -> dict:
        fields = [(f"f{i}", t.arrow_type) for i, t in enumerate(sql)]
        import pyarrow as pa

        arrow_type = pa.struct(([("row_kind", pa.string())] if with_kind else []) + fields)
        descriptor = _descriptor(row_columns(arrow_type, sql), False)
        request = {"descriptor": descriptor, "scales": [t.scale for t in sql], "rows": rows.hex()}
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())


@pytest.fixture(scope="module")
def echo(tmp_path_factory) -> Iterator[Echo]:
    for process in jvm_echo(ECHO, tmp_path_factory.mktemp("echo")):
        yield Echo(process)


def _as_spark_keeps(sql: SqlType, value: Any) -> Any:
    """A per-value decoder's value as BinaryRowEcho prints what Spark's vector holds."""
    if value is None:
        return None
    root = sql.root
    if root == "FLOAT":
        return struct.unpack("<i", struct.pack("<f", value))[0]
    if root == "DOUBLE":
        return struct.unpack("<q", struct.pack("<d", value))[0]
    if root == "DATE":
        return (value - EPOCH.date()).days
    if root in ("BINARY", "VARBINARY"):
        return value.hex()
    if root == "DECIMAL":
        return int(Decimal(value).scaleb(sql.scale))
    if root.startswith("TIMESTAMP"):
        naive = value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value
        return (naive - EPOCH) // dt.timedelta(microseconds=1)
    return value


def _framed(rows: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(r)) + r for r in rows)


@st.composite
def batches(draw: Any) -> tuple[list, list[list], list[RowKind]]:
    types = draw(st.lists(JVM_LEAVES, min_size=1, max_size=6))
    values = draw(st.lists(st.tuples(*map(lambda t: _ascii(t) | values_of(t), types)).map(list),
                           min_size=1, max_size=6))
    kinds = draw(st.lists(st.sampled_from(list(RowKind)), min_size=len(values),
                          max_size=len(values)))
    return types, values, kinds


@settings(max_examples=200, deadline=None)
@given(batches())
def test_the_jvm_decoder_reads_rows_as_the_python_decoder(echo, batch):
    types, values, kinds = batch
    sql = [sql_type(t) for t in types]
    data = _framed([write_row(types, v, k.byte_value) for v, k in zip(values, kinds)])
    reader, r = RowReader(sql), BinaryReader(data, "rows")
    expected = []
    for _ in values:
        kind, read = reader.read(r)
        expected.append([kind.short_string, *(_as_spark_keeps(t, v) for t, v in zip(sql, read))])
    assert echo.decode(sql, data) == {"rows": expected}


def test_keys_have_no_row_kind(echo):
    sql = [SqlType("VARCHAR", length=2**31 - 1), SqlType("SMALLINT")]
    data = _framed([write_row([("VARCHAR", (2**31 - 1,)), ("SMALLINT", ())], ["user-é-long", -2])])
    assert echo.decode(sql, data, with_kind=False) == {"rows": [[None, "user-é-long", -2]]}


@pytest.mark.parametrize(("sql", "data"), [
    (sql, data) for sql, data in LYING_ROWS if sql[0].root != "TIME_WITHOUT_TIME_ZONE"])
def test_lying_rows_are_refused_by_both(echo, sql, data):
    with pytest.raises((CorruptCheckpointError, IncompatibleCheckpointError)):
        RowReader(sql).read(BinaryReader(data, "rows"))
    assert "error" in echo.decode(sql, data)
