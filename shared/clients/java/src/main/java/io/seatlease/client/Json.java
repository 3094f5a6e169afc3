package io.seatlease.client;

import com.google.gson.Gson;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import com.google.gson.stream.JsonReader;
import com.google.gson.stream.JsonToken;
import java.io.IOException;
import java.io.StringReader;

/** Strict JSON with Gson: one object and nothing after it, or null. */
final class Json {
    private static final Gson GSON = new Gson();

    private Json() {}

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
}
