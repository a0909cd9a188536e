"""The connector's read paths, for tests that must hold on both (docs/SPARK.md, "Two readers").

``source_format`` is the format name that reaches one path on the shared session:
``flinkstate-python`` is the Python source under its second name, ``flinkstate`` is the JVM
reader once the shim is loaded (a JVM source owns its short name). Without a JDK the JVM
case is skipped, saying so; with one, a shim that fails to load fails the test.
"""

from __future__ import annotations

import pytest

from statesource.errors import JvmShimUnavailableError
from statesource.jvm import find_javac
from statesource.spark.jvm.plan import FlinkStatePythonSource, load_shim

READ_PATHS = {"python": "flinkstate-python", "jvm": "flinkstate"}


def jvm_reader_loaded(spark) -> bool:
    """Loads the shim into ``spark``; skips where no JDK exists, fails where loading fails."""
    try:
        find_javac()
    except JvmShimUnavailableError as error:
        pytest.skip(f"the JVM reader needs a JDK to build the shim, and there is none: {error}")
    assert load_shim(spark), "a JDK is installed, but the shim did not load (see the warning)"
    return True


@pytest.fixture(params=sorted(READ_PATHS))
def source_format(request, spark) -> str:
    spark.dataSource.register(FlinkStatePythonSource)
    if request.param == "jvm":
        jvm_reader_loaded(spark)
    return READ_PATHS[request.param]
