package org.statesource.shim;

import java.util.HashMap;
import java.util.Map;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code format("flinkstate")} when the shim is loaded: plans through the Python source, reads in
 * the JVM.
 *
 * <p>A JVM source registered under a short name always wins over a Python source of that name,
 * so this provider owns {@code flinkstate} and reaches the Python source under its second name,
 * {@code flinkstate-python} (statesource/spark/jvm/plan.py), through Spark's
 * {@link PythonDataSourceV2}. Python parses the options, opens and checks the checkpoint and
 * derives the schema, so options, schemas and errors are the Python source's own; it returns a
 * plan of byte ranges, which this reader serves. A request the plan marks unservable is handed to
 * the Python source whole.
 */
public final class FlinkStateProvider implements TableProvider, DataSourceRegister {
  static final String SHORT_NAME = "flinkstate";
  static final String PYTHON_SOURCE = "flinkstate-python";
  static final String PLAN_OPTION = "statesource.jvmplan";
  static final String PLAN_METADATA = "statesource.jvmPlan";

  private ReadPlan plan;
  private PythonDataSourceV2 delegate;

  @Override
  public String shortName() {
    return SHORT_NAME;
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    String cacheKey = FlinkPlanCache.key(options.asCaseSensitiveMap());
    StructType[] cached = new StructType[1];
    ReadPlan known = FlinkPlanCache.plan(cacheKey, cached);
    if (known != null) {
      plan = known;
      return cached[0];
    }
    Map<String, String> planning = new HashMap<>(options.asCaseSensitiveMap());
    planning.put(PLAN_OPTION, "true");
    StructType planned = pythonSource().inferSchema(new CaseInsensitiveStringMap(planning));
    StructField first = planned.fields()[0];
    ReadPlan parsed = ReadPlan.parse(first.metadata().getString(PLAN_METADATA));
    if (!parsed.servable()) {
      delegate = pythonSource();
      return delegate.inferSchema(options);
    }
    plan = parsed;
    StructField[] fields = planned.fields().clone();
    fields[0] = new StructField(first.name(), first.dataType(), first.nullable(), Metadata.empty());
    StructType schema = new StructType(fields);
    FlinkPlanCache.keep(cacheKey, schema, parsed);
    return schema;
  }

  /**
   * As the Python source's: Spark then hands a write (and a read with a user-supplied schema)
   * straight to {@link #getTable} with that schema, without planning a read.
   */
  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  /**
   * The JVM table for a read this provider planned; the Python source's table for everything
   * else: an unservable read, a write (the writer is the Python source's), a user schema.
   */
  @Override
  public Table getTable(StructType schema, Transform[] partitioning,
      Map<String, String> properties) {
    if (plan == null) {
      PythonDataSourceV2 python = delegate != null ? delegate : pythonSource();
      return python.getTable(schema, partitioning, properties);
    }
    return new FlinkStateTable(schema, plan);
  }

  private static PythonDataSourceV2 pythonSource() {
    PythonDataSourceV2 source = new PythonDataSourceV2();
    source.setShortName(PYTHON_SOURCE);
    return source;
  }
}
