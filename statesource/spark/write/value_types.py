"""Avro value schemas and key types derived from a DataFrame's Spark schema (for bootstrap).

A state created from a DataFrame needs declared types; by default they are
read off the Spark schema with the mapping below (docs/SPARK.md), and the
``valueSchemas`` / ``keyType`` options override it. Top-level values are
never null in a Flink state, so a top-level value type is not a nullable
union; nested fields follow Spark's nullability.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from statesource.errors import TypeMismatchError

_PRIMITIVES: dict[type, Any] = {
    T.BooleanType: "boolean",
    T.IntegerType: "int",
    T.LongType: "long",
    T.FloatType: "float",
    T.DoubleType: "double",
    T.StringType: "string",
    T.BinaryType: "bytes",
    T.ShortType: {"type": "int", "java-class": "java.lang.Short"},
    T.ByteType: {"type": "int", "java-class": "java.lang.Byte"},
    T.DateType: {"type": "int", "logicalType": "date"},
    T.TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
    T.TimestampNTZType: {"type": "long", "logicalType": "local-timestamp-micros"},
}

_KEY_TYPES: dict[type, str] = {
    T.StringType: "string", T.IntegerType: "int", T.LongType: "long", T.ShortType: "short",
    T.ByteType: "byte", T.BooleanType: "boolean", T.FloatType: "float", T.DoubleType: "double",
}


def avro_for(spark_type: T.DataType, column: str) -> Any:
    """The Avro schema of a (top-level, non-null) value of ``spark_type``."""
    return _Namer(column).convert(spark_type, column)


def key_type_for(spark_type: T.DataType) -> str:
    """The key type word for a key column of ``spark_type`` (composite keys: name it)."""
    for spark_class, word in _KEY_TYPES.items():
        if isinstance(spark_type, spark_class):
            return word
    raise TypeMismatchError(
        f"cannot derive a key type from the key column's Spark type {spark_type.simpleString()};"
        " give the keyType option (e.g. keyType 'tuple<string,long>')"
    )


class _Namer:
    """Avro records need unique names: ``<column>_<path>`` built from the field path."""

    def __init__(self, column: str) -> None:
        self.column = column

    def convert(self, spark_type: T.DataType, path: str) -> Any:
        for spark_class, avro in _PRIMITIVES.items():
            if isinstance(spark_type, spark_class):
                return avro
        if isinstance(spark_type, T.DecimalType):
            return {"type": "bytes", "logicalType": "decimal",
                    "precision": spark_type.precision, "scale": spark_type.scale}
        if isinstance(spark_type, T.ArrayType):
            items = self.convert(spark_type.elementType, f"{path}_item")
            return {"type": "array",
                    "items": _nullable(items) if spark_type.containsNull else items}
        if isinstance(spark_type, T.MapType):
            if not isinstance(spark_type.keyType, T.StringType):
                raise TypeMismatchError(
                    f"column {self.column}: Avro maps have string keys, not"
                    f" {spark_type.keyType.simpleString()} (at {path})")
            values = self.convert(spark_type.valueType, f"{path}_value")
            return {"type": "map",
                    "values": _nullable(values) if spark_type.valueContainsNull else values}
        if isinstance(spark_type, T.StructType):
            fields = []
            for field in spark_type.fields:
                avro = self.convert(field.dataType, f"{path}_{field.name}")
                fields.append({"name": field.name,
                               "type": _nullable(avro) if field.nullable else avro})
            return {"type": "record", "name": _record_name(path), "fields": fields}
        raise TypeMismatchError(
            f"column {self.column}: Spark type {spark_type.simpleString()} has no Avro"
            " counterpart here; give the valueSchemas option"
        )


def _nullable(avro: Any) -> list[Any]:
    return ["null", avro]


def _record_name(path: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in path)
    return cleaned if cleaned[:1].isalpha() or cleaned[:1] == "_" else f"r_{cleaned}"
