"""New Flink savepoints written from S3 to S3 (moto in server mode, IAM auth on).

``rescale --max-parallelism``, ``erase`` and ``export-flink`` on the command line and a
Spark ``write_state(output=)`` in local mode each read a savepoint (or a statesource
checkpoint) on S3 and write a new savepoint there. Flink's S3 file system is not among its
jars, so each result is copied down and restored in a real Flink, which must see exactly
the state expected (tests/flink_fixture_checks.py, computed from the fixture job's input).

The commit on S3 is ``_metadata`` created only if absent: processes killed at each step of
a write (tests/race.py) leave state files and no ``_metadata``, and a rerun succeeds, and
``clean-savepoints`` then removes the killed write's files; two writers paused just before
their commit and released together leave exactly one savepoint, and the loser's files are
gone.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from flink_entries import entries_by_state
from pyspark.sql import functions as F
from test_cluster import upload
from test_s3_local_mode import uri_with_credentials

from flink_fixture_checks import FIXTURES, check_fixture, fixture_spec, fixture_truth
from flink_restore import FIXTURE_JOB, restore, values
from processes import S3Server
from statesource.cli import main
from statesource.flink.snapshot.directory import FlinkSnapshot
from statesource.flink.snapshot.leftovers import find_leftovers, remove_leftovers
from statesource.flink.snapshot.publish import referenced_streams
from statesource.flink.snapshot.remote_output import STATE_FILE
from statesource.format.storage import resolve
from statesource.spark import write_state
from surface import KEYS, OPERATOR, produce
from tests.race import Paused, cli

MP256 = FIXTURES / "mp256" / "canonical"


@pytest.fixture
def credentials(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys in the environment, where pyarrow's and boto3's default chains find them
    (and where the child processes of a race inherit them)."""
    for name, value in s3.credentials_env().items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def base(s3: S3Server, credentials: None) -> str:
    """The mp256 fixture savepoint, uploaded under a key of its own for this test."""
    return upload(s3, MP256, f"savepoints/{uuid.uuid4().hex}/base")


def output_of(s3: S3Server, base: str) -> str:
    return base.replace("/base?", "/out?")


def download(uri: str, target: Path) -> Path:
    """What a user does before Flink restores it here: the savepoint copied down whole."""
    location = resolve(uri)
    target.mkdir()
    pafs.copy_files(location.path, str(target), source_filesystem=location.filesystem)
    return target


def names(uri: str) -> list[str]:
    """The names of everything under ``uri``."""
    location = resolve(uri)
    return sorted(info.base_name for info in location.filesystem.get_file_info(
        pafs.FileSelector(location.path, allow_not_found=True, recursive=True)))


def beside(output: str) -> list[str]:
    """The names of what is in the output's parent directory, the output's own files aside:
    where a write's temporary work directory would be left."""
    parent = resolve(output).parent
    return sorted(info.base_name for info in parent.filesystem.get_file_info(
        pafs.FileSelector(parent.path, recursive=True)) if "/out/" not in info.path)


