"""Restore a Flink snapshot in a real Apache Flink 2.3 and dump every key of every state.

The truth for Flink compatibility is a real Flink, never statesource's own reader:
``restore(savepoint_dir, spec)`` compiles ``tests/flinkrestore/RestoreDump.java`` against
the jars of the ``apache-flink-libraries`` package (``pyflink/lib``; cached per source
hash), runs it in a JVM (one local MiniCluster per call, in a JVM the test worker keeps for
every restore with the same classes: Flink is loaded once), and returns what Flink restored
as a list of dicts. Flink refusing the snapshot (an incompatible serializer, another max
parallelism, state no operator claims) raises ``FlinkRestoreError`` with Flink's messages.
It needs ``apache-flink-libraries==2.3.0`` (the ``test`` extra), ``java`` and ``javac``
(17); ``missing_flink()`` says what is missing.

The spec (a dict, JSON-like)::

    {"max_parallelism": 256,            # required: Flink must be told (see below)
     "parallelism": 2,                  # default 1; any value works, Flink re-splits state
     "state_backend": "hashmap",        # or "rocksdb" (canonical savepoints only)
     "timer_service": "HEAP",           # optional, RocksDB only: its timers on the heap
     "ignore_unclaimed_state": False,   # True: operators of the snapshot missing here are skipped
     "operators": [
       {"uid": "stateful",              # must be in the snapshot unless "allow_missing": True
        "parallelism": 2,               # optional, per operator
        "key": "Long",                  # the key type; omit it for an operator without keyed state
        "keyed_states": [
          {"name": "total", "kind": "value", "value": "Double"},
          {"name": "max_id", "kind": "reducing", "value": "Long"},
          {"name": "avg", "kind": "aggregating", "value": {"tuple": ["Double", "Long"]}},
          {"name": "events", "kind": "list", "element": {"tuple": ["String", "Long"]}},
          {"name": "per_user", "kind": "map", "user_key": "String", "user_value": "Integer"},
          {"name": "window-contents", "kind": "aggregating", "value": "Long",
           "namespace": "window"},      # "void" (default), "window", "global_window" or a type
          {"name": "last_seq", "kind": "value", "value": "Long", "ttl": True}],  # or TTL in ms
        "timers": [{"name": "user-timers"}, {"name": "window-timers", "namespace": "window"}],
        "operator_states": [
          {"name": "seen", "mode": "split", "element": "Long"},
          {"name": "subtasks", "mode": "union", "element": "String"},
          {"name": "rules", "mode": "broadcast", "user_key": "String", "user_value": "Long"}]}]}

Types: ``"String"``, ``"Long"``, ``"Integer"``, ``"Double"``, ``"Float"``, ``"Boolean"``,
``"Short"``, ``"Byte"``, ``"Character"``, ``"BigInteger"``, ``"BigDecimal"``, ``"Instant"``,
``"LocalDate"``, ``"LocalTime"``, ``"LocalDateTime"``, ``"byte[]"``; ``{"tuple": [T, ...]}``,
``{"row": [[name, T], ...]}`` (or ``{"row": [T, ...]}``: fields f0, f1, ...),
``{"list": T}``, ``{"map": [K, V]}``, ``{"array": T}``, ``{"pojo": "Class$Name"}``,
``{"class": "java.util.UUID"}`` (whatever Flink makes of the class: POJO or Kryo) and
``{"generic": "..."}`` (Kryo). Classes come from ``java_sources`` (compiled with the job).
A TTL state is read with a TTL of 1000 years unless given in ms: the TTL is not stored in a
snapshot, so any TTL restores.

Each dict has ``operator``, ``subtask`` and ``kind``:

- keyed states (``kind`` value, list, map, reducing, aggregating): ``state``, ``key``,
  ``namespace`` (None for VoidNamespace, ``{"start", "end"}`` for a TimeWindow),
  ``value`` (read through Flink's state API: a list for list state, ``[[user_key,
  user_value], ...]`` sorted by key for map state, the accumulator for aggregating state),
  ``keyGroup`` (Flink's ``KeyGroupRangeAssignment`` of the key) and, on the heap backend,
  ``storedKeyGroup`` (the key group whose map holds the entry: a misplaced entry has
  another, and reads as None) and ``ttlTimestamp`` (the stored last-access time, in the
  value's shape).
- ``timer``: ``state`` (the timer service name), ``domain`` (event or processing), ``key``,
  ``namespace``, ``timestamp``, ``keyGroup``, ``storedKeyGroup`` (heap).
- operator state (``kind`` split, union, broadcast): ``state``, ``value`` (a list; pairs
  for broadcast state), as this subtask received it.
- ``subtask``: one per operator subtask: ``parallelism``, ``maxParallelism``,
  ``keyGroupRange``, ``restoredKeyedStates`` (every keyed state and timer queue the backend
  restored, before the dump registered anything; heap backend) and
  ``restoredOperatorStates``.
- ``snapshot`` (one): ``checkpointId`` and ``operators`` of the snapshot as Flink loads
  its ``_metadata`` (uid, operatorId, parallelism, maxParallelism, hasState).

Values: tuples as lists, rows and POJOs as dicts by field name, maps as ``[[k, v], ...]``,
``byte[]`` as base64, non-finite floats as strings, Kryo and other objects as ``toString()``.

Facts behind the settings (docs/FLINK.md, "Checked by a real Flink"): the job sets
``pipeline.max-parallelism`` to the spec's (left unset, Flink 2.3 restores a chained keyed
operator wrongly), claim mode NO_CLAIM (the snapshot is never touched), restart strategy
none, ``rest.bind-port=0``, and a watchdog; each operator is a custom
``AbstractStreamOperator`` with the spec's uid that registers the spec's descriptors in
``open()`` (where Flink checks serializer compatibility) behind a source that emits
nothing, so the job ends once every operator has opened.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from statesource.flink.handles import operator_id_of

FLINK_VERSION = "2.3.0"
FLINK_1X_VERSION = "1.20.5"
"""The Flink 1.x the suite restores in: its jars (``apache-flink-libraries``, which cannot share
an environment with 2.3's) installed by the README's test command with ``pip install --target
.venv/flink-1.20``, or where ``STATESOURCE_FLINK_1X`` names (the directory holding ``pyflink``)."""
TESTS = Path(__file__).resolve().parent
SOURCES = TESTS / "flinkrestore"
MAIN_SOURCE = SOURCES / "RestoreDump.java"
FIXTURE_JOB = TESTS / "fixtures" / "flink" / "FixtureJob.java"  # its Event POJO
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx1g",
             "--add-opens", "java.base/java.util=ALL-UNNAMED",
             "--add-opens", "java.base/java.lang=ALL-UNNAMED"]
LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{HH:mm:ss,SSS}} %-5p %c{{1}} - %m%n
"""
STDERR_TAIL_LINES = 40
KEYED_KINDS = {"value", "list", "map", "reducing", "aggregating"}


class FlinkRestoreError(RuntimeError):
    """Flink refused the snapshot, the job failed, or the harness could not run."""

    def __init__(self, message: str, returncode: int | None = None, stderr: str = ""):
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


def flink_lib(version: str = FLINK_VERSION) -> Path | None:
    """``pyflink/lib`` of the installed apache-flink-libraries of ``version``, if any."""
    if version == FLINK_1X_VERSION:
        home = Path(os.environ.get("STATESOURCE_FLINK_1X", Path(sys.prefix) / "flink-1.20"))
        lib = home / "pyflink" / "lib"
        return lib if any(lib.glob(f"flink-dist-{version}.jar")) else None
    spec = importlib.util.find_spec("pyflink")
    for location in (spec.submodule_search_locations or []) if spec else []:
        lib = Path(location) / "lib"
        if any(lib.glob("flink-dist-*.jar")):
            return lib
    return None


def _tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def missing_flink(version: str = FLINK_VERSION) -> str | None:
    """Why a real Flink of ``version`` cannot run here, or None."""
    lib = flink_lib(version)
    if lib is None:
        return (f"no Flink {version} runtime: install apache-flink-libraries=={version}"
                + (" with pip install --target .venv/flink-1.20 (the README's test command)"
                   if version == FLINK_1X_VERSION else " (the 'test' extra)")
                + ", which ships pyflink/lib")
    dist = sorted(lib.glob("flink-dist-*.jar"))
    if dist[0].name != f"flink-dist-{version}.jar":
        return f"the harness is written for Flink {version}, found {dist[0].name}"
    for tool in ("java", "javac"):
        if _tool(tool) is None:
            return f"no {tool} (a JDK 17) on PATH or in JAVA_HOME"
    return None


def cache_root() -> Path:
    configured = os.environ.get("STATESOURCE_FLINK_RESTORE_CACHE")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / "statesource-flink-restore"


def compiled_classes(java_sources: Sequence[str | Path] = (), version: str = FLINK_VERSION
                     ) -> Path:
    """The compiled harness (with ``java_sources``), built once per hash of the sources and
    of the jars of Flink ``version``."""
    lib = flink_lib(version)
    if lib is None:
        raise FlinkRestoreError(missing_flink(version) or "no Flink runtime")
    sources = [MAIN_SOURCE, *(Path(s).resolve() for s in java_sources)]
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    digest.update(str(sorted(p.name for p in lib.glob("*.jar"))).encode())
    digest.update(str(Path(_tool("javac") or "javac").resolve()).encode())
    target = cache_root() / digest.hexdigest()[:20]
    if (target / "RestoreDump.class").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        run = subprocess.run([_tool("javac") or "javac", "-nowarn", "-encoding", "UTF-8",
                              "-cp", f"{lib}/*", "-d", str(scratch), *map(str, sources)],
                             capture_output=True, text=True, timeout=300)
        if run.returncode != 0:
            raise FlinkRestoreError(f"javac failed:\n{run.stderr}", run.returncode, run.stderr)
        try:
            os.replace(scratch, target)  # atomic: concurrent runs compile the same thing
        except OSError:
            if not (target / "RestoreDump.class").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def restore(savepoint_dir: str | Path, spec: dict[str, Any], *,
            java_sources: Sequence[str | Path] = (), opt_jars: Sequence[str] = (),
            timeout: float = 120, flink: str = FLINK_VERSION) -> list[dict]:
    """Restore ``savepoint_dir`` (a directory holding ``_metadata``) in a real Flink, as
    ``spec`` describes (see the module docstring), and return every restored key, timer
    and operator state, one dict each.

    ``java_sources`` are compiled with the harness (classes for POJO and Kryo types);
    ``opt_jars`` names jars of ``pyflink/opt`` to add (``"flink-python"``: the serializers
    of PyFlink jobs' state); ``flink`` is the version restoring (:data:`FLINK_1X_VERSION`: a
    Flink 1.x)."""
    reason = missing_flink(flink)
    if reason is not None:
        raise FlinkRestoreError(reason)
    classes = compiled_classes(java_sources, flink)
    lib = flink_lib(flink)
    savepoint = Path(savepoint_dir).resolve()
    if not (savepoint / "_metadata").is_file():
        raise FlinkRestoreError(f"{savepoint} holds no _metadata")
    classpath = [str(classes), f"{lib}/*"]
    for name in opt_jars:
        jars = sorted((lib.parent / "opt").glob(f"{name}-*.jar"))
        if not jars:
            raise FlinkRestoreError(f"no {name} jar in {lib.parent / 'opt'}")
        classpath += map(str, jars)
    with tempfile.TemporaryDirectory(prefix="flink-restore-") as work:
        work_dir = Path(work)
        spec_file = work_dir / "spec.json"
        # each operator's id, Flink's hash of its uid (the harness checks the savepoint holds
        # it; Flink itself hashes the uid again to restore it)
        operators = [{**op, "operator_id": operator_id_of(op["uid"])} for op in spec["operators"]]
        spec_file.write_text(json.dumps({**spec, "operators": operators,
                                         "savepoint": str(savepoint),
                                         "timeout_seconds": int(timeout)}))
        out = work_dir / "out"
        stderr = _server(tuple(classpath)).restore(spec_file, out, work_dir / "stderr",
                                                   timeout + 30, savepoint)
        rows = [{"kind": "snapshot", **json.loads((out / "snapshot.json").read_text())}]
        for index, op in enumerate(spec["operators"]):
            dumped = []
            for part in sorted(out.glob(f"op{index}-*.jsonl")):
                dumped += [json.loads(line) for line in part.read_text().splitlines() if line]
            expected = op.get("parallelism", spec.get("parallelism", 1))
            finished = sum(1 for row in dumped if row["kind"] == "subtask")
            if finished != expected:
                raise FlinkRestoreError(f"operator {op['uid']}: {finished} of {expected} subtasks"
                                        " dumped their state", 0, stderr)
            rows += dumped
    return rows


class _RestoreServer:
    """One JVM running ``RestoreDump --serve``: the restores of a test worker that share a
    classpath share a JVM, which loads Flink once (a JVM per restore made the suite's real
    Flink tests several times slower). A failed restore ends the JVM (the harness exits
    after it), so a snapshot Flink refused never leaves anything behind for the next."""

    def __init__(self, classpath: Sequence[str]) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="flink-restore-server-"))
        log4j = self.work / "log4j2.properties"
        log4j.write_text(LOG4J.format(log=self.work / "flink.log"))
        # Flink unpacks its RPC jar (24 MB) into java.io.tmpdir and leaves it there.
        command = [_tool("java") or "java", *JVM_FLAGS, f"-Djava.io.tmpdir={self.work}",
                   f"-Dlog4j2.configurationFile={log4j}",
                   "-cp", os.pathsep.join(classpath), "RestoreDump", "--serve"]
        self.console = (self.work / "console").open("wb")
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.console, text=True, bufsize=1)
        self.answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read_answers, daemon=True).start()

    def _read_answers(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith(DONE):
                self.answers.put(line[len(DONE):].strip())
        self.answers.put(None)

    def alive(self) -> bool:
        return self.process.poll() is None

    def restore(self, spec_file: Path, out: Path, stderr_file: Path, timeout: float,
                savepoint: Path) -> str:
        """Run one restore; Flink's messages (what a one-shot run printed on stderr)."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"{spec_file}\t{out}\t{stderr_file}\n")
        self.process.stdin.flush()
        try:
            answer = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.close()
            raise FlinkRestoreError(f"Flink did not end within {timeout:g} s", None,
                                    _text(stderr_file)) from None
        stderr = _text(stderr_file)
        if answer != "0":
            self.close()
            tail = "\n".join(stderr.splitlines()[-STDERR_TAIL_LINES:])
            status = "the JVM ended" if answer is None else f"exit {answer}"
            raise FlinkRestoreError(f"restoring {savepoint} in Flink failed ({status}):\n{tail}",
                                    None if answer is None else int(answer), stderr)
        return stderr

    def close(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.console.close()
        shutil.rmtree(self.work, ignore_errors=True)


_SERVERS: dict[tuple[str, ...], _RestoreServer] = {}
MAX_SERVERS = 2
"""JVMs a test worker keeps running at once (each up to ``-Xmx1g``), least recently used
closed first."""
DONE = "RestoreDump-done "


def _server(classpath: tuple[str, ...]) -> _RestoreServer:
    server = _SERVERS.pop(classpath, None)
    if server is None or not server.alive():
        if server is not None:
            server.close()
        server = _RestoreServer(classpath)
    _SERVERS[classpath] = server  # most recently used last
    while len(_SERVERS) > MAX_SERVERS:
        _SERVERS.pop(next(iter(_SERVERS))).close()
    return server


@atexit.register
def _close_servers() -> None:
    while _SERVERS:
        _SERVERS.popitem()[1].close()


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


# ------------------------------------------------------------------- reading the dump


def hashable(value: Any) -> Any:
    """A JSON value as a dict key: lists become tuples, dicts sorted tuples of items."""
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    return value


def rows_of(rows: Iterable[dict], operator: str, state: str, kind: str | None = None) -> list[dict]:
    return [row for row in rows if row.get("operator") == operator and row.get("state") == state
            and (kind is None or row["kind"] == kind)]


def values(rows: Iterable[dict], operator: str, state: str) -> dict:
    """``key -> value`` of one keyed state (``(key, namespace) -> value`` when it has
    namespaces), keys made hashable; a key found twice is an error."""
    found: dict = {}
    for row in rows_of(rows, operator, state):
        if row["kind"] not in KEYED_KINDS:
            continue
        key = hashable(row["key"])
        if row["namespace"] is not None:
            key = (key, hashable(row["namespace"]))
        if key in found:
            raise AssertionError(f"{operator}/{state}: key {key!r} restored twice")
        found[key] = row["value"]
    return found


def timers(rows: Iterable[dict], operator: str, service: str, domain: str = "event") -> dict:
    """``key -> sorted [(namespace, timestamp)]`` of one timer service."""
    found: dict = {}
    for row in rows_of(rows, operator, service, "timer"):
        if row["domain"] == domain:
            found.setdefault(hashable(row["key"]), []).append(
                (hashable(row["namespace"]), row["timestamp"]))
    return {key: sorted(entries, key=timer_order) for key, entries in found.items()}


def timer_order(entry: tuple) -> tuple:
    """The order of ``timers()``' lists: by namespace, then timestamp."""
    namespace, timestamp = entry
    return repr(namespace), timestamp


def subtasks(rows: Iterable[dict], operator: str) -> dict[int, dict]:
    return {row["subtask"]: row for row in rows
            if row["kind"] == "subtask" and row["operator"] == operator}
