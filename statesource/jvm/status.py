"""What the shim can do on this machine, and why not, without building anything."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from statesource.errors import JvmShimUnavailableError
from statesource.jvm.build import ShimTarget, target
from statesource.jvm.toolchain import find_javac

SERVED = ("statesource checkpoints, and Flink savepoints (canonical and native) and heap"
          " checkpoints, and RocksDB's own files (native savepoints and checkpoints), on local"
          " (or mounted) files")
"""What the JVM reader decodes itself."""
FALLBACKS = (
    "a checkpoint not on the local file system (s3://, gs://, hdfs://, ...)",
    "a Flink state whose serializers the column decoders lack (Avro, Kryo, ...); in a native"
    " snapshot, every state of an operator holding such a state (a native key group is"
    " walked through every state's section)",
    "Flink state stored inline in _metadata",
    "heap timers of a RocksDB job (raw keyed state of its checkpoints)",
    "the change feed, operator state",
    "flattenCollections=false (nested rows)",
    "value types the JVM's Arrow vectors do not read as they are; key groups with delta runs"
    " (statesource format version 4)",
)
"""What the JVM reader hands to the Python reader (statesource.spark.jvm.plan and
statesource.flink.jvm_layout decide, and say which case a query is in a log line);
``statesource jvm status`` lists them."""


@dataclass(frozen=True)
class ShimStatus:
    """``target`` is None when the sources or Spark's jars are missing; ``problems`` say why."""

    target: ShimTarget | None
    javac: Path | None
    problems: list[str] = field(default_factory=list)

    @property
    def built(self) -> bool:
        """A jar for these sources and this Spark is in the cache (usable even without javac)."""
        return self.target is not None and self.target.jar.is_file()

    @property
    def buildable(self) -> bool:
        return self.target is not None and self.javac is not None


def shim_status(environ: Mapping[str, str] | None = None) -> ShimStatus:
    problems = []
    wanted: ShimTarget | None = None
    javac: Path | None = None
    try:
        wanted = target(environ)
    except JvmShimUnavailableError as error:
        problems.append(str(error))
    try:
        javac = find_javac(environ)
    except JvmShimUnavailableError as error:
        problems.append(str(error))
    return ShimStatus(wanted, javac, problems)
