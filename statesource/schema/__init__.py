"""Avro value schemas of state values and their Arrow mapping (see :mod:`.value_schema`)."""

from statesource.schema.record_key import RecordKey, hashable_record
from statesource.schema.value_schema import ValueSchema, arrow_field_for, value_schema

__all__ = ["RecordKey", "ValueSchema", "arrow_field_for", "hashable_record", "value_schema"]
