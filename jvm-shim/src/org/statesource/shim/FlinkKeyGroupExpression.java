package org.statesource.shim;

import org.apache.spark.sql.catalyst.CatalystTypeConverters;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.objects.StaticInvoke;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.types.AbstractDataType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ObjectType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Function1;
import scala.Option;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * SQL {@code flink_key_group(key, maxParallelism)} as a Catalyst expression, not a UDF.
 *
 * <p>A Java UDF receives every string key converted to a {@link String} (a UTF-8 decode and an
 * allocation per row) and boxes its answer; over millions of keys that cost more than the scan.
 * This expression reads Spark's own values: the Java {@code hashCode} of an ASCII string is
 * folded straight from its UTF-8 bytes (one code unit per byte), and only other strings, structs
 * and unusual types are converted to the external values {@link FlinkKeyGroups} hashes, so the
 * results and error messages are the UDF's.
 */
public final class FlinkKeyGroupExpression extends Expression implements java.io.Serializable {
  private static final long serialVersionUID = 1L;

  private final Expression key;
  private final Expression maxParallelism;
  private transient Function1<Object, Object> toExternal;

  public FlinkKeyGroupExpression(Expression key, Expression maxParallelism) {
    this.key = key;
    this.maxParallelism = maxParallelism;
  }

  /** Registers the function under {@code name} on one session (a temporary function). */
  public static void register(SparkSession session, String name) {
    Function1<Seq<Expression>, Expression> builder = new AbstractFunction1<>() {
      @Override
      public Expression apply(Seq<Expression> arguments) {
        if (arguments.size() != 2) {
          throw new IllegalArgumentException(name + " takes 2 arguments (key, maxParallelism),"
              + " got " + arguments.size());
        }
        return new FlinkKeyGroupExpression(arguments.apply(0), arguments.apply(1));
      }
    };
    session.sessionState().functionRegistry().createOrReplaceTempFunction(name, builder,
        "java_udf");
  }

  /** NULL for a NULL argument, as SQL functions do. */
  @Override
  public Object eval(InternalRow row) {
    Object value = key.eval(row);
    if (value == null) {
      return null;
    }
    Object maxParallelismValue = maxParallelism.eval(row);
    if (maxParallelismValue == null) {
      return null;
    }
    return keyGroupOfValue(this, value, maxParallelismValue);
  }

  private int javaHashCode(Object value) {
    if (value instanceof UTF8String text) {
      return stringHashCode(text);
    }
    if (!isBoxedPrimitive(key.dataType())) {
      if (toExternal == null) {
        toExternal = CatalystTypeConverters.createToScalaConverter(key.dataType());
      }
      value = toExternal.apply(value);
    }
    return FlinkKeyGroups.javaHashCode(value);
  }

  /**
   * String.hashCode over UTF-16 code units; an ASCII byte is one unit. Four bytes per step
   * (h * 31^4 + b0 * 31^3 + b1 * 31^2 + b2 * 31 + b3 is the same int arithmetic as four steps)
   * keep the multiply chain short; a byte with the high bit set anywhere sends the whole string
   * through Java's own UTF-8 decoding.
   */
  private static int stringHashCode(UTF8String text) {
    Object base = text.getBaseObject();
    long offset = text.getBaseOffset();
    int length = text.numBytes();
    int h = 0;
    int seen = 0;
    int i = 0;
    for (; i + 4 <= length; i += 4) {
      int b0 = Platform.getByte(base, offset + i);
      int b1 = Platform.getByte(base, offset + i + 1);
      int b2 = Platform.getByte(base, offset + i + 2);
      int b3 = Platform.getByte(base, offset + i + 3);
      seen |= b0 | b1 | b2 | b3;
      h = h * 923521 + b0 * 29791 + b1 * 961 + b2 * 31 + b3;
    }
    for (; i < length; i++) {
      int b = Platform.getByte(base, offset + i);
      seen |= b;
      h = 31 * h + b;
    }
    return seen < 0 ? text.toString().hashCode() : h;
  }

  /** Spark values of these types are already the boxed Java value Flink hashes. */
  private static boolean isBoxedPrimitive(DataType type) {
    return type instanceof IntegerType || type instanceof LongType || type instanceof ShortType
        || type instanceof ByteType || type instanceof BooleanType || type instanceof FloatType
        || type instanceof DoubleType || type instanceof StringType;
  }

  @Override
  public Seq<Expression> children() {
    return seq(java.util.List.of(key, maxParallelism));
  }

  @Override
  public boolean nullable() {
    return true;
  }

  @Override
  public DataType dataType() {
    return DataTypes.IntegerType;
  }

  @Override
  public String prettyName() {
    return "flink_key_group";
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> newChildren) {
    return new FlinkKeyGroupExpression(newChildren.apply(0), newChildren.apply(1));
  }

  /**
   * Generated code calls a static method: for string keys (the common case) one that folds the
   * hash from the UTF-8 bytes with no boxing; for others one that hands the value to this
   * expression. No {@code CodegenFallback}: that would keep the whole plan node out of
   * whole-stage code generation.
   */
  @Override
  public ExprCode doGenCode(CodegenContext context, ExprCode code) {
    DataType max = maxParallelism.dataType();
    boolean fast = key.dataType() instanceof StringType
        && (max instanceof IntegerType || max instanceof LongType);
    java.util.List<Expression> arguments = fast ? java.util.List.of(key, maxParallelism)
        : java.util.List.of(Literal.create(this, new ObjectType(FlinkKeyGroupExpression.class)),
            key, maxParallelism);
    StaticInvoke call = new StaticInvoke(FlinkKeyGroupExpression.class, DataTypes.IntegerType,
        fast ? "keyGroupOfString" : "keyGroupOfValue", seq(arguments),
        seq(java.util.List.<AbstractDataType>of()), true, true, true, Option.empty());
    return call.genCode(context);
  }

  private static <T> Seq<T> seq(java.util.List<T> items) {
    return CollectionConverters.asScala(items).toList();
  }

  public static int keyGroupOfString(UTF8String key, int maxParallelism) {
    return keyGroupOfString(key, (long) maxParallelism);
  }

  public static int keyGroupOfString(UTF8String key, long maxParallelism) {
    int max = FlinkKeyGroups.checkMaxParallelism(maxParallelism);
    return FlinkKeyGroups.murmurHash(stringHashCode(key)) % max;
  }

  public static int keyGroupOfValue(FlinkKeyGroupExpression function, Object key,
      Object maxParallelism) {
    int max = FlinkKeyGroups.checkMaxParallelism(maxParallelism);
    return FlinkKeyGroups.murmurHash(function.javaHashCode(key)) % max;
  }

  @Override
  public int productArity() {
    return 2;
  }

  @Override
  public Object productElement(int n) {
    if (n == 0) {
      return key;
    }
    if (n == 1) {
      return maxParallelism;
    }
    throw new IndexOutOfBoundsException(String.valueOf(n));
  }

  @Override
  public boolean canEqual(Object other) {
    return other instanceof FlinkKeyGroupExpression;
  }
}
