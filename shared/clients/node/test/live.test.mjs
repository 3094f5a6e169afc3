// The Node client against the real served functions (acquire, heartbeat, release, keys
// on real Redis and PostgreSQL), started by tests/test_client_node.py, which passes
// SEATLEASE_TEST_URL and SEATLEASE_TEST_API_KEY; its /_test/ routes create licenses,
// flush Redis, revoke a lease, stall or fail the next request, and show the request log
// and live seats.
import assert from "node:assert/strict";
import { mkdtemp, readFile, writeFile, stat } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";

import {
  BackendUnavailable,
  InvalidRequest,
  LicenseExpired,
  LicenseNotFound,
  LicenseNotStarted,
  LicenseSuspended,
  NoSeatsAvailable,
  NotEntitled,
  QueueFull,
  SeatClient,
  SeatError,
  SeatWaitTimeout,
  SeatsMismatch,
  TokenError,
  claimedSeats,
  Unauthenticated,
  UserDenied,
  UserLimitReached,
  VersionNotEntitled,
} from "seatlease-client";

const URL_ = process.env.SEATLEASE_TEST_URL;
const KEY = process.env.SEATLEASE_TEST_API_KEY;
const PINNED = (process.env.SEATLEASE_TEST_PINNED_KEYS ?? "").split(",").filter(Boolean);
if (!URL_ || !KEY || !PINNED.length) throw new Error("run through pytest tests/test_client_node.py (SEATLEASE_TEST_URL, SEATLEASE_TEST_API_KEY, SEATLEASE_TEST_PINNED_KEYS)");

const unhandled = [];
process.on("unhandledRejection", (reason) => unhandled.push(reason));

async function control(action, body) {
  const response = await fetch(`${URL_}/_test/${action}`, body === undefined ? {} : { method: "POST", body: JSON.stringify(body), headers: { "Content-Type": "application/json" } });
  assert.equal(response.status, 200, action);
  return response.json();
}
const license = (license_id, fields = {}) => control("license", { license_id, ...fields });
const live = async (licenseId) => (await control(`live?license_id=${licenseId}`));
const queue = async (licenseId) => (await control(`queue?license_id=${licenseId}`));
const requests = async (path) => (await control("log")).filter((entry) => entry.path === path);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function eventually(check, ms, what) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

test("a verified lease lives past three lease lengths, keeps its seat through a Redis flush by its token (410 unknown, one retry with the token: the same session, no onLost) and is released", async () => {
  await license("node-life", { seats: 2, lease_seconds: 2 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, verify: true, tenantId: "acme", backoffMs: 50 });
  const events = { lost: [], regained: 0 };
  const lease = await client.lease("node-life", {
    clientId: "ws-1",
    metadata: { user: "ann" },
    onLost: (_lease, reason) => events.lost.push(reason),
    onRegained: () => (events.regained += 1),
  });
  assert.ok(lease.sessionId && !lease.lost && lease.token);
  assert.deepEqual([lease.leaseSeconds, lease.seatsUsed, lease.seatsTotal], [2, 1, 2]);
  assert.deepEqual(client.held(), [lease]);
  const first = { session: lease.sessionId, expires: lease.expiresAt.getTime() };
  await sleep(6500); // three and a quarter leases of 2 s
  assert.deepEqual((await live("node-life")).map((s) => s.session_id), [first.session]);
  assert.equal(lease.sessionId, first.session);
  assert.ok(lease.expiresAt.getTime() > first.expires + 4000);
  const beats = (await requests("/heartbeat")).length;
  assert.ok(beats >= 8 && beats <= 14, `${beats} heartbeats`);
  assert.deepEqual(events.lost, []);

  const before = (await requests("/heartbeat")).length;
  await control("flush"); // Redis forgets every seat (a region lost): the next heartbeat answers 410 unknown
  await eventually(async () => (await requests("/heartbeat")).slice(before).some((r) => r.status === 410), 5000, "a heartbeat answered 410");
  await sleep(1500); // the retry with the token re-admitted the session; later heartbeats renew it
  const since = (await requests("/heartbeat")).slice(before);
  const [gone, readmitted, ...later] = since.slice(since.findIndex((r) => r.status === 410));
  assert.deepEqual([gone.status, readmitted.status], [410, 200]);
  assert.notEqual(readmitted.request_id, gone.request_id);
  assert.ok(later.every((r) => r.status === 200));
  assert.deepEqual(events, { lost: [], regained: 0 });
  assert.ok(!lease.lost && lease.sessionId === first.session);
  assert.deepEqual(await live("node-life"), [{ session_id: first.session, client_id: "ws-1" }]);

  await lease.close();
  await lease.close(); // once
  assert.ok(lease.released);
  assert.deepEqual(await live("node-life"), []);
  assert.deepEqual(client.held(), []);
  const releases = await requests("/release");
  assert.equal(releases.filter((r) => r.status === 200).length, 1);
});

