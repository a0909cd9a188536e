"""Erasing keys given as a DataFrame (a GDPR request) from a Flink savepoint.

The keys are few next to the state: their distinct values come back to the
caller through Spark, as any query's rows do. Everything that touches the
storage runs on Spark's driver (or the Spark Connect server) through
:func:`~statesource.spark.driver.commit_on_driver`, as every commit does, so
a caller that cannot see the storage can erase: there the keys are typed and
checked as the operator's key type (as a write's keys are) and the savepoint
is rewritten by :func:`statesource.flink.operations.edit.erase_keys`, which decodes only
keys and moves every other pair as bytes.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import pyarrow as pa

from statesource.errors import InvalidArgumentError
from statesource.flink.operations.edit import EditedSavepoint, operator_key_type
from statesource.flink.operations.edit import erase_keys as erase_from_savepoint
from statesource.flink.snapshot.compression import Compression
from statesource.format.columns import KEY
from statesource.model import Progress
from statesource.spark.driver import commit_on_driver
from statesource.spark.write.task import key_column


def erase_keys(source: str | os.PathLike[str], output: str | os.PathLike[str], operator: str,
               keys: Any, *, checkpoint_id: int | None = None,
               progress: Progress | None = None,
               compression: Compression | None = None) -> EditedSavepoint:
    """Write the Flink snapshot ``source`` as the new savepoint ``output`` without any
    entry or timer of ``operator`` whose key is in the ``key`` column of the DataFrame
    ``keys``: :func:`statesource.flink.operations.edit.erase_keys`, with the keys in
    Spark.

    ``progress`` hears where the work runs and what it did (the driver's own steps
    are not reported back); ``compression`` is as there."""
    if KEY not in keys.columns:
        raise InvalidArgumentError(
            f"the DataFrame of keys to erase has no column {KEY!r} (columns: {keys.columns})")
    report = progress or (lambda _: None)
    distinct = keys.select(KEY).distinct().toArrow().column(KEY)
    report(f"erasing {len(distinct):,} distinct keys from operator {operator} of {source}"
           f" into {output} on the driver")
    done = commit_on_driver(keys.sparkSession, functools.partial(
        erase_on_driver, os.fspath(source), os.fspath(output), operator, distinct,
        checkpoint_id=checkpoint_id, compression=compression))
    report(f"wrote {done.output}: {done.total:,} entries and timers removed")
    return done


def erase_on_driver(snapshot: str, output: str, operator: str, keys: pa.ChunkedArray, *,
                    checkpoint_id: int | None,
                    compression: Compression | None = None) -> EditedSavepoint:
    """On the driver: ``keys`` typed as ``operator``'s key type, then erased."""
    key_type = operator_key_type(snapshot, operator, checkpoint_id=checkpoint_id)
    return erase_from_savepoint(snapshot, output, operator,
                                key_type.from_arrow(key_column(key_type, keys)),
                                checkpoint_id=checkpoint_id, compression=compression)
