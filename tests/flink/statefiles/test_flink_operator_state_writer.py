"""The operator-state writer reproduces real Flink 2.3 operator-state files byte for byte.

Every operator-state file of the real snapshots at hand (split, union and
broadcast states; uncompressed and Snappy-compressed) is read and written back:
the header from its meta infos, each state's elements re-encoded from the values
the reader decodes; the whole file and its handle's offsets must be the ones
Flink wrote. A compressed file's chunks are kept as stored (statesource does not
compress), and their decompressed bytes must be the re-encoded elements.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flink_snapshots import only
from statesource.errors import InvalidArgumentError, TypeMismatchError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.snappy import unframe
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.operator_state import (
    decode_pieces,
    read_operator_header,
    read_piece,
)
from statesource.flink.statefiles.operator_state_writer import (
    StatePieces,
    assemble_operator_file,
    broadcast_state_info,
    encode_broadcast,
    encode_elements,
    list_state_info,
    mode_of,
    operator_state_info,
    write_operator_file,
    write_operator_header,
)
from statesource.model import DistributionMode
from statesource.schema import ValueSchema

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
SNAPSHOTS = ["fixture:mp256/canonical", "fixture:mp256/native", "fixture:mp128-snappy/canonical",
             "fixture:mp128-snappy/native", "shared:java/canonical/savepoint-*",
             "shared:java/native/savepoint-*"]


def _directory(name: str) -> Path:
    where, pattern = name.split(":", 1)
    return only(pattern) if where == "shared" else FIXTURES / pattern


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_operator_state_files_are_written_back_byte_for_byte(name):
    snapshot = FlinkSnapshot.open(str(_directory(name)))
    modes = set()
    files = 0
    for op in snapshot.operators:
        for subtask in op.subtasks:
            for handle in subtask.operator:
                files += 1
                source = snapshot.describe(handle.stream)
                data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
                header = read_operator_header(BinaryReader(data, source))
                written = write_operator_header(header.list_states, header.broadcast_states,
                                                header.compressed)
                assert written == data[:header.data_start]
                infos = {i.name: i for i in header.list_states + header.broadcast_states}
                bounds = sorted({o for s in handle.states for o in s.offsets} | {len(data)})
                # the file holds the states in the order of their first offsets
                ordered = sorted(handle.states,
                                 key=lambda s: s.offsets[0] if s.offsets else len(data))
                pieces = []
                for state in ordered:
                    info = infos[state.name]
                    assert mode_of(info) is state.mode
                    modes.add(state.mode)
                    readers = [read_piece(data, source, o, bounds, header.compressed)
                               for o in state.offsets]
                    value = decode_pieces(readers, info, state.mode)
                    if state.mode is DistributionMode.BROADCAST:
                        encoded = [encode_broadcast(info, value)]
                    else:
                        encoded = encode_elements(info, value)
                    stored = [data[o:next(b for b in bounds if b > o)] for o in state.offsets]
                    if header.compressed:
                        assert [unframe(s, source) for s in stored] == encoded
                        pieces.append(StatePieces(state.name, state.mode, tuple(stored)))
                    else:
                        assert stored == encoded
                        pieces.append(StatePieces(state.name, state.mode, tuple(encoded)))
                whole, offsets = assemble_operator_file(written, pieces, header.compressed)
                assert whole == data
                assert sorted(offsets, key=lambda s: s.name) == sorted(handle.states,
                                                                       key=lambda s: s.name)
    assert files
    if name.startswith("fixture:"):
        assert modes == {DistributionMode.SPLIT_DISTRIBUTE, DistributionMode.UNION,
                         DistributionMode.BROADCAST}


def _string_type():
    data = FlinkSnapshot.open(str(FIXTURES / "mp256/canonical"))
    for op in data.operators:
        for subtask in op.subtasks:
            for handle in subtask.operator:
                d = data.read_bytes(handle.stream, 0, handle.stream.size)
                header = read_operator_header(BinaryReader(d, "x"))
                for info in header.list_states:
                    if info.name == "subtasks":
                        return info.serializers["VALUE_SERIALIZER"]
    raise AssertionError("no string state")


def test_written_file_reads_back(tmp_path):
    schemas = {"element": ValueSchema.parse("long")}
    split = operator_state_info("seen", DistributionMode.SPLIT_DISTRIBUTE, schemas)
    union = operator_state_info("names", DistributionMode.UNION,
                                {"element": ValueSchema.parse("string")})
    rules = operator_state_info("rules", DistributionMode.BROADCAST,
                                {"user_key": ValueSchema.parse("string"),
                                 "user_value": ValueSchema.parse(["null", "long"])})
    for compressed in (False, True):
        data, offsets = write_operator_file([(split, [1, 2, 3]), (union, [])],
                                            [(rules, {"a": 1, "b": 2})], compressed)
        header = read_operator_header(BinaryReader(data, "written"))
        assert header.compressed is compressed
        assert [i.name for i in header.list_states] == ["seen", "names"]
        assert [o.offsets for o in offsets][1] == ()
        bounds = sorted({o for s in offsets for o in s.offsets} | {len(data)})
        got = {}
        for state in offsets:
            info = {i.name: i for i in header.list_states + header.broadcast_states}[state.name]
            got[state.name] = decode_pieces(
                [read_piece(data, "written", o, bounds, compressed) for o in state.offsets],
                info, state.mode)
        assert got == {"seen": [1, 2, 3], "names": [], "rules": {"a": 1, "b": 2}}


def test_refusals():
    string = _string_type()
    with pytest.raises(InvalidArgumentError):
        list_state_info("x", DistributionMode.BROADCAST, string)
    info = list_state_info("x", DistributionMode.UNION, string)
    with pytest.raises(TypeMismatchError, match="element 1"):
        encode_elements(info, ["a", 5])
    with pytest.raises(InvalidArgumentError, match="named twice"):
        write_operator_file([(info, []), (info, [])], [])
    with pytest.raises(InvalidArgumentError, match="backend type"):
        write_operator_header([broadcast_state_info("b", string, string)], [])
    with pytest.raises(TypeMismatchError, match="operator state 'e'"):
        operator_state_info("e", DistributionMode.UNION,
                            {"element": ValueSchema.parse({"type": "enum", "name": "E",
                                                           "symbols": ["A"]})})
