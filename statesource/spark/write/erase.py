"""Erasing keys given as a DataFrame (a GDPR request) from a Flink savepoint.

The keys are few next to the state: they are collected to the driver (distinct,
typed and checked as the operator's key type, as a write's keys are), and the
savepoint is rewritten by :func:`statesource.flink.edit.erase_keys`, which
decodes only keys and moves every other pair as bytes.
"""

from __future__ import annotations

import os
from typing import Any

from statesource.errors import InvalidArgumentError
from statesource.flink.edit import EditedSavepoint, operator_key_type
from statesource.flink.edit import erase_keys as erase_from_savepoint
from statesource.format.columns import KEY
from statesource.model import Progress
from statesource.spark.write.task import key_column


def erase_keys(df: Any, snapshot: str | os.PathLike[str], operator: str, *,
               output: str | os.PathLike[str], checkpoint_id: int | None = None,
               progress: Progress | None = None) -> EditedSavepoint:
    """Write the Flink snapshot ``snapshot`` as the new savepoint ``output`` without any
    entry or timer of ``operator`` whose key is in ``df``'s ``key`` column."""
    if KEY not in df.columns:
        raise InvalidArgumentError(
            f"the DataFrame of keys to erase has no column {KEY!r} (columns: {df.columns})")
    key_type = operator_key_type(snapshot, operator, checkpoint_id=checkpoint_id)
    keys = df.select(KEY).distinct().toArrow().column(KEY)
    return erase_from_savepoint(snapshot, output, operator,
                                key_type.from_arrow(key_column(key_type, keys)),
                                checkpoint_id=checkpoint_id, progress=progress)
