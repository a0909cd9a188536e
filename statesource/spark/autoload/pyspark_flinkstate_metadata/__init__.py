"""Installed as the top-level module ``pyspark_flinkstate_metadata``: see ``pyspark_flinkstate``."""

from statesource.spark.metadata_source import FlinkStateMetadataDataSource as DefaultSource

__all__ = ["DefaultSource"]
