/**
 * `SeatClient`: the HTTP calls (retried with backoff, one `request_id` per call), the
 * plain acquire, heartbeat and release, held leases (`lease()`), and borrowed seats.
 */

import { randomUUID } from "node:crypto";

import { BorrowedSeat, borrowSeat, loadBorrowedSeat } from "./borrow.js";
import { BackendUnavailable, NoSeatsAvailable, SeatError, errorFromAnswer } from "./errors.js";
import { Keeper, Lease, type LeaseOptions } from "./lease.js";
import { acquireBody, sleep, type CallOptions, type CallPlan, type Identity, type Json, type Logger, type Needs, type QueuePlace, type Weight } from "./transport.js";
import { TokenVerifier, newNonce, type PinnedKey, type SignedFunction } from "./verify.js";

export const VERSION = "0.1.0";

export type { CallOptions, Identity, Json, Logger, Needs, QueuePlace, Weight };

export interface ClientOptions {
  /** Milliseconds per HTTP request (default 10000). */
  timeoutMs?: number;
  /** Extra attempts of a call after a network error or a 503/429/502/504 (default 5). */
  retries?: number;
  /** First pause between attempts in ms, doubled each time with jitter, never below Retry-After (default 500). */
  backoffMs?: number;
  /** Largest pause between attempts in ms, whatever Retry-After says (default 30000). */
  maxBackoffMs?: number;
  /** Longest pause between two acquires while waiting for a seat, in ms (default 30000). */
  maxWaitPollMs?: number;
  /** Time budget of the release when a lease is closed, in ms (default 5000). */
  releaseTimeoutMs?: number;
  /** Check the signed token of every answer (a forged, tampered, replayed, expired or wrong-audience grant throws a `TokenError`). */
  verify?: boolean;
  /** The vendor's Ed25519 public keys (JWK, PEM, or the JWK's `x`); turns `verify` on: only tokens they signed pass. */
  pinnedKeys?: readonly PinnedKey[];
  /** The tenant expected in the tokens' `aud`. */
  tenantId?: string;
  /** Seconds of clock difference allowed on the tokens' times (default 60). */
  tokenLeewaySeconds?: number;
  /** The deployment's JWKS (default `<baseUrl>/keys`). */
  jwksUrl?: string;
  /** This machine's id for binding borrowed seats (default: the system's, see machine.ts). */
  machineId?: string;
  /** Log lines (retries, lost and regained seats); never carries the API key. */
  logger?: Logger;
}

export interface AcquireOptions extends CallOptions, Identity, Needs, Weight, QueuePlace {
  leaseSeconds?: number;
  metadata?: Json;
}

interface Answer {
  status: number;
  statusText: string;
  headers: Headers;
  text: string;
}

function uniform(low: number, high: number): number {
  return low + Math.random() * (high - low);
}

function newRequestId(): string {
  return randomUUID().replaceAll("-", "");
}

/** A seatlease client for one API key; share one per process. */
export class SeatClient {
  readonly baseUrl: string;
  readonly jwksUrl: string;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly backoffMs: number;
  readonly maxBackoffMs: number;
  readonly maxWaitPollMs: number;
  readonly releaseTimeoutMs: number;
  readonly verifier: TokenVerifier | undefined;
  /** Kept for verifying a saved borrowed seat offline (`loadBorrowed`). */
  readonly pinnedKeys: readonly PinnedKey[];
  readonly tenantId: string | undefined;
  readonly tokenLeewaySeconds: number;
  readonly machineId: string | undefined;
  readonly log: Logger;
  readonly #apiKey: string;
  readonly #keepers = new Set<Keeper>();

