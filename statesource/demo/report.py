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
    """Register one view per state and print the demo's queries and a point lookup."""
    for view, state in VIEWS.items():
        spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {view} USING flinkstate"
                  f" OPTIONS (path '{checkpoint}', state '{state}')")
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW state_metadata USING `flinkstate-metadata`"
              f" OPTIONS (path '{checkpoint}')")
    rescaled = spark.read.format("flinkstate").options(state="page_counts",
                                                       parallelism="3").load(checkpoint)
    rescaled.createOrReplaceTempView("page_counts_at_3")
    queries = [*QUERIES, ("Entries per subtask if the job ran with parallelism 3",
                          "SELECT operator_index AS subtask, count(*) AS entries"
                          " FROM page_counts_at_3 GROUP BY operator_index ORDER BY subtask")]
    for title, sql in queries:
        say(f"\n-- {title}\n{sql}")
        spark.sql(sql).show(truncate=False)
    say(f"\n-- Point lookup of {lookup_user}: one key group read per state (filterPushdown)")
    for state in ("clicks", "recent_pages", "last_seen"):
        lookup = (spark.read.format("flinkstate").options(state=state, filterPushdown="true")
                  .load(checkpoint).where(f"key = '{lookup_user}'"))
        lookup.drop("namespace").show(truncate=False)
