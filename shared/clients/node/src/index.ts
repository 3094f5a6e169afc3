/**
 * seatlease client for Node.js (18.17+): hold a floating-license seat, borrow one for
 * offline use, and verify the deployment's signed answers against the vendor's pinned
 * keys. No runtime dependencies: node:http/node:https (a proxy by CONNECT) and
 * WebCrypto's Ed25519. CommonJS (`require`) and ES modules (`import`) alike.
 */

export { SeatClient, VERSION, type AbortSignalLike, type AcquireOptions, type BorrowOptions, type CallOptions, type ClientOptions, type HeartbeatOptions, type Identity, type Json, type Machine, type Needs, type QueuePlace, type Weight, type Logger } from "./client.js";
export { FINAL_REFUSAL_PAUSE_MS, IDLE_LOST_PAUSE_MS, Lease, type LeaseOptions, type OnIdleWarning, type OnLost, type OnRegained } from "./lease.js";
export { MAX_IDLE_SECONDS } from "./activity.js";
export { BorrowedSeat, BORROWED_FORMAT } from "./borrow.js";
export { TokenVerifier, LEASE_TYP, RELEASE_TYP, claimedSeats, newNonce, pinnedRaw, type Claims, type PinnedKey, type SignedFunction, type VerifierOptions } from "./verify.js";
export { fingerprint, machineId } from "./machine.js";
export * from "./errors.js";
