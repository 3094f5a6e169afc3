package io.seatlease.client;

import com.google.gson.JsonObject;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * Options of {@link SeatClient#lease} and {@link SeatClient#leaseAsync}. A fluent holder: the
 * lease copies it when it starts, so changing it afterwards changes nothing.
 */
public final class LeaseOptions {
    /** Called on the heartbeat thread: keep it short. It may close the lease. */
    public interface Listener {
        /**
         * The seat is known gone: reason "expired", "unknown", "revoked" (an operator freed the
         * seat: the product can tell its user so), "idle" (the license's idle rule reclaimed
         * it: no seat is asked for again until {@link Lease#touch} or {@link Lease#busy} says
         * the product is in use), "unreachable", or the refusal's code ("license_expired" when
         * the license's term ended its seats).
         */
        default void onLost(Lease lease, String reason) {}
        /** A lost seat was acquired again (a new session). */
        default void onRegained(Lease lease) {}
        /**
         * A heartbeat's answer warned that the license's idle rule reclaims the seat at
         * reclaimAt unless the product is used before ({@link Lease#touch}, {@link Lease#busy}):
         * called once per warning, again only after a warning was cleared.
         */
        default void onIdleWarning(Lease lease, java.time.Instant reclaimAt) {}
    }

    final String clientId;
    JsonObject metadata;
    long leaseSeconds;
    String user;
    String host;
    String requestId;
    String fingerprint;
    int seats;
    List<String> entitlements;
    String version;
    boolean wait;
    Duration waitTimeout = Duration.ZERO;
    Listener listener = new Listener() {};

    /** clientId: this running copy (acquiring again with it returns the same seat). */
    public LeaseOptions(String clientId) { this.clientId = clientId; }

    LeaseOptions copy() {
        LeaseOptions copy = new LeaseOptions(clientId);
        copy.metadata = metadata == null ? null : metadata.deepCopy();
        copy.leaseSeconds = leaseSeconds;
        copy.user = user;
        copy.host = host;
        copy.requestId = requestId;
        copy.fingerprint = fingerprint;
        copy.seats = seats;
        copy.entitlements = entitlements;
        copy.version = version;
        copy.wait = wait;
        copy.waitTimeout = waitTimeout;
        copy.listener = listener;
        return copy;
    }

    /** Facts kept with the lease: a flat map of String, Number and Boolean values (copied). */
    public LeaseOptions metadata(Map<String, ?> value) { metadata = Json.toJsonObject(value); return this; }
    /** The lease's length, whole seconds (not set: the license's default). */
    public LeaseOptions leaseDuration(Duration value) { leaseSeconds = Times.wholeSeconds(value, "leaseDuration"); return this; }
    /** Who asks, sent with every acquire of the lease (a policy may require user). */
    public LeaseOptions user(String value) { user = value; return this; }
    public LeaseOptions host(String value) { host = value; return this; }
    /** The request_id of the first acquire (exactly-once retries of your own). */
    public LeaseOptions requestId(String value) { requestId = value; return this; }
    /** Bind every seat of the lease to this machine ({@link Machine#fingerprint}): cnf.machine. */
    public LeaseOptions fingerprint(String value) { fingerprint = value; return this; }
    /**
     * The lease's weight (see {@link AcquireOptions#seats}), asked for by the first acquire
     * and by every re-acquire after a loss. Not set (0): not sent.
     */
    public LeaseOptions seats(int value) { seats = value; return this; }
    /** What the product needs, sent with every acquire: {@link SeatException.NotEntitled} when the license lacks one. */
    public LeaseOptions entitlements(List<String> value) { entitlements = value == null ? null : List.copyOf(value); return this; }
    /** The product's version, sent with every acquire: {@link SeatException.VersionNotEntitled} above the license's. */
    public LeaseOptions version(String value) { version = value; return this; }
    /**
     * Wait for a seat (in line on a license with a queue) for at most timeout (ZERO: for
     * ever; cancel with {@link SeatClient#leaseAsync}).
     */
    public LeaseOptions waitFor(Duration timeout) {
        if (timeout.isNegative()) {
            throw new IllegalArgumentException("waitFor: a negative timeout");
        }
        wait = true;
        waitTimeout = timeout;
        return this;
    }
    public LeaseOptions listener(Listener value) { listener = value == null ? new Listener() {} : value; return this; }

    /** The acquire of this lease: queue and ticket while waiting in line. */
    AcquireOptions acquire(boolean queue, String ticket, String requestId) {
        AcquireOptions acquire = new AcquireOptions().user(user).host(host).queue(queue).ticket(ticket)
                .requestId(requestId).fingerprint(fingerprint).seats(seats).entitlements(entitlements).version(version);
        acquire.leaseSeconds = leaseSeconds;
        acquire.metadata = metadata;
        return acquire;
    }
}
