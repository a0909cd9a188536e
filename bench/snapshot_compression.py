"""Flink's snapshot compression: checksums, Snappy-framed reads and compressed writes.

Run: python bench/snapshot_compression.py [--events 200000 --keys 40000]
         [--max-parallelism 1024] [--savepoint DIR] [--repeats 3]

Three measurements in one run, each against a baseline timed in the same run:

- CRC-32C of 64 MiB (the checksum of every Snappy chunk and RocksDB block): the ``crc32c``
  package, which statesource uses, against the numpy CRC-32C statesource had before
  (block tables and linear shifts; kept here only, as the "before"); ``zlib.crc32`` (another
  polynomial, native code) for scale.
- Reading Snappy-framed key groups (a compressed savepoint's, as the reader does: each key
  group's stream unframed, every chunk's checksum verified): ``unframe`` (cramjam's blocks,
  the ``crc32c`` package) against the path it replaced (pyarrow's Snappy blocks, the numpy
  CRC), and against cramjam's own framed decoder (which verifies checksums too).
- Writing: ``rescale_max_parallelism`` of a real Flink savepoint (bench/flink_rescale.py's,
  made by a real Flink on first use and kept in the temp directory) with
  ``compression="snappy"`` against ``"none"``; and the keyed-state bytes each wrote.

Times are the best of ``--repeats``; MB are 10^6 bytes, of uncompressed data.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import tempfile
import zlib
from pathlib import Path

import cramjam
import numpy as np
import pyarrow as pa
from flink_rescale import savepoint_for
from timing import best_of

from statesource.flink.binary.crc32c import crc32c
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.binary.snappy import unframe
from statesource.flink.layouts.keyed import check_key_group_range
from statesource.flink.operations.rescale import rescale_max_parallelism
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.statefiles.keyed_header import read_keyed_header

# -- the "before": statesource's numpy CRC-32C and pyarrow unframing, kept as the baseline --

_POLYNOMIAL, _BLOCK, _PIECE = 0x82F63B78, 256, 1 << 16
_U32 = np.uint32


def _apply(linear: np.ndarray, values: np.ndarray) -> np.ndarray:
    """A linear map on 32 bits (four byte-indexed tables) of every value in ``values``."""
    return (linear[0][values & _U32(0xFF)] ^ linear[1][(values >> _U32(8)) & _U32(0xFF)]
            ^ linear[2][(values >> _U32(16)) & _U32(0xFF)] ^ linear[3][values >> _U32(24)])


@functools.cache
def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """By distance to a block's end, each byte's CRC contribution; the shifts by up to a
    block, and by whole blocks."""
    table = np.arange(256, dtype=_U32)
    for _ in range(8):
        table = np.where(table & 1, (table >> _U32(1)) ^ _U32(_POLYNOMIAL), table >> _U32(1))
    table = table.astype(_U32)

    def advance(values: np.ndarray) -> np.ndarray:
        return table[values & _U32(0xFF)] ^ (values >> _U32(8))

    rows = [table]
    for _ in range(_BLOCK - 1):
        rows.append(advance(rows[-1]))
    basis = (np.arange(256, dtype=_U32)[None, :]
             << (_U32(8) * np.arange(4, dtype=_U32)[:, None])).astype(_U32)
    shifts = [basis]
    for _ in range(_BLOCK):
        shifts.append(advance(shifts[-1]))
    blocks = [basis, shifts[_BLOCK]]
    for _ in range(_PIECE // _BLOCK - 1):
        blocks.append(_apply(blocks[1], blocks[-1]))
    return np.stack(rows[::-1]), np.stack(shifts), np.stack(blocks)


def numpy_crc32c(data: bytes | memoryview) -> int:
    """CRC-32C by numpy, 64 KiB at a time: the code statesource used before ``crc32c``."""
    by_distance, short, long = _tables()
    buf = np.frombuffer(data, dtype=np.uint8)
    crc = 0xFFFFFFFF
    for start in range(0, len(buf), _PIECE):
        piece = buf[start:start + _PIECE]
        count = -(-len(piece) // _BLOCK)
        padded = np.zeros(count * _BLOCK, dtype=np.uint8)
        padded[len(padded) - len(piece):] = piece
        per_block = np.bitwise_xor.reduce(
            by_distance[np.arange(_BLOCK), padded.reshape(count, _BLOCK)], axis=1)
        linear = long[count - 1 - np.arange(count)]
        index = np.arange(count)
        moved = (linear[index, 0, per_block & _U32(0xFF)]
                 ^ linear[index, 1, (per_block >> _U32(8)) & _U32(0xFF)]
                 ^ linear[index, 2, (per_block >> _U32(16)) & _U32(0xFF)]
                 ^ linear[index, 3, per_block >> _U32(24)])
        value = np.array([crc], dtype=_U32)
        rest = len(piece) % _BLOCK
        whole = len(piece) // _BLOCK
        value = _apply(short[rest], value)
        if whole:
            value = _apply(long[whole], value)
        crc = int(value[0]) ^ int(np.bitwise_xor.reduce(moved))
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def numpy_unframe(data: bytes) -> bytes:
    """Framed streams read as before: pyarrow's Snappy blocks, the numpy CRC (no error
    naming: the baseline's work, not its messages)."""
    out, pos = bytearray(), 0
    while pos < len(data):
        kind, length = data[pos], int.from_bytes(data[pos + 1:pos + 4], "little")
        body = data[pos + 4:pos + 4 + length]
        pos += 4 + length
        if kind == 0xFF:
            continue
        payload = body[4:]
        if kind == 0:
            size, shift, at = 0, 0, 0
            while True:
                byte = payload[at]
                size |= (byte & 0x7F) << shift
                at += 1
                if byte < 0x80:
                    break
                shift += 7
            payload = pa.decompress(payload, decompressed_size=size, codec="snappy",
                                    asbytes=True)
        if _masked(numpy_crc32c(payload)) != int.from_bytes(body[:4], "little"):
            raise ValueError("checksum mismatch")
        out += payload
    return bytes(out)


