package io.seatlease.client;

import static io.seatlease.client.Support.eventually;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 48, offline (a scripted loopback server, no environment): verified by default, a
 * refused grant released at once, answers read by their error.code (a 404 that is not
 * license_not_found names the URL), no redirect followed, seat counts kept when a renewal
 * omits them, a null session an invalid response, and the caller's identity sent by acquire
 * and borrow alike.
 */
class TrustedAnswerTests {
    /** Some Ed25519 key's "x" (not the scripted server's: it signs nothing). */
    static final String VENDOR_X = "4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk";
    static final String RELEASED = "{\"released\": true, \"seats_used\": 0}";

    static String grant(int leaseSeconds, int heartbeatSeconds) {
        return LocalServerTests.grant(leaseSeconds, heartbeatSeconds);
    }

    /** No pinned key and no opt-out is refused at construction; verify(false) alone too. */
    @Test
    void aClientIsVerifiedByDefault() {
        IllegalArgumentException unpinned = assertThrows(IllegalArgumentException.class,
                () -> SeatClient.builder("http://127.0.0.1:9", "sl_test").build());
        assertTrue(unpinned.getMessage().contains("pinnedKeys") && unpinned.getMessage().contains("insecureSkipVerify"),
                unpinned.getMessage());
        IllegalArgumentException off = assertThrows(IllegalArgumentException.class,
                () -> SeatClient.builder("http://127.0.0.1:9", "sl_test").verify(false).build());
        assertTrue(off.getMessage().contains("insecureSkipVerify"), off.getMessage());
        assertThrows(IllegalArgumentException.class, () -> SeatClient.builder("http://127.0.0.1:9", "sl_test")
                .pinnedKeys(List.of(VENDOR_X)).verify(false).build());
        try (SeatClient pinned = SeatClient.builder("http://127.0.0.1:9", "sl_test").pinnedKeys(List.of(VENDOR_X)).build()) {
            assertTrue(pinned.verifies() && pinned.pinned() && !pinned.insecureSkipVerify());
        }
        try (SeatClient insecure = SeatClient.builder("http://127.0.0.1:9", "sl_test").insecureSkipVerify(true).build();
             SeatClient insecureOff = SeatClient.builder("http://127.0.0.1:9", "sl_test").insecureSkipVerify(true)
                     .verify(false).build()) {
            assertTrue(!insecure.verifies() && !insecure.pinned() && insecure.insecureSkipVerify());
            assertFalse(insecureOff.verifies());
        }
    }

    /**
     * A 201 without a token from whatever answers at the base URL is no seat for a client
     * built the default way (pinned): TokenMissing, and the session it named is released at
     * once (within the release timeout), by a plain acquire and by a lease alike.
     */
    @Test
    void aGrantWithoutTheVendorsTokenIsNoSeatAndIsReleasedAtOnce() throws Exception {
        try (ScriptedServer server = new ScriptedServer(request -> request.path().equals("/acquire")
                ? ScriptedServer.Reply.now(201, grant(60, 20)) : ScriptedServer.Reply.now(200, RELEASED));
             SeatClient client = SeatClient.builder(server.url(), "sl_test").pinnedKeys(List.of(VENDOR_X))
                     .retries(0).releaseTimeout(Duration.ofSeconds(2)).build()) {
            assertThrows(SeatException.TokenMissing.class, () -> client.acquire("lic", "pc-1"));
            List<ScriptedServer.Request> releases = server.requestsTo("/release");
            assertEquals(1, releases.size());
            assertTrue(releases.get(0).body().contains("\"session_id\":\"c2Vzc2lvbi0wMDAwMDAwMDAx\""), releases.toString());
            assertThrows(SeatException.TokenMissing.class, () -> client.lease("lic", new LeaseOptions("pc-1")));
            assertEquals(2, server.requestsTo("/release").size());
        }
    }

