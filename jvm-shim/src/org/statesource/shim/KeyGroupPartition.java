package org.statesource.shim;

import org.apache.spark.sql.connector.read.InputPartition;

/** One Spark partition: indexes into the plan's key-group arrays, ascending. */
record KeyGroupPartition(int[] entries) implements InputPartition {
}
