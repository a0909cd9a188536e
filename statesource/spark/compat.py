"""Where the installed pyspark's behaviour decides ours.

pyspark 4.1 to 4.3 keep the partitions planned by a filter-pushdown pass on
the relation itself, so a later query on the same DataFrame or view that has
no pushable filter silently reads the pruned partitions of the earlier one
(fixed upstream: the plan is now scoped to its scan). Pruning by pushed
filters is therefore only on by default where that cannot happen; the
``filterPushdown`` option overrides the default per read.
"""

from __future__ import annotations

import re

LAST_AFFECTED_VERSION = (4, 3)


def pushdown_safe_by_default(version: str | None = None) -> bool:
    """Whether this pyspark scopes pushed-down plans to their own query."""
    if version is None:
        import pyspark

        version = pyspark.__version__
    match = re.match(r"(\d+)\.(\d+)", version)
    return match is not None and (int(match.group(1)), int(match.group(2))) > LAST_AFFECTED_VERSION


def is_connect(spark: object) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no py4j gateway, no JVM here)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")
