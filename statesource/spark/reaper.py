"""The reaper: no Spark JVM or Python worker outlives the process that started it.

pyspark's JVM exits by itself when its driver's stdin pipe breaks, and its
Python workers when the JVM's does; but a JVM that is busy shutting down, or
stuck, keeps running with its workers after a ``kill -9`` of the driver, and
nothing in the driver survives to stop it. So a local session also starts
this small process: it holds the read end of a pipe only the driver can
write, so a driver's death of any kind (``kill -9`` included) shows as end of
file; it then gives the JVM a grace period to exit by itself and kills it and
every process it started (``SIGKILL``). It runs in its own session, so a kill
of the driver's process group does not take it down with the JVM.

Run as ``python -m statesource.spark.reaper JVM_PID GRACE_SECONDS``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

GRACE_SECONDS = 10.0
"""How long the JVM may take to exit by itself once its driver is gone."""


def watch(jvm_pid: int, grace_seconds: float = GRACE_SECONDS) -> subprocess.Popen[bytes]:
    """Start the reaper of JVM ``jvm_pid`` for this (driver) process."""
    read_end, write_end = os.pipe()  # neither end is inherited by later children
    try:
        reaper = subprocess.Popen(
            [sys.executable, "-m", "statesource.spark.reaper", str(jvm_pid), str(grace_seconds)],
            stdin=read_end, stdout=subprocess.DEVNULL, start_new_session=True)
    finally:
        os.close(read_end)
    _held.append(write_end)  # kept open until this process ends, however it ends
    return reaper


_held: list[int] = []


def descendants(pid: int) -> dict[int, str]:
    """The processes ``pid`` started, and theirs, with their command lines (one ``ps``)."""
    table = _processes()
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, frontier = {}, [pid]
    while frontier:
        frontier = [c for p in frontier for c in children.get(p, [])]
        found.update({c: table[c][1] for c in frontier})
    return found


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    listing = subprocess.run(["ps", "-A", "-o", "pid=,ppid=,args="], capture_output=True,
                             text=True, check=False).stdout
    table = {}
    for line in listing.splitlines():
        pid, parent, *args = line.split(None, 2)
        table[int(pid)] = (int(parent), args[0] if args else "")
    return table


def _reap(jvm_pid: int, grace_seconds: float) -> None:
    jvm = _processes().get(jvm_pid)
    while sys.stdin.buffer.read(65536):
        pass
    # Workers are listed while the JVM lives: once it is gone they are nobody's children.
    deadline = time.monotonic() + grace_seconds
    seen: dict[int, str] = {}
    while time.monotonic() < deadline:
        seen.update(descendants(jvm_pid))
        now = _processes()
        if now.get(jvm_pid) != jvm and all(now.get(p, (0, ""))[1] != args
                                           for p, args in seen.items()):
            return  # everything exited by itself
        time.sleep(0.2)
    now = _processes()
    survivors = {jvm_pid: jvm[1]} if jvm is not None else {}
    survivors.update(seen)
    for pid, args in survivors.items():
        if pid in now and now[pid][1] == args:  # the same process, not a reused pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    _reap(int(sys.argv[1]), float(sys.argv[2]))
