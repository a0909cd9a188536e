package org.statesource.shim;

import org.apache.spark.sql.api.java.UDF2;

/** SQL {@code flink_key_group(key, maxParallelism)}: Flink's key group of a key, NULL for NULL. */
public final class FlinkKeyGroupUdf implements UDF2<Object, Object, Integer> {
  private static final long serialVersionUID = 1L;

  @Override
  public Integer call(Object key, Object maxParallelism) {
    if (key == null || maxParallelism == null) {
      return null;
    }
    return FlinkKeyGroups.keyGroup(key, FlinkKeyGroups.checkMaxParallelism(maxParallelism));
  }
}
