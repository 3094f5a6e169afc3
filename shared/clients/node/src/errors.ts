/**
 * The client's errors: one `SeatError` subclass per answer the service can give (the
 * same classes, codes and meaning as the Python client's), and the map from the answer's
 * `error.code` to class. A plain `SeatError` is the generic HTTP/service error: an
 * answer that is none of the service's known refusals (a 500, a 404 that is not
 * `license_not_found`: a wrong base URL or a middlebox), its message naming the URL.
 */

/** The `error` object of an error answer, as sent (`code`, `message`, and more). */
export type ErrorBody = Record<string, unknown>;

/**
 * An error answer from seatlease: HTTP `status` (0 when no answer came back), machine
 * `code`, human `message`; `body` is the `error` object as sent.
 */
export class SeatError extends Error {
  readonly status: number;
  readonly code: string;
  readonly body: ErrorBody;
  /** Seconds from the answer's `Retry-After` header, when it had one. */
  readonly retryAfterHeader: number | undefined;

  constructor(status: number, code: string, message: string, body: ErrorBody = {}, retryAfter?: number) {
    super(status ? `${status} ${code}: ${message}` : `${code}: ${message}`);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.body = { ...body };
    this.retryAfterHeader = retryAfter;
  }

  protected intField(name: string, fallback: number): number {
    const value = this.body[name];
    return typeof value === "number" && Number.isInteger(value) ? value : fallback;
  }
}

/** 400: the request was refused as invalid (`body` may hold `details`, `max_lease_seconds`, `max_borrow_seconds`). */
export class InvalidRequest extends SeatError {}
/** 401: the API key is missing, unknown or revoked. */
export class Unauthenticated extends SeatError {}
/** 403: the vendor suspended this license (or, as `UserDenied`, refuses this user). */
export class LicenseSuspended extends SeatError {}
/** 403 `user_denied`: the license's policy refuses this `user` any seat (its deny list). */
export class UserDenied extends LicenseSuspended {}
/** 403 `license_not_started`: the license's term begins at `startsAt` (RFC 3339). */
export class LicenseNotStarted extends LicenseSuspended {
  get startsAt(): string | undefined {
    const value = this.body["starts_at"];
    return typeof value === "string" ? value : undefined;
  }
}
/** 403 `license_expired`: the license's term and grace ended at `expiredAt` (a heartbeat too, when the license ends its leases). */
export class LicenseExpired extends LicenseSuspended {
  get expiredAt(): string | undefined {
    const value = this.body["expired_at"];
    return typeof value === "string" ? value : undefined;
  }
}
/** 403 `not_entitled`: the license lacks `missingEntitlements`. */
export class NotEntitled extends LicenseSuspended {
  get missingEntitlements(): string[] {
    const value = this.body["missing_entitlements"];
    return Array.isArray(value) ? value.map(String) : [];
  }
}
/** 403 `version_not_entitled`: the version asked for is above the license's `maxVersion`. */
export class VersionNotEntitled extends LicenseSuspended {
  get maxVersion(): string | undefined {
    const value = this.body["max_version"];
    return typeof value === "string" ? value : undefined;
  }
}
/** 404 `license_not_found`: no such license for this API key's tenant (only that code: any other 404 is a plain `SeatError` naming the URL). */
export class LicenseNotFound extends SeatError {}

/**
 * `invalid_response`: a 2xx whose body is not what the service sends (not JSON, not an
 * object, a required field missing or of the wrong type, larger than 1 MiB). Never a
 * seat; a grant that carried a session id is released at once.
 */
export class InvalidResponse extends SeatError {}

/** 409: every seat is taken; a seat may free in `retryAfterSeconds`. */
export class NoSeatsAvailable extends SeatError {
  get seatsUsed(): number {
    return this.intField("seats_used", 0);
  }
  get seatsTotal(): number {
    return this.intField("seats_total", 0);
  }
  get retryAfterSeconds(): number {
    const header = this.retryAfterHeader ? Math.trunc(this.retryAfterHeader) : 1;
    return Math.max(1, this.intField("retry_after_seconds", header));
  }
  /** Free seats held for clients ahead in the license's wait queue. */
  get seatsHeld(): number {
    return this.intField("seats_held", 0);
  }
  /** Free seats reserved for groups this `user` is not in. */
  get seatsReserved(): number {
    return this.intField("seats_reserved", 0);
  }
  /** The weight asked (`seats`): fewer seats than that were free (1 for a plain request). */
  get seatsRequested(): number {
    return this.intField("seats_requested", 1);
  }
}

