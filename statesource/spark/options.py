"""Options of the ``flinkstate`` sources: parsed, typed and checked up front.

Spark hands a data source its options as a case-insensitive dict of strings.
Each one is parsed here once, and a misspelt or malformed option is an error
naming it and what was expected; silently ignoring it would read the wrong
state.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from statesource.checks import json_object_argument
from statesource.errors import InvalidArgumentError, StateSourceError
from statesource.flink.serializers.mapping import PojoClass, pojo_classes
from statesource.model import StateKind
from statesource.spark.compat import pushdown_safe_by_default
from statesource.types import DataType, key_type, parse_type

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
_STATESTORE_NAMES = {
    "batchid": "checkpointId",
    "operatorid": "operator",
    "storename": "state",
    "statevarname": "state",
    "changestartbatchid": "changeStartCheckpointId",
    "changeendbatchid": "changeEndCheckpointId",
    "flattencollectiontypes": "flattenCollections",
}
"""Options of Spark's own state reader (``format("statestore")``), by their lower-cased
form, and what this source calls the same thing: a user who knows that reader is told."""
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
            f"unknown option(s) {', '.join(_named(o, known) for o in unknown)}; known options:"
            f" {', '.join(known.values())}")
    path = lowered.get("path")
    if not path:
        raise InvalidArgumentError(
            "option path is required: the checkpoint directory or a directory of checkpoints,"
            " e.g. .load('/tmp/checkpoints'). (A table made with CREATE TABLE ... USING loses"
            " its OPTIONS in Spark: " + _USE_A_VIEW.split(": ", 1)[1] + ")"
        )
    return ReadOptions(
        path=path,
        checkpoint_id=_integer(lowered, "checkpointid", 0),
        operator=lowered.get("operator") or None,
        state=lowered.get("state") or None,
        parallelism=_integer(lowered, "parallelism", 1),
        flatten_collections=_boolean(lowered, "flattencollections", default=True),
        filter_pushdown=_boolean(lowered, "filterpushdown", default=None),
        operator_state=lowered.get("operatorstate") or None,
        read_change_feed=_boolean(lowered, "readchangefeed", default=False),
        change_start_checkpoint_id=_integer(lowered, "changestartcheckpointid", 0),
        change_end_checkpoint_id=_integer(lowered, "changeendcheckpointid", 0),
    )


def _named(option: str, known: Mapping[str, str]) -> str:
    """An unknown option as the message names it: with this source's name for it, when it is
    an option of Spark's ``statestore`` reader that this one has (``known``)."""
    ours = _STATESTORE_NAMES.get(option)
    if ours is None or ours not in known.values():
        return option
    return f"{option} (Spark's statestore option; here: {ours})"


_DECIMAL = re.compile(r"[0-9]{1,19}")


