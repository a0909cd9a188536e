"""Driving the JVM reader's SST tables (RocksColumnFamily.java) from Python: one JVM running
tests/jvm/SstEcho.java per test module, a request line in and an answer line out, and the
Python reader's answer for the same tables and key ranges to hold it to."""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from jvm_echo import jvm_echo

from statesource.flink.rocksdb import SstFile, merged_entries, read_database_manifest
from statesource.flink.rocksdb.lookup import range_entries

ECHO = Path(__file__).parents[2] / "jvm" / "SstEcho.java"
Range = tuple[bytes, bytes | None]
Scan = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Table:
    """One SST file as the JVM reader is given it: where it is, what errors call it, the size
    the snapshot records and its largest sequence number in the MANIFEST (-1: unknown)."""

    path: str
    name: str
    size: int
    largest_seqno: int = -1


class Echo:
    """One JVM running SstEcho."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def _ask(self, request: dict) -> dict:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, "SstEcho died"
        return json.loads(answer)

    def scan(self, tables: Sequence[Table], ranges: Sequence[Range]) -> list[Scan] | str:
        """Each range's entries, scanned in turn by one RocksColumnFamily, or its error."""
        answer = self.ask_scans(tables, ranges)
        if "error" in answer:
            return str(answer["error"])
        return [[(bytes.fromhex(k), bytes.fromhex(v)) for k, v in scan]
                for scan in answer["scans"]]

    def blocks_read(self, tables: Sequence[Table], ranges: Sequence[Range]) -> list[int]:
        """How many data blocks each range's scan read."""
        return list(self.ask_scans(tables, ranges)["blocks"])

    def ask_scans(self, tables: Sequence[Table], ranges: Sequence[Range]) -> dict:
        return self._ask({
            "paths": [t.path for t in tables], "names": [t.name for t in tables],
            "sizes": [t.size for t in tables], "seqnos": [t.largest_seqno for t in tables],
            "ranges": [[start.hex(), None if stop is None else stop.hex()]
                       for start, stop in ranges]})

    def count(self, tables: Sequence[Table]) -> tuple[int, float]:
        """Entries of a whole scan (not sent back), and the scan's seconds."""
        answer = self._ask({
            "paths": [t.path for t in tables], "names": [t.name for t in tables],
            "sizes": [t.size for t in tables], "seqnos": [t.largest_seqno for t in tables],
            "ranges": [["", None]], "count": True})
        assert "error" not in answer, answer
        return answer["counts"][0], answer["nanos"][0] / 1e9

    def xxh3(self, data: Sequence[bytes]) -> list[int]:
        return [int(h) for h in self._ask({"xxh3": [d.hex() for d in data]})["hashes"]]


def start_echo(work: Path, jvm_options: Sequence[str] = ()) -> Iterator[Echo]:
    """SstEcho compiled against the shim's jar and started (skips where there is no JDK)."""
    for process in jvm_echo(ECHO, work, jvm_options):
        yield Echo(process)


def java_tables(files: dict, local: dict[str, Path]) -> dict[str, list[Table]]:
    """Each column family's live tables (by name) of the database whose files ``files`` maps by
    their RocksDB names to bytes or readers (``local``: where each is on disk), as the JVM
    reader takes them."""
    manifest = read_database_manifest(files)
    return {name: [Table(str(local[live.name]), live.name, live.size, live.largest_seqno)
                   for live in manifest.files if live.column_family == family]
            for family, name in manifest.column_families.items()}


def directory_tables(directory: Path) -> dict[str, list[Table]]:
    """:func:`java_tables` of a database directory."""
    local = {path.name: path for path in directory.iterdir()}
    return java_tables({name: path.read_bytes for name, path in local.items()}, local)


def random_ranges(keys: Sequence[bytes], rng: random.Random, count: int) -> list[Range]:
    """The whole family, then ranges between keys it holds, keys one byte longer or shorter,
    and random bytes, some open-ended or empty."""
    def bound() -> bytes:
        if keys and rng.random() < 0.7:
            key = rng.choice(keys)
            return rng.choice([key, key[:-1], key + b"\x00", key + b"\xff"])
        return rng.randbytes(rng.randrange(0, 4))
    ranges: list[Range] = [(b"", None)]
    for _ in range(count):
        start, stop = sorted([bound(), bound()])
        ranges.append((start, None if rng.random() < 0.15 else stop))
    return ranges


def python_scans(tables: Sequence[SstFile], ranges: Sequence[Range]) -> list[Scan]:
    """What the Python reader reads of each range: the whole family as ``merged_entries``
    reads it, any other range as ``range_entries`` does."""
    return [list(merged_entries(tables)) if (start, stop) == (b"", None)
            else list(range_entries(tables, start, stop)) for start, stop in ranges]
