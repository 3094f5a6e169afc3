package io.seatlease.client;

import com.google.gson.JsonObject;
import java.io.IOException;
import java.io.InputStream;
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.BiConsumer;

/**
 * The seatlease client for Java 17: hold a seat ({@link #lease}: acquire, heartbeats on a
 * daemon thread at the server's interval, a new seat asked for at once when the old one is
 * lost, release on close), plain calls, typed errors ({@link SeatException} and its nested
 * kinds) and verification of every signed answer (the JDK's Ed25519). {@code java.net.http}
 * and Gson only. Thread-safe: share one.
 */
public final class SeatClient {
    public static final String VERSION = "0.1.0";
    static final int MAX_BODY = 1 << 20;
    private static final SecureRandom RANDOM = new SecureRandom();

    /** Client options (the defaults of the other clients). */
    public static final class Options {
        Duration timeout = Duration.ofSeconds(10);
        int retries = 5;
        Duration backoff = Duration.ofMillis(500);
        Duration maxBackoff = Duration.ofSeconds(30);
        Duration maxWaitPoll = Duration.ofSeconds(30);
        Duration releaseTimeout = Duration.ofSeconds(5);
        boolean verify;
        List<String> pinnedKeys = List.of();
        String tenantId;
        double tokenLeewaySeconds = 60;
        String jwksUrl;
        BiConsumer<String, String> logger;

        /** Per HTTP request (10 s). */
        public Options timeout(Duration value) { timeout = value; return this; }
        /** Extra attempts after a network error or a 503/429/502/504 (5; 0: none). */
        public Options retries(int value) { retries = Math.max(0, value); return this; }
        /** First pause between attempts, doubling with jitter (500 ms). */
        public Options backoff(Duration value) { backoff = value; return this; }
        public Options maxBackoff(Duration value) { maxBackoff = value; return this; }
        /** Longest pause between acquires while waiting for a seat (30 s). */
        public Options maxWaitPoll(Duration value) { maxWaitPoll = value; return this; }
        /** Time budget of a lease's release (5 s). */
        public Options releaseTimeout(Duration value) { releaseTimeout = value; return this; }
        /** Verify every answer's signed token. */
        public Options verify(boolean value) { verify = value; return this; }
        /** The vendor's Ed25519 keys (a JWK's "x", a JWK as JSON, or PEM); turns verify on. */
        public Options pinnedKeys(List<String> value) { pinnedKeys = List.copyOf(value); return this; }
        /** The tenant the tokens' aud must name (else any tenant with this license). */
        public Options tenantId(String value) { tenantId = value; return this; }
        /** Clock slack on the tokens' exp, nbf, iat (60 s). */
        public Options tokenLeewaySeconds(double value) { tokenLeewaySeconds = value; return this; }
        /** Where the JWKS is fetched (default base URL + "/keys"). */
        public Options jwksUrl(String value) { jwksUrl = value; return this; }
        /** (level, message): retries at "info", losses and regains at "warning". Never the key. */
        public Options logger(BiConsumer<String, String> value) { logger = value; return this; }
    }

    /** The optional fields of an acquire. */
    public static final class AcquireOptions {
        int leaseSeconds;
        int borrowSeconds;
        JsonObject metadata;
        String user;
        String host;
        boolean queue;
        String ticket;
        String requestId;
        String fingerprint;
        int seats;

        public AcquireOptions leaseSeconds(int value) { leaseSeconds = value; return this; }
        /** Borrow the seat for that long (no heartbeats until it ends). */
        public AcquireOptions borrowSeconds(int value) { borrowSeconds = value; return this; }
        public AcquireOptions metadata(JsonObject value) { metadata = value == null ? null : value.deepCopy(); return this; }
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
    }

    private final String baseUrl;
    private final String apiKey;
    final Options options;
    private final HttpClient http;
    final TokenVerifier verifier;

    public SeatClient(String baseUrl, String apiKey) {
        this(baseUrl, apiKey, new Options());
    }

    public SeatClient(String baseUrl, String apiKey, Options options) {
        URI parsed;
        try {
            parsed = URI.create(baseUrl);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("baseUrl must be an http:// or https:// URL");
        }
        if (parsed.getScheme() == null || !(parsed.getScheme().equals("http") || parsed.getScheme().equals("https"))
                || parsed.getHost() == null) {
            throw new IllegalArgumentException("baseUrl must be an http:// or https:// URL");
        }
        this.baseUrl = baseUrl.replaceAll("/+$", "");
        this.apiKey = apiKey;
        this.options = options;
        String host = parsed.getHost();
        boolean loopback = host.equals("localhost") || host.startsWith("127.") || host.equals("[::1]");
        HttpClient.Builder builder = HttpClient.newBuilder()
                .followRedirects(HttpClient.Redirect.NEVER) // the API key never reaches another host
                .connectTimeout(options.timeout);
        if (!loopback) {
            builder.proxy(ProxySelector.getDefault());
        }
        this.http = builder.build();
        String jwksUrl = options.jwksUrl != null ? options.jwksUrl : this.baseUrl + "/keys";
        if (options.verify || !options.pinnedKeys.isEmpty()) {
            verifier = new TokenVerifier(() -> fetchJwks(jwksUrl), options.pinnedKeys, options.tenantId,
                    options.tokenLeewaySeconds, null);
        } else {
            verifier = null;
        }
    }

