"""The demo's second half: SQL over the newest checkpoint, on local Spark."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

VIEWS = {
    "clicks": "clicks",
    "recent_pages": "recent_pages",
    "page_counts": "page_counts",
    "clicks_per_minute": "clicks_per_minute",
    "last_seen": "last_seen",
}

QUERIES = [
    ("What the checkpoint holds (format flinkstate-metadata)",
     "SELECT state_name, kind, entries, rows, bytes FROM state_metadata ORDER BY state_name"),
    ("Top users by clicks",
     "SELECT key AS user, value AS clicks FROM clicks ORDER BY value DESC, key LIMIT 5"),
    ("Busiest one-minute windows (namespaced Reducing state)",
     "SELECT timestamp_millis(namespace) AS window_start, sum(value) AS clicks"
     " FROM clicks_per_minute GROUP BY namespace ORDER BY clicks DESC, window_start LIMIT 3"),
    ("Heaviest key groups (map entries per key group)",
     "SELECT key_group, operator_index AS subtask, count(*) AS entries FROM page_counts"
     " GROUP BY key_group, operator_index ORDER BY entries DESC, key_group LIMIT 5"),
    ("Entries per subtask now",
     "SELECT operator_index AS subtask, count(*) AS entries FROM page_counts"
     " GROUP BY operator_index ORDER BY subtask"),
]


def run_report(spark: Any, checkpoint: str, lookup_user: str,
               say: Callable[[str], None]) -> None:
    """Register one view per state and print the demo's queries and a point lookup.

    Views are registered with the DataFrame API and the lookup filters with a
    Column, so no path or key is ever pasted into SQL text.
    """
    from pyspark.sql.functions import col

    def state(name: str, **options: str) -> Any:
        return spark.read.format("flinkstate").options(state=name, **options).load(checkpoint)

    for view, name in VIEWS.items():
        state(name).createOrReplaceTempView(view)
    spark.read.format("flinkstate-metadata").load(checkpoint) \
        .createOrReplaceTempView("state_metadata")
    state("page_counts", parallelism="3").createOrReplaceTempView("page_counts_at_3")
    queries = [*QUERIES, ("Entries per subtask if the job ran with parallelism 3",
                          "SELECT operator_index AS subtask, count(*) AS entries"
                          " FROM page_counts_at_3 GROUP BY operator_index ORDER BY subtask")]
    for title, sql in queries:
        say(f"\n-- {title}\n{sql}")
        spark.sql(sql).show(truncate=False)
    say(f"\n-- Point lookup of {lookup_user}: one key group read per state (filterPushdown)")
    for name in ("clicks", "recent_pages", "last_seen"):
        lookup = state(name, filterPushdown="true").where(col("key") == lookup_user)
        lookup.drop("namespace").show(truncate=False)