  constructor(baseUrl: string, apiKey: string, options: ClientOptions = {}) {
    let url: URL;
    try {
      url = new URL(baseUrl);
    } catch {
      throw new TypeError("baseUrl must be an http:// or https:// URL");
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") throw new TypeError("baseUrl must be an http:// or https:// URL");
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#apiKey = apiKey;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.retries = options.retries ?? 5;
    this.backoffMs = options.backoffMs ?? 500;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.maxWaitPollMs = options.maxWaitPollMs ?? 30_000;
    this.releaseTimeoutMs = options.releaseTimeoutMs ?? 5_000;
    this.jwksUrl = options.jwksUrl ?? `${this.baseUrl}/keys`;
    this.pinnedKeys = [...(options.pinnedKeys ?? [])];
    this.tenantId = options.tenantId;
    this.tokenLeewaySeconds = options.tokenLeewaySeconds ?? 60;
    this.machineId = options.machineId;
    this.log = options.logger ?? (() => {});
    if (options.verify || this.pinnedKeys.length) {
      this.verifier = new TokenVerifier(() => this.fetchJwks(), {
        pinnedKeys: this.pinnedKeys,
        tenantId: this.tenantId ?? null,
        leewaySeconds: this.tokenLeewaySeconds,
      });
    }
  }

  toString(): string {
    return `SeatClient(${this.baseUrl}, apiKey=<hidden>)`;
  }

  // -- HTTP ----------------------------------------------------------------------------

  /** One GET or POST, its whole answer read within `timeoutMs`; a `BackendUnavailable` (status 0) when none came. */
  async #request(url: string, init: RequestInit, timeoutMs: number, signal?: AbortSignal): Promise<Answer> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    const onAbort = () => controller.abort(signal?.reason);
    if (signal?.aborted) onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      // redirect "manual": a 30x to another host must not receive the API key.
      const response = await fetch(url, { ...init, redirect: "manual", signal: controller.signal });
      return { status: response.status, statusText: response.statusText, headers: response.headers, text: await response.text() };
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      const reason = controller.signal.aborted ? controller.signal.reason : error;
      const cause = reason instanceof Error ? ((reason.cause as Error | undefined)?.message ?? reason.message) : String(reason);
      throw new BackendUnavailable(0, "network_error", `${url}: ${cause}`);
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** The answer's JSON when it is a 2xx, else its typed error. */
  static decode(url: string, answer: Answer): unknown {
    if (answer.status >= 300) {
      let payload: unknown = {};
      try {
        payload = JSON.parse(answer.text);
      } catch {
        // a proxy's HTML page: the status says enough
      }
      if (answer.status < 400) throw new SeatError(answer.status, "redirected", `${url} answered a redirect: use the final URL`);
      throw errorFromAnswer(answer.status, payload, answer.headers.get("retry-after"), answer.statusText);
    }
    try {
      return JSON.parse(answer.text);
    } catch {
      throw new SeatError(answer.status, "invalid_response", `${url} answered non-JSON`);
    }
  }

  /** One POST; the decoded JSON of a 2xx (its token verified when `verify`), else a typed `SeatError`. */
  async send(fn: SignedFunction, body: Json, timeoutMs = this.timeoutMs, signal?: AbortSignal): Promise<Json> {
    const url = `${this.baseUrl}/${fn}`;
    const answer = await this.#request(
      url,
      {
        method: "POST",
        body: JSON.stringify(body),
        headers: {
          "Content-Type": "application/json",
          Accept: "application/json",
          Authorization: `Bearer ${this.#apiKey}`,
          "User-Agent": `seatlease-node/${VERSION}`,
        },
      },
      timeoutMs,
      signal,
    );
    const reply = SeatClient.decode(url, answer);
    // A place in the wait queue (202) grants nothing: it carries no token to check.
    const inLine = answer.status === 202 && reply !== null && typeof reply === "object";
    if (this.verifier && !inLine) await this.verifier.check(fn, body, reply, answer.status);
    return reply as Json;
  }

