"""Hypothesis strategies of keys of every key type, over Java's whole range of each.

Shared by the key-group tests and the key types' own: both must hold for any key a Flink job
could have, not only for the keys Python makes easily.
"""

from __future__ import annotations

from hypothesis import strategies as st

from statesource.types import Row, RowKind

JAVA_INT = st.integers(min_value=-(2**31), max_value=2**31 - 1)
JAVA_LONG = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.text(st.characters(codec="utf-16", exclude_categories=()), max_size=12)
VALUES = {
    "string": TEXT,
    "int": JAVA_INT,
    "long": JAVA_LONG,
    "short": st.integers(min_value=-(2**15), max_value=2**15 - 1),
    "byte": st.integers(min_value=-128, max_value=127),
    "boolean": st.booleans(),
    "char": st.characters(max_codepoint=0xFFFF, codec="utf-16", exclude_categories=()),
    "float": st.floats(width=32),
    "double": st.floats(),
    "tuple<string,long>": st.tuples(st.none() | TEXT, st.none() | JAVA_LONG),
    "row<string,int>": st.builds(
        lambda fields, kind: Row(*fields, kind=kind),
        st.tuples(st.none() | TEXT, st.none() | JAVA_INT),
        st.sampled_from(RowKind),
    ),
    "row<bytes,row<long>>": st.tuples(
        st.none() | st.binary(max_size=6), st.none() | st.tuples(JAVA_LONG)
    ),
}
