"""A tmpfs of a given size mounted for one test: real ``ENOSPC`` (and, remounted read-only,
``EROFS``) where no mock would do. Mounting needs root with ``CAP_SYS_ADMIN``: elsewhere the
test is skipped, saying why."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """``path`` (created) with a tmpfs of ``size`` (``8k``, ``4m``) mounted on it, unmounted
    after."""
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(path)], capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"no tmpfs can be mounted here: {mounted.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=True)