  /** GET the deployment's JWKS (no API key: it is public). */
  async fetchJwks(): Promise<unknown> {
    const headers = { Accept: "application/json", "User-Agent": `seatlease-node/${VERSION}` };
    return SeatClient.decode(this.jwksUrl, await this.#request(this.jwksUrl, { headers }, this.timeoutMs));
  }

  /**
   * The pause before attempt `attempt + 1`: the backoff (doubled per attempt, at most
   * `capMs`, with jitter), never shorter than the server's Retry-After, and never longer
   * than `maxBackoffMs` whatever the server asks (a `Retry-After: 3600` from a proxy must
   * not leave the product asleep for an hour).
   */
  backoffDelay(attempt: number, retryAfterSeconds: number | undefined, capMs: number): number {
    const delay = Math.min(capMs, this.backoffMs * 2 ** Math.max(0, attempt));
    const hinted = Math.max(uniform(delay / 2, delay), (retryAfterSeconds ?? 0) * 1000);
    return Math.min(hinted, this.maxBackoffMs);
  }

  /** Pause before asking again for a seat: Retry-After plus up to 20 % jitter, at most `maxWaitPollMs`. */
  waitPause(denied: NoSeatsAvailable): number {
    const pause = Math.min(denied.retryAfterSeconds * 1000, this.maxWaitPollMs);
    return uniform(pause, pause * 1.2);
  }

  /**
   * `send` retried on network errors and 503 with backoff and Retry-After, at most
   * `retries` times and within `budgetMs`. Every attempt carries the same `request_id`
   * (and nonce): should a reply be lost, the server answers the retry with what the
   * first attempt did, so a retried acquire is still told 201 and a retried release
   * "released".
   */
  async call(fn: SignedFunction, body: Json, plan: CallPlan = {}): Promise<Json> {
    const sent: Json = { ...body, request_id: body["request_id"] ?? newRequestId() };
    if (this.verifier && sent["nonce"] === undefined) sent["nonce"] = newNonce();
    const retries = plan.retries ?? this.retries;
    const giveUp = plan.budgetMs === undefined ? undefined : performance.now() + plan.budgetMs;
    for (let attempt = 0; ; attempt++) {
      const timeout = giveUp === undefined ? this.timeoutMs : Math.max(50, Math.min(this.timeoutMs, giveUp - performance.now()));
      try {
        return await this.send(fn, sent, timeout, plan.signal);
      } catch (error) {
        if (!(error instanceof BackendUnavailable) || attempt >= retries) throw error;
        const delay = this.backoffDelay(attempt, error.retryAfterSeconds, this.maxBackoffMs);
        if (giveUp !== undefined && performance.now() + delay >= giveUp) throw error;
        this.log("info", `seatlease: ${fn} failed (${error.message}); retry in ${Math.round(delay)} ms`);
        await sleep(delay, plan.signal);
      }
    }
  }

  // -- plain calls ---------------------------------------------------------------------

  /**
   * POST /acquire (retried); the answer. No heartbeats: see `lease()`. `queue: true` on a
   * full license with a wait queue answers `{queued: true, position, ticket,
   * retry_after_seconds, ...}` (a 202): call again with that `ticket` after
   * `retry_after_seconds` to keep the place. `seats`: the lease's weight (the answer's
   * `seats` says it; another weight than a held lease's throws `SeatsMismatch`).
   */
  acquire(licenseId: string, clientId: string, options: AcquireOptions = {}): Promise<Json> {
    const { user, host, queue, ticket, entitlements, version, seats } = options;
    return this.call("acquire", acquireBody(licenseId, clientId, options.leaseSeconds, options.metadata, { user, host, queue, ticket, entitlements, version, seats }), options);
  }

  /** POST /heartbeat (retried); throws `SessionExpired` when the seat is gone. */
  heartbeat(licenseId: string, sessionId: string, options: CallOptions = {}): Promise<Json> {
    return this.call("heartbeat", { license_id: licenseId, session_id: sessionId }, options);
  }

  /** POST /release (retried, idempotent): `{released, seats_used}`. */
  release(licenseId: string, sessionId: string, options: CallOptions = {}): Promise<Json> {
    return this.call("release", { license_id: licenseId, session_id: sessionId }, options);
  }

  /** Release, logging instead of throwing (the lease then expires by itself). */
  async releaseQuietly(licenseId: string, sessionId: string, budgetMs = this.releaseTimeoutMs): Promise<void> {
    try {
      await this.call("release", { license_id: licenseId, session_id: sessionId }, { budgetMs });
    } catch (error) {
      this.log("warn", `seatlease: release of ${licenseId} failed: ${(error as Error).message}`);
    }
  }

  // -- held leases ---------------------------------------------------------------------

  /**
   * Acquire a seat and keep it: heartbeats at the server's interval in the background,
   * a new seat asked for at once when it is lost (410). `close()` the lease to stop and
   * release (or `await using lease = ...`). `wait`: wait for a seat instead of throwing
   * `NoSeatsAvailable`, for at most `timeoutMs` (`SeatWaitTimeout`); on a license with a
   * wait queue it waits in line (`queue: true`, keeping its place with the ticket).
   * `user` and `host`: who asks. `seats`: the lease's weight (`lease.seats`), asked for
   * again by every re-acquire after a loss.
   */
  async lease(licenseId: string, options: LeaseOptions): Promise<Lease> {
    const keeper = new Keeper(this, licenseId, options, (done) => this.#keepers.delete(done));
    this.#keepers.add(keeper);
    try {
      await keeper.acquireFirst(options.wait ?? false, options.timeoutMs, options.signal);
    } catch (error) {
      this.#keepers.delete(keeper);
      throw error;
    }
    keeper.start();
    return keeper.lease;
  }

  /** The leases this client holds now. */
  held(): Lease[] {
    return [...this.#keepers].filter((k) => k.started).map((k) => k.lease);
  }

  /** Release every seat this client holds (e.g. on SIGTERM), within one `releaseTimeoutMs`. */
  async releaseAll(): Promise<void> {
    await Promise.all([...this.#keepers].map((k) => k.lease.close()));
  }

  // -- borrowed seats ------------------------------------------------------------------

  /**
   * Borrow a seat for `seconds` (no heartbeats until it ends; at most the license's
   * `max_borrow_seconds`), save it with its signed token to `path` and return it verified.
   */
  borrow(licenseId: string, clientId: string, seconds: number, options: { path: string; metadata?: Json }): Promise<BorrowedSeat> {
    return borrowSeat(this, licenseId, clientId, seconds, options.path, options.metadata);
  }

  /** The borrowed seat saved at `path`, its token verified offline (no request). */
  loadBorrowed(path: string): Promise<BorrowedSeat> {
    return loadBorrowedSeat(this, path);
  }
}

export { BackendUnavailable, NoSeatsAvailable };
