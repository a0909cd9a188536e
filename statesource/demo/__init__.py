"""The demo behind ``statesource demo``: a stateful click-stream job, checkpointed, then queried."""
