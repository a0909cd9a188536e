"""Flink-style heap keyed and operator state: copy-on-write maps, state tables and backends."""
