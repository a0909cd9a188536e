"""A JVM running one of tests/jvm's echo mains (a request line in, an answer line out) against
the shim's jar, for a test module to hold the JVM reader's decoders to the Python ones without
a Spark session: compiled, started, and stopped when the module is done; skipped where there
is no JDK."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from statesource.errors import JvmShimUnavailableError
from statesource.jvm import ensure_jar, find_javac, spark_jars_dir


def jvm_echo(source: Path, work: Path, jvm_options: Sequence[str] = ()
             ) -> Iterator[subprocess.Popen]:
    """The main class of ``source`` (package org.statesource.shim), compiled into ``work`` and
    running with text pipes to its stdin and stdout (``jvm_options``: e.g. a small heap)."""
    try:
        javac = find_javac()
    except JvmShimUnavailableError as error:
        pytest.skip(f"the JVM reader needs a JDK to build the shim, and there is none: {error}")
    classpath = os.pathsep.join([str(ensure_jar()), str(spark_jars_dir() / "*")])
    subprocess.run([str(javac), "-nowarn", "-cp", classpath, "-d", str(work), str(source)],
                   check=True, capture_output=True)
    process = subprocess.Popen([str(javac.parent / "java"), *jvm_options, "-cp",
                                os.pathsep.join([str(work), classpath]),
                                f"org.statesource.shim.{source.stem}"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield process
    process.stdin.close()  # type: ignore[union-attr]
    process.wait(timeout=60)
