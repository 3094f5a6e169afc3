package io.seatlease.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * A decoded 2xx answer of acquire, heartbeat or release, immutable; {@link #raw()} is the
 * whole JSON object as plain Java values.
 */
public final class Answer {
    private final JsonObject raw;
    private final int status;

    Answer(JsonObject raw, int status) {
        this.raw = raw.deepCopy();
        this.status = status;
    }

    public int status() { return status; }
    public String sessionId() { return Json.string(raw, "session_id"); }
    /** The license's seats in use; 0 when the answer does not say (a renewal: see {@link Lease#seatsUsed()}). */
    public int seatsUsed() { return Json.integer(raw, "seats_used", 0); }
    /** The license's seats; 0 when the answer does not say. */
    public int seatsTotal() { return Json.integer(raw, "seats_total", 0); }
    /** The lease's (or a place in line's) weight: how many of the license's seats it counts as (1 when the answer does not say). */
    public int seats() { return Math.max(1, Json.integer(raw, "seats", 1)); }
    /** The lease's length (a borrow's, for a borrowed seat); zero when the answer has none. */
    public Duration leaseDuration() { return Duration.ofSeconds(Json.integer(raw, "lease_seconds", 0)); }
    public Duration heartbeatInterval() { return Duration.ofSeconds(Json.integer(raw, "heartbeat_interval_seconds", 0)); }
    /** The server's deadline of the lease; empty for a place in line or a release. */
    public Optional<Instant> expiresAt() { return Optional.ofNullable(Times.parse(Json.string(raw, "lease_expires_at"))); }
    public boolean released() { return Json.isTrue(raw, "released"); }
    public boolean borrowed() { return Json.isTrue(raw, "borrowed"); }
    public boolean overage() { return Json.isTrue(raw, "overage"); }
    /** A place in the wait queue (202, with queue): no seat yet; come back with ticket(). */
    public boolean queued() { return Json.isTrue(raw, "queued"); }
    public int position() { return Json.integer(raw, "position", 0); }
    public String ticket() { return Json.string(raw, "ticket"); }
    /** When to come back to keep a place in line (202); zero when the answer does not say. */
    public Duration retryAfter() { return Duration.ofSeconds(Math.max(0, Json.integer(raw, "retry_after_seconds", 0))); }
    /** The license's entitlements (the token's ent); empty when the answer has none. */
    public List<String> entitlements() {
        JsonElement value = raw.get("entitlements");
        List<String> names = new ArrayList<>();
        if (value != null && value.isJsonArray()) {
            for (JsonElement item : value.getAsJsonArray()) {
                if (item.isJsonPrimitive() && item.getAsJsonPrimitive().isString()) {
                    names.add(item.getAsString());
                }
            }
        }
        return List.copyOf(names);
    }
    /** Whether the answer lists the license's entitlements at all (a license without any: no). */
    boolean hasEntitlements() { return raw.has("entitlements") && raw.get("entitlements").isJsonArray(); }
    /** The license's end; empty when it has none. */
    public Optional<Instant> licenseExpiresAt() { return Optional.ofNullable(Times.parse(Json.string(raw, "license_expires_at"))); }
    /** The license's end plus its grace (the token's lexp); empty when it has no end. */
    public Optional<Instant> licenseGraceEndsAt() { return Optional.ofNullable(Times.parse(Json.string(raw, "license_grace_ends_at"))); }
    /** Past the license's end, within its grace. */
    public boolean inGrace() { return Json.isTrue(raw, "in_grace"); }
    /** The highest product version the license covers (the token's maxv); empty when none. */
    public Optional<String> maxVersion() { return Optional.ofNullable(Json.string(raw, "max_version")); }
    /**
     * A heartbeat's idle warning: the license's idle rule reclaims the seat then unless the
     * product reports activity or busy work first; empty: no warning.
     */
    public Optional<Instant> idleReclaimAt() { return Optional.ofNullable(Times.parse(Json.string(raw, "idle_reclaim_at"))); }
    /** On a license that shares seats: the sessions sharing this lease's seat, itself included (0: not shared). */
    public int sharedSessions() { return Json.integer(raw, "shared_sessions", 0); }
    /** The lease_token (acquire, heartbeat) or release_token (release); null when none. */
    public String token() {
        String token = Json.string(raw, "lease_token");
        return token != null ? token : Json.string(raw, "release_token");
    }
    /** The whole answer as plain, unmodifiable Java values (String, Long, Double, Boolean, List, Map). */
    public Map<String, Object> raw() { return Json.toMap(raw); }

    JsonObject json() { return raw; }

    /** Whether the answer carries that field as a number (a renewal may omit the counts). */
    boolean hasNumber(String name) { return Json.isNumber(raw.get(name)); }

    @Override
    public String toString() { return "Answer(" + status + ", " + Json.write(raw) + ")"; }
}
