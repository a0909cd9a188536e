"""A reproducible click stream: users with skewed activity visiting pages over time.

Activity follows a Zipf-like law (a few users click a lot), as real traffic
does; that skew is what the demo's key-group picture makes visible.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

PAGES = ["home", "search", "product", "cart", "checkout", "help", "account", "deals",
         "reviews", "wishlist", "orders", "support"]
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z


@dataclass(frozen=True)
class Click:
    user: str
    page: str
    timestamp_ms: int


def clicks(events: int, users: int = 50_000, seed: int = 7,
           events_per_second: int = 200) -> Iterator[Click]:
    """``events`` clicks in event-time order, ``events_per_second`` on average.

    The rate swings between a third and five thirds of the average over a
    20-minute cycle, so windows differ as real traffic does.
    """
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) ** 0.8 for rank in range(users)]
    names = [f"user-{i:05d}" for i in range(users)]
    batch = 10_000
    timestamp = float(START_MS)
    for start in range(0, events, batch):
        count = min(batch, events - start)
        chosen = rng.choices(names, weights=weights, k=count)
        pages = rng.choices(PAGES, k=count)
        for user, page in zip(chosen, pages):
            phase = (timestamp - START_MS) / 1_200_000 * 2 * math.pi
            rate = events_per_second * (1 + 2 / 3 * math.sin(phase))
            timestamp += rng.expovariate(rate) * 1000
            yield Click(user, page, int(timestamp))
