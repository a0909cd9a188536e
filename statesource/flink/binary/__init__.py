"""The bytes under every Flink file: Java's ``DataInput`` and ``DataOutput``, and Snappy frames.

``reader`` reads big-endian numbers and Java strings with bounds checked against untrusted
files, ``writer`` writes them back exactly, and ``snappy`` with ``crc32c`` unframes and
checks the xerial Snappy streams of compressed snapshots. Nothing here knows a serializer,
a handle or a key group.
"""