/**
 * 409 `seats_mismatch`: this client holds a live lease of `heldSeats` seats and asked for
 * `seats`. Not a `NoSeatsAvailable`: waiting does not cure it; release the lease to take
 * the other weight, or renew without `seats`.
 */
export class SeatsMismatch extends SeatError {
  get heldSeats(): number {
    return this.intField("held_seats", 0);
  }
  get seats(): number {
    return this.intField("seats", 0);
  }
}

/**
 * 409 `machine_mismatch`: this client's seat was borrowed for another machine (its token's
 * `cnf.machine`), which keeps it until it is returned or the borrow ends. Not a
 * `NoSeatsAvailable`: waiting on this machine does not cure it.
 */
export class MachineMismatch extends SeatError {}

/** 409 `queue_full`: no seat, and the license's wait queue already holds `queueMax` clients. */
export class QueueFull extends NoSeatsAvailable {
  get queueMax(): number {
    return this.intField("queue_max", 0);
  }
}

/**
 * 409 `user_limit_reached`: this `user` already holds the license's `maxPerUser` live
 * leases; `retryAfterSeconds` is when the earliest of them ends.
 */
export class UserLimitReached extends NoSeatsAvailable {
  get maxPerUser(): number {
    return this.intField("max_per_user", 0);
  }
  /** The user's live leases on this license. */
  get sessions(): number {
    return this.intField("sessions", 0);
  }
}

/** `wait: true` and no seat came free within the timeout (carries the last denial's numbers). */
export class SeatWaitTimeout extends NoSeatsAvailable {}

/**
 * 410: the session no longer holds a seat. `reason`: `expired` (the heartbeat came after the
 * deadline), `unknown` (no such session: released, reclaimed, or lost with the server's
 * data) or `revoked` (an operator freed the seat: `seatlease revoke`, the portal's "Free
 * seat"; the product can tell its user so).
 */
export class SessionExpired extends SeatError {
  get reason(): string {
    const value = this.body["reason"];
    return typeof value === "string" ? value : "unknown";
  }
}

/**
 * The service could not be reached (`status` 0: refused, reset, timed out, DNS) or
 * answered 503/429/502/504, and kept doing so through every retry.
 */
export class BackendUnavailable extends SeatError {
  get retryAfterSeconds(): number | undefined {
    const value = this.body["retry_after_seconds"];
    return typeof value === "number" ? value : this.retryAfterHeader;
  }
}

/**
 * The answer's signed token failed verification: the answer is not trusted and never
 * counts as a seat, a renewal or a release. Each subclass is one reason (its `code`).
 */
export class TokenError extends SeatError {}
/** `token_missing`: the answer carries no token (an unsigned or fake server). */
export class TokenMissing extends TokenError {}
/** `token_malformed`: not an EdDSA JWT with a kid and the required claims (`alg: none`, HS256, ...). */
export class MalformedToken extends TokenError {}
/** `token_unknown_kid`: the `kid` is not in the deployment's JWKS, even fetched again. */
export class UnknownKeyId extends TokenError {}
/** `token_untrusted_key`: signed by a key that is none of the vendor's pinned keys. */
export class UntrustedKey extends TokenError {}
/** `token_bad_signature`: the signature does not verify (tampered, or another key). */
export class BadSignature extends TokenError {}
/** `token_wrong_audience`: the token is for another license or tenant (`aud`). */
export class WrongAudience extends TokenError {}
/** `token_expired`: `exp` has passed, or `nbf`/`iat` are in the future, beyond the leeway. */
export class TokenExpired extends TokenError {}
/** `token_replayed`: the token does not carry this request's nonce (a recorded answer). */
export class TokenReplayed extends TokenError {}
/** `token_wrong_machine`: a borrowed seat's token names another machine (`cnf.machine`): the file was copied. */
export class TokenWrongMachine extends TokenError {}
/** `token_mismatch`: valid, but for another kind, session, client, deadline or outcome. */
export class TokenMismatch extends TokenError {}

