package org.statesource.shim;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import org.apache.spark.sql.connector.expressions.aggregate.AggregateFunc;
import org.apache.spark.sql.connector.expressions.aggregate.Aggregation;
import org.apache.spark.sql.connector.expressions.aggregate.CountStar;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.SupportsPushDownAggregates;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Column pruning, and key-group pruning by {@code key}, {@code key_group} and
 * {@code operator_index} predicates.
 *
 * <p>Pruning only skips key groups that cannot hold a matching row; every filter is still handed
 * back to Spark, which evaluates it on the rows read, so pruning can never change an answer;
 * except for a Flink savepoint's point lookup, which {@link FlinkLocalLookup} answers exactly. A
 * fresh builder serves each query: nothing pushed into one scan leaks into another.
 */
final class FlinkStateScanBuilder implements SupportsPushDownFilters,
    SupportsPushDownRequiredColumns, SupportsPushDownAggregates {
  static final String KEY = "key";
  private static final String KEY_GROUP = "key_group";
  private static final String OPERATOR_INDEX = "operator_index";

  private final ReadPlan plan;
  private final StructType schema;
  private StructType required;
  private BitSet allowed;
  private Filter[] used = new Filter[0];
  private Object[] keys;
  private int counts;
  /** The values of a lookup answered on the driver ({@link FlinkLocalLookup}), or null. */
  private Object[][] lookup;

  FlinkStateScanBuilder(StructType schema, ReadPlan plan) {
    this.plan = plan;
    this.schema = schema;
    this.required = schema;
  }

  /**
   * Whole top-level columns only: Spark may ask for some fields of a struct, but the vectors
   * read hold all of them, so the scan reports each wanted column with its full type.
   */
  @Override
  public void pruneColumns(StructType requiredSchema) {
    List<StructField> kept = new ArrayList<>();
    for (StructField field : schema.fields()) {
      if (requiredSchema.getFieldIndex(field.name()).isDefined()) {
        kept.add(field);
      }
    }
    required = new StructType(kept.toArray(new StructField[0]));
  }

  @Override
  public Filter[] pushFilters(Filter[] filters) {
    allowed = null;
    keys = null;
    List<Filter> accepted = new ArrayList<>();
    if (plan.filterPushdown) {
      for (Filter filter : filters) {
        BitSet groups = keyGroupsMatching(filter);
        if (groups != null) {
          accepted.add(filter);
          if (keys == null) {
            keys = keyValues(filter);
          }
          if (allowed == null) {
            allowed = groups;
          } else {
            allowed.and(groups);
          }
        }
      }
    }
    used = accepted.toArray(new Filter[0]);
    lookup = FlinkLocalLookup.keysOf(plan, schema, filters);
    if (lookup != null) {
      used = filters;
      return new Filter[0];  // applied exactly by the lookup
    }
    return filters;
  }

  @Override
  public Filter[] pushedFilters() {
    return used;
  }

  /**
   * A bare {@code count(*)} (Spark offers aggregates only when no filter is left for it to
   * evaluate) is answered whole from the metadata's row counts: no partial aggregate, no
   * shuffle. Not for a Flink savepoint, whose row counts are known only once decoded.
   */
  @Override
  public boolean pushAggregation(Aggregation aggregation) {
    if (plan.flink != null || aggregation.groupByExpressions().length != 0) {
      return false;
    }
    for (AggregateFunc function : aggregation.aggregateExpressions()) {
      if (!(function instanceof CountStar)) {
        return false;
      }
    }
    counts = aggregation.aggregateExpressions().length;
    return true;
  }

  @Override
  public boolean supportCompletePushDown(Aggregation aggregation) {
    return pushAggregation(aggregation);
  }

  @Override
  public Scan build() {
    if (counts > 0) {
      StructField[] fields = new StructField[counts];
      for (int i = 0; i < counts; i++) {
        fields[i] = new StructField("count(*)", DataTypes.LongType, false, Metadata.empty());
      }
      return new FlinkStateScan(plan, new StructType(fields), allowed, used, null, true);
    }
    if (lookup != null) {
      return FlinkLocalLookup.of(plan, schema, required, lookup);
    }
    return new FlinkStateScan(plan, required, allowed, used, keys, false);
  }

  /**
   * The keys an accepted {@code key = v} / {@code key IN (...)} filter names, for the reader to
   * skip the rows of its key groups that hold other keys; null for any other filter.
   */
  private static Object[] keyValues(Filter filter) {
    if (filter instanceof EqualTo equal && KEY.equals(equal.attribute())) {
      return new Object[] {equal.value()};
    }
    if (filter instanceof In in && KEY.equals(in.attribute())) {
      return in.values();
    }
    return null;
  }

  /** The key groups that can hold rows matching {@code filter}, or null when it cannot prune. */
  private BitSet keyGroupsMatching(Filter filter) {
    if (filter instanceof EqualTo equal) {
      return matching(equal.attribute(), "=", new Object[] {equal.value()});
    }
    if (filter instanceof In in) {
      return matching(in.attribute(), "in", in.values());
    }
    if (filter instanceof GreaterThan greater) {
      return matching(greater.attribute(), ">", new Object[] {greater.value()});
    }
    if (filter instanceof GreaterThanOrEqual greater) {
      return matching(greater.attribute(), ">=", new Object[] {greater.value()});
    }
    if (filter instanceof LessThan less) {
      return matching(less.attribute(), "<", new Object[] {less.value()});
    }
    if (filter instanceof LessThanOrEqual less) {
      return matching(less.attribute(), "<=", new Object[] {less.value()});
    }
    return null;
  }

  private BitSet matching(String column, String operator, Object[] values) {
    if (KEY.equals(column)) {
      return operator.equals("=") || operator.equals("in") ? keyGroupsOfKeys(values) : null;
    }
    boolean byGroup = KEY_GROUP.equals(column);
    if (!byGroup && !OPERATOR_INDEX.equals(column)) {
      return null;
    }
    for (Object value : values) {
      if (value != null && !(value instanceof Integer)) {
        return null;
      }
    }
    BitSet groups = new BitSet(plan.maxParallelism);
    for (int group = 0; group < plan.maxParallelism; group++) {
      int subject = byGroup ? group : plan.operatorIndex(group);
      if (satisfies(subject, operator, values)) {
        groups.set(group);
      }
    }
    return groups;
  }

  /** Exact key types only: elsewhere Spark equality is not Java equality (0.0 = -0.0). */
  private BitSet keyGroupsOfKeys(Object[] values) {
    if (!plan.exactKeys) {
      return null;
    }
    BitSet groups = new BitSet(plan.maxParallelism);
    for (Object value : values) {
      if (value == null) {
        continue; // key = NULL matches no row
      }
      try {
        groups.set(FlinkKeyGroups.keyGroup(value, plan.maxParallelism));
      } catch (IllegalArgumentException notAKey) {
        return null; // a literal of another type: leave it to Spark
      }
    }
    return groups;
  }

  private static boolean satisfies(int subject, String operator, Object[] values) {
    for (Object value : values) {
      if (value == null) {
        continue;
      }
      int bound = (Integer) value;
      boolean holds = switch (operator) {
        case "=", "in" -> subject == bound;
        case ">" -> subject > bound;
        case ">=" -> subject >= bound;
        case "<" -> subject < bound;
        default -> subject <= bound;
      };
      if (holds) {
        return true;
      }
    }
    return false;
  }
}