    /** Never shows the API key. */
    @Override
    public String toString() { return "SeatClient(" + baseUrl + ", apiKey=<hidden>)"; }

    public String baseUrl() { return baseUrl; }

    void log(String level, String message) {
        if (options.logger != null) {
            options.logger.accept(level, message);
        }
    }

    // -- HTTP -------------------------------------------------------------------------------

    private record Exchange(int status, String body, double retryAfter) {}

    private Exchange exchange(HttpRequest request) {
        try {
            HttpResponse<InputStream> response = http.send(request, HttpResponse.BodyHandlers.ofInputStream());
            byte[] body;
            try (InputStream stream = response.body()) {
                body = stream.readNBytes(MAX_BODY + 1);
            }
            if (body.length > MAX_BODY) {
                throw new SeatException.InvalidResponse(response.statusCode(),
                        request.uri() + " answered more than " + MAX_BODY + " bytes.");
            }
            double retryAfter = -1;
            Optional<String> header = response.headers().firstValue("Retry-After");
            if (header.isPresent()) {
                try {
                    double seconds = Double.parseDouble(header.get().trim());
                    if (seconds >= 0 && seconds < 86400) {
                        retryAfter = seconds;
                    }
                } catch (NumberFormatException e) {
                    // an HTTP date from a proxy is ignored
                }
            }
            return new Exchange(response.statusCode(), new String(body, StandardCharsets.UTF_8), retryAfter);
        } catch (IOException e) {
            throw new SeatException.BackendUnavailable(0, "network_error", request.uri() + ": " + e, null, -1);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new SeatException(0, "cancelled", "The call was interrupted.");
        }
    }

    private static JsonObject decode(String where, Exchange exchange) {
        JsonObject payload = Json.parseObject(exchange.body);
        if (exchange.status >= 300 || exchange.status < 200) {
            throw SeatException.fromAnswer(exchange.status, payload, exchange.retryAfter);
        }
        if (payload == null) {
            throw new SeatException.InvalidResponse(exchange.status, where + " answered something that is not a JSON object.");
        }
        return payload;
    }

    private String fetchJwks(String url) {
        HttpRequest request = HttpRequest.newBuilder(URI.create(url)).timeout(options.timeout)
                .header("Accept", "application/json").header("User-Agent", "seatlease-java/" + VERSION).GET().build();
        Exchange answer = exchange(request);
        decode(url, answer);
        return answer.body;
    }

    /** The shape of a 2xx: wrong types are an InvalidResponse, never a failure later. */
    private static void checkShape(String fn, JsonObject reply, int status) {
        if (status == 202) {
            if (Json.string(reply, "ticket") == null) {
                throw new SeatException.InvalidResponse(status, "The " + fn + " answer (202) has no ticket.");
            }
            return;
        }
        for (String name : new String[] {"seats_used", "seats_total", "lease_seconds", "heartbeat_interval_seconds"}) {
            if (reply.get(name) != null && !Json.isNumber(reply.get(name))) {
                throw new SeatException.InvalidResponse(status, "The " + fn + " answer's " + name + " is not a number.");
            }
        }
        if (fn.equals("release")) {
            if (reply.get("released") == null || !reply.get("released").isJsonPrimitive()
                    || !reply.get("released").getAsJsonPrimitive().isBoolean()) {
                throw new SeatException.InvalidResponse(status, "The release answer has no released flag.");
            }
            return;
        }
        if (Json.string(reply, "session_id") == null || Times.parse(Json.string(reply, "lease_expires_at")) == null) {
            throw new SeatException.InvalidResponse(status, "The " + fn + " answer has no session_id or lease_expires_at.");
        }
    }

    private Answer send(String fn, JsonObject body, Duration timeout) {
        String where = baseUrl + "/" + fn;
        HttpRequest request = HttpRequest.newBuilder(URI.create(where)).timeout(timeout)
                .header("Content-Type", "application/json").header("Accept", "application/json")
                .header("Authorization", "Bearer " + apiKey).header("User-Agent", "seatlease-java/" + VERSION)
                .POST(HttpRequest.BodyPublishers.ofString(Json.write(body))).build();
        Exchange answer = exchange(request);
        JsonObject reply = decode(where, answer);
        checkShape(fn, reply, answer.status);
        // A place in the wait queue (202) grants nothing: it carries no token to check.
        if (verifier != null && answer.status != 202) {
            verifier.check(fn, body, reply, answer.status);
        }
        return new Answer(reply, answer.status);
    }

    double backoffDelay(int attempt, double retryAfter, double ceiling) {
        double delay = Math.min(ceiling, seconds(options.backoff) * Math.pow(2, Math.max(0, Math.min(attempt, 60))));
        delay = uniform(delay / 2, delay);
        return Math.max(delay, retryAfter);
    }

