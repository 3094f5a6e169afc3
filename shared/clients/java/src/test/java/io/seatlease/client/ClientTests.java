package io.seatlease.client;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

/**
 * The Java client's tests, a plain runner (no test framework to download): every shared
 * token vector, bad server answers (tests/client_bad_server.py at SEATLEASE_BAD_URL), and the
 * live suite against the served functions (SEATLEASE_TEST_URL, SEATLEASE_TEST_API_KEY, from
 * tests/test_client_java.py), the same tests as the Go and C clients'. It prints
 * "--- PASS: name" per test and a closing line "seatlease-java: N passed, F failed, S skipped".
 */
public final class ClientTests {
    interface Body {
        void run() throws Exception;
    }

    static final class Skip extends RuntimeException {
        private static final long serialVersionUID = 1L;
        Skip(String why) { super(why); }
    }

    static void check(boolean condition, Object... what) {
        if (!condition) {
            StringBuilder text = new StringBuilder("check failed");
            for (Object part : what) {
                text.append(' ').append(part);
            }
            throw new AssertionError(text.toString());
        }
    }

    @SuppressWarnings("unchecked")
    static <E extends Throwable> E expect(Class<E> kind, Body body) throws Exception {
        try {
            body.run();
        } catch (Throwable thrown) {
            if (kind.isInstance(thrown)) {
                return (E) thrown;
            }
            throw new AssertionError("want " + kind.getSimpleName() + ", got " + thrown, thrown);
        }
        throw new AssertionError("want " + kind.getSimpleName() + ", nothing thrown");
    }

    // -- the served functions -----------------------------------------------------------------

    static final String URL = System.getenv("SEATLEASE_TEST_URL");
    static final String KEY = System.getenv("SEATLEASE_TEST_API_KEY");
    static final HttpClient HTTP = HttpClient.newBuilder().proxy(HttpClient.Builder.NO_PROXY).build();

    static void needStack() {
        if (URL == null || URL.isEmpty() || KEY == null) {
            throw new Skip("SEATLEASE_TEST_URL not set: run through pytest tests/test_client_java.py");
        }
    }