test("a seat an operator revokes is lost as revoked (one 410, its token never sent) and acquired again as a new session", async () => {
  await license("node-revoke", { seats: 1, lease_seconds: 2 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, verify: true, tenantId: "acme", backoffMs: 50 });
  const events = { lost: [], regained: 0 };
  const lease = await client.lease("node-revoke", {
    clientId: "ws-1",
    onLost: (l, reason) => events.lost.push([reason, l.lostReason]),
    onRegained: () => (events.regained += 1),
  });
  try {
    const first = lease.sessionId;
    const before = (await requests("/heartbeat")).length;
    await control("revoke", { license_id: "node-revoke", session_id: first }); // seatlease revoke
    await eventually(() => events.regained === 1, 6000, "the seat regained after the revoke");
    assert.deepEqual(events.lost, [["revoked", "revoked"]]);
    assert.ok(!lease.lost && lease.sessionId !== first);
    assert.deepEqual(await live("node-revoke"), [{ session_id: lease.sessionId, client_id: "ws-1" }]);
    // one heartbeat refused: no retry with the token (the server refuses a revoked session's token)
    const refused = (await requests("/heartbeat")).slice(before).filter((r) => r.status === 410);
    assert.equal(refused.length, 1, JSON.stringify(refused));
  } finally {
    await lease.close();
  }
  assert.deepEqual(await live("node-revoke"), []);
});

test("a stalled server: the retry carries the same request_id and gets the first answer", async () => {
  await license("node-stall", { seats: 2, lease_seconds: 60 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, verify: true, timeoutMs: 500, backoffMs: 50 });
  await control("stall", { path: "/acquire", seconds: 1.5 });
  const answer = await client.acquire("node-stall", "pc-1");
  const acquires = (await requests("/acquire")).slice(-2);
  assert.equal(acquires.length, 2);
  assert.equal(acquires[0].request_id, acquires[1].request_id);
  assert.ok(/^[0-9a-f]{32}$/.test(acquires[0].request_id));
  // both attempts were answered 201 (created): the retry was told what the first did
  assert.deepEqual(acquires.map((a) => a.status), [201, 201]);
  assert.deepEqual((await live("node-stall")).map((s) => s.session_id), [answer.session_id]);
  assert.equal(answer.seats_used, 1);

  await control("stall", { path: "/release", seconds: 1.5 });
  const released = await client.release("node-stall", answer.session_id);
  assert.deepEqual([released.released, released.seats_used], [true, 0]);
  const releases = (await requests("/release")).slice(-2);
  assert.equal(releases[0].request_id, releases[1].request_id);
});

