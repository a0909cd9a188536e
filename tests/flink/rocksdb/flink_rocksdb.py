"""Flink's own RocksDB (FRocksDB, shipped inside ``flink-dist``), driven by FlinkRocksScript.java.

The writes a test scripts are made by the RocksDB release a Flink job runs on, with the merge
operator Flink's backend sets (``stringappendtest``); what RocksDB itself then reads back
(``dump``) is the truth statesource's reader is held to, next to the test's own model.
Flink 2.3 ships FRocksDB 8.10 (XXH3 block checksums by default), Flink 1.20 FRocksDB 6.20.3
(CRC-32C): one JVM runs a whole script, so that many databases cost one start.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from flink_restore import (
    FLINK_1X_VERSION,
    FLINK_VERSION,
    FlinkRestoreError,
    _tool,
    compiled_classes,
    flink_lib,
)

SCRIPT = Path(__file__).with_name("FlinkRocksScript.java")
VERSIONS = (FLINK_VERSION, FLINK_1X_VERSION)


def hexed(data: bytes) -> str:
    """How the script writes a byte string."""
    return data.hex() or "-"


def run(commands: Iterable[str], version: str = FLINK_VERSION, timeout: float = 240) -> None:
    """Run ``commands`` (FlinkRocksScript's lines) in one JVM on Flink ``version``'s RocksDB."""
    classes = compiled_classes([SCRIPT], version)
    lib = flink_lib(version)
    with tempfile.TemporaryDirectory(prefix="flink-rocks-") as work:
        script = Path(work) / "script.txt"
        script.write_text("\n".join(commands) + "\n")
        command = [_tool("java") or "java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
                   f"-Djava.io.tmpdir={work}", "-cp", os.pathsep.join([str(classes), f"{lib}/*"]),
                   "FlinkRocksScript", str(script)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise FlinkRestoreError(f"FlinkRocksScript failed:\n{done.stderr[-4000:]}",
                                    done.returncode, done.stderr)


def dumped(path: Path) -> dict[str, dict[bytes, bytes]]:
    """A ``dump`` command's output: per column family, RocksDB's own merged view."""
    found: dict[str, dict[bytes, bytes]] = {}
    for line in path.read_text().splitlines():
        family, key, value = (bytes.fromhex(word) if word != "-" else b""
                              for word in line.split(" "))
        found.setdefault(family.decode(), {})[key] = value
    return found
