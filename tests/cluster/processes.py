"""Real servers for the cluster tests: moto's S3 server with IAM auth on, a Spark standalone
master with two one-core workers, and a Spark Connect server, all on 127.0.0.1.

Each runs in its own process group (a worker's executors and their Python workers are its
children), is waited for with a deadline, and is stopped (TERM, then KILL) with its whole
group: nothing a test started outlives the test session.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).parent
START_SECONDS = 180.0
BUCKET = "statesource-cluster"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def python_env(**extra: str) -> dict[str, str]:
    """The environment every process gets: this interpreter for Python workers, the
    worktree's statesource first on the path, no AWS credentials (given explicitly
    where a process should have them), 127.0.0.1 for every Spark address."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    path = [str(ROOT), str(ROOT / "statesource" / "spark" / "autoload")]
    env.update(PYTHONPATH=os.pathsep.join(path + [env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(SPARK_HOME),
               AWS_EC2_METADATA_DISABLED="true", **extra)  # no instance role to look for
    return env


@dataclass
class Process:
    """One started server, its log file, and how to stop it with everything it spawned."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, grace: float = 15.0) -> None:
        if self.popen.poll() is None:
            _signal_group(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(grace)
        _signal_group(self.popen.pid, signal.SIGKILL)  # executors and Python workers too
        if self.popen.poll() is None:
            self.popen.wait(grace)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


@dataclass
class Processes:
    """Everything started so far, stopped in reverse order."""

    logs: Path
    started: list[Process] = field(default_factory=list)

    def start(self, name: str, command: list[str], env: dict[str, str]) -> Process:
        log = self.logs / f"{name}.log"
        with open(log, "wb") as out:
            popen = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True,
                                     cwd=self.logs)
        process = Process(name, popen, log)
        self.started.append(process)
        return process

    def stop_all(self) -> None:
        for process in reversed(self.started):
            process.stop()
        self.started.clear()


def wait_for(process: Process, ready: str, deadline: float) -> None:
    """Until ``ready`` appears in the process's log; fails with the log's tail otherwise."""
    while time.monotonic() < deadline:
        if ready in process.log_text():
            return
        if not process.alive():
            break
        time.sleep(0.2)
    tail = process.log_text()[-3000:]
    state = "exited" if not process.alive() else "is not ready"
    raise RuntimeError(f"{process.name} {state} (waited for {ready!r}); log tail:\n{tail}")


def wait_for_port(process: Process, port: int, deadline: float) -> None:
    while time.monotonic() < deadline and process.alive():
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{process.name} does not listen on {port}:\n{process.log_text()[-3000:]}")


@dataclass(frozen=True)
class S3Server:
    """moto in server mode with IAM authentication on, one bucket, one user's keys."""

    endpoint: str  # host:port
    access_key: str
    secret_key: str
    bucket: str

    def uri(self, key: str) -> str:
        """An ``s3://`` URI of ``key`` in the bucket, its endpoint in the query."""
        return (f"s3://{self.bucket}/{key}?endpoint_override={self.endpoint}&scheme=http"
                "&region=us-east-1")

    def credentials_env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}


def start_s3(processes: Processes) -> S3Server:
    """moto with auth on: the first requests (creating a user, its keys and its policy) run
    unauthenticated, every later one must be signed with that user's keys."""
    import boto3

    port = free_port()
    process = processes.start(
        "moto", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        python_env(INITIAL_NO_AUTH_ACTION_COUNT="4"))
    wait_for_port(process, port, time.monotonic() + 60)
    endpoint = f"http://127.0.0.1:{port}"
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
    iam.create_user(UserName="statesource")
    keys = iam.create_access_key(UserName="statesource")["AccessKey"]
    policy = iam.create_policy(PolicyName="everything", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
    iam.attach_user_policy(UserName="statesource", PolicyArn=policy["Policy"]["Arn"])
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=keys["AccessKeyId"],
                      aws_secret_access_key=keys["SecretAccessKey"])
    s3.create_bucket(Bucket=BUCKET)
    return S3Server(f"127.0.0.1:{port}", keys["AccessKeyId"], keys["SecretAccessKey"], BUCKET)


@dataclass(frozen=True)
class SparkCluster:
    master_url: str


def spark_class(*arguments: str) -> list[str]:
    return [str(SPARK_HOME / "bin" / "spark-class"), *arguments]


def start_spark(processes: Processes, workers: int = 2) -> SparkCluster:
    """A standalone master and ``workers`` one-core workers (their executors get no
    credentials: applications pass them as ``spark.executorEnv.*``)."""
    deadline = time.monotonic() + START_SECONDS
    port = free_port()
    master = processes.start("master", spark_class(
        "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
        "--webui-port", str(free_port())), python_env(SPARK_DAEMON_MEMORY="256m"))
    wait_for(master, "I have been elected leader", deadline)
    master_url = f"spark://127.0.0.1:{port}"
    for number in range(workers):
        work = processes.logs / f"worker-{number}"
        work.mkdir(exist_ok=True)
        worker = processes.start(f"worker-{number}", spark_class(
            "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
            "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(work),
            master_url), python_env(SPARK_DAEMON_MEMORY="256m"))
        wait_for(worker, "Successfully registered with master", deadline)
    return SparkCluster(master_url)


def start_connect(processes: Processes, cluster: SparkCluster, s3: S3Server) -> str:
    """A Spark Connect server on ``cluster`` (an application holding every core while it
    runs), with credentials for its driver and executors; its ``sc://`` URL."""
    deadline = time.monotonic() + START_SECONDS
    connect_port = free_port()
    connect = processes.start("connect", [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master", cluster.master_url, "--name", "statesource-connect",
        "--conf", f"spark.connect.grpc.binding.port={connect_port}",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2",
        "--conf", "spark.driver.memory=768m",
        "--conf", "spark.sql.python.filterPushdown.enabled=true",
        *executor_credentials(s3), "spark-internal"],
        python_env(**s3.credentials_env()))
    wait_for_port(connect, connect_port, deadline)
    return f"sc://127.0.0.1:{connect_port}"


def executor_credentials(s3: S3Server) -> list[str]:
    """How credentials reach executors: the application's ``spark.executorEnv.*``."""
    return [argument for name, value in s3.credentials_env().items()
            for argument in ("--conf", f"spark.executorEnv.{name}={value}")]
