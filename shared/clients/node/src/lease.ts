/**
 * A held seat: `Lease` (what the product sees) and `Keeper` (the first acquire, then one
 * heartbeat, or one re-acquire while the seat is lost, per step, on a timer).
 */

import { Activity, type Report } from "./activity.js";
import { BackendUnavailable, LicenseSuspended, NoSeatsAvailable, SeatError, SeatWaitTimeout, SessionExpired } from "./errors.js";
import { parseTime } from "./time.js";
import { acquireBody, sleep, type AbortSignalLike, type CallPlan, type Identity, type Json, type Logger, type Machine, type Needs, type QueuePlace, type Weight } from "./transport.js";
import type { SignedFunction } from "./verify.js";

/** What a `Keeper` asks of its client (`SeatClient` is one): calls, pacing and the log. @internal */
export interface LeaseClient {
  readonly maxBackoffMs: number;
  readonly log: Logger;
  call(fn: SignedFunction, body: Json, plan?: CallPlan): Promise<Json>;
  waitPause(denied: NoSeatsAvailable): number;
  backoffDelay(attempt: number, retryAfterSeconds: number | undefined, capMs: number): number;
  releaseQuietly(licenseId: string, sessionId: string, budgetMs?: number): Promise<void>;
}

/**
 * A re-acquire refused with a 403 (the license's term ended or has not begun, it is
 * suspended, it does not entitle this product, version or user) stays refused until an
 * operator acts: asked again only this rarely (plus up to 20 % jitter), so that a renewal
 * is noticed by itself without a stream of refused requests and log lines.
 */
export const FINAL_REFUSAL_PAUSE_MS = 300_000;

/**
 * A seat reclaimed for idleness is asked for again on the product's next activity (a touch
 * or a busy scope wakes the keeper), not before: re-acquired at once, an idle product would
 * take its seat straight back. Meanwhile the keeper only sleeps.
 */
export const IDLE_LOST_PAUSE_MS = 3_600_000;

export type OnLost = (lease: Lease, reason: string) => void;
export type OnRegained = (lease: Lease) => void;
/** The server warned that the idle seat may be reclaimed from `reclaimAt`. */
export type OnIdleWarning = (lease: Lease, reclaimAt: Date) => void;

export interface LeaseOptions extends Identity, Needs, Weight, Machine {
  /** This running copy (acquiring again with it returns the same seat). */
  clientId: string;
  metadata?: Json;
  leaseSeconds?: number;
  /**
   * Wait for a seat (Retry-After paced) instead of throwing `NoSeatsAvailable`; on a
   * license with a wait queue, in line (`queue: true`, the place kept with its ticket).
   */
  wait?: boolean;
  /** With `wait`: give up after this many ms (`SeatWaitTimeout`); default: never. */
  timeoutMs?: number;
  /** Called once when the seat is known to be gone (reason: `expired`, `unknown`, `revoked` (an operator freed the seat), `idle` (reclaimed for idleness: asked for again only on the next `touch()` or busy scope), `unreachable` (no renewal completed by the lease's deadline: the server is down, or its answers stall), or the refusal's code: `license_expired` when the license's term ended). */
  onLost?: OnLost;
  /** Called when a lost seat was acquired again (a new session). */
  onRegained?: OnRegained;
  /**
   * Called once per warning when a renewal says the idle seat may be reclaimed from
   * `reclaimAt` (a license with an idle timeout; `lease.idleReclaimAt` says it too), so the
   * product can tell its user; `lease.touch()` or a busy scope before then cancels it.
   */
  onIdleWarning?: OnIdleWarning;
  /** Abort the first acquire (and its waiting). */
  signal?: AbortSignalLike;
}

/**
 * A seat held by this process, updated in place by heartbeats and re-acquires.
 *
 * Idle reporting (a license with an idle timeout): call `touch()` on user activity and run
 * work that must not be interrupted in `busy(async () => ...)` (or between `beginBusy()` and
 * `endBusy()`); heartbeats then say how long the user has been idle.
 */
