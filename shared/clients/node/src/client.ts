/**
 * `SeatClient`: the HTTP calls (retried with backoff, one `request_id` per call), the
 * plain acquire, heartbeat and release, held leases (`lease()`), and borrowed seats.
 */

import { randomUUID } from "node:crypto";
import * as http from "node:http";
import * as https from "node:https";

import { BorrowedSeat, borrowSeat, loadBorrowedSeat, type BorrowOptions } from "./borrow.js";
import { BackendUnavailable, InvalidResponse, NoSeatsAvailable, SeatError, TokenError, errorFromAnswer } from "./errors.js";
import { ExchangeFailed, exchange, proxyFor, type HttpAnswer } from "./http.js";
import { Keeper, Lease, type LeaseOptions } from "./lease.js";
import { parseTime } from "./time.js";
import { acquireBody, sleep, type AbortSignalLike, type CallOptions, type CallPlan, type Identity, type Json, type Logger, type Machine, type Needs, type QueuePlace, type Weight } from "./transport.js";
import { TokenVerifier, isKeyFetchFailure, newNonce, pinnedRaw, type PinnedKey, type SignedFunction } from "./verify.js";

/** This package's version: the one version of every seatlease client (shared/clients/VERSION; package.json says the same, a test checks both). */
export const VERSION = "0.3.0";

export type { AbortSignalLike, BorrowOptions, CallOptions, Identity, Json, Logger, Machine, Needs, QueuePlace, Weight };

export interface ClientOptions {
  /** Milliseconds one HTTP exchange may take, all of it: connect, proxy tunnel, TLS, headers and body (default 10000). */
  timeoutMs?: number;
  /** Extra attempts of a call after a network error or a 503/429/502/504 (default 5). */
  retries?: number;
  /** First pause between attempts in ms, doubled each time with jitter, never below Retry-After (default 500). */
  backoffMs?: number;
  /** Largest pause between attempts in ms, whatever Retry-After says (default 30000). */
  maxBackoffMs?: number;
  /** Longest pause between two acquires while waiting for a seat, in ms (default 30000). */
  maxWaitPollMs?: number;
  /** Time budget of a release when a lease is closed (`close()`, `releaseAll()`) and of the release of a refused grant, in ms (default 5000). */
  releaseTimeoutMs?: number;
  /**
   * The vendor's Ed25519 public keys (each JWK's `x`, a JWK, or a PEM public key), shipped
   * with the product. Required (unless `insecureSkipVerify`): every grant, renewal and
   * release must carry a token signed by one of them for this license, session and
   * request, else it is refused (`TokenError`, `InvalidResponse`) and never a seat.
   */
  pinnedKeys?: readonly PinnedKey[];
  /**
   * The loud opt-out: no pinned key needed, and `verify: false` allowed. Without pinned
   * keys nothing is verified (or, with `verify: true`, only against the server's own
   * `/keys`, which proves nothing about who runs it): anyone at the base URL (a hosts-file
   * entry, a proxy) can grant a seat. For demos and tests, never for a product.
   */
  insecureSkipVerify?: boolean;
  /** Check the signed token of every answer (default true). `false` is refused unless `insecureSkipVerify` is set too. */
  verify?: boolean;
  /**
   * The HTTP proxy (`http://[user:password@]host:port`): an https base URL goes through a
   * CONNECT tunnel, an http one as a proxied request. Default: the environment's
   * (`HTTPS_PROXY`/`https_proxy` for https, `HTTP_PROXY`/`http_proxy` for http, read when the
   * client is made), hosts in `NO_PROXY`/`no_proxy` direct; `false`: never a proxy.
   */
  proxy?: string | false;
  /** Extra CA certificates (PEM) trusted for an https base URL, beside Node's own (a private CA). */
  ca?: string | string[];
  /** The tenant expected in the tokens' `aud`. */
  tenantId?: string;
  /** Seconds of clock difference allowed on the tokens' times (default 60). */
  tokenLeewaySeconds?: number;
  /** The deployment's JWKS (default `<baseUrl>/keys`). */
  jwksUrl?: string;
  /** Least milliseconds between two JWKS fetches prompted by a token's unknown `kid` (a key rotation; default 10000). */
  jwksMinRefetchMs?: number;
  /** This machine's id for binding borrowed seats (default: the system's, see machine.ts). */
  machineId?: string;
  /** Log lines (retries, lost and regained seats); never carries the API key. */
  logger?: Logger;
}

