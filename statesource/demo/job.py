"""The demo job: per-user activity kept in keyed state by parallel subtasks.

Each click goes to the subtask owning its user's key group, as Flink's
``keyBy`` routes it. Per user the job keeps a click count (Value), the last
pages visited (List), clicks per page (Map), clicks per one-minute window
(Reducing, namespaced by window start) and the last time seen (Value with a
30-minute TTL in event time). Every subtask also keeps its source offset in
operator list state, as a Flink source would.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone

from statesource.checkpointing import CheckpointWriter, PendingCheckpoint, SubtaskBackends
from statesource.demo.clickstream import Click
from statesource.keygroups import (
    assign_to_key_group,
    key_group_range_for_operator,
    operator_index_for_key_group,
)
from statesource.model import TtlConfig
from statesource.state.clock import ManualClock
from statesource.state.descriptors import (
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from statesource.state.keyed_backend import KeyedStateBackend
from statesource.state.operator_backend import OperatorStateBackend
from statesource.types import STRING

OPERATOR_UID = "user-activity"
RECENT_PAGES = 5
WINDOW_MS = 60_000
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

CLICKS = ValueStateDescriptor("clicks", "long")
RECENT = ListStateDescriptor("recent_pages", "string")
PAGE_COUNTS = MapStateDescriptor("page_counts", "string", "long")
PER_MINUTE = ReducingStateDescriptor("clicks_per_minute", operator.add, "long",
                                     namespace_type="long")
LAST_SEEN = ValueStateDescriptor("last_seen", {"type": "long", "logicalType": "timestamp-millis"},
                                 ttl=TtlConfig(timedelta(minutes=30)))


class Subtask:
    """One parallel instance: its keyed backend, its operator state and its handles."""

    def __init__(self, index: int, parallelism: int, max_parallelism: int,
                 clock: ManualClock) -> None:
        owned = key_group_range_for_operator(max_parallelism, parallelism, index)
        self.keyed = KeyedStateBackend("string", max_parallelism, owned, clock=clock)
        self.operator = OperatorStateBackend()
        self.offset = self.operator.get_list_state("source_offset", "long")
        self.clicks = self.keyed.get_state(CLICKS)
        self.recent = self.keyed.get_state(RECENT)
        self.page_counts = self.keyed.get_state(PAGE_COUNTS)
        self.per_minute = self.keyed.get_state(PER_MINUTE)
        self.last_seen = self.keyed.get_state(LAST_SEEN)

    def process(self, click: Click) -> None:
        self.keyed.set_current_key(click.user)
        self.clicks.update((self.clicks.value() or 0) + 1)
        recent = self.recent.get()
        if len(recent) >= RECENT_PAGES:
            self.recent.update([*recent[1 - RECENT_PAGES:], click.page])
        else:
            self.recent.add(click.page)
        self.page_counts.put(click.page, (self.page_counts.get(click.page) or 0) + 1)
        self.keyed.set_current_namespace(click.timestamp_ms - click.timestamp_ms % WINDOW_MS)
        self.per_minute.add(1)
        self.last_seen.update(EPOCH + timedelta(milliseconds=click.timestamp_ms))


class UserActivityJob:
    """Runs the subtasks over a stream and checkpoints them in the background."""

    def __init__(self, checkpoint_root: str, parallelism: int = 2,
                 max_parallelism: int = 128) -> None:
        self.clock = ManualClock()
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism
        self.subtasks = [Subtask(i, parallelism, max_parallelism, self.clock)
                         for i in range(parallelism)]
        self.writer = CheckpointWriter(checkpoint_root)
        self._route: dict[str, Subtask] = {}

    def subtask_for(self, user: str) -> Subtask:
        subtask = self._route.get(user)
        if subtask is None:
            key_group = assign_to_key_group(user, STRING, self.max_parallelism)
            index = operator_index_for_key_group(self.max_parallelism, self.parallelism,
                                                 key_group)
            subtask = self._route[user] = self.subtasks[index]
        return subtask

    def run(self, stream: Iterable[Click], checkpoint_every: int,
            on_progress: Callable[[int, PendingCheckpoint], None]) -> PendingCheckpoint:
        """Process ``stream``, checkpointing every ``checkpoint_every`` events; returns the last."""
        pending: PendingCheckpoint | None = None
        checkpoint_id = 0
        position = 0
        for position, click in enumerate(stream, 1):
            self.clock.set(click.timestamp_ms)
            self.subtask_for(click.user).process(click)
            if position % checkpoint_every == 0:
                if pending is not None:
                    pending.result()  # one checkpoint in flight at a time, as in Flink by default
                checkpoint_id += 1
                pending = self.checkpoint(checkpoint_id, position)
                on_progress(position, pending)
        if pending is not None:
            pending.result()
        if pending is None or position % checkpoint_every:
            pending = self.checkpoint(checkpoint_id + 1, position)
            on_progress(position, pending)
        return pending

    def checkpoint(self, checkpoint_id: int, position: int) -> PendingCheckpoint:
        """Record the stream position, as a source's snapshotState would, then checkpoint."""
        for subtask in self.subtasks:
            subtask.offset.update([position])
        subtasks = [SubtaskBackends(keyed=s.keyed, operator=s.operator) for s in self.subtasks]
        return self.writer.write_async(checkpoint_id, {OPERATOR_UID: subtasks})