test("borrow a seat, load it offline, refuse an edited file, return it early", async () => {
  await license("node-borrow", { seats: 1, lease_seconds: 60, max_borrow_seconds: 86400 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, tenantId: "acme" });
  const path = join(await mkdtemp(join(tmpdir(), "seatlease-")), "seat.json");
  const seat = await client.borrow("node-borrow", "laptop", 3600, { path });
  assert.equal(seat.borrowSeconds, 3600);
  assert.ok(Math.abs(seat.secondsLeft - 3600) < 5 && !seat.expired);
  assert.equal(seat.claims.borrowed, true);
  assert.equal((await stat(path)).mode & 0o777, 0o600);
  await assert.rejects(client.acquire("node-borrow", "desk"), NoSeatsAvailable); // the borrow holds the only seat

  const loaded = await client.loadBorrowed(path);
  assert.equal(loaded.sessionId, seat.sessionId);
  const saved = JSON.parse(await readFile(path, "utf8"));
  const edited = join(path, "..", "edited.json");
  saved.answer.lease_expires_at = "2099-01-01T00:00:00.000Z";
  await writeFile(edited, JSON.stringify(saved));
  await assert.rejects(client.loadBorrowed(edited), (error) => error instanceof TokenError && error.code === "token_mismatch");

  const answer = await loaded.returnEarly();
  assert.equal(answer.released, true);
  await assert.rejects(stat(path), { code: "ENOENT" });
  assert.deepEqual(await live("node-borrow"), []);
});

test("a borrow beyond the license's maximum is refused and saves nothing", async () => {
  await license("node-noborrow", { seats: 1 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, verify: true });
  const path = join(await mkdtemp(join(tmpdir(), "seatlease-")), "seat.json");
  await assert.rejects(client.borrow("node-noborrow", "laptop", 3600, { path }), (e) => e.status === 400 && e.body.max_borrow_seconds === 0);
  await assert.rejects(stat(path), { code: "ENOENT" });
});

test("typed errors: wrong API key, unknown license, no seats, wait timeout", async () => {
  await license("node-full", { seats: 1, lease_seconds: 60 });
  const wrong = new SeatClient(URL_, "sl_wrong_key", { pinnedKeys: PINNED, backoffMs: 10 });
  await assert.rejects(wrong.acquire("node-full", "a"), (e) => e instanceof Unauthenticated && e.status === 401 && !String(e).includes(KEY));
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, backoffMs: 10 });
  await assert.rejects(client.acquire("no-such-license", "a"), (e) => e instanceof LicenseNotFound && e.code === "license_not_found");
  const held = await client.lease("node-full", { clientId: "a" });
  await assert.rejects(client.acquire("node-full", "b"), (e) => e instanceof NoSeatsAvailable && e.seatsUsed === 1 && e.retryAfterSeconds >= 1);
  const started = Date.now();
  await assert.rejects(client.lease("node-full", { clientId: "b", wait: true, timeoutMs: 300 }), SeatWaitTimeout);
  assert.ok(Date.now() - started < 3000);
  await held.close();
  assert.deepEqual(await live("node-full"), []);
});

test("a 500 from the server is a SeatError, not retried", async () => {
  await license("node-500", { seats: 1 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, backoffMs: 10 });
  const before = (await requests("/acquire")).length;
  await control("fail", { path: "/acquire", status: 500 });
  await assert.rejects(client.acquire("node-500", "a"), (e) => e instanceof SeatError && !(e instanceof BackendUnavailable) && e.status === 500 && e.code === "internal");
  assert.equal((await requests("/acquire")).length, before + 1);
});

test("a 503 with Retry-After is retried no sooner, with the same request_id", async () => {
  await license("node-503", { seats: 1 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, backoffMs: 10 });
  await control("fail", { path: "/acquire", status: 503, retry_after: 1 });
  const started = performance.now();
  const answer = await client.acquire("node-503", "a");
  assert.ok(performance.now() - started >= 1000, "waited less than Retry-After");
  assert.equal(answer.seats_used, 1);
  const [failed, served] = (await requests("/acquire")).slice(-2);
  assert.deepEqual([failed.status, served.status], [503, 201]);
  assert.equal(failed.request_id, served.request_id);
});