export class Lease {
  readonly licenseId: string;
  readonly clientId: string;
  readonly metadata: Json | undefined;
  sessionId = "";
  /** The server's deadline. */
  expiresAt: Date | undefined;
  leaseSeconds = 0;
  heartbeatIntervalSeconds = 0;
  seatsUsed = 0;
  seatsTotal = 0;
  /** This lease's weight: how many of the license's seats it counts as (1 from a server that does not say). */
  seats = 1;
  overage = false;
  /** True from the moment the seat is known to be gone until it is regained. */
  lost = false;
  /** Why it was lost (the reason `onLost` got: `revoked` when an operator freed the seat); undefined while held. */
  lostReason: string | undefined;
  released = false;
  /**
   * The last lease token of this session (verified with `verify`). Kept whether or not it
   * is verified: it is the proof a heartbeat shows to keep the seat after the server lost
   * the session (a region's loss). Undefined from a server that sends none.
   */
  token: string | undefined;
  /** What the license entitles to ([] when it names nothing). */
  entitlements: string[] = [];
  /** When the license expires (its grace may run after it); undefined: no end. */
  licenseExpiresAt: Date | undefined;
  /** The license is past its expiry, in its grace. */
  inGrace = false;
  /** The highest product version the license entitles to; undefined: any. */
  maxVersion: string | undefined;
  /** Set while the last renewal carried an idle warning: from then the seat may be reclaimed for idleness. */
  idleReclaimAt: Date | undefined;
  readonly #close: () => Promise<void>;
  readonly #activity: Activity;

  private constructor(licenseId: string, clientId: string, metadata: Json | undefined, close: () => Promise<void>, activity: Activity) {
    this.licenseId = licenseId;
    this.clientId = clientId;
    this.metadata = metadata;
    this.#close = close;
    this.#activity = activity;
  }

  /** A lease is made by `SeatClient.lease()` only. @internal */
  static create(licenseId: string, clientId: string, metadata: Json | undefined, close: () => Promise<void>, activity: Activity = new Activity()): Lease {
    return new Lease(licenseId, clientId, metadata, close, activity);
  }

  /**
   * The product saw user activity (a key press, a command) `secondsAgo` seconds ago (default
   * now; the latest call wins, so the system's own idle time may be passed). Cheap and
   * synchronous: call it on every input. From the first call on, each heartbeat sends the
   * whole seconds since the last touch (`idle_seconds`); a product that never calls it is
   * never idle. While warned (`idleReclaimAt`), a touch sends a heartbeat at once (in the
   * background), which cancels the warning; after a loss for idleness it asks for a seat
   * again. Throws a `RangeError` for a negative or non-finite `secondsAgo`.
   */
  touch(secondsAgo = 0): void {
    this.#activity.touch(secondsAgo);
  }

  /**
   * Run `work` as work that must not be interrupted (a render, a solve): while any busy
   * scope is open (they nest) heartbeats send `busy: true` and the seat is never reclaimed
   * for idleness. Resolves (or rejects) as `work` does. Does not count as a touch.
   */
  async busy<T>(work: () => T | Promise<T>): Promise<T> {
    this.#activity.beginBusy();
    try {
      return await work();
    } finally {
      this.#activity.endBusy();
    }
  }

  /** Open a busy scope (see `busy`); each needs its `endBusy()`. */
  beginBusy(): void {
    this.#activity.beginBusy();
  }

  /** Close a busy scope opened by `beginBusy()` (an `Error` without one open). */
  endBusy(): void {
    this.#activity.endBusy();
  }

  /**
   * Stop the heartbeats and release the seat (once; later calls do nothing), within the
   * client's `releaseTimeoutMs` (a heartbeat in flight is abandoned). Never throws. Where
   * the runtime has `Symbol.asyncDispose`, `await using lease = ...` calls it.
   */
  close(): Promise<void> {
    return this.#close();
  }

