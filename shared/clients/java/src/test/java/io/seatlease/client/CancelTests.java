package io.seatlease.client;

import static io.seatlease.client.Support.control;
import static io.seatlease.client.Support.eventually;
import static io.seatlease.client.Support.key;
import static io.seatlease.client.Support.license;
import static io.seatlease.client.Support.live;
import static io.seatlease.client.Support.now;
import static io.seatlease.client.Support.onlySeat;
import static io.seatlease.client.Support.queued;
import static io.seatlease.client.Support.requests;
import static io.seatlease.client.Support.threadAlive;
import static io.seatlease.client.Support.url;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * Issue 39 item 8: a wait for a seat (the default waits for ever) and a first acquire in
 * flight can be cancelled (leaseAsync's future, an interrupt, closing the client), against a
 * full license of the served functions; a seat taken meanwhile is given back.
 */
@Tag("live")
class CancelTests {
    static SeatClient client() {
        return Support.insecure(url(), key()).maxWaitPoll(Duration.ofMillis(300)).backoff(Duration.ofMillis(50)).build();
    }

    /** The number of acquires the served functions have answered so far. */
    static int acquires() throws Exception {
        return requests("/acquire").size();
    }

    @Test
    void cancellingEndsAWaitForAFullLicense() throws Exception {
        license("j-cancel-full", "{\"seats\": 1, \"lease_seconds\": 60}");
        try (SeatClient client = client(); Lease holder = client.lease("j-cancel-full", new LeaseOptions("holder"))) {
            CompletableFuture<Lease> waiting = client.leaseAsync("j-cancel-full", new LeaseOptions("waiter").waitFor(Duration.ZERO));
            int before = acquires();
            eventually(5, "polls of the full license", () -> acquires() >= before + 2);
            assertFalse(waiting.isDone());
            assertTrue(waiting.cancel(true));
            double cancelled = now();
            eventually(1, "the wait ended", () -> !threadAlive("seatlease-acquire-j-cancel-full"));
            assertTrue(now() - cancelled < 1);
            assertThrows(CancellationException.class, waiting::get);
            int after = acquires();
            Thread.sleep(1500); // no acquire after the cancel (but one giving back a call in flight)
            assertTrue(acquires() <= after + 1, "acquires after the cancel: " + (acquires() - after));
            assertTrue(onlySeat("j-cancel-full", holder.sessionId(), "holder"));
        }
    }

    @Test
    void cancellingEndsAWaitInLine() throws Exception {
        license("j-cancel-line", "{\"seats\": 1, \"lease_seconds\": 60, \"policy\": {\"queue\": true, \"queue_hold_seconds\": 3}}");
        try (SeatClient client = client(); Lease holder = client.lease("j-cancel-line", new LeaseOptions("holder"))) {
            CompletableFuture<Lease> waiting = client.leaseAsync("j-cancel-line", new LeaseOptions("waiter").waitFor(Duration.ZERO));
            eventually(5, "waiting in line", () -> queued("j-cancel-line").equals(List.of("waiter")));
            waiting.cancel(true);
            eventually(1, "the wait ended", () -> !threadAlive("seatlease-acquire-j-cancel-line"));
            int after = acquires();
            Thread.sleep(1500);
            assertTrue(acquires() <= after + 1, "acquires after the cancel: " + (acquires() - after));
            assertTrue(onlySeat("j-cancel-line", holder.sessionId(), "holder"));
        }
    }

    /**
     * The first acquire is in flight (its answer stalled 8 s) when the wait is cancelled:
     * the call ends at once, and the seat the server gave it meanwhile is released in the
     * background (long before the stalled answer would have come).
     */
    @Test
    void cancellingAnAcquireInFlightGivesBackTheSeatItTook() throws Exception {
        license("j-cancel-flight", "{\"seats\": 2, \"lease_seconds\": 60}");
        try (SeatClient client = SeatClient.builder(url(), key()).pinnedKeys(Support.testKeys()).tenantId("acme").timeout(Duration.ofSeconds(20)).build()) {
            control("stall", "{\"path\": \"/acquire\", \"seconds\": 8}");
            CompletableFuture<Lease> first = client.leaseAsync("j-cancel-flight", new LeaseOptions("pc-1"));
            eventually(5, "the seat taken", () -> live("j-cancel-flight").size() == 1);
            first.cancel(true);
            double cancelled = now();
            eventually(1, "the acquire ended", () -> !threadAlive("seatlease-acquire-j-cancel-flight"));
            eventually(4, "the seat given back", () -> live("j-cancel-flight").size() == 0);
            assertTrue(now() - cancelled < 4);
        }
    }

    /** A thread waiting in lease() is interrupted: SeatException.Cancelled, at once. */
    @Test
    void interruptingAWaitingThreadCancelsIt() throws Exception {
        license("j-cancel-interrupt", "{\"seats\": 1, \"lease_seconds\": 60}");
        try (SeatClient client = client(); Lease holder = client.lease("j-cancel-interrupt", new LeaseOptions("holder"))) {
            CompletableFuture<Throwable> outcome = new CompletableFuture<>();
            Thread waiter = new Thread(() -> {
                try {
                    client.lease("j-cancel-interrupt", new LeaseOptions("waiter").waitFor(Duration.ZERO)).close();
                    outcome.complete(null);
                } catch (Throwable thrown) {
                    outcome.complete(thrown);
                }
            });
            waiter.start();
            Thread.sleep(800);
            waiter.interrupt();
            Throwable thrown = outcome.get(2, TimeUnit.SECONDS);
            assertInstanceOf(SeatException.Cancelled.class, thrown);
            assertEquals("cancelled", ((SeatException) thrown).code());
            assertTrue(onlySeat("j-cancel-interrupt", holder.sessionId(), "holder"));
        }
    }

    /** Closing the client ends its waits (Cancelled) and releases the seats it holds. */
    @Test
    void closingTheClientEndsItsWaits() throws Exception {
        license("j-cancel-close", "{\"seats\": 1, \"lease_seconds\": 60}");
        SeatClient client = client();
        Lease holder = client.lease("j-cancel-close", new LeaseOptions("holder"));
        CompletableFuture<Lease> waiting = client.leaseAsync("j-cancel-close", new LeaseOptions("waiter").waitFor(Duration.ZERO));
        Thread.sleep(500);
        double started = now();
        client.close();
        ExecutionException failed = assertThrows(ExecutionException.class, () -> waiting.get(2, TimeUnit.SECONDS));
        assertInstanceOf(SeatException.Cancelled.class, failed.getCause());
        assertTrue(now() - started < 2.5);
        assertTrue(holder.released());
        eventually(3, "no seat left", () -> live("j-cancel-close").size() == 0);
    }
}
