package io.seatlease.client;

import static io.seatlease.client.Support.badUrl;
import static io.seatlease.client.Support.calls;
import static io.seatlease.client.Support.eventually;
import static io.seatlease.client.Support.now;
import static io.seatlease.client.Support.resetCalls;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.Execution;
import org.junit.jupiter.api.parallel.ExecutionMode;
import org.junit.jupiter.api.parallel.ResourceLock;

/**
 * The server's behaviours a held lease must follow (the fake server's behaviour scenarios):
 * a heartbeat that drips, a region's loss answered by the lease's token, a term that ended,
 * a suspension. They mostly wait on the lease's own clock, so they run alongside the other
 * tests (CONCURRENT); the scenarios whose calls are counted share one count, hence the lock.
 */
@Tag("live")
@Execution(ExecutionMode.CONCURRENT)
class BehaviourTests {
    static SeatClient client(String scenario, Support.Log log) {
        return SeatClient.builder(badUrl() + "/" + scenario, "sl_test").pinnedKeys(List.of(Support.badKey()))
                .tenantId("acme").retries(0)
                .backoff(Duration.ofMillis(50)).timeout(Duration.ofSeconds(30)).logger(log).build();
    }

    /**
     * Issue 39 item 1 with the shared fixture: acquire answers at once (a lease of 60 s),
     * every heartbeat drips. The lease is lost ("unreachable") by its deadline, though the
     * client's timeout (30 s) and the dripped answer (minutes) are longer.
     */
    @Test
    void aDrippingHeartbeatLosesTheLeaseByItsDeadline() throws Exception {
        Support.Log log = new Support.Log();
        Support.Watcher watcher = new Support.Watcher();
        try (SeatClient client = client("drip_heartbeat", log)) {
            double started = now();
            Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(watcher));
            assertEquals(Duration.ofSeconds(60), lease.leaseDuration());
            eventually(70, "the lease lost", () -> !watcher.lost.isEmpty());
            double took = now() - started;
            assertTrue(took >= 58 && took < 63, "lost after " + took + " s");
            assertEquals("unreachable", watcher.lost.get(0));
            double closing = now();
            lease.close();
            assertTrue(now() - closing < 6, "close within the release timeout");
        }
    }

    /**
     * Server behaviour 1 (issue 40): a heartbeat answered 410 "unknown" is sent once more
     * with the lease's last token; answered 200, the seat is kept: no onLost, the same
     * session, nothing logged above info.
     */
    @Test
    void aRegionsLossIsRecoveredByTheLeaseToken() throws Exception {
        Support.Log log = new Support.Log();
        Support.Watcher watcher = new Support.Watcher();
        try (SeatClient client = client("recover", log);
             Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(watcher))) {
            String session = lease.sessionId();
            // the first heartbeat comes at 15 to 20 s (an interval of 20 s)
            eventually(30, "the seat kept by its token", () -> log.has("kept by its token"));
            assertEquals(List.of(), watcher.lost);
            assertFalse(lease.lost());
            assertEquals(session, lease.sessionId());
            assertEquals(0, log.count("warning"), log.lines.toString());
        }
    }

    /**
     * An operator freed the seat (the fake server's "revoked": a heartbeat of the first
     * session is 410 "revoked", token or not). The lease is lost with that reason, once, its
     * token never sent (the server counts each heartbeat that carries one), and the seat
     * acquired again at once (the scenario's second session, which renews).
     */
    @Test
    @ResourceLock("bad-server-call-counts")
    void aSeatAnOperatorFreedIsLostAsRevokedWithoutItsToken() throws Exception {
        resetCalls("revoked");
        Support.Log log = new Support.Log();
        Support.Watcher watcher = new Support.Watcher();
        try (SeatClient client = client("revoked", log);
             Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(watcher))) {
            String first = lease.sessionId();
            // heartbeats every second
            eventually(8, "lost and regained", () -> watcher.regained.get() >= 1);
            assertEquals(List.of("revoked"), watcher.lost);
            assertFalse(lease.lost());
            assertTrue(!first.equals(lease.sessionId()), lease.sessionId());
            assertEquals(0, calls("revoked", "token"), "a heartbeat carried the lease token");
            assertEquals(2, calls("revoked", "acquire"));
            assertTrue(log.has("lost (revoked)") && !log.has("kept by its token"), log.lines.toString());
        }
    }

    /**
     * Server behaviour 2: the license's term ended. The heartbeat's 403 license_expired
     * marks the lease lost with that reason, once; it is said in one warning, and asked
     * again only at a slow back-off (minutes): over 8 s after the loss, at most one more
     * acquire. Waiting for a first seat, the 403 is thrown at once.
     */
    @Test
    @ResourceLock("bad-server-call-counts")
    void anEndedTermIsLostOnceAndAskedForSlowly() throws Exception {
        resetCalls("term_ended");
        Support.Log log = new Support.Log();
        Support.Watcher watcher = new Support.Watcher();
        try (SeatClient client = client("term_ended", log);
             Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(watcher))) {
            eventually(5, "the lease lost", lease::lost);
            assertEquals("license_expired", lease.lostReason());
            Thread.sleep(8000);
            assertEquals(List.of("license_expired"), watcher.lost);
            assertTrue(calls("term_ended", "acquire") <= 2, "acquires: " + calls("term_ended", "acquire"));
            assertTrue(log.count("warning") <= 1, log.lines.toString());
            double started = now();
            SeatException.LicenseExpired ended = assertThrows(SeatException.LicenseExpired.class,
                    () -> client.lease("lic", new LeaseOptions("pc-2").waitFor(Duration.ofSeconds(30))));
            assertTrue(now() - started < 3 && ended.status() == 403, "not waited for");
            assertTrue(lease.lost());
        }
    }

    /**
     * Server behaviour 2: a suspended license keeps its held seats (heartbeats go on 200,
     * the lease is never lost) while a new acquire is refused at once (403
     * license_suspended), even when waiting for a seat.
     */
    @Test
    @ResourceLock("bad-server-call-counts")
    void aSuspensionKeepsTheHeldSeat() throws Exception {
        resetCalls("suspended");
        Support.Log log = new Support.Log();
        Support.Watcher watcher = new Support.Watcher();
        try (SeatClient client = client("suspended", log);
             Lease lease = client.lease("lic", new LeaseOptions("pc-1").listener(watcher))) {
            double started = now();
            SeatException.LicenseSuspended refused = assertThrows(SeatException.LicenseSuspended.class,
                    () -> client.lease("lic", new LeaseOptions("pc-2").waitFor(Duration.ofSeconds(30))));
            assertTrue(now() - started < 3 && refused.code().equals("license_suspended"));
            Thread.sleep(5000); // past a lease of 3 s: kept by heartbeats
            assertFalse(lease.lost());
            assertEquals(List.of(), watcher.lost);
            assertTrue(calls("suspended", "heartbeat") >= 3, "heartbeats: " + calls("suspended", "heartbeat"));
            assertEquals(2, calls("suspended", "acquire"));
        }
    }
}
