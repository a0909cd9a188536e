"""How the key groups of a keyed-state file lay out their entries, read and written.

Canonical savepoints frame length-prefixed (composite key, value) pairs per state; heap
checkpoints and native savepoints write each state's entries unframed with its own
serializers. Each layout implements :class:`~.base.KeyGroupLayout` (``canonical``,
``native``), which the readers, the census, the change feed, rescale and the edits use
without asking which layout it is; ``dispatch`` alone picks a handle's layout. Beneath
them: value-by-value decoding (``keyed``), column-wise decoding (``framing``,
``columnar``, ``native_columns``), writing canonical key groups (``canonical_writer``,
``canonical_entries``) and re-keying them whole (``regroup``). A RocksDB handle's database
is made the canonical file it amounts to (``rocksdb_canonical``), and read as one.
"""
