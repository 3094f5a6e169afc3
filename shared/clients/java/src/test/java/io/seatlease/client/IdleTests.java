package io.seatlease.client;

import static io.seatlease.client.Support.eventually;
import static io.seatlease.client.Support.now;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * The license's idle rule, the client's side (issue 50), against a scripted loopback server
 * that keeps what each heartbeat carried: idle_seconds only once the product touched the
 * lease, busy: true while a busy scope is open; an answer's idle_reclaim_at calls
 * onIdleWarning once per warning, and a touch after it heartbeats at once; a 410 reason
 * "idle" loses the seat as "idle", asked for again only once the product is in use.
 */
class IdleTests {
    static final String RECLAIM_AT = "2100-01-01T00:00:30.000Z";

    static String grant(String session, int leaseSeconds, int heartbeatSeconds, String more) {
        return "{\"session_id\": \"" + session + "\", \"license_id\": \"lic\", \"client_id\": \"pc-1\", "
                + "\"lease_expires_at\": \"2100-01-01T00:00:00.000Z\", \"lease_seconds\": " + leaseSeconds
                + ", \"heartbeat_interval_seconds\": " + heartbeatSeconds + ", \"seats_used\": 1, \"seats_total\": 8"
                + more + "}";
    }

    static JsonObject body(ScriptedServer.Request request) {
        return JsonParser.parseString(request.body()).getAsJsonObject();
    }

    /** A heartbeat's idle_seconds; -1 when it carried none. */
    static long idle(ScriptedServer.Request request) {
        JsonObject body = body(request);
        return body.has("idle_seconds") ? body.get("idle_seconds").getAsLong() : -1;
    }

    static boolean busy(ScriptedServer.Request request) {
        JsonObject body = body(request);
        return body.has("busy") && body.get("busy").getAsBoolean();
    }

    static List<ScriptedServer.Request> heartbeats(ScriptedServer server) { return server.requestsTo("/heartbeat"); }

    static ScriptedServer.Request last(ScriptedServer server) {
        List<ScriptedServer.Request> beats = heartbeats(server);
        return beats.get(beats.size() - 1);
    }

    static SeatClient client(ScriptedServer server) {
        return Support.insecure(server.url(), "sl_test").retries(1).backoff(Duration.ofMillis(10)).build();
    }

    @Test
    void heartbeatsCarryIdleSecondsOnlyAfterATouchAndBusyWhileAScopeIsOpen() throws Exception {
        try (ScriptedServer server = new ScriptedServer(request -> switch (request.path()) {
                case "/acquire" -> ScriptedServer.Reply.now(201, grant("s-1", 1, 1, ""));
                case "/heartbeat" -> ScriptedServer.Reply.now(200, grant("s-1", 1, 1, ""));
                default -> ScriptedServer.Reply.now(200, LocalServerTests.RELEASED);
            });
             SeatClient client = client(server);
             Lease lease = client.lease("lic", new LeaseOptions("pc-1"))) {
            eventually(5, "two heartbeats", () -> heartbeats(server).size() >= 2);
            for (ScriptedServer.Request beat : heartbeats(server)) {
                assertEquals(-1, idle(beat), "idle_seconds before any touch: " + beat.body());
                assertFalse(body(beat).has("busy"), "busy outside a busy scope: " + beat.body());
            }
            lease.touch();
            int before = heartbeats(server).size();
            // whole seconds since the touch: 0 at first, 1 once a second has passed
            eventually(5, "a heartbeat idle a second", () -> heartbeats(server).size() > before && idle(last(server)) >= 1);
            for (ScriptedServer.Request beat : heartbeats(server).subList(before, heartbeats(server).size())) {
                assertTrue(idle(beat) >= 0 && idle(beat) <= 5, "after a touch: " + beat.body());
            }
            Lease.Busy outer = lease.busy();
            try {
                lease.busy().close(); // nested: still busy after the inner scope ends
                int opened = heartbeats(server).size();
                eventually(5, "a busy heartbeat", () -> heartbeats(server).size() > opened);
                assertTrue(busy(last(server)), last(server).body());
            } finally {
                outer.close();
                outer.close(); // twice: closed once
            }
            int closed = heartbeats(server).size();
            eventually(5, "a heartbeat after the scope", () -> heartbeats(server).size() > closed + 1);
            assertFalse(body(last(server)).has("busy"), "busy after the scope closed: " + last(server).body());
        }
    }

