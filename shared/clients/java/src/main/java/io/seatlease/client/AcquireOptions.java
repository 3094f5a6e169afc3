package io.seatlease.client;

import com.google.gson.JsonObject;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * The optional fields of a plain acquire ({@link SeatClient#acquire}). A fluent holder: the
 * client copies what it holds when the call is made, so reusing or changing it later has no
 * effect on a call made before.
 */
public final class AcquireOptions {
    long leaseSeconds;
    long borrowSeconds;
    JsonObject metadata;
    String user;
    String host;
    boolean queue;
    String ticket;
    String requestId;
    String fingerprint;
    int seats;
    List<String> entitlements;
    String version;

    public AcquireOptions() {}

    AcquireOptions copy() {
        AcquireOptions copy = new AcquireOptions();
        copy.leaseSeconds = leaseSeconds;
        copy.borrowSeconds = borrowSeconds;
        copy.metadata = metadata == null ? null : metadata.deepCopy();
        copy.user = user;
        copy.host = host;
        copy.queue = queue;
        copy.ticket = ticket;
        copy.requestId = requestId;
        copy.fingerprint = fingerprint;
        copy.seats = seats;
        copy.entitlements = entitlements;
        copy.version = version;
        return copy;
    }

    /** The lease's length, whole seconds (not set: the license's default). */
    public AcquireOptions leaseDuration(Duration value) { leaseSeconds = Times.wholeSeconds(value, "leaseDuration"); return this; }
    /** Borrow the seat for that long, whole seconds (no heartbeats until it ends). */
    public AcquireOptions borrowDuration(Duration value) { borrowSeconds = Times.wholeSeconds(value, "borrowDuration"); return this; }
    /** Facts kept with the lease: a flat map of String, Number and Boolean values (copied). */
    public AcquireOptions metadata(Map<String, ?> value) { metadata = Json.toJsonObject(value); return this; }
    /** Who asks (a policy may require user). */
    public AcquireOptions user(String value) { user = value; return this; }
    public AcquireOptions host(String value) { host = value; return this; }
    /** On a full license with a wait queue: a place in line (a 202 answer). */
    public AcquireOptions queue(boolean value) { queue = value; return this; }
    public AcquireOptions ticket(String value) { ticket = value; return this; }
    /** The id of an acquire you retry yourself: the server answers it exactly once. */
    public AcquireOptions requestId(String value) { requestId = value; return this; }
    /** Bind the seat to this machine ({@link Machine#fingerprint}): the token's cnf.machine. */
    public AcquireOptions fingerprint(String value) { fingerprint = value; return this; }
    /**
     * The lease's weight: it counts as that many of the license's seats (at most its
     * seats). Not set (0): not sent, 1 for a new lease, a renewal keeps the held lease's;
     * another weight than a held lease's is a {@link SeatException.SeatsMismatch}.
     */
    public AcquireOptions seats(int value) { seats = value; return this; }
    /** What the product needs: each must be one of the license's, else {@link SeatException.NotEntitled}. */
    public AcquireOptions entitlements(List<String> value) { entitlements = value == null ? null : List.copyOf(value); return this; }
    /** The product's version ("2026.4"): above the license's max_version is {@link SeatException.VersionNotEntitled}. */
    public AcquireOptions version(String value) { version = value; return this; }

    /** The acquire's JSON body. */
    JsonObject body(String licenseId, String clientId) {
        if (licenseId == null || clientId == null) {
            throw new IllegalArgumentException("licenseId and clientId are required");
        }
        JsonObject body = new JsonObject();
        body.addProperty("license_id", licenseId);
        body.addProperty("client_id", clientId);
        if (leaseSeconds > 0) body.addProperty("lease_seconds", leaseSeconds);
        if (borrowSeconds > 0) body.addProperty("borrow_seconds", borrowSeconds);
        if (metadata != null) body.add("metadata", metadata.deepCopy());
        if (user != null) body.addProperty("user", user);
        if (host != null) body.addProperty("host", host);
        if (queue) body.addProperty("queue", true);
        if (ticket != null) body.addProperty("ticket", ticket);
        if (requestId != null) body.addProperty("request_id", requestId);
        if (fingerprint != null) body.addProperty("fingerprint", fingerprint);
        if (seats > 0) body.addProperty("seats", seats);
        if (entitlements != null) body.add("entitlements", Json.strings(entitlements));
        if (version != null) body.addProperty("version", version);
        return body;
    }
}