@pytest.mark.realflink
def test_rescale_from_s3_to_s3_restores_in_flink(s3: S3Server, base: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    output = output_of(s3, base)
    assert main(["rescale", base, "--max-parallelism", "1024", "--output", output]) == 0
    assert f"s3://{s3.bucket}/savepoints/" in capsys.readouterr().out
    truth = {**fixture_truth("mp256"), "max_parallelism": 1024}
    rows = restore(download(output, tmp_path / "copy"), fixture_spec(1024),
                   java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2)
    assert names(output).count("_metadata") == 1
    assert [name for name in beside(output) if name.startswith(".")] == []


@pytest.mark.realflink
def test_erase_from_s3_to_s3_restores_in_flink(s3: S3Server, base: str, tmp_path: Path) -> None:
    truth = fixture_truth("mp256")
    erased = sorted(int(k) for k in truth["stateful"])[:3]
    output = output_of(s3, base)
    assert main(["erase", base, "--operator", "stateful", "--output", output,
                 *[f"--key={key}" for key in erased]]) == 0
    rows = restore(download(output, tmp_path / "copy"), fixture_spec(256),
                   java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2, erased=erased)


@pytest.mark.realflink
def test_export_flink_from_s3_to_s3_restores_in_flink(s3: S3Server, credentials: None,
                                                      tmp_path: Path) -> None:
    produce(str(tmp_path / "root"))  # a statesource checkpoint: 60 string keys
    root = upload(s3, tmp_path / "root", "savepoints/export/root")
    output = s3.uri("savepoints/export/out")
    assert main(["export-flink", root, "--output", output]) == 0
    spec = {"max_parallelism": 128, "parallelism": 2, "operators": [{
        "uid": OPERATOR, "key": "String", "keyed_states": [
            {"name": "totals", "kind": "value", "value": "Long"},
            {"name": "orders", "kind": "list", "element": "Long"},
            {"name": "tags", "kind": "map", "user_key": "String", "user_value": "Long"}]}]}
    rows = restore(download(output, tmp_path / "copy"), spec)
    # what surface.produce put in, computed again here from its rule
    assert values(rows, OPERATOR, "totals") == {key: i * 10 for i, key in enumerate(KEYS)}
    assert values(rows, OPERATOR, "orders") == {
        key: [i * 100 + n for n in range(i % 4)] for i, key in enumerate(KEYS) if i % 4}
    assert {k: dict(v) for k, v in values(rows, OPERATOR, "tags").items()} == {
        key: {f"t{i % 3}": i} for i, key in enumerate(KEYS)}


@pytest.mark.realflink
def test_spark_write_state_from_s3_to_s3_restores_in_flink(spark, s3: S3Server, base: str,
                                                           tmp_path: Path) -> None:
    """The keys travel in the URIs: the shared session's Python workers were started without
    them in their environment."""
    keyed, _ = uri_with_credentials(s3, base.split(f"{s3.bucket}/", 1)[1].split("?")[0])
    output = keyed.replace("/base?", "/out?")
    total = (spark.read.format("flinkstate").options(operator="stateful", state="total")
             .load(keyed))
    info = write_state(total.select("key", (F.col("value") * 2).alias("value")), keyed,
                       "stateful", "total", output=output)
    assert info.path == output and s3.secret_key not in str(info.location)
    assert [name for name in beside(output) if name.startswith(".")] == []  # the tasks'
    # work directory is gone
    truth = fixture_truth("mp256")
    for want in truth["stateful"].values():
        want["total"] *= 2
    rows = restore(download(output, tmp_path / "copy"), fixture_spec(256),
                   java_sources=[FIXTURE_JOB])
    check_fixture(rows, truth, parallelism=2)


@pytest.mark.parametrize("command, fixture", [
    (["drop", "--operator", "stateful", "--state", "events"], "mp256"),
    (["migrate", "--skip-unmigratable"], "flink-1.20"),
])
def test_drop_and_migrate_from_s3_to_s3_write_what_they_write_locally(
        s3: S3Server, credentials: None, tmp_path: Path, command: list[str],
        fixture: str) -> None:
    """The other two writers, through the same publish: what statesource reads back from S3
    is what the same command wrote from local files to local files (whose Flink restores
    are tests/flink/operations/'s)."""
    source = FIXTURES / fixture / "canonical"
    base = upload(s3, source, f"savepoints/{uuid.uuid4().hex}/base")
    output = output_of(s3, base)
    assert main([command[0], base, *command[1:], "--output", output]) == 0
    assert main([command[0], str(source), *command[1:], "--output",
                 str(tmp_path / "local")]) == 0
    assert FlinkSnapshot.open(output).check_files() > 0
    assert entries_by_state(output) == entries_by_state(tmp_path / "local")


def rescale_code(base: str, output: str) -> str:
    return cli("rescale", base, "--max-parallelism", "1024", "--output", output)


@pytest.mark.parametrize("step", [
    "statesource.flink.snapshot.publish:SavepointWriter.write_file",  # nothing written yet
    "statesource.flink.snapshot.publish:put_metadata",  # every state file, no _metadata
])
def test_a_write_killed_at_each_step_leaves_no_metadata_and_a_rerun_succeeds(
        s3: S3Server, base: str, tmp_path: Path, step: str) -> None:
    output = output_of(s3, base)
    paused = Paused(tmp_path / "hook", step, rescale_code(base, output))
    paused.kill()
    left = names(output)
    assert "_metadata" not in left and all(STATE_FILE.fullmatch(name) for name in left)
    assert bool(left) == step.endswith("put_metadata")
    with pytest.raises(Exception, match="_metadata"):
        FlinkSnapshot.open(output)
    assert main(["rescale", base, "--max-parallelism", "1024", "--output", output]) == 0
    rescaled = FlinkSnapshot.open(output)
    assert rescaled.check_files() > 0
    assert {op.max_parallelism for op in rescaled.operators} == {1024}


def test_clean_savepoints_removes_the_files_a_killed_write_left_on_s3(
        s3: S3Server, base: str, tmp_path: Path) -> None:
    """Killed before its commit, then rerun: the new savepoint is published next to the
    killed write's files, which no ``_metadata`` names. Once old enough they are found (the
    store's clock cannot be moved back: the search is asked two hours later instead) and
    removed, and the savepoint keeps every file it names."""
    output = output_of(s3, base)
    Paused(tmp_path / "hook", "statesource.flink.snapshot.publish:put_metadata",
           rescale_code(base, output)).kill()
    orphaned = names(output)
    assert main(["rescale", base, "--max-parallelism", "1024", "--output", output]) == 0
    parent = resolve(output).parent
    assert find_leftovers(parent, timedelta(hours=1)).orphans == ()
    later = datetime.now(timezone.utc) + timedelta(hours=2)
    found = find_leftovers(parent, timedelta(hours=1), now=later)
    assert sorted(location.name for location, _ in found.orphans) == orphaned
    assert found.staging == () and found.bytes > 0
    assert f"s3://{s3.bucket}/" in str(found.orphans[0][0])
    remove_leftovers(found)
    snapshot = FlinkSnapshot.open(output)
    assert snapshot.check_files() == len(names(output)) - 1
    assert set(names(output)) - {"_metadata"} == named_files(snapshot)
    assert find_leftovers(parent, timedelta(hours=1), now=later).bytes == 0


def named_files(snapshot: FlinkSnapshot) -> set[str]:
    return {stream.path for stream in referenced_streams(snapshot.metadata)
            if stream.inline is None}


def test_two_writers_racing_to_one_output_leave_exactly_one_savepoint(
        s3: S3Server, base: str, tmp_path: Path) -> None:
    """Both pass their checks and write every state file, then commit at once: S3's
    conditional create lets one publish; the other says so and removes its files."""
    output = output_of(s3, base)
    racers = [Paused(tmp_path / f"hook-{i}", "statesource.flink.snapshot.publish:put_metadata",
                     rescale_code(base, output)) for i in range(2)]
    for racer in racers:
        (racer.hook_dir / "go").touch()
    done = [racer.process.communicate(timeout=120) + (racer.process.returncode,)
            for racer in racers]
    assert sorted(code for _, _, code in done) == [0, 1], done
    (lost,) = [err for _, err, code in done if code == 1]
    assert "published by another writer meanwhile" in lost and len(lost.splitlines()) == 1
    assert s3.secret_key not in lost
    # the loser's files are gone
    assert set(names(output)) - {"_metadata"} == named_files(FlinkSnapshot.open(output))


def test_an_existing_savepoint_on_s3_is_never_overwritten(s3: S3Server, base: str,
                                                          capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    output = output_of(s3, base)
    assert main(["rescale", base, "--max-parallelism", "1024", "--output", output]) == 0
    before = names(output)
    capsys.readouterr()
    assert main(["rescale", base, "--max-parallelism", "512", "--output", output]) == 1
    assert "already holds a savepoint" in capsys.readouterr().err
    assert names(output) == before


def test_an_unreachable_endpoint_fails_at_once_naming_it(capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "very-secret")
    output = ("s3://AKIDEXAMPLE:very-secret@bucket/out?endpoint_override=127.0.0.1:9"
              "&scheme=http&region=us-east-1")
    assert main(["rescale", str(MP256), "--max-parallelism", "1024", "--output", output]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert "cannot reach savepoint output s3://***@bucket/out" in line
    assert "127.0.0.1:9" in line and "very-secret" not in line
    assert "region" not in line.replace("region=us-east-1", "")


def test_outputs_inside_an_s3_input_are_refused(s3: S3Server, base: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    inside = base.replace("/base?", "/base/new?")
    assert main(["rescale", base, "--max-parallelism", "1024", "--output", inside]) == 1
    assert "inside" in capsys.readouterr().err
    assert "new" not in {Path(name).name for name in names(base)}
