"""The driver-side steps' protocol without Spark (statesource.spark.driver): what a write's
commit leaves on the driver's disk, how the caller takes it back, and the refusals.

Spark runs these same objects (``DriverCallSource``'s writer commits, its reader hands the
outcome on); the whole round trip through real sessions is tested in tests/cluster/.
"""

from __future__ import annotations

import os
import stat

import pytest
from pyspark.sql.datasource import InputPartition

from statesource.errors import CheckpointExistsError, InvalidArgumentError
from statesource.spark import driver


@pytest.fixture(autouse=True)
def driver_temp(tmp_path, monkeypatch):
    """The driver's temporary directory, one per test."""
    monkeypatch.setattr(driver.tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _commit(function, *arguments, token: str = "t0ken") -> None:
    source = driver.DriverCallSource({"call": driver._encode((function, arguments)),
                                      "token": token})
    writer = source.writer(None, False)
    writer.commit([writer.write(iter([("row",)]))])


def _read(function, *arguments):
    """What ``call_on_driver`` does with the one row the source's reader returns."""
    reader = driver.DriverCallSource({"call": driver._encode((function, arguments))}).reader(None)
    ((outcome,),) = list(reader.read(InputPartition(0)))
    return driver._outcome(outcome)


def _exists(path: str) -> None:
    raise CheckpointExistsError(f"checkpoint {path} already exists")


def test_a_commit_outcome_is_taken_back_once_as_the_function_returned_it(driver_temp):
    _commit(divmod, 17, 5)
    assert _read(driver.take_result, "t0ken") == (3, 2)
    assert os.listdir(driver_temp / driver._RESULT_DIR) == []
    with pytest.raises(InvalidArgumentError, match="no commit outcome t0ken on the driver"):
        _read(driver.take_result, "t0ken")


def test_a_commit_that_failed_raises_its_own_exception_for_the_caller():
    _commit(_exists, "chk-3")
    with pytest.raises(CheckpointExistsError, match="checkpoint chk-3 already exists"):
        _read(driver.take_result, "t0ken")


def test_a_planning_call_returns_its_result_or_raises_its_exception():
    assert _read(sorted, [3, 1, 2]) == [1, 2, 3]
    with pytest.raises(CheckpointExistsError, match="chk-9"):
        _read(_exists, "chk-9")


def test_outcomes_are_kept_where_only_the_driver_user_reads_them(driver_temp):
    _commit(divmod, 1, 1)
    mode = stat.S_IMODE(os.stat(driver_temp / driver._RESULT_DIR).st_mode)
    assert mode & 0o077 == 0, oct(mode)


@pytest.mark.parametrize("token", ["../escape", "a/b", "", "x.y"])
def test_a_token_that_is_not_a_bare_name_is_refused(driver_temp, token):
    with pytest.raises(InvalidArgumentError, match="invalid commit token"):
        _commit(divmod, 1, 1, token=token)
    with pytest.raises(InvalidArgumentError, match="invalid commit token"):
        driver.take_result(token)
    assert not (driver_temp / "escape").exists()


def test_the_source_without_its_call_option_is_refused():
    with pytest.raises(InvalidArgumentError, match="statesource-driver needs option call"):
        driver.DriverCallSource({}).reader(None)
    with pytest.raises(InvalidArgumentError, match="statesource-driver needs option call"):
        driver.DriverCallSource({"token": "abc"}).writer(None, False).commit([])
