"""No process outlives the command that started Spark: real drivers, killed -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from statesource.spark.reaper import descendants
from tests.race import Paused, child_env, cli, run

STUBBORN = """
import subprocess, sys, time
from statesource.spark.reaper import watch
jvm = subprocess.Popen(["sh", "-c", "trap '' TERM HUP; sleep 600 & sleep 600"],
                       stdin=subprocess.DEVNULL)
watch(jvm.pid, 1.0)
print(jvm.pid, flush=True)
time.sleep(600)
"""


def wait_until_gone(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [pid for pid in pids if _alive(pid)]
        if not alive:
            return []
        time.sleep(0.2)
    return alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie has exited
        return stat.read().split(") ")[1][0] != "Z"


def test_the_reaper_kills_a_process_tree_that_ignores_its_driver_dying():
    driver = subprocess.Popen([sys.executable, "-c", STUBBORN], env=child_env(),
                              stdout=subprocess.PIPE, text=True)
    try:
        jvm = int(driver.stdout.readline())
        time.sleep(0.5)
        tree = [jvm, *descendants(jvm)]
        assert len(tree) >= 3  # the shell and both sleeps
        # The reaper waits for its driver's death: the tree outlives the grace by far. (Its
        # start-up, an interpreter importing statesource, takes seconds on a loaded machine:
        # a reaper that acted early would have killed within this watch.)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            assert all(_alive(pid) for pid in tree)
            time.sleep(0.2)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        assert wait_until_gone(tree, 20) == []
    finally:
        driver.kill()


@pytest.mark.spark
def test_a_driver_killed_9_mid_command_leaves_no_jvm_or_worker(tmp_path):
    root = tmp_path / "root"
    done = run(cli("demo", "--events", "2000", "--checkpoint-every", "1000",
                   "--output", str(root), "--no-spark"))
    assert done.returncode == 0, done.stderr
    command = Paused(tmp_path / "hook", "statesource.format.commit:_publish",
                     cli("rescale", str(root), "--max-parallelism", "256"))
    driver = command.process.pid
    spark = list(descendants(driver))
    assert any("java" in args for args in descendants(driver).values())
    assert any("pyspark" in args for args in descendants(driver).values())
    os.kill(driver, signal.SIGKILL)  # the driver alone, as an operator's kill -9 would
    command.process.communicate()
    assert wait_until_gone(spark, 60) == []
