"""The whole user-facing surface, run on one session against one storage, as plain data.

``run_surface`` does what a user would (read, SQL, the metadata view, pushdown,
``write_state`` / ``rewrite`` / ``df.write``, both rescales, the change feed, a Flink
savepoint, ``import-flink``, ``retain`` and the Flink-savepoint writer) and returns what
each step gave, in a form that must be equal whichever session (local mode, a standalone
cluster, a Spark Connect client) and storage (local files, S3) ran it. Run as a script
(``spark-submit surface.py ROOT SAVEPOINT IMPORTED SAVEPOINTS OUT``) it does the same on the
session ``spark-submit`` made and writes the result as JSON, then checks what an executor
without credentials says.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SAVEPOINTS = ROOT.parent / "shared" / "flink-savepoints" / "java"
for entry in (str(ROOT), str(ROOT / "statesource" / "spark" / "autoload")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from statesource import CheckpointWriter, KeyedStateBackend  # noqa: E402
from statesource.state.descriptors import (  # noqa: E402
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
)

KEYS = [f"user-{i}" for i in range(60)]
FLINK_OPERATOR = "stateful"
OPERATOR = "orders-by-customer"
VOLATILE = ("timestamp", "path", "time")
"""Metadata-view columns that differ between runs by nature (where, and when)."""


def savepoint_dir() -> Path:
    """A real Flink savepoint (canonical, 108 kB): operator ``stateful`` keyed by strings."""
    return next((SAVEPOINTS / "canonical").glob("savepoint-*"))


def produce(root: str) -> None:
    """Checkpoint 1 under ``root``: value, list and map state of 60 string keys."""
    backend = KeyedStateBackend("string", max_parallelism=128)
    totals = backend.get_state(ValueStateDescriptor("totals", "long"))
    orders = backend.get_state(ListStateDescriptor("orders", "long"))
    tags = backend.get_state(MapStateDescriptor("tags", "string", "long"))
    for i, key in enumerate(KEYS):
        backend.set_current_key(key)
        totals.update(i * 10)
        for n in range(i % 4):
            orders.add(i * 100 + n)
        tags.put(f"t{i % 3}", i)
    with CheckpointWriter(root) as writer:
        writer.write(1, {OPERATOR: [backend]})


def rows(df: Any) -> list[str]:
    """A DataFrame's rows as sorted JSON texts (equal across sessions iff the rows are)."""
    return sorted(json.dumps(row.asDict(recursive=True), sort_keys=True, default=str)
                  for row in df.collect())


def run_tool(arguments: list[str], env: dict[str, str] | None = None) -> str:
    """``statesource`` on the command line (as a user runs it next to the storage)."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from statesource.cli import main;"
         " sys.exit(main(sys.argv[1:]))", *arguments],
        capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"statesource {' '.join(arguments)} failed:\n{done.stderr}")
    return done.stdout


def run_surface(spark: Any, root: str, savepoint: str, imported: str, savepoints: str | None,
                tool: Callable[[list[str]], str]) -> dict[str, Any]:
    """Every step on ``spark``; ``root`` holds :func:`produce`'s checkpoint 1, ``savepoint``
    a Flink savepoint, ``imported`` is empty, ``savepoints`` where new Flink savepoints go (a local
    directory that the driver and executors share, or a URI on an object store), or
    None to leave out the Flink-savepoint writer (:data:`SAVEPOINT_WRITER`). Steps that write
    check their own ids."""
    from pyspark.sql import functions as F

    from statesource.spark import (
        rescale_max_parallelism,
        rescale_parallelism,
        rewrite,
        write_state,
    )

    def read(state: str, path: str = root, **options: str) -> Any:
        if path == root:
            options.setdefault("operator", OPERATOR)
        return spark.read.format("flinkstate").options(state=state, **options).load(path)

    out: dict[str, Any] = {}
    for state in ("totals", "orders", "tags"):
        out[f"read {state}"] = rows(read(state))
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW totals USING flinkstate"
              f" OPTIONS (path '{root}', operator '{OPERATOR}', state 'totals')")
    out["sql"] = rows(spark.sql("SELECT operator_index, count(*) AS n, sum(value) AS total"
                                " FROM totals GROUP BY operator_index"))
    metadata = spark.read.format("flinkstate-metadata").load(root)
    out["metadata"] = rows(metadata.drop(*[c for c in metadata.columns
                                           if any(v in c.lower() for v in VOLATILE)]))
    out["pushdown"] = rows(read("totals").filter(F.col("key") == "user-7"))

    fixed = read("totals").withColumn("value", F.col("value") + 1)
    out["write_state"] = write_state(fixed, root, OPERATOR, "totals").checkpoint_id
    out["after write_state"] = rows(read("totals").select("key", "value"))

    with rewrite(spark, root) as staged:
        staged.replace(read("orders").filter(F.col("key") != "user-3"),
                       OPERATOR, "orders")
        staged.drop(OPERATOR, "tags")
    assert staged.info is not None
    out["rewrite"] = staged.info.checkpoint_id
    out["after rewrite"] = rows(read("orders").select("key", "list_element"))
    out["rewrite states"] = sorted(s.name for s in staged.info.metadata.operator(
        OPERATOR).keyed_states)

    extra = spark.createDataFrame([("a", 1), ("b", 2)], "key string, value bigint")
    (extra.coalesce(1).write.format("flinkstate")
     .options(operator="extra", state="counts", kind="value", keyType="string")
     .mode("append").save(root))
    out["df.write"] = rows(read("counts", operator="extra").select("key", "value"))

    rescaled = rescale_max_parallelism(spark, root, None, 256, operator=OPERATOR)
    out["rescale_max_parallelism"] = [rescaled.checkpoint_id, is_checkpoint_uri(rescaled.path,
                                                                                root)]
    out["after rescale_max_parallelism"] = rows(
        read("totals").select("key", "value", "key_group"))
    spread = rescale_parallelism(spark, root, 3, operator=OPERATOR)
    out["rescale_parallelism"] = spread.checkpoint_id
    out["after rescale_parallelism"] = rows(
        read("totals").select("key", "value", "operator_index"))

    feed = read("totals", readChangeFeed="true", changeStartCheckpointId="1",
                changeEndCheckpointId=str(out["write_state"]))
    out["change feed"] = rows(feed.drop(*[c for c in feed.columns if "time" in c.lower()]))

    out["flink savepoint"] = rows(read("count", savepoint, operator=FLINK_OPERATOR))
    tool(["import-flink", savepoint, imported])
    out["import-flink"] = rows(read("count", imported, operator=FLINK_OPERATOR))
    tool(["retain", root, "--keep", "1"])
    out["after retain"] = rows(read("totals").select("key", "value", "operator_index"))
    if savepoints is not None:
        out[SAVEPOINT_WRITER] = write_savepoints(spark, savepoint, savepoints)
    return out


SAVEPOINT_WRITER = "flink savepoint writer"
"""The results of :func:`write_savepoints`, under one name of :func:`run_surface`'s."""


