"""Everything on disk is untrusted: each malformed checkpoint is refused with a clear error.

Every case starts from a real checkpoint and breaks one thing in it, as a crash, a
bad copy, another tool or a hostile user could. The reader must refuse it with a
:class:`StateSourceError` naming the problem, before reading data it cannot
vouch for, and never answer with different rows.
"""

from __future__ import annotations

import copy
import json
import os
import pathlib
import zlib
from collections.abc import Callable

import pytest

from fifos import fifo_in_place_of, opened_without_hanging
from sample_state import KEYS, populate
from statesource.checkpointing import CheckpointWriter, SubtaskBackends
from statesource.errors import (
    CheckpointNotFoundError,
    CorruptCheckpointError,
    InvalidArgumentError,
    StateSourceError,
    UnsupportedFormatVersionError,
)
from statesource.format import Checkpoint
from statesource.format import keyed_state_meta as keyed_state_meta_module
from statesource.format import metadata as metadata_module
from statesource.keygroups import assign_to_key_group, key_group_range_for_operator
from statesource.state.clock import ManualClock
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend
from statesource.types import STRING


def write_checkpoint(root: pathlib.Path, checkpoint_id: int = 1) -> None:
    """Two subtasks of operator ``op`` (every keyed state kind, one split operator state)."""
    clock = ManualClock(5_000)
    subtasks = []
    for index in range(2):
        owned = key_group_range_for_operator(128, 2, index)
        keyed = KeyedStateBackend("string", 128, owned, clock=clock)
        populate(keyed, [k for k in KEYS if assign_to_key_group(k, STRING, 128) in owned])
        operator = OperatorStateBackend()
        operator.get_list_state("offsets", "long").update([index, 10 + index])
        subtasks.append(SubtaskBackends(keyed=keyed, operator=operator))
    CheckpointWriter(str(root)).write(checkpoint_id, {"op": subtasks})


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("pristine")
    write_checkpoint(root)
    return root


@pytest.fixture
def root(pristine, tmp_path) -> pathlib.Path:
    """A private copy of the pristine checkpoint, free to break."""
    copied = tmp_path / "root"
    copied.mkdir()
    for path in pristine.rglob("*"):
        target = copied / path.relative_to(pristine)
        if path.is_dir():
            target.mkdir(exist_ok=True)
        else:
            target.write_bytes(path.read_bytes())
    return copied


def everything(checkpoint: Checkpoint) -> dict:
    """Every row of every state, as plain Python values."""
    rows = {}
    for op in checkpoint.metadata.operators:
        for state in op.keyed_states:
            rows[state.name] = [t.to_pylist() for t in checkpoint.read_keyed_state(state.name)]
        for op_state in op.operator_states:
            rows[op_state.name] = checkpoint.read_operator_state(op_state.name)
    return rows


def metadata_path(root: pathlib.Path, checkpoint_id: int = 1) -> pathlib.Path:
    return root / f"chk-{checkpoint_id}" / "_metadata.json"


def edit_metadata(root: pathlib.Path, change: Callable[[dict], object]) -> None:
    path = metadata_path(root)
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))


def op(document: dict) -> dict:
    return document["operators"][0]


def keyed(document: dict, name: str = "value") -> dict:
    return next(s for s in op(document)["keyedStates"] if s["name"] == name)


def first_file(document: dict, name: str = "value") -> dict:
    return keyed(document, name)["files"][0]


def offsets_state(document: dict) -> dict:
    return op(document)["operatorStates"][0]


def _set(getter: Callable[[dict], dict], field: str, value: object) -> Callable[[dict], None]:
    return lambda document: getter(document).__setitem__(field, value)


def _set_index(field: str, index: int, value: object) -> Callable[[dict], None]:
    return lambda document: first_file(document)["keyGroups"][field].__setitem__(index, value)


def _relabel_a_key_group(document: dict) -> None:
    """Give a recorded range the number of the next key group, which holds no rows (its
    checksum still matches, and the order stays ascending)."""
    data_file = first_file(document)
    groups = data_file["keyGroups"]["keyGroup"]
    bounds = [*groups[1:], data_file["keyGroupEnd"] + 1]
    index = next(i for i, kg in enumerate(groups) if kg + 1 < bounds[i])
    groups[index] += 1


