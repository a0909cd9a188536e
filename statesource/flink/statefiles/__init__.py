"""The headers of Flink's state files, and its operator-state files.

A keyed-state file starts with a header (``keyed_header``; written by
``keyed_header_writer``, its state meta infos derived from declarations by
``state_meta_writer``) naming every state and the snapshots of its serializers; how its key
groups follow is a layout's business (:mod:`statesource.flink.layouts`). An operator-state
file (``operator_state``, ``operator_state_writer``) is a header and each state's elements.
"""
