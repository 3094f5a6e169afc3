/**
 * What `client.ts`, `lease.ts` and `borrow.ts` share: the JSON and option types of the
 * calls, the acquire body and an abortable pause. It imports none of them, so the three
 * depend on it and never on each other in a circle.
 */

export type Json = Record<string, unknown>;
/** Where the client's log lines go (default: nowhere). */
export type Logger = (level: "info" | "warn", message: string) => void;

/**
 * What the client needs of an `AbortSignal` (a real one fits): declared here so that the
 * package's types need neither the DOM's nor @types/node's declarations.
 */
export interface AbortSignalLike {
  readonly aborted: boolean;
  readonly reason?: unknown;
  addEventListener(type: "abort", listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

export interface CallOptions {
  /** Abort the call (and its retries): it rejects with the signal's reason. */
  signal?: AbortSignalLike;
}

/** How one call is retried: at most `retries` extra attempts, within `budgetMs`. */
export interface CallPlan extends CallOptions {
  retries?: number;
  budgetMs?: number;
}

/** Who asks for a seat (FlexNet's user and host names); a license whose policy has a per-user limit, reserved seats or a deny list requires `user`. */
export interface Identity {
  user?: string;
  host?: string;
}

/** What the product needs: every entitlement named must be the license's (else `NotEntitled`), `version` at most its max_version (else `VersionNotEntitled`). */
export interface Needs {
  entitlements?: string[];
  version?: string;
}

/**
 * The lease's weight: it counts as `seats` of the license's seats (a render node as 4), at
 * most the license's seats. Sent only when set: a new lease is then 1, a renewal keeps the
 * held lease's weight; another weight than the held lease's is `SeatsMismatch`.
 */
export interface Weight {
  seats?: number;
}

/** A place in a license's wait queue: `queue: true` asks for one, `ticket` (from a 202) keeps it. */
export interface QueuePlace {
  queue?: boolean;
  ticket?: string;
}

/** This machine (its fingerprint: see `fingerprint()`), sent with an acquire: the lease token then names it (`cnf.machine`). */
export interface Machine {
  /** 64 lowercase hex characters: `fingerprint(machineId())`, or of the product's own machine id. */
  fingerprint?: string;
}

/** A pause that an abort ends early (rejecting with the signal's reason). */
export function sleep(ms: number, signal?: AbortSignalLike): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The acquire body; `fields` (user, host, entitlements, version, seats, fingerprint, queue, ticket) are sent when set. */
export function acquireBody(licenseId: string, clientId: string, leaseSeconds?: number, metadata?: Json, fields: Identity & Needs & Weight & Machine & QueuePlace = {}): Json {
  const body: Json = { license_id: licenseId, client_id: clientId };
  if (leaseSeconds !== undefined) body["lease_seconds"] = leaseSeconds;
  if (metadata !== undefined) body["metadata"] = metadata;
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) body[name] = value;
  return body;
}