    /**
     * Answers read by their code: a 404 that is not license_not_found (the service's own
     * not_found for a wrong base URL, a middlebox's empty 404) is a plain SeatException
     * naming the URL asked, code the server's or http_404; only license_not_found is
     * LicenseNotFound.
     */
    @Test
    void a404ThatIsNotLicenseNotFoundIsAnHttpErrorNamingTheUrl() throws Exception {
        String notFound = "{\"error\": {\"code\": \"not_found\", \"message\": \"No such function: /nope/acquire.\"}}";
        String noLicense = "{\"error\": {\"code\": \"license_not_found\", \"message\": \"No license 'lic' here.\"}}";
        try (ScriptedServer server = new ScriptedServer(request -> switch (request.path()) {
                case "/a/acquire" -> ScriptedServer.Reply.now(404, notFound);
                case "/b/acquire" -> ScriptedServer.Reply.now(404, "");
                default -> ScriptedServer.Reply.now(404, noLicense);
            })) {
            try (SeatClient client = Support.insecure(server.url() + "/a", "sl_test").retries(0).build()) {
                SeatException failed = assertThrows(SeatException.class, () -> client.acquire("lic", "pc-1"));
                assertSame(SeatException.class, failed.getClass(), failed.toString());
                assertTrue(failed.status() == 404 && failed.code().equals("not_found"), failed.toString());
                assertTrue(failed.getMessage().contains(server.url() + "/a/acquire"), failed.getMessage());
            }
            try (SeatClient client = Support.insecure(server.url() + "/b", "sl_test").retries(0).build()) {
                SeatException failed = assertThrows(SeatException.class, () -> client.acquire("lic", "pc-1"));
                assertSame(SeatException.class, failed.getClass(), failed.toString());
                assertTrue(failed.status() == 404 && failed.code().equals("http_404"), failed.toString());
                assertTrue(failed.getMessage().contains(server.url() + "/b/acquire"), failed.getMessage());
            }
            try (SeatClient client = Support.insecure(server.url() + "/c", "sl_test").retries(0).build()) {
                SeatException.LicenseNotFound missing = assertThrows(SeatException.LicenseNotFound.class,
                        () -> client.acquire("lic", "pc-1"));
                assertEquals("license_not_found", missing.code());
            }
        }
    }

    /** A redirect is never followed (the API key stays with the base URL): an error naming its Location. */
    @Test
    void aRedirectIsNotFollowedAndNamesItsLocation() throws Exception {
        try (ScriptedServer elsewhere = new ScriptedServer(request -> ScriptedServer.Reply.now(201, grant(60, 20)));
             ScriptedServer server = new ScriptedServer(request ->
                     ScriptedServer.Reply.redirect(307, elsewhere.url() + "/acquire"));
             SeatClient client = Support.insecure(server.url(), "sl_test").retries(0).build()) {
            SeatException failed = assertThrows(SeatException.class, () -> client.acquire("lic", "pc-1"));
            assertTrue(failed.status() == 307 && failed.code().equals("redirected"), failed.toString());
            assertTrue(failed.getMessage().contains(elsewhere.url() + "/acquire"), failed.getMessage());
            assertEquals(1, server.received.size());
            assertEquals(0, elsewhere.received.size(), "the redirect was followed");
        }
    }

    /** After renewals that carry no counts, the lease keeps the grant's (1 of 2), not 0 of 0. */
    @Test
    void seatCountsKeepTheirLastKnownValuesWhenARenewalOmitsThem() throws Exception {
        try (ScriptedServer server = new ScriptedServer(request -> switch (request.path()) {
                case "/acquire" -> ScriptedServer.Reply.now(201, grant(3, 1));
                case "/heartbeat" -> ScriptedServer.Reply.now(200,
                        grant(3, 1).replace(", \"seats_used\": 1, \"seats_total\": 2", ""));
                default -> ScriptedServer.Reply.now(200, RELEASED);
            });
             SeatClient client = Support.insecure(server.url(), "sl_test").build();
             Lease lease = client.lease("lic", new LeaseOptions("pc-1"))) {
            assertTrue(lease.seatsUsed() == 1 && lease.seatsTotal() == 2);
            eventually(6, "two renewals", () -> server.requestsTo("/heartbeat").size() >= 2);
            Thread.sleep(100);
            assertFalse(server.requestsTo("/heartbeat").get(0).body().isEmpty());
            assertEquals(1, lease.seatsUsed());
            assertEquals(2, lease.seatsTotal());
            assertEquals(1, lease.seats());
            assertFalse(lease.lost());
        }
    }