def _integer(options: Mapping[str, str], key: str, minimum: int,
             names: Mapping[str, str] = _KNOWN) -> int | None:
    """Plain ASCII decimal digits only, at most 19 (a Java long): Python's ``int`` would also
    take ``" 3"``, ``"1_0"``, ``"+3"`` and other scripts' digits, none of which Spark or
    Flink would. ``names`` gives the option's name for the message."""
    text = options.get(key)
    if text is None:
        return None
    value = int(text) if _DECIMAL.fullmatch(text) else None
    if value is None or value < minimum:
        raise InvalidArgumentError(
            f"option {names[key]} must be an integer >= {minimum}, got {text!r}"
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


_WRITE_KNOWN = {name.lower(): name for name in (
    "path", "output", "operator", "state", "baseCheckpointId", "checkpointId", "kind", "keyType",
    "namespaceType", "maxParallelism", "parallelism", "valueSchemas", "orderColumn",
    "pojoClasses", "flinkVersion", "compression")}
"""Write options, by their lower-cased form (Spark lower-cases option names)."""
CHECKPOINT_OPTIONS = ("path", "output", "baseCheckpointId", "checkpointId", "pojoClasses",
                      "flinkVersion", "compression")
"""Options of a whole write (the new checkpoint), not of one state in it."""


@dataclass(frozen=True)
class WriteOptions:
    """The options of a ``flinkstate`` write, parsed and typed once.

    ``given`` keeps each option as the caller wrote it, by its camelCase name:
    which were given, and their text for messages.
    """

    given: Mapping[str, str] = field(default_factory=dict)
    path: str | None = None
    output: str | None = None
    """A new Flink savepoint directory: the write's target when given (see
    :func:`statesource.sources.open_target`)."""
    operator: str | None = None
    state: str | None = None
    base_checkpoint_id: int | None = None
    checkpoint_id: int | None = None
    kind: StateKind | None = None
    key_type: DataType | None = None
    namespace_type: DataType | None = None
    max_parallelism: int | None = None
    parallelism: int | None = None
    value_schemas: Mapping[str, Any] = field(default_factory=dict)
    order_column: str | None = None
    pojos: Mapping[str, PojoClass] = field(default_factory=dict)
    """The Java classes of records that are POJOs in a new Flink savepoint (the
    ``pojoClasses`` option: the whole savepoint's, as its states share the job's classes)."""
    flink_version: str | None = None
    """The Flink release (``flinkVersion``, e.g. ``"1.20"``) a savepoint made from nothing is
    for; one derived from a Flink snapshot is for that snapshot's."""
    compression: str | None = None
    """A new Flink savepoint's Snappy compression (``snappy``, ``none``; default: as the
    snapshot it derives from; :mod:`statesource.flink.snapshot.compression`)."""
    keywords: bool = False
    """Whether the options came as a Python call's keyword arguments
    (:func:`state_write_options`): messages then name them as the caller wrote them."""

    def named(self, option: str) -> str:
        """How a message names ``option`` (camelCase): as the caller gave it."""
        if self.keywords:
            return next(name for name, known in STATE_KEYWORDS.items() if known == option)
        return f"option {option}"

    def without_checkpoint_options(self) -> WriteOptions:
        """These options less ``baseCheckpointId``, ``checkpointId``, ``pojoClasses``,
        ``flinkVersion`` and ``compression``, taken by the caller for the whole write."""
        given = {k: v for k, v in self.given.items() if k not in
                 ("baseCheckpointId", "checkpointId", "pojoClasses", "flinkVersion",
                  "compression")}
        return dataclasses.replace(self, given=given, base_checkpoint_id=None,
                                   checkpoint_id=None, pojos={}, flink_version=None,
                                   compression=None)

    def with_state(self, operator: str, state: str) -> WriteOptions:
        """These options for keyed state ``state`` of ``operator``."""
        return dataclasses.replace(self, given={**self.given, "operator": operator,
                                                "state": state},
                                   operator=operator, state=state)


def parse_write_options(options: Mapping[str, object]) -> WriteOptions:
    """Parse and check write options (Python callers may pass ints); unknown ones are an
    error naming them."""
    lowered = {key.lower(): str(value) for key, value in options.items()}
    unknown = sorted(set(lowered) - set(_WRITE_KNOWN))
    if unknown:
        raise InvalidArgumentError(
            f"unknown write option(s) {', '.join(unknown)}; known options:"
            f" {', '.join(_WRITE_KNOWN.values())}")
    given = {_WRITE_KNOWN[key]: value for key, value in lowered.items()}
    return WriteOptions(
        given=given,
        path=given.get("path") or None,
        output=given.get("output") or None,
        operator=given.get("operator") or None,
        state=given.get("state") or None,
        base_checkpoint_id=_integer(lowered, "basecheckpointid", 0, _WRITE_KNOWN),
        checkpoint_id=_integer(lowered, "checkpointid", 0, _WRITE_KNOWN),
        kind=_state_kind(given.get("kind")),
        key_type=_typed(given, "keyType", key_type),
        namespace_type=_typed(given, "namespaceType", parse_type),
        max_parallelism=_integer(lowered, "maxparallelism", 1, _WRITE_KNOWN),
        parallelism=_integer(lowered, "parallelism", 1, _WRITE_KNOWN),
        value_schemas=_value_schemas(given.get("valueSchemas")),
        order_column=given.get("orderColumn") or None,
        pojos=pojo_classes(given["pojoClasses"], "option pojoClasses")
        if "pojoClasses" in given else {},
        flink_version=given.get("flinkVersion") or None,
        compression=given.get("compression") or None,
    )


def _state_kind(text: str | None) -> StateKind | None:
    if text is None:
        return None
    try:
        return StateKind(text)
    except ValueError:
        raise InvalidArgumentError(
            f"option kind must be one of {', '.join(k.value for k in StateKind)},"
            f" got {text!r}") from None


def _typed(given: Mapping[str, str], option: str,
           parse: Callable[[str], DataType]) -> DataType | None:
    text = given.get(option)
    if text is None:
        return None
    try:
        return parse(text)
    except StateSourceError as error:
        raise type(error)(f"option {option}: {error}") from None


def _value_schemas(text: str | None) -> Mapping[str, Any]:
    if text is None:
        return {}
    return json_object_argument(text, "option valueSchemas", "role -> Avro schema")


STATE_KEYWORDS = {"kind": "kind", "key_type": "keyType", "namespace_type": "namespaceType",
                  "max_parallelism": "maxParallelism", "parallelism": "parallelism",
                  "value_schemas": "valueSchemas", "order_column": "orderColumn"}
"""The keyword arguments of a state write in Python (``write_state``, ``Rewrite.replace``)
and the write option each one is: Python's names are snake_case, Spark's ``.option()``
names camelCase, and both go through one parser."""


def state_write_options(**keywords: object) -> WriteOptions:
    """The options of a state write given as :data:`STATE_KEYWORDS` (None: not given), parsed
    and checked as their ``.option()`` forms are, so both spellings mean the same."""
    try:
        parsed = parse_write_options({STATE_KEYWORDS[name]: _option_text(value)
                                      for name, value in keywords.items() if value is not None})
    except StateSourceError as error:
        message = str(error)
        for name, option in STATE_KEYWORDS.items():
            message = message.replace(f"option {option}", name)
        raise type(error)(message) from None
    return dataclasses.replace(parsed, keywords=True)


def _option_text(value: object) -> str:
    """A keyword's value as the text of its option: a type by its name, a kind by its value,
    value schemas as JSON."""
    if isinstance(value, StateKind):
        return value.value
    if isinstance(value, DataType):
        return value.name
    if isinstance(value, Mapping):
        return json.dumps(value)
    return str(value)
