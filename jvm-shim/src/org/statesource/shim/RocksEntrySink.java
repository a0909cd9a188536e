package org.statesource.shim;

/** Receives merged entries; arrays are only valid during the call. */
interface RocksEntrySink {
  void accept(byte[] key, int keyOffset, int keyLength, byte[] value, int valueOffset,
      int valueLength);
}
