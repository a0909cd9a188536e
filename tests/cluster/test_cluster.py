"""The whole surface on a Spark standalone cluster, on S3 (moto, IAM auth on) and from a
Spark Connect client that cannot see the storage, against local mode on local files.

The servers are started once per test session by the fixtures below (tests/cluster/
processes.py) and stopped at its end. Three runs of tests/cluster/surface.py must agree:
local mode on local files (in this process), ``spark-submit`` to the standalone cluster on
S3 (credentials reach executors as ``spark.executorEnv.*``), and a Connect client, holding
no credentials, on S3 (the Connect server's driver plans and commits every write). New
Flink savepoints, derived from one on S3, go to local directories in local mode and to S3
from the Connect client, whose server runs the writer's tasks on the same cluster (they
stage their sections beside the output, on S3; the driver publishes); the
``spark-submit`` run leaves the writer out, as it would only repeat it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from processes import (
    SPARK_HOME,
    S3Server,
    SparkCluster,
    executor_credentials,
    python_env,
)
from statesource.format.storage import resolve
from statesource.keygroups import assign_to_key_group
from statesource.spark.functions import register_functions
from statesource.spark.jvm.session import LOADED_CONF
from statesource.types import key_type
from surface import SAVEPOINT_WRITER, produce, run_surface, run_tool, savepoint_dir


def upload(s3: S3Server, source: Path, key: str) -> str:
    """``source`` copied to ``key`` in the bucket; its URI."""
    uri = s3.uri(key)
    target = resolve(uri)
    filesystem = pafs.S3FileSystem(access_key=s3.access_key, secret_key=s3.secret_key,
                                   endpoint_override=s3.endpoint, scheme="http",
                                   region="us-east-1")
    pafs.copy_files(str(source), target.path, destination_filesystem=filesystem)
    return uri


def with_credentials(s3: S3Server) -> dict[str, str]:
    return python_env(**s3.credentials_env())


def s3_tool(s3: S3Server):  # noqa: ANN201 - a callable for run_surface
    return lambda arguments: run_tool(arguments, with_credentials(s3))


def produce_on_s3(s3: S3Server, key: str, scratch: Path) -> str:
    local = scratch / key
    produce(str(local))
    return upload(s3, local, key)


@pytest.fixture(scope="session")
def local_results(spark, tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("surface-local")
    produce(str(base / "root"))
    savepoint = base / "savepoint"
    shutil.copytree(savepoint_dir(), savepoint)
    from statesource.spark import register

    register(spark)
    return run_surface(spark, str(base / "root"), str(savepoint), str(base / "imported"),
                       str(base / "savepoints"), run_tool)


def test_spark_submit_to_the_cluster_on_s3_matches_local_mode(
        cluster: SparkCluster, s3: S3Server, local_results: dict, tmp_path: Path) -> None:
    root = produce_on_s3(s3, "submit/root", tmp_path)
    savepoint = upload(s3, savepoint_dir(), "submit/savepoint")
    result = tmp_path / "result.json"
    started = time.monotonic()
    # The Flink-savepoint writer runs from the Connect client below, on this same cluster
    # (planning on the driver, tasks on these executors): it would only repeat it here.
    done = _spark_submit(cluster, s3, [root, savepoint, s3.uri("submit/imported"), "",
                                       str(result)], tmp_path)
    assert done == 0, (tmp_path / "submit.log").read_text()[-5000:]
    out = json.loads(result.read_text())
    refused = out.pop("without executor credentials")
    assert out.pop("session settings") == {  # session() left the cluster's settings alone
        "spark.master": cluster.master_url, "spark.sql.shuffle.partitions": None,
        "spark.ui.enabled": "false"}  # unset (Spark's default), and as spark-submit was told
    assert out == {name: result for name, result in local_results.items()
                   if name != SAVEPOINT_WRITER}, f"took {time.monotonic() - started:.0f} s"
    assert "executor on host" in refused and "spark.executorEnv.AWS_ACCESS_KEY_ID" in refused
    assert "statesource-cluster/submit/root" in refused


def _spark_submit(cluster: SparkCluster, s3: S3Server, arguments: list[str], work: Path) -> int:
    import subprocess

    with open(work / "submit.log", "wb") as log:
        return subprocess.run(
            [str(SPARK_HOME / "bin" / "spark-submit"), "--master", cluster.master_url,
             "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2",
             "--conf", "spark.sql.python.filterPushdown.enabled=true",
             "--conf", "spark.ui.enabled=false", *executor_credentials(s3),
             str(Path(__file__).parent / "surface.py"), *arguments],
            env=with_credentials(s3), stdout=log, stderr=subprocess.STDOUT, timeout=600,
            cwd=work).returncode


def test_connect_client_without_storage_access_matches_local_mode(
        connect_url: str, s3: S3Server, local_results: dict, tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    credentials = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                   "AWS_PROFILE")
    assert not any(name in os.environ for name in credentials)  # the client has none
    root = produce_on_s3(s3, "connect/root", tmp_path)
    savepoint = upload(s3, savepoint_dir(), "connect/savepoint")
    environment = dict(os.environ)  # a Connect builder switches pyspark to Connect mode
    client = SparkSession.builder.remote(connect_url).create()
    try:
        out = run_surface(client, root, savepoint, s3.uri("connect/imported"),
                          s3.uri("connect/savepoints"), s3_tool(s3))
        # The shim cannot be loaded from a client: refused before anything reaches the server,
        # and the key-group functions are the Python ones.
        assert register_functions(client) == "python"
        assert client.conf.get(LOADED_CONF, None) is None
        computed = client.sql("SELECT flink_key_group('user-7', 128)").first()[0]
    finally:
        client.stop()
        os.environ.clear()  # ... through the environment: the other tests' sessions are classic
        os.environ.update(environment)
    assert out == local_results
    assert computed == assign_to_key_group("user-7", key_type("string"), 128)
