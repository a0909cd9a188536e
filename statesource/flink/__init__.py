"""Reading Apache Flink's own savepoints and checkpoints, in pure Python (docs/FLINK.md).

``metadata`` parses ``_metadata``; ``header``, ``serializers`` and ``keyed`` decode
keyed-state files, ``operator_state`` operator-state files, ``snappy`` their
compression; ``snapshot`` opens a snapshot directory and ``reader`` presents it
as a statesource checkpoint; ``importer`` rewrites it through the format layer.
``binary_writer``, ``metadata_writer``, ``header_writer`` and ``canonical_writer``
write Flink's own formats back, byte for byte as Flink does; ``publish`` publishes a new
savepoint directory whole, and ``rescale`` writes one under a new max parallelism.
"""
