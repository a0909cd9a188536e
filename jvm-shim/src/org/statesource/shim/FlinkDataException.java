package org.statesource.shim;

/**
 * A fault in a Flink key group's bytes, at a position of the (uncompressed) key group. The
 * partition reader, which knows the file and where the key group starts, turns it into the
 * error the user sees ({@link FlinkKeyGroupReader#refused}).
 */
final class FlinkDataException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  final int position;

  FlinkDataException(String what, int position) {
    super(what, null, false, false);
    this.position = position;
  }
}