    double waitPause(SeatException denied) {
        double pause = Math.min(denied.retryAfterSeconds(), seconds(options.maxWaitPoll));
        return uniform(pause, pause * 1.2);
    }

    static double uniform(double low, double high) {
        return high <= low ? low : low + (high - low) * ThreadLocalRandom.current().nextDouble();
    }

    static double seconds(Duration duration) { return duration.toNanos() / 1e9; }

    static String newRequestId() {
        byte[] raw = new byte[16];
        RANDOM.nextBytes(raw);
        return HexFormat.of().formatHex(raw);
    }

    /** Sleeps, or throws SeatException "cancelled" when interrupted. */
    static void pause(double seconds) {
        try {
            Thread.sleep((long) (Math.max(0, seconds) * 1000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new SeatException(0, "cancelled", "The call was interrupted.");
        }
    }

    /**
     * One call retried on network errors and 503 (429/502/504) with backoff, never sooner than
     * Retry-After. Every attempt carries the same request_id (and nonce): should an answer be
     * lost, the server answers the retry with what the first attempt did.
     */
    Answer call(String fn, JsonObject body, int retries, double budgetSeconds) {
        JsonObject sent = body.deepCopy();
        if (Json.string(sent, "request_id") == null) {
            sent.addProperty("request_id", newRequestId());
        }
        if (verifier != null && sent.get("nonce") == null) {
            sent.addProperty("nonce", TokenVerifier.newNonce());
        }
        if (retries < 0) {
            retries = options.retries;
        }
        long giveUp = budgetSeconds > 0 ? System.nanoTime() + (long) (budgetSeconds * 1e9) : 0;
        for (int attempt = 0; ; attempt++) {
            Duration timeout = options.timeout;
            if (giveUp != 0) {
                long left = Math.max(giveUp - System.nanoTime(), 50_000_000L);
                timeout = Duration.ofNanos(Math.min(left, timeout.toNanos()));
            }
            try {
                return send(fn, sent, timeout);
            } catch (SeatException.BackendUnavailable failed) {
                if (attempt >= retries) {
                    throw failed;
                }
                double delay = backoffDelay(attempt, failed.backendRetryAfter(), seconds(options.maxBackoff));
                if (giveUp != 0 && System.nanoTime() + (long) (delay * 1e9) > giveUp) {
                    throw failed;
                }
                log("info", "seatlease: " + fn + " failed (" + failed.getMessage() + "); retry in " + delay + " s");
                pause(delay);
            }
        }
    }

    static JsonObject acquireBody(String licenseId, String clientId, AcquireOptions o) {
        if (licenseId == null || clientId == null) {
            throw new IllegalArgumentException("licenseId and clientId are required");
        }
        JsonObject body = new JsonObject();
        body.addProperty("license_id", licenseId);
        body.addProperty("client_id", clientId);
        if (o.leaseSeconds > 0) body.addProperty("lease_seconds", o.leaseSeconds);
        if (o.borrowSeconds > 0) body.addProperty("borrow_seconds", o.borrowSeconds);
        if (o.metadata != null) body.add("metadata", o.metadata.deepCopy());
        if (o.user != null) body.addProperty("user", o.user);
        if (o.host != null) body.addProperty("host", o.host);
        if (o.queue) body.addProperty("queue", true);
        if (o.ticket != null) body.addProperty("ticket", o.ticket);
        if (o.requestId != null) body.addProperty("request_id", o.requestId);
        if (o.fingerprint != null) body.addProperty("fingerprint", o.fingerprint);
        if (o.seats > 0) body.addProperty("seats", o.seats);
        return body;
    }

    // -- plain calls ---------------------------------------------------------------------------

    /** POST /acquire (retried). No heartbeats: see {@link #lease}. */
    public Answer acquire(String licenseId, String clientId, AcquireOptions options) {
        return call("acquire", acquireBody(licenseId, clientId, options == null ? new AcquireOptions() : options), -1, 0);
    }

    public Answer acquire(String licenseId, String clientId) {
        return acquire(licenseId, clientId, null);
    }

    private static JsonObject sessionBody(String licenseId, String sessionId) {
        JsonObject body = new JsonObject();
        body.addProperty("license_id", licenseId);
        body.addProperty("session_id", sessionId);
        return body;
    }

    /** POST /heartbeat (retried); SessionExpired when the seat is gone. */
    public Answer heartbeat(String licenseId, String sessionId) {
        return call("heartbeat", sessionBody(licenseId, sessionId), -1, 0);
    }

    /** POST /release (retried, idempotent). */
    public Answer release(String licenseId, String sessionId) {
        return call("release", sessionBody(licenseId, sessionId), -1, 0);
    }

    Answer releaseWithin(String licenseId, String sessionId) {
        return call("release", sessionBody(licenseId, sessionId), -1, seconds(options.releaseTimeout));
    }

    /** Acquires a seat and keeps it by heartbeats until the Lease is closed. */
    public Lease lease(String licenseId, LeaseOptions options) {
        return Lease.open(this, licenseId, options);
    }
}
