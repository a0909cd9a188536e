"""The Java shim on a Spark session: loading it and its functions (:mod:`.session`), and
the Python planner its columnar reader delegates to (:mod:`.plan`)."""
