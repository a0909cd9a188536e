"""From a Flink 1.x snapshot to a Flink 2.x savepoint: ``statesource migrate``.

Flink 2.0 dropped state compatibility with 1.x, but most state did not change: a keyed-
or operator-state file of 1.17 to 1.20 holds the bytes, and the serializer snapshots, that
2.x writes for the same declared types (the 1.x fixtures' headers are byte for byte what
statesource derives for 2.x: ``tests/flink/serializers``). What 2.x cannot read is Kryo's:
1.x wrote Kryo 2.24 bytes, 2.x reads Kryo 5.6, and a POJO's ``List`` or ``Map`` field was a
Kryo field in 1.x. So a migration plans every state as one of:

* ``bytes``: moved as it is (the operator's files copied, or rewritten when a state of it
  is left out or re-encoded);
* ``re-encoded``: a keyed state with Kryo inside, whose values statesource reads entirely
  (:mod:`~statesource.flink.operations.reencode`): JDK values under Kryo become Kryo 5's
  bytes, a POJO's ``List``, ``Map`` and ``Set`` fields 2.x's collection serializers, with
  the meta info 2.x writes;
* ``unmigratable``: Kryo that cannot be re-encoded exactly (a user class, a custom Kryo
  serializer, Scala, a Kryo key, operator state). Nothing is written unless the caller
  asks to skip such states, and then they are left out and listed.

The output is a canonical savepoint with ``_metadata`` version 6, whose operators carry the
uids the caller gives (a 1.x ``_metadata`` records only their hashes).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from statesource.errors import IncompatibleCheckpointError, InvalidArgumentError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.handles import OperatorSnapshot, operator_id_of
from statesource.flink.layouts.canonical import CanonicalLayout
from statesource.flink.layouts.dispatch import blockers, layout_of
from statesource.flink.operations.reencode import (
    KeptValues,
    ReencodedState,
    collector_paused,
    reencoded_states,
    refusal,
)
from statesource.flink.operations.rescale import CANONICAL_SAVEPOINT_PROPERTIES, SavepointRewrite
from statesource.flink.operations.savepoint_plan import Edit
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.kryo import KRYO_SNAPSHOT
from statesource.flink.serializers.kryo_migration import (
    Kryo2Collection,
    element_class,
    reading_type,
)
from statesource.flink.snapshot.compression import Compression, check_compression
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.publish import SavepointWriter, check_output
from statesource.flink.snapshot.versions import metadata_layout, release_layout
from statesource.flink.statefiles.keyed_header import StateInfo
from statesource.flink.statefiles.operator_state import read_operator_header
from statesource.model import Progress

BYTES, REENCODED, UNMIGRATABLE = "bytes", "re-encoded", "unmigratable"


@dataclass(frozen=True)
class StateMigration:
    """What happens to one state: moved as ``bytes``, ``re-encoded`` (how), or
    ``unmigratable`` and why."""

    operator: str
    state: str | None
    """None for the whole operator (its key serializer cannot migrate)."""
    kind: str
    """``keyed``, ``timers``, ``operator`` (operator state) or ``key`` (the operator's key)."""
    action: str
    reason: str = ""


@dataclass(frozen=True)
class Migration:
    """The plan of a migration and, unless it was a dry run, where it was written."""

    source: str
    output: str | None
    to: str
    states: tuple[StateMigration, ...]
    skipped: bool
    """Whether unmigratable states were left out (otherwise there were none)."""
    seconds: float = 0.0
    compressed: bool = False
    """Whether the keyed-state files written are Snappy-compressed."""

    @property
    def unmigratable(self) -> tuple[StateMigration, ...]:
        return tuple(s for s in self.states if s.action == UNMIGRATABLE)

    def __repr__(self) -> str:
        return (f"Migration(output={self.output!r}, to={self.to!r}, states={len(self.states)},"
                f" unmigratable={len(self.unmigratable)}, seconds={self.seconds:.2f})")


def migrate(source: str | os.PathLike[str], output: str | os.PathLike[str] | None, *,
            to: str = "2.3", uids: Mapping[str, str] | None = None,
            skip_unmigratable: bool = False, dry_run: bool = False,
            checkpoint_id: int | None = None, progress: Progress | None = None,
            compression: Compression | None = None,
            field_types: Mapping[str, str | Sequence[str]] | None = None) -> Migration:
    """Write the Flink 1.x snapshot at ``source`` as a Flink ``to`` savepoint ``output``.

    ``uids`` names operators: ``{hex id: uid}``, each uid checked against the id it must
    hash to (Flink's ``StreamGraphHasherV2``); operators without one get no uid, which
    Flink 2.x does not need to match them (it matches by id). With ``dry_run`` nothing is
    written and ``output`` may be None: the returned plan says what would happen.
    ``compression`` (``"snappy"``, ``"none"``; default: as the source's) is the Snappy
    compression of the savepoint's keyed state. ``field_types`` declares the element classes
    of POJO ``List``, ``Set`` and ``Map`` fields as the job's 2.x POJO does:
    ``{"STATE.FIELD": "String"}``, a map field's ``("String", "Long")``; Flink 1.x's snapshot
    does not record them, and where no value holds one (only empty or null collections) or
    they differ, a field has no 2.x type otherwise.

    Refused, with nothing written: a source that is not a 1.x snapshot, a ``to`` that is
    not a Flink 2.x release, a uid of another hash, an existing ``output``, and, unless
    ``skip_unmigratable``, any state that cannot migrate exactly (the error names each).
    """
    started = time.perf_counter()
    check_compression(compression)
    layout = release_layout(to)
    if layout.flink_major < 2:
        raise InvalidArgumentError(
            f"migrate writes Flink 2.x savepoints; --to {to} is a Flink 1.x release (rescale,"
            " erase and drop keep a 1.x snapshot's version)")
    if output is not None and not dry_run:
        check_output(output)  # refused before the source is even read
    snapshot = FlinkSnapshot.open(os.fspath(source), checkpoint_id=checkpoint_id)
    if output is not None:
        snapshot.check_output_outside(output)
    written_by = metadata_layout(snapshot.metadata.version, str(snapshot.location))
    if written_by.flink_major >= 2:
        raise InvalidArgumentError(
            f"{snapshot.location} was written by {written_by.written_by} already: migrate"
            " reads Flink 1.x snapshots")
    named = _checked_uids(snapshot, uids or {})
    declared = _declared(snapshot, field_types or {})
    planned_states = [state for op in snapshot.operators for state in _plan(snapshot, op)]
    with collector_paused():
        states, staged = _scanned(snapshot, planned_states, progress or (lambda _: None),
                                  KeptValues(0) if dry_run else KeptValues(), declared)
    planned = Migration(str(snapshot.location), None, to, states, skip_unmigratable)
    if planned.unmigratable and not skip_unmigratable and not dry_run:
        raise IncompatibleCheckpointError(
            f"{_states(len(planned.unmigratable))} of {snapshot.location} cannot migrate to"
            f" Flink {to}: " + "; ".join(_described(s) for s in planned.unmigratable)
            + " (see --dry-run; --skip-unmigratable leaves them out)")
    if dry_run:
        return dataclasses.replace(planned, seconds=time.perf_counter() - started)
    if output is None:
        raise InvalidArgumentError("migrate needs an output directory unless it is a dry run")
    report = progress or (lambda _: None)
    edits, dropped = _left_out(snapshot, planned.unmigratable, staged)
    rewrite = SavepointRewrite.plan(snapshot, None, None, edits, dropped,
                                    compression=compression)
    with SavepointWriter(output) as writer, collector_paused():
        operators, _ = rewrite.write(writer, report)
        renamed = tuple(dataclasses.replace(op, uid=named.get(op.operator_id),
                                            name=named.get(op.operator_id))
                        for op in operators)
        metadata = dataclasses.replace(rewrite.metadata(operators), version=layout.version,
                                       operators=renamed)
        if not metadata.properties:  # Flink 1.15 and older record none; 2.x needs them
            metadata = dataclasses.replace(metadata,
                                           properties=CANONICAL_SAVEPOINT_PROPERTIES)
        published = writer.publish(metadata)
    return dataclasses.replace(planned, output=str(published),
                               seconds=time.perf_counter() - started,
                               compressed=rewrite.compressed)


def _checked_uids(snapshot: FlinkSnapshot, uids: Mapping[str, str]) -> dict[str, str]:
    """``{operator id: uid}`` of ``uids``, each uid hashing to its id and naming an operator
    of the snapshot."""
    ids = {op.operator_id for op in snapshot.operators}
    named = {}
    for operator_id, uid in uids.items():
        hashed = operator_id_of(uid)
        if hashed != operator_id.lower():
            raise InvalidArgumentError(
                f"uid {uid!r} hashes to operator id {hashed}, not {operator_id}: Flink 2.x"
                " would not match it to that operator")
        if hashed not in ids:
            raise InvalidArgumentError(
                f"uid {uid!r} (operator id {hashed}) names no operator of {snapshot.location}")
        named[hashed] = uid
    return named


def _declared(snapshot: FlinkSnapshot, field_types: Mapping[str, str | Sequence[str]]
              ) -> dict[str, dict[str, tuple[str, ...]]]:
    """``{state: {field: element classes}}`` of ``field_types``, each naming a POJO
    collection field of a keyed state of the snapshot, with a class for each of its roles
    (a map's key and value, a list's or set's element)."""
    fields: dict[tuple[str, str], Kryo2Collection] = {}
    for op in snapshot.operators:
        header = snapshot.header(op)
        for info in header.states if header is not None else ():
            for nested in reading_type(info.value, "").nested():
                if isinstance(nested, Kryo2Collection):
                    fields[(info.name, nested.field)] = nested
    declared: dict[str, dict[str, tuple[str, ...]]] = {}
    for name, classes in field_types.items():
        state, _, field = name.rpartition(".")
        node = fields.get((state, field))
        if node is None:
            raise InvalidArgumentError(
                f"--field-type {name}: no keyed state of {snapshot.location} has a POJO List,"
                " Set or Map field of that name (STATE.FIELD)" + (
                    f"; those that do: {', '.join(sorted(f'{s}.{f}' for s, f in fields))}"
                    if fields else ""))
        given = (classes,) if isinstance(classes, str) else tuple(classes)
        if len(given) != len(node.roles):
            raise InvalidArgumentError(
                f"--field-type {name}: a {node.java_class} field takes"
                f" {' and '.join(node.roles)} classes, {len(given)} given")
        declared.setdefault(state, {})[field] = tuple(map(element_class, given))
    return declared


def _plan(snapshot: FlinkSnapshot, op: OperatorSnapshot) -> Iterator[StateMigration]:
    """Every state of ``op`` with what becomes of it."""
    reason = snapshot.undecodable(op)
    if reason is not None:
        yield StateMigration(op.label, None, "keyed", UNMIGRATABLE, reason)
        return
    header = snapshot.header(op)
    if header is not None:
        key_reason = _kryo(header.key)
        if key_reason:
            yield StateMigration(op.label, None, "key", UNMIGRATABLE, f"its key is {key_reason}")
            return
        planned = [_state(op, info, "timers" if info.is_timer else "keyed")
                   for info in header.states]
        walls = blockers(header, snapshot.keyed_handles(op))
        stuck = [p.state for p in planned if p.action != BYTES and p.state in walls]
        if stuck:  # a native key group cannot be walked past it to leave it out
            yield StateMigration(
                op.label, None, "keyed", UNMIGRATABLE,
                f"state {stuck[0]!r} cannot move as its bytes, and a native snapshot cannot"
                f" be walked past it to leave it out or re-encode it ({walls[stuck[0]]}); a"
                " canonical 1.x savepoint can")
            return
        yield from planned
    seen: set[str] = set()
    for subtask in op.subtasks:
        for handle in subtask.operator:
            data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
            found = read_operator_header(BinaryReader(data, snapshot.describe(handle.stream)))
            for info in (*found.list_states, *found.broadcast_states):
                if info.name not in seen:
                    seen.add(info.name)
                    yield _state(op, info, "operator")


def _state(op: OperatorSnapshot, info: StateInfo, kind: str) -> StateMigration:
    reason = next((_kryo(s) for s in info.serializers.values() if _kryo(s)), "")
    if not reason:
        return StateMigration(op.label, info.name, kind, BYTES)
    if kind != "keyed":
        return StateMigration(op.label, info.name, kind, UNMIGRATABLE,
                              f"it holds {reason}; statesource re-encodes keyed states only")
    refused = refusal(info)
    if refused:
        return StateMigration(op.label, info.name, kind, UNMIGRATABLE, f"it holds {refused}")
    return StateMigration(op.label, info.name, kind, REENCODED,
                          "its Kryo 2 values are written as Flink 2.x writes them")


def _scanned(snapshot: FlinkSnapshot, states: list[StateMigration], report: Progress,
             budget: KeptValues, declared: Mapping[str, Mapping[str, tuple[str, ...]]]
             ) -> tuple[tuple[StateMigration, ...], dict[str, list[ReencodedState]]]:
    """The plan once every value of the states to re-encode was read: those holding what
    cannot be re-encoded become unmigratable, and so does, whole, an operator whose native
    key groups cannot be walked past a value (a Kryo value of a class statesource does not
    parse, where nothing frames it); the others' staged states, by operator, with what the
    scan decoded kept within ``budget`` for the write."""
    staged: dict[str, list[ReencodedState]] = {}
    refused: dict[tuple[str, str | None], str] = {}
    how: dict[tuple[str, str | None], str] = {}
    walled: dict[str, str] = {}
    for op in snapshot.operators:
        names = {s.state for s in states
                 if s.operator == op.label and s.action == REENCODED and s.state is not None}
        header = snapshot.header(op)
        if not names or header is None:
            continue
        infos = [info for info in header.states if info.name in names]
        report(f"operator {op.label}: reading every value of {', '.join(sorted(names))} to"
               " re-encode")
        try:
            staged[op.label], why, done = reencoded_states(snapshot, op, infos, budget,
                                                           declared)
        except IncompatibleCheckpointError as error:  # the walk itself: a native key group
            native = any(type(layout_of(h)) is not CanonicalLayout
                         for h in snapshot.keyed_handles(op))
            walled[op.label] = str(error) + ("; a canonical 1.x savepoint can migrate"
                                             if native else "")
            continue
        refused.update({(op.label, name): reason for name, reason in why.items()})
        how.update({(op.label, name): text for name, text in done.items()})
    whole = [StateMigration(label, None, "keyed", UNMIGRATABLE, reason)
             for label, reason in walled.items()]
    return (*whole, *(
        dataclasses.replace(s, action=UNMIGRATABLE, reason=refused[(s.operator, s.state)])
        if (s.operator, s.state) in refused else
        dataclasses.replace(s, reason=how[(s.operator, s.state)])
        if (s.operator, s.state) in how else s for s in states if s.operator not in walled)
    ), staged


def _kryo(root: FlinkType) -> str:
    """What in ``root`` is Kryo's (Kryo 2 bytes, which Flink 2.x's Kryo 5 does not read)."""
    for nested in root.nested():
        if nested.serializer == KRYO_SNAPSHOT:
            name = getattr(nested, "java_class", None) or nested.describe()
            where = "" if nested is root else (
                ", inside its values (Flink 1.x gives a POJO's List and Map fields to Kryo)")
            return f"Kryo 2 bytes of {name}{where}, which Flink 2.x (Kryo 5) does not read"
    return ""


def _left_out(snapshot: FlinkSnapshot, unmigratable: tuple[StateMigration, ...],
              staged: Mapping[str, list[ReencodedState]]) -> tuple[list[Edit], list[str]]:
    """The edits that leave the unmigratable states out and stage the re-encoded ones, and
    the operators left out whole."""
    drops: dict[str, list[str]] = {}
    whole: list[str] = []
    for state in unmigratable:
        if state.state is None:
            whole.append(state.operator)
        else:
            drops.setdefault(state.operator, []).append(state.state)
    return ([Edit(label, drops=tuple(drops.get(label, ())), staged=tuple(staged.get(label, ())))
             for label in sorted({*drops, *(k for k, v in staged.items() if v)})
             if label not in whole], whole)


def _states(count: int) -> str:
    return f"{count} state" + ("" if count == 1 else "s")


def _described(state: StateMigration) -> str:
    what = "the operator" if state.state is None else f"{state.kind} state {state.state!r}"
    return f"operator {state.operator!r}, {what}: {state.reason}"
