/**
 * Verification of the signed answers with WebCrypto's Ed25519 (no dependencies).
 *
 * Every acquire and heartbeat answer carries a `lease_token`, every release answer a
 * `release_token`: a JWT signed with Ed25519 (EdDSA) by the deployment. `TokenVerifier`
 * accepts an answer only when its token is an EdDSA JWT of the expected `typ`, signed by
 * a key of the deployment's JWKS (fetched once and cached; fetched again after `jwksTtl`
 * or on an unknown `kid`, at most once per `minRefetch`) that is one of the pinned keys
 * when any are pinned, for this `aud` (`<tenant>/<license>`), session and client, within
 * `exp`/`nbf`/`iat` give or take the leeway, carrying this request's nonce, and agreeing
 * with the answer's fields. Anything else throws a `TokenError` subclass, checked in the
 * same order as the Python client, so that every client gives each test vector
 * (shared/clients/testdata/vectors.json) the same outcome.
 */

import {
  BackendUnavailable,
  BadSignature,
  MalformedToken,
  TokenExpired,
  TokenMismatch,
  TokenMissing,
  TokenReplayed,
  TokenWrongMachine,
  UnknownKeyId,
  UntrustedKey,
  WrongAudience,
} from "./errors.js";
// node:crypto rather than the global `crypto`, which Node 18 has only behind a flag.
import { randomBytes, webcrypto } from "node:crypto";

import { parseTime } from "./time.js";

export const LEASE_TYP = "seatlease-lease+jwt";
export const RELEASE_TYP = "seatlease-release+jwt";

/** The functions whose answers carry a token. */
export type SignedFunction = "acquire" | "heartbeat" | "release";

const TOKEN_FIELD: Record<SignedFunction, string> = { acquire: "lease_token", heartbeat: "lease_token", release: "release_token" };
const TYP: Record<SignedFunction, string> = { acquire: LEASE_TYP, heartbeat: LEASE_TYP, release: RELEASE_TYP };
const REQUIRED = ["iss", "aud", "sid", "iat", "nbf", "exp"];

/** A pinned key: an Ed25519 JWK, a PEM (SPKI) public key, or the JWK's `x` (base64url of 32 bytes). */
export type PinnedKey = string | { kty?: string; crv?: string; x?: string };

export type Claims = Record<string, unknown>;
type Json = Record<string, unknown>;

export interface VerifierOptions {
  /** The vendor's public keys: when given, only tokens signed by one of them pass. */
  pinnedKeys?: readonly PinnedKey[];
  /** The tenant expected in `aud` (else any tenant with the right license). */
  tenantId?: string | null;
  /** Seconds of clock difference allowed on `exp`, `nbf` and `iat` (default 60). */
  leewaySeconds?: number;
  /** Seconds a fetched JWKS is trusted (default 300). */
  jwksTtlSeconds?: number;
  /** Least seconds between two fetches prompted by an unknown `kid` (default 10). */
  minRefetchSeconds?: number;
  /** The clock, in milliseconds since the epoch (default `Date.now`). */
  now?: () => number;
  /** This machine's fingerprint, for a saved borrowed seat: a borrowed token must name it in `cnf.machine`. */
  machineFingerprint?: string;
}

export function b64urlDecode(text: string): Uint8Array {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) throw new TypeError("not base64url");
  return new Uint8Array(Buffer.from(text, "base64url"));
}

export function b64urlEncode(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("base64url");
}

/** A fresh nonce for one request (18 random bytes, base64url). */
export function newNonce(): string {
  return b64urlEncode(randomBytes(18));
}