def _fewer_batches_and_rows(document: dict) -> None:
    """Claim a range holds fewer rows than it does, consistently in every count."""
    groups = first_file(document, "list")["keyGroups"]
    index = next(i for i, rows in enumerate(groups["rows"]) if rows > 1)
    groups["rows"][index] -= 1
    groups["entries"][index] = min(groups["entries"][index], groups["rows"][index])


def _more_batches(document: dict) -> None:
    """Claim a range of one batch holds two (its rows allow it)."""
    groups = first_file(document, "list")["keyGroups"]
    index = next(i for i, rows in enumerate(groups["rows"]) if rows > 1)
    groups["batchCount"][index] = 2


def _shared_with_another_state(document: dict) -> None:
    source, target = first_file(document, "reduce"), first_file(document, "value")
    target.update(copy.deepcopy(source))


def _partition_twice(document: dict) -> None:
    partitions = offsets_state(document)["partitions"]
    partitions[1] = {**partitions[0]}


def _partitions_overlap(document: dict) -> None:
    partitions = offsets_state(document)["partitions"]
    partitions[1]["offset"] = partitions[0]["offset"]


# (case id, change to the metadata document, error class, words the message must contain)
METADATA_CASES = [
    ("formatVersion true", _set(lambda d: d, "formatVersion", True),
     UnsupportedFormatVersionError, "format version True"),
    ("formatVersion 2.0", _set(lambda d: d, "formatVersion", 2.0),
     UnsupportedFormatVersionError, "format version 2.0"),
    ("formatVersion '2'", _set(lambda d: d, "formatVersion", "2"),
     UnsupportedFormatVersionError, "format version '2'"),
    ("checkpointId of another directory", _set(lambda d: d, "checkpointId", 7),
     CorruptCheckpointError, "checkpointId 7 differs from the directory's name chk-1"),
    ("checkpointId true", _set(lambda d: d, "checkpointId", True),
     CorruptCheckpointError, "expected an integer, got True"),
    ("checkpointId '1'", _set(lambda d: d, "checkpointId", "1"),
     CorruptCheckpointError, "expected an integer, got '1'"),
    ("checkpointId -1", _set(lambda d: d, "checkpointId", -1),
     CorruptCheckpointError, "checkpoint id -1"),
    ("timestamp beyond year 9999", _set(lambda d: d, "timestampMillis", 10**18),
     CorruptCheckpointError, "timestampMillis 1000000000000000000"),
    ("operators as a string", _set(lambda d: d, "operators", "op"),
     CorruptCheckpointError, "expected an array"),
    ("parallelism 0", _set(op, "parallelism", 0), CorruptCheckpointError, "parallelism"),
    ("parallelism above max parallelism", _set(op, "parallelism", 129),
     CorruptCheckpointError, "129"),
    ("parallelism 2.0", _set(op, "parallelism", 2.0), CorruptCheckpointError, "2.0"),
    ("max parallelism 40000", _set(op, "maxParallelism", 40000), CorruptCheckpointError,
     "40000"),
    ("max parallelism false", _set(op, "maxParallelism", False), CorruptCheckpointError,
     "got False"),
    ("key group beyond max parallelism",
     _set(lambda d: max(keyed(d)["files"], key=lambda f: f["keyGroupStart"]), "keyGroupEnd", 128),
     CorruptCheckpointError, "beyond operator 'op'"),
    ("key-group range backwards", _set(first_file, "keyGroupStart", 70),
     CorruptCheckpointError, "invalid key-group range"),
    ("negative size", _set(first_file, "sizeBytes", -5), CorruptCheckpointError, "-5"),
    ("offset beyond the file", _set_index("offset", 1, 10**12), CorruptCheckpointError,
     "invalid byte range 1000000000000"),
    ("negative offset", _set_index("offset", 0, -8), CorruptCheckpointError,
     "invalid byte range -8"),
    ("zero length", _set_index("length", 0, 0), CorruptCheckpointError, "invalid byte range"),
    ("overlapping byte ranges", _set_index("offset", 1, 8), CorruptCheckpointError,
     "invalid byte range"),
    ("key groups out of order", _set_index("keyGroup", 1, 0), CorruptCheckpointError,
     "out of order"),
    ("zero rows", _set_index("rows", 0, 0), CorruptCheckpointError, "impossible counts"),
    ("more entries than rows", _set_index("entries", 0, 10**6), CorruptCheckpointError,
     "impossible counts"),
    ("batchCount 0", _set_index("batchCount", 0, 0), CorruptCheckpointError,
     "impossible counts"),
    ("crc32 beyond 32 bits", _set_index("crc32", 0, 1 << 40), CorruptCheckpointError,
     "impossible counts"),
    ("offset as a float", _set_index("offset", 0, 8.0), CorruptCheckpointError,
     "expected an integer, got 8.0"),
    ("batchCount as a boolean", _set_index("batchCount", 0, True), CorruptCheckpointError,
     "expected an integer, got True"),
    ("keyGroups as an array", _set(first_file, "keyGroups", [1, 2]), CorruptCheckpointError,
     "expected an object"),
    ("index columns of different lengths",
     lambda d: first_file(d)["keyGroups"]["rows"].pop(), CorruptCheckpointError,
     "differ in length"),
    ("files overlapping in key groups",
     lambda d: keyed(d)["files"].append({**first_file(d), "path": "chk-1/data/other.arrow"}),
     CorruptCheckpointError, "overlap"),
    ("one file listed by two states", _shared_with_another_state, CorruptCheckpointError,
     "is listed by state"),
    ("duplicate state names", _set(lambda d: keyed(d, "list"), "name", "value"),
     CorruptCheckpointError, "['value'] appear more than once"),
    ("duplicate operator uids", lambda d: d["operators"].append(copy.deepcopy(op(d))),
     CorruptCheckpointError, "['op'] appear more than once"),
    ("ttl beyond timedelta", _set(lambda d: keyed(d, "ttl_value")["ttl"], "ttlMillis", 10**20),
     CorruptCheckpointError, "invalid"),
    ("operator-state share of a subtask twice", _partition_twice, CorruptCheckpointError,
     "overlap"),
    ("operator-state shares overlapping", _partitions_overlap, CorruptCheckpointError,
     "overlap"),
    ("operator-state share of subtask 5 of 2",
     lambda d: offsets_state(d)["partitions"][1].__setitem__("subtask", 5),
     CorruptCheckpointError, "subtask 5 of 2"),
    ("absolute data path", _set(first_file, "path", "/etc/passwd"), CorruptCheckpointError,
     "not a relative path inside"),
    ("data path with ..", _set(first_file, "path", "chk-1/../../x.arrow"),
     CorruptCheckpointError, "not a relative path inside"),
    ("data path as a URI", _set(first_file, "path", "file:///etc/passwd"),
     CorruptCheckpointError, "not a relative path inside"),
    ("an operator as a number", lambda d: d["operators"].__setitem__(0, 5),
     CorruptCheckpointError, "expected an object, got 5"),
    ("a keyed state as an array", lambda d: op(d)["keyedStates"].__setitem__(0, ["value"]),
     CorruptCheckpointError, "expected an object, got ['value']"),
    ("ttl as a string", _set(lambda d: keyed(d, "ttl_value"), "ttl", "1h"),
     CorruptCheckpointError, "expected an object, got '1h'"),
    ("a data file as a string", lambda d: keyed(d)["files"].__setitem__(0, "chk-1/data/x.arrow"),
     CorruptCheckpointError, "expected an object, got 'chk-1/data/x.arrow'"),
    ("missing operators", lambda d: d.pop("operators"), CorruptCheckpointError,
     "KeyError: 'operators'"),
    ("missing key type", lambda d: op(d).pop("keyType"), CorruptCheckpointError,
     "KeyError: 'keyType'"),
    ("missing ttl field", lambda d: keyed(d, "ttl_value")["ttl"].pop("visibility"),
     CorruptCheckpointError, "KeyError: 'visibility'"),
    ("missing index column", lambda d: first_file(d)["keyGroups"].pop("crc32"),
     CorruptCheckpointError, "KeyError: 'crc32'"),
    ("missing share field", lambda d: offsets_state(d)["partitions"][0].pop("rows"),
     CorruptCheckpointError, "KeyError: 'rows'"),
]