  /** The answer of a grant or renewal, applied (fields it omits keep their values). @internal */
  apply(body: Json): void {
    if (typeof body["session_id"] === "string" && body["session_id"] !== this.sessionId) {
      this.sessionId = body["session_id"];
      this.token = undefined; // a token names one session: never show another's
    }
    if (typeof body["lease_expires_at"] === "string") {
      const ms = parseTime(body["lease_expires_at"]);
      if (ms !== undefined) this.expiresAt = new Date(ms);
    }
    const whole = (name: string) => (typeof body[name] === "number" && Number.isInteger(body[name]) ? (body[name] as number) : undefined);
    this.leaseSeconds = whole("lease_seconds") ?? this.leaseSeconds;
    this.heartbeatIntervalSeconds = whole("heartbeat_interval_seconds") ?? this.heartbeatIntervalSeconds;
    this.seatsUsed = whole("seats_used") ?? this.seatsUsed;
    this.seatsTotal = whole("seats_total") ?? this.seatsTotal;
    const weight = whole("seats") ?? 1; // absent from older servers: a plain lease
    this.seats = weight >= 1 ? weight : 1;
    if ("overage" in body) this.overage = Boolean(body["overage"]);
    if (typeof body["lease_token"] === "string") this.token = body["lease_token"];
    if (Array.isArray(body["entitlements"])) this.entitlements = body["entitlements"].map(String);
    if (typeof body["license_expires_at"] === "string") {
      const ms = parseTime(body["license_expires_at"]);
      if (ms !== undefined) this.licenseExpiresAt = new Date(ms);
    }
    this.inGrace = body["in_grace"] === true;
    if (typeof body["max_version"] === "string") this.maxVersion = body["max_version"];
  }
}

// `await using`: defined at run time where the runtime has the symbol (Node 20+), not in
// the declarations, which then need no newer lib than ES2022 (nor @types/node).
const asyncDispose = (Symbol as unknown as { asyncDispose?: symbol }).asyncDispose;
if (typeof asyncDispose === "symbol") {
  Object.defineProperty(Lease.prototype, asyncDispose, {
    value: function (this: Lease): Promise<void> {
      return this.close();
    },
    writable: true,
    configurable: true,
  });
}

function uniform(low: number, high: number): number {
  return low + Math.random() * (high - low);
}

/** Keeps one lease; @internal its timer only schedules `step`s and never holds the process open. */
export class Keeper {
  readonly lease: Lease;
  started = false;
  private readonly client: LeaseClient;
  private readonly options: LeaseOptions;
  private readonly forget: (keeper: Keeper) => void;
  private stopped = false;
  private failures = 0;
  private validUntil = 0; // performance.now() when the seat lapses without a renewal
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inFlight: Promise<void> | undefined;
  private closing: Promise<void> | undefined;
  private place: QueuePlace = {}; // queue and ticket while waiting in line
  private announced: string | undefined; // the refusal already said (warn once, info after) until the seat is back
  private readonly stop = new AbortController(); // ends a heartbeat or re-acquire in flight at close()
  private readonly activity: Activity;
  private wakePending = false; // woken while a step was in flight: the next one goes at once

  constructor(client: LeaseClient, licenseId: string, options: LeaseOptions, forget: (keeper: Keeper) => void, activity: Activity = new Activity()) {
    this.client = client;
    this.options = options;
    this.forget = forget;
    this.activity = activity;
    activity.wake = () => this.wakeUp();
    this.lease = Lease.create(licenseId, options.clientId, options.metadata, () => this.close(), activity);
  }

  private body(): Json {
    // Every acquire, the first and each after a loss, asks for the same weight.
    const { user, host, entitlements, version, seats, fingerprint } = this.options;
    return acquireBody(this.lease.licenseId, this.lease.clientId, this.options.leaseSeconds, this.options.metadata, { user, host, entitlements, version, seats, fingerprint, ...this.place });
  }

