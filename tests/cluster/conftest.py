"""The servers of the cluster tests, started once per test session and stopped at its end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from processes import Processes, S3Server, SparkCluster, start_connect, start_s3, start_spark


@pytest.fixture(scope="session")
def cluster_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    processes = Processes(tmp_path_factory.mktemp("cluster-logs"))
    try:
        yield processes
    finally:
        processes.stop_all()


@pytest.fixture(scope="session")
def s3(cluster_processes: Processes) -> S3Server:
    return start_s3(cluster_processes)


@pytest.fixture(scope="session")
def cluster(cluster_processes: Processes) -> SparkCluster:
    return start_spark(cluster_processes)


@pytest.fixture(scope="session")
def connect_url(cluster_processes: Processes, cluster: SparkCluster, s3: S3Server) -> str:
    """Started after the spark-submit test's application has ended (both use every core)."""
    return start_connect(cluster_processes, cluster, s3)
