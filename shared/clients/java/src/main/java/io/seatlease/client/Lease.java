package io.seatlease.client;

import com.google.gson.JsonObject;
import java.util.List;

/**
 * A seat held by this process: a daemon thread heartbeats at the server's interval (at most
 * a third of the lease, with jitter), retries faster as the deadline nears, marks the lease
 * lost when no renewal got through in time ("unreachable") or on a 410 ("expired",
 * "unknown"), and acquires again at once. {@link #close} stops it and releases the seat
 * (never throws; use {@link #release} to see a failure). Thread-safe.
 */
public final class Lease implements AutoCloseable {
    private final SeatClient client;
    private final String licenseId;
    private final LeaseOptions options;

    private final Object lock = new Object();
    private String sessionId;
    private double expiresAt;
    private int leaseSeconds;
    private int heartbeatIntervalSeconds;
    private int seatsUsed;
    private int seatsTotal;
    private int seats = 1;
    private boolean overage;
    private List<String> entitlements;
    private double licenseExpiresAt;
    private double licenseGraceEndsAt;
    private boolean inGrace;
    private String maxVersion;
    private boolean lost;
    private String lostReason;
    private boolean released;
    private String token;
    private long validUntil; // System.nanoTime(): the seat lapses then without a renewal
    private int failures;

    private volatile boolean stopping;
    private Thread thread;
    private final Object releaseLock = new Object();
    private boolean releaseDone;
    private SeatException releaseError;

    private Lease(SeatClient client, String licenseId, LeaseOptions options) {
        this.client = client;
        this.licenseId = licenseId;
        this.options = options;
    }

    static Lease open(SeatClient client, String licenseId, LeaseOptions options) {
        if (licenseId == null || options == null || options.clientId == null) {
            throw new IllegalArgumentException("licenseId and a clientId are required");
        }
        Lease lease = new Lease(client, licenseId, options);
        lease.acquireFirst();
        lease.thread = new Thread(lease::keep, "seatlease-heartbeat-" + licenseId);
        lease.thread.setDaemon(true);
        lease.thread.start();
        return lease;
    }

    public String licenseId() { return licenseId; }
    public String clientId() { return options.clientId; }
    /** The session holding the seat now (a new one after the seat was lost and regained). */
    public String sessionId() { synchronized (lock) { return sessionId; } }
    /** The server's deadline, Unix seconds. */
    public double expiresAt() { synchronized (lock) { return expiresAt; } }
    public int leaseSeconds() { synchronized (lock) { return leaseSeconds; } }
    public int heartbeatIntervalSeconds() { synchronized (lock) { return heartbeatIntervalSeconds; } }
    public int seatsUsed() { synchronized (lock) { return seatsUsed; } }
    public int seatsTotal() { synchronized (lock) { return seatsTotal; } }
    /** This lease's weight: how many of the license's seats it counts as (1 when the server does not say). */
    public int seats() { synchronized (lock) { return seats; } }
    /** The same as {@link #seats()}, for bean-style callers. */
    public int getSeats() { return seats(); }
    public boolean overage() { synchronized (lock) { return overage; } }
    /** The license's terms, as the last answer gave them (and its token signed them): the
     * entitlements (null: none given), the license's end and its grace's end (Unix seconds,
     * 0: none), whether it is in its grace, the highest product version (null: any). */
    public List<String> entitlements() { synchronized (lock) { return entitlements; } }
    public double licenseExpiresAt() { synchronized (lock) { return licenseExpiresAt; } }
    public double licenseGraceEndsAt() { synchronized (lock) { return licenseGraceEndsAt; } }
    public boolean inGrace() { synchronized (lock) { return inGrace; } }
    public String maxVersion() { synchronized (lock) { return maxVersion; } }
    /** True from the moment the seat is known gone until it is regained. */
    public boolean lost() { synchronized (lock) { return lost; } }
    public String lostReason() { synchronized (lock) { return lostReason; } }
    public boolean released() { synchronized (lock) { return released; } }
    /** The last verified lease token (the client verifies), else null. */
    public String token() { synchronized (lock) { return token; } }

    private JsonObject body(boolean queue, String ticket, String requestId) {
        return SeatClient.acquireBody(licenseId, options.clientId, new SeatClient.AcquireOptions()
                .leaseSeconds(options.leaseSeconds).metadata(options.metadata).user(options.user)
                .host(options.host).queue(queue).ticket(ticket).requestId(requestId)
                .fingerprint(options.fingerprint).seats(options.seats));
    }

    private void took(Answer answer, long sentAt) {
        synchronized (lock) {
            if (answer.sessionId() != null) {
                sessionId = answer.sessionId();
            }
            if (answer.expiresAt() > 0) {
                expiresAt = answer.expiresAt();
            }
            leaseSeconds = answer.leaseSeconds();
            heartbeatIntervalSeconds = answer.heartbeatIntervalSeconds();
            seatsUsed = answer.seatsUsed();
            seatsTotal = answer.seatsTotal();
            seats = answer.seats();
            overage = answer.overage();
            if (answer.entitlements() != null) {
                entitlements = answer.entitlements();
            }
            licenseExpiresAt = answer.licenseExpiresAt();
            licenseGraceEndsAt = answer.licenseGraceEndsAt();
            inGrace = answer.inGrace();
            if (answer.maxVersion() != null) {
                maxVersion = answer.maxVersion();
            }
            if (client.verifier != null && answer.token() != null) {
                token = answer.token();
            }
            validUntil = sentAt + (long) leaseSeconds * 1_000_000_000L;
        }
    }

