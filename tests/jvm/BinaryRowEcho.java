package org.statesource.shim;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Decodes binary rows with the shim's FlinkBinaryRowDecoder into a Spark column vector and
 * echoes what the vector holds, for tests/flink/serializers/test_binary_rows_in_java.py (no Spark session).
 *
 * <p>Each stdin line is {"descriptor": d, "scales": [s...], "rows": hex} (rows framed as
 * BinaryRowDataSerializer writes them, one after another); each answer line is
 * {"rows": [[kind, field...]...]} or {"error": message, "at": position}. Fields are echoed
 * exactly: floats and doubles as their bits, decimals as their unscaled values, dates and
 * timestamps as the numbers Spark keeps, bytes as hex, nulls as null.
 */
public final class BinaryRowEcho {
  private static final ObjectMapper JSON = new ObjectMapper();

  public static void main(String[] args) throws Exception {
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      System.out.println(JSON.writeValueAsString(answer(JSON.readTree(line))));
    }
  }

  private static ObjectNode answer(JsonNode request) {
    JsonNode descriptor = request.get("descriptor");
    String[] names = new String[descriptor.get("binaryRow").size()];
    StructType type = new StructType();
    boolean withKind = descriptor.path("withKind").asBoolean();
    if (withKind) {
      type = type.add("row_kind", DataTypes.StringType);
    }
    for (int i = 0; i < names.length; i++) {
      JsonNode field = descriptor.get("binaryRow").get(i);
      names[i] = field.isTextual() ? field.textValue() : "decimal";
      int precision = field.path("decimal").asInt();
      type = type.add(new StructField("f" + i, sparkType(names[i], precision,
          request.get("scales").get(i).asInt()), true,
          org.apache.spark.sql.types.Metadata.empty()));
    }
    byte[] data = HexFormat.of().parseHex(request.get("rows").textValue());
    FlinkValueDecoder decoder = FlinkValueDecoder.of(descriptor);
    OnHeapColumnVector out = new OnHeapColumnVector(16, type);
    FlinkCursor cursor = new FlinkCursor(data).at(0, data.length);
    ObjectNode answer = JSON.createObjectNode();
    try {
      while (!cursor.atEnd()) {
        decoder.read(cursor, out);
      }
    } catch (FlinkDataException e) {
      answer.put("error", e.getMessage());
      answer.put("at", e.position);
      return answer;
    }
    ArrayNode rows = answer.putArray("rows");
    int first = withKind ? 1 : 0;
    for (int row = 0; row < out.getElementsAppended(); row++) {
      ArrayNode values = rows.addArray();
      values.add(withKind ? out.getChild(0).getUTF8String(row).toString() : null);
      for (int i = 0; i < names.length; i++) {
        OnHeapColumnVector child = (OnHeapColumnVector) out.getChild(i + first);
        if (child.isNullAt(row)) {
          values.addNull();
          continue;
        }
        DataType fieldType = type.fields()[i + first].dataType();
        switch (names[i]) {
          case "i1" -> values.add(child.getByte(row));
          case "i2" -> values.add(child.getShort(row));
          case "i4", "date" -> values.add(child.getInt(row));
          case "i8", "tsMillis", "tsMicros" -> values.add(child.getLong(row));
          case "f4" -> values.add(Float.floatToRawIntBits(child.getFloat(row)));
          case "f8" -> values.add(Double.doubleToRawLongBits(child.getDouble(row)));
          case "bool" -> values.add(child.getBoolean(row));
          case "text" -> values.add(child.getUTF8String(row).toString());
          case "binary" -> values.add(HexFormat.of().formatHex(child.getBinary(row)));
          default -> {
            DecimalType decimal = (DecimalType) fieldType;
            values.add(child.getDecimal(row, decimal.precision(), decimal.scale()).toUnscaledLong());
          }
        }
      }
    }
    return answer;
  }

  private static DataType sparkType(String name, int precision, int scale) {
    return switch (name) {
      case "i1" -> DataTypes.ByteType;
      case "i2" -> DataTypes.ShortType;
      case "i4" -> DataTypes.IntegerType;
      case "i8" -> DataTypes.LongType;
      case "f4" -> DataTypes.FloatType;
      case "f8" -> DataTypes.DoubleType;
      case "bool" -> DataTypes.BooleanType;
      case "date" -> DataTypes.DateType;
      case "text" -> DataTypes.StringType;
      case "binary" -> DataTypes.BinaryType;
      case "tsMillis", "tsMicros" -> DataTypes.TimestampNTZType;
      default -> DataTypes.createDecimalType(precision, scale);
    };
  }
}