@pytest.mark.parametrize(("change", "error", "words"),
                         [pytest.param(*case[1:], id=case[0]) for case in METADATA_CASES])
def test_malformed_metadata_is_refused_naming_the_problem(root, change, error, words):
    edit_metadata(root, change)
    with pytest.raises(error) as info:
        Checkpoint.open(str(root))
    assert words in str(info.value)
    assert "_metadata.json" in str(info.value)


@pytest.mark.parametrize("bug", [AttributeError, TypeError, KeyError, IndexError])
def test_a_bug_in_the_parser_is_not_reported_as_corruption(root, monkeypatch, bug):
    """Only a malformed document makes a corrupt checkpoint: an exception the parsing code
    raises of its own must surface as what it is, not send users looking for damage on disk."""

    def broken(text: object) -> None:
        raise bug("a bug of the parser's own")

    monkeypatch.setattr(keyed_state_meta_module, "parse_type", broken)
    with pytest.raises(bug, match="a bug of the parser's own") as info:
        Checkpoint.open(str(root))
    assert not isinstance(info.value, StateSourceError)


# Metadata that parses but misdescribes bytes whose checksums still match: only
# checking what was decoded against what the metadata promised can notice.
MISDESCRIBED_CASES = [
    ("range relabelled as another key group", _relabel_a_key_group,
     "the bytes recorded for key group"),
    ("fewer rows claimed than the range holds", _fewer_batches_and_rows, "the metadata says"),
    ("more batches claimed than the range holds", _more_batches, "cannot decode"),
    ("operator-state share with fewer rows",
     lambda d: offsets_state(d)["partitions"][0].__setitem__("rows", 1), "the metadata says"),
]


