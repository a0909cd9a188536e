"""Options of the ``flinkstate`` sources: parsed, typed and checked up front.

Spark hands a data source its options as a case-insensitive dict of strings.
Each one is parsed here once, and a misspelt or malformed option is an error
naming it and what was expected; silently ignoring it would read the wrong
state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import overload

from statesource.errors import InvalidArgumentError
from statesource.spark.compat import pushdown_safe_by_default

_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}


@dataclass(frozen=True)
class ReadOptions:
    path: str
    checkpoint_id: int | None = None
    operator: str | None = None
    state: str | None = None
    parallelism: int | None = None
    flatten_collections: bool = True
    filter_pushdown: bool | None = None
    operator_state: str | None = None
    read_change_feed: bool = False
    change_start_checkpoint_id: int | None = None
    change_end_checkpoint_id: int | None = None

    def python_filter_pushdown(self) -> bool:
        """Whether the Python readers prune by pushed filters: as asked, else where this
        pyspark scopes a pushed plan to its own query (:mod:`statesource.spark.compat`)."""
        return pushdown_safe_by_default() if self.filter_pushdown is None else self.filter_pushdown

    def jvm_filter_pushdown(self) -> bool:
        """Whether the JVM reader prunes: unless told not to, as it plans every query afresh
        and the pyspark pitfall of the Python readers does not apply."""
        return self.filter_pushdown is not False


_KNOWN = {
    "path": "path",
    "checkpointid": "checkpointId",
    "operator": "operator",
    "state": "state",
    "parallelism": "parallelism",
    "flattencollections": "flattenCollections",
    "filterpushdown": "filterPushdown",
    "operatorstate": "operatorState",
    "readchangefeed": "readChangeFeed",
    "changestartcheckpointid": "changeStartCheckpointId",
    "changeendcheckpointid": "changeEndCheckpointId",
}
_METADATA_KNOWN = {"path": "path", "checkpointid": "checkpointId"}
_USE_A_VIEW = (
    "CREATE TABLE ... USING flinkstate is not supported: Spark passes the OPTIONS when the"
    " table is created but not when it is read. Use CREATE TEMPORARY VIEW <name> USING"
    " flinkstate OPTIONS (path '...', state '...') instead"
)


def parse_read_options(options: Mapping[str, str], *, metadata_view: bool = False) -> ReadOptions:
    """Parse and check ``flinkstate`` options (or, with ``metadata_view``, those of its view)."""
    known = _METADATA_KNOWN if metadata_view else _KNOWN
    lowered = {key.lower(): value for key, value in options.items()}
    if "provider" in lowered and "location" in lowered:  # what the catalog adds for a table
        raise InvalidArgumentError(_USE_A_VIEW)
    unknown = sorted(set(lowered) - set(known))
    if unknown:
        raise InvalidArgumentError(
            f"unknown option(s) {', '.join(unknown)}; known options: {', '.join(known.values())}"
        )
    path = lowered.get("path")
    if not path:
        raise InvalidArgumentError(
            "option path is required: the checkpoint directory or a directory of checkpoints,"
            " e.g. .load('/tmp/checkpoints'). (A table made with CREATE TABLE ... USING loses"
            " its OPTIONS in Spark: " + _USE_A_VIEW.split(": ", 1)[1] + ")"
        )
    return ReadOptions(
        path=path,
        checkpoint_id=_integer(lowered, "checkpointid", minimum=0),
        operator=lowered.get("operator") or None,
        state=lowered.get("state") or None,
        parallelism=_integer(lowered, "parallelism", minimum=1),
        flatten_collections=_boolean(lowered, "flattencollections", default=True),
        filter_pushdown=_boolean(lowered, "filterpushdown", default=None),
        operator_state=lowered.get("operatorstate") or None,
        read_change_feed=_boolean(lowered, "readchangefeed", default=False),
        change_start_checkpoint_id=_integer(lowered, "changestartcheckpointid", minimum=0),
        change_end_checkpoint_id=_integer(lowered, "changeendcheckpointid", minimum=0),
    )


_DECIMAL = re.compile(r"[0-9]{1,19}")


def _integer(options: dict[str, str], key: str, minimum: int) -> int | None:
    """Plain ASCII decimal digits only: Python's ``int`` would also take ``" 3"``,
    ``"1_0"``, ``"+3"`` and other scripts' digits, none of which Spark or Flink would."""
    text = options.get(key)
    if text is None:
        return None
    value = int(text) if _DECIMAL.fullmatch(text) else None
    if value is None or value < minimum:
        raise InvalidArgumentError(
            f"option {_KNOWN[key]} must be an integer >= {minimum}, got {text!r}"
        )
    return value


@overload
def _boolean(options: dict[str, str], key: str, default: bool) -> bool: ...


@overload
def _boolean(options: dict[str, str], key: str, default: None) -> bool | None: ...


def _boolean(options: dict[str, str], key: str, default: bool | None) -> bool | None:
    text = options.get(key)
    if text is None:
        return default
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise InvalidArgumentError(f"option {_KNOWN[key]} must be true or false, got {text!r}")
