"""Forcing interleavings between real processes: a child paused at a named call.

The child (``python -c CODE``) and every Python process it starts (the Python
workers of its Spark, where a commit on the driver runs) wrap ``MODULE.NAME`` (a
function, or ``Class.method``; tests/racehook/sitecustomize.py plants it, told by
the environment) so that its first call creates ``HOOKDIR/reached`` and waits for
``HOOKDIR/go`` before going on. The parent
(:class:`Paused`) starts it, waits until it is paused, does what the race
needs in other processes, and then resumes or kills it (``kill -9``). Nothing
in statesource knows of this: the pause is planted from outside, at the exact
call a real scheduler could have stalled.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from statesource.format import Checkpoint

REPO = Path(__file__).resolve().parent.parent
PYTHON_PATH = os.pathsep.join([str(REPO), str(REPO / "statesource" / "spark" / "autoload")])
HOOK_PATH = str(Path(__file__).resolve().parent / "racehook")
PAUSE = "STATESOURCE_RACE_PAUSE"
WAIT_SECONDS = 120


def cli(*args: str) -> str:
    """CODE that runs the statesource command line with ``args`` and exits with its status."""
    return f"from statesource.cli import main; raise SystemExit(main({list(args)!r}))"


def run(code: str, timeout: float = WAIT_SECONDS) -> subprocess.CompletedProcess[str]:
    """Run CODE in a fresh Python process (the other side of a race)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=child_env(), check=False)


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": PYTHON_PATH}


class Paused:
    """A child process paused at the first call of ``target`` while running ``code``."""

    def __init__(self, hook_dir: Path, target: str, code: str) -> None:
        hook_dir.mkdir(parents=True, exist_ok=True)
        self.hook_dir = hook_dir
        env = child_env()
        env["PYTHONPATH"] = os.pathsep.join([HOOK_PATH, env["PYTHONPATH"]])
        env[PAUSE] = f"{hook_dir}|{target}"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        deadline = time.monotonic() + WAIT_SECONDS
        while not (hook_dir / "reached").exists():
            if self.process.poll() is not None:
                out, err = self.process.communicate()
                raise AssertionError(f"the child ended before reaching {target}:\n{out}\n{err}")
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError(f"the child did not reach {target} in {WAIT_SECONDS} s")
            time.sleep(0.02)

    def resume(self) -> subprocess.CompletedProcess[str]:
        (self.hook_dir / "go").touch()
        out, err = self.process.communicate(timeout=WAIT_SECONDS)
        return subprocess.CompletedProcess(self.process.args, self.process.returncode, out, err)

    def kill(self) -> None:
        """``kill -9`` of the child (and of any process it started in its session)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.communicate(timeout=WAIT_SECONDS)


def write_demo(root: Path) -> Path:
    """Three checkpoints of the demo job (keyed and operator state) under ``root``."""
    done = run(cli("demo", "--events", "3000", "--checkpoint-every", "1000",
                   "--output", str(root), "--no-spark"))
    assert done.returncode == 0, done.stderr
    return root


def files_on_disk(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def referenced(root: Path) -> set[str]:
    """The metadata and data files of every complete checkpoint under ``root``."""
    files = set()
    for metadata in root.glob("chk-*/_metadata.json"):
        checkpoint = Checkpoint.open(str(metadata.parent))
        files |= {metadata.parent.name + "/_metadata.json",
                  *checkpoint.metadata.referenced_files()}
    return files


def verify_all(root: Path) -> list[int]:
    ids = sorted(int(m.parent.name[4:]) for m in root.glob("chk-*/_metadata.json"))
    for checkpoint_id in ids:
        Checkpoint.open(str(root), checkpoint_id=checkpoint_id).verify()
    return ids


def age(root: Path, seconds: float = 2 * 3600) -> None:
    """Make everything under ``root`` ``seconds`` older, as if ``retain`` ran that much later:
    then ``--older-than 1h`` (its least) takes what killed writers left for abandoned."""
    for path in [root, *root.rglob("*")]:
        status = path.stat()
        os.utime(path, (status.st_atime - seconds, status.st_mtime - seconds))


def retain(root: Path, *args: str) -> str:
    """Run ``statesource retain`` in its own process; it must succeed."""
    done = run(cli("retain", str(root), *args))
    assert done.returncode == 0, done.stderr
    return done.stdout



def pause_from_environment() -> None:
    """The pause ``STATESOURCE_RACE_PAUSE`` names, planted in this process (tests/racehook)."""
    hook_dir, _, target = os.environ[PAUSE].partition("|")
    _pause_at(Path(hook_dir), target)


def _pause_at(hook_dir: Path, target: str) -> None:
    module_name, _, path = target.partition(":")
    owner: object = importlib.import_module(module_name)
    *outer, attribute = path.split(".")
    for name in outer:
        owner = getattr(owner, name)
    original = getattr(owner, attribute)
    calls = []

    def paused(*args: object, **kwargs: object) -> object:
        if not calls and not (hook_dir / "go").exists():  # the first call of any process
            calls.append(1)
            (hook_dir / "reached").touch()
            deadline = time.monotonic() + WAIT_SECONDS
            while not (hook_dir / "go").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
        return original(*args, **kwargs)

    setattr(owner, attribute, paused)

