"""Flink's BinaryRowData written from the Java sources' description, for the tests only.

Independent of statesource's writer (statesource.types.binary_row) and reader: a second,
plainer rendering of ``BinaryRowWriter`` / ``AbstractBinaryWriter`` (flink-table-runtime)
and of ``MurmurHashUtils.hashBytesByWords`` (flink-table-common), to check both on random
rows. Types are ``(root, params)`` tuples of Flink's type roots: ``("DECIMAL", (p, s))``,
``("TIMESTAMP_WITHOUT_TIME_ZONE", (p,))``, ``("ROW", ((name, type), ...))``,
``("INTEGER", ())``, ...
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Context
from typing import Any

_EPOCH = dt.datetime(1970, 1, 1)
_TIMESTAMPS = ("TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE")


def _pad(data: bytes) -> bytes:
    return data + b"\0" * ((8 - len(data) % 8) % 8)


def _timestamp(value: Any, local: bool) -> tuple[int, int]:
    if isinstance(value, dict):
        return value["millisecond"], value["nano_of_millisecond"]
    naive = value if local else value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    delta = naive - _EPOCH
    micros = (delta.days * 86400 + delta.seconds) * 10 ** 6 + delta.microseconds
    return micros // 1000, (micros % 1000) * 1000


def write_row(types: list[tuple[str, Any]], values: list[Any], kind: int = 0) -> bytes:
    """The bytes ``BinaryRowWriter`` leaves for these values (nulls as generated code writes
    them: a DECIMAL past 18 digits or a TIMESTAMP past 3 keeps its variable-part space)."""
    arity = len(types)
    null_bytes = ((arity + 63 + 8) // 64) * 8
    fixed = bytearray(null_bytes + 8 * arity)
    fixed[0] = kind
    var = bytearray()

    def cursor() -> int:
        return len(fixed) + len(var)

    for i, ((root, params), value) in enumerate(zip(types, values)):
        at = null_bytes + 8 * i
        if value is None:
            fixed[(i + 8) // 8] |= 1 << ((i + 8) % 8)
            if root == "DECIMAL" and params[0] > 18:
                fixed[at:at + 8] = struct.pack("<q", cursor() << 32)
                var += bytes(16)
            elif root in _TIMESTAMPS and params[0] > 3:
                fixed[at:at + 8] = struct.pack("<q", cursor() << 32)
                var += bytes(8)
            continue
        if root == "BOOLEAN":
            fixed[at] = 1 if value else 0
        elif root == "TINYINT":
            fixed[at:at + 1] = struct.pack("<b", value)
        elif root == "SMALLINT":
            fixed[at:at + 2] = struct.pack("<h", value)
        elif root in ("INTEGER", "INTERVAL_YEAR_MONTH"):
            fixed[at:at + 4] = struct.pack("<i", value)
        elif root == "DATE":
            fixed[at:at + 4] = struct.pack("<i", (value - dt.date(1970, 1, 1)).days)
        elif root == "TIME_WITHOUT_TIME_ZONE":
            millis = ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 \
                + value.microsecond // 1000
            fixed[at:at + 4] = struct.pack("<i", millis)
        elif root in ("BIGINT", "INTERVAL_DAY_TIME"):
            fixed[at:at + 8] = struct.pack("<q", value)
        elif root == "FLOAT":
            fixed[at:at + 4] = struct.pack("<f", value)
        elif root == "DOUBLE":
            fixed[at:at + 8] = struct.pack("<d", value)
        elif root in ("VARCHAR", "VARBINARY", "CHAR", "BINARY"):
            data = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            if len(data) <= 7:
                slot = bytearray(8)
                slot[:len(data)] = data
                slot[7] = 0x80 | len(data)
                fixed[at:at + 8] = slot
            else:
                fixed[at:at + 8] = struct.pack("<q", cursor() << 32 | len(data))
                var += _pad(data)
        elif root == "DECIMAL":
            unscaled = int(value.scaleb(params[1], context=Context(prec=100)))
            if params[0] <= 18:
                fixed[at:at + 8] = struct.pack("<q", unscaled)
            else:
                size = (unscaled.bit_length() + 8) // 8 if unscaled >= 0 else \
                    ((~unscaled).bit_length() + 8) // 8
                data = unscaled.to_bytes(size, "big", signed=True)
                fixed[at:at + 8] = struct.pack("<q", cursor() << 32 | len(data))
                var += data + bytes(16 - len(data))
        elif root in _TIMESTAMPS:
            millis, nanos = _timestamp(value, root == "TIMESTAMP_WITHOUT_TIME_ZONE")
            if params[0] <= 3:
                fixed[at:at + 8] = struct.pack("<q", millis)
            else:
                fixed[at:at + 8] = struct.pack("<q", cursor() << 32 | nanos)
                var += struct.pack("<q", millis)
        elif root == "ROW":
            nested = write_row([t for _, t in params], [value[name] for name, _ in params])
            fixed[at:at + 8] = struct.pack("<q", cursor() << 32 | len(nested))
            var += _pad(nested)
        elif root == "RAW":
            fixed[at:at + 8] = struct.pack("<q", cursor() << 32 | len(value))
            var += _pad(bytes(value))
        else:
            raise AssertionError(root)
    return bytes(fixed + var)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def hash_by_words(data: bytes, seed: int = 42) -> int:
    """``MurmurHashUtils.hashBytesByWords``: murmur3's block mix over little-endian ints,
    then its finalizer with the length, as a signed int."""
    h = seed
    for (word,) in struct.iter_unpack("<I", data):
        k = (word * 0xCC9E2D51) & 0xFFFFFFFF
        k = (_rotl(k, 15) * 0x1B873593) & 0xFFFFFFFF
        h = (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & 0xFFFFFFFF
    h ^= len(data)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h