    private void acquireFirst() {
        long giveUp = options.waitTimeout.isZero() ? 0 : System.nanoTime() + options.waitTimeout.toNanos();
        String ticket = null;
        String requestId = options.requestId;
        for (;;) {
            long sentAt = System.nanoTime();
            SeatException denied;
            try {
                Answer answer = client.call("acquire", body(options.wait, ticket, requestId), -1, 0);
                requestId = null;
                if (answer.status() != 202) {
                    took(answer, sentAt);
                    return;
                }
                // a place in line (202): paced like a denial, by its retry_after_seconds
                ticket = answer.ticket();
                JsonObject hint = new JsonObject();
                hint.addProperty("retry_after_seconds", Math.max(answer.retryAfterSeconds(), 1));
                denied = new SeatException.NoSeatsAvailable(202, "queued", "Waiting in line for a seat.", hint, -1);
                client.log("info", "seatlease: waiting in line for " + licenseId + ", position " + answer.position());
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
                            "No seat on " + licenseId + " came free within " + SeatClient.seconds(options.waitTimeout) + " s.",
                            denied.body(), denied.retryAfterHeader());
                }
                pause = Math.min(pause, left);
            }
            client.log("info", "seatlease: no seat on " + licenseId + "; retrying in " + pause + " s");
            SeatClient.pause(pause);
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
                    releaseLock.wait(Math.max(1, (long) (delay * 1000)));
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
        if (ceiling == 0) {
            ceiling = Math.min(Math.max(interval, 0.2), SeatClient.seconds(client.options.maxBackoff));
            double leftSeconds = left / 1e9;
            if (!isLost && leftSeconds > 0 && leftSeconds / 3 < ceiling) {
                ceiling = Math.max(leftSeconds / 3, 0.05);
            }
        }
        return client.backoffDelay(failuresNow - 1, retryAfter, ceiling);
    }

    private void lose(String reason) {
        synchronized (lock) {
            if (lost || stopping) {
                return;
            }
            lost = true;
            lostReason = reason;
        }
        client.log("warning", "seatlease: seat on " + licenseId + " lost (" + reason + "); re-acquiring");
        try {
            options.listener.onLost(this, reason);
        } catch (RuntimeException e) {
            client.log("warning", "seatlease: onLost failed: " + e);
        }
    }

    private double step() {
        try {
            return lost() ? regain() : beat();
        } catch (SeatException.BackendUnavailable failure) {
            if (stopping) {
                return 0;
            }
            failed(false);
            boolean past;
            synchronized (lock) {
                past = !lost && System.nanoTime() > validUntil;
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

    private double beat() {
        JsonObject body = new JsonObject();
        body.addProperty("license_id", licenseId);
        body.addProperty("session_id", sessionId());
        long sentAt = System.nanoTime();
        try {
            took(client.call("heartbeat", body, 0, 0), sentAt);
            failed(true);
            return beatDelay();
        } catch (SeatException.SessionExpired gone) {
            lose(gone.reason());
            return 0; // ask for the seat again at once
        } catch (SeatException.BackendUnavailable unavailable) {
            throw unavailable;
        } catch (SeatException refused) {
            if (stopping || refused.code().equals("cancelled")) {
                throw refused;
            }
            lose(refused.code()); // 401 (key revoked), 403, 404, a bad token: cannot be renewed
            failed(false);
            return backoff(-1, SeatClient.seconds(client.options.maxBackoff));
        }
    }

    private double regain() {
        long sentAt = System.nanoTime();
        Answer answer;
        try {
            answer = client.call("acquire", body(false, null, null), 0, 0);
        } catch (SeatException.NoSeatsAvailable full) {
            failed(true);
            return client.waitPause(full);
        } catch (SeatException.BackendUnavailable unavailable) {
            throw unavailable;
        } catch (SeatException refused) {
            if (stopping || refused.code().equals("cancelled")) {
                throw refused;
            }
            client.log("info", "seatlease: re-acquire of " + licenseId + " refused: " + refused.getMessage());
            failed(false);
            return backoff(-1, SeatClient.seconds(client.options.maxBackoff));
        }
        took(answer, sentAt);
        synchronized (lock) {
            lost = false;
            lostReason = null;
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
     * Stops the heartbeats (waiting for the thread, unless called from a listener on it) and
     * releases the seat within the client's release timeout. Once: later calls give the first
     * one's outcome. A failure is thrown; the seat then expires by itself.
     */
    public void release() {
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
        if (!onHeartbeatThread && thread != null) {
            thread.interrupt(); // ends a call in flight
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
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
            client.releaseWithin(licenseId, session);
        } catch (SeatException failure) {
            client.log("warning", "seatlease: release of " + licenseId + " failed: " + failure.getMessage());
            synchronized (releaseLock) {
                releaseError = failure;
            }
            throw failure;
        }
    }

    /** {@link #release}, never throwing (try-with-resources). */
    @Override
    public void close() {
        try {
            release();
        } catch (SeatException e) {
            // logged by release; the seat expires by itself
        }
    }

    @Override
    public String toString() {
        return "Lease(" + licenseId + ", " + options.clientId + ", session " + sessionId() + ")";
    }
}
