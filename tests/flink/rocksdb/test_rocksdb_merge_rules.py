"""Merging a column family's tables: versions resolved newest first agree with the writes
replayed oldest first, however the versions are spread over tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statesource.errors import CorruptCheckpointError, UnsupportedFormatVersionError
from statesource.flink.rocksdb import Entry, RangeTombstone, keys, merged_entries
from statesource.flink.rocksdb.merge import Tombstones

KEYS = [b"", b"a", b"a\x00", b"ab", b"b", b"\xff"]


@dataclass
class Table:
    """What merging asks of a table, in memory: its versions and range deletions."""

    versions: list[Entry] = field(default_factory=list)
    tombstones: list[RangeTombstone] = field(default_factory=list)
    bytewise: bool = True
    source: str = "t.sst"

    def entries(self):
        return iter(sorted(self.versions, key=lambda e: (e[0], -e[1])))

    def range_deletions(self):
        return self.tombstones


write = st.one_of(
    st.tuples(st.sampled_from(["put", "merge"]), st.sampled_from(KEYS), st.binary(max_size=4)),
    st.tuples(st.sampled_from(["delete", "single_delete"]), st.sampled_from(KEYS)),
    st.tuples(st.just("delete_range"), st.sampled_from(KEYS), st.sampled_from(KEYS)),
)
KINDS = {"put": keys.VALUE, "merge": keys.MERGE, "delete": keys.DELETION,
         "single_delete": keys.SINGLE_DELETION}


def replayed(writes) -> dict[bytes, bytes]:
    """The writes applied in order, as Flink's list state sees them."""
    state: dict[bytes, bytes] = {}
    for op, key, *rest in writes:
        if op == "put":
            state[key] = rest[0]
        elif op == "merge":
            state[key] = rest[0] if key not in state else state[key] + b"," + rest[0]
        elif op == "delete_range":
            for gone in [k for k in state if key <= k < rest[0]]:
                del state[gone]
        else:
            state.pop(key, None)
    return state


@settings(max_examples=500, deadline=None)
@given(st.lists(write, max_size=40), st.integers(1, 4), st.data())
def test_newest_first_resolution_is_replay_in_order(writes, table_count, data):
    tables = [Table() for _ in range(table_count)]
    for sequence, (op, key, *rest) in enumerate(writes, start=1):
        table = tables[data.draw(st.integers(0, table_count - 1))]
        if op == "delete_range":
            table.tombstones.append(RangeTombstone(key, rest[0], sequence))
        else:
            table.versions.append((key, sequence, KINDS[op], rest[0] if rest else b""))
    assert list(merged_entries(tables)) == sorted(replayed(writes).items())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(KEYS), st.integers(1, 50)),
                max_size=8), st.sampled_from(KEYS + [b"0", b"a\x01", b"zz"]))
def test_fragmented_range_deletions_give_the_newest_covering_one(tombstones, key):
    expected = max((sequence for start, end, sequence in tombstones if start <= key < end),
                   default=0)
    assert Tombstones(RangeTombstone(*t) for t in tombstones).covering(key) == expected


def test_operands_append_oldest_first_over_the_newest_value():
    older = Table([(b"k", 1, keys.VALUE, b"a"), (b"k", 3, keys.MERGE, b"c")])
    newer = Table([(b"k", 2, keys.MERGE, b"b"), (b"k", 4, keys.MERGE, b"")])
    assert list(merged_entries([newer, older])) == [(b"k", b"a,b,c,")]
    deleted = Table([(b"k", 5, keys.DELETION, b""), (b"k", 6, keys.MERGE, b"d")])
    assert list(merged_entries([newer, older, deleted])) == [(b"k", b"d")]


def test_two_versions_with_one_sequence_number_are_corrupt():
    tables = [Table([(b"k", 7, keys.VALUE, b"a")], source="x.sst"),
              Table([(b"k", 7, keys.MERGE, b"b")], source="y.sst")]
    with pytest.raises(CorruptCheckpointError, match="x.sst, y.sst: two versions of key b'k'"):
        list(merged_entries(tables))


def test_tables_in_another_order_than_bytewise_are_refused():
    class Reversed(Table):
        properties = type("P", (), {"comparator": "rocksdb.ReverseBytewiseComparator"})

    with pytest.raises(UnsupportedFormatVersionError, match="ReverseBytewiseComparator"):
        merged_entries([Reversed(bytewise=False)])
