package org.statesource.shim;

import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;

/** The one Arrow root allocator of the shim; each partition reader takes a child of it. */
public final class ShimMemory {
  static final BufferAllocator ROOT = new RootAllocator();

  private ShimMemory() {}

  /** Bytes of Arrow memory the shim's readers hold now: 0 whenever no scan is running. */
  public static long allocatedBytes() {
    return ROOT.getAllocatedMemory();
  }
}
