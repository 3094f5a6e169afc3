package io.seatlease.client;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.io.IOException;
import java.net.ProxySelector;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BiConsumer;

/**
 * The seatlease client for Java 17: hold a seat ({@link #lease}: acquire, heartbeats on a
 * daemon thread at the server's interval, a new seat asked for at once when the old one is
 * lost, release on close; {@link #leaseAsync} to wait for one with a way to cancel), plain
 * calls, borrowed seats saved to a file ({@link #borrow}, {@link #loadBorrowed}), typed errors
 * ({@link SeatException} and its nested kinds) and verification of every signed answer (the
 * JDK's Ed25519). {@code java.net.http} and Gson (an implementation detail: no Gson type is
 * part of this API).
 *
 * <p>Built once by {@link #builder}, immutable and thread-safe: share one. Every exchange
 * (the answer's headers and its whole body) ends by its deadline, whatever pace the server
 * sends at. {@link #close} releases the seats it still holds and ends the waits for one.
 */
public final class SeatClient implements AutoCloseable {
    /** This client's version: the one of all five clients (shared/clients/VERSION; the pom's version). */
    public static final String VERSION = "0.3.0";
    static final int MAX_BODY = 1 << 20;
    private static final SecureRandom RANDOM = new SecureRandom();
    /** The clients holding a seat now that release it when the JVM exits (releaseOnExit). */
    private static final Set<SeatClient> HOLDING = ConcurrentHashMap.newKeySet();
    private static final AtomicBoolean EXIT_HOOK = new AtomicBoolean();
    /** The deadline of the exchange in progress on this thread, for a JWKS fetched within it. */
    private static final ThreadLocal<Long> ATTEMPT_DEADLINE = new ThreadLocal<>();

    /**
     * Builds a {@link SeatClient}: each setting is copied into the client by {@link #build},
     * so a builder may be changed and used again.
     */
    public static final class Builder {
        private final String baseUrl;
        private final String apiKey;
        private Duration timeout = Duration.ofSeconds(10);
        private int retries = 5;
        private Duration backoff = Duration.ofMillis(500);
        private Duration maxBackoff = Duration.ofSeconds(30);
        private Duration maxWaitPoll = Duration.ofSeconds(30);
        private Duration releaseTimeout = Duration.ofSeconds(5);
        private Boolean verify; // null: not set (true)
        private boolean insecureSkipVerify;
        private List<String> pinnedKeys = List.of();
        private String tenantId;
        private Duration tokenLeeway = Duration.ofSeconds(60);
        private String jwksUrl;
        private BiConsumer<String, String> logger;
        private String machineId;
        private boolean releaseOnExit = true;
        private Duration jwksMinRefetch = Duration.ofSeconds(10);

        private Builder(String baseUrl, String apiKey) {
            this.baseUrl = Objects.requireNonNull(baseUrl, "baseUrl");
            this.apiKey = Objects.requireNonNull(apiKey, "apiKey");
        }

