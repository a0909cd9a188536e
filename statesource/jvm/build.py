"""Compile ``jvm-shim/`` into a jar at first use, cached per user, published atomically.

The jar must match the Spark it runs in, so it is compiled against the
installed pyspark's own jars (no Maven, no download) and cached under a name
that carries the Spark version and a hash of the Java sources: a pyspark
upgrade or a changed source builds a new jar, and nothing ever reuses a stale
one. Each build works in its own temporary directory inside the cache and
publishes with one ``os.replace``, so two processes building at once both
succeed, and a reader never sees half a jar.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from statesource.errors import JvmShimUnavailableError
from statesource.jvm.toolchain import find_javac, spark_jars_dir, spark_version

JAVA_RELEASE = "17"
CACHE_ENV = "STATESOURCE_JVM_CACHE"
_BUILD_TIMEOUT_SECONDS = 600
_ERROR_LINES = 12


def sources_dir() -> Path:
    """``jvm-shim/src``: beside the package in a source tree, or installed inside it."""
    package = Path(__file__).resolve().parent
    for candidate in (package.parents[1] / "jvm-shim" / "src", package / "shim-src"):
        if candidate.is_dir():
            return candidate
    raise JvmShimUnavailableError(
        f"the Java sources of the shim are missing (looked for {package.parents[1]}/jvm-shim/src"
        f" and {package}/shim-src)"
    )


def source_files(root: Path) -> list[Path]:
    """Every file of the shim: Java sources, and resources (service registrations) for the jar."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    if not any(p.suffix == ".java" for p in files):
        raise JvmShimUnavailableError(f"no Java sources under {root}")
    return files


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``$STATESOURCE_JVM_CACHE``, else ``$XDG_CACHE_HOME/statesource/jvm`` or ``~/.cache/...``."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV])
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "statesource", "jvm")


@dataclass(frozen=True)
class ShimTarget:
    """Where the jar for these sources and this Spark lives (built or not)."""

    sources: Path
    spark_jars: Path
    spark_version: str
    jar: Path


def target(environ: Mapping[str, str] | None = None, sources: Path | None = None) -> ShimTarget:
    """The cached jar's path, keyed by Spark version and a hash of the sources."""
    sources = sources_dir() if sources is None else sources
    jars = spark_jars_dir(environ)
    version = spark_version(jars)
    digest = hashlib.sha256(f"release {JAVA_RELEASE}\n".encode())
    for path in source_files(sources):
        digest.update(path.relative_to(sources).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    name = f"statesource-shim-spark{version}-{digest.hexdigest()[:16]}.jar"
    return ShimTarget(sources, jars, version, cache_dir(environ) / name)


def ensure_jar(environ: Mapping[str, str] | None = None) -> Path:
    """The shim's jar, built now if this Spark and these sources have none cached yet."""
    wanted = target(environ)
    if wanted.jar.is_file():
        return wanted.jar
    return build(wanted, environ)


def build(wanted: ShimTarget, environ: Mapping[str, str] | None = None) -> Path:
    """Compile and publish the jar (replacing an identical one another process published)."""
    javac = find_javac(environ)
    wanted.jar.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=wanted.jar.parent))
    try:
        classes = work / "classes"
        _compile(javac, wanted, classes)
        staged = work / wanted.jar.name
        _write_jar(classes, wanted.sources, staged)
        os.replace(staged, wanted.jar)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return wanted.jar


def _compile(javac: Path, wanted: ShimTarget, classes: Path) -> None:
    command = [str(javac), "--release", JAVA_RELEASE, "-encoding", "UTF-8", "-nowarn",
               "-cp", str(wanted.spark_jars / "*"), "-d", str(classes),
               *(str(p) for p in source_files(wanted.sources) if p.suffix == ".java")]
    try:
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=_BUILD_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise JvmShimUnavailableError(f"running {javac} failed: {error}") from None
    if done.returncode != 0:
        output = (done.stderr or done.stdout).strip().splitlines()[:_ERROR_LINES]
        raise JvmShimUnavailableError(
            f"{javac} could not compile the shim against Spark {wanted.spark_version}"
            f" ({wanted.spark_jars}):\n" + "\n".join(output)
        )


def _write_jar(classes: Path, sources: Path, jar: Path) -> None:
    """A jar is a zip with a manifest; Python's zipfile makes one without the ``jar`` tool.

    Resources (the ``META-INF/services`` registration of the data source) are the
    source tree's non-Java files, stored at their relative paths.
    """
    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n"
                         "Created-By: statesource\r\n\r\n")
        for path in sorted(classes.rglob("*.class")):
            archive.write(path, path.relative_to(classes).as_posix())
        for path in source_files(sources):
            if path.suffix != ".java":
                archive.write(path, path.relative_to(sources).as_posix())
