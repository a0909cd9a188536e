"""Installed as the top-level module ``pyspark_flinkstate_python``.

The JVM reader, once its jar is on the Spark application, owns ``flinkstate``
in every session of it (jars are application-wide) and plans through the
Python source ``flinkstate-python``. Registering that source per session
left every other session (``spark.newSession()``, other Spark Connect
clients) unable to read; auto-registration, like ``pyspark_flinkstate``'s,
gives it to every session of the application.
"""

from statesource.spark.jvm.plan import FlinkStatePythonSource as DefaultSource

__all__ = ["DefaultSource"]
