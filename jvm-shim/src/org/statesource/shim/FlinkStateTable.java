package org.statesource.shim;

import java.util.EnumSet;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** One keyed state of one checkpoint, as the Python source planned it. */
final class FlinkStateTable implements SupportsRead {
  private final StructType schema;
  private final ReadPlan plan;

  FlinkStateTable(StructType schema, ReadPlan plan) {
    this.schema = schema;
    this.plan = plan;
  }

  @Override
  public String name() {
    return FlinkStateProvider.SHORT_NAME;
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return EnumSet.of(TableCapability.BATCH_READ);
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    return new FlinkStateScanBuilder(schema, plan);
  }
}
