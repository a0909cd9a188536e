"""``_metadata`` versions: one layout per version, read and written by the same flags.

Every real ``_metadata`` at hand is version 6 and writes back byte for byte
(test_flink_round_trips.py). Here the seam itself: the version picks the layout, each
field that came or went is read and written behind its own flag (a layout without the
operator names or the trailing properties round-trips without them), and a version with
no layout is refused by the reader and the writer, naming it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from statesource.errors import InvalidArgumentError, UnsupportedFormatVersionError
from statesource.flink.snapshot import versions
from statesource.flink.snapshot.metadata import parse_metadata
from statesource.flink.snapshot.metadata_writer import write_metadata
from statesource.flink.snapshot.versions import LAYOUTS, MetadataLayout, metadata_layout

MP256 = (Path(__file__).resolve().parents[2] / "fixtures" / "flink" / "mp256" / "canonical"
         / "_metadata")


def test_each_version_has_one_layout_chosen_by_its_number():
    assert all(layout.version == version for version, layout in LAYOUTS.items())
    assert metadata_layout(6, "x").operator_names and metadata_layout(6, "x").properties
    assert versions.WRITTEN_VERSION == 6
    assert not metadata_layout(4, "x").operator_names and metadata_layout(4, "x").properties
    for unknown, writer in ((2, "Flink 1.10 or older"), (7, "newer than 2.3")):
        with pytest.raises(UnsupportedFormatVersionError, match=f"version {unknown} .*{writer}"):
            metadata_layout(unknown, "the file")


def test_a_layout_without_names_or_properties_reads_and_writes_without_them(monkeypatch):
    real = parse_metadata(MP256.read_bytes(), str(MP256))
    assert real.properties and any(op.uid for op in real.operators)
    monkeypatch.setitem(LAYOUTS, 99, MetadataLayout(99, "a test", operator_names=False,
                                                     properties=False))
    bare = dataclasses.replace(
        real, version=99, properties=b"",
        operators=tuple(dataclasses.replace(op, name=None, uid=None) for op in real.operators))
    data = write_metadata(bare)
    # exactly the names' and the properties' bytes are gone
    named = sum(4 + len((op.name or "").encode()) + len((op.uid or "").encode())
                for op in real.operators)
    assert len(data) == len(write_metadata(real)) - named - len(real.properties)
    assert parse_metadata(data, "bare") == bare
    with pytest.raises(Exception, match="bytes after the last operator"):
        parse_metadata(data + b"\0", "bare")
    with pytest.raises(InvalidArgumentError, match="records no operator name"):
        write_metadata(dataclasses.replace(bare, operators=real.operators))
    with pytest.raises(InvalidArgumentError, match="holds no checkpoint properties"):
        write_metadata(dataclasses.replace(bare, properties=b"\xac\xed"))


def test_a_version_without_a_layout_is_not_written():
    real = parse_metadata(MP256.read_bytes(), str(MP256))
    with pytest.raises(InvalidArgumentError, match="metadata version 5 cannot be written"):
        write_metadata(dataclasses.replace(real, version=5))
