"""Test-session fixtures: one SparkSession per test session (starting one costs ~20 s); the
suite runs in two pytest-xdist workers (pyproject.toml), each a test session of its own.

Markers are applied here, not by hand (all are registered in pyproject.toml):

- ``spark``: the test needs a SparkSession / JVM: it uses the ``spark`` fixture, directly or
  through another fixture, or lives under tests/spark/ (the connector's tests, most of which
  start Spark, some in a subprocess). ``pytest -m "not spark"`` runs the rest without Spark
  (``-m "not spark and not realflink"``: without a JVM).
- ``golden``: the test reads Flink's output from ../shared: the vectors in flink-golden
  (tests/golden_vectors.py reads them for tests/keygroups/ and tests/spark/test_functions.py)
  or the savepoints in flink-savepoints (tests/flink/, and tests/spark/test_flink_snapshots.py),
  or uses a fixture named ``shared_*`` that does.
- ``cluster``: the test runs on real servers it starts (tests/cluster/): a Spark standalone
  master and two workers, a Spark Connect server and moto's S3 server, all on 127.0.0.1
  (also marked ``spark``; ``-m "not cluster"`` leaves them out).
- ``realflink``: the test runs a real Apache Flink (tests/flink_restore.py: a JVM per
  restore): every test of the files in ``REAL_FLINK_FILES`` below (tests/flink/:
  test_real_flink_restore.py, test_serializer_snapshots_in_flink.py,
  test_flink_savepoint_rescale.py, test_flink_savepoint_edits.py, test_flink_export.py,
  test_flink_savepoint_rewrite.py), and tests/flink/rocksdb/test_rocksdb_flink.py, which runs
  the RocksDB inside Flink's jars (a JVM per Flink version). Where Flink or a JDK is missing
  they fail, never skip.

Every test has a time limit (``STATESOURCE_TEST_TIMEOUT`` seconds, default 300), so a
bug that makes code wait forever fails its test instead of hanging the suite: the
test body is interrupted by SIGALRM, and should the process be stuck where Python
cannot run (inside a C call), faulthandler dumps every thread's stack and exits.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS.parent) not in sys.path:  # `tests.race` is imported as a package path (the race
    sys.path.insert(0, str(TESTS.parent))  # children's too), whichever files are collected
GOLDEN_FILES = {"test_golden.py", "test_shared_snapshots.py", "test_errors.py", "test_import.py",
                "test_flink_snapshots.py", "test_keygroup_columns.py", "test_functions.py",
                "test_flink_round_trips.py", "test_serializer_writer.py"}
REAL_FLINK_FILES = {"test_real_flink_restore.py", "test_serializer_snapshots_in_flink.py",
                    "test_flink_savepoint_rescale.py", "test_flink_savepoint_edits.py",
                    "test_flink_export.py", "test_flink_export_logical_types.py",
                    "test_flink_savepoint_rewrite.py",
                    "test_rocksdb_flink.py"}
TEST_TIMEOUT_SECONDS = float(os.environ.get("STATESOURCE_TEST_TIMEOUT", "300"))
STUCK_GRACE_SECONDS = 60


class TimeLimitExceeded(BaseException):  # not an Exception: code under test must not swallow it
    """Raised in a test that ran longer than ``TEST_TIMEOUT_SECONDS``."""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    faulthandler.dump_traceback_later(TEST_TIMEOUT_SECONDS + STUCK_GRACE_SECONDS, exit=True,
                                      file=sys.stderr)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TimeLimitExceeded(f"{item.nodeid} ran longer than {TEST_TIMEOUT_SECONDS:g} s"
                          " (STATESOURCE_TEST_TIMEOUT)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, TEST_TIMEOUT_SECONDS)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def _real_flink_present(request):
    """A ``realflink`` test fails, never skips, where Flink or a JDK is missing: the test
    extra installs Flink's runtime, so its absence is a broken setup, and a skip would hide
    that nothing was restored. (``-m "not realflink"`` leaves these tests out.)"""
    if request.node.get_closest_marker("realflink") is not None:
        from flink_restore import missing_flink

        reason = missing_flink()
        if reason is not None:
            pytest.fail(f"a real Flink cannot run here: {reason}")


def expose_autoload_modules() -> None:
    """Let Spark's Python workers find the ``pyspark_flinkstate*`` modules of a source tree.

    Spark registers the ``pyspark_*`` modules that ``pkgutil.iter_modules()`` lists.
    An installed statesource puts them in site-packages; an editable install
    (``pip install -e``) maps them through setuptools' import hook, which that
    listing never sees. Put the tree's autoload directory on the workers' path,
    as an installed copy would be: the modules themselves are what is tested.
    """
    import statesource

    autoload = Path(statesource.__file__).parent / "spark" / "autoload"
    entries = [e for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    if autoload.is_dir() and str(autoload) not in entries:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(autoload), *entries])


@pytest.fixture(scope="session")
def spark():
    from statesource.spark import session

    expose_autoload_modules()
    spark = session("statesource-tests", master="local[2]", register_sources=False)
    yield spark
    spark.stop()


@pytest.hookimpl(tryfirst=True)  # before -m deselects anything
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.path)).resolve()
        relative = path.relative_to(TESTS).parts if path.is_relative_to(TESTS) else ()
        if "spark" in getattr(item, "fixturenames", ()) or relative[:1] in (("spark",),
                                                                              ("cluster",)):
            item.add_marker(pytest.mark.spark)
        if relative[:1] == ("cluster",):
            item.add_marker(pytest.mark.cluster)
        fixtures = getattr(item, "fixturenames", ())
        if (relative and relative[-1] in GOLDEN_FILES) or any(
                name.startswith("shared_") for name in fixtures):
            item.add_marker(pytest.mark.golden)
        if relative and relative[-1] in REAL_FLINK_FILES:
            item.add_marker(pytest.mark.realflink)
