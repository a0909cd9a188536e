"""What building the Java shim needs from this machine: a ``javac`` and pyspark's jars.

JRE-only machines are common (Spark itself needs only ``java``), so a missing
``javac`` is an expected state, reported with where we looked, not a crash.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from importlib import util
from pathlib import Path

from statesource.errors import JvmShimUnavailableError


def find_javac(environ: Mapping[str, str] | None = None) -> Path:
    """The ``javac`` to use: ``$JAVA_HOME/bin``, beside the real ``java`` on PATH, then PATH.

    ``java`` on PATH is often a symlink chain (``/usr/bin/java`` ->
    ``/etc/alternatives`` -> the JDK); a JDK keeps ``javac`` beside the real file.
    """
    env = os.environ if environ is None else environ
    path = env.get("PATH", "")
    candidates: list[Path] = []
    java_home = env.get("JAVA_HOME")
    if java_home:
        candidates.append(Path(java_home, "bin", "javac"))
    java = shutil.which("java", path=path)
    if java:
        candidates.append(Path(os.path.realpath(java)).parent / "javac")
    on_path = shutil.which("javac", path=path)
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    looked = ", ".join(str(c) for c in candidates) or "JAVA_HOME is unset, no java or javac on PATH"
    raise JvmShimUnavailableError(
        f"no javac found (looked at: {looked}); a JRE has none. Install a JDK 17 or newer"
        " (Debian/Ubuntu: sudo apt-get install -y openjdk-17-jdk-headless) or point JAVA_HOME"
        " at one"
    )


def spark_jars_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The jars Spark runs with: ``$SPARK_HOME/jars`` when set, else the pyspark wheel's."""
    env = os.environ if environ is None else environ
    spark_home = env.get("SPARK_HOME")
    if spark_home:
        jars = Path(spark_home, "jars")
    else:
        spec = util.find_spec("pyspark")
        if spec is None or not spec.submodule_search_locations:
            raise JvmShimUnavailableError("pyspark is not installed, so there are no Spark jars")
        jars = Path(next(iter(spec.submodule_search_locations)), "jars")
    if not any(jars.glob("spark-sql_*.jar")):
        raise JvmShimUnavailableError(f"no Spark SQL jar in {jars}")
    return jars


def spark_version(jars: Path) -> str:
    """The Spark version of a jars directory, from its ``spark-sql_<scala>-<version>.jar``."""
    names = sorted(p.name for p in jars.glob("spark-sql_*.jar"))
    if not names:
        raise JvmShimUnavailableError(f"no Spark SQL jar in {jars}")
    return names[0].removesuffix(".jar").rsplit("-", 1)[1]
