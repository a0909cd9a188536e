"""The base of every decoded Flink serializer: how to read a value, and its types."""

from __future__ import annotations

from typing import Any

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.binary import BinaryReader
from statesource.types import DataType


class FlinkType:
    """One Flink serializer: how to read a value, its length, its types."""

    serializer: str
    length: int = -1
    """Bytes of every value, or -1 when values vary in size (as Flink's ``getLength``)."""
    snapshot: bytes = b""
    """The snapshot this type was read from, as written (class name, version, payload), so
    that a header can be written back with Flink's own bytes, which only Flink's classes
    could otherwise produce (empty for a type built by hand)."""

    def read(self, r: BinaryReader) -> Any:
        raise NotImplementedError

    def read_whole(self, r: BinaryReader) -> Any:
        """A value that fills all of ``r`` (a canonical savepoint frames each value)."""
        return self.read(r)

    def data_type(self) -> DataType:
        """The statesource type of keys and namespaces of this serializer."""
        raise IncompatibleCheckpointError(
            f"values of {self.serializer} cannot be a key or namespace type in statesource")

    def avro(self) -> Any:
        """The Avro schema of values of this serializer."""
        return self.data_type().to_avro()

    def to_value(self, value: Any) -> Any:
        """A decoded value in the shape its Avro schema takes (records as dicts)."""
        return value

    def describe(self) -> str:
        return self.serializer.rsplit(".", 1)[-1].split("$")[0]
