"""The command line's ``rescale --max-parallelism`` and ``import-flink`` on S3 (rescale failed
there: the checkpoint's path lost its scheme and query on the way to Spark), with the
credentials in the URI, which must reach the Spark tasks and never be printed nor logged."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from processes import S3Server
from statesource.cli import main
from statesource.format.reader import Checkpoint
from statesource.spark import register
from statesource.spark.jvm import plan as planning
from statesource.spark.options import parse_read_options
from statesource.spark.read.keyed import open_target
from surface import FLINK_OPERATOR, OPERATOR, produce, savepoint_dir


def uri_with_credentials(s3: S3Server, key: str) -> tuple[str, str]:
    """An S3 URI of ``key`` holding the keys (as a user may type it), and the secret as
    written in it."""
    secret = quote(s3.secret_key, safe="")  # moto's secrets may hold '/' and '+'
    return (f"s3://{s3.access_key}:{secret}@{s3.bucket}/{key}?endpoint_override="
            f"{s3.endpoint}&scheme=http&region=us-east-1"), secret


def test_rescale_max_parallelism_on_s3_from_the_command_line(
        s3: S3Server, spark, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(type(spark), "stop", lambda self: None)  # the command stops its
    # session when done, which here is the test session's shared one
    uri, secret = uri_with_credentials(s3, "cli/root")
    produce(uri)
    before = Checkpoint.open(uri)
    register(spark)
    assert main(["rescale", uri, "--max-parallelism", "256"]) == 0
    printed = capsys.readouterr()
    assert s3.secret_key not in printed.out + printed.err
    assert secret not in printed.out + printed.err
    after = Checkpoint.open(uri)
    assert (after.checkpoint_id, after.operator(OPERATOR).max_parallelism) == (2, 256)
    for state in ("totals", "orders", "tags"):
        assert entries(after, state) == entries(before, state), state


def test_import_flink_to_s3_prints_no_credentials(s3: S3Server,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    uri, secret = uri_with_credentials(s3, "cli/imported")
    assert main(["import-flink", str(savepoint_dir()), uri]) == 0
    printed = capsys.readouterr().out
    assert s3.secret_key not in printed and secret not in printed
    assert f"s3://***@{s3.bucket}/cli/imported/chk-" in printed
    assert Checkpoint.open(uri).operator(FLINK_OPERATOR).keyed_states


def test_a_read_on_s3_says_it_falls_back_to_the_python_reader(
        s3: S3Server, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM reader reads local files only: its planner says why this read is Python's
    (once per reason), naming the checkpoint without its credentials."""
    uri, secret = uri_with_credentials(s3, "cli/fallback")
    produce(uri)
    monkeypatch.setattr(planning, "_logged", set())
    with caplog.at_level("WARNING", logger="statesource.jvm"):
        plan = planning.jvm_plan(open_target(parse_read_options(
            {"path": uri, "operator": OPERATOR, "state": "totals"})), {})
    assert not plan["servable"]
    (said,) = [r.getMessage() for r in caplog.records if "uses the Python reader" in r.getMessage()]
    assert f"s3://***@{s3.bucket}/cli/fallback" in said and "not on the local filesystem" in said
    assert secret not in said and s3.secret_key not in said


def entries(checkpoint: Checkpoint, state: str) -> list[str]:
    """Every row of ``state`` but its key group (which the rescale changes), sorted."""
    tables = checkpoint.read_keyed_state(state, operator=OPERATOR)
    return sorted(str(row) for table in tables
                  for row in table.drop_columns(["key_group"]).to_pylist())
