package io.seatlease.client;

import static io.seatlease.client.Support.eventually;
import static io.seatlease.client.Support.now;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The client against a scripted loopback server (ScriptedServer): the bytes of its
 * requests, and answers sent at a pace no timeout on the headers alone would bound.
 */
class LocalServerTests {
    static String grant(int leaseSeconds, int heartbeatSeconds) {
        Instant deadline = Instant.now().plusSeconds(leaseSeconds).truncatedTo(ChronoUnit.MILLIS);
        return "{\"session_id\": \"c2Vzc2lvbi0wMDAwMDAwMDAx\", \"license_id\": \"lic\", \"client_id\": \"pc-1\", "
                + "\"lease_expires_at\": \"" + deadline + "\", \"lease_seconds\": " + leaseSeconds
                + ", \"heartbeat_interval_seconds\": " + heartbeatSeconds + ", \"seats_used\": 1, \"seats_total\": 2}";
    }

    static final String RELEASED = "{\"released\": true, \"seats_used\": 0}";

    /**
     * Issue 39 item 4: an http:// URL is spoken in HTTP/1.1 from the first request: no
     * "Upgrade: h2c" (with its HTTP2-Settings) that a proxy or an older server may refuse.
     */
    @Test
    void httpUrlsUseHttp11WithoutAnUpgrade() throws Exception {
        try (ScriptedServer server = new ScriptedServer(request -> request.path().equals("/acquire")
                ? ScriptedServer.Reply.now(201, grant(60, 20)) : ScriptedServer.Reply.now(200, RELEASED));
             SeatClient client = Support.insecure(server.url(), "sl_test").build()) {
            client.acquire("lic", "pc-1");
            ScriptedServer.Request request = server.requestsTo("/acquire").get(0);
            assertEquals("POST /acquire HTTP/1.1", request.line());
            assertFalse(request.headers().containsKey("upgrade"), request.headers().toString());
            assertFalse(request.headers().containsKey("http2-settings"), request.headers().toString());
            assertFalse(request.headers().getOrDefault("connection", "").toLowerCase().contains("upgrade"));
            assertEquals("Bearer sl_test", request.headers().get("authorization"));
            assertTrue(request.body().contains("\"client_id\":\"pc-1\""), request.body());
        }
    }

    /**
     * Issue 39 item 1: Lease.close() never waits past the release timeout (2 s), even when
     * the release's answer drips for half a minute.
     */
    @Test
    void closeNeverWaitsPastTheReleaseTimeout() throws Exception {
        try (ScriptedServer server = new ScriptedServer(request -> request.path().equals("/acquire")
                ? ScriptedServer.Reply.now(201, grant(60, 20)) : ScriptedServer.Reply.dripped(200, RELEASED));
             SeatClient client = Support.insecure(server.url(), "sl_test").releaseTimeout(Duration.ofSeconds(2))
                     .timeout(Duration.ofSeconds(30)).build()) {
            Lease lease = client.lease("lic", new LeaseOptions("pc-1"));
            double started = now();
            assertTimeoutPreemptively(Duration.ofSeconds(15), lease::close);
            double took = now() - started;
            assertTrue(took < 3, "close took " + took + " s");
            assertEquals(1, server.requestsTo("/release").size());
            assertTrue(lease.released());
        }
    }

