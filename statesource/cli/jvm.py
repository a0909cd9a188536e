"""``statesource jvm build|status``: build the Java shim ahead of time, or say why it cannot."""

from __future__ import annotations

import argparse
import time

from statesource.jvm import build, shim_status, target
from statesource.jvm.status import FALLBACKS, SERVED


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "jvm", help="build the Java shim or show whether it is available",
        description="The Java shim gives Spark SQL Flink-exact key-group functions that run in"
        " the JVM. It is compiled with javac against the installed pyspark's jars at first use"
        " and cached per user; without it everything works on the (slower) Python path.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    build_parser = actions.add_parser("build", help="compile the shim now (rebuilds if cached)")
    build_parser.set_defaults(run=run_build)
    status_parser = actions.add_parser(
        "status", help="say what is available and why not; exit 1 when the shim is unusable")
    status_parser.set_defaults(run=run_status)


def run_build(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    jar = build(target())
    print(f"built {jar} in {time.perf_counter() - started:.1f} s")
    return 0


def run_status(args: argparse.Namespace) -> int:
    status = shim_status()
    wanted = status.target
    if wanted is not None:
        print(f"Spark {wanted.spark_version}: {wanted.spark_jars}")
        print(f"Java sources: {wanted.sources}")
        print(f"jar: {wanted.jar} ({'built' if status.built else 'not built yet'})")
    print(f"javac: {status.javac or 'not found'}")
    for problem in status.problems:
        print(f"problem: {problem}")
    if status.built or status.buildable:
        when = "" if status.built else " (built at first use, or now with `statesource jvm build`)"
        print(f"JVM shim: available{when}")
        print(f"the JVM reader serves {SERVED}; these reads fall back to the Python reader,"
              " each saying why in a log line:")
        for case in FALLBACKS:
            print(f"  - {case}")
        return 0
    print("JVM shim: unavailable; statesource uses its Python implementation instead")
    return 1
