"""Java's floating-point equality worked out by hand: the bits ``equals`` compares.

``Double.equals`` compares ``doubleToLongBits`` and ``Float.equals`` ``floatToIntBits``:
every NaN has one canonical pattern, while ``0.0`` and ``-0.0`` differ in the sign bit.
Built on ``struct`` alone, independent of the code under test.
"""

from __future__ import annotations

import math
import struct

NAN = float("nan")
OTHER_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000001))[0]  # another payload
NEGATIVE_NAN = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]


def java_double_bits(value: float) -> int:
    """``Double.doubleToLongBits``."""
    if value != value:
        return 0x7FF8000000000000
    return struct.unpack("<q", struct.pack("<d", value))[0]


def java_float_bits(value: float) -> int:
    """``Float.floatToIntBits((float) value)``; a cast past the float range is infinite."""
    if value != value:
        return 0x7FC00000
    try:
        return struct.unpack("<i", struct.pack("<f", value))[0]
    except OverflowError:
        return struct.unpack("<i", struct.pack("<f", math.copysign(math.inf, value)))[0]
