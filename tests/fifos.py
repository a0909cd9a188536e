"""FIFOs in place of a snapshot's files: a reader that opened one would block forever."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest


def fifo_in_place_of(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def opened_without_hanging(action: Callable[[], object]) -> BaseException | None:
    """Run ``action`` in a thread; the error it raised, if any. A reader blocked on a FIFO
    would never return, so the test fails after 20 s instead."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    if thread.is_alive():
        pytest.fail("the reader blocked opening a FIFO")
    return outcome[0]