type SeatErrorClass = new (status: number, code: string, message: string, body?: ErrorBody, retryAfter?: number) => SeatError;

/** The refusals whose class follows from their status when their code is unknown (a newer server's code of the same family). 404 is not one: only `license_not_found` is `LicenseNotFound`. */
const BY_STATUS: Record<number, SeatErrorClass> = {
  400: InvalidRequest,
  401: Unauthenticated,
  403: LicenseSuspended,
  409: NoSeatsAvailable,
  410: SessionExpired,
};

/** Answers that say "try again later", whatever their body (a proxy's 502 has no code). */
const TRANSIENT = new Set([429, 502, 503, 504]);

/** The service's codes, each with its class and the status it comes with. */
const BY_CODE: Record<string, { status: number; kind: SeatErrorClass }> = {
  invalid_request: { status: 400, kind: InvalidRequest },
  unauthenticated: { status: 401, kind: Unauthenticated },
  license_suspended: { status: 403, kind: LicenseSuspended },
  user_denied: { status: 403, kind: UserDenied },
  license_not_started: { status: 403, kind: LicenseNotStarted },
  license_expired: { status: 403, kind: LicenseExpired },
  not_entitled: { status: 403, kind: NotEntitled },
  version_not_entitled: { status: 403, kind: VersionNotEntitled },
  license_not_found: { status: 404, kind: LicenseNotFound },
  no_seats_available: { status: 409, kind: NoSeatsAvailable },
  user_limit_reached: { status: 409, kind: UserLimitReached },
  queue_full: { status: 409, kind: QueueFull },
  seats_mismatch: { status: 409, kind: SeatsMismatch },
  machine_mismatch: { status: 409, kind: MachineMismatch },
  session_expired: { status: 410, kind: SessionExpired },
};

/**
 * The typed error of an HTTP error answer, by its `error.code`: a known code (with its
 * status) is its class; 429/502/503/504 are `BackendUnavailable`; an unknown code of a
 * refusal's status (400, 401, 403, 409, 410) is that status's class; anything else (a
 * 500, a 404 that is not `license_not_found`, a 4xx without a code) is a plain
 * `SeatError` whose code is the server's or `http_<status>` and whose message names `url`.
 */
export function errorFromAnswer(status: number, payload: unknown, retryAfterHeader: string | null | undefined, statusText: string, url?: string): SeatError {
  const outer = payload !== null && typeof payload === "object" ? (payload as Record<string, unknown>)["error"] : undefined;
  const error = outer !== null && typeof outer === "object" && !Array.isArray(outer) ? (outer as ErrorBody) : {};
  const served = typeof error["code"] === "string" && error["code"] ? error["code"] : undefined;
  const own = served !== undefined && Object.hasOwn(BY_CODE, served) ? BY_CODE[served] : undefined;
  let kind: SeatErrorClass = SeatError;
  if (own !== undefined && own.status === status) kind = own.kind;
  else if (TRANSIENT.has(status)) kind = BackendUnavailable;
  else if (served !== undefined && Object.hasOwn(BY_STATUS, status)) kind = BY_STATUS[status] as SeatErrorClass;
  const code = served ?? (kind === BackendUnavailable ? "backend_unavailable" : `http_${status}`);
  let message = typeof error["message"] === "string" && error["message"] ? error["message"] : `HTTP ${status} ${statusText}`.trim();
  if (kind === SeatError && url !== undefined) message = `${url} answered ${status}: ${message}`;
  return new kind(status, code, message, error, parseRetryAfter(retryAfterHeader));
}

/** Seconds from a `Retry-After` header (integer seconds; an HTTP date from a proxy is ignored). */
export function parseRetryAfter(value: string | null | undefined): number | undefined {
  if (!value) return undefined;
  const seconds = Number(value);
  return Number.isFinite(seconds) && seconds >= 0 && seconds < 86400 ? seconds : undefined;
}