test("waiting for a seat gets the one released meanwhile", async () => {
  await license("node-wait", { seats: 1, lease_seconds: 60 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, maxWaitPollMs: 300 }); // Retry-After is ~60 s here
  const first = await client.lease("node-wait", { clientId: "a" });
  setTimeout(() => first.close(), 500);
  const started = performance.now();
  const second = await client.lease("node-wait", { clientId: "b", wait: true, timeoutMs: 10_000 });
  assert.ok(performance.now() - started >= 450 && first.released);
  assert.deepEqual(await live("node-wait"), [{ session_id: second.sessionId, client_id: "b" }]);
  await second.close();
});

test("waiting clients on a license with a queue get the seat in the order they joined", async () => {
  // a hold of 3 s: the queue's retry_after_seconds is at most a third of it
  await license("node-queue", { seats: 1, lease_seconds: 30, policy: { queue: true, queue_hold_seconds: 3 } });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, verify: true, tenantId: "acme" }); // a 202 carries no token
  const holder = await client.acquire("node-queue", "holder", { user: "hal" });
  const names = ["w1", "w2", "w3"];
  const order = [];
  const waiters = [];
  for (const [i, name] of names.entries()) {
    const waiting = client.lease("node-queue", { clientId: name, user: `user-${name}`, host: `pc-${name}`, wait: true, timeoutMs: 30_000 });
    waiters.push(waiting.then((lease) => (order.push(lease.clientId), lease)));
    await eventually(async () => (await queue("node-queue")).length === i + 1, 5000, `${name} in line`);
  }
  assert.deepEqual(await queue("node-queue"), names.map((n) => ({ client_id: n, user: `user-${n}`, host: `pc-${n}` })));
  await sleep(2500); // they keep their places: each comes back with its ticket, paced by retry_after_seconds
  assert.deepEqual((await queue("node-queue")).map((t) => t.client_id), names);
  const polls = (await requests("/acquire")).filter((entry) => entry.status === 202).length;
  assert.ok(polls >= 6, `${polls} answers 202`);
  assert.deepEqual(order, []);
  await client.release("node-queue", holder.session_id);
  for (const [i, name] of names.entries()) {
    const lease = await waiters[i];
    assert.deepEqual(order, names.slice(0, i + 1));
    assert.ok(lease.token, "the grant's token verified");
    assert.deepEqual(await live("node-queue"), [{ session_id: lease.sessionId, client_id: name }]);
    assert.deepEqual((await queue("node-queue")).map((t) => t.client_id), names.slice(i + 1));
    await lease.close();
  }
  assert.deepEqual(await live("node-queue"), []);
});

test("waiting in line gives up at the timeout with SeatWaitTimeout", async () => {
  await license("node-queue-timeout", { seats: 1, lease_seconds: 30, policy: { queue: true, queue_hold_seconds: 3 } });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED });
  const held = await client.lease("node-queue-timeout", { pinnedKeys: PINNED, clientId: "a" });
  const started = performance.now();
  await assert.rejects(client.lease("node-queue-timeout", { clientId: "b", wait: true, timeoutMs: 1500 }), (e) => e instanceof SeatWaitTimeout && e.code === "seat_wait_timeout");
  assert.ok(performance.now() - started >= 1400 && performance.now() - started < 5000);
  assert.deepEqual((await queue("node-queue-timeout")).map((t) => t.client_id), ["b"]);
  const plain = await client.acquire("node-queue-timeout", "c", { queue: true });
  assert.equal(plain.queued, true);
  assert.equal(plain.position, 2);
  assert.ok(plain.retry_after_seconds >= 1 && typeof plain.ticket === "string");
  await held.close();
});

