package io.seatlease.client;

import static io.seatlease.client.Support.badUrl;
import static io.seatlease.client.Support.now;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Hostile answers from the fake server (tests/client_bad_server.py at SEATLEASE_BAD_URL):
 * each is a typed error, never a hang, a crash or an untyped exception.
 */
@Tag("live")
class BadAnswerTests {
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

    static SeatClient client(String scenario, boolean verify) {
        SeatClient.Builder builder = verify ? SeatClient.builder(badUrl() + "/" + scenario, "sl_test")
                .pinnedKeys(List.of(Support.badKey())) : Support.insecure(badUrl() + "/" + scenario, "sl_test");
        return builder.retries(0).build();
    }

    static void callOnce(SeatClient client, String call) {
        switch (call) {
            case "acquire" -> client.acquire("lic", "pc-1");
            case "heartbeat" -> client.heartbeat("lic", "c2Vzc2lvbi0wMDAwMDAwMDAx");
            case "release" -> client.release("lic", "c2Vzc2lvbi0wMDAwMDAwMDAx");
            default -> client.lease("lic", new LeaseOptions("pc-1")).close();
        }
    }

    @TestFactory
    Stream<DynamicTest> everyBadAnswerIsATypedError() {
        return Stream.of(BAD).map(c -> DynamicTest.dynamicTest(c[0] + "_" + c[1], () -> {
            try (SeatClient client = client((String) c[0], (Boolean) c[2])) {
                callOnce(client, (String) c[1]);
                fail("no error");
            } catch (SeatException thrown) {
                assertTrue(((Class<?>) c[3]).isInstance(thrown), thrown.toString());
                assertEquals((int) (Integer) c[4], thrown.status(), thrown.toString());
                assertFalse(thrown.getMessage().isEmpty());
            }
        }));
    }

    /**
     * Weighted seats against the "weights" scenario: seats is sent only when set (the server
     * echoes the weight asked, none when none was, and refuses a seats that is not a positive
     * integer); the answer's and the lease's weight, 1 from a server that does not say; a
     * seats_mismatch's and a weighted denial's numbers; a mismatch is not waited for.
     */
    @Test
    void weightsAreSentAndRead() {
        try (SeatClient weights = client("weights", false)) {
            Answer plain = weights.acquire("lic", "pc-1");
            assertTrue(plain.seats() == 1 && !plain.raw().containsKey("seats"), plain.toString());
            assertEquals(3, weights.acquire("lic", "pc-2", new AcquireOptions().seats(3)).seats());
            try (Lease lease = weights.lease("lic", new LeaseOptions("pc-3"))) {
                assertTrue(lease.seats() == 1 && lease.getSeats() == 1);
            }
            try (Lease lease = weights.lease("lic", new LeaseOptions("pc-4").seats(4))) {
                assertTrue(lease.seats() == 4 && lease.getSeats() == 4);
            }
        }
        try (SeatClient mismatch = client("seats_mismatch", false)) {
            SeatException.SeatsMismatch refused = assertThrows(SeatException.SeatsMismatch.class,
                    () -> mismatch.acquire("lic", "pc-1", new AcquireOptions().seats(2)));
            assertTrue(refused.heldSeats() == 4 && refused.seats() == 2 && refused.code().equals("seats_mismatch"));
            assertFalse(SeatException.NoSeatsAvailable.class.isInstance(refused), "a mismatch is no denial of a seat");
            double started = now();
            assertThrows(SeatException.SeatsMismatch.class,
                    () -> mismatch.lease("lic", new LeaseOptions("pc-1").seats(2).waitFor(Duration.ofSeconds(30))));
            assertTrue(now() - started < 5, "a mismatch is not waited for");
        }
        try (SeatClient denial = client("weighted_denial", false)) {
            SeatException.NoSeatsAvailable full = assertThrows(SeatException.NoSeatsAvailable.class,
                    () -> denial.acquire("lic", "pc-1", new AcquireOptions().seats(4)));
            assertTrue(full.seatsRequested() == 4 && full.seatsUsed() == 6, full.toString());
        }
        assertEquals(1, TokenVerifier.claimedSeats(Map.of()));
    }

    /**
     * Issue 39 item 1: an answer whose headers come at once and whose body drips a byte a
     * second ends at the call's timeout (2 s here), not when the server is done (minutes).
     */
    @Test
    void aDrippedAnswerEndsAtTheTimeout() {
        try (SeatClient client = SeatClient.builder(badUrl() + "/drip", "sl_test").pinnedKeys(List.of(Support.badKey()))
                .timeout(Duration.ofSeconds(2)).retries(0).build()) {
            double started = now();
            SeatException.BackendUnavailable failed = assertTimeoutPreemptively(Duration.ofSeconds(15),
                    () -> assertThrows(SeatException.BackendUnavailable.class, () -> client.acquire("lic", "pc-1")));
            double took = now() - started;
            assertTrue(took >= 1.8 && took < 4, "took " + took + " s");
            assertTrue(failed.status() == 0 && failed.code().equals("network_error"), failed.toString());
        }
    }

    /** Interrupting the thread of a plain call in flight ends it at once: Cancelled. */
    @Test
    void interruptingAPlainCallEndsIt() throws Exception {
        try (SeatClient client = SeatClient.builder(badUrl() + "/drip", "sl_test").pinnedKeys(List.of(Support.badKey()))
                .timeout(Duration.ofSeconds(30)).retries(0).build()) {
            java.util.concurrent.CompletableFuture<Throwable> outcome = new java.util.concurrent.CompletableFuture<>();
            Thread caller = new Thread(() -> {
                try {
                    client.acquire("lic", "pc-1");
                    outcome.complete(null);
                } catch (Throwable thrown) {
                    outcome.complete(thrown);
                }
            });
            caller.start();
            Thread.sleep(500); // the answer's headers came, its body drips
            double interrupted = now();
            caller.interrupt();
            Throwable thrown = outcome.get(5, java.util.concurrent.TimeUnit.SECONDS);
            assertTrue(thrown instanceof SeatException.Cancelled, String.valueOf(thrown));
            assertTrue(now() - interrupted < 1, "ended at once");
        }
    }

    /**
     * Issue 39 item 9: a 503 with Retry-After: 3600 waits at most the maximum back-off (1 s)
     * between attempts: two retries fail within about 3 s, not an hour.
     */
    @Test
    void retryAfterIsCappedAtTheMaximumBackoff() {
        try (SeatClient client = SeatClient.builder(badUrl() + "/retry_after_long", "sl_test").pinnedKeys(List.of(Support.badKey()))
                .retries(2).backoff(Duration.ofMillis(100)).maxBackoff(Duration.ofSeconds(1)).build()) {
            double started = now();
            SeatException.BackendUnavailable failed = assertTimeoutPreemptively(Duration.ofSeconds(20),
                    () -> assertThrows(SeatException.BackendUnavailable.class, () -> client.acquire("lic", "pc-1")));
            double took = now() - started;
            assertTrue(took >= 1.5 && took < 3.5, "took " + took + " s");
            assertEquals(503, failed.status());
        }
    }
}
