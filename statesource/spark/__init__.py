"""Spark integration: the ``flinkstate`` data sources, registration, writes and a session.

The package shows its shape: ``source`` and ``metadata_source`` are the front
doors Spark finds; ``read/`` plans and runs scans, ``write/`` plans, runs and
commits writes (and the re-keying rescale), ``jvm/`` puts the Java shim on a
session and plans for its reader. This module is the API a program uses;
pyspark is imported lazily, so ``import statesource`` never needs it.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

from statesource.errors import StateSourceError

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def write_state(df: Any, path: str, operator: str, state: str, **options: Any) -> Any:
    """Write ``df`` as one keyed state of a new checkpoint
    (:func:`statesource.spark.write.rewrite.write_state`)."""
    from statesource.spark.write.rewrite import write_state as write

    return write(df, path, operator, state, **options)


def rewrite(spark: Any, path: str, **options: Any) -> Any:
    """Stage several state changes for one new checkpoint
    (:func:`statesource.spark.write.rewrite.rewrite`)."""
    from statesource.spark.write.rewrite import rewrite as start

    return start(spark, path, **options)


def rescale_max_parallelism(spark: Any, path: str, max_parallelism: int, **options: Any) -> Any:
    """A new checkpoint with every keyed state re-keyed for ``max_parallelism``
    (:func:`statesource.spark.write.rescale.rescale_max_parallelism`)."""
    from statesource.spark.write.rescale import rescale_max_parallelism as rescale

    return rescale(spark, path, max_parallelism, **options)


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


def session(app_name: str = "statesource", master: str = "local[*]", *,
            register_sources: bool = True, key_group_functions: bool = True,
            **conf: str) -> Any:
    """A local SparkSession set up for statesource: Python workers, pushdown, sources registered.

    ``register_sources=False`` relies on Spark's auto-registration of the
    installed ``pyspark_flinkstate`` modules instead. ``key_group_functions``
    registers ``flink_key_group`` and ``flink_operator_index`` (statesource.spark.functions;
    the first session builds the Java shim, a few seconds once per Spark version).
    """
    check_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config(FILTER_PUSHDOWN_CONF, "true")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _reap_jvm_with_this_process(spark)
    if register_sources:
        register(spark)
    if key_group_functions:
        from statesource.spark.functions import register_functions

        register_functions(spark)
    return spark


_reaped: set[int] = set()


def _reap_jvm_with_this_process(spark: Any) -> None:
    """A JVM this process launched dies with it, killed -9 or not (statesource.spark.reaper)."""
    process = getattr(spark.sparkContext._gateway, "proc", None)
    if process is not None and process.pid not in _reaped:
        from statesource.spark.reaper import watch

        watch(process.pid)
        _reaped.add(process.pid)