test("a full wait queue is a QueueFull (a NoSeatsAvailable) with its bound", async () => {
  await license("node-queue-full", { seats: 1, lease_seconds: 30, policy: { queue: true, queue_max: 1 } });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, backoffMs: 10 });
  await client.acquire("node-queue-full", "a");
  const place = await client.acquire("node-queue-full", "b", { queue: true });
  assert.equal(place.queued, true);
  await assert.rejects(
    client.acquire("node-queue-full", "c", { queue: true }),
    (e) => e instanceof QueueFull && e instanceof NoSeatsAvailable && e.status === 409 && e.code === "queue_full" && e.queueMax === 1 && e.retryAfterSeconds >= 1,
  );
  await assert.rejects(client.acquire("node-queue-full", "d"), (e) => e instanceof NoSeatsAvailable && !(e instanceof QueueFull) && e.seatsHeld === 0);
});

test("typed errors of a license policy: user_limit_reached, user_denied, user required", async () => {
  await license("node-policy", { seats: 3, lease_seconds: 60, policy: { max_per_user: 1, deny_users: ["mallory"] } });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, backoffMs: 10 });
  const ann = await client.lease("node-policy", { clientId: "ann-1", user: "ann", host: "pc-1" });
  await assert.rejects(
    client.acquire("node-policy", "ann-2", { user: "ann" }),
    (e) => e instanceof UserLimitReached && e instanceof NoSeatsAvailable && e.status === 409 && e.code === "user_limit_reached" && e.maxPerUser === 1 && e.sessions === 1 && e.retryAfterSeconds >= 50,
  );
  await assert.rejects(client.lease("node-policy", { clientId: "ann-2", user: "ann", wait: true, timeoutMs: 300 }), SeatWaitTimeout);
  await assert.rejects(
    client.lease("node-policy", { clientId: "m-1", user: "mallory" }),
    (e) => e instanceof UserDenied && e instanceof LicenseSuspended && e.status === 403 && e.code === "user_denied",
  );
  await assert.rejects(client.acquire("node-policy", "x-1"), (e) => e instanceof InvalidRequest && e.status === 400 && !(e instanceof UserDenied));
  await assert.rejects(client.acquire("no-such-license", "y-1", { user: "ann" }), (e) => e instanceof LicenseNotFound && !(e instanceof UserLimitReached));
  assert.deepEqual((await live("node-policy")).map((s) => s.client_id), ["ann-1"]);
  await ann.close();
});

