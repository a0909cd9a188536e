"""A Flink snapshot as a whole: its ``_metadata`` file, its directory and its publication.

``metadata`` parses ``_metadata`` into :mod:`statesource.flink.handles` and
``metadata_writer`` writes it back byte for byte; ``directory`` opens a savepoint or a
checkpoint directory, resolves and confines the paths its handles name, and reads their
key groups' bytes; ``publish`` writes a new savepoint directory whole, ``_metadata`` last.
"""