    /**
     * Server behaviour 1, the other way: a heartbeat answered 410 "unknown" is sent once
     * more with the lease's last token (and a fresh request_id); answered 410 again, the
     * lease is lost ("unknown") and acquired again at once. A normal heartbeat carries no
     * token.
     */
    @Test
    void aLossTheTokenDoesNotRecoverIsLostAndRegained() throws Exception {
        String token = "eyJhbGciOiJFZERTQSJ9.eyJzaWQiOiJzIn0.c2ln";
        String unknown = "{\"error\": {\"code\": \"session_expired\", \"message\": \"gone\", \"reason\": \"unknown\"}}";
        String granted = grant(60, 1).replace("}", ", \"lease_token\": \"" + token + "\"}");
        AtomicInteger heartbeats = new AtomicInteger();
        // the first two heartbeats renew; from the third on the session is unknown, token or not
        try (ScriptedServer server = new ScriptedServer(request -> switch (request.path()) {
                case "/acquire" -> ScriptedServer.Reply.now(201, granted);
                case "/heartbeat" -> heartbeats.incrementAndGet() >= 3
                        ? ScriptedServer.Reply.now(410, unknown) : ScriptedServer.Reply.now(200, granted);
                default -> ScriptedServer.Reply.now(200, RELEASED);
            });
             SeatClient client = Support.insecure(server.url(), "sl_test").backoff(Duration.ofMillis(50)).build()) {
            Support.Watcher watcher = new Support.Watcher();
            try (Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(watcher))) {
                eventually(8, "lost and regained", () -> watcher.regained.get() >= 1);
                assertEquals("unknown", watcher.lost.get(0));
                List<ScriptedServer.Request> beats = server.requestsTo("/heartbeat");
                int retried = -1;
                for (int i = 0; i < beats.size() && retried < 0; i++) {
                    retried = beats.get(i).body().contains("\"lease_token\":\"" + token + "\"") ? i : -1;
                }
                assertTrue(retried >= 1, "no heartbeat sent the token: " + beats);
                assertFalse(beats.get(retried - 1).body().contains("lease_token"), "a normal heartbeat carries no token");
                assertNotEquals(requestId(beats.get(retried - 1)), requestId(beats.get(retried)));
                assertTrue(server.requestsTo("/acquire").size() >= 2);
                assertEquals("pc-1", lease.clientId());
            }
        }
    }

    /**
     * An operator freed the seat (seatlease revoke, the portal's "Free seat"): a heartbeat
     * answered 410 "revoked" loses the lease with that reason (the listener gets "revoked",
     * lostReason() says so), is never sent again with the lease's token (the server refuses
     * a revoked session's token: only "unknown" is), and the seat is acquired again at once.
     */
    @Test
    void aSeatAnOperatorFreedIsLostAsRevokedWithoutItsToken() throws Exception {
        String token = "eyJhbGciOiJFZERTQSJ9.eyJzaWQiOiJzIn0.c2ln";
        String revoked = "{\"error\": {\"code\": \"session_expired\", \"message\": \"gone\", \"reason\": \"revoked\"}}";
        String first = grant(60, 1).replace("}", ", \"lease_token\": \"" + token + "\"}");
        String second = first.replace("c2Vzc2lvbi0wMDAwMDAwMDAx", "c2Vzc2lvbi0wMDAwMDAwMDAy");
        AtomicInteger acquires = new AtomicInteger();
        // the first session is revoked (token or not); the second one renews
        try (ScriptedServer server = new ScriptedServer(request -> switch (request.path()) {
                case "/acquire" -> ScriptedServer.Reply.now(201, acquires.incrementAndGet() == 1 ? first : second);
                case "/heartbeat" -> request.body().contains("c2Vzc2lvbi0wMDAwMDAwMDAx")
                        ? ScriptedServer.Reply.now(410, revoked) : ScriptedServer.Reply.now(200, second);
                default -> ScriptedServer.Reply.now(200, RELEASED);
            });
             SeatClient client = Support.insecure(server.url(), "sl_test").backoff(Duration.ofMillis(50)).build()) {
            // each loss: its reason, and the lease's state as the listener saw it
            List<String> lost = new CopyOnWriteArrayList<>();
            AtomicInteger regained = new AtomicInteger();
            LeaseOptions.Listener listener = new LeaseOptions.Listener() {
                @Override public void onLost(Lease lease, String reason) {
                    lost.add(reason + ": lost " + lease.lost() + ", " + lease.lostReason());
                }
                @Override public void onRegained(Lease lease) { regained.incrementAndGet(); }
            };
            try (Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(listener))) {
                eventually(8, "lost and regained", () -> regained.get() >= 1);
                assertEquals(List.of("revoked: lost true, revoked"), lost);
                assertFalse(lease.lost());
                assertEquals(null, lease.lostReason());
                assertEquals("c2Vzc2lvbi0wMDAwMDAwMDAy", lease.sessionId());
                List<ScriptedServer.Request> beats = server.requestsTo("/heartbeat");
                assertTrue(beats.stream().noneMatch(b -> b.body().contains("lease_token")), "a heartbeat sent the token: " + beats);
                assertEquals(1, beats.stream().filter(b -> b.body().contains("c2Vzc2lvbi0wMDAwMDAwMDAx")).count(),
                        "the revoked session's heartbeat was sent again: " + beats);
                assertEquals(2, acquires.get());
            }
        }
    }

    private static String requestId(ScriptedServer.Request request) {
        return Json.string(Json.parseObject(request.body()), "request_id");
    }

    /**
     * Issue 39 item 1: a heartbeat whose answer drips is bounded by the time the lease has
     * left (3 s), not by the client's timeout (30 s): the lease is marked lost
     * ("unreachable") by its deadline and onLost fires.
     */
    @Test
    void aDrippedHeartbeatLosesTheLeaseByItsDeadline() throws Exception {
        try (ScriptedServer server = new ScriptedServer(request -> switch (request.path()) {
                case "/acquire" -> ScriptedServer.Reply.now(201, grant(3, 1));
                case "/heartbeat" -> ScriptedServer.Reply.dripped(200, grant(3, 1));
                default -> ScriptedServer.Reply.now(200, RELEASED);
            });
             SeatClient client = Support.insecure(server.url(), "sl_test").timeout(Duration.ofSeconds(30))
                     .backoff(Duration.ofMillis(50)).build()) {
            Support.Watcher watcher = new Support.Watcher();
            double started = now();
            try (Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(watcher))) {
                eventually(6, "the lease lost", () -> !watcher.lost.isEmpty());
                double took = now() - started;
                assertTrue(took >= 2.5 && took < 4, "lost after " + took + " s");
                assertEquals(List.of("unreachable"), watcher.lost.subList(0, 1));
                assertTrue(server.requestsTo("/heartbeat").size() >= 1);
                assertTrue(lease.lost() || watcher.regained.get() > 0);
            }
        }
    }
}