@pytest.mark.parametrize(("change", "words"),
                         [pytest.param(*case[1:], id=case[0]) for case in MISDESCRIBED_CASES])
def test_metadata_misdescribing_the_bytes_is_refused_on_read(root, pristine, change, words):
    expected = everything(Checkpoint.open(str(pristine)))
    edit_metadata(root, change)
    try:
        actual = everything(Checkpoint.open(str(root)))
    except CorruptCheckpointError as error:
        assert words is None or words in str(error)
    else:  # a change that does not matter to the rows may pass, with identical rows
        assert words is None, "misdescribed bytes were read without an error"
        assert actual == expected


def test_absurdly_nested_json_is_refused(root):
    metadata_path(root).write_text('{"formatVersion": 2, "x": ' + "[" * 200_000
                                   + "]" * 200_000 + "}")
    with pytest.raises(CorruptCheckpointError, match="nests JSON too deeply"):
        Checkpoint.open(str(root))


def test_a_value_schema_nested_absurdly_deep_is_refused(root):
    depth = 50_000
    deep = '{"type": "array", "items": ' * depth + '"long"' + "}" * depth
    edit_metadata(root, _set(lambda d: keyed(d)["valueSchemas"], "value", "DEEP"))
    text = metadata_path(root).read_text()
    metadata_path(root).write_text(text.replace('"DEEP"', deep, 1))
    with pytest.raises(CorruptCheckpointError, match="too deeply"):
        Checkpoint.open(str(root))


def test_metadata_larger_than_the_limit_is_refused_before_reading(root, monkeypatch):
    monkeypatch.setattr(metadata_module, "MAX_METADATA_BYTES", 1000)
    monkeypatch.setattr("statesource.format.metadata_file.MAX_METADATA_BYTES", 1000)
    with pytest.raises(CorruptCheckpointError, match=r"bytes, more than the 1,000"):
        Checkpoint.open(str(root))
    huge = metadata_path(root)
    os.truncate(huge, 300 << 20)  # sparse: a 300 MB file that costs no disk
    monkeypatch.undo()
    with pytest.raises(CorruptCheckpointError, match="314,572,800 bytes, more than"):
        Checkpoint.open(str(root))


def test_a_fifo_as_metadata_is_refused_without_blocking(root):
    fifo_in_place_of(metadata_path(root))
    error = opened_without_hanging(lambda: Checkpoint.open(str(root / "chk-1")))
    assert isinstance(error, CorruptCheckpointError)
    assert "_metadata.json is not a regular file" in str(error)


def test_a_fifo_as_data_file_is_refused_without_blocking(root):
    checkpoint = Checkpoint.open(str(root))
    path = root / checkpoint.operator().keyed_state("value").files[0].path
    fifo_in_place_of(path)
    error = opened_without_hanging(checkpoint.verify)  # checks every file's type and size
    assert isinstance(error, CorruptCheckpointError)
    assert f"{path.relative_to(root).as_posix()} under {root} is not a regular file" \
        in str(error)
    error = opened_without_hanging(lambda: list(checkpoint.read_keyed_state("value")))
    assert isinstance(error, CorruptCheckpointError)
    assert f"data file {path} is not a regular file" in str(error)


