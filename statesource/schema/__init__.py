"""Avro value schemas of state values and their Arrow mapping (see :mod:`.avro`)."""

from statesource.schema.avro import ValueSchema, arrow_field_for, value_schema

__all__ = ["ValueSchema", "arrow_field_for", "value_schema"]