        /** The deadline of one exchange: connecting, the answer's headers and its whole body (10 s). */
        public Builder timeout(Duration value) { timeout = positive(value, "timeout"); return this; }
        /** Extra attempts after a network error or a 503/429/502/504 (5; 0: none). */
        public Builder retries(int value) {
            if (value < 0) {
                throw new IllegalArgumentException("retries must be 0 or more");
            }
            retries = value;
            return this;
        }
        /** First pause between attempts, doubling with jitter (500 ms). */
        public Builder backoff(Duration value) { backoff = positive(value, "backoff"); return this; }
        /** The longest pause between attempts, whatever a server's Retry-After asks (30 s). */
        public Builder maxBackoff(Duration value) { maxBackoff = positive(value, "maxBackoff"); return this; }
        /** Longest pause between acquires while waiting for a seat (30 s). */
        public Builder maxWaitPoll(Duration value) { maxWaitPoll = positive(value, "maxWaitPoll"); return this; }
        /** Time budget of a lease's release, waiting for its heartbeat thread included (5 s). */
        public Builder releaseTimeout(Duration value) { releaseTimeout = positive(value, "releaseTimeout"); return this; }
        /**
         * Verify every answer's signed token (true, the default). {@code verify(false)} is
         * refused by {@link #build} unless {@link #insecureSkipVerify} opts out too: old code
         * cannot silently stay unverified.
         */
        public Builder verify(boolean value) { verify = value; return this; }
        /**
         * The vendor's Ed25519 keys (a JWK's "x" as the deployment's /keys lists it, a JWK as
         * JSON, or PEM): a grant counts only when its token is signed by one of them. Required
         * unless {@link #insecureSkipVerify}.
         */
        public Builder pinnedKeys(List<String> value) { pinnedKeys = List.copyOf(value); return this; }
        /**
         * INSECURE, for tests and trials only: build without pinned keys. Then any server at
         * the base URL (a hosts-file entry, a proxy) can grant a seat: no answer's token is
         * verified (unless keys are pinned anyway, or {@code verify(true)} is set explicitly:
         * against the server's own /keys, which proves little).
         */
        public Builder insecureSkipVerify(boolean value) { insecureSkipVerify = value; return this; }
        /** The tenant the tokens' aud must name (else any tenant with this license). */
        public Builder tenantId(String value) { tenantId = value; return this; }
        /** Clock slack on the tokens' exp, nbf, iat (60 s). */
        public Builder tokenLeeway(Duration value) {
            if (value.isNegative()) {
                throw new IllegalArgumentException("tokenLeeway must not be negative");
            }
            tokenLeeway = value;
            return this;
        }
        /**
         * Least time between two JWKS fetches prompted by a token under a kid the cached JWKS
         * does not list, a rotation (10 s; zero: none).
         */
        public Builder jwksMinRefetch(Duration value) {
            if (value.isNegative()) {
                throw new IllegalArgumentException("jwksMinRefetch must not be negative");
            }
            jwksMinRefetch = value;
            return this;
        }
        /** Where the JWKS is fetched (default base URL + "/keys"). */
        public Builder jwksUrl(String value) { jwksUrl = value; return this; }
        /** (level, message): retries at "info", losses and regains at "warning". Never the key. */
        public Builder logger(BiConsumer<String, String> value) { logger = value; return this; }
        /**
         * This machine's id for borrowed seats and {@link #thisMachine()} (default: the
         * system's, {@link Machine#machineId()}), e.g. in a container whose id is not stable.
         */
        public Builder machineId(String value) { machineId = value; return this; }
        /**
         * Release the seats this client holds when the JVM exits (System.exit, the end of
         * main, SIGTERM, Ctrl-C: a shutdown hook), within the release timeout (true). False:
         * they expire by themselves at the end of their lease, unless closed.
         */
        public Builder releaseOnExit(boolean value) { releaseOnExit = value; return this; }

        /**
         * The client; IllegalArgumentException for a URL that is not http(s), a key that is no
         * key, no pinned key without {@link #insecureSkipVerify}, or verify(false) without it.
         */
        public SeatClient build() { return new SeatClient(this); }

        private static Duration positive(Duration value, String name) {
            if (value == null || value.isNegative() || value.isZero()) {
                throw new IllegalArgumentException(name + " must be a positive duration");
            }
            return value;
        }
    }

    /**
     * A client for the deployment at baseUrl (http:// or https://), with apiKey. Verified by
     * default: give the vendor's keys ({@link Builder#pinnedKeys}), or the build is refused
     * (unless {@link Builder#insecureSkipVerify}).
     */
    public static Builder builder(String baseUrl, String apiKey) {
        return new Builder(baseUrl, apiKey);
    }

    private final String baseUrl;
    private final String apiKey;
    private final Duration timeout;
    private final int retries;
    private final Duration backoff;
    private final Duration maxBackoff;
    private final Duration maxWaitPoll;
    private final Duration releaseTimeout;
    private final List<String> pinnedKeys;
    private final String tenantId;
    private final Duration tokenLeeway;
    private final String jwksUrl;
    private final BiConsumer<String, String> logger;
    private final String machineId;
    private final HttpClient http;
    private final boolean insecureSkipVerify;
    private final boolean releaseOnExit;
    final TokenVerifier verifier;

    private final Set<Lease> held = ConcurrentHashMap.newKeySet();
    private final AtomicBoolean closed = new AtomicBoolean();
    /** Completed by close(): every wait for a first seat ends. */
    private final CompletableFuture<Void> closing = new CompletableFuture<>();