test("an unreachable URL is a BackendUnavailable after the retries; a keeper that loses the server marks the lease lost", async () => {
  const port = await new Promise((resolve) => {
    const server = createServer().listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
  const client = new SeatClient(`http://127.0.0.1:${port}`, KEY, { pinnedKeys: PINNED, retries: 2, backoffMs: 10 });
  await assert.rejects(client.acquire("lic", "a"), (e) => e instanceof BackendUnavailable && e.status === 0 && e.code === "network_error" && !String(e).includes(KEY));
  await assert.rejects(client.lease("lic", { clientId: "a" }), BackendUnavailable);
  assert.deepEqual(client.held(), []);
  const aborted = new AbortController();
  const call = client.acquire("lic", "a", { signal: aborted.signal });
  aborted.abort(new Error("stop"));
  await assert.rejects(call, { message: "stop" });
});

test("an outage longer than the lease marks it lost (unreachable), then the seat is regained", async () => {
  await license("node-outage", { seats: 1, lease_seconds: 2 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, backoffMs: 50 });
  const events = { lost: [], regained: 0 };
  const lease = await client.lease("node-outage", {
    clientId: "ws-1",
    onLost: (_lease, reason) => events.lost.push(reason),
    onRegained: () => (events.regained += 1),
  });
  const old = lease.sessionId;
  await control("outage", { seconds: 3 });
  await eventually(() => lease.lost, 3000, "the lease marked lost");
  assert.deepEqual(events.lost, ["unreachable"]);
  assert.equal(lease.lostReason, "unreachable");
  await eventually(() => !lease.lost, 5000, "the seat regained");
  assert.equal(events.regained, 1);
  assert.notEqual(lease.sessionId, old);
  assert.deepEqual(await live("node-outage"), [{ session_id: lease.sessionId, client_id: "ws-1" }]);
  await lease.close();
  assert.deepEqual(await live("node-outage"), []);
});

test("closing the lease from its onLost callback stops it without a new seat", async () => {
  await license("node-callback", { seats: 1, lease_seconds: 2 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, backoffMs: 50 });
  let closing;
  const lease = await client.lease("node-callback", { clientId: "ws-1", onLost: (l) => (closing = l.close()) });
  await control("outage", { seconds: 3 }); // longer than the lease: lost (unreachable)
  await eventually(() => closing !== undefined, 5000, "onLost");
  await closing;
  assert.ok(lease.released && lease.lost);
  await sleep(1500); // no re-acquire after the close
  assert.deepEqual(await live("node-callback"), []);
  assert.deepEqual(client.held(), []);
});

test("a license's term and entitlements: the lease shows them, the refusals are typed, the end is a lost seat", async () => {
  await license("node-term", { seats: 2, lease_seconds: 60, expires_in_seconds: 1.5, grace_seconds: 1, entitlements: ["pro", "render"], max_version: "2026.4" });
  await license("node-later", { seats: 1, starts_in_seconds: 3600 });
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, verify: true, tenantId: "acme", backoffMs: 50 });
  const lost = [];
  const lease = await client.lease("node-term", { clientId: "ws-1", entitlements: ["pro"], version: "2026.4", onLost: (_l, reason) => lost.push(reason) });
  assert.deepEqual(lease.entitlements, ["pro", "render"]);
  assert.equal(lease.maxVersion, "2026.4");
  assert.ok(lease.licenseExpiresAt instanceof Date && !lease.inGrace);
  await assert.rejects(client.acquire("node-term", "ws-2", { entitlements: ["pro", "cloud"] }), (e) => e instanceof NotEntitled && e instanceof LicenseSuspended && e.missingEntitlements.join() === "cloud");
  await assert.rejects(client.acquire("node-term", "ws-2", { version: "2026.10" }), (e) => e instanceof VersionNotEntitled && e.maxVersion === "2026.4");
  await assert.rejects(client.acquire("node-later", "ws-2"), (e) => e instanceof LicenseNotStarted && typeof e.startsAt === "string");
  await sleep(Math.max(0, lease.licenseExpiresAt.getTime() - Date.now()) + 200);
  const grace = await client.acquire("node-term", "ws-3");
  assert.equal(grace.in_grace, true);
  await sleep(1200);
  await assert.rejects(client.acquire("node-term", "ws-4"), (e) => e instanceof LicenseExpired && typeof e.expiredAt === "string");
  await eventually(() => lease.lost, 5000, "the lease lost at the license's end");
  assert.equal(lost[0], "license_expired");
  await lease.close();
});

