package io.seatlease.client;

import static io.seatlease.client.Support.client;
import static io.seatlease.client.Support.eventually;
import static io.seatlease.client.Support.license;
import static io.seatlease.client.Support.live;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * The license's idle rule end to end (issue 50), against the served functions on real Redis
 * and PostgreSQL: a lease idle past the timeout is warned, reclaimed (always: at the
 * warning's time; when_needed: for another client's acquire), lost as "idle" and asked for
 * again only once the product is in use; a busy one never is.
 */
@Tag("live")
class IdleLiveTests {
    static final class IdleWatcher implements LeaseOptions.Listener {
        final List<Instant> warnings = new CopyOnWriteArrayList<>();
        final Support.Watcher seat = new Support.Watcher();
        @Override public void onIdleWarning(Lease lease, Instant reclaimAt) { warnings.add(reclaimAt); }
        @Override public void onLost(Lease lease, String reason) { seat.onLost(lease, reason); }
        @Override public void onRegained(Lease lease) { seat.onRegained(lease); }
    }

    static final String RULE = "\"seats\": 1, \"lease_seconds\": 3, \"idle_timeout_seconds\": 60";

    @Test
    void anIdleLeaseIsWarnedReclaimedLostAsIdleAndTakenAgainOnATouch() throws Exception {
        license("j-idle-always", "{" + RULE + ", \"idle_reclaim\": \"always\"}");
        IdleWatcher watcher = new IdleWatcher();
        try (SeatClient client = client(true, 0.05);
             Lease lease = client.lease("j-idle-always", new LeaseOptions("ws-idle").listener(watcher))) {
            lease.touch(Duration.ofMinutes(2)); // idle past the 60 s timeout
            eventually(10, "the idle warning", () -> watcher.warnings.size() == 1);
            eventually(10, "the seat lost", () -> watcher.seat.lost.size() == 1);
            assertEquals(List.of("idle"), watcher.seat.lost);
            assertEquals("idle", lease.lostReason());
            assertEquals(0, live("j-idle-always").size(), "the reclaimed seat is free");
            Thread.sleep(2000); // not taken back while idle
            assertEquals(0, watcher.seat.regained.get());
            assertEquals(0, live("j-idle-always").size());
            lease.touch(); // back at the keyboard
            eventually(10, "the seat taken again", () -> watcher.seat.regained.get() == 1);
            assertEquals(1, live("j-idle-always").size());
        }
    }

    @Test
    void whenNeededAnIdleLeaseKeepsItsSeatUntilAnotherClientAsks() throws Exception {
        license("j-idle-needed", "{" + RULE + ", \"idle_reclaim\": \"when_needed\"}");
        IdleWatcher watcher = new IdleWatcher();
        try (SeatClient client = client(true, 0.05);
             Lease lease = client.lease("j-idle-needed", new LeaseOptions("ws-idle").listener(watcher))) {
            lease.touch(Duration.ofMinutes(2));
            eventually(10, "the idle warning", () -> watcher.warnings.size() == 1);
            Thread.sleep(3000); // past the warning's time: nobody waits, the seat is kept
            assertFalse(lease.lost(), "lost with nobody waiting: " + watcher.seat.lost);
            Answer other = client.acquire("j-idle-needed", "ws-other"); // the idle seat reclaimed for it
            eventually(10, "the seat lost", () -> watcher.seat.lost.size() == 1);
            assertEquals(List.of("idle"), watcher.seat.lost);
            client.release("j-idle-needed", other.sessionId());
        }
    }

    @Test
    void aBusyLeaseIsNeverWarned() throws Exception {
        license("j-idle-busy", "{" + RULE + ", \"idle_reclaim\": \"always\"}");
        IdleWatcher watcher = new IdleWatcher();
        try (SeatClient client = client(true, 0.05);
             Lease lease = client.lease("j-idle-busy", new LeaseOptions("ws-busy").listener(watcher))) {
            Lease.Busy busy = lease.busy();
            try {
                lease.touch(Duration.ofMinutes(2)); // idle, but rendering
                Thread.sleep(5000); // several heartbeats
            } finally {
                busy.close();
            }
            assertEquals(List.of(), watcher.warnings);
            assertEquals(List.of(), watcher.seat.lost);
            assertTrue(lease.idleReclaimAt().isEmpty() && !lease.lost());
        }
    }
}
