"""A corrupt Kryo value in a 1.x savepoint refuses the migration, naming its file; nothing written.

The ``kryo`` fixture's ``uuids`` operator holds ``UUID`` values as Flink 1.20 wrote them:
class id 82 (``0x54``), the reference marker of a new object (``0x01``), two varlongs. One
marker is made ``0x00`` (a null reference after a class, which Kryo never writes).
"""

from __future__ import annotations

import shutil

import pytest

from flink_fixture_checks import FIXTURES
from statesource.errors import CorruptCheckpointError
from statesource.flink.handles import operator_id_of
from statesource.flink.operations.migrate import migrate
from statesource.flink.snapshot.directory import FlinkSnapshot


def test_a_corrupt_kryo_value_refuses_the_migration(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(FIXTURES / "kryo" / "flink-1.20" / "canonical", source)
    snapshot = FlinkSnapshot.open(str(source))
    (op,) = [o for o in snapshot.operators if o.operator_id == operator_id_of("uuids")]
    handle = snapshot.keyed_handles(op)[0]
    path = source / handle.stream.path
    data = bytearray(path.read_bytes())
    at = data.index(b"\x54\x01", snapshot.handle_header(op, handle).data_start)
    data[at + 1] = 0
    path.write_bytes(bytes(data))
    output = tmp_path / "out"
    for dry_run in (True, False):
        with pytest.raises(CorruptCheckpointError,
                           match=rf"{handle.stream.path} \(key group \d+\), operator .*,"
                                 r" state 'last_uuid', in a value: a null reference after a"
                                 r" class at byte offset 1"):
            migrate(str(source), None if dry_run else str(output), dry_run=dry_run,
                    skip_unmigratable=True)
    assert not output.exists()
