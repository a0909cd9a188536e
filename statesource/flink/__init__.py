"""Apache Flink's own savepoints and checkpoints, read and written in pure Python (docs/FLINK.md).

The subpackages, from the bytes up: ``binary`` (Java's data streams, Snappy frames),
``serializers`` (serializer snapshots, types and value codecs), ``handles`` (what
``_metadata`` records), ``statefiles`` (state-file headers, operator-state files),
``layouts`` (how key groups lay out entries), ``snapshot`` (``_metadata``, the directory,
publishing). Above them ``declarations`` says what a Flink state is in statesource's
vocabulary, ``reader`` presents a snapshot as a :class:`~statesource.format.source.StateSource`,
``jvm_layout`` describes it to the JVM reader, and ``operations`` rescale, edit, rewrite,
export, import, count and diff whole snapshots.
"""
