package io.seatlease.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.time.Duration;
import java.util.Map;

/**
 * Every error of the client: the HTTP status (0 when no answer came back), the server's
 * machine code and its message; {@link #body()} is the answer's {@code error} object (plain
 * Java values). The
 * nested classes are the kinds ({@code catch (SeatException.NoSeatsAvailable e)}); a
 * {@link SeatWaitTimeout} and a {@link UserLimitReached} are also a {@link NoSeatsAvailable},
 * a {@link UserDenied}, {@link LicenseNotStarted}, {@link LicenseExpired}, {@link NotEntitled}
 * and {@link VersionNotEntitled} are also a {@link LicenseSuspended}, every token failure is a {@link
 * TokenException}. The kind is read from the server's error.code. Any other answer (a 500,
 * a redirect, a 404 that is not license_not_found) is a plain SeatException naming the URL,
 * not retried.
 * The API key never appears in a message.
 */
public class SeatException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final int status;
    private final String code;
    private final transient JsonObject body;
    private final double retryAfterHeader;

    SeatException(int status, String code, String message, JsonObject body, double retryAfterHeader) {
        super(message);
        this.status = status;
        this.code = code;
        this.body = body == null ? new JsonObject() : body;
        this.retryAfterHeader = retryAfterHeader;
    }

    public SeatException(int status, String code, String message) {
        this(status, code, message, null, -1);
    }

    /** The HTTP status; 0 when no answer came back. */
    public int status() { return status; }
    /** The server's machine code ("no_seats_available", "network_error", "token_expired"). */
    public String code() { return code; }
    /**
     * The answer's "error" object as plain, unmodifiable Java values (String, Long, Double,
     * Boolean, List, Map); empty when the answer had none.
     */
    public Map<String, Object> body() { return Json.toMap(body); }

    int intField(String name, int fallback) {
        JsonElement value = body.get(name);
        if (value != null && value.isJsonPrimitive() && value.getAsJsonPrimitive().isNumber()) {
            double number = value.getAsDouble();
            if (number == Math.rint(number) && Math.abs(number) < Integer.MAX_VALUE) {
                return (int) number;
            }
        }
        return fallback;
    }

    /** A denial's seats in use and in all (409); -1 when absent. */
    public int seatsUsed() { return intField("seats_used", -1); }
    public int seatsTotal() { return intField("seats_total", -1); }
    /** The weight a denial asked for (seats_requested): 1 for a plain request. */
    public int seatsRequested() { return intField("seats_requested", 1); }

    /** When a seat may come free (409): the answer's retry_after_seconds, at least a second. */
    public Duration retryAfter() {
        int header = retryAfterHeader > 0 ? (int) retryAfterHeader : 1;
        int seconds = intField("retry_after_seconds", header);
        return Duration.ofSeconds(Math.max(seconds, 1));
    }

    /** A 503's hint in seconds (body, then header), -1 without one. */
    double backendRetryAfter() {
        JsonElement value = body.get("retry_after_seconds");
        if (value != null && value.isJsonPrimitive() && value.getAsJsonPrimitive().isNumber()
                && value.getAsDouble() >= 0 && value.getAsDouble() < 86400) {
            return value.getAsDouble(); // a hint beyond a day is no hint
        }
        return retryAfterHeader;
    }

    double retryAfterHeader() { return retryAfterHeader; }

    JsonObject bodyJson() { return body; }

    @Override
    public String toString() {
        return getClass().getSimpleName() + ": " + (status != 0 ? status + " " : "") + code + ": " + getMessage();
    }

    /** 400: a bad identifier, a lease or borrow longer than the license allows. */
    public static class InvalidRequest extends SeatException {
        private static final long serialVersionUID = 1L;
        InvalidRequest(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** 401: API key missing, unknown or revoked. */
    public static class Unauthenticated extends SeatException {
        private static final long serialVersionUID = 1L;
        Unauthenticated(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** 403: the license is suspended. */
    public static class LicenseSuspended extends SeatException {
        private static final long serialVersionUID = 1L;
        LicenseSuspended(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** 403 user_denied: the license's policy refuses this user any seat. */
    public static class UserDenied extends LicenseSuspended {
        private static final long serialVersionUID = 1L;
        UserDenied(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** 403 license_not_started: the license's term has not begun. */
    public static class LicenseNotStarted extends LicenseSuspended {
        private static final long serialVersionUID = 1L;
        LicenseNotStarted(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** 403 license_expired: the license's term (and its grace) has ended. */
    public static class LicenseExpired extends LicenseSuspended {
        private static final long serialVersionUID = 1L;
        LicenseExpired(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** 403 not_entitled: the license lacks an entitlement asked for. */
    public static class NotEntitled extends LicenseSuspended {
        private static final long serialVersionUID = 1L;
        NotEntitled(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** 403 version_not_entitled: the product version is beyond the license's max_version. */
    public static class VersionNotEntitled extends LicenseSuspended {
        private static final long serialVersionUID = 1L;
        VersionNotEntitled(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /**
     * 404 license_not_found: no such license for this key's tenant. Only that code: another
     * 404 (a wrong base URL) is a plain SeatException naming the URL.
     */
    public static class LicenseNotFound extends SeatException {
        private static final long serialVersionUID = 1L;
        LicenseNotFound(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** 409: every seat (plus any overage) is in use. */
    public static class NoSeatsAvailable extends SeatException {
        private static final long serialVersionUID = 1L;
        NoSeatsAvailable(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** 409 user_limit_reached: the user holds the license's max_per_user leases. */
    public static class UserLimitReached extends NoSeatsAvailable {
        private static final long serialVersionUID = 1L;
        UserLimitReached(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
        public int maxPerUser() { return intField("max_per_user", -1); }
        public int sessions() { return intField("sessions", -1); }
    }

    /** 409 queue_full: no seat, and the license's wait queue already holds queue_max clients. */
    public static class QueueFull extends NoSeatsAvailable {
        private static final long serialVersionUID = 1L;
        QueueFull(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
        public int queueMax() { return intField("queue_max", -1); }
    }

    /**
     * 409 seats_mismatch: this client holds a live lease of heldSeats() seats and asked for
     * seats(). Not a NoSeatsAvailable: waiting does not cure it; release the lease to take the
     * other weight, or renew without seats.
     */
    public static class SeatsMismatch extends SeatException {
        private static final long serialVersionUID = 1L;
        SeatsMismatch(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
        public int heldSeats() { return intField("held_seats", -1); }
        public int seats() { return intField("seats", -1); }
    }

    /**
     * 409 machine_mismatch: this client's seat was borrowed for another machine (its token's
     * cnf.machine), which keeps it until it is returned or the borrow ends. Not a
     * NoSeatsAvailable: waiting on this machine does not cure it.
     */
    public static class MachineMismatch extends SeatException {
        private static final long serialVersionUID = 1L;
        MachineMismatch(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** Waiting, and no seat came free in time. */
    public static class SeatWaitTimeout extends NoSeatsAvailable {
        private static final long serialVersionUID = 1L;
        SeatWaitTimeout(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /**
     * 410: the session holds no seat. {@link #reason()}: "expired" (the heartbeat came after
     * the deadline), "unknown" (no such session: released, reclaimed, or lost with the
     * server's data) or "revoked" (an operator freed the seat: seatlease revoke, the portal's
     * "Free seat"; the product can tell its user so).
     */
    public static class SessionExpired extends SeatException {
        private static final long serialVersionUID = 1L;
        SessionExpired(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
        public String reason() {
            JsonElement reason = bodyJson().get("reason");
            return reason != null && reason.isJsonPrimitive() ? reason.getAsString() : "unknown";
        }
    }

    /**
     * The call was cancelled: its thread interrupted, or the client closed. A seat it may
     * have taken meanwhile is given back.
     */
    public static class Cancelled extends SeatException {
        private static final long serialVersionUID = 1L;
        Cancelled(String m) { super(0, "cancelled", m, null, -1); }
    }

    /**
     * Unreachable (status 0, code network_error: refused, reset, or no whole answer within
     * the timeout), or 503/429/502/504 through every retry.
     */
    public static class BackendUnavailable extends SeatException {
        private static final long serialVersionUID = 1L;
        BackendUnavailable(int s, String c, String m, JsonObject b, double r) { super(s, c, m, b, r); }
    }

    /** A 2xx that is not the expected JSON (truncated, wrong types, too big). */
    public static class InvalidResponse extends SeatException {
        private static final long serialVersionUID = 1L;
        InvalidResponse(int s, String m) { super(s, "invalid_response", m, null, -1); }
    }

    /** The answer's signed token failed verification: the answer never counts. */
    public static class TokenException extends SeatException {
        private static final long serialVersionUID = 1L;
        TokenException(int s, String c, String m) { super(s, c, m, null, -1); }
    }

    public static class TokenMissing extends TokenException {
        private static final long serialVersionUID = 1L;
        TokenMissing(int s, String m) { super(s, "token_missing", m); }
    }

    public static class MalformedToken extends TokenException {
        private static final long serialVersionUID = 1L;
        MalformedToken(int s, String m) { super(s, "token_malformed", m); }
    }

    public static class UnknownKeyId extends TokenException {
        private static final long serialVersionUID = 1L;
        UnknownKeyId(int s, String m) { super(s, "token_unknown_kid", m); }
    }

    public static class UntrustedKey extends TokenException {
        private static final long serialVersionUID = 1L;
        UntrustedKey(int s, String m) { super(s, "token_untrusted_key", m); }
    }

    public static class BadSignature extends TokenException {
        private static final long serialVersionUID = 1L;
        BadSignature(int s, String m) { super(s, "token_bad_signature", m); }
    }

    public static class WrongAudience extends TokenException {
        private static final long serialVersionUID = 1L;
        WrongAudience(int s, String m) { super(s, "token_wrong_audience", m); }
    }

    public static class TokenExpired extends TokenException {
        private static final long serialVersionUID = 1L;
        TokenExpired(int s, String m) { super(s, "token_expired", m); }
    }

    public static class TokenReplayed extends TokenException {
        private static final long serialVersionUID = 1L;
        TokenReplayed(int s, String m) { super(s, "token_replayed", m); }
    }

    public static class TokenMismatch extends TokenException {
        private static final long serialVersionUID = 1L;
        TokenMismatch(int s, String m) { super(s, "token_mismatch", m); }
    }

    /** A borrowed token taken for another machine (or none): its cnf.machine is not this one's. */
    public static class TokenWrongMachine extends TokenException {
        private static final long serialVersionUID = 1L;
        TokenWrongMachine(int s, String m) { super(s, "token_wrong_machine", m); }
    }

    /**
     * The typed error of an HTTP error answer from where, read by the server's error.code
     * (the status decides only when the answer has no code this client knows): a 404 is a
     * {@link LicenseNotFound} only for the code license_not_found; any other 404 (the
     * service's not_found for a wrong base URL, a middlebox's empty 404) is a plain
     * SeatException (code: the server's, else "http_404") whose message names the URL. A
     * redirect is never followed: a plain SeatException (code "redirected") naming where it
     * pointed.
     */
    static SeatException fromAnswer(java.net.URI where, int status, JsonObject payload, double retryAfterHeader,
                                    String location) {
        JsonObject body = null;
        if (payload != null && payload.get("error") != null && payload.get("error").isJsonObject()) {
            body = payload.getAsJsonObject("error");
        }
        String code = Json.string(body, "code");
        boolean backend = status == 429 || status == 502 || status == 503 || status == 504;
        boolean coded = code != null && !code.isEmpty();
        if (!coded) {
            code = backend ? "backend_unavailable" : "http_" + status;
        }
        String message = Json.string(body, "message");
        if (message == null || message.isEmpty()) {
            message = "HTTP " + status;
        }
        if (status >= 300 && status < 400) {
            return new SeatException(status, "redirected", where + " answered a redirect (" + status + ") to "
                    + (location == null ? "(no Location)" : location)
                    + ": not followed (the API key stays with the base URL); use the final URL as the base URL.",
                    body, retryAfterHeader);
        }
        double r = retryAfterHeader;
        if (coded) {
            switch (code) {
                case "invalid_request": return new InvalidRequest(status, code, message, body, r);
                case "unauthenticated": return new Unauthenticated(status, code, message, body, r);
                case "license_suspended": return new LicenseSuspended(status, code, message, body, r);
                case "user_denied": return new UserDenied(status, code, message, body, r);
                case "license_not_started": return new LicenseNotStarted(status, code, message, body, r);
                case "license_expired": return new LicenseExpired(status, code, message, body, r);
                case "not_entitled": return new NotEntitled(status, code, message, body, r);
                case "version_not_entitled": return new VersionNotEntitled(status, code, message, body, r);
                case "license_not_found": return new LicenseNotFound(status, code, message, body, r);
                case "no_seats_available": return new NoSeatsAvailable(status, code, message, body, r);
                case "user_limit_reached": return new UserLimitReached(status, code, message, body, r);
                case "queue_full": return new QueueFull(status, code, message, body, r);
                case "seats_mismatch": return new SeatsMismatch(status, code, message, body, r);
                case "machine_mismatch": return new MachineMismatch(status, code, message, body, r);
                case "session_expired": return new SessionExpired(status, code, message, body, r);
                case "backend_unavailable": return new BackendUnavailable(status, code, message, body, r);
                default: break;
            }
        }
        // A code this client does not know (or none): the status's kind, but for a 404.
        switch (status) {
            case 400: return new InvalidRequest(status, code, message, body, r);
            case 401: return new Unauthenticated(status, code, message, body, r);
            case 403: return new LicenseSuspended(status, code, message, body, r);
            case 409: return new NoSeatsAvailable(status, code, message, body, r);
            case 410: return new SessionExpired(status, code, message, body, r);
            default:
                if (backend) {
                    return new BackendUnavailable(status, code, message, body, r);
                }
                return new SeatException(status, code, where + " answered " + status + " (" + code + "): " + message,
                        body, r);
        }
    }
}
