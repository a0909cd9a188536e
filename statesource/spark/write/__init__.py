"""The write side of ``flinkstate``: plan a state (:mod:`.plan`), shuffle rows by Flink
subtask (:mod:`.shuffle`), write them in tasks (:mod:`.task`), and stage and publish
them through a :class:`~statesource.format.target.SnapshotTarget` (:mod:`.rewrite`);
the re-keying rescale (:mod:`.rescale`) is a write of every keyed state."""