def test_a_directory_as_metadata_is_refused(root):
    metadata_path(root).unlink()
    metadata_path(root).mkdir()
    with pytest.raises(CorruptCheckpointError, match="_metadata.json is not a regular file"):
        Checkpoint.open(str(root / "chk-1"))


def test_metadata_symlinked_outside_the_checkpoint_reveals_nothing_of_it(root, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("password=hunter2\n")
    metadata_path(root).unlink()
    metadata_path(root).symlink_to(secret)
    with pytest.raises(CorruptCheckpointError) as info:
        Checkpoint.open(str(root / "chk-1"))
    message = str(info.value)
    assert "leads outside" in message
    assert "secret" not in message and "hunter2" not in message and "line 1" not in message


@pytest.mark.parametrize("name", ["chk-01", "chk-+1", "chk-\u0661"])
def test_directories_not_named_in_plain_decimal_are_not_checkpoints(root, name):
    os.rename(root / "chk-1", root / name)
    with pytest.raises(CheckpointNotFoundError, match="no complete checkpoint under"):
        Checkpoint.open(str(root))


# -- API edges ------------------------------------------------------------------------------

def test_open_accepts_os_pathlike(root):
    assert Checkpoint.open(root).checkpoint_id == 1
    assert Checkpoint.open(root / "chk-1", checkpoint_id=1).checkpoint_id == 1


@pytest.mark.parametrize("checkpoint_id", [True, "1", 1.0, -1])
def test_checkpoint_id_must_be_an_int(root, checkpoint_id):
    with pytest.raises(InvalidArgumentError, match="checkpoint id"):
        Checkpoint.open(str(root), checkpoint_id=checkpoint_id)


def test_a_path_that_is_a_file_is_a_clear_error(root):
    data_file = next((root / "chk-1" / "data").iterdir())
    with pytest.raises(CheckpointNotFoundError, match=f"{data_file} is a file, not a directory"):
        Checkpoint.open(str(data_file))


def test_the_path_of_a_checkpoint_metadata_file_means_its_checkpoint(root):
    assert Checkpoint.open(str(metadata_path(root))).location.path == str(root / "chk-1")


@pytest.mark.parametrize("uri", ["file://relative/chk", "file:relative", "file://",
                                 "file://localhost/tmp/x", "nosuchscheme://x/y"])
def test_unusable_uris_are_reported_as_uris(uri):
    with pytest.raises(InvalidArgumentError) as info:
        Checkpoint.open(uri)
    assert f"cannot use URI {uri!r}" in str(info.value)
    assert os.getcwd() not in str(info.value)


def test_a_file_uri_with_escapes_reads_the_local_path(pristine, tmp_path):
    spaced = tmp_path / "with space"
    os.symlink(pristine, spaced)
    uri = "file://" + str(spaced).replace(" ", "%20")
    assert Checkpoint.open(uri).checkpoint_id == 1


def test_a_writer_root_that_is_a_file_is_a_clear_error(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("x")
    backend = KeyedStateBackend("string", 128)
    with pytest.raises(StateSourceError, match="is a file, not a directory"):
        CheckpointWriter(str(not_a_directory)).write(1, {"op": [backend]})


def test_crc_of_a_range_is_what_the_metadata_records(pristine):
    """The misdescription cases above rely on checksums still matching: check that they do."""
    checkpoint = Checkpoint.open(str(pristine))
    data_file = checkpoint.operator().keyed_state("value").files[0]
    payload = (pristine / data_file.path).read_bytes()
    for location in data_file.locations:
        piece = payload[location.offset:location.offset + location.length]
        assert zlib.crc32(piece) == location.crc32


def test_a_local_path_holding_a_colon_opens_when_written_as_relative(pristine, tmp_path,
                                                                     monkeypatch):
    os.symlink(pristine, tmp_path / "backup:2026")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError, match=r"write a local path holding ':' as \./"):
        Checkpoint.open("backup:2026")
    assert Checkpoint.open("./backup:2026").checkpoint_id == 1
