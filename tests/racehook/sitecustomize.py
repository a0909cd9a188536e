"""Plants the pause of tests/race.py in every Python process of a race's child.

A child's own process and the Python workers its Spark JVM starts (where a
commit on the driver runs) all start with this directory on ``PYTHONPATH``; the
environment variable ``STATESOURCE_RACE_PAUSE`` (``HOOKDIR|MODULE:NAME``) says
where to pause. Without it, nothing happens.
"""

import os

if os.environ.get("STATESOURCE_RACE_PAUSE"):
    from tests.race import pause_from_environment

    pause_from_environment()
