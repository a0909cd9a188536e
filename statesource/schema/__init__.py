"""Avro value schemas of state values and their Arrow mapping (see :mod:`.value_schema`)."""

from statesource.schema.value_schema import ValueSchema, arrow_field_for, value_schema

__all__ = ["ValueSchema", "arrow_field_for", "value_schema"]