test("a weighted lease: its seats on the answer, the token and the server, kept on renewal and after a loss; seats_mismatch; a denial of more seats than are free", async () => {
  await license("node-weights", { seats: 4, lease_seconds: 3 }); // heartbeats every second
  const client = new SeatClient(URL_, KEY, { pinnedKeys: PINNED, verify: true, tenantId: "acme", backoffMs: 50 });
  let regained = 0;
  const lease = await client.lease("node-weights", { clientId: "render-1", seats: 3, onRegained: () => (regained += 1) });
  assert.deepEqual([lease.seats, lease.seatsUsed, lease.seatsTotal], [3, 3, 4]);
  const claims = JSON.parse(Buffer.from(lease.token.split(".")[1], "base64url").toString());
  assert.equal(claimedSeats(claims), 3);
  const renewed = await client.acquire("node-weights", "render-1"); // no seats: keeps the weight
  assert.deepEqual([renewed.seats, renewed.session_id], [3, lease.sessionId]);
  await assert.rejects(client.acquire("node-weights", "render-1", { seats: 2 }), (e) => e instanceof SeatsMismatch && e.heldSeats === 3 && e.seats === 2);
  await assert.rejects(client.acquire("node-weights", "ws-2", { seats: 2 }), (e) => e instanceof NoSeatsAvailable && e.seatsRequested === 2 && e.seatsUsed === 3);
  const plain = await client.acquire("node-weights", "ws-3"); // the last seat
  assert.deepEqual([plain.seats, plain.seats_used], [undefined, 4]); // a plain lease: no seats
  await client.release("node-weights", plain.session_id);
  assert.deepEqual(await control("weights?license_id=node-weights"), { "render-1": 3 });
  const session = lease.sessionId;
  await control("flush"); // Redis forgets the seat: re-admitted by its token, with its weight
  await sleep(2500);
  assert.deepEqual([regained, lease.lost, lease.sessionId, lease.seats], [0, false, session, 3]);
  assert.deepEqual(await control("weights?license_id=node-weights"), { "render-1": 3 });
  await control("outage", { seconds: 4 }); // longer than the lease: lost, then the re-acquire asks for the same weight
  await eventually(() => regained === 1 && !lease.lost, 10000, "the weighted seat regained");
  assert.equal(lease.seats, 3);
  assert.notEqual(lease.sessionId, session);
  assert.deepEqual(await control("weights?license_id=node-weights"), { "render-1": 3 });
  await lease.close();
});

after(() => {
  assert.deepEqual(unhandled, [], "no unhandled promise rejection");
});

// -- issue 50: idle reporting, where the engine decides (the scripted wire tests: idle.test.mjs).
// Last in this file: their heartbeats are not in the counts of the tests above.

const idleClient = () => new SeatClient(URL_, KEY, { pinnedKeys: PINNED, backoffMs: 100, maxWaitPollMs: 1000 });

test("idle: a lease idle past the timeout is warned (onIdleWarning once) and a touch cancels the warning", async () => {
  await license("node-idle1", { seats: 1, lease_seconds: 3, idle_timeout_seconds: 60 });
  const warned = [];
  const lease = await idleClient().lease("node-idle1", { clientId: "pc-1", onIdleWarning: (_l, at) => warned.push(at) });
  try {
    lease.touch(61); // the last activity 61 s ago: no test waits a minute
    await eventually(() => lease.idleReclaimAt !== undefined, 5000, "the idle warning");
    assert.equal(warned.length, 1);
    assert.ok(warned[0].getTime() > Date.now() - 1000, warned[0].toISOString());
    lease.touch();
    await eventually(() => lease.idleReclaimAt === undefined, 3000, "the warning cancelled");
    assert.ok(!lease.lost);
  } finally {
    await lease.close();
  }
});

test("idle: always reclaims an idle lease, lost as idle, not taken back until a touch", async () => {
  await license("node-idle2", { seats: 1, lease_seconds: 3, idle_timeout_seconds: 60, idle_reclaim: "always" });
  const lost = [];
  const lease = await idleClient().lease("node-idle2", { clientId: "pc-1", onLost: (_l, reason) => lost.push(reason) });
  try {
    lease.touch(3600);
    await eventually(() => lease.lost, 8000, "the idle lease reclaimed");
    assert.deepEqual([lease.lostReason, lost], ["idle", ["idle"]]);
    await sleep(2000);
    assert.ok(lease.lost); // not taken straight back
    assert.deepEqual(await live("node-idle2"), []);
    lease.touch();
    await eventually(() => !lease.lost, 5000, "the seat asked for again on activity");
  } finally {
    await lease.close();
  }
});

test("idle: a busy lease is never warned nor reclaimed", async () => {
  await license("node-idle3", { seats: 1, lease_seconds: 3, idle_timeout_seconds: 60, idle_reclaim: "always" });
  const lease = await idleClient().lease("node-idle3", { clientId: "pc-1" });
  try {
    lease.touch(3600);
    await lease.busy(() => sleep(4000));
    assert.deepEqual([lease.idleReclaimAt, lease.lost], [undefined, false]);
  } finally {
    await lease.close();
  }
});
