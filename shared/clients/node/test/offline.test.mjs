// What needs no server: the options, the package's surface, the errors' shape.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import * as seatlease from "seatlease-client";

const { SeatClient, NoSeatsAvailable, BackendUnavailable, SeatError, pinnedRaw } = seatlease;

test("the package has no runtime dependencies", () => {
  const manifest = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8"));
  assert.equal(manifest.dependencies, undefined);
  assert.equal(manifest.type, "module");
});

test("a base URL must be http(s); the API key never shows", () => {
  assert.throws(() => new SeatClient("ftp://x", "k"), TypeError);
  assert.throws(() => new SeatClient("not a url", "k"), TypeError);
  const client = new SeatClient("http://127.0.0.1:1/", "sl_secret");
  assert.equal(client.baseUrl, "http://127.0.0.1:1");
  assert.ok(!String(client).includes("sl_secret") && !JSON.stringify(client).includes("sl_secret"));
});

test("a denial's numbers come from the body, then Retry-After", () => {
  const denied = new NoSeatsAvailable(409, "no_seats_available", "full", { seats_used: 2, seats_total: 2, retry_after_seconds: 7 }, 3);
  assert.deepEqual([denied.seatsUsed, denied.seatsTotal, denied.retryAfterSeconds], [2, 2, 7]);
  assert.equal(new NoSeatsAvailable(409, "x", "y", {}, 4).retryAfterSeconds, 4);
  assert.ok(denied instanceof SeatError && denied instanceof Error && denied.name === "NoSeatsAvailable");
  assert.equal(new BackendUnavailable(503, "x", "y", {}, 2).retryAfterSeconds, 2);
});

test("a policy's codes have their own classes, only with their own status", () => {
  const { errorFromAnswer, UserLimitReached, UserDenied, LicenseSuspended } = seatlease;
  const over = errorFromAnswer(409, { error: { code: "user_limit_reached", message: "m", max_per_user: 2, sessions: 2, retry_after_seconds: 118 } }, "118", "Conflict");
  assert.ok(over instanceof UserLimitReached && over instanceof NoSeatsAvailable && over.name === "UserLimitReached");
  assert.deepEqual([over.maxPerUser, over.sessions, over.retryAfterSeconds, over.code], [2, 2, 118, "user_limit_reached"]);
  const denied = errorFromAnswer(403, { error: { code: "user_denied", message: "m" } }, null, "Forbidden");
  assert.ok(denied instanceof UserDenied && denied instanceof LicenseSuspended && denied.status === 403);
  const suspended = errorFromAnswer(403, { error: { code: "license_suspended", message: "m" } }, null, "Forbidden");
  assert.ok(suspended instanceof LicenseSuspended && !(suspended instanceof UserDenied));
  const odd = errorFromAnswer(400, { error: { code: "user_denied", message: "m" } }, null, "Bad Request");
  assert.ok(odd instanceof seatlease.InvalidRequest && !(odd instanceof UserDenied));
  const inherited = errorFromAnswer(409, { error: { code: "constructor", message: "m" } }, null, "Conflict");
  assert.ok(inherited instanceof NoSeatsAvailable && !(inherited instanceof UserLimitReached));
});

test("pinned keys: a JWK, its x, or a PEM public key give the same raw key", () => {
  const x = "4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk";
  const der = Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), Buffer.from(x, "base64url")]);
  const pem = `-----BEGIN PUBLIC KEY-----\n${der.toString("base64")}\n-----END PUBLIC KEY-----\n`;
  assert.equal(pinnedRaw({ kty: "OKP", crv: "Ed25519", x }), x);
  assert.equal(pinnedRaw(pem), x);
  assert.equal(pinnedRaw(x), x);
  assert.throws(() => pinnedRaw({ kty: "RSA", n: "x" }), TypeError);
  assert.throws(() => pinnedRaw("c2hvcnQ"), TypeError);
});