    @Test
    void anIdleWarningIsCalledOnceAndATouchCancelsItAtOnce() throws Exception {
        // a heartbeat idle a second or more is warned; a slow beat (every 2.25 to 3 s), so that
        // the one a touch sends is told apart from the next due
        List<Instant> warnings = new CopyOnWriteArrayList<>();
        try (ScriptedServer server = new ScriptedServer(request -> switch (request.path()) {
                case "/acquire" -> ScriptedServer.Reply.now(201, grant("s-1", 30, 3, ""));
                case "/heartbeat" -> ScriptedServer.Reply.now(200, grant("s-1", 30, 3,
                        idle(request) >= 1 ? ", \"idle_reclaim_at\": \"" + RECLAIM_AT + "\"" : ""));
                default -> ScriptedServer.Reply.now(200, LocalServerTests.RELEASED);
            });
             SeatClient client = client(server);
             Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(new LeaseOptions.Listener() {
                 @Override public void onIdleWarning(Lease l, Instant reclaimAt) { warnings.add(reclaimAt); }
             }))) {
            lease.touch();
            eventually(10, "two warned heartbeats", () -> heartbeats(server).size() >= 2);
            assertEquals(List.of(Instant.parse(RECLAIM_AT)), warnings, "once per warning");
            assertEquals(Optional.of(Instant.parse(RECLAIM_AT)), lease.idleReclaimAt());
            int before = heartbeats(server).size();
            double touched = now();
            lease.touch();
            eventually(2, "the heartbeat a touch sends at once", () -> heartbeats(server).size() > before);
            assertTrue(now() - touched < 1.5, "the heartbeat after the touch went " + (now() - touched) + " s later");
            assertEquals(0, idle(heartbeats(server).get(before)), heartbeats(server).get(before).body());
            eventually(1, "the warning cleared", () -> lease.idleReclaimAt().isEmpty());
            // idle again: a new warning, called again
            eventually(10, "a second warning", () -> warnings.size() == 2);
        }
    }

    @Test
    void touchesOnEveryKeyWhileWarnedSendAHeartbeatASecondAtMost() throws Exception {
        // every heartbeat warned: a product touching every 50 ms must not send a heartbeat a
        // touch (one per answer, and only for a touch a whole second newer than the warned one's)
        try (ScriptedServer server = new ScriptedServer(request -> switch (request.path()) {
                case "/acquire" -> ScriptedServer.Reply.now(201, grant("s-1", 30, 3, ""));
                case "/heartbeat" -> ScriptedServer.Reply.now(200, grant("s-1", 30, 3,
                        ", \"idle_reclaim_at\": \"" + RECLAIM_AT + "\""));
                default -> ScriptedServer.Reply.now(200, LocalServerTests.RELEASED);
            });
             SeatClient client = client(server);
             Lease lease = client.lease("lic", new LeaseOptions("pc-1"))) {
            lease.touch(Duration.ofSeconds(5)); // the system's idle time: 5 s
            eventually(5, "the first (warned) heartbeat", () -> lease.idleReclaimAt().isPresent());
            long firstIdle = idle(heartbeats(server).get(0));
            assertTrue(firstIdle >= 5 && firstIdle <= 9, "touched 5 s before the lease began: " + firstIdle);
            int before = heartbeats(server).size();
            for (int i = 0; i < 30; i++) { // 1.5 s of key presses
                lease.touch();
                Thread.sleep(50);
            }
            int sent = heartbeats(server).size() - before;
            assertTrue(sent >= 1 && sent <= 3, sent + " heartbeats for 30 touches in 1.5 s while warned");
        }
    }

    static final String IDLE_GONE = "{\"error\": {\"code\": \"session_expired\", \"message\": \"Reclaimed for idleness.\", "
            + "\"reason\": \"idle\"}}";

    @Test
    void a410IdleIsLostAsIdleAndAskedForAgainOnlyOnceInUse() throws Exception {
        AtomicInteger sessions = new AtomicInteger();
        Support.Watcher watcher = new Support.Watcher();
        try (ScriptedServer server = new ScriptedServer(request -> {
                if (request.path().equals("/acquire")) {
                    return ScriptedServer.Reply.now(201, grant("s-" + sessions.incrementAndGet(), 1, 1, ""));
                }
                if (request.path().equals("/heartbeat")) {
                    String session = body(request).get("session_id").getAsString();
                    return session.equals("s-1") ? ScriptedServer.Reply.now(410, IDLE_GONE)
                            : ScriptedServer.Reply.now(200, grant(session, 1, 1, ""));
                }
                return ScriptedServer.Reply.now(200, LocalServerTests.RELEASED);
            });
             SeatClient client = client(server);
             Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(watcher))) {
            lease.touch();
            eventually(5, "the seat lost", lease::lost);
            assertEquals(List.of("idle"), watcher.lost);
            assertEquals("idle", lease.lostReason());
            Thread.sleep(1500); // several heartbeat intervals: nobody uses the product
            assertEquals(1, server.requestsTo("/acquire").size(), "a seat reclaimed for idleness was taken back while idle");
            lease.touch();
            eventually(2, "the seat asked for again after a touch", () -> watcher.regained.get() == 1);
            assertFalse(lease.lost());
            assertEquals("s-2", lease.sessionId());
        }
    }

    @Test
    void answersCarryTheWarningAndTheSharedSessionsAndABadWarningIsRefused() throws Exception {
        try (ScriptedServer server = new ScriptedServer(request -> {
                String session = body(request).get("session_id").getAsString();
                return session.equals("bad")
                        ? ScriptedServer.Reply.now(200, grant("bad", 30, 10, ", \"idle_reclaim_at\": \"soon\""))
                        : ScriptedServer.Reply.now(200, grant(session, 30, 10,
                                ", \"idle_reclaim_at\": \"" + RECLAIM_AT + "\", \"shared_sessions\": 3"));
            });
             SeatClient client = client(server)) {
            Answer answer = client.heartbeat("lic", "s-1");
            assertEquals(Optional.of(Instant.parse(RECLAIM_AT)), answer.idleReclaimAt());
            assertEquals(3, answer.sharedSessions());
            assertThrows(SeatException.InvalidResponse.class, () -> client.heartbeat("lic", "bad"));
        }
    }
}
