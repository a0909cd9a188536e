"""The command line's ``rescale --max-parallelism`` on S3 (it failed there: the checkpoint's
path lost its scheme and query on the way to Spark), with the credentials in the URI, which
must reach the Spark tasks and never be printed."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from processes import S3Server
from statesource.cli import main
from statesource.format.reader import Checkpoint
from statesource.spark import register
from surface import OPERATOR, produce


def test_rescale_max_parallelism_on_s3_from_the_command_line(
        s3: S3Server, spark, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(type(spark), "stop", lambda self: None)  # the command stops its
    # session when done, which here is the test session's shared one
    secret = quote(s3.secret_key, safe="")  # moto's secrets may hold '/' and '+'
    uri = (f"s3://{s3.access_key}:{secret}@{s3.bucket}/cli/root?endpoint_override="
           f"{s3.endpoint}&scheme=http&region=us-east-1")
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


def entries(checkpoint: Checkpoint, state: str) -> list[str]:
    """Every row of ``state`` but its key group (which the rescale changes), sorted."""
    tables = checkpoint.read_keyed_state(state, operator=OPERATOR)
    return sorted(str(row) for table in tables
                  for row in table.drop_columns(["key_group"]).to_pylist())
