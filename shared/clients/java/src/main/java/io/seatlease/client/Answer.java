package io.seatlease.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.util.ArrayList;
import java.util.List;

/** A decoded 2xx answer of acquire, heartbeat or release; {@link #raw()} is the whole JSON. */
public final class Answer {
    private final JsonObject raw;
    private final int status;

    Answer(JsonObject raw, int status) {
        this.raw = raw;
        this.status = status;
    }

    public int status() { return status; }
    public String sessionId() { return Json.string(raw, "session_id"); }
    public int seatsUsed() { return Json.integer(raw, "seats_used", 0); }
    public int seatsTotal() { return Json.integer(raw, "seats_total", 0); }
    /** The lease's (or a place in line's) weight: how many of the license's seats it counts as (1 when the answer does not say). */
    public int seats() { return Math.max(1, Json.integer(raw, "seats", 1)); }
    public int leaseSeconds() { return Json.integer(raw, "lease_seconds", 0); }
    public int heartbeatIntervalSeconds() { return Json.integer(raw, "heartbeat_interval_seconds", 0); }
    /** The server's deadline, Unix seconds (0 when absent). */
    public double expiresAt() {
        Double at = Times.parse(Json.string(raw, "lease_expires_at"));
        return at == null ? 0 : at;
    }
    public boolean released() { return Json.isTrue(raw, "released"); }
    public boolean borrowed() { return Json.isTrue(raw, "borrowed"); }
    public boolean overage() { return Json.isTrue(raw, "overage"); }
    /** A place in the wait queue (202, with queue): no seat yet; come back with ticket(). */
    public boolean queued() { return Json.isTrue(raw, "queued"); }
    public int position() { return Json.integer(raw, "position", 0); }
    public String ticket() { return Json.string(raw, "ticket"); }
    public int retryAfterSeconds() { return Json.integer(raw, "retry_after_seconds", 0); }
    /** The license's entitlements (the token's ent); null when the answer has none. */
    public List<String> entitlements() {
        JsonElement value = raw.get("entitlements");
        if (value == null || !value.isJsonArray()) {
            return null;
        }
        List<String> names = new ArrayList<>();
        for (JsonElement item : value.getAsJsonArray()) {
            if (item.isJsonPrimitive() && item.getAsJsonPrimitive().isString()) {
                names.add(item.getAsString());
            }
        }
        return List.copyOf(names);
    }
    /** The license's end, Unix seconds (0 when it has none). */
    public double licenseExpiresAt() {
        Double at = Times.parse(Json.string(raw, "license_expires_at"));
        return at == null ? 0 : at;
    }
    /** The license's end plus its grace (the token's lexp), Unix seconds (0 when none). */
    public double licenseGraceEndsAt() {
        Double at = Times.parse(Json.string(raw, "license_grace_ends_at"));
        return at == null ? 0 : at;
    }
    /** Past the license's end, within its grace. */
    public boolean inGrace() { return Json.isTrue(raw, "in_grace"); }
    /** The highest product version the license covers (the token's maxv); null when none. */
    public String maxVersion() { return Json.string(raw, "max_version"); }
    /** The lease_token (acquire, heartbeat) or release_token (release); null when none. */
    public String token() {
        String token = Json.string(raw, "lease_token");
        return token != null ? token : Json.string(raw, "release_token");
    }
    public JsonObject raw() { return raw.deepCopy(); }

    @Override
    public String toString() { return "Answer(" + status + ", " + Json.write(raw) + ")"; }
}