    static JsonElement control(String action, String body) throws Exception {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(URL + "/_test/" + action));
        request = body == null ? request.GET() : request.POST(HttpRequest.BodyPublishers.ofString(body));
        HttpResponse<String> answer = HTTP.send(request.build(), HttpResponse.BodyHandlers.ofString());
        check(answer.statusCode() == 200, "control", action, answer.statusCode());
        return com.google.gson.JsonParser.parseString(answer.body());
    }

    static void license(String id, String fields) throws Exception {
        JsonObject body = Json.parseObject(fields);
        body.addProperty("license_id", id);
        control("license", Json.write(body));
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

    static void eventually(double seconds, String what, BooleanSupplier condition) throws Exception {
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        while (!condition.getAsBoolean()) {
            check(System.nanoTime() < deadline, "timed out waiting for", what);
            Thread.sleep(50);
        }
    }

    static SeatClient client(boolean verify, double backoffSeconds) {
        SeatClient.Options options = new SeatClient.Options().verify(verify).tenantId(verify ? "acme" : null);
        if (backoffSeconds > 0) {
            options.backoff(Duration.ofMillis((long) (backoffSeconds * 1000)));
        }
        return new SeatClient(URL, KEY, options);
    }

    static double now() { return System.nanoTime() / 1e9; }

    // -- vectors --------------------------------------------------------------------------------

    static JsonObject vectors() throws Exception {
        return Json.parseObject(Files.readString(Path.of("..", "testdata", "vectors.json")));
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
        return new TokenVerifier(() -> document, pins, tenant, leeway, at == null ? null : () -> at, machine);
    }

    static void everyVector(Map<String, String> outcomes) throws Exception {
        JsonObject vectors = vectors();
        check("seatlease-client-vectors/1".equals(Json.string(vectors, "format")));
        for (JsonElement element : vectors.getAsJsonArray("cases")) {
            JsonObject c = element.getAsJsonObject();
            String name = c.get("name").getAsString(), expect = c.get("expect").getAsString();
            int status = c.get("status").getAsInt();
            JsonObject request = c.getAsJsonObject("request"), answer = c.getAsJsonObject("answer");
            String outcome;
            try {
                JsonObject claims = verifierFor(vectors, c, null).check(c.get("function").getAsString(), request, answer, status);
                String want = Json.string(answer, "session_id");
                if (want == null) {
                    want = Json.string(request, "session_id");
                }
                outcome = want != null && want.equals(Json.string(claims, "sid")) ? "ok" : "ok with another sid";
                // the lease's weight the token signs, 1 when absent
                int seats = Json.integer(c, "seats_claim", 1);
                if (outcome.equals("ok") && TokenVerifier.claimedSeats(claims) != seats) {
                    outcome = "ok with seats " + TokenVerifier.claimedSeats(claims) + ", not " + seats;
                }
            } catch (SeatException.TokenException refused) {
                outcome = refused.status() == status ? refused.code() : refused.code() + " (status " + refused.status() + ")";
            }
            outcomes.put(name, outcome.equals(expect) ? null : "want " + expect + ", got " + outcome);
        }
        check(outcomes.size() >= 30, "vectors", outcomes.size());
    }

    static void everyMachineFingerprint() throws Exception {
        JsonObject vectors = vectors();
        int count = 0;
        for (JsonElement element : vectors.getAsJsonArray("machines")) {
            JsonObject m = element.getAsJsonObject();
            String got = Machine.fingerprint(Json.string(m, "machine_id"));
            check(got.equals(Json.string(m, "fingerprint")), "fingerprint", Json.string(m, "machine_id"), got);
            count++;
        }
        check(count >= 4, "machines", count);
    }

    static void leewayByTheVerifiersClock() throws Exception {
        JsonObject vectors = vectors();
        JsonObject good = vectors.getAsJsonArray("cases").get(0).getAsJsonObject();
        long exp = 4102444800L, iat = 1767225600L;
        Map<Long, Boolean> cases = new LinkedHashMap<>();
        cases.put(exp + 59, true);
        cases.put(exp + 60, false);
        cases.put(iat - 59, true);
        cases.put(iat - 61, false);
        for (Map.Entry<Long, Boolean> c : cases.entrySet()) {
            TokenVerifier verifier = verifierFor(vectors, good, Instant.ofEpochSecond(c.getKey()));
            Body body = () -> verifier.check("acquire", good.getAsJsonObject("request"), good.getAsJsonObject("answer"), 201);
            if (c.getValue()) {
                body.run();
            } else {
                expect(SeatException.TokenExpired.class, body);
            }
        }
    }

    static void pinnedKeyForms() throws Exception {
        String x = "4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk";
        String pem = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk=\n-----END PUBLIC KEY-----\n";
        String jwk = "{\"kty\": \"OKP\", \"crv\": \"Ed25519\", \"x\": \"" + x + "\"}";
        byte[] a = TokenVerifier.pinnedKeyRaw(x), b = TokenVerifier.pinnedKeyRaw(pem), c = TokenVerifier.pinnedKeyRaw(jwk);
        check(java.util.Arrays.equals(a, b) && java.util.Arrays.equals(a, c));
        expect(IllegalArgumentException.class, () -> TokenVerifier.pinnedKeyRaw("{\"kty\": \"RSA\"}"));
        expect(IllegalArgumentException.class, () -> new SeatClient("http://127.0.0.1:1", "k", new SeatClient.Options().pinnedKeys(List.of("nope"))));
        expect(IllegalArgumentException.class, () -> new SeatClient("ftp://x", "k"));
        SeatClient client = new SeatClient("http://127.0.0.1:1/", "sl_secret");
        check(!client.toString().contains("sl_secret") && client.baseUrl().equals("http://127.0.0.1:1"));
    }

    // -- bad server answers -------------------------------------------------------------------

    static final Object[][] BAD = {
        {"truncated", "acquire", false, SeatException.InvalidResponse.class, 201},
        {"truncated", "lease", true, SeatException.InvalidResponse.class, 201},
        {"wrong_types", "acquire", false, SeatException.InvalidResponse.class, 201},
        {"wrong_types", "heartbeat", true, SeatException.InvalidResponse.class, 201},
        {"not_an_object", "acquire", false, SeatException.InvalidResponse.class, 201},
        {"empty", "acquire", true, SeatException.InvalidResponse.class, 201},
        {"html", "lease", false, SeatException.InvalidResponse.class, 200},
        {"no_token", "acquire", true, SeatException.TokenMissing.class, 201},
        {"no_token", "lease", true, SeatException.TokenMissing.class, 201},
        {"no_token", "heartbeat", true, SeatException.TokenMissing.class, 201},
        {"token_not_a_string", "acquire", true, SeatException.TokenMissing.class, 201},
        {"huge", "acquire", false, SeatException.InvalidResponse.class, 201},
        {"huge_error", "acquire", false, SeatException.InvalidResponse.class, 409},
        {"error_wrong_types", "acquire", false, SeatException.NoSeatsAvailable.class, 409},
        {"error_not_json", "acquire", false, SeatException.InvalidRequest.class, 400},
        {"jwks_not_a_key_set", "acquire", true, SeatException.UnknownKeyId.class, 0},
        {"jwks_truncated", "acquire", true, SeatException.InvalidResponse.class, 200},
        {"release_wrong_types", "release", true, SeatException.InvalidResponse.class, 200},
        {"deep_nesting", "acquire", false, SeatException.InvalidResponse.class, 201},
        {"absurd_numbers", "acquire", false, SeatException.BackendUnavailable.class, 503},
        {"absurd_numbers_409", "acquire", false, SeatException.NoSeatsAvailable.class, 409},
        {"seats_mismatch", "acquire", false, SeatException.SeatsMismatch.class, 409},
        {"seats_mismatch", "lease", false, SeatException.SeatsMismatch.class, 409},
        {"weighted_denial", "acquire", false, SeatException.NoSeatsAvailable.class, 409},
        {"machine_mismatch", "acquire", false, SeatException.MachineMismatch.class, 409},
        {"machine_mismatch", "lease", false, SeatException.MachineMismatch.class, 409},
    };

    /**
     * Weighted seats against the bad server's scenarios: seats is sent only when set (the
     * "weights" scenario echoes the weight asked, none when none was, and refuses a seats that
     * is not a positive integer); the answer's and the lease's weight, 1 from a server that does
     * not say; a seats_mismatch's and a weighted denial's numbers; a mismatch is not waited for.
     */
    static void weightsAreSentAndRead() throws Exception {
        String server = System.getenv("SEATLEASE_BAD_URL");
        if (server == null || server.isEmpty()) {
            throw new Skip("SEATLEASE_BAD_URL not set: run through pytest tests/test_client_java.py");
        }
        SeatClient.Options options = new SeatClient.Options().retries(0);
        SeatClient weights = new SeatClient(server + "/weights", "sl_test", options);
        Answer plain = weights.acquire("lic", "pc-1");
        check(plain.seats() == 1 && !plain.raw().has("seats"), plain);
        Answer three = weights.acquire("lic", "pc-2", new SeatClient.AcquireOptions().seats(3));
        check(three.seats() == 3, three);
        try (Lease lease = weights.lease("lic", new LeaseOptions("pc-3"))) {
            check(lease.seats() == 1 && lease.getSeats() == 1);
        }
        try (Lease lease = weights.lease("lic", new LeaseOptions("pc-4").seats(4))) {
            check(lease.seats() == 4 && lease.getSeats() == 4);
        }
        SeatClient mismatch = new SeatClient(server + "/seats_mismatch", "sl_test", options);
        SeatException.SeatsMismatch refused = expect(SeatException.SeatsMismatch.class,
                () -> mismatch.acquire("lic", "pc-1", new SeatClient.AcquireOptions().seats(2)));
        check(refused.heldSeats() == 4 && refused.seats() == 2 && refused.code().equals("seats_mismatch"), refused);
        check(!SeatException.NoSeatsAvailable.class.isInstance(refused), "a mismatch is no denial of a seat");
        double started = now();
        expect(SeatException.SeatsMismatch.class,
                () -> mismatch.lease("lic", new LeaseOptions("pc-1").seats(2).waitFor(Duration.ofSeconds(30))));
        check(now() - started < 5, "a mismatch is not waited for");
        SeatClient denial = new SeatClient(server + "/weighted_denial", "sl_test", options);
        SeatException.NoSeatsAvailable full = expect(SeatException.NoSeatsAvailable.class,
                () -> denial.acquire("lic", "pc-1", new SeatClient.AcquireOptions().seats(4)));
        check(full.seatsRequested() == 4 && full.seatsUsed() == 6, full);
        check(TokenVerifier.claimedSeats(new JsonObject()) == 1);
    }

    static void everyBadAnswer(Map<String, String> outcomes) {
        String server = System.getenv("SEATLEASE_BAD_URL");
        if (server == null || server.isEmpty()) {
            throw new Skip("SEATLEASE_BAD_URL not set: run through pytest tests/test_client_java.py");
        }
        for (Object[] c : BAD) {
            String scenario = (String) c[0], call = (String) c[1];
            SeatClient client = new SeatClient(server + "/" + scenario, "sl_test",
                    new SeatClient.Options().verify((Boolean) c[2]).retries(0));
            String outcome;
            try {
                switch (call) {
                    case "acquire": client.acquire("lic", "pc-1"); break;
                    case "heartbeat": client.heartbeat("lic", "c2Vzc2lvbi0wMDAwMDAwMDAx"); break;
                    case "release": client.release("lic", "c2Vzc2lvbi0wMDAwMDAwMDAx"); break;
                    default: client.lease("lic", new LeaseOptions("pc-1")).close();
                }
                outcome = "no error";
            } catch (SeatException thrown) {
                outcome = ((Class<?>) c[3]).isInstance(thrown) && thrown.status() == (Integer) c[4]
                        && !thrown.getMessage().isEmpty() ? null : thrown.toString();
            } catch (RuntimeException | StackOverflowError thrown) {
                outcome = "untyped " + thrown;
            }
            outcomes.put(scenario + "_" + call, outcome);
        }
    }

    // -- live -----------------------------------------------------------------------------------

    static final class Watcher implements LeaseOptions.Listener {
        final List<String> lost = new CopyOnWriteArrayList<>();
        final AtomicInteger regained = new AtomicInteger();
        @Override public void onLost(Lease lease, String reason) { lost.add(reason); }
        @Override public void onRegained(Lease lease) { regained.incrementAndGet(); }
    }

    static void leaseLifePastThreeLeasesARedisFlushAndARevoke() throws Exception {
        needStack();
        license("j-life", "{\"seats\": 2, \"lease_seconds\": 2}");
        SeatClient client = client(true, 0.05);
        Watcher watcher = new Watcher();
        JsonObject metadata = new JsonObject();
        metadata.addProperty("user", "ann");
        try (Lease lease = client.lease("j-life", new LeaseOptions("ws-1").metadata(metadata).listener(watcher))) {
            String first = lease.sessionId();
            double firstExpiry = lease.expiresAt();
            check(first != null && lease.token() != null && lease.leaseSeconds() == 2 && lease.seatsUsed() == 1
                    && lease.seatsTotal() == 2, lease);
            int before = requests("/heartbeat").size();
            Thread.sleep(6500); // three and a quarter leases of 2 s
            check(onlySeat("j-life", first, "ws-1") && first.equals(lease.sessionId()) && !lease.lost());
            check(lease.expiresAt() - firstExpiry >= 4, "expiry moved");
            int beats = requests("/heartbeat").size() - before;
            check(beats >= 8 && beats <= 14, beats, "heartbeats");
            control("revoke", "{\"license_id\": \"j-life\", \"session_id\": \"" + first + "\"}");
            eventually(5, "regained after the revoke", () -> watcher.regained.get() == 1);
            check(watcher.lost.equals(List.of("unknown")) || watcher.lost.equals(List.of("expired")), watcher.lost);
            String second = lease.sessionId();
            check(!lease.lost() && !second.equals(first) && onlySeat("j-life", second, "ws-1"));
            control("flush", "{}");
            eventually(5, "regained after the flush", () -> watcher.regained.get() == 2);
            check(watcher.lost.size() == 2 && watcher.lost.get(1).equals("unknown"), watcher.lost);
            check(onlySeat("j-life", lease.sessionId(), "ws-1"));
            lease.release();
            lease.release(); // once
            check(lease.released() && live("j-life").size() == 0);
        }
    }

    static void aStalledServerAnswersTheRetryFromTheFirstRun() throws Exception {
        needStack();
        license("j-stall", "{\"seats\": 2, \"lease_seconds\": 60}");
        SeatClient client = new SeatClient(URL, KEY, new SeatClient.Options().verify(true)
                .timeout(Duration.ofMillis(500)).backoff(Duration.ofMillis(50)));
        control("stall", "{\"path\": \"/acquire\", \"seconds\": 1.5}");
        Answer answer = client.acquire("j-stall", "pc-1");
        List<JsonObject> acquires = requests("/acquire");
        JsonObject a = acquires.get(acquires.size() - 2), b = acquires.get(acquires.size() - 1);
        check(a.get("request_id").getAsString().equals(b.get("request_id").getAsString()), a, b);
        // both attempts were answered 201 (created): the retry was told what the first did
        check(a.get("status").getAsInt() == 201 && b.get("status").getAsInt() == 201);
        check(answer.seatsUsed() == 1 && onlySeat("j-stall", answer.sessionId(), "pc-1"));
        control("stall", "{\"path\": \"/release\", \"seconds\": 1.5}");
        Answer released = client.release("j-stall", answer.sessionId());
        check(released.released() && released.seatsUsed() == 0 && released.token() != null);
    }

    static void aRetryOfYourOwnWithTheSameRequestIdTakesOneSeat() throws Exception {
        needStack();
        license("j-once", "{\"seats\": 3, \"lease_seconds\": 60}");
        SeatClient client = new SeatClient(URL, KEY, new SeatClient.Options().verify(true).tenantId("acme")
                .timeout(Duration.ofMillis(500)).retries(0));
        SeatClient.AcquireOptions once = new SeatClient.AcquireOptions().requestId("j-once-request-0001").user("ann");
        control("stall", "{\"path\": \"/acquire\", \"seconds\": 1.5}");
        SeatException timedOut = expect(SeatException.BackendUnavailable.class, () -> client.acquire("j-once", "pc-1", once));
        check(timedOut.status() == 0 && timedOut.code().equals("network_error"));
        check(live("j-once").size() == 1); // the first attempt took the seat
        Answer answer = client.acquire("j-once", "pc-1", once);
        check(answer.status() == 201 && answer.seatsUsed() == 1 && onlySeat("j-once", answer.sessionId(), "pc-1"));
        List<JsonObject> acquires = requests("/acquire");
        check(acquires.get(acquires.size() - 1).get("request_id").getAsString().equals("j-once-request-0001"));
        client.release("j-once", answer.sessionId());
    }

    static void typedErrors() throws Exception {
        needStack();
        license("j-full", "{\"seats\": 1, \"lease_seconds\": 60}");
        SeatClient wrong = new SeatClient(URL, "sl_wrong_key");
        SeatException refused = expect(SeatException.Unauthenticated.class, () -> wrong.acquire("j-full", "a"));
        check(refused.status() == 401 && refused.code().equals("unauthenticated") && !refused.toString().contains(KEY));
        SeatClient client = client(false, 0.01);
        check(expect(SeatException.LicenseNotFound.class, () -> client.acquire("no-such-license", "a")).status() == 404);
        check(expect(SeatException.InvalidRequest.class,
                () -> client.acquire("j-full", "a", new SeatClient.AcquireOptions().leaseSeconds(999999))).status() == 400);
        try (Lease held = client.lease("j-full", new LeaseOptions("a"))) {
            SeatException.NoSeatsAvailable full = expect(SeatException.NoSeatsAvailable.class, () -> client.acquire("j-full", "b"));
            check(full.status() == 409 && full.seatsUsed() == 1 && full.seatsTotal() == 1 && full.retryAfterSeconds() >= 1);
            SeatException.SessionExpired gone = expect(SeatException.SessionExpired.class,
                    () -> client.heartbeat("j-full", "no-such-session-00000000"));
            check(gone.status() == 410 && gone.reason().equals("unknown"));
            double started = now();
            SeatException.SeatWaitTimeout timeout = expect(SeatException.SeatWaitTimeout.class,
                    () -> client.lease("j-full", new LeaseOptions("b").waitFor(Duration.ofMillis(300))));
            check(timeout.code().equals("seat_wait_timeout") && now() - started < 3);
            check(held.sessionId() != null);
        }
        check(live("j-full").size() == 0);
    }

    static void a500IsAnHttpErrorNotRetried() throws Exception {
        needStack();
        license("j-500", "{\"seats\": 1}");
        SeatClient client = client(false, 0.01);
        int before = requests("/acquire").size();
        control("fail", "{\"path\": \"/acquire\", \"status\": 500}");
        SeatException failed = expect(SeatException.class, () -> client.acquire("j-500", "a"));
        check(failed.getClass() == SeatException.class && failed.status() == 500 && failed.code().equals("internal"));
        check(requests("/acquire").size() == before + 1);
    }

    static void a503WithRetryAfterIsRetriedNoSoonerWithTheSameRequestId() throws Exception {
        needStack();
        license("j-503", "{\"seats\": 1}");
        SeatClient client = client(false, 0.01);
        control("fail", "{\"path\": \"/acquire\", \"status\": 503, \"retry_after\": 1}");
        double started = now();
        Answer answer = client.acquire("j-503", "a");
        check(now() - started >= 1.0 && answer.seatsUsed() == 1);
        List<JsonObject> acquires = requests("/acquire");
        JsonObject failed = acquires.get(acquires.size() - 2), served = acquires.get(acquires.size() - 1);
        check(failed.get("status").getAsInt() == 503 && served.get("status").getAsInt() == 201
                && failed.get("request_id").getAsString().equals(served.get("request_id").getAsString()));
    }

    static void waitingGetsTheSeatReleasedMeanwhile() throws Exception {
        needStack();
        license("j-wait", "{\"seats\": 1, \"lease_seconds\": 60}");
        SeatClient client = new SeatClient(URL, KEY, new SeatClient.Options().maxWaitPoll(Duration.ofMillis(300)));
        Lease first = client.lease("j-wait", new LeaseOptions("a"));
        CompletableFuture<Void> release = CompletableFuture.runAsync(() -> {
            try {
                Thread.sleep(500);
            } catch (InterruptedException e) {
                throw new RuntimeException(e);
            }
            first.release();
        });
        double started = now();
        try (Lease second = client.lease("j-wait", new LeaseOptions("b").waitFor(Duration.ofSeconds(10)))) {
            release.get();
            check(now() - started >= 0.45 && onlySeat("j-wait", second.sessionId(), "b"));
        }
        check(live("j-wait").size() == 0);
    }

    static void anUnreachableUrlIsBackendUnavailable() throws Exception {
        needStack();
        SeatClient client = new SeatClient("http://127.0.0.1:9", KEY, new SeatClient.Options().retries(2).backoff(Duration.ofMillis(10)));
        SeatException failed = expect(SeatException.BackendUnavailable.class, () -> client.acquire("lic", "a"));
        check(failed.status() == 0 && failed.code().equals("network_error") && !failed.toString().contains(KEY));
        expect(SeatException.BackendUnavailable.class, () -> client.lease("lic", new LeaseOptions("a")));
    }

    static void releaseFromTheOnLostCallback() throws Exception {
        needStack();
        license("j-callback", "{\"seats\": 1, \"lease_seconds\": 2}");
        SeatClient client = client(false, 0.05);
        CompletableFuture<Void> closed = new CompletableFuture<>();
        Lease lease = client.lease("j-callback", new LeaseOptions("ws-1").listener(new LeaseOptions.Listener() {
            @Override public void onLost(Lease l, String reason) {
                l.close();
                closed.complete(null);
            }
        }));
        control("flush", "{}");
        closed.get(5, java.util.concurrent.TimeUnit.SECONDS);
        check(lease.released() && lease.lost());
        Thread.sleep(1500); // no re-acquire after the close
        check(live("j-callback").size() == 0);
        lease.close();
    }

    static void anOutageLongerThanTheLeaseMarksItLostThenRegains() throws Exception {
        needStack();
        license("j-outage", "{\"seats\": 1, \"lease_seconds\": 2}");
        SeatClient client = client(false, 0.05);
        Watcher watcher = new Watcher();
        try (Lease lease = client.lease("j-outage", new LeaseOptions("ws-1").listener(watcher))) {
            String old = lease.sessionId();
            control("outage", "{\"seconds\": 3}");
            eventually(3, "the lease marked lost", lease::lost);
            check("unreachable".equals(lease.lostReason()), lease.lostReason());
            eventually(5, "the seat regained", () -> !lease.lost());
            check(watcher.lost.equals(List.of("unreachable")) && watcher.regained.get() == 1, watcher.lost);
            check(!lease.sessionId().equals(old) && onlySeat("j-outage", lease.sessionId(), "ws-1"));
        }
    }

    static void queuedWaitersGetTheSeatInTheOrderTheyJoined() throws Exception {
        needStack();
        license("j-queue", "{\"seats\": 1, \"lease_seconds\": 30, \"policy\": {\"queue\": true, \"queue_hold_seconds\": 3}}");
        SeatClient client = client(true, 0); // a 202 carries no token
        Answer holder = client.acquire("j-queue", "holder", new SeatClient.AcquireOptions().user("hal"));
        String[] names = {"w1", "w2", "w3"};
        List<String> order = new CopyOnWriteArrayList<>();
        List<CompletableFuture<Lease>> leases = new ArrayList<>();
        for (int i = 0; i < names.length; i++) {
            String name = names[i];
            leases.add(CompletableFuture.supplyAsync(() -> {
                Lease lease = client.lease("j-queue", new LeaseOptions(name).user("user-" + name).host("pc-" + name)
                        .waitFor(Duration.ofSeconds(30)));
                order.add(name);
                return lease;
            }));
            int n = i + 1;
            eventually(5, name + " in line", () -> {
                try {
                    return queued("j-queue").size() == n;
                } catch (Exception e) {
                    return false;
                }
            });
        }
        JsonArray tickets = control("queue?license_id=j-queue", null).getAsJsonArray();
        for (int i = 0; i < names.length; i++) {
            JsonObject ticket = tickets.get(i).getAsJsonObject();
            check(ticket.get("client_id").getAsString().equals(names[i]) && ticket.get("user").getAsString().equals("user-" + names[i])
                    && ticket.get("host").getAsString().equals("pc-" + names[i]), ticket);
        }
        Thread.sleep(2500); // they keep their places: each comes back with its ticket
        check(queued("j-queue").equals(List.of("w1", "w2", "w3")));
        int polls = 0;
        for (JsonObject entry : requests("/acquire")) {
            polls += entry.get("status").getAsInt() == 202 ? 1 : 0;
        }
        check(polls >= 6, polls, "answers 202");
        client.release("j-queue", holder.sessionId());
        for (int i = 0; i < names.length; i++) {
            Lease lease = leases.get(i).get(30, java.util.concurrent.TimeUnit.SECONDS);
            check(order.equals(List.of(names).subList(0, i + 1)) && lease.token() != null, order);
            check(onlySeat("j-queue", lease.sessionId(), names[i]));
            check(queued("j-queue").equals(List.of(names).subList(i + 1, names.length)));
            lease.release();
        }
        check(live("j-queue").size() == 0);
    }

    static void waitingInLineGivesUpAtTheTimeout() throws Exception {
        needStack();
        license("j-queue-timeout", "{\"seats\": 1, \"lease_seconds\": 30, \"policy\": {\"queue\": true, \"queue_hold_seconds\": 3}}");
        SeatClient client = client(false, 0);
        try (Lease held = client.lease("j-queue-timeout", new LeaseOptions("a"))) {
            double started = now();
            SeatException.SeatWaitTimeout timeout = expect(SeatException.SeatWaitTimeout.class,
                    () -> client.lease("j-queue-timeout", new LeaseOptions("b").waitFor(Duration.ofMillis(1500))));
            double took = now() - started;
            check(timeout.code().equals("seat_wait_timeout") && took >= 1.4 && took <= 5, took);
            check(queued("j-queue-timeout").equals(List.of("b")));
            Answer place = client.acquire("j-queue-timeout", "c", new SeatClient.AcquireOptions().queue(true));
            check(place.status() == 202 && place.queued() && place.position() == 2 && place.ticket() != null
                    && place.retryAfterSeconds() >= 1 && place.sessionId() == null, place);
            check(held.sessionId() != null);
        }
    }

    static void typedErrorsOfALicensePolicy() throws Exception {
        needStack();
        license("j-policy", "{\"seats\": 3, \"lease_seconds\": 60, \"policy\": {\"max_per_user\": 1, \"deny_users\": [\"mallory\"]}}");
        SeatClient client = client(false, 0.01);
        try (Lease ann = client.lease("j-policy", new LeaseOptions("ann-1").user("ann").host("pc-1"))) {
            SeatException.UserLimitReached limit = expect(SeatException.UserLimitReached.class,
                    () -> client.acquire("j-policy", "ann-2", new SeatClient.AcquireOptions().user("ann")));
            check(limit instanceof SeatException.NoSeatsAvailable && limit.status() == 409
                    && limit.code().equals("user_limit_reached") && limit.maxPerUser() == 1 && limit.sessions() == 1
                    && limit.retryAfterSeconds() >= 50);
            expect(SeatException.SeatWaitTimeout.class,
                    () -> client.lease("j-policy", new LeaseOptions("ann-2").user("ann").waitFor(Duration.ofMillis(300))));
            SeatException.UserDenied denied = expect(SeatException.UserDenied.class,
                    () -> client.lease("j-policy", new LeaseOptions("m-1").user("mallory")));
            check(denied instanceof SeatException.LicenseSuspended && denied.status() == 403 && denied.code().equals("user_denied"));
            expect(SeatException.InvalidRequest.class, () -> client.acquire("j-policy", "x-1"));
            check(onlySeat("j-policy", ann.sessionId(), "ann-1"));
        }
    }

    static void aFullQueueIsQueueFull() throws Exception {
        needStack();
        license("j-queue-full", "{\"seats\": 1, \"lease_seconds\": 30, \"policy\": {\"queue\": true, \"queue_max\": 1}}");
        SeatClient client = client(false, 0.01);
        Answer held = client.acquire("j-queue-full", "a");
        check(held.sessionId() != null, held);
        Answer place = client.acquire("j-queue-full", "b", new SeatClient.AcquireOptions().queue(true));
        check(place.status() == 202 && place.queued(), place);
        SeatException.QueueFull full = expect(SeatException.QueueFull.class,
                () -> client.acquire("j-queue-full", "c", new SeatClient.AcquireOptions().queue(true)));
        check(full instanceof SeatException.NoSeatsAvailable && full.status() == 409
                && full.code().equals("queue_full") && full.queueMax() == 1 && full.retryAfterSeconds() >= 1);
        SeatException.NoSeatsAvailable plain = expect(SeatException.NoSeatsAvailable.class,
                () -> client.acquire("j-queue-full", "d"));
        check(!(plain instanceof SeatException.QueueFull));
    }

    static void aBorrowedSeat() throws Exception {
        needStack();
        license("j-borrow", "{\"seats\": 1, \"lease_seconds\": 60, \"max_borrow_seconds\": 86400}");
        SeatClient client = client(true, 0.01);
        Answer seat = client.acquire("j-borrow", "laptop", new SeatClient.AcquireOptions().borrowSeconds(3600));
        check(seat.borrowed() && seat.expiresAt() > Instant.now().getEpochSecond() + 3500);
        expect(SeatException.NoSeatsAvailable.class, () -> client.acquire("j-borrow", "desk"));
        expect(SeatException.InvalidRequest.class,
                () -> client.acquire("j-borrow", "other", new SeatClient.AcquireOptions().borrowSeconds(86400 * 30)));
        check(client.release("j-borrow", seat.sessionId()).released() && live("j-borrow").size() == 0);
    }

    static void aLicensesTermsAndAMachineBoundSeat() throws Exception {
        needStack();
        license("j-term", "{\"seats\": 2, \"lease_seconds\": 60, \"max_borrow_seconds\": 86400, "
                + "\"expires_in_seconds\": 3600, \"grace_seconds\": 60, "
                + "\"entitlements\": [\"pro\", \"render\"], \"max_version\": \"2026.4\"}");
        license("j-later", "{\"seats\": 1, \"starts_in_seconds\": 3600}");
        SeatClient client = client(true, 0.01);
        String machine = Machine.fingerprint("4C4C4544004A3510804FB4C04F4E4D32\n");
        check(machine.equals("6951dbb4a00fdf7db1ef1ec1a8e4699e3d51248259472c3c6faabbc4374562df"), machine);
        // Verified: the token's ent, lexp, maxv and cnf.machine agree with the answer.
        Answer seat = client.acquire("j-term", "laptop",
                new SeatClient.AcquireOptions().borrowSeconds(3600).fingerprint(machine));
        check(seat.borrowed() && List.of("pro", "render").equals(seat.entitlements()), seat);
        check("2026.4".equals(seat.maxVersion()) && !seat.inGrace(), seat);
        check(seat.licenseExpiresAt() > 0 && seat.licenseGraceEndsAt() >= seat.licenseExpiresAt() + 59, seat);
        try (Lease lease = client.lease("j-term", new LeaseOptions("ws-1").fingerprint(machine))) {
            check(List.of("pro", "render").equals(lease.entitlements()) && "2026.4".equals(lease.maxVersion()));
            check(lease.licenseExpiresAt() > 0 && lease.licenseGraceEndsAt() > lease.licenseExpiresAt() && !lease.inGrace());
        }
        SeatException.LicenseNotStarted later = expect(SeatException.LicenseNotStarted.class,
                () -> client.acquire("j-later", "ws-2"));
        check(later instanceof SeatException.LicenseSuspended && later.status() == 403
                && later.code().equals("license_not_started"), later);
    }

    static void pinnedKeysFromTheDeploymentVerifyAndOthersAreRefused() throws Exception {
        needStack();
        license("j-pinned", "{\"seats\": 2, \"lease_seconds\": 60}");
        List<String> pins = new ArrayList<>();
        HttpResponse<String> jwks = HTTP.send(HttpRequest.newBuilder(URI.create(URL + "/keys")).build(),
                HttpResponse.BodyHandlers.ofString());
        for (JsonElement key : Json.parseObject(jwks.body()).getAsJsonArray("keys")) {
            pins.add(key.getAsJsonObject().get("x").getAsString());
        }
        SeatClient pinned = new SeatClient(URL, KEY, new SeatClient.Options().pinnedKeys(pins).tenantId("acme"));
        Answer answer = pinned.acquire("j-pinned", "pc-1");
        check(answer.token() != null);
        pinned.release("j-pinned", answer.sessionId());
        SeatClient other = new SeatClient(URL, KEY, new SeatClient.Options()
                .pinnedKeys(List.of("4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk")).retries(0));
        expect(SeatException.UntrustedKey.class, () -> other.acquire("j-pinned", "pc-2"));
        SeatClient wrongTenant = new SeatClient(URL, KEY, new SeatClient.Options().verify(true).tenantId("globex"));
        expect(SeatException.WrongAudience.class, () -> wrongTenant.acquire("j-pinned", "pc-3"));
    }

    /**
     * A lease of 3 seats on a license of 4: its weight on the answer and the server, kept on
     * renewal and after a loss; seats_mismatch; a denial of more seats than are free.
     */
    static void aWeightedLease() throws Exception {
        needStack();
        license("j-weights", "{\"seats\": 4, \"lease_seconds\": 3}"); // heartbeats every second
        SeatClient client = client(true, 0.05);
        Watcher watcher = new Watcher();
        try (Lease lease = client.lease("j-weights", new LeaseOptions("render-1").seats(3).listener(watcher))) {
            check(lease.seats() == 3 && lease.seatsUsed() == 3 && lease.seatsTotal() == 4);
            String payload = new String(java.util.Base64.getUrlDecoder().decode(lease.token().split("\\.")[1]),
                    java.nio.charset.StandardCharsets.UTF_8);
            check(TokenVerifier.claimedSeats(Json.parseObject(payload)) == 3, payload);
            Answer renewed = client.acquire("j-weights", "render-1"); // no seats: the weight is kept
            check(renewed.seats() == 3 && renewed.sessionId().equals(lease.sessionId()), renewed);
            SeatException.SeatsMismatch mismatch = expect(SeatException.SeatsMismatch.class,
                    () -> client.acquire("j-weights", "render-1", new SeatClient.AcquireOptions().seats(2)));
            check(mismatch.heldSeats() == 3 && mismatch.seats() == 2, mismatch);
            SeatException.NoSeatsAvailable full = expect(SeatException.NoSeatsAvailable.class,
                    () -> client.acquire("j-weights", "ws-2", new SeatClient.AcquireOptions().seats(2)));
            check(full.seatsRequested() == 2 && full.seatsUsed() == 3, full);
            Answer plain = client.acquire("j-weights", "ws-3"); // the last seat
            check(plain.seats() == 1 && plain.seatsUsed() == 4, plain);
            client.release("j-weights", plain.sessionId());
            check(control("weights?license_id=j-weights", null).equals(Json.parseObject("{\"render-1\": 3}")));
            control("flush", "{}"); // the seat is lost: the re-acquire asks for the same weight
            eventually(10, "the weighted seat regained", () -> watcher.regained.get() == 1 && !lease.lost());
            check(lease.seats() == 3);
            check(control("weights?license_id=j-weights", null).equals(Json.parseObject("{\"render-1\": 3}")));
        }
    }

    static void aSuspendedLicenseIsLicenseSuspendedUntilItIsResumed() throws Exception {
        needStack();
        license("j-suspend", "{\"seats\": 2, \"lease_seconds\": 30}");
        SeatClient client = client(true, 0.05);
        control("suspend", "{\"license_id\": \"j-suspend\", \"suspended\": true}");
        SeatException.LicenseSuspended suspended = expect(SeatException.LicenseSuspended.class,
                () -> client.acquire("j-suspend", "ws-1"));
        check(suspended.status() == 403 && suspended.code().equals("license_suspended")
                && !(suspended instanceof SeatException.UserDenied));
        expect(SeatException.LicenseSuspended.class, () -> client.lease("j-suspend", new LeaseOptions("ws-1")));
        check(live("j-suspend").size() == 0);
        control("suspend", "{\"license_id\": \"j-suspend\", \"suspended\": false}");
        try (Lease lease = client.lease("j-suspend", new LeaseOptions("ws-1"))) {
            check(onlySeat("j-suspend", lease.sessionId(), "ws-1"));
        }
        check(live("j-suspend").size() == 0);
    }

    // -- the runner ---------------------------------------------------------------------------

    public static void main(String[] args) {
        Map<String, Body> tests = new LinkedHashMap<>();
        Map<String, String> vectorOutcomes = new LinkedHashMap<>(), badOutcomes = new LinkedHashMap<>();
        tests.put("every_vector", () -> {
            everyVector(vectorOutcomes);
            check(!vectorOutcomes.values().stream().anyMatch(v -> v != null), "vectors failed");
        });
        tests.put("every_machine_fingerprint", ClientTests::everyMachineFingerprint);
        tests.put("leeway_by_the_verifiers_clock", ClientTests::leewayByTheVerifiersClock);
        tests.put("pinned_key_forms", ClientTests::pinnedKeyForms);
        tests.put("every_bad_answer_is_a_typed_error", () -> {
            everyBadAnswer(badOutcomes);
            check(!badOutcomes.values().stream().anyMatch(v -> v != null), "bad answers failed");
        });
        tests.put("weights_are_sent_and_read", ClientTests::weightsAreSentAndRead);
        tests.put("lease_life_past_three_leases_a_redis_flush_and_a_revoke", ClientTests::leaseLifePastThreeLeasesARedisFlushAndARevoke);
        tests.put("a_stalled_server_answers_the_retry_from_the_first_run", ClientTests::aStalledServerAnswersTheRetryFromTheFirstRun);
        tests.put("a_retry_of_your_own_with_the_same_request_id_takes_one_seat", ClientTests::aRetryOfYourOwnWithTheSameRequestIdTakesOneSeat);
        tests.put("typed_errors", ClientTests::typedErrors);
        tests.put("a_500_is_an_http_error_not_retried", ClientTests::a500IsAnHttpErrorNotRetried);
        tests.put("a_503_with_retry_after_is_retried_no_sooner_with_the_same_request_id", ClientTests::a503WithRetryAfterIsRetriedNoSoonerWithTheSameRequestId);
        tests.put("waiting_gets_the_seat_released_meanwhile", ClientTests::waitingGetsTheSeatReleasedMeanwhile);
        tests.put("an_unreachable_url_is_backend_unavailable", ClientTests::anUnreachableUrlIsBackendUnavailable);
        tests.put("release_from_the_on_lost_callback", ClientTests::releaseFromTheOnLostCallback);
        tests.put("an_outage_longer_than_the_lease_marks_it_lost_then_regains", ClientTests::anOutageLongerThanTheLeaseMarksItLostThenRegains);
        tests.put("queued_waiters_get_the_seat_in_the_order_they_joined", ClientTests::queuedWaitersGetTheSeatInTheOrderTheyJoined);
        tests.put("waiting_in_line_gives_up_at_the_timeout", ClientTests::waitingInLineGivesUpAtTheTimeout);
        tests.put("typed_errors_of_a_license_policy", ClientTests::typedErrorsOfALicensePolicy);
        tests.put("a_full_queue_is_queue_full", ClientTests::aFullQueueIsQueueFull);
        tests.put("a_borrowed_seat", ClientTests::aBorrowedSeat);
        tests.put("a_licenses_terms_and_a_machine_bound_seat", ClientTests::aLicensesTermsAndAMachineBoundSeat);
        tests.put("pinned_keys_from_the_deployment_verify_and_others_are_refused", ClientTests::pinnedKeysFromTheDeploymentVerifyAndOthersAreRefused);
        tests.put("a_suspended_license_is_license_suspended_until_it_is_resumed", ClientTests::aSuspendedLicenseIsLicenseSuspendedUntilItIsResumed);
        tests.put("a_weighted_lease", ClientTests::aWeightedLease);
        List<String> only = List.of(args);
        int passed = 0, failed = 0, skipped = 0;
        for (Map.Entry<String, Body> test : tests.entrySet()) {
            if (!only.isEmpty() && !only.contains(test.getKey())) {
                continue;
            }
            double started = now();
            String outcome;
            try {
                test.getValue().run();
                outcome = "PASS";
                passed++;
            } catch (Skip skip) {
                System.err.println("skipped: " + skip.getMessage());
                outcome = "SKIP";
                skipped++;
            } catch (Throwable thrown) {
                thrown.printStackTrace();
                outcome = "FAIL";
                failed++;
            }
            Map<String, String> subtests = test.getKey().equals("every_vector") ? vectorOutcomes
                    : test.getKey().equals("every_bad_answer_is_a_typed_error") ? badOutcomes : Map.of();
            for (Map.Entry<String, String> sub : subtests.entrySet()) {
                System.out.println("--- " + (sub.getValue() == null ? "PASS" : "FAIL") + ": " + test.getKey() + "/" + sub.getKey()
                        + (sub.getValue() == null ? "" : " (" + sub.getValue() + ")"));
            }
            System.out.printf("--- %s: %s (%.2fs)%n", outcome, test.getKey(), now() - started);
            System.out.flush();
        }
        System.out.printf("seatlease-java: %d passed, %d failed, %d skipped%n", passed, failed, skipped);
        System.exit(failed == 0 ? 0 : 1);
    }

}