/** What a plain heartbeat says of the product's user (each sent only when set; neither: never idle). */
export interface HeartbeatOptions extends CallOptions {
  /** Whole seconds the product has seen no user activity (0 ..= 315360000). */
  idleSeconds?: number;
  /** The product does work that must not be interrupted: never reclaimed for idleness. */
  busy?: boolean;
}

export interface AcquireOptions extends CallOptions, Identity, Needs, Weight, Machine, QueuePlace {
  leaseSeconds?: number;
  metadata?: Json;
  /** This call's idempotency key (default: a new one); its retries carry the same, and so may the caller's own retry after a lost answer. */
  requestId?: string;
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function header(answer: HttpAnswer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The answer's JSON when it is a 2xx, else its typed error (a 3xx: an error naming its Location, never followed). */
function decode(url: string, answer: HttpAnswer): unknown {
  if (answer.status < 200 || answer.status >= 300) {
    if (answer.status >= 300 && answer.status < 400) {
      const location = header(answer, "location");
      const to = location === undefined ? "no Location" : `Location: ${location}`;
      throw new SeatError(answer.status, "redirected", `${url} answered a redirect (${to}), which is not followed: configure the service's own URL`);
    }
    let payload: unknown = {};
    try {
      payload = JSON.parse(answer.text);
    } catch {
      // a proxy's HTML page: the status says enough
    }
    throw errorFromAnswer(answer.status, payload, header(answer, "retry-after"), answer.statusText, url);
  }
  try {
    return JSON.parse(answer.text);
  } catch {
    throw new InvalidResponse(answer.status, "invalid_response", `${url} answered ${answer.status} with a body that is not JSON`);
  }
}

const COUNTS = ["seats_used", "seats_total", "seats"];
const OPTIONAL_INTEGERS = ["lease_seconds", "heartbeat_interval_seconds"];

/**
 * A 2xx's shape: what every later step relies on (checked before, and whatever, the token
 * says). A grant: a non-empty `session_id`, a `lease_expires_at` time, an integer
 * `lease_seconds` >= 1; a renewal: a `lease_expires_at` time, and a `session_id` that is
 * absent, null or the lease's own; both: `heartbeat_interval_seconds` an integer when
 * present, the counts (`seats_used`, `seats_total`, `seats`) integers or absent or null.
 */
function checkShape(fn: SignedFunction, url: string, status: number, reply: unknown, request: Json): asserts reply is Json {
  const bad = (why: string) => new InvalidResponse(status, "invalid_response", `${url} answered ${status} ${why}`);
  if (!isObject(reply)) throw bad("with a body that is not a JSON object");
  const integer = (value: unknown) => typeof value === "number" && Number.isInteger(value);
  for (const name of COUNTS) {
    const value = reply[name];
    if (value !== undefined && value !== null && !integer(value)) throw bad(`with a ${name} that is not an integer`);
  }
  if (fn === "release") {
    if (typeof reply["released"] !== "boolean") throw bad("without a released true or false");
    return;
  }
  for (const name of OPTIONAL_INTEGERS) {
    const value = reply[name];
    if (value !== undefined && !integer(value)) throw bad(`with a ${name} that is not an integer`);
  }
  const session = reply["session_id"];
  if (fn === "acquire") {
    if (typeof session !== "string" || !session) throw bad("without a session_id string");
    if (!((reply["lease_seconds"] as number) >= 1)) throw bad("without a lease_seconds of 1 or more");
  } else if (session !== undefined && session !== null && (typeof session !== "string" || session !== request["session_id"])) {
    throw bad(`with a session_id that is not the lease's (${JSON.stringify(session)})`);
  }
  const expires = reply["lease_expires_at"];
  if (typeof expires !== "string" || parseTime(expires) === undefined) throw bad("without a lease_expires_at time");
  const reclaim = reply["idle_reclaim_at"]; // only while warned for idleness
  if (reclaim !== undefined && reclaim !== null && (typeof reclaim !== "string" || parseTime(reclaim) === undefined)) throw bad("with an idle_reclaim_at that is not a time");
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
  /** @internal */
  readonly verifier: TokenVerifier | undefined;
  /** True when every answer's token is checked against the pinned keys (false only with `insecureSkipVerify`). */
  readonly verified: boolean;
  /** The proxy every request goes through (from the `proxy` option or the environment), undefined: direct. */
  readonly proxy: string | undefined;
  /** Kept for verifying a saved borrowed seat offline (`loadBorrowed`). */
  readonly pinnedKeys: readonly PinnedKey[];
  readonly tenantId: string | undefined;
  readonly tokenLeewaySeconds: number;
  readonly machineId: string | undefined;
  readonly log: Logger;
  readonly #apiKey: string;
  readonly #keepers = new Set<Keeper>();
  readonly #proxy: URL | undefined;
  readonly #jwksProxy: URL | undefined;
  readonly #ca: string | string[] | undefined;
  readonly #agents: { http: http.Agent; https: https.Agent };

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
    const insecure = options.insecureSkipVerify === true;
    if (options.verify === false && !insecure) {
      throw new TypeError("verify: false would take any answer as a seat: set insecureSkipVerify: true as well to mean it (never in a product), or pin the vendor's keys (pinnedKeys)");
    }
    if (!this.pinnedKeys.length && !insecure) {
      throw new TypeError("pinnedKeys is required: pin the vendor's public key(s) (each JWK's \"x\" of <baseUrl>/keys, shipped with the product), or opt out with insecureSkipVerify: true (anyone at the base URL could then grant a seat)");
    }
    const checked = options.verify !== false && (this.pinnedKeys.length > 0 || options.verify === true);
    for (const key of this.pinnedKeys) pinnedRaw(key); // not a key, or one of small order: refused here
    this.verifier = checked
      ? new TokenVerifier((timeoutMs) => this.fetchJwks(timeoutMs), { pinnedKeys: this.pinnedKeys, tenantId: this.tenantId ?? null, leewaySeconds: this.tokenLeewaySeconds, minRefetchSeconds: (options.jwksMinRefetchMs ?? 10_000) / 1000 })
      : undefined;
    this.verified = checked && this.pinnedKeys.length > 0;
    this.#proxy = proxyFor(url, options.proxy);
    this.#jwksProxy = proxyFor(new URL(this.jwksUrl), options.proxy);
    this.proxy = this.#proxy === undefined ? undefined : `${this.#proxy.protocol}//${this.#proxy.host}`;
    this.#ca = options.ca;
    // Kept-alive connections (idle ones never hold the process open): no new TLS handshake per heartbeat.
    this.#agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true, ...(options.ca !== undefined ? { ca: options.ca } : {}) }) };
  }

  toString(): string {
    return `SeatClient(${this.baseUrl}, apiKey=<hidden>)`;
  }

  // -- HTTP ----------------------------------------------------------------------------

  /** One GET or POST, its whole answer read within `timeoutMs`; a `BackendUnavailable` (status 0) when none came. */
  async #request(url: string, method: "GET" | "POST", headers: Record<string, string>, body: string | undefined, timeoutMs: number, signal?: AbortSignalLike): Promise<HttpAnswer> {
    const target = new URL(url);
    const proxy = url === this.jwksUrl ? this.#jwksProxy : this.#proxy;
    try {
      return await exchange(target, { method, headers, body, timeoutMs, signal, proxy, agents: this.#agents, ca: this.#ca });
    } catch (error) {
      if (signal?.aborted) throw signal.reason;
      if (error instanceof SeatError) throw error;
      const cause = error instanceof ExchangeFailed || error instanceof Error ? error.message : String(error);
      throw new BackendUnavailable(0, "network_error", `${url}: ${cause}`);
    }
  }

  /**
   * One POST; the decoded JSON of a 2xx, its shape checked (else `InvalidResponse`) and its
   * token verified (else a `TokenError`), all within `timeoutMs` (a JWKS fetch the token
   * needs included). A grant refused for its shape or its token that names a session is
   * released at once (within `releaseTimeoutMs`): a seat it would hold is never kept. A
   * grant whose check could not be made (the JWKS fetch failed or timed out) is not
   * released: that is transient, and the caller's retry (the same request_id) is answered
   * with the same grant.
   * @internal
   */
  async send(fn: SignedFunction, body: Json, timeoutMs = this.timeoutMs, signal?: AbortSignalLike): Promise<Json> {
    const deadline = performance.now() + timeoutMs;
    const url = `${this.baseUrl}/${fn}`;
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/json",
      Authorization: `Bearer ${this.#apiKey}`,
      "User-Agent": `seatlease-node/${VERSION}`,
    };
    const answer = await this.#request(url, "POST", headers, JSON.stringify(body), timeoutMs, signal);
    const reply = decode(url, answer);
    // A place in the wait queue (202) grants nothing: it carries no token to check.
    if (fn === "acquire" && answer.status === 202 && isObject(reply) && reply["queued"] === true) return reply;
    try {
      checkShape(fn, url, answer.status, reply, body);
      if (this.verifier) await this.verifier.check(fn, body, reply, answer.status, deadline - performance.now());
    } catch (error) {
      const refused = (error instanceof InvalidResponse || error instanceof TokenError) && !isKeyFetchFailure(error);
      const session = isObject(reply) ? reply["session_id"] : undefined;
      if (refused && fn === "acquire" && typeof session === "string" && session && typeof body["license_id"] === "string") {
        this.log("warn", `seatlease: refused a grant of ${body["license_id"]} (${(error as Error).message}); releasing session ${session}`);
        await this.releaseQuietly(body["license_id"], session);
      }
      throw error;
    }
    return reply;
  }

  /** GET the deployment's JWKS (no API key: it is public), within `timeoutMs` (default the client's). @internal */
  async fetchJwks(timeoutMs = this.timeoutMs): Promise<unknown> {
    const headers = { Accept: "application/json", "User-Agent": `seatlease-node/${VERSION}` };
    const budget = Math.max(1, Math.min(this.timeoutMs, timeoutMs));
    return decode(this.jwksUrl, await this.#request(this.jwksUrl, "GET", headers, undefined, budget));
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
   * @internal
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
    const { user, host, queue, ticket, entitlements, version, seats, fingerprint } = options;
    const body = acquireBody(licenseId, clientId, options.leaseSeconds, options.metadata, { user, host, queue, ticket, entitlements, version, seats, fingerprint });
    if (options.requestId !== undefined) body["request_id"] = options.requestId;
    return this.call("acquire", body, options);
  }

  /**
   * POST /heartbeat (retried); throws `SessionExpired` when the seat is gone (`reason`
   * `idle` when it was reclaimed for idleness). `idleSeconds` and `busy`: what the product
   * says of its user; the answer's `idle_reclaim_at` says when an idle seat may be reclaimed.
   */
  heartbeat(licenseId: string, sessionId: string, options: HeartbeatOptions = {}): Promise<Json> {
    const body: Json = { license_id: licenseId, session_id: sessionId };
    if (options.idleSeconds !== undefined) body["idle_seconds"] = options.idleSeconds;
    if (options.busy !== undefined) body["busy"] = options.busy;
    return this.call("heartbeat", body, options);
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
   * again by every re-acquire after a loss. On a license with an idle timeout, tell the
   * lease of user activity (`lease.touch()`) and of work not to interrupt (`lease.busy()`);
   * `onIdleWarning` is called when the server warns, and a seat reclaimed for idleness
   * (`onLost` reason `idle`) is asked for again only on the next activity.
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
   * `user`, `host`, `entitlements`, `version` and `seats` are sent as an acquire's are.
   */
  borrow(licenseId: string, clientId: string, seconds: number, options: BorrowOptions): Promise<BorrowedSeat> {
    return borrowSeat(this, licenseId, clientId, seconds, options);
  }

  /** The borrowed seat saved at `path`, its token verified offline (no request). */
  loadBorrowed(path: string): Promise<BorrowedSeat> {
    return loadBorrowedSeat(this, path);
  }
}

export { BackendUnavailable, NoSeatsAvailable };
