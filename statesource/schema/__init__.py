"""Avro value schemas of keyed state and their mapping to Arrow (see :mod:`statesource.schema.avro`)."""

from statesource.schema.avro import ValueSchema, arrow_field_for, value_schema

__all__ = ["ValueSchema", "arrow_field_for", "value_schema"]
