package io.seatlease.client;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiConsumer;

/**
 * What the tests share: the servers they run against, read from the environment that
 * tests/test_client_java.py sets (SEATLEASE_TEST_URL and SEATLEASE_TEST_API_KEY: the served
 * functions on real Redis and PostgreSQL, with test-only controls; SEATLEASE_BAD_URL: the
 * fake server of bad answers and behaviours). A missing variable fails the test that needs
 * it: these tests are never skipped.
 */
final class Support {
    static final HttpClient HTTP = HttpClient.newBuilder().proxy(HttpClient.Builder.NO_PROXY).build();

    private Support() {}

    static String env(String name) {
        String value = System.getenv(name);
        if (value == null || value.isEmpty()) {
            fail(name + " is not set: run the Java client's tests through pytest tests/test_client_java.py (make test)");
        }
        return value;
    }

    /** The served functions' base URL. */
    static String url() { return env("SEATLEASE_TEST_URL"); }
    static String key() { return env("SEATLEASE_TEST_API_KEY"); }
    /** The fake server of bad answers (tests/client_bad_server.py). */
    static String badUrl() { return env("SEATLEASE_BAD_URL"); }
    /** The key the fake server's behaviour scenarios sign with (its "x"): what a vendor pins. */
    static String badKey() { return env("SEATLEASE_BAD_PINNED_KEY"); }
    /** The served functions' signing keys' "x" (SEATLEASE_TEST_PINNED_KEYS, comma separated). */
    static List<String> testKeys() { return List.of(env("SEATLEASE_TEST_PINNED_KEYS").split(",")); }

    /** A client builder that verifies nothing (the loud opt-out), for tests of other things. */
    static SeatClient.Builder insecure(String baseUrl, String apiKey) {
        return SeatClient.builder(baseUrl, apiKey).insecureSkipVerify(true);
    }

    static JsonElement get(String url) throws Exception {
        HttpResponse<String> answer = HTTP.send(HttpRequest.newBuilder(URI.create(url)).build(),
                HttpResponse.BodyHandlers.ofString());
        assertTrue(answer.statusCode() == 200, url + " answered " + answer.statusCode());
        return JsonParser.parseString(answer.body());
    }

    static JsonElement post(String url, String body) throws Exception {
        HttpResponse<String> answer = HTTP.send(HttpRequest.newBuilder(URI.create(url))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
        assertTrue(answer.statusCode() == 200, url + " answered " + answer.statusCode());
        return JsonParser.parseString(answer.body());
    }

    /** A test control of the served functions (tests/client_harness.py). */
    static JsonElement control(String action, String body) throws Exception {
        String where = url() + "/_test/" + action;
        return body == null ? get(where) : post(where, body);
    }

    static void license(String id, String fields) throws Exception {
        JsonObject body = JsonParser.parseString(fields).getAsJsonObject();
        body.addProperty("license_id", id);
        control("license", body.toString());
    }

    static JsonArray live(String licenseId) throws Exception {
        return control("live?license_id=" + licenseId, null).getAsJsonArray();
    }

    static boolean onlySeat(String licenseId, String session, String clientId) throws Exception {
        JsonArray seats = live(licenseId);
        return seats.size() == 1 && seats.get(0).getAsJsonObject().get("session_id").getAsString().equals(session)
                && seats.get(0).getAsJsonObject().get("client_id").getAsString().equals(clientId);
    }

    static List<JsonObject> requests(String path) throws Exception {
        List<JsonObject> matching = new ArrayList<>();
        for (JsonElement entry : control("log", null).getAsJsonArray()) {
            if (entry.getAsJsonObject().get("path").getAsString().equals(path)) {
                matching.add(entry.getAsJsonObject());
            }
        }
        return matching;
    }

    static List<String> queued(String licenseId) throws Exception {
        List<String> ids = new ArrayList<>();
        for (JsonElement ticket : control("queue?license_id=" + licenseId, null).getAsJsonArray()) {
            ids.add(ticket.getAsJsonObject().get("client_id").getAsString());
        }
        return ids;
    }

    /** The deployment's public keys' "x" (a vendor pins its own). */
    static List<String> deploymentKeys() throws Exception {
        List<String> pins = new ArrayList<>();
        for (JsonElement key : get(url() + "/keys").getAsJsonObject().getAsJsonArray("keys")) {
            pins.add(key.getAsJsonObject().get("x").getAsString());
        }
        return pins;
    }

    interface Check {
        boolean holds() throws Exception;
    }

    static void eventually(double seconds, String what, Check condition) throws Exception {
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        while (!condition.holds()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(50);
        }
    }

    /**
     * A client of the served functions: verifying against the deployment's pinned keys
     * (tenant acme) or not (the insecure opt-out), with a short back-off.
     */
    static SeatClient client(boolean verify, double backoffSeconds) {
        SeatClient.Builder builder = verify ? SeatClient.builder(url(), key()).pinnedKeys(testKeys()).tenantId("acme")
                : insecure(url(), key());
        if (backoffSeconds > 0) {
            builder.backoff(Duration.ofMillis((long) (backoffSeconds * 1000)));
        }
        return builder.build();
    }

    static double now() { return System.nanoTime() / 1e9; }

    /** Counts a lease's losses and regains. */
    static final class Watcher implements LeaseOptions.Listener {
        final List<String> lost = new CopyOnWriteArrayList<>();
        final AtomicInteger regained = new AtomicInteger();
        @Override public void onLost(Lease lease, String reason) { lost.add(reason); }
        @Override public void onRegained(Lease lease) { regained.incrementAndGet(); }
    }

    /** Keeps a client's log lines: (level, message). */
    static final class Log implements BiConsumer<String, String> {
        final List<String> lines = new CopyOnWriteArrayList<>();
        @Override public void accept(String level, String message) { lines.add(level + ": " + message); }
        long count(String level) { return lines.stream().filter(line -> line.startsWith(level + ": ")).count(); }
        boolean has(String text) { return lines.stream().anyMatch(line -> line.contains(text)); }
    }

    /** The bad server's count of calls per function of a behaviour scenario. */
    static int calls(String scenario, String function) throws Exception {
        JsonElement count = get(badUrl() + "/" + scenario + "/_calls").getAsJsonObject().get(function);
        return count == null ? 0 : count.getAsInt();
    }

    static void resetCalls(String scenario) throws Exception {
        post(badUrl() + "/" + scenario + "/_reset", "{}");
    }

    /** Whether a thread of that name still runs. */
    static boolean threadAlive(String name) {
        return Thread.getAllStackTraces().keySet().stream().anyMatch(t -> t.getName().equals(name) && t.isAlive());
    }
}
