"""Installed as the top-level module ``pyspark_flinkstate``.

Spark registers the ``DefaultSource`` of every importable ``pyspark_*`` module
on its first Python data source lookup, which is what makes
``spark.read.format("flinkstate")`` work with no registration call.
"""

from statesource.spark.source import FlinkStateDataSource as DefaultSource

__all__ = ["DefaultSource"]
