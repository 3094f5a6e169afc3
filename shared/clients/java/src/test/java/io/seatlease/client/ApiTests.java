package io.seatlease.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import java.lang.reflect.Constructor;
import java.lang.reflect.Executable;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Type;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The public API's shape: plain Java types only, an immutable client, Durations. Offline. */
class ApiTests {
    /** Every class of the package, public or nested public. */
    static List<Class<?>> publicClasses() throws Exception {
        URL root = SeatClient.class.getProtectionDomain().getCodeSource().getLocation();
        Path folder = Path.of(root.toURI()).resolve("io/seatlease/client");
        List<Class<?>> classes = new ArrayList<>();
        try (Stream<Path> files = Files.list(folder)) {
            for (Path file : files.toList()) {
                String name = file.getFileName().toString();
                if (name.endsWith(".class")) {
                    Class<?> kind = Class.forName("io.seatlease.client." + name.substring(0, name.length() - 6));
                    if (Modifier.isPublic(kind.getModifiers()) && (kind.getEnclosingClass() == null
                            || Modifier.isPublic(kind.getEnclosingClass().getModifiers()))) {
                        classes.add(kind);
                    }
                }
            }
        }
        return classes;
    }

    static boolean exposed(int modifiers) {
        return Modifier.isPublic(modifiers) || Modifier.isProtected(modifiers);
    }

    /** Gson is an implementation detail: no public or protected signature names one of its types. */
    @Test
    void noGsonTypeInThePublicApi() throws Exception {
        List<String> leaks = new ArrayList<>();
        List<Class<?>> classes = publicClasses();
        assertTrue(classes.size() >= 10, classes.toString());
        for (Class<?> kind : classes) {
            List<Type> types = new ArrayList<>();
            types.add(kind.getGenericSuperclass());
            types.addAll(List.of(kind.getGenericInterfaces()));
            for (Method method : kind.getDeclaredMethods()) {
                if (exposed(method.getModifiers())) {
                    types.add(method.getGenericReturnType());
                    types.addAll(signature(method));
                }
            }
            for (Constructor<?> constructor : kind.getDeclaredConstructors()) {
                if (exposed(constructor.getModifiers())) {
                    types.addAll(signature(constructor));
                }
            }
            for (Field field : kind.getDeclaredFields()) {
                if (exposed(field.getModifiers())) {
                    types.add(field.getGenericType());
                }
            }
            for (Type type : types) {
                if (type != null && type.getTypeName().contains("com.google.gson")) {
                    leaks.add(kind.getName() + ": " + type.getTypeName());
                }
            }
        }
        assertEquals(List.of(), leaks);
    }

    static List<Type> signature(Executable executable) {
        List<Type> types = new ArrayList<>(List.of(executable.getGenericParameterTypes()));
        types.addAll(List.of(executable.getGenericExceptionTypes()));
        return types;
    }

    /** The builder's settings are copied: changing the builder later changes no client. */
    @Test
    void theClientIsImmutableOnceBuilt() {
        SeatClient.Builder builder = SeatClient.builder("http://127.0.0.1:9/", "sl_test").insecureSkipVerify(true)
                .timeout(Duration.ofSeconds(3)).releaseTimeout(Duration.ofSeconds(2));
        try (SeatClient first = builder.build()) {
            builder.timeout(Duration.ofSeconds(7)).releaseTimeout(Duration.ofSeconds(4))
                    .pinnedKeys(List.of("4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk"));
            try (SeatClient second = builder.build()) {
                assertEquals(Duration.ofSeconds(3), first.timeout());
                assertEquals(Duration.ofSeconds(2), first.releaseTimeout());
                assertTrue(!first.verifies() && second.verifies());
                assertEquals(Duration.ofSeconds(7), second.timeout());
            }
        }
        assertThrows(IllegalArgumentException.class, () -> SeatClient.builder("http://x", "k").timeout(Duration.ZERO));
        assertThrows(IllegalArgumentException.class, () -> SeatClient.builder("http://x", "k").retries(-1));
        assertThrows(IllegalArgumentException.class, () -> new AcquireOptions().leaseDuration(Duration.ofMillis(1500)));
    }

    /** A closed client refuses new calls; closing twice is fine. */
    @Test
    void aClosedClientRefusesCalls() {
        SeatClient client = Support.insecure("http://127.0.0.1:9", "sl_test").build();
        client.close();
        client.close();
        assertThrows(IllegalStateException.class, () -> client.acquire("lic", "pc-1"));
        assertThrows(IllegalStateException.class, () -> client.lease("lic", new LeaseOptions("pc-1")));
        assertThrows(IllegalStateException.class, () -> client.leaseAsync("lic", new LeaseOptions("pc-1")));
    }

    /** Metadata and entitlements are plain Java values, copied and sent as JSON. */
    @Test
    void optionsTakePlainJavaValues() {
        Map<String, Object> metadata = new LinkedHashMap<>();
        metadata.put("user", "ann");
        metadata.put("pid", 4211);
        metadata.put("beta", true);
        AcquireOptions options = new AcquireOptions().metadata(metadata).entitlements(List.of("pro"))
                .version("2026.4").leaseDuration(Duration.ofMinutes(2));
        metadata.put("later", "not sent");
        JsonObject body = options.copy().body("lic", "pc-1");
        assertEquals("{\"license_id\":\"lic\",\"client_id\":\"pc-1\",\"lease_seconds\":120,"
                + "\"metadata\":{\"user\":\"ann\",\"pid\":4211,\"beta\":true},"
                + "\"entitlements\":[\"pro\"],\"version\":\"2026.4\"}", Json.write(body));
        assertThrows(IllegalArgumentException.class, () -> new LeaseOptions("pc-1").metadata(Map.of("when", new Object())));
        JsonObject error = Json.parseObject("{\"code\": \"x\", \"seats_used\": 3, \"ratio\": 0.5, \"names\": [\"a\"], \"none\": null}");
        Map<String, Object> plain = new SeatException(409, "x", "m", error, -1).body();
        assertEquals(3L, plain.get("seats_used"));
        assertEquals(0.5, plain.get("ratio"));
        assertEquals(List.of("a"), plain.get("names"));
        assertTrue(plain.containsKey("none") && plain.get("none") == null);
        assertThrows(UnsupportedOperationException.class, () -> plain.put("more", 1));
    }
}
