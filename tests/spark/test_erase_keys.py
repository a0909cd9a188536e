"""``statesource.spark.erase_keys``: the caller only collects the keys through Spark; reading
and writing the savepoint (typing the keys as the operator's key type included) is the
driver's step, which is what lets a Spark Connect client erase (tests/cluster/ runs it from
one that cannot see the storage). Here the driver's step runs in this process, after a
pickle round trip as it travels, and the savepoint may be opened only inside it.

The truth is the base savepoint as the Python reader reads it, less the erased keys; that a
real Flink restores the result is tests/flink/operations/test_flink_savepoint_rewrite.py's.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from statesource.errors import TypeMismatchError
from statesource.flink.reader import FlinkCheckpoint
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.spark import erase_keys
from statesource.spark.write import erase as erase_module

BASE = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "mp256" / "canonical"


@pytest.fixture
def driver_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The savepoint opens only in a driver step, which gets its call pickled."""
    on_driver: list[bool] = []
    opened = FlinkSnapshot.open

    def guarded(*arguments: Any, **options: Any) -> FlinkSnapshot:
        assert on_driver, "the caller opened the savepoint"
        return opened(*arguments, **options)

    def commit(spark: Any, step: Callable[..., Any], *arguments: Any) -> Any:
        step, arguments = pickle.loads(pickle.dumps((step, arguments)))
        on_driver.append(True)
        try:
            return step(*arguments)
        finally:
            on_driver.pop()

    monkeypatch.setattr(FlinkSnapshot, "open", guarded)
    monkeypatch.setattr(erase_module, "commit_on_driver", commit)


def totals(path: Path) -> dict[int, float]:
    return {row["key"]: row["value"]
            for table in FlinkCheckpoint.open(str(path)).read_keyed_state("total",
                                                                          operator="stateful")
            for row in table.to_pylist()}


@pytest.fixture
def before() -> dict[int, float]:
    return totals(BASE)


def test_keys_are_erased_in_the_driver_step(spark, tmp_path, before, driver_only, monkeypatch):
    erased = sorted(before)[3:6]
    keys = spark.createDataFrame([(k,) for k in [*erased, erased[0], 10**12]], "key long")
    done = erase_keys(str(BASE), str(tmp_path / "erased"), "stateful", keys)
    assert done.missing == (10**12,)
    monkeypatch.undo()  # the test reads the result itself
    assert totals(tmp_path / "erased") == {k: v for k, v in before.items() if k not in erased}


def test_keys_of_another_type_are_refused_by_the_driver_step(spark, tmp_path, driver_only):
    keys = spark.createDataFrame([("7",)], "key string")
    with pytest.raises(TypeMismatchError, match="column key has type string"):
        erase_keys(str(BASE), str(tmp_path / "erased"), "stateful", keys)
    assert not (tmp_path / "erased").exists()
