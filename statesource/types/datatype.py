"""The interface of a declared type: how its values hash in Java, validate and map to Arrow.

The concrete types are in :mod:`~statesource.types.primitives` and
:mod:`~statesource.types.composites`; :func:`~statesource.types.parse_type` names them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from statesource.errors import TypeMismatchError


class DataType:
    """One declared type: how values of it hash in Java, validate and map to Arrow."""

    name: str
    usable_as_key: bool = True

    def java_hash(self, value: Any) -> int:
        """The value's Java ``hashCode``, as a signed 32-bit int."""
        raise NotImplementedError

    def validate(self, value: Any) -> None:
        """Raise :class:`TypeMismatchError` unless ``value`` is a valid value of this type."""
        self.java_hash(value)

    @property
    def arrow_type(self) -> pa.DataType:
        raise NotImplementedError

    def to_avro(self) -> Any:
        """The Avro schema that declares this type as a state value."""
        raise NotImplementedError

    def to_arrow(self, values: list[Any]) -> pa.Array:
        """An Arrow column of ``values`` (already validated)."""
        return pa.array(values, type=self.arrow_type)

    def from_arrow(self, column: pa.Array | pa.ChunkedArray) -> list[Any]:
        """The Python values of an Arrow column written by :meth:`to_arrow`."""
        return column.to_pylist()

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def _mismatch(self, value: Any, why: str = "") -> TypeMismatchError:
        detail = f": {why}" if why else ""
        return TypeMismatchError(
            f"{value!r} ({type(value).__name__}) is not a valid {self.name}{detail}"
        )