function isObject(value: unknown): value is Json {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** An Ed25519 JWK's raw public key; undefined for any other kind of key (ignored). */
function rawFromJwk(jwk: unknown): Uint8Array | undefined {
  if (!isObject(jwk) || jwk["kty"] !== "OKP" || jwk["crv"] !== "Ed25519" || typeof jwk["x"] !== "string") return undefined;
  try {
    const raw = b64urlDecode(jwk["x"]);
    return raw.length === 32 ? raw : undefined;
  } catch {
    return undefined;
  }
}

// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410): the key's 32 bytes follow.
const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex");

const KEY_FETCH_FAILURES = new WeakSet<object>();

function keyFetchFailure(error: unknown): unknown {
  if (error !== null && typeof error === "object") KEY_FETCH_FAILURES.add(error);
  return error;
}

/**
 * Whether `error` came from fetching the deployment's JWKS (a network error, a 5xx, a
 * timeout, a document that is no key set) rather than from the answer's token: transient,
 * retried, and never a reason to release the session the answer names.
 */
export function isKeyFetchFailure(error: unknown): boolean {
  return error !== null && typeof error === "object" && KEY_FETCH_FAILURES.has(error);
}

// The encodings of Ed25519 points of small order (libsodium's ed25519 ref10
// `has_small_order`), compared with the top bit of the last byte masked off: a public key
// among them verifies signatures it never made.
const SMALL_ORDER = [
  "0100000000000000000000000000000000000000000000000000000000000000",
  "0000000000000000000000000000000000000000000000000000000000000000",
  "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
  "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
  "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
];

/** Whether the 32 bytes of an Ed25519 public key encode a point of small order. */
export function hasSmallOrder(raw: Uint8Array): boolean {
  const masked = Buffer.from(raw);
  masked[31] = (masked[31] ?? 0) & 0x7f;
  return SMALL_ORDER.includes(masked.toString("hex"));
}

function refuseSmallOrder(raw: Uint8Array): string {
  if (hasSmallOrder(raw)) throw new TypeError("a pinned key is a point of small order (it would verify forged signatures): pin the vendor's real key");
  return b64urlEncode(raw);
}

/** A pinned key as the base64url of its 32 raw bytes; throws when it is not an Ed25519 public key (or one of small order). */
export function pinnedRaw(key: PinnedKey): string {
  if (typeof key !== "string") {
    const raw = rawFromJwk(key);
    if (!raw) throw new TypeError("a pinned JWK must be an Ed25519 key (kty OKP, crv Ed25519)");
    return refuseSmallOrder(raw);
  }
  if (key.includes("-----BEGIN")) {
    const body = key.replace(/-----[^-]+-----/g, "").replace(/\s+/g, "");
    const der = Buffer.from(body, "base64");
    if (der.length !== 44 || !der.subarray(0, 12).equals(SPKI_ED25519)) throw new TypeError("a pinned PEM key must be an Ed25519 public key");
    return refuseSmallOrder(der.subarray(12));
  }
  const raw = b64urlDecode(key.trim());
  if (raw.length !== 32) throw new TypeError("a pinned key must be 32 bytes (base64url)");
  return refuseSmallOrder(raw);
}

interface KnownKey {
  key: webcrypto.CryptoKey;
  x: string;
}

/** Checks the token of each answer; one per `SeatClient`. */
export class TokenVerifier {
  readonly pinned: ReadonlySet<string>;
  readonly tenantId: string | null;
  readonly leeway: number;
  readonly machineFingerprint: string | undefined;
  private readonly fetchJwks: (timeoutMs?: number) => Promise<unknown>;
  private readonly ttlMs: number;
  private readonly minRefetchMs: number;
  private readonly now: () => number;
  private keys = new Map<string, KnownKey>();
  private fetchedAt: number | undefined; // performance.now()
  private refreshing: Promise<void> | undefined;

  /** `fetchJwks(timeoutMs)` resolves to the JWKS document (parsed JSON), within `timeoutMs` when given. */
  constructor(fetchJwks: (timeoutMs?: number) => Promise<unknown>, options: VerifierOptions = {}) {
    this.fetchJwks = fetchJwks;
    this.pinned = new Set((options.pinnedKeys ?? []).map(pinnedRaw));
    this.tenantId = options.tenantId ?? null;
    this.leeway = options.leewaySeconds ?? 60;
    this.ttlMs = (options.jwksTtlSeconds ?? 300) * 1000;
    this.minRefetchMs = (options.minRefetchSeconds ?? 10) * 1000;
    this.now = options.now ?? Date.now;
    this.machineFingerprint = options.machineFingerprint;
  }

  /**
   * Fetch the JWKS again, by `deadline` (performance.now() milliseconds) when given: a
   * fetch already under way is shared, but waited for only until this caller's deadline.
   * Whatever fails here (the fetch, its time, a document that is no key set) is a key
   * fetch failure (`isKeyFetchFailure`): transient, not the answer's fault.
   */
  private async refresh(deadline: number | undefined): Promise<void> {
    const left = deadline === undefined ? undefined : deadline - performance.now();
    if (left !== undefined && left <= 0) throw keyFetchFailure(new BackendUnavailable(0, "network_error", "No time left to fetch the deployment's JWKS."));
    // One fetch at a time: concurrent answers wait for the same one.
    this.refreshing ??= (async () => {
      try {
        let document: unknown;
        try {
          document = await this.fetchJwks(left);
        } catch (error) {
          throw keyFetchFailure(error);
        }
        const listed = isObject(document) ? document["keys"] : undefined;
        if (!Array.isArray(listed)) throw keyFetchFailure(new UnknownKeyId(0, "token_unknown_kid", "The JWKS is not a JSON key set."));
        const keys = new Map<string, KnownKey>();
        for (const jwk of listed) {
          const raw = rawFromJwk(jwk);
          if (!raw || typeof jwk["kid"] !== "string") continue;
          const key = await webcrypto.subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]);
          keys.set(jwk["kid"], { key, x: b64urlEncode(raw) });
        }
        this.keys = keys;
        this.fetchedAt = performance.now();
      } finally {
        this.refreshing = undefined;
      }
    })();
    if (left === undefined) return this.refreshing;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(keyFetchFailure(new BackendUnavailable(0, "network_error", `The deployment's JWKS did not come within ${Math.round(left)} ms.`))), left);
    });
    try {
      await Promise.race([this.refreshing, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  private async keyFor(kid: string, status: number, deadline: number | undefined): Promise<KnownKey> {
    const age = this.fetchedAt === undefined ? undefined : performance.now() - this.fetchedAt;
    if (age === undefined || age > this.ttlMs) await this.refresh(deadline);
    else if (!this.keys.has(kid) && age >= this.minRefetchMs) await this.refresh(deadline); // rotation
    const known = this.keys.get(kid);
    if (!known) throw new UnknownKeyId(status, "token_unknown_kid", `No key ${JSON.stringify(kid)} in the deployment's JWKS.`);
    if (this.pinned.size && !this.pinned.has(known.x)) {
      throw new UntrustedKey(status, "token_untrusted_key", `Key ${JSON.stringify(kid)} is not one of the pinned keys.`);
    }
    return known;
  }

  /**
   * The verified claims of `reply`'s token, else a `TokenError` (or, when the JWKS could
   * not be fetched, the fetch's error: see `isKeyFetchFailure`). `timeoutMs`: the time
   * left to this answer's exchange, which bounds a JWKS fetch it needs.
   */
  async check(fn: SignedFunction, request: Json, reply: unknown, status: number, timeoutMs?: number): Promise<Claims> {
    const deadline = timeoutMs === undefined ? undefined : performance.now() + timeoutMs;
    const field = TOKEN_FIELD[fn];
    const token = isObject(reply) ? reply[field] : undefined;
    if (typeof token !== "string") throw new TokenMissing(status, "token_missing", `The ${fn} answer has no ${field}.`);
    const malformed = (why: string) => new MalformedToken(status, "token_malformed", `The ${field} ${why}.`);
    const parts = token.split(".");
    if (parts.length !== 3) throw malformed("is not a JWT");
    const [head, body, sig] = parts as [string, string, string];
    let header: unknown, payloadBytes: Uint8Array, signature: Uint8Array;
    try {
      header = JSON.parse(Buffer.from(b64urlDecode(head)).toString("utf8"));
      payloadBytes = b64urlDecode(body);
      signature = b64urlDecode(sig);
    } catch {
      throw malformed("is not a JWT");
    }
    if (!isObject(header)) throw malformed("is not a JWT");
    const kid = header["kid"];
    if (header["alg"] !== "EdDSA" || typeof kid !== "string") throw malformed("is not an EdDSA JWT with a kid");
    if (header["typ"] !== TYP[fn]) throw new TokenMismatch(status, "token_mismatch", `The ${field} is a ${JSON.stringify(header["typ"])} token.`);
    const known = await this.keyFor(kid, status, deadline);
    const signed = new TextEncoder().encode(`${head}.${body}`);
    const valid = signature.length === 64 && (await webcrypto.subtle.verify({ name: "Ed25519" }, known.key, signature, signed));
    if (!valid) throw new BadSignature(status, "token_bad_signature", `The ${field}'s signature does not verify.`);
    let claims: unknown;
    try {
      claims = JSON.parse(Buffer.from(payloadBytes).toString("utf8"));
    } catch {
      throw malformed("has no JSON claims");
    }
    if (!isObject(claims)) throw malformed("has no JSON claims");
    this.checkTimes(claims, field, status);
    this.checkClaims(fn, request, reply as Json, claims, status);
    return claims;
  }

  private checkTimes(claims: Claims, field: string, status: number): void {
    for (const name of REQUIRED) {
      if (claims[name] === undefined || claims[name] === null) throw new MalformedToken(status, "token_malformed", `The ${field}: missing the "${name}" claim.`);
    }
    if (claims["sub"] !== undefined && typeof claims["sub"] !== "string") throw new MalformedToken(status, "token_malformed", `The ${field}: sub is not a string.`);
    const now = this.now() / 1000;
    const notYet = new TokenExpired(status, "token_expired", `The ${field} is not valid yet (check the clock).`);
    const iat = claims["iat"];
    if (typeof iat !== "number") throw notYet;
    if (iat > now + this.leeway) throw notYet;
    const nbf = claims["nbf"];
    const exp = claims["exp"];
    if (typeof nbf !== "number" || typeof exp !== "number") throw new MalformedToken(status, "token_malformed", `The ${field}: nbf and exp must be numbers.`);
    if (nbf > now + this.leeway) throw notYet;
    if (exp <= now - this.leeway) throw new TokenExpired(status, "token_expired", `The ${field} has expired.`);
  }

  private checkClaims(fn: SignedFunction, request: Json, reply: Json, claims: Claims, status: number): void {
    const licenseId = request["license_id"];
    const aud = claims["aud"];
    let tenant = "";
    let licensed = "";
    if (typeof aud === "string") {
      const cut = aud.lastIndexOf("/");
      if (cut >= 0) [tenant, licensed] = [aud.slice(0, cut), aud.slice(cut + 1)];
    }
    if (licensed !== licenseId || !tenant || (this.tenantId !== null && this.tenantId !== tenant)) {
      throw new WrongAudience(status, "token_wrong_audience", `The token is for ${JSON.stringify(aud)}, not this license.`);
    }
    if (claims["nonce"] !== request["nonce"]) throw new TokenReplayed(status, "token_replayed", "The token answers another request (nonce).");
    const session = fn === "acquire" ? reply["session_id"] : request["session_id"];
    const problems: string[] = [];
    if (claims["sid"] !== session) problems.push("session");
    if (fn === "acquire" && claims["sub"] !== request["client_id"]) problems.push("client_id");
    if (fn !== "release" && !sameDeadline(reply, claims)) problems.push("lease_expires_at");
    if (fn === "release" && claims["released"] !== reply["released"]) problems.push("released");
    if (fn !== "release") problems.push(...termProblems(reply, claims));
    const cnf = claims["cnf"];
    const bound = cnf && typeof cnf === "object" ? (cnf as Json)["machine"] : undefined;
    if ("fingerprint" in request && bound !== request["fingerprint"]) problems.push("fingerprint");
    if (problems.length) throw new TokenMismatch(status, "token_mismatch", `The token disagrees with the answer (${problems.join(", ")}).`);
    if (this.machineFingerprint !== undefined && claims["borrowed"] === true && bound !== this.machineFingerprint) {
      throw new TokenWrongMachine(status, "token_wrong_machine", "This borrowed seat was taken for another machine (cnf.machine).");
    }
  }
}

/** The answer's term fields against the token's `ent`, `lexp` and `maxv` (a token without them: nothing to compare). */
function termProblems(reply: Json, claims: Claims): string[] {
  const problems: string[] = [];
  if ("ent" in claims && JSON.stringify(claims["ent"]) !== JSON.stringify(reply["entitlements"])) problems.push("entitlements");
  if ("lexp" in claims) {
    const text = reply["license_grace_ends_at"];
    const lexp = claims["lexp"];
    const ends = typeof text === "string" ? parseTime(text) : undefined;
    const gap = ends === undefined || typeof lexp !== "number" || !Number.isInteger(lexp) ? -1 : ends / 1000 - lexp;
    if (!(gap >= 0 && gap < 1.001)) problems.push("license_grace_ends_at");
  }
  if ("maxv" in claims && claims["maxv"] !== reply["max_version"]) problems.push("max_version");
  // The weight: a token that signs one must agree with the answer's (absent: 1).
  if ("seats" in claims && claims["seats"] !== (reply["seats"] ?? 1)) problems.push("seats");
  return problems;
}

/** The lease's weight a verified token signs (its `seats` claim; 1 when absent). */
export function claimedSeats(claims: Claims): number {
  const seats = claims["seats"];
  return typeof seats === "number" && Number.isInteger(seats) && seats >= 1 ? seats : 1;
}

/** `exp` is the deadline rounded down to a second. */
function sameDeadline(reply: Json, claims: Claims): boolean {
  const text = reply["lease_expires_at"];
  const exp = claims["exp"];
  if (typeof text !== "string" || typeof exp !== "number" || !Number.isInteger(exp)) return false;
  const deadline = parseTime(text);
  if (deadline === undefined) return false;
  const gap = deadline / 1000 - exp;
  return gap >= 0 && gap < 1.001;
}
