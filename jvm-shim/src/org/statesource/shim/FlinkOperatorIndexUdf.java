package org.statesource.shim;

import org.apache.spark.sql.api.java.UDF3;

/**
 * SQL {@code flink_operator_index(keyGroup, maxParallelism, parallelism)}: the subtask Flink
 * assigns a key group to, NULL when any argument is NULL.
 */
public final class FlinkOperatorIndexUdf implements UDF3<Object, Object, Object, Integer> {
  private static final long serialVersionUID = 1L;

  @Override
  public Integer call(Object keyGroup, Object maxParallelism, Object parallelism) {
    if (keyGroup == null || maxParallelism == null || parallelism == null) {
      return null;
    }
    int maxP = FlinkKeyGroups.checkMaxParallelism(maxParallelism);
    int p = FlinkKeyGroups.checkParallelism(parallelism, maxP);
    return FlinkKeyGroups.operatorIndex(FlinkKeyGroups.checkKeyGroup(keyGroup, maxP), maxP, p);
  }
}
