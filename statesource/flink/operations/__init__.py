"""What statesource does with a Flink snapshot as a whole.

``rescale`` (a new max parallelism), ``edit`` (erase keys, drop a state) and
``savepoint_target`` with ``staged`` (rewrites and bootstraps from Spark) write new
canonical savepoints, each planned by ``savepoint_plan`` and written by
``savepoint_writing``; ``export`` writes one from a statesource checkpoint; ``importer``
turns a snapshot into a statesource checkpoint; ``census`` counts it for ``inspect``; and
``changefeed`` diffs two snapshots of one job.
"""
