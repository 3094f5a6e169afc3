package io.seatlease.client;

import com.google.gson.JsonObject;
import java.time.Duration;

/** Options of {@link SeatClient#lease}. */
public final class LeaseOptions {
    /** Called on the heartbeat thread: keep it short. It may close the lease. */
    public interface Listener {
        /** The seat is known gone: reason "expired", "unknown", "unreachable", or the refusal's code. */
        default void onLost(Lease lease, String reason) {}
        /** A lost seat was acquired again (a new session). */
        default void onRegained(Lease lease) {}
    }

    final String clientId;
    JsonObject metadata;
    int leaseSeconds;
    String user;
    String host;
    String requestId;
    String fingerprint;
    int seats;
    boolean wait;
    Duration waitTimeout = Duration.ZERO;
    Listener listener = new Listener() {};

    /** clientId: this running copy (acquiring again with it returns the same seat). */
    public LeaseOptions(String clientId) { this.clientId = clientId; }

    public LeaseOptions metadata(JsonObject value) { metadata = value == null ? null : value.deepCopy(); return this; }
    public LeaseOptions leaseSeconds(int value) { leaseSeconds = value; return this; }
    /** Who asks, sent with every acquire of the lease (a policy may require user). */
    public LeaseOptions user(String value) { user = value; return this; }
    public LeaseOptions host(String value) { host = value; return this; }
    /** The request_id of the first acquire (exactly-once retries of your own). */
    public LeaseOptions requestId(String value) { requestId = value; return this; }
    /** Bind every seat of the lease to this machine ({@link Machine#fingerprint}): cnf.machine. */
    public LeaseOptions fingerprint(String value) { fingerprint = value; return this; }
    /**
     * The lease's weight (see {@link SeatClient.AcquireOptions#seats}), asked for by the first
     * acquire and by every re-acquire after a loss. Not set (0): not sent.
     */
    public LeaseOptions seats(int value) { seats = value; return this; }
    /** Wait for a seat (in line on a license with a queue) for at most timeout (ZERO: for ever). */
    public LeaseOptions waitFor(Duration timeout) { wait = true; waitTimeout = timeout; return this; }
    public LeaseOptions listener(Listener value) { listener = value; return this; }
}
