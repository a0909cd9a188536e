"""The Java shim: Flink-exact key-group functions for Spark SQL, compiled at first use.

``ensure_jar`` returns the jar for the installed Spark, building it from
``jvm-shim/`` with ``javac`` when the per-user cache has none; it raises
:class:`~statesource.errors.JvmShimUnavailableError` with a plain reason when
that cannot happen, and callers fall back to the Python implementation.
"""

from statesource.jvm.build import ShimTarget, build, cache_dir, ensure_jar, target
from statesource.jvm.status import ShimStatus, shim_status
from statesource.jvm.toolchain import find_javac, spark_jars_dir

__all__ = [
    "ShimStatus",
    "ShimTarget",
    "build",
    "cache_dir",
    "ensure_jar",
    "find_javac",
    "shim_status",
    "spark_jars_dir",
    "target",
]