    /** A grant whose session_id is null is invalid_response (never a seat), verified or not. */
    @Test
    void aGrantWithANullSessionIsAnInvalidResponse() throws Exception {
        String nullSession = grant(60, 20).replace("\"c2Vzc2lvbi0wMDAwMDAwMDAx\"", "null");
        try (ScriptedServer server = new ScriptedServer(request -> ScriptedServer.Reply.now(201, nullSession));
             SeatClient insecure = Support.insecure(server.url(), "sl_test").retries(0).build();
             SeatClient pinned = SeatClient.builder(server.url(), "sl_test").pinnedKeys(List.of(VENDOR_X)).retries(0).build()) {
            for (SeatClient client : List.of(insecure, pinned)) {
                SeatException.InvalidResponse invalid = assertThrows(SeatException.InvalidResponse.class,
                        () -> client.acquire("lic", "pc-1"));
                assertEquals("invalid_response", invalid.code());
                assertThrows(SeatException.InvalidResponse.class, () -> client.lease("lic", new LeaseOptions("pc-1")));
            }
            assertEquals(0, server.requestsTo("/release").size(), "no session to release");
        }
    }

    /**
     * Parity: acquire sends the caller's request_id and fingerprint; borrow sends the same
     * identity as acquire (user, host, entitlements, version, seats), and a borrowed seat
     * that does not verify is released at once.
     */
    @Test
    void acquireAndBorrowSendTheCallersIdentity(@TempDir Path folder) throws Exception {
        try (ScriptedServer server = new ScriptedServer(request -> switch (request.path()) {
                case "/acquire" -> ScriptedServer.Reply.now(201, grant(3600, 20));
                case "/keys" -> ScriptedServer.Reply.now(200, "{\"keys\": []}");
                default -> ScriptedServer.Reply.now(200, RELEASED);
            });
             SeatClient client = Support.insecure(server.url(), "sl_test").retries(0).build()) {
            client.acquire("lic", "pc-1", new AcquireOptions().requestId("my-request-0001")
                    .fingerprint(Machine.fingerprint("machine-0001")));
            JsonObject sent = Json.parseObject(server.requestsTo("/acquire").get(0).body());
            assertEquals("my-request-0001", Json.string(sent, "request_id"));
            assertEquals(Machine.fingerprint("machine-0001"), Json.string(sent, "fingerprint"));

            Path file = folder.resolve("seat.json");
            assertThrows(SeatException.class, () -> client.borrow("lic", "laptop", Duration.ofHours(1), file,
                    new AcquireOptions().user("ann").host("ann-laptop").entitlements(List.of("render"))
                            .version("2026.4").seats(2)));
            JsonObject borrowed = Json.parseObject(server.requestsTo("/acquire").get(1).body());
            assertEquals("ann", Json.string(borrowed, "user"));
            assertEquals("ann-laptop", Json.string(borrowed, "host"));
            assertEquals("[\"render\"]", borrowed.get("entitlements").toString());
            assertEquals("2026.4", Json.string(borrowed, "version"));
            assertEquals(2, borrowed.get("seats").getAsInt());
            assertEquals(3600, borrowed.get("borrow_seconds").getAsInt());
            assertEquals(client.thisMachine(), Json.string(borrowed, "fingerprint"));
            assertFalse(Files.exists(file), "a seat that does not verify is not saved");
            assertEquals(1, server.requestsTo("/release").size(), "...and it is released at once");
        }
    }

