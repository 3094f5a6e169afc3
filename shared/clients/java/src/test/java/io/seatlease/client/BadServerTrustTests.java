package io.seatlease.client;

import static io.seatlease.client.Support.badKey;
import static io.seatlease.client.Support.badUrl;
import static io.seatlease.client.Support.calls;
import static io.seatlease.client.Support.eventually;
import static io.seatlease.client.Support.now;
import static io.seatlease.client.Support.resetCalls;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.parallel.ResourceLock;

/**
 * Issue 48 against the fake server (tests/client_bad_server.py at SEATLEASE_BAD_URL, its
 * key at SEATLEASE_BAD_PINNED_KEY): a client built the default way (the vendor's key
 * pinned) holds no seat from a grant without the vendor's token and releases it at once
 * (the server's call counts show it); a dripped release ends by the release timeout; 404s
 * read by their code; a null session is invalid; counts kept across renewals without them;
 * a redirect not followed.
 */
@Tag("live")
class BadServerTrustTests {
    static SeatClient.Builder pinned(String scenario) {
        return SeatClient.builder(badUrl() + "/" + scenario, "sl_test").pinnedKeys(List.of(badKey())).tenantId("acme")
                .retries(0).backoff(Duration.ofMillis(50));
    }

    /** A signed answer from the healthy scenario is a verified seat (the control of the cases below). */
    @Test
    void theVendorsSignedGrantIsAVerifiedSeat() throws Exception {
        try (SeatClient client = pinned("signed").build();
             Lease lease = client.lease("lic", new LeaseOptions("pc-1"))) {
            assertNotNull(lease.token());
            Thread.sleep(2500); // heartbeats every second, each verified
            assertFalse(lease.lost());
        }
    }

    /**
     * no_token (a 201 without a token) and foreign_key (a valid signature by a key not the
     * vendor's, served by that server's /keys): never a seat, and the session the answer
     * named is released at once: one release per refused acquire, within the release timeout.
     */
    @Test
    @ResourceLock("bad-server-call-counts")
    void aGrantWithoutTheVendorsTokenIsReleasedAtOnce() throws Exception {
        for (String scenario : List.of("no_token", "foreign_key")) {
            int acquires = calls(scenario, "acquire"), releases = calls(scenario, "release");
            try (SeatClient client = pinned(scenario).releaseTimeout(Duration.ofSeconds(2)).build()) {
                double started = now();
                SeatException refused = assertThrows(SeatException.TokenException.class, () -> client.acquire("lic", "pc-1"));
                assertTrue(scenario.equals("no_token") ? refused instanceof SeatException.TokenMissing
                        : refused instanceof SeatException.UntrustedKey, refused.toString());
                assertTrue(now() - started < 4, "took " + (now() - started) + " s");
                assertEquals(acquires + 1, calls(scenario, "acquire"), scenario);
                assertEquals(releases + 1, calls(scenario, "release"), scenario + ": the refused seat was not released");
                assertThrows(SeatException.TokenException.class, () -> client.lease("lic", new LeaseOptions("pc-1")));
                assertEquals(releases + 2, calls(scenario, "release"), scenario);
            }
        }
    }

    /** Lease.close() ends by the release timeout (2 s) while the release's answer drips. */
    @Test
    void aDrippedReleaseEndsByTheReleaseTimeout() {
        try (SeatClient client = pinned("drip_release").timeout(Duration.ofSeconds(30))
                .releaseTimeout(Duration.ofSeconds(2)).build()) {
            Lease lease = client.lease("lic", new LeaseOptions("pc-1"));
            assertNotNull(lease.token());
            double started = now();
            assertTimeoutPreemptively(Duration.ofSeconds(15), lease::close);
            double took = now() - started;
            assertTrue(took < 3, "close took " + took + " s");
            assertTrue(lease.released());
        }
    }

    /** The service's own not_found and an empty 404 are HTTP errors naming the URL; license_not_found is LicenseNotFound. */
    @Test
    void a404IsReadByItsCode() {
        for (String scenario : List.of("not_found", "empty_404")) {
            try (SeatClient client = pinned(scenario).build()) {
                SeatException failed = assertThrows(SeatException.class, () -> client.acquire("lic", "pc-1"));
                assertSame(SeatException.class, failed.getClass(), failed.toString());
                assertEquals(404, failed.status());
                assertEquals(scenario.equals("not_found") ? "not_found" : "http_404", failed.code());
                assertTrue(failed.getMessage().contains(badUrl() + "/" + scenario + "/acquire"), failed.getMessage());
            }
        }
        try (SeatClient client = pinned("license_not_found").build()) {
            assertEquals("license_not_found",
                    assertThrows(SeatException.LicenseNotFound.class, () -> client.acquire("lic", "pc-1")).code());
        }
    }

