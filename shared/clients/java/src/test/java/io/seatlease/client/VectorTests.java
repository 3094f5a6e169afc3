package io.seatlease.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The shared token vectors (shared/clients/testdata/vectors.json): every client gives each
 * answer the same outcome. Offline: no server. In a copy of this folder alone (a vendor's
 * build), the copy in the test resources (src/test/resources/vectors.json, which
 * tests/test_client_java.py keeps identical to the shared file).
 */
class VectorTests {
    static JsonObject vectors() throws Exception {
        Path file = Path.of(System.getProperty("user.dir"), "..", "testdata", "vectors.json");
        if (Files.exists(file)) {
            return Json.parseObject(Files.readString(file));
        }
        try (java.io.InputStream copy = VectorTests.class.getResourceAsStream("/vectors.json")) {
            return Json.parseObject(new String(copy.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8));
        }
    }

    static TokenVerifier verifierFor(JsonObject vectors, JsonObject c, Instant at) {
        JsonElement jwks = c.has("jwks") ? c.get("jwks") : vectors.get("jwks");
        List<String> pins = new ArrayList<>();
        if (!(c.has("pinned") && !c.get("pinned").getAsBoolean())) {
            vectors.getAsJsonArray("pinned").forEach(pin -> pins.add(pin.getAsString()));
        }
        String tenant = Json.string(vectors, "tenant_id");
        if (c.has("tenant_id")) {
            tenant = c.get("tenant_id").isJsonNull() ? null : c.get("tenant_id").getAsString();
        }
        double leeway = (c.has("leeway") ? c : vectors).get("leeway").getAsDouble();
        String document = Json.write(jwks);
        String machine = c.has("machine_id") ? Machine.fingerprint(c.get("machine_id").getAsString()) : null;
        return new TokenVerifier(() -> document, pins, tenant, Duration.ofMillis((long) (leeway * 1000)),
                at == null ? null : () -> at, machine);
    }

    /** The outcome the vector names: "ok" or the error's code. */
    static String outcome(JsonObject vectors, JsonObject c) {
        int status = c.get("status").getAsInt();
        Map<String, Object> request = Json.toMap(c.getAsJsonObject("request"));
        Map<String, Object> answer = Json.toMap(c.getAsJsonObject("answer"));
        try {
            // the public API: plain Java values in and out
            Map<String, Object> claims = verifierFor(vectors, c, null).check(c.get("function").getAsString(), request, answer, status);
            Object want = answer.get("session_id") != null ? answer.get("session_id") : request.get("session_id");
            if (want == null || !want.equals(claims.get("sid"))) {
                return "ok with another sid";
            }
            int seats = Json.integer(c, "seats_claim", 1); // the weight the token signs, 1 when absent
            if (TokenVerifier.claimedSeats(claims) != seats) {
                return "ok with seats " + TokenVerifier.claimedSeats(claims) + ", not " + seats;
            }
            return "ok";
        } catch (SeatException.TokenException refused) {
            return refused.status() == status ? refused.code() : refused.code() + " (status " + refused.status() + ")";
        }
    }

    @TestFactory
    Stream<DynamicTest> everyVector() throws Exception {
        JsonObject vectors = vectors();
        assertEquals("seatlease-client-vectors/1", Json.string(vectors, "format"));
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonElement element : vectors.getAsJsonArray("cases")) {
            JsonObject c = element.getAsJsonObject();
            String name = c.get("name").getAsString();
            tests.add(DynamicTest.dynamicTest(name, () -> assertEquals(c.get("expect").getAsString(), outcome(vectors, c))));
        }
        assertTrue(tests.size() >= 31, "vectors: " + tests.size());
        return tests.stream();
    }

    @Test
    void everyMachineFingerprint() throws Exception {
        int count = 0;
        for (JsonElement element : vectors().getAsJsonArray("machines")) {
            JsonObject m = element.getAsJsonObject();
            assertEquals(Json.string(m, "fingerprint"), Machine.fingerprint(Json.string(m, "machine_id")));
            count++;
        }
        assertTrue(count >= 4, "machines: " + count);
    }

    @Test
    void leewayByTheVerifiersClock() throws Exception {
        JsonObject vectors = vectors();
        JsonObject good = vectors.getAsJsonArray("cases").get(0).getAsJsonObject();
        Map<String, Object> request = Json.toMap(good.getAsJsonObject("request"));
        Map<String, Object> answer = Json.toMap(good.getAsJsonObject("answer"));
        long exp = 4102444800L, iat = 1767225600L;
        for (long at : new long[] {exp + 59, iat - 59}) {
            verifierFor(vectors, good, Instant.ofEpochSecond(at)).check("acquire", request, answer, 201);
        }
        for (long at : new long[] {exp + 60, iat - 61}) {
            TokenVerifier verifier = verifierFor(vectors, good, Instant.ofEpochSecond(at));
            assertThrows(SeatException.TokenExpired.class, () -> verifier.check("acquire", request, answer, 201));
        }
    }

    @Test
    void pinnedKeyForms() {
        String x = "4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk";
        String pem = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk=\n-----END PUBLIC KEY-----\n";
        String jwk = "{\"kty\": \"OKP\", \"crv\": \"Ed25519\", \"x\": \"" + x + "\"}";
        assertArrayEquals(TokenVerifier.pinnedKeyRaw(x), TokenVerifier.pinnedKeyRaw(pem));
        assertArrayEquals(TokenVerifier.pinnedKeyRaw(x), TokenVerifier.pinnedKeyRaw(jwk));
        assertThrows(IllegalArgumentException.class, () -> TokenVerifier.pinnedKeyRaw("{\"kty\": \"RSA\"}"));
        assertThrows(IllegalArgumentException.class,
                () -> SeatClient.builder("http://127.0.0.1:1", "k").pinnedKeys(List.of("nope")).build());
        assertThrows(IllegalArgumentException.class, () -> SeatClient.builder("ftp://x", "k").build());
        try (SeatClient client = Support.insecure("http://127.0.0.1:1/", "sl_secret").build()) {
            assertFalse(client.toString().contains("sl_secret"));
            assertEquals("http://127.0.0.1:1", client.baseUrl());
        }
    }
}
