package org.statesource.shim;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.PriorityQueue;
import java.util.TreeSet;

/**
 * A column family's range deletions as disjoint intervals (statesource/flink/rocksdb/merge.py's
 * Tombstones): between consecutive bounds, the sequence number of the newest deletion covering
 * that interval, so that a key's versions older than it are hidden.
 */
final class RocksTombstones {
  private final byte[][] bounds;
  private final long[] newest;

  /** {@code ranges}: start, end, start, end...; {@code sequences}: one per range. */
  RocksTombstones(List<byte[]> ranges, List<Long> sequences) {
    List<Integer> live = new ArrayList<>();
    TreeSet<byte[]> edges = new TreeSet<>(Arrays::compareUnsigned);
    for (int i = 0; i < sequences.size(); i++) {
      if (Arrays.compareUnsigned(ranges.get(2 * i), ranges.get(2 * i + 1)) < 0) {
        live.add(i);
        edges.add(ranges.get(2 * i));
        edges.add(ranges.get(2 * i + 1));
      }
    }
    bounds = edges.toArray(new byte[0][]);
    newest = new long[Math.max(0, bounds.length - 1)];
    live.sort((a, b) -> Arrays.compareUnsigned(ranges.get(2 * a), ranges.get(2 * b)));
    PriorityQueue<Integer> active = new PriorityQueue<>(
        (a, b) -> Long.compare(sequences.get(b), sequences.get(a)));
    int next = 0;
    for (int i = 0; i < newest.length; i++) {
      while (next < live.size()
          && Arrays.compareUnsigned(ranges.get(2 * live.get(next)), bounds[i]) == 0) {
        active.add(live.get(next++));
      }
      while (!active.isEmpty()
          && Arrays.compareUnsigned(ranges.get(2 * active.peek() + 1), bounds[i]) <= 0) {
        active.poll();
      }
      newest[i] = active.isEmpty() ? 0 : sequences.get(active.peek());
    }
  }

  boolean isEmpty() {
    return newest.length == 0;
  }

  /** The sequence number of the newest deletion whose range holds the key (0: none). */
  long covering(byte[] key, int length) {
    int low = 0;
    int high = bounds.length;
    while (low < high) {  // the first bound above the key
      int middle = (low + high) >>> 1;
      if (Arrays.compareUnsigned(bounds[middle], 0, bounds[middle].length, key, 0, length) <= 0) {
        low = middle + 1;
      } else {
        high = middle;
      }
    }
    int interval = low - 1;
    return interval >= 0 && interval < newest.length ? newest[interval] : 0;
  }
}