    /**
     * A product that exits (System.exit) or is terminated (SIGTERM) releases its seat on the
     * way out, within the release timeout (a shutdown hook), instead of leaving it taken for
     * the rest of the lease.
     */
    @Test
    void aSeatIsReleasedWhenTheJvmExitsOrIsTerminated() throws Exception {
        for (String how : List.of("sigterm", "exit")) {
            try (ScriptedServer server = new ScriptedServer(request -> request.path().equals("/acquire")
                    ? ScriptedServer.Reply.now(201, grant(60, 20)) : ScriptedServer.Reply.now(200, RELEASED))) {
                String classPath = String.join(java.io.File.pathSeparator, where(SeatClient.class),
                        where(ExitProbe.class), where(JsonObject.class));
                Process product = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                        "-cp", classPath, ExitProbe.class.getName(), server.url(), how)
                        .redirectError(ProcessBuilder.Redirect.INHERIT).start();
                try (java.io.BufferedReader out = new java.io.BufferedReader(
                        new java.io.InputStreamReader(product.getInputStream(), java.nio.charset.StandardCharsets.UTF_8))) {
                    String line = out.readLine();
                    assertTrue(line != null && line.startsWith("held "), how + ": " + line);
                    if (how.equals("sigterm")) {
                        product.destroy(); // SIGTERM
                    }
                    assertTrue(product.waitFor(15, java.util.concurrent.TimeUnit.SECONDS), how + ": still running");
                } finally {
                    product.destroyForcibly();
                }
                assertTrue(product.exitValue() != 3, how);
                List<ScriptedServer.Request> releases = server.requestsTo("/release");
                assertEquals(1, releases.size(), how + ": the seat was not released on the way out");
                assertTrue(releases.get(0).body().contains("c2Vzc2lvbi0wMDAwMDAwMDAx"), releases.toString());
            }
        }
    }

    /** Where a class was loaded from (a folder or a jar), for a child JVM's class path. */
    private static String where(Class<?> kind) throws Exception {
        return Path.of(kind.getProtectionDomain().getCodeSource().getLocation().toURI()).toString();
    }

    /** The version is the one of all five clients (shared/clients/VERSION, when this is the repository's copy). */
    @Test
    void theVersionIsTheOneOfAllClients() throws Exception {
        assertEquals("0.3.0", SeatClient.VERSION);
        Path shared = Path.of("..", "VERSION");
        if (Files.exists(shared) && Files.exists(Path.of("..", "java"))) {
            assertEquals(Files.readString(shared).strip(), SeatClient.VERSION);
        }
    }

    /**
     * The review of issue 48: a pinned key of small order (the identity, and the others of
     * libsodium's list, the top bit masked) verifies what it never signed: refused by build().
     */
    @Test
    void aPinnedKeyOfSmallOrderIsRefusedAtBuild() {
        for (String key : List.of("AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                "7P_______________________________________38", "xxdqcD1N2E-6PAt2DRBnDyogU_osOczGTsf9d5KsA3o",
                "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAIA",
                "{\"kty\": \"OKP\", \"crv\": \"Ed25519\", \"x\": \"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\"}")) {
            IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                    () -> SeatClient.builder("http://127.0.0.1:9", "sl_test").pinnedKeys(List.of(key)).build(), key);
            assertTrue(refused.getMessage().contains("small order"), refused.getMessage());
        }
    }

    /**
     * The review of issue 48, a grant's and a renewal's shape: lease_seconds 60.5 and an
     * empty session_id are invalid_response; a renewal may name no session (absent, null),
     * not another one; null counts are absent ones.
     */
    @Test
    void theShapeOfAGrantAndOfARenewal() throws Exception {
        String session = "\"session_id\": \"c2Vzc2lvbi0wMDAwMDAwMDAx\", ";
        for (String bad : List.of(grant(60, 20).replace("\"lease_seconds\": 60", "\"lease_seconds\": 60.5"),
                grant(60, 20).replace(session, "\"session_id\": \"\", "),
                grant(60, 20).replace("\"lease_seconds\": 60, ", ""))) {
            try (ScriptedServer server = new ScriptedServer(request -> ScriptedServer.Reply.now(201, bad));
                 SeatClient client = Support.insecure(server.url(), "sl_test").retries(0).build()) {
                assertThrows(SeatException.InvalidResponse.class, () -> client.acquire("lic", "pc-1"), bad);
            }
        }
        String nullCounts = grant(60, 20).replace("\"seats_used\": 1, \"seats_total\": 2", "\"seats_used\": null, \"seats_total\": null");
        for (String renewal : List.of(grant(60, 20).replace(session, ""), grant(60, 20).replace(session, "\"session_id\": null, "),
                nullCounts)) {
            try (ScriptedServer server = new ScriptedServer(request -> request.path().equals("/acquire")
                    ? ScriptedServer.Reply.now(201, grant(60, 20)) : ScriptedServer.Reply.now(200, renewal));
                 SeatClient client = Support.insecure(server.url(), "sl_test").retries(0).build()) {
                assertEquals(60, client.heartbeat("lic", "c2Vzc2lvbi0wMDAwMDAwMDAx").leaseDuration().getSeconds(), renewal);
                if (renewal.contains(session)) { // a renewal that names a session names the lease's
                    assertThrows(SeatException.InvalidResponse.class, () -> client.heartbeat("lic", "another-session"));
                }
            }
        }
    }
}
