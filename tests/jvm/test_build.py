"""Building and locating the Java shim: cache key, atomic publish, concurrent builders, fallback.

These compile with the machine's javac (a JDK is part of the development setup); the
missing-javac cases simulate a JRE-only machine with an environment that has none.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pyspark
import pytest

from statesource.cli import main
from statesource.errors import JvmShimUnavailableError
from statesource.jvm import build, ensure_jar, find_javac, shim_status, target
from statesource.jvm.build import CACHE_ENV, sources_dir

ROOT = Path(__file__).resolve().parents[2]
SHIM_CLASSES = {"org/statesource/shim/FlinkKeyGroups.class",
                "org/statesource/shim/FlinkKeyGroupExpression.class",
                "org/statesource/shim/FlinkOperatorIndexUdf.class"}


def no_jdk_environ(tmp_path: Path) -> dict[str, str]:
    """An environment in which neither JAVA_HOME nor PATH leads to java or javac."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return {"PATH": str(empty), CACHE_ENV: str(tmp_path / "cache")}


def with_jdk_environ(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env[CACHE_ENV] = str(tmp_path / "cache")
    return env


def leftovers(cache: Path) -> list[str]:
    return [p.name for p in cache.iterdir() if p.name.startswith(".build-")]


def test_first_use_builds_a_jar_then_reuses_it_without_javac(tmp_path):
    env = with_jdk_environ(tmp_path)
    jar = ensure_jar(env)
    assert jar.parent == tmp_path / "cache" and jar.name.endswith(".jar")
    with zipfile.ZipFile(jar) as archive:
        names = set(archive.namelist())
        assert archive.testzip() is None
    assert names >= SHIM_CLASSES and "META-INF/MANIFEST.MF" in names
    assert leftovers(jar.parent) == []
    built_at = jar.stat().st_mtime_ns
    # A cached jar serves a machine that has since lost its JDK.
    assert ensure_jar({**no_jdk_environ(tmp_path), CACHE_ENV: str(jar.parent)}) == jar
    assert jar.stat().st_mtime_ns == built_at


def test_cache_key_follows_the_sources_and_the_spark_version(tmp_path):
    env = with_jdk_environ(tmp_path)
    copy = tmp_path / "src"
    shutil.copytree(sources_dir(), copy)
    assert target(env, copy).jar == target(env).jar
    assert target(env).jar.name.startswith(f"statesource-shim-spark{pyspark.__version__}-")
    java = next(copy.rglob("FlinkKeyGroups.java"))
    java.write_text(java.read_text() + "\n// changed\n")
    assert target(env, copy).jar != target(env).jar
    fake_spark = tmp_path / "spark"
    (fake_spark / "jars").mkdir(parents=True)
    (fake_spark / "jars" / "spark-sql_2.13-9.9.9.jar").write_bytes(b"")
    other = target({**env, "SPARK_HOME": str(fake_spark)})
    assert other.spark_version == "9.9.9" and "spark9.9.9-" in other.jar.name


def test_missing_javac_is_one_plain_error(tmp_path):
    env = no_jdk_environ(tmp_path)
    with pytest.raises(JvmShimUnavailableError, match="no javac found") as raised:
        ensure_jar(env)
    assert "JDK" in str(raised.value)
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    status = shim_status(env)
    assert not status.built and not status.buildable and status.javac is None
    assert any("no javac found" in problem for problem in status.problems)


def test_javac_found_in_java_home_and_beside_the_real_java(tmp_path):
    jdk = tmp_path / "jdk" / "bin"
    jdk.mkdir(parents=True)
    for tool in ("java", "javac"):
        (jdk / tool).write_text("#!/bin/sh\n")
        (jdk / tool).chmod(0o755)
    assert find_javac({"JAVA_HOME": str(tmp_path / "jdk"), "PATH": ""}) == jdk / "javac"
    on_path = tmp_path / "usr-bin"
    on_path.mkdir()
    (on_path / "java").symlink_to(jdk / "java")  # as /usr/bin/java -> /etc/alternatives -> jdk
    assert find_javac({"PATH": str(on_path)}) == jdk / "javac"


def test_a_failed_build_publishes_nothing_and_names_the_problem(tmp_path):
    env = with_jdk_environ(tmp_path)
    broken = tmp_path / "src" / "org" / "statesource" / "shim"
    broken.mkdir(parents=True)
    (broken / "Broken.java").write_text(
        "package org.statesource.shim;\nclass Broken { int x = ; }\n")
    wanted = target(env, tmp_path / "src")
    with pytest.raises(JvmShimUnavailableError, match="Broken.java") as raised:
        build(wanted, env)
    assert "could not compile" in str(raised.value)
    assert not wanted.jar.exists() and leftovers(wanted.jar.parent) == []


def test_two_processes_building_at_once_both_succeed(tmp_path):
    env = {**with_jdk_environ(tmp_path), "PYTHONPATH": str(ROOT)}
    code = "from statesource.jvm import build, target; print(build(target()))"
    builders = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [b.communicate(timeout=300) for b in builders]
    assert [b.returncode for b in builders] == [0, 0], outputs
    jars = {out.strip() for out, _ in outputs}
    assert len(jars) == 1
    jar = Path(jars.pop())
    with zipfile.ZipFile(jar) as archive:
        assert archive.testzip() is None and set(archive.namelist()) >= SHIM_CLASSES
    assert leftovers(jar.parent) == []


def test_cli_status_and_build(tmp_path, monkeypatch, capsys):
    jdk_env = with_jdk_environ(tmp_path)
    for name, value in no_jdk_environ(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    assert main(["jvm", "status"]) == 1
    out = capsys.readouterr().out
    assert "javac: not found" in out and "no javac found" in out and "unavailable" in out
    assert main(["jvm", "build"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("statesource jvm: error: no javac found") and "Traceback" not in err

    for name, value in jdk_env.items():
        monkeypatch.setenv(name, value)
    assert main(["jvm", "build"]) == 0
    assert "built " in capsys.readouterr().out
    assert main(["jvm", "status"]) == 0
    out = capsys.readouterr().out
    assert "(built)" in out and "JVM shim: available" in out


def test_installed_packages_carry_the_same_sources(tmp_path):
    """Wheels ship jvm-shim/src as package data statesource/jvm/shim-src (a symlink in the
    source tree): the jar an installed statesource builds is the jar of the source tree."""
    env = with_jdk_environ(tmp_path)
    installed = ROOT / "statesource" / "jvm" / "shim-src"
    assert installed.is_dir()
    assert target(env, installed).jar == target(env, ROOT / "jvm-shim" / "src").jar