    private SeatClient(Builder b) {
        URI parsed;
        try {
            parsed = URI.create(b.baseUrl);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("baseUrl must be an http:// or https:// URL");
        }
        if (parsed.getScheme() == null || !(parsed.getScheme().equals("http") || parsed.getScheme().equals("https"))
                || parsed.getHost() == null) {
            throw new IllegalArgumentException("baseUrl must be an http:// or https:// URL");
        }
        baseUrl = b.baseUrl.replaceAll("/+$", "");
        apiKey = b.apiKey;
        timeout = b.timeout;
        retries = b.retries;
        backoff = b.backoff;
        maxBackoff = b.maxBackoff;
        maxWaitPoll = b.maxWaitPoll;
        releaseTimeout = b.releaseTimeout;
        pinnedKeys = b.pinnedKeys;
        tenantId = b.tenantId;
        tokenLeeway = b.tokenLeeway;
        jwksUrl = b.jwksUrl != null ? b.jwksUrl : baseUrl + "/keys";
        logger = b.logger;
        machineId = b.machineId;
        String host = parsed.getHost();
        boolean loopback = host.equals("localhost") || host.startsWith("127.") || host.equals("[::1]");
        HttpClient.Builder builder = HttpClient.newBuilder()
                .followRedirects(HttpClient.Redirect.NEVER) // the API key never reaches another host
                .connectTimeout(timeout);
        if (!loopback) {
            builder.proxy(ProxySelector.getDefault());
        }
        http = builder.build();
        insecureSkipVerify = b.insecureSkipVerify;
        releaseOnExit = b.releaseOnExit;
        if (!insecureSkipVerify) {
            if (Boolean.FALSE.equals(b.verify)) {
                throw new IllegalArgumentException("verify(false) turns off the check that a seat was granted by the "
                        + "vendor's server: pin the vendor's keys (pinnedKeys) or, for tests only, opt out with "
                        + "insecureSkipVerify(true)");
            }
            if (pinnedKeys.isEmpty()) {
                throw new IllegalArgumentException("No pinned key: pin the vendor's Ed25519 key(s) with "
                        + "pinnedKeys(List.of(x)) (each the \"x\" of a key the deployment's /keys lists), "
                        + "or, for tests only, opt out with insecureSkipVerify(true)");
            }
        }
        boolean verifying = insecureSkipVerify
                ? Boolean.TRUE.equals(b.verify) || (!pinnedKeys.isEmpty() && !Boolean.FALSE.equals(b.verify))
                : true;
        if (verifying) {
            verifier = new TokenVerifier(() -> fetchJwks(jwksUrl), pinnedKeys, tenantId, tokenLeeway, null);
            verifier.minRefetch(b.jwksMinRefetch);
        } else {
            verifier = null;
        }
    }

    /** Never shows the API key. */
    @Override
    public String toString() { return "SeatClient(" + baseUrl + ", apiKey=<hidden>)"; }

    public String baseUrl() { return baseUrl; }
    public Duration timeout() { return timeout; }
    public Duration releaseTimeout() { return releaseTimeout; }
    /** Whether answers' tokens are verified (verify, or pinned keys). */
    public boolean verifies() { return verifier != null; }
    /** Whether the tokens must be signed by one of the vendor's pinned keys. */
    public boolean pinned() { return !pinnedKeys.isEmpty() && verifier != null; }
    /** Whether this client was built with the insecure opt-out ({@link Builder#insecureSkipVerify}). */
    public boolean insecureSkipVerify() { return insecureSkipVerify; }
    /** This machine's fingerprint ({@link Machine#fingerprint} of the builder's machineId or the system's). */
    public String thisMachine() { return Machine.thisMachine(machineId); }

    List<String> pinnedKeys() { return pinnedKeys; }
    String tenantId() { return tenantId; }
    Duration tokenLeeway() { return tokenLeeway; }
    Duration maxBackoff() { return maxBackoff; }

    void log(String level, String message) {
        if (logger != null) {
            logger.accept(level, message);
        }
    }

    private void checkOpen() {
        if (closed.get()) {
            throw new IllegalStateException("This SeatClient is closed.");
        }
    }

    // -- HTTP -------------------------------------------------------------------------------

    /**
     * How one call is made: its extra attempts (-1: the client's retries), the instant
     * (System.nanoTime) past which no attempt runs (0: none), what cancels it (null:
     * interrupting the thread only) and whether its answer's token is verified.
     */
    record Plan(int retries, long giveUpNanos, CompletableFuture<?> cancel, boolean verify) {
        static final Plan DEFAULT = new Plan(-1, 0, null, true);

        Plan withRetries(int value) { return new Plan(value, giveUpNanos, cancel, verify); }
        Plan until(long nanos) { return new Plan(retries, nanos, cancel, verify); }
        Plan cancelledBy(CompletableFuture<?> value) { return new Plan(retries, giveUpNanos, value, verify); }
        Plan unverified() { return new Plan(retries, giveUpNanos, cancel, false); }
    }

    private record Exchange(int status, String body, double retryAfter, String location) {}

    private static HttpClient.Version versionFor(URI uri) {
        // http:// is HTTP/1.1: no "Upgrade: h2c" that a proxy or an old server may choke on
        return "http".equals(uri.getScheme()) ? HttpClient.Version.HTTP_1_1 : HttpClient.Version.HTTP_2;
    }

