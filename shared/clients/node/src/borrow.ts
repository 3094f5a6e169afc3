/**
 * Borrowed seats: a seat taken for a fixed time with no heartbeats (a laptop going
 * offline), saved to a file with its signed token, verified offline later and returned
 * early on request. The file has the Python client's format (`seatlease-borrowed-seat/1`:
 * the request with its nonce, the answer with its token, the JWKS at borrow time), so a
 * seat borrowed by one client loads in another. Pin the vendor's keys: without them the
 * saved JWKS is the only anchor, and an edited file could pass.
 */

import { randomBytes } from "node:crypto";
import { open, readFile, rename, rm } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";

import { MalformedToken, TokenMismatch } from "./errors.js";
import { thisMachine } from "./machine.js";
import { parseTime } from "./time.js";
import type { CallOptions, CallPlan, Identity, Json, Needs, Weight } from "./transport.js";
import { TokenVerifier, claimedSeats, newNonce, type Claims, type PinnedKey, type SignedFunction } from "./verify.js";

/** What borrowing, loading and returning a seat ask of the client (`SeatClient` is one). @internal */
export interface BorrowClient {
  readonly baseUrl: string;
  readonly pinnedKeys: readonly PinnedKey[];
  readonly tenantId: string | undefined;
  readonly tokenLeewaySeconds: number;
  /** This machine's id for binding borrowed seats (undefined: the system's). */
  readonly machineId: string | undefined;
  call(fn: SignedFunction, body: Json, plan?: CallPlan): Promise<Json>;
  fetchJwks(): Promise<unknown>;
  release(licenseId: string, sessionId: string, options?: CallOptions): Promise<Json>;
}

export const BORROWED_FORMAT = "seatlease-borrowed-seat/1";

/** Where to save a borrowed seat, and what an acquire would send: who asks (`user`, `host`), what the product needs (`entitlements`, `version`) and the weight (`seats`). */
export interface BorrowOptions extends Identity, Needs, Weight {
  /** The file the seat is saved to (with its token), readable by this user only. */
  path: string;
  metadata?: Json;
}

/** A borrowed seat whose token verified; no heartbeats are needed (or sent) until `expiresAt`. */
export class BorrowedSeat {
  readonly path: string;
  readonly licenseId: string;
  readonly clientId: string;
  readonly sessionId: string;
  readonly borrowSeconds: number;
  /** When the borrow ends by itself (the token's deadline). */
  readonly expiresAt: Date;
  readonly token: string;
  /** The verified token's claims (exp, aud, sub, borrowed, ...). */
  readonly claims: Claims;
  /** The seat's weight as the token signs it (its `seats` claim; 1 when absent). */
  readonly seats: number;
  readonly #client: BorrowClient;

  /** @internal */
  constructor(client: BorrowClient, path: string, answer: Json, claims: Claims) {
    this.#client = client;
    this.path = path;
    this.licenseId = String(answer["license_id"]);
    this.clientId = String(answer["client_id"]);
    this.sessionId = String(answer["session_id"]);
    this.borrowSeconds = Number(answer["lease_seconds"]);
    this.expiresAt = new Date(parseTime(String(answer["lease_expires_at"])) ?? 0);
    this.token = String(answer["lease_token"]);
    this.claims = claims;
    this.seats = claimedSeats(claims);
  }

  /** Seconds until the borrow ends (by this machine's clock), 0 once it has. */
  get secondsLeft(): number {
    return Math.max(0, (this.expiresAt.getTime() - Date.now()) / 1000);
  }

  get expired(): boolean {
    return this.secondsLeft <= 0;
  }

  /** Release the seat now (POST /release, retried) and delete the saved file; the release answer. */
  async returnEarly(): Promise<Json> {
    const answer = await this.#client.release(this.licenseId, this.sessionId);
    await rm(this.path, { force: true });
    return answer;
  }
}

/** Write the file atomically (the old file or the new one, never half), readable by this user only. */
async function save(path: string, document: Json): Promise<void> {
  const tmp = join(dirname(resolve(path)), `.borrowed-${basename(path)}-${randomBytes(6).toString("hex")}`);
  const file = await open(tmp, "w", 0o600);
  try {
    await file.writeFile(JSON.stringify(document, null, 1));
    await file.sync();
    await file.close();
    await rename(tmp, path);
  } catch (error) {
    await file.close().catch(() => {});
    await rm(tmp, { force: true });
    throw error;
  }
}

/** @internal */
export async function borrowSeat(client: BorrowClient, licenseId: string, clientId: string, seconds: number, options: BorrowOptions): Promise<BorrowedSeat> {
  const { path, metadata, user, host, entitlements, version, seats } = options;
  // fingerprint: the seat is bound to this machine; a copy of the file verifies nowhere else
  const request: Json = { license_id: licenseId, client_id: clientId, borrow_seconds: seconds, nonce: newNonce(), fingerprint: thisMachine(client.machineId) };
  if (metadata !== undefined) request["metadata"] = metadata;
  for (const [name, value] of Object.entries({ user, host, entitlements, version, seats })) if (value !== undefined) request[name] = value;
  const answer = await client.call("acquire", request);
  const jwks = await client.fetchJwks();
  await save(path, { format: BORROWED_FORMAT, base_url: client.baseUrl, request, answer, jwks });
  try {
    return await loadBorrowedSeat(client, path);
  } catch (error) {
    await rm(path, { force: true }); // a seat that does not verify is no seat
    throw error;
  }
}

/** @internal */
export async function loadBorrowedSeat(client: BorrowClient, path: string): Promise<BorrowedSeat> {
  let request: Json, answer: Json, jwks: unknown;
  try {
    const document = JSON.parse(await readFile(path, "utf8")) as Json;
    if (document["format"] !== BORROWED_FORMAT) throw new TypeError("format");
    [request, answer, jwks] = [document["request"] as Json, document["answer"] as Json, document["jwks"]];
    if (!request || typeof request !== "object" || !answer || typeof answer !== "object") throw new TypeError("shape");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") throw error;
    throw new MalformedToken(0, "token_malformed", `${path} is not a saved borrowed seat.`);
  }
  const verifier = new TokenVerifier(async () => jwks, {
    pinnedKeys: client.pinnedKeys,
    tenantId: client.tenantId ?? null,
    leewaySeconds: client.tokenLeewaySeconds,
    machineFingerprint: thisMachine(client.machineId),
  });
  const claims = await verifier.check("acquire", request, answer, 0);
  if (claims["borrowed"] !== true || answer["borrowed"] !== true) throw new TokenMismatch(0, "token_mismatch", "The saved seat is not a borrowed one.");
  return new BorrowedSeat(client, path, answer, claims);
}