  private took(reply: Json, sentAt: number): void {
    this.lease.apply(reply);
    // Counted from when the request left: the server's deadline is at least this late.
    this.validUntil = sentAt + this.lease.leaseSeconds * 1000;
  }

  async acquireFirst(wait: boolean, timeoutMs: number | undefined, signal?: AbortSignalLike): Promise<void> {
    const giveUp = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
    // Waiting asks for a place in line; a license without a queue ignores it.
    this.place = wait ? { queue: true } : {};
    for (;;) {
      const sentAt = performance.now();
      let denied: NoSeatsAvailable;
      try {
        const reply = await this.client.call("acquire", this.body(), { signal });
        if (reply["queued"] !== true) {
          this.place = {};
          this.took(reply, sentAt);
          return;
        }
        // A place in line (202): paced like a denial, by its retry_after_seconds.
        denied = new NoSeatsAvailable(202, "queued", "Waiting in line for a seat.", reply);
        if (typeof reply["ticket"] === "string") this.place = { queue: true, ticket: reply["ticket"] };
        this.client.log("info", `seatlease: waiting in line for ${this.lease.licenseId}, position ${String(reply["position"])}`);
      } catch (error) {
        if (!(error instanceof NoSeatsAvailable)) throw error;
        denied = error;
      }
      if (!wait) throw denied;
      const left = giveUp === undefined ? undefined : giveUp - performance.now();
      if (left !== undefined && left <= 0) {
        throw new SeatWaitTimeout(409, "seat_wait_timeout", `No seat on ${this.lease.licenseId} came free within ${timeoutMs} ms.`, denied.body, denied.retryAfterHeader);
      }
      const pause = this.client.waitPause(denied);
      this.client.log("info", `seatlease: no seat on ${this.lease.licenseId} (${denied.seatsUsed}/${denied.seatsTotal} in use); retrying in ${Math.round(pause)} ms`);
      await sleep(left === undefined ? pause : Math.min(pause, left), signal);
    }
  }

  // -- the heartbeat loop ----------------------------------------------------------------

  start(): void {
    this.started = true;
    this.schedule(this.beatDelay());
  }

