package io.seatlease.client;

import com.google.gson.JsonObject;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A seat held by this process: a daemon thread heartbeats at the server's interval (at most
 * a third of the lease, with jitter), each heartbeat bounded by the time the lease has left,
 * retries faster as the deadline nears, marks the lease lost when no renewal got through in
 * time ("unreachable"), on a 410 ("expired", "unknown", or "revoked": an operator freed the
 * seat) or when the license's term ended ("license_expired", "license_not_started"), and
 * acquires again: at once after a loss, every five minutes or so while the server refuses
 * for good (an ended term, a suspension). A 410 "idle" (the license's idle rule reclaimed
 * the seat) is asked for again only once the product is in use again ({@link #touch},
 * {@link #busy}). A 410 "unknown" (a region lost its sessions) is
 * first answered by the lease's last token, which keeps the seat when the server takes it
 * back; a 410 "revoked" never is (an operator's revoke is final: its token is refused). {@link #close} stops it and releases the
 * seat within the client's release timeout (never throws; use {@link #release} to see a
 * failure). Thread-safe.
 */
public final class Lease implements AutoCloseable {
    /** The pause between re-acquires the server refuses until an operator acts (jittered). */
    static final Duration FINAL_REFUSAL_PAUSE = Duration.ofMinutes(5);
    /** The 403 codes no retry cures: said once, then asked again at FINAL_REFUSAL_PAUSE. */
    private static final Set<String> FINAL_CODES = Set.of("license_expired", "license_not_started",
            "license_suspended", "not_entitled", "version_not_entitled", "user_denied");
    /** A heartbeat failure this close to the deadline leaves no time for another renewal. */
    private static final long DEADLINE_SLACK_NANOS = 100_000_000L;
    /** The most idle_seconds a heartbeat may carry (ten years: the API's bound). */
    private static final long MAX_IDLE_SECONDS = 315_360_000L;
    /**
     * A seat reclaimed for idleness is asked for again on the product's next activity (touch
     * or busy wakes the thread), not before: asked at once, an idle product would take its
     * seat straight back. Meanwhile the thread only sleeps.
     */
    private static final double IDLE_LOST_PAUSE = 3600;

    private final SeatClient client;
    private final String licenseId;
    private final LeaseOptions options;

    private final Object lock = new Object();
    private String sessionId;
    private Instant expiresAt;
    private int leaseSeconds;
    private int heartbeatIntervalSeconds;
    private int seatsUsed;
    private int seatsTotal;
    private int seats = 1;
    private boolean overage;
    private List<String> entitlements = List.of();
    private Instant licenseExpiresAt;
    private Instant licenseGraceEndsAt;
    private boolean inGrace;
    private String maxVersion;
    private boolean lost;
    private String lostReason;
    private boolean released;
    private String token;           // verified
    private String lastLeaseToken;  // verified or not: what a recovery by token sends
    private String finalCodeSaid;   // the final refusal already logged as a warning
    private long validUntil; // System.nanoTime(): the seat lapses then without a renewal
    private int failures;
    private Instant idleReclaimAt; // while warned for idleness: when the seat is reclaimed
    private int sharedSessions;
    // What the product said of its use, for the license's idle rule (System.nanoTime()).
    private boolean touched;   // it opted in: a product that never touches is never idle
    private long lastTouch;    // the last user activity
    private int busyScopes;    // busy scopes open (nested ones count)
    private long lostIdleAt;   // the seat was reclaimed for idleness then
    // What the last heartbeat said (the warned one, when warned), and whether the thread was
    // already woken since its answer: once per answer, so that a product touching on every
    // key press sends one heartbeat, not one a key.
    private boolean sentTouched;
    private long sentTouch;
    private boolean sentBusy;
    private boolean woken;

    private volatile boolean stopping;
    private Thread thread;
    private final Object releaseLock = new Object();
    private boolean releaseDone;
    private SeatException releaseError;
    private boolean wake; // under releaseLock: run the next step now (a touch after a warning)

    private Lease(SeatClient client, String licenseId, LeaseOptions options) {
        this.client = client;
        this.licenseId = licenseId;
        this.options = options;
    }

    /** The first seat (waiting for it when asked, until cancel completes), then heartbeats. */
    static Lease open(SeatClient client, String licenseId, LeaseOptions options, CompletableFuture<?> cancel) {
        if (licenseId == null || options == null || options.clientId == null) {
            throw new IllegalArgumentException("licenseId and a clientId are required");
        }
        Lease lease = new Lease(client, licenseId, options);
        lease.acquireFirst(cancel);
        lease.thread = new Thread(lease::keep, "seatlease-heartbeat-" + licenseId);
        lease.thread.setDaemon(true);
        lease.thread.start();
        if (!client.register(lease)) {
            lease.close();
            throw new SeatException.Cancelled("The client was closed.");
        }
        return lease;
    }

    public String licenseId() { return licenseId; }
    public String clientId() { return options.clientId; }
    /** The session holding the seat now (a new one after the seat was lost and regained). */
    public String sessionId() { synchronized (lock) { return sessionId; } }
    /** The server's deadline of the seat, as its last answer gave it. */
    public Instant expiresAt() { synchronized (lock) { return expiresAt; } }
    /** The lease's length the server granted. */
    public Duration leaseDuration() { synchronized (lock) { return Duration.ofSeconds(leaseSeconds); } }
    /** The heartbeat interval the server asked for. */
    public Duration heartbeatInterval() { synchronized (lock) { return Duration.ofSeconds(heartbeatIntervalSeconds); } }
    /** The license's seats in use, as the last answer that counted them gave them (a renewal may not). */
    public int seatsUsed() { synchronized (lock) { return seatsUsed; } }
    /** The license's seats, as the last answer that counted them gave them. */
    public int seatsTotal() { synchronized (lock) { return seatsTotal; } }
    /** This lease's weight: how many of the license's seats it counts as (1 when the server does not say). */
    public int seats() { synchronized (lock) { return seats; } }
    /** The same as {@link #seats()}, for bean-style callers. */
    public int getSeats() { return seats(); }
    public boolean overage() { synchronized (lock) { return overage; } }
    /** The license's entitlements, as the last answer that listed them gave them (empty: none). */
    public List<String> entitlements() { synchronized (lock) { return entitlements; } }
    /** The license's end; empty when it has none. */
    public Optional<Instant> licenseExpiresAt() { synchronized (lock) { return Optional.ofNullable(licenseExpiresAt); } }
    /** The license's end plus its grace; empty when it has no end. */
    public Optional<Instant> licenseGraceEndsAt() { synchronized (lock) { return Optional.ofNullable(licenseGraceEndsAt); } }
    public boolean inGrace() { synchronized (lock) { return inGrace; } }
    /** The highest product version the license covers; empty: any. */
    public Optional<String> maxVersion() { synchronized (lock) { return Optional.ofNullable(maxVersion); } }
    /** True from the moment the seat is known gone until it is regained. */
    public boolean lost() { synchronized (lock) { return lost; } }
    /** Why it was lost: the reason the listener got ("revoked": an operator freed the seat); null while held. */
    public String lostReason() { synchronized (lock) { return lostReason; } }
    public boolean released() { synchronized (lock) { return released; } }
    /** The last verified lease token (the client verifies), else null. */
    public String token() { synchronized (lock) { return token; } }
    /** While the seat is warned for idleness: when the license's idle rule reclaims it; empty: no warning. */
    public Optional<Instant> idleReclaimAt() { synchronized (lock) { return Optional.ofNullable(idleReclaimAt); } }
    /** On a license that shares seats: the sessions sharing this seat, as its acquire said (0: not shared). */
    public int sharedSessions() { synchronized (lock) { return sharedSessions; } }

    /**
     * The product saw user activity now (a keystroke, a command). From the first touch on,
     * every heartbeat carries idle_seconds, the whole seconds since the last one, so a license
     * with an idle rule can warn and then reclaim a seat nobody uses; a product that never
     * touches is never idle. After a warning ({@link LeaseOptions.Listener#onIdleWarning}) the
     * next heartbeat goes at once, so the activity cancels it before the reclaim; after a seat
     * lost as "idle" the seat is asked for again. Cheap, never waits on the network: call it
     * on every input, from any thread.
     */
    public void touch() {
        touch(Duration.ZERO);
    }

    /**
     * {@link #touch()} for activity seen that long ago (the latest call wins), so that a
     * product may pass the system's own idle time (since the last input event).
     */
    public void touch(Duration ago) {
        Duration most = Duration.ofSeconds(MAX_IDLE_SECONDS); // idle_seconds' bound: no overflow
        long agoNanos = ago == null || ago.isNegative() ? 0 : (ago.compareTo(most) > 0 ? most : ago).toNanos();
        boolean urgent;
        synchronized (lock) {
            touched = true;
            lastTouch = System.nanoTime() - agoNanos;
            urgent = idleUrgent();
        }
        if (urgent) {
            wakeUp();
        }
    }

    /**
     * A busy scope, {@code try (var busy = lease.busy()) { render(); }}: while one is open
     * (they nest), heartbeats carry busy: true and the seat is never warned nor reclaimed for
     * idleness (a render, a solve). Closing it twice closes it once.
     */
    public Busy busy() {
        boolean urgent;
        synchronized (lock) {
            busyScopes++;
            urgent = idleUrgent();
        }
        if (urgent) {
            wakeUp();
        }
        return new Busy();
    }

    /** An open busy scope ({@link #busy}); close ends it. */
    public final class Busy implements AutoCloseable {
        private final AtomicBoolean open = new AtomicBoolean(true);

        private Busy() {}

        @Override
        public void close() {
            if (open.compareAndSet(true, false)) {
                synchronized (lock) {
                    busyScopes--;
                }
            }
        }
    }

    /**
     * Under lock: the heartbeat thread must act now, not at its next beat: activity came back
     * to a seat lost for idleness (asked for again), or a warning can be cancelled by what the
     * warned heartbeat did not say (a touch a whole second newer, or busy). Once per answer
     * (or loss): it marks the wake as sent.
     */
    private boolean idleUrgent() {
        if (woken) {
            return false;
        }
        if (lost && "idle".equals(lostReason)) {
            if (busyScopes == 0 && !(touched && lastTouch - lostIdleAt > 0)) {
                return false;
            }
        } else if (idleReclaimAt != null) {
            boolean newer = touched && (!sentTouched || lastTouch - sentTouch >= 1_000_000_000L);
            if (!newer && (busyScopes == 0 || sentBusy)) {
                return false;
            }
        } else {
            return false;
        }
        woken = true;
        return true;
    }

    /** The heartbeat thread runs its next step now; the caller never waits for it. */
    private void wakeUp() {
        synchronized (releaseLock) {
            wake = true;
            releaseLock.notifyAll();
        }
    }

    private JsonObject acquireBody(boolean queue, String ticket, String requestId) {
        return options.acquire(queue, ticket, requestId).body(licenseId, options.clientId);
    }

    /** Applies a grant or renewal; an idle warning it began (its time), else null. */
    private Instant took(Answer answer, long sentAt) {
        synchronized (lock) {
            if (answer.sessionId() != null && !answer.sessionId().isEmpty()) {
                if (!answer.sessionId().equals(sessionId)) {
                    sharedSessions = 0; // another session: shared or not as its grant says
                }
                sessionId = answer.sessionId();
            }
            if (answer.hasNumber("shared_sessions")) {
                sharedSessions = answer.sharedSessions();
            }
            Instant warning = answer.idleReclaimAt().orElse(null);
            Instant warned = idleReclaimAt == null ? warning : null;
            idleReclaimAt = warning; // absent: the warning, if any, is over
            woken = false; // a new answer: one wake may follow it
            answer.expiresAt().ifPresent(at -> expiresAt = at);
            leaseSeconds = (int) answer.leaseDuration().getSeconds();
            heartbeatIntervalSeconds = (int) answer.heartbeatInterval().getSeconds();
            // an answer without counts (a renewal) keeps the last known ones
            if (answer.hasNumber("seats_used")) {
                seatsUsed = answer.seatsUsed();
            }
            if (answer.hasNumber("seats_total")) {
                seatsTotal = answer.seatsTotal();
            }
            if (answer.hasNumber("seats")) {
                seats = answer.seats();
            }
            overage = answer.overage();
            if (answer.hasEntitlements()) {
                entitlements = answer.entitlements();
            }
            licenseExpiresAt = answer.licenseExpiresAt().orElse(null);
            licenseGraceEndsAt = answer.licenseGraceEndsAt().orElse(null);
            inGrace = answer.inGrace();
            answer.maxVersion().ifPresent(version -> maxVersion = version);
            String leaseToken = Json.string(answer.json(), "lease_token");
            if (leaseToken != null) {
                lastLeaseToken = leaseToken;
                if (client.verifier != null) {
                    token = leaseToken;
                }
            }
            validUntil = sentAt + (long) leaseSeconds * 1_000_000_000L;
            return warned;
        }
    }

    private void acquireFirst(CompletableFuture<?> cancel) {
        long giveUp = options.waitTimeout.isZero() ? 0 : System.nanoTime() + options.waitTimeout.toNanos();
        String ticket = null;
        String requestId = options.requestId;
        for (;;) {
            long sentAt = System.nanoTime();
            SeatException denied;
            // stamped now (request_id, nonce) so that a cancelled attempt can be asked again as is
            JsonObject body = client.stamped(acquireBody(options.wait, ticket, requestId));
            try {
                Answer answer = client.call("acquire", body, SeatClient.Plan.DEFAULT.cancelledBy(cancel));
                requestId = null;
                if (answer.status() != 202) {
                    took(answer, sentAt);
                    return;
                }
                // a place in line (202): paced like a denial, by its retry_after_seconds
                ticket = answer.ticket();
                JsonObject hint = new JsonObject();
                hint.addProperty("retry_after_seconds", Math.max(answer.retryAfter().getSeconds(), 1));
                denied = new SeatException.NoSeatsAvailable(202, "queued", "Waiting in line for a seat.", hint, -1);
                client.log("info", "seatlease: waiting in line for " + licenseId + ", position " + answer.position());
            } catch (SeatException.Cancelled cancelled) {
                client.giveBack(licenseId, body);
                throw cancelled;
            } catch (SeatException.NoSeatsAvailable refused) {
                requestId = null;
                if (!options.wait) {
                    throw refused;
                }
                denied = refused;
            }
            double pause = client.waitPause(denied);
            if (giveUp != 0) {
                double left = (giveUp - System.nanoTime()) / 1e9;
                if (left <= 0) {
                    throw new SeatException.SeatWaitTimeout(409, "seat_wait_timeout",
                            "No seat on " + licenseId + " came free within " + options.waitTimeout.toMillis() + " ms.",
                            denied.bodyJson(), denied.retryAfterHeader());
                }
                pause = Math.min(pause, left);
            }
            client.log("info", "seatlease: no seat on " + licenseId + "; asking again in " + Math.round(pause * 1000) + " ms");
            SeatClient.pause(pause, cancel);
        }
    }

    // -- the heartbeat thread ---------------------------------------------------------------

    private void keep() {
        double delay = beatDelay();
        while (!stopping) {
            synchronized (releaseLock) {
                if (stopping) {
                    return;
                }
                try {
                    if (!wake) {
                        releaseLock.wait(Math.max(1, (long) (delay * 1000)));
                    }
                    wake = false;
                } catch (InterruptedException e) {
                    return;
                }
            }
            if (stopping) {
                return;
            }
            delay = step();
        }
    }

    private double beatDelay() {
        double interval;
        int lease;
        synchronized (lock) {
            interval = heartbeatIntervalSeconds > 0 ? heartbeatIntervalSeconds : 1;
            lease = leaseSeconds;
        }
        if (lease > 0 && lease / 3.0 < interval) {
            interval = lease / 3.0;
        }
        interval = Math.max(interval, 0.2);
        return SeatClient.uniform(interval * 0.75, interval);
    }

    private void failed(boolean reset) {
        synchronized (lock) {
            failures = reset ? 0 : failures + 1;
        }
    }

    private double backoff(double retryAfter, double ceiling) {
        boolean isLost;
        int failuresNow;
        int interval;
        long left;
        synchronized (lock) {
            isLost = lost;
            failuresNow = failures;
            interval = heartbeatIntervalSeconds;
            left = validUntil - System.nanoTime();
        }
        double maxBackoff = Times.seconds(client.maxBackoff());
        if (ceiling == 0) {
            ceiling = Math.min(Math.max(interval, 0.2), maxBackoff);
            double leftSeconds = left / 1e9;
            if (!isLost && leftSeconds > 0 && leftSeconds / 3 < ceiling) {
                ceiling = Math.max(leftSeconds / 3, 0.05);
            }
        }
        return client.backoffDelay(failuresNow - 1, retryAfter, ceiling);
    }

    /** The slow pause after a refusal no retry cures: 5 minutes, give or take 10 %. */
    private static double finalRefusalPause() {
        double pause = Times.seconds(FINAL_REFUSAL_PAUSE);
        return SeatClient.uniform(pause * 0.9, pause * 1.1);
    }

    private static boolean isFinal(SeatException refused) {
        return refused.status() == 403 && FINAL_CODES.contains(refused.code());
    }

    private void lose(String reason, String warning) {
        synchronized (lock) {
            if (lost || stopping) {
                return;
            }
            lost = true;
            lostReason = reason;
            idleReclaimAt = null;
            if (reason.equals("idle")) {
                lostIdleAt = System.nanoTime();
                woken = false;
            }
        }
        client.log("warning", warning);
        try {
            options.listener.onLost(this, reason);
        } catch (RuntimeException e) {
            client.log("warning", "seatlease: onLost failed: " + e);
        }
    }

    private void lose(String reason) {
        lose(reason, "seatlease: seat on " + licenseId + " lost (" + reason + "); "
                + (reason.equals("idle") ? "asked for again once in use" : "re-acquiring"));
    }

    /** Reclaimed for idleness, and nobody has used the product since. */
    private boolean idleUntilActive() {
        synchronized (lock) {
            return lost && "idle".equals(lostReason) && busyScopes == 0
                    && !(touched && lastTouch - lostIdleAt > 0);
        }
    }

    /** After an answer: activity that came while the warned heartbeat was on its way sends the next at once. */
    private boolean urgentNow() {
        synchronized (lock) {
            return idleUrgent();
        }
    }

    private void warn(Instant reclaimAt) {
        client.log("warning", "seatlease: seat on " + licenseId + " idle: reclaimed at " + reclaimAt + " unless in use");
        if (!stopping) {
            try {
                options.listener.onIdleWarning(this, reclaimAt);
            } catch (RuntimeException e) {
                client.log("warning", "seatlease: onIdleWarning failed: " + e);
            }
        }
    }

    private double step() {
        if (idleUntilActive()) {
            return IDLE_LOST_PAUSE; // touch or busy wakes the thread
        }
        try {
            return lost() ? regain() : beat();
        } catch (SeatException.Cancelled cancelled) {
            return 0; // closing: the loop ends
        } catch (SeatException.BackendUnavailable failure) {
            if (stopping) {
                return 0;
            }
            failed(false);
            boolean past;
            synchronized (lock) {
                past = !lost && System.nanoTime() + DEADLINE_SLACK_NANOS - validUntil >= 0;
            }
            if (past) {
                lose("unreachable"); // no renewal reached the server before the deadline
            }
            client.log("info", "seatlease: " + licenseId + " unreachable (" + failure.getMessage() + "); retrying");
            return backoff(failure.backendRetryAfter(), 0);
        } catch (RuntimeException failure) {
            if (stopping) {
                return 0;
            }
            client.log("info", "seatlease: heartbeat step failed: " + failure);
            failed(false);
            return backoff(-1, 0);
        }
    }

    /** A heartbeat's body, with the product's activity: idle_seconds from the first touch on, busy in a scope. */
    private JsonObject heartbeatBody(String session, String leaseToken, long now) {
        JsonObject body = SeatClient.sessionBody(licenseId, session);
        if (leaseToken != null) {
            body.addProperty("lease_token", leaseToken);
        }
        synchronized (lock) {
            if (leaseToken == null) { // what the heartbeat said (a recovery repeats it)
                sentTouched = touched;
                sentTouch = lastTouch;
                sentBusy = busyScopes > 0;
            }
            if (touched) {
                long idle = Math.max(0, (now - lastTouch) / 1_000_000_000L);
                body.addProperty("idle_seconds", Math.min(idle, MAX_IDLE_SECONDS));
            }
            if (busyScopes > 0) {
                body.addProperty("busy", true);
            }
        }
        return body;
    }

    private double beat() {
        String session;
        long deadline;
        synchronized (lock) {
            session = sessionId;
            deadline = validUntil;
        }
        long sentAt = System.nanoTime();
        // a renewal that arrives after the deadline renews nothing: the call ends by then
        SeatClient.Plan plan = SeatClient.Plan.DEFAULT.withRetries(0).until(deadline);
        try {
            Instant warned = took(client.call("heartbeat", heartbeatBody(session, null, sentAt), plan), sentAt);
            failed(true);
            if (warned != null) {
                warn(warned);
            }
            // activity since this heartbeat left: the next one cancels the warning now
            return urgentNow() ? 0 : beatDelay();
        } catch (SeatException.SessionExpired gone) {
            if (gone.reason().equals("unknown") && recover(session, plan)) {
                return beatDelay();
            }
            lose(gone.reason());
            return 0; // ask for the seat again at once
        } catch (SeatException.BackendUnavailable | SeatException.Cancelled unavailable) {
            throw unavailable;
        } catch (SeatException refused) {
            if (stopping) {
                throw refused;
            }
            failed(false);
            if (isFinal(refused)) {
                // the server ended the seat (its term, a policy): say so once, ask again slowly
                synchronized (lock) {
                    finalCodeSaid = refused.code();
                }
                lose(refused.code(), "seatlease: seat on " + licenseId + " lost (" + refused.code() + "): "
                        + refused.getMessage() + "; asking again every 5 minutes");
                return finalRefusalPause();
            }
            lose(refused.code()); // 401 (key revoked), 404, a bad token: cannot be renewed
            return backoff(-1, Times.seconds(client.maxBackoff()));
        }
    }

    /**
     * After a 410 "unknown" (the server lost the session, e.g. with a region): the same
     * heartbeat once more with the lease's last token, which the server may take the seat
     * back by. True when it did: the lease goes on as if nothing happened. Never after
     * "expired" or "revoked" (an operator's revoke is final: its token is refused).
     */
    private boolean recover(String session, SeatClient.Plan plan) {
        String leaseToken;
        synchronized (lock) {
            leaseToken = lastLeaseToken;
        }
        if (leaseToken == null) {
            return false;
        }
        long sentAt = System.nanoTime();
        try {
            took(client.call("heartbeat", heartbeatBody(session, leaseToken, sentAt), plan), sentAt);
        } catch (SeatException.Cancelled cancelled) {
            throw cancelled;
        } catch (SeatException refused) {
            client.log("info", "seatlease: " + licenseId + " not recovered by its token: " + refused.getMessage());
            return false;
        }
        failed(true);
        client.log("info", "seatlease: seat on " + licenseId + " kept by its token after the server lost the session");
        return true;
    }

    private double regain() {
        long sentAt = System.nanoTime();
        Answer answer;
        try {
            answer = client.call("acquire", acquireBody(false, null, null), SeatClient.Plan.DEFAULT.withRetries(0));
        } catch (SeatException.NoSeatsAvailable full) {
            failed(true);
            return client.waitPause(full);
        } catch (SeatException.BackendUnavailable | SeatException.Cancelled unavailable) {
            throw unavailable;
        } catch (SeatException refused) {
            if (stopping) {
                throw refused;
            }
            failed(false);
            if (isFinal(refused)) {
                boolean said;
                synchronized (lock) {
                    said = refused.code().equals(finalCodeSaid);
                    finalCodeSaid = refused.code();
                }
                client.log(said ? "info" : "warning", "seatlease: re-acquire of " + licenseId + " refused ("
                        + refused.code() + "): " + refused.getMessage() + "; asking again every 5 minutes");
                return finalRefusalPause();
            }
            client.log("info", "seatlease: re-acquire of " + licenseId + " refused: " + refused.getMessage());
            return backoff(-1, Times.seconds(client.maxBackoff()));
        }
        took(answer, sentAt);
        synchronized (lock) {
            lost = false;
            lostReason = null;
            finalCodeSaid = null;
        }
        failed(true);
        client.log("warning", "seatlease: seat on " + licenseId + " regained");
        if (!stopping) {
            try {
                options.listener.onRegained(this);
            } catch (RuntimeException e) {
                client.log("warning", "seatlease: onRegained failed: " + e);
            }
        }
        return beatDelay();
    }

    /**
     * Stops the heartbeats (ending a heartbeat in flight) and releases the seat, the whole
     * within the client's release timeout. Once: later calls give the first one's outcome. A
     * failure is thrown; the seat then expires by itself.
     */
    public void release() {
        releaseBy(System.nanoTime() + client.releaseTimeout().toNanos());
    }

    void releaseBy(long giveUp) {
        boolean onHeartbeatThread = Thread.currentThread() == thread;
        String session;
        boolean wasLost;
        synchronized (releaseLock) {
            if (releaseDone) {
                if (releaseError != null) {
                    throw releaseError;
                }
                return;
            }
            releaseDone = true;
            stopping = true;
            releaseLock.notifyAll();
        }
        try {
            if (!onHeartbeatThread && thread != null) {
                thread.interrupt(); // ends a call in flight
                joinBy(giveUp);
            }
            synchronized (lock) {
                released = true;
                session = sessionId;
                wasLost = lost;
            }
            if (session == null || wasLost) {
                return;
            }
            try {
                client.releaseBy(licenseId, session, giveUp);
            } catch (SeatException failure) {
                client.log("warning", "seatlease: release of " + licenseId + " failed: " + failure.getMessage());
                synchronized (releaseLock) {
                    releaseError = failure;
                }
                throw failure;
            }
        } finally {
            client.unregister(this);
        }
    }

    private void joinBy(long giveUp) {
        long left = giveUp - System.nanoTime();
        if (left <= 0) {
            return;
        }
        try {
            thread.join(Math.max(1, left / 1_000_000L));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** {@link #release}, never throwing (try-with-resources). */
    @Override
    public void close() {
        closeBy(System.nanoTime() + client.releaseTimeout().toNanos());
    }

    void closeBy(long giveUp) {
        try {
            releaseBy(giveUp);
        } catch (SeatException e) {
            // logged by release; the seat expires by itself
        }
    }

    @Override
    public String toString() {
        return "Lease(" + licenseId + ", " + options.clientId + ", session " + sessionId() + ")";
    }
}
