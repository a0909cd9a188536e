"""Avro's logical types exported as the Java classes a Flink job holds, restored by Flink 2.3.

The demo's checkpoint (its ``last_seen`` a ``timestamp-millis``) exports and every state
restores with every key's value equal to what the checkpoint holds; each timestamp class
restores as that class (Flink refuses a savepoint whose serializer is another class's);
dates, times, wall-clock timestamps and decimals, on bytes and on fixed, restore as
``LocalDate``, ``LocalTime``, ``LocalDateTime`` and ``BigDecimal``, alone, as map values
(null ones too) and as a Tuple's fields. What Flink restored is compared with the
checkpoint through Java's ``toString`` of each value, parsed here.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest

from flink_restore import restore, rows_of, values
from statesource.checkpointing import CheckpointWriter
from statesource.cli import main
from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.operations.export import export_flink
from statesource.format.columns import decode_entries
from statesource.format.reader import Checkpoint
from statesource.state.descriptors import MapStateDescriptor, ValueStateDescriptor
from statesource.state.keyed_backend import KeyedStateBackend

DEMO_UID = "user-activity"
TIMESTAMP_SPECS = {"Instant": "Instant", "LocalDateTime": "LocalDateTime",
                   "Timestamp": {"class": "java.sql.Timestamp"}}


def java_datetime(text: str) -> datetime:
    """Java's ``toString`` of an ``Instant`` (aware, UTC), a ``LocalDateTime`` or a
    ``java.sql.Timestamp`` (naive): seconds may be left out, the fraction has 1 to 9 digits."""
    aware = text.endswith("Z")
    base, _, fraction = text.removesuffix("Z").replace(" ", "T").partition(".")
    if base.count(":") == 1:
        base += ":00"
    assert fraction[6:].strip("0") == "", f"{text} has nanoseconds"
    found = datetime.fromisoformat(base) + timedelta(microseconds=int(fraction[:6].ljust(6, "0")))
    return found.replace(tzinfo=timezone.utc) if aware else found


def java_time(text: str) -> time:
    return java_datetime(f"1970-01-01T{text}").time()


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> str:
    output = tmp_path_factory.mktemp("demo") / "checkpoints"
    assert main(["demo", "--events", "3000", "--checkpoint-every", "1000", "--no-spark",
                 "--output", str(output)]) == 0
    return str(output)


def held(checkpoint: str, operator: str) -> dict[str, dict]:
    """What the checkpoint holds: state -> (key or (key, namespace)) -> stored value."""
    opened = Checkpoint.open(checkpoint)
    op = next(meta for meta in opened.metadata.operators if meta.uid == operator)
    found: dict[str, dict] = {}
    for meta in op.keyed_states:
        state = found.setdefault(meta.name, {})
        for table in opened.read_keyed_state(meta.name, operator=operator):
            for key, namespace, stored in decode_entries(op.keyed_key_type, meta.declaration,
                                                         table):
                state[key if namespace is None else (key, namespace)] = stored
    return found


def demo_spec(last_seen: Any) -> dict:
    return {"max_parallelism": 128, "parallelism": 2, "operators": [{
        "uid": DEMO_UID, "key": "String",
        "keyed_states": [
            {"name": "clicks", "kind": "value", "value": "Long"},
            {"name": "recent_pages", "kind": "list", "element": "String"},
            {"name": "page_counts", "kind": "map", "user_key": "String", "user_value": "Long"},
            {"name": "clicks_per_minute", "kind": "reducing", "value": "Long",
             "namespace": "Long"},
            {"name": "last_seen", "kind": "value", "value": last_seen, "ttl": True}],
        "operator_states": [{"name": "source_offset", "mode": "split", "element": "Long"}]}]}


def check_demo(rows: list[dict], checkpoint: str, utc: bool) -> None:
    """Every state Flink restored equals the checkpoint's, key by key; ``utc``: the
    timestamps restored as instants (aware), else as UTC wall-clock times."""
    expected = held(checkpoint, DEMO_UID)
    assert values(rows, DEMO_UID, "clicks") == expected["clicks"]
    assert values(rows, DEMO_UID, "recent_pages") == expected["recent_pages"]
    assert values(rows, DEMO_UID, "page_counts") == {
        key: [[page, n] for page, n in sorted(counts.items())]
        for key, counts in expected["page_counts"].items()}
    assert values(rows, DEMO_UID, "clicks_per_minute") == expected["clicks_per_minute"]
    last_seen = {row["key"]: (java_datetime(row["value"]), row["ttlTimestamp"])
                 for row in rows_of(rows, DEMO_UID, "last_seen", "value")}
    assert last_seen == {key: (seen if utc else seen.replace(tzinfo=None), ttl)
                         for key, (seen, ttl) in expected["last_seen"].items()}
    assert len(last_seen) == Checkpoint.open(checkpoint).operator(DEMO_UID).keyed_state(
        "last_seen").entries > 0
    offsets = [v for row in rows_of(rows, DEMO_UID, "source_offset", "split")
               for v in row["value"]]
    assert sorted(offsets) == sorted(v for share in Checkpoint.open(checkpoint)
                                     .read_operator_state("source_offset") for v in share)


def test_the_demo_checkpoint_restores_every_state_with_instants(demo, tmp_path):
    done = export_flink(demo, tmp_path / "savepoint")
    assert sorted(done.operators[0].states) == [
        "clicks", "clicks_per_minute", "last_seen", "page_counts", "recent_pages"]
    check_demo(restore(tmp_path / "savepoint", demo_spec("Instant")), demo, utc=True)


@pytest.mark.parametrize("chosen", list(TIMESTAMP_SPECS))
def test_each_timestamp_class_restores_as_that_class(demo, tmp_path, monkeypatch, chosen):
    monkeypatch.setenv("TZ", "UTC")  # java.sql.Timestamp prints in the JVM's time zone
    output = tmp_path / "savepoint"
    assert main(["export-flink", demo, "--output", str(output), "--timestamp-class",
                 chosen]) == 0
    check_demo(restore(output, demo_spec(TIMESTAMP_SPECS[chosen])), demo,
               utc=chosen == "Instant")


def test_another_timestamp_class_is_one_clean_error_writing_nothing(demo, tmp_path, capsys):
    output = tmp_path / "savepoint"
    assert main(["export-flink", demo, "--output", str(output), "--timestamp-class",
                 "ZonedDateTime"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "'ZonedDateTime'" in err and "LocalDateTime, Instant, Timestamp" in err
    with pytest.raises(InvalidArgumentError, match="'java.time.Instant'"):
        export_flink(demo, output, timestamp_class="java.time.Instant")
    assert not output.exists()


MONEY = {"type": "fixed", "name": "Money", "size": 16, "logicalType": "decimal",
         "precision": 30, "scale": 2}
PARTS = {"type": "record", "name": "Parts", "fields": [
    {"name": "f0", "type": ["null", {"type": "int", "logicalType": "date"}]},
    {"name": "f1", "type": ["null", {"type": "int", "logicalType": "time-millis"}]},
    {"name": "f2", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
    {"name": "f3", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
    {"name": "f4", "type": ["null", {"type": "bytes", "logicalType": "decimal",
                                     "precision": 12, "scale": 3}]}]}
DAYS = [date(2024, 2, 29), date(1, 1, 1), date(9999, 12, 31), date(1969, 12, 31)]
TIMES = [time(0, 0), time(23, 59, 59, 999000), time(12, 30, 0, 5000)]
MOMENTS = [datetime(1969, 12, 31, 23, 59, 59, 999999), datetime(2024, 2, 29, 12, 0),
           datetime(1, 1, 1), datetime(2038, 1, 19, 3, 14, 8, 123456)]
AMOUNTS = [Decimal("0.0000"), Decimal("-1.5000"), Decimal("123456.7891"),
           Decimal("-99999999.9999")]
PRICES = [Decimal("0.00"), Decimal("10.00"), Decimal("-0.01"), Decimal("4503599627370495.99")]


def _logical_checkpoint(root) -> str:
    backend = KeyedStateBackend("string", 128)
    states = {
        "day": backend.get_state(ValueStateDescriptor("day", {"type": "int",
                                                              "logicalType": "date"})),
        "at": backend.get_state(ValueStateDescriptor("at", {"type": "long",
                                                            "logicalType": "time-micros"})),
        "wall": backend.get_state(ValueStateDescriptor("wall", {
            "type": "long", "logicalType": "local-timestamp-millis"})),
        "amount": backend.get_state(ValueStateDescriptor("amount", {
            "type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 4})),
        "price": backend.get_state(MapStateDescriptor("price", "string", ["null", MONEY])),
        "parts": backend.get_state(ValueStateDescriptor("parts", PARTS)),
    }
    for i in range(4):
        backend.set_current_key(f"k{i}")
        states["day"].update(DAYS[i])
        states["at"].update(TIMES[i % 3])
        states["wall"].update(MOMENTS[i].replace(microsecond=MOMENTS[i].microsecond // 1000
                                                 * 1000))
        states["amount"].update(AMOUNTS[i])
        states["price"].put("now", PRICES[i])
        states["price"].put("none", None)
        states["parts"].update({"f0": DAYS[i], "f1": TIMES[i % 3].replace(microsecond=0),
                                "f2": MOMENTS[i],
                                "f3": MOMENTS[i].replace(tzinfo=timezone.utc),
                                "f4": Decimal(i) / 8})
    with CheckpointWriter(str(root)) as writer:
        writer.write(1, {"logical": [backend]})
    return str(root)


LOGICAL_SPEC = {"max_parallelism": 128, "operators": [{
    "uid": "logical", "key": "String", "keyed_states": [
        {"name": "day", "kind": "value", "value": "LocalDate"},
        {"name": "at", "kind": "value", "value": "LocalTime"},
        {"name": "wall", "kind": "value", "value": "LocalDateTime"},
        {"name": "amount", "kind": "value", "value": "BigDecimal"},
        {"name": "price", "kind": "map", "user_key": "String", "user_value": "BigDecimal"},
        {"name": "parts", "kind": "value", "value": {"tuple": [
            "LocalDate", "LocalTime", "LocalDateTime", "Instant", "BigDecimal"]}}]}]}


def _decimal(restored: Any) -> Decimal | None:
    """A ``BigDecimal`` as the harness dumps it: a JSON number (Python's float or int)."""
    return None if restored is None else Decimal(repr(restored))


def test_dates_times_and_decimals_restore_as_their_java_classes(tmp_path):
    checkpoint = _logical_checkpoint(tmp_path / "checkpoints")
    export_flink(checkpoint, tmp_path / "savepoint")
    rows = restore(tmp_path / "savepoint", LOGICAL_SPEC)
    expected = held(checkpoint, "logical")
    assert {k: date.fromisoformat(v) for k, v in values(rows, "logical", "day").items()} == \
        expected["day"]
    assert {k: java_time(v) for k, v in values(rows, "logical", "at").items()} == expected["at"]
    assert {k: java_datetime(v) for k, v in values(rows, "logical", "wall").items()} == \
        expected["wall"]
    assert {k: _decimal(v) for k, v in values(rows, "logical", "amount").items()} == \
        expected["amount"]
    # a price has more digits than a double (the harness's JSON number): compared as one
    assert {k: {name: None if v is None else float(v) for name, v in pairs}
            for k, pairs in values(rows, "logical", "price").items()} == {
        k: {name: None if v is None else float(v) for name, v in prices.items()}
        for k, prices in expected["price"].items()}
    parsers = (date.fromisoformat, java_time, java_datetime, java_datetime, _decimal)
    assert {k: {f"f{i}": None if v is None else parse(v)
                for i, (parse, v) in enumerate(zip(parsers, parts))}
            for k, parts in values(rows, "logical", "parts").items()} == {
        k: {f"f{i}": parts.get(f"f{i}") for i in range(5)}
        for k, parts in expected["parts"].items()}


def test_uuids_are_refused_naming_the_string_they_can_be(tmp_path):
    backend = KeyedStateBackend("string", 128)
    backend.get_state(ValueStateDescriptor("id", {"type": "string", "logicalType": "uuid"}))
    with CheckpointWriter(str(tmp_path / "checkpoints")) as writer:
        writer.write(1, {"ids": [backend]})
    with pytest.raises(TypeMismatchError, match=r"operator 'ids'.*state 'id'.*logical type"
                                                r" 'uuid'.*Kryo.*\{\"type\": \"string\"\}"):
        export_flink(tmp_path / "checkpoints", tmp_path / "savepoint")
    assert not (tmp_path / "savepoint").exists()
