"""Spark integration: the ``flinkstate`` data sources, registration, writes and a session.

The package shows its shape: ``source`` and ``metadata_source`` are the front
doors Spark finds; ``read/`` plans and runs scans, ``write/`` plans, runs and
commits writes (and the re-keying rescale), ``jvm/`` puts the Java shim on a
session and plans for its reader. This module is the API a program uses;
pyspark is imported lazily, so ``import statesource`` never needs it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any

from statesource.errors import StateSourceError

if TYPE_CHECKING:
    from statesource.spark.write.erase import erase_keys
    from statesource.spark.write.rescale import rescale_max_parallelism, rescale_parallelism
    from statesource.spark.write.rewrite import rewrite, write_state

__all__ = ["check_java", "erase_keys", "register", "rescale_max_parallelism",
           "rescale_parallelism", "rewrite", "session", "write_state"]

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
_SUBMITTED = "PYSPARK_GATEWAY_PORT"
"""Set by spark-submit for the Python driver it starts: the JVM and its settings exist."""


_API = {
    "write_state": "statesource.spark.write.rewrite",
    "rewrite": "statesource.spark.write.rewrite",
    "rescale_max_parallelism": "statesource.spark.write.rescale",
    "rescale_parallelism": "statesource.spark.write.rescale",
    "erase_keys": "statesource.spark.write.erase",
}
"""The operations on DataFrames and sessions, by the module that defines each. They are
imported when first used (PEP 562), so importing this package needs no pyspark, and each
has one signature: its own."""


def __getattr__(name: str) -> Any:
    if name not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_API[name]), name)


def register(spark: Any) -> None:
    """Register ``flinkstate`` and ``flinkstate-metadata`` with ``spark``.

    Not needed when statesource is pip-installed (Spark finds them by itself),
    but harmless, and needed when running from a source tree.
    """
    from statesource.spark.metadata_source import FlinkStateMetadataDataSource
    from statesource.spark.source import FlinkStateDataSource

    spark.dataSource.register(FlinkStateDataSource)
    spark.dataSource.register(FlinkStateMetadataDataSource)


def check_java() -> str:
    """The java executable Spark will use, or an error saying how to get one."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not candidate or not os.path.exists(candidate):
        where = f"JAVA_HOME={java_home} has no bin/java" if java_home else "no java on PATH"
        raise StateSourceError(
            f"Spark needs Java 17 or newer, but {where}. Install it (Debian/Ubuntu:"
            " sudo apt-get install -y openjdk-17-jre-headless; macOS: brew install openjdk@17)"
            " or point JAVA_HOME at an installed JDK."
        )
    return candidate


def session(app_name: str = "statesource", master: str | None = None, *,
            register_sources: bool = True, key_group_functions: bool = True,
            **conf: str) -> Any:
    """A SparkSession set up for statesource: pushdown on, sources registered.

    ``master`` is any Spark master URL (``spark://host:7077``, ``yarn``,
    ``k8s://...``); None means ``spark-submit``'s under ``spark-submit``, else
    ``local[*]``. Only a local master given here (or that default) gets local
    conveniences (the UI off, 4 shuffle partitions, Python workers on this
    interpreter); under ``spark-submit`` and on a cluster every setting stays
    the user's (``spark-defaults.conf``, ``spark-submit --conf``, ``conf``),
    see docs/DEPLOY.md.

    ``register_sources=False`` relies on Spark's auto-registration of the
    installed ``pyspark_flinkstate`` modules instead. ``key_group_functions``
    registers ``flink_key_group`` and ``flink_operator_index`` (statesource.spark.functions;
    the first session builds the Java shim, a few seconds once per Spark version).
    """
    check_java()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).config(FILTER_PUSHDOWN_CONF, "true")
    if master is None and not os.environ.get(_SUBMITTED):
        master = "local[*]"
    if master is not None:
        builder = builder.master(master)
        if master.startswith("local"):
            builder = _local_conveniences(builder)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if (spark.sparkContext.master or "").startswith("local"):
        spark.sparkContext.setLogLevel("ERROR")
    _reap_jvm_with_this_process(spark)
    if register_sources:
        register(spark)
    if key_group_functions:
        from statesource.spark.functions import register_functions

        register_functions(spark)
    return spark


def _local_conveniences(builder: Any) -> Any:
    """Settings for one machine, where no user configuration is expected to give them."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return (builder.config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"]))


_reaped: set[int] = set()


def _reap_jvm_with_this_process(spark: Any) -> None:
    """A JVM this process launched dies with it, killed -9 or not (statesource.spark.reaper)."""
    process = getattr(spark.sparkContext._gateway, "proc", None)
    if process is not None and process.pid not in _reaped:
        from statesource.spark.reaper import watch

        watch(process.pid)
        _reaped.add(process.pid)
