"""Putting the Java shim on a running session, or saying once why it is not there.

``spark.jars`` is ignored by a session that already exists, so the jar is
added with ``ADD JAR``, which a running session honours for classes and Java
UDFs alike. When the shim cannot be built (no ``javac``, a failed build) or
loaded, statesource keeps working on its Python path and says so once per
process, in one line.
"""

from __future__ import annotations

import logging
from typing import Any

from statesource.errors import JvmShimUnavailableError
from statesource.jvm import ensure_jar

_LOG = logging.getLogger("statesource.jvm")
KEY_GROUP_FUNCTION = "flink_key_group"
OPERATOR_INDEX_FUNCTION = "flink_operator_index"
_OPERATOR_INDEX_UDF = "org.statesource.shim.FlinkOperatorIndexUdf"
LOADED_CONF = "statesource.jvm.loadedJar"
"""Set on a session once the shim's jar is added to it, so that a second call adds nothing."""
_told: list[str] = []  # the one reason given, once per process


def add_shim_jar(spark: Any) -> bool:
    """Add the shim's jar to ``spark`` (building it at first use); False if it is unavailable.

    Use :func:`statesource.spark.jvm.plan.load_shim`, which also registers the
    Python source the JVM provider delegates to.
    """
    try:
        jar = ensure_jar()
    except JvmShimUnavailableError as error:
        tell_once(str(error))
        return False
    if shim_loaded(spark):
        return True
    quoted = str(jar).replace("\\", "\\\\").replace("'", "\\'")
    try:
        spark.sql(f"ADD JAR '{quoted}'")
        spark.conf.set(LOADED_CONF, str(jar))
    except Exception as error:  # noqa: BLE001 - any failure to load means the Python path
        tell_once(f"Spark could not load {jar}: {str(error).splitlines()[0]}")
        return False
    return True


def shim_loaded(spark: Any) -> bool:
    """Whether the shim's jar is on this session (never builds or adds it)."""
    return spark.conf.get(LOADED_CONF, None) is not None


def register_java_functions(spark: Any) -> None:
    """``flink_key_group`` (a Catalyst expression) and ``flink_operator_index`` (a Java UDF)
    from the loaded shim."""
    from pyspark.sql.types import IntegerType

    shim_class(spark, "FlinkKeyGroupExpression").register(spark._jsparkSession,
                                                          KEY_GROUP_FUNCTION)
    spark.udf.registerJavaFunction(OPERATOR_INDEX_FUNCTION, _OPERATOR_INDEX_UDF, IntegerType())


def tell_once(reason: str) -> None:
    """Log, once per process, that the shim is unavailable and why."""
    if _told:
        return
    _told.append(reason)
    _LOG.warning("statesource: the JVM shim is unavailable, using the slower Python path"
                 " instead (`statesource jvm status` explains). Reason: %s", reason)


def shim_class(spark: Any, name: str) -> Any:
    """A class of the loaded shim, from any Python thread.

    ``ADD JAR`` puts the jar on the session's class loader and makes it the
    context class loader of the one JVM thread that ran it; py4j looks classes
    up through the calling thread's context loader, and each Python thread has
    a JVM thread of its own. So the loader is set on this thread first.
    """
    loader = spark._jsparkSession.sharedState().jarClassLoader()
    spark._jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)
    return getattr(spark._jvm.org.statesource.shim, name)
