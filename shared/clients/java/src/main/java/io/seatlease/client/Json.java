package io.seatlease.client;

import com.google.gson.Gson;
import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonNull;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import java.io.IOException;
import java.io.StringReader;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * Strict JSON with Gson, and the conversions between Gson's tree and the plain Java values
 * of the public API (Map, List, String, Number, Boolean, null): Gson never shows outside
 * this package.
 */
final class Json {
    private static final Gson GSON = new Gson();
    private static final Pattern INTEGER = Pattern.compile("-?\\d+");

    private Json() {}

    /** One object and nothing after it, else null. */
    static JsonObject parseObject(String text) {
        if (text == null || text.isBlank()) {
            return null;
        }
        try (JsonReader reader = new JsonReader(new StringReader(text))) {
            reader.setLenient(false);
            JsonElement value = GSON.getAdapter(JsonElement.class).read(reader);
            if (value == null || !value.isJsonObject() || reader.peek() != JsonToken.END_DOCUMENT) {
                return null;
            }
            return value.getAsJsonObject();
        } catch (IOException | RuntimeException | StackOverflowError e) {
            return null;
        }
    }

    static String string(JsonObject object, String name) {
        JsonElement value = object == null ? null : object.get(name);
        if (value != null && value.isJsonPrimitive() && value.getAsJsonPrimitive().isString()) {
            return value.getAsString();
        }
        return null;
    }

    static boolean isNumber(JsonElement value) {
        return value != null && value.isJsonPrimitive() && value.getAsJsonPrimitive().isNumber();
    }

    static int integer(JsonObject object, String name, int fallback) {
        JsonElement value = object == null ? null : object.get(name);
        if (isNumber(value)) {
            double number = value.getAsDouble();
            if (number == Math.rint(number) && Math.abs(number) < Integer.MAX_VALUE) {
                return (int) number;
            }
        }
        return fallback;
    }

    static boolean isTrue(JsonObject object, String name) {
        JsonElement value = object == null ? null : object.get(name);
        return value != null && value.isJsonPrimitive() && value.getAsJsonPrimitive().isBoolean()
                && value.getAsBoolean();
    }

    /** Two JSON scalars equal (absent and null are the same; objects and arrays never). */
    static boolean same(JsonElement a, JsonElement b) {
        boolean aNone = a == null || a.isJsonNull(), bNone = b == null || b.isJsonNull();
        if (aNone || bNone) {
            return aNone && bNone;
        }
        if (!a.isJsonPrimitive() || !b.isJsonPrimitive()) {
            return false;
        }
        JsonPrimitive x = a.getAsJsonPrimitive(), y = b.getAsJsonPrimitive();
        if (x.isString() && y.isString()) {
            return x.getAsString().equals(y.getAsString());
        }
        if (x.isBoolean() && y.isBoolean()) {
            return x.getAsBoolean() == y.getAsBoolean();
        }
        if (x.isNumber() && y.isNumber()) {
            return x.getAsDouble() == y.getAsDouble();
        }
        return false;
    }

    static String write(JsonElement value) {
        return GSON.toJson(value);
    }

    static JsonArray strings(List<String> values) {
        JsonArray array = new JsonArray();
        values.forEach(array::add);
        return array;
    }

    /**
     * A plain Java value as JSON: a Map with String keys, a Collection, a String, a Number, a
     * Boolean or null, nested. Anything else is an IllegalArgumentException (a caller's
     * mistake, told at once rather than sent as something the server would refuse).
     */
    static JsonElement toJson(Object value) {
        if (value == null) {
            return JsonNull.INSTANCE;
        }
        if (value instanceof String text) {
            return new JsonPrimitive(text);
        }
        if (value instanceof Boolean flag) {
            return new JsonPrimitive(flag);
        }
        if (value instanceof Number number) {
            if ((number instanceof Double d && !Double.isFinite(d)) || (number instanceof Float f && !Float.isFinite(f))) {
                throw new IllegalArgumentException("JSON has no " + number);
            }
            return new JsonPrimitive(number);
        }
        if (value instanceof Map<?, ?> map) {
            JsonObject object = new JsonObject();
            for (Map.Entry<?, ?> entry : map.entrySet()) {
                if (!(entry.getKey() instanceof String key)) {
                    throw new IllegalArgumentException("JSON object keys are strings, not " + entry.getKey());
                }
                object.add(key, toJson(entry.getValue()));
            }
            return object;
        }
        if (value instanceof Collection<?> items) {
            JsonArray array = new JsonArray();
            items.forEach(item -> array.add(toJson(item)));
            return array;
        }
        throw new IllegalArgumentException("Not a JSON value (Map, List, String, Number, Boolean or null): "
                + value.getClass().getName());
    }

    static JsonObject toJsonObject(Map<String, ?> map) {
        return map == null ? null : toJson(map).getAsJsonObject();
    }

    /**
     * JSON as plain, unmodifiable Java values: an object is a Map (in the document's order),
     * an array a List, a number a Long when it is an integer that fits (else a BigInteger)
     * and a Double otherwise, true/false a Boolean, null null.
     */
    static Object toJava(JsonElement value) {
        if (value == null || value.isJsonNull()) {
            return null;
        }
        if (value.isJsonObject()) {
            return toMap(value.getAsJsonObject());
        }
        if (value.isJsonArray()) {
            List<Object> items = new ArrayList<>();
            value.getAsJsonArray().forEach(item -> items.add(toJava(item)));
            return Collections.unmodifiableList(items);
        }
        JsonPrimitive primitive = value.getAsJsonPrimitive();
        if (primitive.isBoolean()) {
            return primitive.getAsBoolean();
        }
        if (primitive.isString()) {
            return primitive.getAsString();
        }
        String text = primitive.getAsNumber().toString();
        if (INTEGER.matcher(text).matches()) {
            BigInteger integer = new BigInteger(text);
            return integer.bitLength() < 64 ? (Object) integer.longValue() : integer;
        }
        return new BigDecimal(text).doubleValue();
    }

    static Map<String, Object> toMap(JsonObject object) {
        if (object == null) {
            return Map.of();
        }
        Map<String, Object> map = new LinkedHashMap<>();
        for (Map.Entry<String, JsonElement> entry : object.entrySet()) {
            map.put(entry.getKey(), toJava(entry.getValue()));
        }
        return Collections.unmodifiableMap(map);
    }
}