    private static SeatException.BackendUnavailable networkError(URI uri, String what) {
        return new SeatException.BackendUnavailable(0, "network_error", uri + ": " + what, null, -1);
    }

    /**
     * One request and its whole answer by deadline (System.nanoTime), or earlier when
     * cancel completes: the body is read as it arrives, up to MAX_BODY, and the exchange is
     * aborted (its connection closed) when the deadline passes first.
     */
    private Exchange exchange(HttpRequest.Builder builder, URI uri, long deadline, CompletableFuture<?> cancel) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
            throw networkError(uri, "no time left for the call");
        }
        HttpRequest request = builder.timeout(Duration.ofNanos(left)).version(versionFor(uri)).build();
        CappedBody body = new CappedBody(MAX_BODY);
        CompletableFuture<HttpResponse<CappedBody.Bytes>> pending = http.sendAsync(request, info -> body);
        HttpResponse<CappedBody.Bytes> response;
        try {
            response = await(pending, deadline, cancel);
        } catch (TimeoutException e) {
            abort(pending, body);
            throw networkError(uri, "no whole answer within " + Duration.ofNanos(left).toMillis() + " ms");
        } catch (CancellationException e) {
            abort(pending, body);
            throw new SeatException.Cancelled("The call was cancelled.");
        } catch (InterruptedException e) {
            abort(pending, body);
            Thread.currentThread().interrupt();
            throw new SeatException.Cancelled("The call was interrupted.");
        } catch (ExecutionException e) {
            Throwable cause = e.getCause() != null ? e.getCause() : e;
            throw networkError(uri, cause instanceof IOException ? cause.toString() : "failed: " + cause);
        }
        if (response.body().tooBig()) {
            throw new SeatException.InvalidResponse(response.statusCode(),
                    uri + " answered more than " + MAX_BODY + " bytes.");
        }
        return new Exchange(response.statusCode(), new String(response.body().data(), StandardCharsets.UTF_8),
                retryAfterHeader(response), response.headers().firstValue("Location").orElse(null));
    }

    /** The answer by deadline; CancellationException as soon as cancel completes first. */
    private static <T> T await(CompletableFuture<T> pending, long deadline, CompletableFuture<?> cancel)
            throws TimeoutException, InterruptedException, ExecutionException {
        long left = Math.max(0, deadline - System.nanoTime());
        if (cancel == null) {
            return pending.get(left, TimeUnit.NANOSECONDS);
        }
        try {
            CompletableFuture.anyOf(pending, cancel).get(left, TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            // pending failed (its failure is read below) or cancel did (a cancel all the same)
        }
        if (!pending.isDone()) {
            throw new CancellationException();
        }
        return pending.get();
    }

    private static void abort(CompletableFuture<?> pending, CappedBody body) {
        body.abort();
        pending.cancel(true);
    }

    private static double retryAfterHeader(HttpResponse<?> response) {
        Optional<String> header = response.headers().firstValue("Retry-After");
        if (header.isPresent()) {
            try {
                double seconds = Double.parseDouble(header.get().trim());
                if (seconds >= 0 && seconds < 86400) {
                    return seconds;
                }
            } catch (NumberFormatException e) {
                // an HTTP date from a proxy is ignored
            }
        }
        return -1;
    }

    private static JsonObject decode(URI where, Exchange exchange) {
        JsonObject payload = Json.parseObject(exchange.body);
        if (exchange.status >= 300 || exchange.status < 200) {
            throw SeatException.fromAnswer(where, exchange.status, payload, exchange.retryAfter, exchange.location);
        }
        if (payload == null) {
            throw new SeatException.InvalidResponse(exchange.status, where + " answered something that is not a JSON object.");
        }
        return payload;
    }

    /** The JWKS document, within the deadline of the exchange that needs it. */
    String fetchJwks(String url) {
        URI where = URI.create(url);
        HttpRequest.Builder request = HttpRequest.newBuilder(where)
                .header("Accept", "application/json").header("User-Agent", "seatlease-java/" + VERSION).GET();
        long deadline = System.nanoTime() + timeout.toNanos();
        Long attempt = ATTEMPT_DEADLINE.get();
        if (attempt != null && attempt - deadline < 0) {
            deadline = attempt;
        }
        Exchange answer = exchange(request, where, deadline, null);
        decode(where, answer);
        return answer.body;
    }

    String fetchJwks() { return fetchJwks(jwksUrl); }

    /** An integer (a JSON number without a fraction, never a bool) of at least least. */
    private static boolean isInteger(JsonElement value, long least) {
        if (!Json.isNumber(value)) {
            return false;
        }
        double number = value.getAsDouble();
        return number == Math.rint(number) && number >= least && number < 1e15;
    }

    /**
     * The shape of a 2xx: wrong types are an InvalidResponse, never a failure later. A grant:
     * session_id a non-empty string, lease_expires_at a time, lease_seconds an integer &gt;= 1;
     * a renewal: lease_expires_at a time, session_id optional (if a non-empty string, the
     * lease's own), lease_seconds optional. heartbeat_interval_seconds and the counts
     * (seats_used, seats_total, seats, shared_sessions) optional integers, idle_reclaim_at
     * an optional time; a null is as absent.
     */
    private static void checkShape(String fn, JsonObject request, JsonObject reply, int status) {
        if (status == 202) {
            if (Json.string(reply, "ticket") == null) {
                throw new SeatException.InvalidResponse(status, "The " + fn + " answer (202) has no ticket.");
            }
            return;
        }
        boolean release = fn.equals("release"), acquire = fn.equals("acquire");
        Map<String, Long> integers = new LinkedHashMap<>();
        integers.put("seats_used", 0L);
        if (!release) {
            integers.put("seats_total", 0L);
            integers.put("seats", 1L);
            integers.put("lease_seconds", 1L);
            integers.put("heartbeat_interval_seconds", 1L);
            integers.put("shared_sessions", 0L);
        }
        for (Map.Entry<String, Long> integer : integers.entrySet()) {
            JsonElement value = reply.get(integer.getKey());
            boolean absent = value == null || value.isJsonNull();
            if (absent && acquire && integer.getKey().equals("lease_seconds")) {
                throw new SeatException.InvalidResponse(status, "The " + fn + " answer has no lease_seconds.");
            }
            if (!absent && !isInteger(value, integer.getValue())) {
                throw new SeatException.InvalidResponse(status, "The " + fn + " answer's " + integer.getKey()
                        + " is not an integer of at least " + integer.getValue() + ".");
            }
        }
        if (release) {
            if (reply.get("released") == null || !reply.get("released").isJsonPrimitive()
                    || !reply.get("released").getAsJsonPrimitive().isBoolean()) {
                throw new SeatException.InvalidResponse(status, "The release answer has no released flag.");
            }
            return;
        }
        if (Times.parse(Json.string(reply, "lease_expires_at")) == null) {
            throw new SeatException.InvalidResponse(status, "The " + fn + " answer has no lease_expires_at.");
        }
        JsonElement warning = reply.get("idle_reclaim_at");
        if (warning != null && !warning.isJsonNull() && Times.parse(Json.string(reply, "idle_reclaim_at")) == null) {
            throw new SeatException.InvalidResponse(status, "The " + fn + " answer's idle_reclaim_at is not a time.");
        }
        JsonElement session = reply.get("session_id");
        String named = Json.string(reply, "session_id");
        if (acquire) {
            if (named == null || named.isEmpty()) {
                throw new SeatException.InvalidResponse(status, "The " + fn + " answer has no session_id.");
            }
        } else if (session != null && !session.isJsonNull()) {
            if (named == null) {
                throw new SeatException.InvalidResponse(status, "The " + fn + " answer's session_id is not a string.");
            }
            if (!named.isEmpty() && !named.equals(Json.string(request, "session_id"))) {
                throw new SeatException.InvalidResponse(status, "The " + fn + " answer names another session.");
            }
        }
    }

    private Answer send(String fn, JsonObject body, long deadline, Plan plan) {
        URI where = URI.create(baseUrl + "/" + fn);
        HttpRequest.Builder request = HttpRequest.newBuilder(where)
                .header("Content-Type", "application/json").header("Accept", "application/json")
                .header("Authorization", "Bearer " + apiKey).header("User-Agent", "seatlease-java/" + VERSION)
                .POST(HttpRequest.BodyPublishers.ofString(Json.write(body)));
        Exchange answer = exchange(request, where, deadline, plan.cancel());
        JsonObject reply = decode(where, answer);
        try {
            checkShape(fn, body, reply, answer.status);
            // A place in the wait queue (202) grants nothing: it carries no token to check.
            if (verifier != null && plan.verify() && answer.status != 202) {
                ATTEMPT_DEADLINE.set(deadline);
                try {
                    verifier.verify(fn, body, reply, answer.status);
                } finally {
                    ATTEMPT_DEADLINE.remove();
                }
            }
        } catch (SeatException.InvalidResponse | SeatException.TokenException refused) {
            if (fn.equals("acquire") && answer.status != 202) {
                releaseRefused(Json.string(body, "license_id"), Json.string(reply, "session_id"));
            }
            throw refused;
        }
        return new Answer(reply, answer.status);
    }

    /**
     * A grant refused (its token missing or not the vendor's, its shape wrong) is no seat:
     * the session it names, if any, is released at once (best effort, within the release
     * timeout), so that it does not stay taken on the server for the whole lease.
     */
    void releaseRefused(String licenseId, String sessionId) {
        if (licenseId == null || sessionId == null || sessionId.isEmpty()) {
            return;
        }
        long giveUp = System.nanoTime() + releaseTimeout.toNanos();
        try {
            call("release", sessionBody(licenseId, sessionId), Plan.DEFAULT.until(giveUp).unverified());
            log("warning", "seatlease: a grant of " + licenseId + " was refused; its session was released");
        } catch (SeatException failure) {
            log("warning", "seatlease: a grant of " + licenseId + " was refused; releasing its session failed: "
                    + failure.getMessage());
        }
    }

    /**
     * The pause before retry number attempt + 1: the back-off doubling from backoff up to
     * ceiling, with jitter, no sooner than the server's Retry-After, and never longer than
     * maxBackoff whatever the server asks (a hint of an hour must not put a product to sleep
     * for an hour).
     */
    double backoffDelay(int attempt, double retryAfter, double ceiling) {
        double delay = Math.min(ceiling, Times.seconds(backoff) * Math.pow(2, Math.max(0, Math.min(attempt, 60))));
        delay = uniform(delay / 2, delay);
        return Math.min(Math.max(delay, retryAfter), Times.seconds(maxBackoff));
    }

    /** The pause before asking again for a seat that was refused (or a place in line). */
    double waitPause(SeatException denied) {
        double pause = Math.min(Times.seconds(denied.retryAfter()), Times.seconds(maxWaitPoll));
        return uniform(pause, pause * 1.2);
    }

    static double uniform(double low, double high) {
        return high <= low ? low : low + (high - low) * ThreadLocalRandom.current().nextDouble();
    }

    static String newRequestId() {
        byte[] raw = new byte[16];
        RANDOM.nextBytes(raw);
        return HexFormat.of().formatHex(raw);
    }

    /** Sleeps, or throws SeatException.Cancelled when interrupted or when cancel completes. */
    static void pause(double seconds, CompletableFuture<?> cancel) {
        long nanos = (long) (Math.max(0, seconds) * 1e9);
        try {
            if (cancel == null) {
                TimeUnit.NANOSECONDS.sleep(nanos);
                return;
            }
            cancel.get(nanos, TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            return; // slept the whole pause
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new SeatException.Cancelled("The call was interrupted.");
        } catch (ExecutionException | CancellationException e) {
            // cancel completed exceptionally: a cancel all the same
        }
        throw new SeatException.Cancelled("The call was cancelled.");
    }

    /** The request_id and (when verifying) the nonce every attempt of a call carries. */
    JsonObject stamped(JsonObject body) {
        JsonObject sent = body.deepCopy();
        if (Json.string(sent, "request_id") == null) {
            sent.addProperty("request_id", newRequestId());
        }
        if (verifier != null && sent.get("nonce") == null) {
            sent.addProperty("nonce", TokenVerifier.newNonce());
        }
        return sent;
    }

    /**
     * One call retried on network errors and 503 (429/502/504) with backoff. Every attempt
     * carries the same request_id (and nonce): should an answer be lost, the server answers
     * the retry with what the first attempt did. Each attempt ends by the client's timeout
     * and by the plan's give-up instant, whichever comes first.
     */
    Answer call(String fn, JsonObject body, Plan plan) {
        JsonObject sent = stamped(body);
        int attempts = plan.retries() < 0 ? retries : plan.retries();
        for (int attempt = 0; ; attempt++) {
            long deadline = System.nanoTime() + timeout.toNanos();
            if (plan.giveUpNanos() != 0) {
                long floor = System.nanoTime() + 50_000_000L; // an attempt, however short, is sent
                long giveUp = plan.giveUpNanos() - floor > 0 ? plan.giveUpNanos() : floor;
                deadline = giveUp - deadline < 0 ? giveUp : deadline;
            }
            try {
                return send(fn, sent, deadline, plan);
            } catch (SeatException.BackendUnavailable failed) {
                if (attempt >= attempts) {
                    throw failed;
                }
                double delay = backoffDelay(attempt, failed.backendRetryAfter(), Times.seconds(maxBackoff));
                if (plan.giveUpNanos() != 0 && System.nanoTime() + (long) (delay * 1e9) - plan.giveUpNanos() > 0) {
                    throw failed;
                }
                log("info", "seatlease: " + fn + " failed (" + failed.getMessage() + "); retry in "
                        + Math.round(delay * 1000) + " ms");
                pause(delay, plan.cancel());
            }
        }
    }

    // -- plain calls ---------------------------------------------------------------------------

    /** POST /acquire (retried). No heartbeats: see {@link #lease}. */
    public Answer acquire(String licenseId, String clientId, AcquireOptions options) {
        checkOpen();
        AcquireOptions fields = options == null ? new AcquireOptions() : options.copy();
        return call("acquire", fields.body(licenseId, clientId), Plan.DEFAULT);
    }

    public Answer acquire(String licenseId, String clientId) {
        return acquire(licenseId, clientId, null);
    }

    static JsonObject sessionBody(String licenseId, String sessionId) {
        JsonObject body = new JsonObject();
        body.addProperty("license_id", licenseId);
        body.addProperty("session_id", sessionId);
        return body;
    }

    /** POST /heartbeat (retried); SessionExpired when the seat is gone. */
    public Answer heartbeat(String licenseId, String sessionId) {
        checkOpen();
        return call("heartbeat", sessionBody(licenseId, sessionId), Plan.DEFAULT);
    }

    /** POST /release (retried, idempotent). */
    public Answer release(String licenseId, String sessionId) {
        checkOpen();
        return call("release", sessionBody(licenseId, sessionId), Plan.DEFAULT);
    }

    /** A release that ends by giveUp (System.nanoTime), retries included. */
    Answer releaseBy(String licenseId, String sessionId, long giveUp) {
        return call("release", sessionBody(licenseId, sessionId), Plan.DEFAULT.until(giveUp));
    }

    // -- held leases ---------------------------------------------------------------------------

    /**
     * Acquires a seat and keeps it by heartbeats until the Lease is closed. With {@link
     * LeaseOptions#waitFor} it waits for one; interrupting the thread ends the wait
     * ({@link SeatException.Cancelled}), giving back a seat taken meanwhile.
     */
    public Lease lease(String licenseId, LeaseOptions options) {
        checkOpen();
        return Lease.open(this, licenseId, options.copy(), closing);
    }

    /**
     * {@link #lease} on a thread of its own: the future completes with the Lease (or the
     * error). {@code cancel(true)} on this future (not on a stage derived from it) ends a
     * wait in line or a first acquire in flight at once; a seat taken meanwhile is released
     * in the background. Closing the client ends it too ({@link SeatException.Cancelled}).
     */
    public CompletableFuture<Lease> leaseAsync(String licenseId, LeaseOptions options) {
        checkOpen();
        LeaseOptions copy = options.copy();
        if (licenseId == null || copy.clientId == null) {
            throw new IllegalArgumentException("licenseId and a clientId are required");
        }
        LeaseFuture future = new LeaseFuture();
        CompletableFuture<Object> cancel = CompletableFuture.anyOf(future.ended, closing);
        Thread worker = new Thread(() -> {
            try {
                Lease lease = Lease.open(this, licenseId, copy, cancel);
                if (!future.complete(lease)) {
                    lease.close(); // cancelled as the seat came: give it back
                }
            } catch (Throwable failure) {
                future.completeExceptionally(failure);
            }
        }, "seatlease-acquire-" + licenseId);
        worker.setDaemon(true);
        worker.start();
        return future;
    }

    /** A lease's future whose completion (a cancel above all) ends the wait it stands for. */
    private static final class LeaseFuture extends CompletableFuture<Lease> {
        final CompletableFuture<Void> ended = new CompletableFuture<>();

        LeaseFuture() {
            whenComplete((lease, failure) -> ended.complete(null));
        }
    }

    /**
     * The seat an acquire cancelled in flight may have taken, released in the background: the
     * same body (its request_id) sent again is answered with what the first run did, without
     * taking a second seat, and the session it names is released. Within the release timeout.
     */
    void giveBack(String licenseId, JsonObject sentBody) {
        Thread thread = new Thread(() -> {
            long giveUp = System.nanoTime() + releaseTimeout.toNanos();
            try {
                Answer answer = call("acquire", sentBody, Plan.DEFAULT.until(giveUp).unverified());
                if (answer.status() != 202 && answer.sessionId() != null) {
                    releaseBy(licenseId, answer.sessionId(), giveUp);
                    log("info", "seatlease: the seat taken by a cancelled acquire of " + licenseId + " was released");
                }
            } catch (SeatException e) {
                log("info", "seatlease: nothing to give back after a cancelled acquire of " + licenseId + ": " + e.getMessage());
            }
        }, "seatlease-give-back-" + licenseId);
        thread.setDaemon(true);
        thread.start();
    }

    /** A lease now held; false (the caller releases it) when the client closed meanwhile. */
    boolean register(Lease lease) {
        synchronized (held) {
            held.add(lease);
            if (closed.get()) {
                held.remove(lease);
                return false;
            }
            if (releaseOnExit) {
                HOLDING.add(this);
            }
        }
        if (releaseOnExit && EXIT_HOOK.compareAndSet(false, true)) {
            try {
                Runtime.getRuntime().addShutdownHook(new Thread(SeatClient::releaseAtExit, "seatlease-release-at-exit"));
            } catch (IllegalStateException | SecurityException e) {
                // the JVM is exiting already (or may not be hooked): the seats expire by themselves
            }
        }
        return true;
    }

    void unregister(Lease lease) {
        synchronized (held) {
            held.remove(lease);
            if (held.isEmpty()) {
                HOLDING.remove(this);
            }
        }
    }

    /** The shutdown hook: every holding client closed at once, each within its release timeout. */
    private static void releaseAtExit() {
        List<Thread> closers = new java.util.ArrayList<>();
        long giveUp = System.nanoTime();
        for (SeatClient client : List.copyOf(HOLDING)) {
            long end = System.nanoTime() + client.releaseTimeout.toNanos();
            giveUp = end - giveUp > 0 ? end : giveUp;
            Thread closer = new Thread(client::close, "seatlease-release-at-exit-" + client.baseUrl);
            closer.setDaemon(true);
            closer.start();
            closers.add(closer);
        }
        for (Thread closer : closers) {
            long left = giveUp - System.nanoTime();
            if (left <= 0) {
                return;
            }
            try {
                closer.join(Math.max(1, left / 1_000_000L));
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    /**
     * Releases every seat this client still holds (all within one release timeout), ends
     * every wait for a first seat ({@link SeatException.Cancelled}) and refuses new calls
     * (IllegalStateException). Once; never throws.
     */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        closing.complete(null);
        HOLDING.remove(this);
        long giveUp = System.nanoTime() + releaseTimeout.toNanos();
        for (Lease lease : List.copyOf(held)) {
            lease.closeBy(giveUp);
        }
    }

    // -- borrowed seats ------------------------------------------------------------------------

    /**
     * Borrows a seat for duration (whole seconds; no heartbeats until it ends, at most the
     * license's max_borrow_seconds), bound to this machine, saves it with its signed token
     * and the deployment's keys to path (atomically, readable by this user only; the same
     * file as the other clients') and returns it verified.
     */
    public BorrowedSeat borrow(String licenseId, String clientId, Duration duration, Path path) throws IOException {
        return borrow(licenseId, clientId, duration, path, (AcquireOptions) null);
    }

    /** {@link #borrow(String, String, Duration, Path)} with the lease's metadata. */
    public BorrowedSeat borrow(String licenseId, String clientId, Duration duration, Path path,
                               Map<String, ?> metadata) throws IOException {
        return borrow(licenseId, clientId, duration, path, new AcquireOptions().metadata(metadata));
    }

    /**
     * {@link #borrow(String, String, Duration, Path)} with the same identity options as an
     * acquire: {@link AcquireOptions#user}, {@link AcquireOptions#host}, {@link
     * AcquireOptions#entitlements}, {@link AcquireOptions#version}, {@link AcquireOptions#seats},
     * {@link AcquireOptions#metadata} and {@link AcquireOptions#requestId} (a license with a
     * per-user policy needs user). Its borrowDuration is duration's, its fingerprint this
     * machine's; queue and ticket do not apply.
     */
    public BorrowedSeat borrow(String licenseId, String clientId, Duration duration, Path path,
                               AcquireOptions options) throws IOException {
        checkOpen();
        return BorrowedSeat.borrow(this, licenseId, clientId, duration, path,
                options == null ? new AcquireOptions() : options.copy());
    }

    /**
     * The borrowed seat saved at path (by this client or another), verified offline (no
     * request is sent): signature (the saved keys, within this client's pinned keys: pin the
     * vendor's keys so that an edited file cannot pass), audience, session, client, nonce,
     * expiry ({@link SeatException.TokenExpired} once the borrow has ended), the borrowed
     * claim and the machine ({@link SeatException.TokenWrongMachine} on another machine).
     */
    public BorrowedSeat loadBorrowed(Path path) throws IOException {
        checkOpen();
        return BorrowedSeat.load(this, path);
    }
}