  /** Time to the next heartbeat: the server's interval (at most a third of the lease) minus up to 25 % jitter. */
  beatDelay(): number {
    let interval = this.lease.heartbeatIntervalSeconds || 1;
    if (this.lease.leaseSeconds) interval = Math.min(interval, this.lease.leaseSeconds / 3);
    interval = Math.max(0.2, interval) * 1000;
    return uniform(interval * 0.75, interval);
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.inFlight = this.step().then((next) => {
        this.inFlight = undefined;
        const now = this.wakePending;
        this.wakePending = false;
        this.schedule(now ? 0 : next);
      });
    }, delayMs);
    this.timer.unref(); // like a daemon thread: a lease never keeps the process alive
  }

  /** Run the next step now (a touch that can cancel an idle warning); never waits for it. */
  private wakeUp(): void {
    if (this.stopped || !this.started) return;
    if (this.inFlight !== undefined) {
      this.wakePending = true;
      return;
    }
    clearTimeout(this.timer);
    this.schedule(0);
  }

  /** One heartbeat, or one re-acquire while the seat is lost; the next delay. Never rejects. */
  async step(): Promise<number> {
    if (this.lease.lost && this.activity.awaitsActivity()) return IDLE_LOST_PAUSE_MS; // a touch wakes us
    try {
      return await (this.lease.lost ? this.regain() : this.beat());
    } catch (error) {
      if (this.stopped) return 0; // closed meanwhile: its call was abandoned
      if (error instanceof BackendUnavailable) return this.afterTransient(error);
      this.client.log("warn", `seatlease: heartbeat step failed: ${(error as Error)?.message ?? error}`);
      this.failures += 1;
      return this.backoff(undefined);
    }
  }

  /** A renewal must complete by the lease's deadline (else the seat is lost: `unreachable`), and within `timeoutMs`. */
  private untilDeadline(): CallPlan {
    return { retries: 0, budgetMs: Math.max(50, this.validUntil - performance.now()), signal: this.stop.signal };
  }

  private async beat(): Promise<number> {
    const sent = this.activity.report();
    const body = { license_id: this.lease.licenseId, session_id: this.lease.sessionId, ...sent.fields };
    const sentAt = performance.now();
    let reply: Json;
    try {
      reply = await this.client.call("heartbeat", body, this.untilDeadline());
    } catch (error) {
      if (error instanceof SessionExpired) {
        const recovered = error.reason === "unknown" ? await this.recover(body) : undefined;
        if (recovered === undefined) {
          if (error.reason === "idle") this.activity.lostForIdleness();
          if (!this.stopped) this.lose(error.reason);
          return 0; // ask for the seat again at once (after idleness: on activity)
        }
        reply = recovered;
      } else {
        if (error instanceof BackendUnavailable || !(error instanceof SeatError)) throw error;
        // 401 (key revoked), 403 (the license's term ended or has not begun), 404, a bad
        // token: it cannot be renewed. (A suspended license's held seats keep renewing.)
        if (!this.stopped) this.lose(error.code, error);
        this.failures += 1;
        return this.backoff(undefined, this.client.maxBackoffMs);
      }
    }
    if (this.stopped) return 0;
    this.took(reply, sentAt);
    this.failures = 0;
    return this.warned(reply, sent) ? 0 : this.beatDelay();
  }

  /** The renewal's idle warning applied (`onIdleWarning` once per warning); true when a heartbeat should go at once (activity came meanwhile). */
  private warned(reply: Json, sent: Report): boolean {
    const text = reply["idle_reclaim_at"];
    const ms = typeof text === "string" ? parseTime(text) : undefined;
    const reclaimAt = ms === undefined ? undefined : new Date(ms);
    const newly = reclaimAt !== undefined && this.lease.idleReclaimAt === undefined;
    this.lease.idleReclaimAt = reclaimAt;
    const again = this.activity.renewed(reclaimAt !== undefined, sent);
    if (newly) {
      this.client.log("warn", `seatlease: ${this.lease.licenseId} idle: the seat may be reclaimed from ${String(text)} unless there is activity`);
      this.callback(() => this.options.onIdleWarning?.(this.lease, reclaimAt));
    }
    return again;
  }

  /**
   * After a 410 `unknown` (the server does not know the session: it may have lost its last
   * writes with a region), the same heartbeat once more with the session's last lease
   * token, which the server may take as proof of the seat. The renewal, or undefined: then
   * the seat is lost as before. Only then is the token sent (a normal heartbeat does not
   * carry its 400 bytes; nor after `expired` or `revoked`: an operator's revoke is final,
   * its token refused); the call has a request_id of its own.
   */
  private async recover(body: Json): Promise<Json | undefined> {
    const token = this.lease.token;
    if (token === undefined || this.stopped) return undefined;
    try {
      return await this.client.call("heartbeat", { ...body, lease_token: token }, this.untilDeadline());
    } catch (error) {
      this.client.log("info", `seatlease: ${this.lease.licenseId} not re-admitted: ${(error as Error)?.message ?? error}`);
      return undefined;
    }
  }

  private async regain(): Promise<number> {
    const sentAt = performance.now();
    let reply: Json;
    try {
      reply = await this.client.call("acquire", this.body(), { retries: 0, signal: this.stop.signal });
    } catch (error) {
      if (error instanceof NoSeatsAvailable) {
        this.failures = 0;
        return this.client.waitPause(error);
      }
      if (error instanceof BackendUnavailable || !(error instanceof SeatError)) throw error;
      this.sayRefused(error);
      if (error instanceof LicenseSuspended) {
        // 403: the term ended or has not begun, suspended, not entitled: final until an
        // operator acts. Said once, then asked again only every few minutes.
        this.failures = 0;
        return uniform(FINAL_REFUSAL_PAUSE_MS, FINAL_REFUSAL_PAUSE_MS * 1.2);
      }
      // deleted, key revoked, a bad answer: try now and then
      this.failures += 1;
      return this.backoff(undefined, this.client.maxBackoffMs);
    }
    if (this.stopped) {
      // closed meanwhile: give the new seat straight back
      await this.client.releaseQuietly(this.lease.licenseId, String(reply["session_id"]));
      return 0;
    }
    this.took(reply, sentAt);
    this.lease.lost = false;
    this.lease.lostReason = undefined;
    this.activity.regained();
    this.failures = 0;
    this.announced = undefined;
    this.client.log("warn", `seatlease: seat on ${this.lease.licenseId} regained (session ${this.lease.sessionId})`);
    this.callback(() => this.options.onRegained?.(this.lease));
    return this.beatDelay();
  }

  private afterTransient(error: BackendUnavailable): number {
    this.failures += 1;
    if (!this.lease.lost && performance.now() > this.validUntil) this.lose("unreachable");
    this.client.log("info", `seatlease: ${this.lease.licenseId} unreachable (${error.message}); retrying`);
    return this.backoff(error.retryAfterSeconds);
  }

  /**
   * While the lease runs, never wait longer than one heartbeat interval between attempts,
   * and retry faster as the deadline nears (at most a third of the time left).
   */
  private backoff(retryAfterSeconds: number | undefined, capMs?: number): number {
    let cap = capMs;
    if (cap === undefined) {
      const interval = (this.lease.heartbeatIntervalSeconds || 1) * 1000;
      cap = Math.min(this.client.maxBackoffMs, Math.max(200, interval));
      const left = this.validUntil - performance.now();
      if (!this.lease.lost && left > 0) cap = Math.min(cap, Math.max(50, left / 3));
    }
    return this.client.backoffDelay(this.failures - 1, retryAfterSeconds, cap);
  }

  /** A refused re-acquire: a warning the first time for its code, info after (a refusal that lasts, an ended term, must not fill the product's log). */
  private sayRefused(error: SeatError): void {
    const level = error.code === this.announced ? "info" : "warn";
    this.announced = error.code;
    this.client.log(level, `seatlease: re-acquire of ${this.lease.licenseId} refused: ${error.message}`);
  }

  private lose(reason: string, refused?: SeatError): void {
    if (this.lease.lost) return;
    this.lease.lost = true;
    this.lease.lostReason = reason;
    this.lease.idleReclaimAt = undefined;
    if (reason === "idle") {
      this.client.log("warn", `seatlease: seat on ${this.lease.licenseId} reclaimed for idleness; asked for again on the next activity`);
    } else if (refused === undefined) {
      this.client.log("warn", `seatlease: seat on ${this.lease.licenseId} lost (${reason}); re-acquiring`);
    } else {
      // said here: the same refusal of the re-acquire that follows is not said again
      this.announced = refused.code;
      this.client.log("warn", `seatlease: seat on ${this.lease.licenseId} lost: ${refused.message}`);
    }
    this.callback(() => this.options.onLost?.(this.lease, reason));
  }

  private callback(run: () => void): void {
    try {
      run();
    } catch (error) {
      // the product's callback must not end the heartbeats
      this.client.log("warn", `seatlease: lease callback failed: ${(error as Error)?.message ?? error}`);
    }
  }

  // -- the end -----------------------------------------------------------------------------

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.stopped = true;
      this.lease.released = true;
      clearTimeout(this.timer);
      this.stop.abort(new Error("the lease was closed"));
      const sessionId = this.lease.sessionId;
      const lost = this.lease.lost;
      try {
        // A heartbeat or re-acquire in flight was abandoned just now (a dripping answer
        // must not delay the release): its step ends at once.
        await this.inFlight;
        if (sessionId && !lost) await this.client.releaseQuietly(this.lease.licenseId, sessionId);
      } finally {
        this.forget(this);
      }
    })();
    return this.closing;
  }
}
