"""Key groups per second: scalar vs bulk, 1M string keys and 1M long keys.

Run: python bench/keygroups.py [--keys N]
The scalar path (one ``assign_to_key_group`` call per key) is the baseline
measured in the same run; the bulk figures are printed as speed-ups over it.
"""

from __future__ import annotations

import argparse
import random

import pyarrow as pa
from timing import best_of

from statesource.keygroups import assign_to_key_group, key_groups
from statesource.types import LONG, STRING

MAX_PARALLELISM = 128


def measure(label: str, keys: list, key_type, repeats: int) -> None:
    scalar = best_of(repeats, lambda: [assign_to_key_group(k, key_type, MAX_PARALLELISM)
                                       for k in keys])
    bulk = best_of(repeats, lambda: key_groups(keys, key_type, MAX_PARALLELISM))
    arrow_keys = pa.array(keys, key_type.arrow_type)
    bulk_arrow = best_of(repeats, lambda: key_groups(arrow_keys, key_type, MAX_PARALLELISM))
    n = len(keys)
    print(f"{label}: scalar {n / scalar / 1e6:6.2f} M keys/s (baseline 1.00x)")
    print(f"{label}: bulk, Python list  {n / bulk / 1e6:6.2f} M keys/s ({scalar / bulk:5.1f}x)")
    print(f"{label}: bulk, Arrow array  {n / bulk_arrow / 1e6:6.2f} M keys/s"
          f" ({scalar / bulk_arrow:5.1f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(42)
    strings = [f"user-{rng.randrange(10**9)}" for _ in range(args.keys)]
    longs = [rng.randrange(-(2**63), 2**63) for _ in range(args.keys)]
    print(f"{args.keys:,} keys, max parallelism {MAX_PARALLELISM}, best of {args.repeats}")
    measure("string", strings, STRING, args.repeats)
    measure("long  ", longs, LONG, args.repeats)


if __name__ == "__main__":
    main()