def write_savepoints(spark: Any, savepoint: str, savepoints: str) -> dict[str, Any]:
    """The Flink-savepoint writer on ``spark``: each new savepoint derived from ``savepoint``
    (left as it is) into its own directory under ``savepoints``, read back through
    ``flinkstate``."""
    from pyspark.sql import functions as F

    from statesource.spark import erase_keys, rescale_max_parallelism, rewrite, write_state

    def read(path: str, state: str, *columns: str) -> Any:
        return (spark.read.format("flinkstate").options(operator=FLINK_OPERATOR, state=state)
                .load(path).select("key", *columns))

    def new(name: str) -> str:
        """``name`` under ``savepoints``, before a URI's query."""
        where, _, query = savepoints.partition("?")
        return f"{where.rstrip('/')}/{name}" + (f"?{query}" if query else "")

    out: dict[str, Any] = {}
    count = read(savepoint, "count", "value")
    written = write_state(count.withColumn("value", F.col("value") * 2), savepoint,
                          FLINK_OPERATOR, "count", output=new("written"))
    out["flink write_state"] = [written.checkpoint_id, rows(read(new("written"), "count",
                                                                 "value"))]

    with rewrite(spark, savepoint, output=new("rewritten")) as staged:
        staged.replace(count.filter(F.col("key") != "key-3"), FLINK_OPERATOR, "count")
        staged.drop(FLINK_OPERATOR, "tags")
    assert staged.info is not None
    out["flink rewrite"] = rows(read(new("rewritten"), "count", "value"))
    out["flink rewrite states"] = sorted(s.name for s in staged.info.metadata.operator(
        FLINK_OPERATOR).keyed_states)

    (count.withColumn("value", F.col("value") + 1).coalesce(1).write.format("flinkstate")
     .options(operator=FLINK_OPERATOR, state="count", output=new("df-written"))
     .mode("append").save(savepoint))
    out["flink df.write"] = rows(read(new("df-written"), "count", "value"))

    rescaled = rescale_max_parallelism(spark, savepoint, new("rescaled"), 256)
    out["flink rescale_max_parallelism"] = [rescaled.max_parallelism, rows(
        read(new("rescaled"), "count", "value", "key_group"))]

    keys = spark.createDataFrame([("key-1",), ("key-2",), ("key-2",), ("absent",)],
                                 "key string")
    erased = erase_keys(savepoint, new("erased"), FLINK_OPERATOR, keys)
    out["flink erase_keys"] = [list(erased.missing), erased.total,
                               rows(read(new("erased"), "count", "value"))]
    return out


def is_checkpoint_uri(path: str, root: str) -> bool:
    """Whether ``path`` names a checkpoint of ``root`` as a full URI (scheme, query kept)."""
    base, _, query = root.partition("?")
    return path.startswith(base.rstrip("/") + "/chk-") and path.endswith(query)


def main(arguments: list[str]) -> None:
    """On the session spark-submit made (through ``statesource.spark.session()``): the
    surface, then an executor without credentials."""
    from pyspark.sql import SparkSession

    from statesource.spark import session

    root, savepoint, imported, savepoints, result = arguments
    spark = session("surface")  # no master: spark-submit's; its settings, not local ones
    settings = {name: spark.conf.get(name, None) for name in (
        "spark.master", "spark.sql.shuffle.partitions", "spark.ui.enabled")}
    out = run_surface(spark, root, savepoint, imported, savepoints or None, run_tool)
    out["session settings"] = settings
    conf = {k: v for k, v in spark.sparkContext.getConf().getAll()
            if not k.startswith("spark.executorEnv.AWS_") and not k.startswith("spark.app.")
            and k not in ("spark.driver.port", "spark.driver.host")}
    spark.stop()
    builder = SparkSession.builder.appName("no-credentials")
    for key, value in conf.items():
        builder = builder.config(key, value)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):  # this JVM still has the
        builder = builder.config(f"spark.executorEnv.{name}", "")  # submitted ones, not these
    bare = builder.getOrCreate()
    try:
        bare.read.format("flinkstate").options(operator=OPERATOR, state="totals").load(
            root).collect()
        out["without executor credentials"] = "read succeeded"
    except Exception as error:  # noqa: BLE001 - its message is the result
        out["without executor credentials"] = str(error)
    bare.stop()
    Path(result).write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
