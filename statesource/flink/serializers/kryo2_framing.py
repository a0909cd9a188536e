"""Flink 1.x Kryo values delimited where nothing frames them: native heap snapshots.

A native key group (a heap checkpoint's, a native savepoint's) writes each value right
after the one before it, without its length, so where a value ends is known only once it
is read. Kryo's values read as their bytes where a canonical savepoint frames them
(:class:`~statesource.flink.serializers.kryo.OpaqueType`); in a snapshot Flink 1.x wrote,
a ``KryoSerializer`` value of the JDK classes :mod:`kryo2` reads is parsed to find its end,
strictly (bytes Kryo 2 never writes are refused, never guessed past), and reads as the
same bytes. Anything else stays a wall, with its reason: a declared class whose values
statesource does not parse (a user class, under Kryo's field serializer), a custom Kryo
serializer, Scala, and a value met of a class statesource does not parse. Flink 2.x
writes Kryo 5, not parsed here: its Kryo values still cannot be walked past.
"""

from __future__ import annotations

from statesource.errors import IncompatibleCheckpointError
from statesource.flink.binary.reader import BinaryReader
from statesource.flink.serializers.base import FlinkType
from statesource.flink.serializers.kryo import KryoType
from statesource.flink.serializers.kryo2 import Kryo2Reader
from statesource.flink.serializers.kryo_classes import KryoRegistry
from statesource.flink.serializers.kryo_migration import kryo_refusal, substituted


class Kryo2Framed(KryoType):
    """A Flink 1.x ``KryoSerializer`` whose values are delimited by parsing their Kryo 2
    bytes: read as those bytes, as a canonical savepoint's are."""

    self_delimiting = True

    def __init__(self, kryo: KryoType) -> None:
        vars(self).update(vars(kryo))  # the same serializer, its snapshot bytes included
        self.registry = KryoRegistry.of(list(kryo.registered))

    def read(self, r: BinaryReader) -> bytes:
        start = r.pos
        try:
            Kryo2Reader(self.registry, r.source).read(r)
        except IncompatibleCheckpointError as error:
            raise IncompatibleCheckpointError(  # a native snapshot's value, or a POJO's field
                f"{error}; nothing frames this Kryo value alone, so statesource cannot find"
                " where it ends (a canonical savepoint frames a state's whole values, and"
                " reads a Kryo one as its bytes)") from None
        return bytes(r.data[start:r.pos])


def kryo2_framed(root: FlinkType) -> FlinkType:
    """``root`` with each of its Kryo serializers that statesource can delimit (of JDK
    classes, without the job's own Kryo serializers) a :class:`Kryo2Framed`; ``root``
    itself where it has none."""
    if not any(isinstance(node, KryoType) and not kryo_refusal(node) for node in root.nested()):
        return root

    def replace(node: FlinkType, field: str) -> FlinkType | None:
        if isinstance(node, KryoType) and not kryo_refusal(node):
            return Kryo2Framed(node)
        return None
    return substituted(root, replace)