    /** A signed grant whose session_id is null is invalid_response: no seat, nothing to release. */
    @Test
    @ResourceLock("bad-server-call-counts")
    void aNullSessionIsAnInvalidResponse() throws Exception {
        int releases = calls("session_null", "release");
        try (SeatClient client = pinned("session_null").build()) {
            assertEquals("invalid_response",
                    assertThrows(SeatException.InvalidResponse.class, () -> client.acquire("lic", "pc-1")).code());
            assertThrows(SeatException.InvalidResponse.class, () -> client.lease("lic", new LeaseOptions("pc-1")));
        }
        assertEquals(releases, calls("session_null", "release"));
    }

    /** Renewals without counts keep the grant's (1 of 2), not 0 of 0. */
    @Test
    void seatCountsKeepTheirLastKnownValues() throws Exception {
        try (SeatClient client = pinned("heartbeat_no_counts").build();
             Lease lease = client.lease("lic", new LeaseOptions("pc-1"))) {
            assertTrue(lease.seatsUsed() == 1 && lease.seatsTotal() == 2);
            eventually(6, "renewed", () -> !lease.expiresAt().equals(java.time.Instant.EPOCH) && lease.token() != null);
            Thread.sleep(2500); // heartbeats every second
            assertFalse(lease.lost());
            assertEquals(1, lease.seatsUsed());
            assertEquals(2, lease.seatsTotal());
        }
    }

    /** A 307 to another scenario is not followed: an error naming its Location, and no call reaches it. */
    @Test
    @ResourceLock("bad-server-call-counts")
    void aRedirectIsNotFollowed() throws Exception {
        int signed = calls("signed", "acquire");
        try (SeatClient client = pinned("redirect").build()) {
            SeatException failed = assertThrows(SeatException.class, () -> client.acquire("lic", "pc-1"));
            assertTrue(failed.status() == 307 && failed.code().equals("redirected"), failed.toString());
            assertTrue(failed.getMessage().contains("/signed/acquire"), failed.getMessage());
        }
        assertEquals(signed, calls("signed", "acquire"));
    }

    /**
     * keys503once (the review of issue 48): the first JWKS fetch is a 503; the grant is good.
     * The check (the acquire) is retried and the client holds the seat, never released for
     * that failed fetch: the only release is its own, at close.
     */
    @Test
    void aFailedKeyFetchIsRetriedAndNeverReleasesTheSeat() throws Exception {
        resetCalls("keys503once");
        try (SeatClient client = pinned("keys503once").retries(3).build()) {
            Lease lease = client.lease("lic", new LeaseOptions("pc-1"));
            assertNotNull(lease.token());
            assertFalse(lease.lost());
            assertTrue(calls("keys503once", "keys") >= 2, "the JWKS fetched again");
            assertEquals(0, calls("keys503once", "release"), "a seat released for a failed key fetch");
            lease.close();
            assertEquals(1, calls("keys503once", "release"), "one release, the client's own");
        }
    }

    /**
     * A grant's shape (the review of issue 48): lease_seconds 60.5, no lease_expires_at, an
     * empty session_id: each invalid_response, the first two released at once (they name a
     * session), the third not (it names none); null seat counts are absent ones: a seat.
     */
    @Test
    void aGrantsShapeIsCheckedAndNullCountsAreAbsent() throws Exception {
        for (String scenario : List.of("float_lease", "no_expiry", "empty_session")) {
            resetCalls(scenario);
            try (SeatClient client = pinned(scenario).releaseTimeout(Duration.ofSeconds(2)).build()) {
                assertEquals("invalid_response", assertThrows(SeatException.InvalidResponse.class,
                        () -> client.acquire("lic", "pc-1"), scenario).code());
            }
            assertEquals(1, calls(scenario, "acquire"), scenario);
            assertEquals(scenario.equals("empty_session") ? 0 : 1, calls(scenario, "release"), scenario);
        }
        resetCalls("null_counts");
        try (SeatClient client = pinned("null_counts").build();
             Lease lease = client.lease("lic", new LeaseOptions("pc-1"))) {
            assertNotNull(lease.token());
            Thread.sleep(1500); // a renewal (its counts absent) applied
            assertFalse(lease.lost());
        }
        assertEquals(1, calls("null_counts", "release"));
    }

    /**
     * rotated_release (the review of issue 48): the release is signed under a kid the cached
     * JWKS does not list, and the JWKS fetched again for it drips: close() ends by the
     * release timeout, that fetch included.
     */
    @Test
    void aReleasesKeyRefetchEndsByTheReleaseTimeout() throws Exception {
        resetCalls("rotated_release");
        try (SeatClient client = pinned("rotated_release").timeout(Duration.ofSeconds(30))
                .releaseTimeout(Duration.ofSeconds(2)).jwksMinRefetch(Duration.ZERO).build()) {
            Lease lease = client.lease("lic", new LeaseOptions("pc-1"));
            assertNotNull(lease.token());
            double started = now();
            assertTimeoutPreemptively(Duration.ofSeconds(15), lease::close);
            double took = now() - started;
            assertTrue(took < 2.5, "close took " + took + " s");
            assertEquals(1, calls("rotated_release", "release"));
            assertEquals(2, calls("rotated_release", "keys"), "the JWKS fetched again for the release's kid");
        }
    }
}
