"""The JSON form of a state's declared types: its value schemas by role, and its TTL.

Keyed and operator states record their value schemas alike, so both parts of
the metadata (:mod:`statesource.format.keyed_state_meta`,
:mod:`statesource.format.operator_state_meta`) write and read them here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from statesource.format.json_fields import json_field, json_int, json_object
from statesource.model import StateVisibility, TtlConfig, UpdateType
from statesource.schema import ValueSchema


def ttl_to_json(ttl: TtlConfig) -> dict[str, Any]:
    return {
        "ttlMillis": ttl.ttl_ms,
        "updateType": ttl.update_type.value,
        "visibility": ttl.visibility.value,
        "cleanupFullSnapshot": ttl.cleanup_full_snapshot,
        "incrementalCleanupSize": ttl.incremental_cleanup_size,
    }


def ttl_from_json(data: object) -> TtlConfig:
    cleanup = json_field(data, "cleanupFullSnapshot")
    if type(cleanup) is not bool:
        raise ValueError(f"cleanupFullSnapshot must be a boolean, got {cleanup!r}")
    ttl_ms = json_int(json_field(data, "ttlMillis"))
    try:
        ttl = timedelta(milliseconds=ttl_ms)
    except OverflowError:
        raise ValueError(f"ttlMillis {ttl_ms} is beyond what a timedelta holds") from None
    return TtlConfig(
        ttl=ttl,
        update_type=UpdateType(json_field(data, "updateType")),
        visibility=StateVisibility(json_field(data, "visibility")),
        cleanup_full_snapshot=cleanup,
        incremental_cleanup_size=json_int(json_field(data, "incrementalCleanupSize")),
    )


def schemas_to_json(schemas: Mapping[str, ValueSchema]) -> dict[str, Any]:
    return {role: schema.avro for role, schema in schemas.items()}


def schemas_from_json(data: object) -> dict[str, ValueSchema]:
    return {role: ValueSchema.parse(avro) for role, avro in json_object(data).items()}