# -- the runs ------------------------------------------------------------------------------


def key_group_streams(path: str) -> list[bytes]:
    """Each key group of a compressed savepoint's keyed-state files: one framed stream."""
    snapshot = FlinkSnapshot.open(path)
    streams = []
    for op in snapshot.operators:
        for handle in snapshot.keyed_handles(op):
            data = snapshot.read_bytes(handle.stream, 0, handle.stream.size)
            header = read_keyed_header(BinaryReader(data, path))
            assert header.compressed
            streams += [data[begin:end] for _, begin, end in check_key_group_range(
                handle.offsets, handle.start, len(data), header.data_start, path)]
    return streams


def line(name: str, seconds: float, megabytes: float, baseline: float) -> str:
    return (f"  {name:<46} {seconds * 1000:9.1f} ms  {megabytes / seconds:8.1f} MB/s"
            f"  {baseline / seconds:7.1f}x")


def bench_crc(repeats: int) -> None:
    data = np.random.default_rng(3).integers(0, 256, 64 << 20, dtype=np.uint8).tobytes()
    assert numpy_crc32c(data[:1 << 20]) == crc32c(data[:1 << 20])
    megabytes = len(data) / 1e6
    before = best_of(repeats, lambda: numpy_crc32c(data))
    print(f"CRC-32C of {len(data) >> 20} MiB (speed-up against the numpy CRC-32C):")
    print(line("numpy CRC-32C (before)", before, megabytes, before))
    print(line("crc32c package (statesource)", best_of(repeats, lambda: crc32c(data)),
               megabytes, before))
    print(line("zlib.crc32 (CRC-32, for scale)", best_of(repeats, lambda: zlib.crc32(data)),
               megabytes, before))


def bench_reads(streams: list[bytes], repeats: int) -> None:
    plain = [unframe(stream, "f") for stream in streams]
    assert [numpy_unframe(s) for s in streams[:50]] == plain[:50]
    assert [bytes(cramjam.snappy.decompress(s)) for s in streams[:50]] == plain[:50]
    megabytes = sum(map(len, plain)) / 1e6
    packed = sum(map(len, streams)) / 1e6
    before = best_of(repeats, lambda: [numpy_unframe(s) for s in streams])
    print(f"Snappy-framed reads of {len(streams):,} key groups, {packed:.1f} MB ->"
          f" {megabytes:.1f} MB (speed-up against the path before):")
    print(line("pyarrow Snappy + numpy CRC-32C (before)", before, megabytes, before))
    print(line("unframe: cramjam + crc32c (statesource)",
               best_of(repeats, lambda: [unframe(s, "f") for s in streams]), megabytes,
               before))
    print(line("cramjam.snappy.decompress (framed, reference)",
               best_of(repeats, lambda: [cramjam.snappy.decompress(s) for s in streams]),
               megabytes, before))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=40_000)
    parser.add_argument("--max-parallelism", type=int, default=1024)
    parser.add_argument("--savepoint", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    bench_crc(args.repeats)
    savepoint = savepoint_for(args.savepoint, args.events, args.keys)
    with tempfile.TemporaryDirectory(prefix="statesource-bench-compression-") as scratch:
        written: dict[str, int] = {}
        times = {}
        runs = iter(range(1000))
        for compression in ("none", "snappy"):

            def rescale(compression: str = compression) -> None:
                output = Path(scratch, f"{compression}-{next(runs)}")
                done = rescale_max_parallelism(savepoint, output, args.max_parallelism,
                                               compression=compression)
                written[compression] = sum(op.bytes for op in done.operators)
                shutil.rmtree(output)

            times[compression] = best_of(args.repeats, rescale)
        kept = Path(scratch, "kept")
        rescale_max_parallelism(savepoint, kept, args.max_parallelism, compression="snappy")
        bench_reads(key_group_streams(str(kept)), args.repeats)
    print(f"rescale of {savepoint} to max parallelism {args.max_parallelism}"
          f" (against compression='none'):")
    for compression in ("none", "snappy"):
        print(f"  compression={compression!r:<9} {times[compression]:7.2f} s"
              f"  {times[compression] / times['none']:5.2f}x the time,"
              f" {written[compression] / 1e6:7.1f} MB of keyed state"
              f" ({written[compression] / written['none']:.2f}x the size)")


if __name__ == "__main__":
    main()
