// The Node client against the fake bad server's behaviours (tests/client_bad_server.py),
// started by tests/test_client_node.py, which passes its URL in SEATLEASE_BAD_URL: a
// Retry-After of an hour never outlasts the maximum back-off, an ended term is said once
// and asked again only minutes later, a suspended license keeps its held seats.
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { BackendUnavailable, InvalidResponse, LicenseExpired, LicenseNotFound, LicenseSuspended, SeatClient, SeatError, TokenMissing, UntrustedKey } from "seatlease-client";

const BAD = process.env.SEATLEASE_BAD_URL;
if (!BAD) throw new Error("run through pytest tests/test_client_node.py (SEATLEASE_BAD_URL)");
const KEY = "sl_00000000_kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk";
const PINNED = [process.env.SEATLEASE_BAD_PINNED_KEY]; // the bad server's signing key (its x)
if (!PINNED[0]) throw new Error("run through pytest tests/test_client_node.py (SEATLEASE_BAD_PINNED_KEY)");

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const calls = async (scenario) => (await fetch(`${BAD}/${scenario}/_calls`)).json();
const reset = async (scenario) => assert.equal((await fetch(`${BAD}/${scenario}/_reset`)).status, 200);
async function eventually(check, ms, what) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

test("a Retry-After of an hour never outlasts the maximum back-off", async () => {
  const client = new SeatClient(`${BAD}/retry_after_long`, KEY, { pinnedKeys: PINNED, backoffMs: 100, maxBackoffMs: 1000, retries: 2 });
  const started = performance.now();
  const signal = AbortSignal.timeout(10_000); // a client asleep for an hour fails here, not hangs
  await assert.rejects(client.acquire("lic", "pc-1", { signal }), (e) => e instanceof BackendUnavailable && e.status === 503 && e.retryAfterSeconds === 3600);
  assert.ok(performance.now() - started < 4000, `${performance.now() - started} ms`);
});

test("an ended term: the seat lost once (license_expired), said once, asked again only minutes later; a waiting program is told at once", async () => {
  await reset("term_ended");
  const warnings = [];
  const client = new SeatClient(`${BAD}/term_ended`, KEY, { pinnedKeys: PINNED, backoffMs: 50, logger: (level, message) => level === "warn" && warnings.push(message) });
  const lost = [];
  const lease = await client.lease("lic", { clientId: "pc-1", onLost: (_l, reason) => lost.push(reason) });
  try {
    await eventually(() => lease.lost, 5000, "the seat lost");
    assert.equal(lease.lostReason, "license_expired");
    await sleep(8000); // the old client asked again (and warned) every few seconds
    assert.deepEqual(lost, ["license_expired"]);
    assert.ok(lease.lost);
    const counted = await calls("term_ended");
    assert.ok(counted.heartbeat === 1 && counted.acquire <= 2, JSON.stringify(counted)); // the grant, at most one re-acquire
    assert.equal(warnings.length, 1, warnings.join("\n"));
    assert.match(warnings[0], /license/);
    const started = performance.now();
    await assert.rejects(client.lease("lic", { clientId: "pc-2", wait: true, timeoutMs: 60_000 }), (e) => e instanceof LicenseExpired && typeof e.expiredAt === "string");
    assert.ok(performance.now() - started < 2000);
  } finally {
    await lease.close();
  }
});

test("a suspended license keeps its held seat (heartbeats go on) and refuses a new one at once", async () => {
  await reset("suspended");
  const client = new SeatClient(`${BAD}/suspended`, KEY, { pinnedKeys: PINNED, backoffMs: 50 });
  const lost = [];
  const lease = await client.lease("lic", { clientId: "pc-1", onLost: (_l, reason) => lost.push(reason) });
  try {
    const started = performance.now();
    await assert.rejects(client.lease("lic", { clientId: "pc-2", wait: true, timeoutMs: 60_000 }), (e) => e instanceof LicenseSuspended && e.code === "license_suspended");
    assert.ok(performance.now() - started < 2000);
    await sleep(4000); // past its 3 s lease: kept by heartbeats (every second)
    assert.ok(!lease.lost);
    assert.deepEqual(lost, []);
    const counted = await calls("suspended");
    assert.ok(counted.heartbeat >= 3 && counted.acquire === 2, JSON.stringify(counted));
  } finally {
    await lease.close();
  }
});

// -- issue 48: verified by default, every exchange bounded, answers read by their code --------

const BAD_KEY = PINNED[0];
const pinned = (scenario, options = {}) => new SeatClient(`${BAD}/${scenario}`, KEY, { pinnedKeys: PINNED, backoffMs: 50, releaseTimeoutMs: 2000, ...options });

test("a default-constructed client is refused: no pinned key, no opt-out; so a 201 without a signed token is never a seat", async () => {
  await reset("no_token");
  assert.throws(() => new SeatClient(`${BAD}/no_token`, KEY), (e) => e instanceof TypeError && /pinnedKeys/.test(e.message) && /insecureSkipVerify/.test(e.message));
  assert.throws(() => new SeatClient(`${BAD}/no_token`, KEY, { verify: false }), /insecureSkipVerify/);
  assert.deepEqual(await calls("no_token"), {}); // no request was sent
});

test("a grant without a token is refused (TokenMissing) and its session released at once", async () => {
  await reset("no_token");
  const client = pinned("no_token");
  await assert.rejects(client.acquire("lic", "pc-1"), (e) => e instanceof TokenMissing && e.code === "token_missing");
  assert.deepEqual(await calls("no_token"), { acquire: 1, release: 1 });
  await reset("no_token");
  await assert.rejects(client.lease("lic", { clientId: "pc-1" }), TokenMissing);
  assert.deepEqual(client.held(), []);
  assert.deepEqual(await calls("no_token"), { acquire: 1, release: 1 });
});

test("a grant signed by a key that is not the vendor's is refused (UntrustedKey) and its session released at once", async () => {
  await reset("foreign_key");
  const client = pinned("foreign_key");
  await assert.rejects(client.acquire("lic", "pc-1"), (e) => e instanceof UntrustedKey && e.code === "token_untrusted_key");
  assert.deepEqual(await calls("foreign_key"), { acquire: 1, release: 1 });
});

test("a healthy signed server grants, renews and releases (the pinned key verified)", async () => {
  await reset("signed");
  const client = pinned("signed");
  assert.equal(client.verified, true);
  const lease = await client.lease("lic", { clientId: "pc-1" });
  assert.ok(lease.token && !lease.lost);
  await sleep(1500);
  await lease.close();
  const counted = await calls("signed");
  assert.ok(counted.acquire === 1 && counted.heartbeat >= 1 && counted.release === 1, JSON.stringify(counted));
  assert.equal(BAD_KEY.length, 43);
});

test("a grant whose session_id is null is invalid_response, never a seat", async () => {
  await reset("session_null");
  const client = pinned("session_null");
  await assert.rejects(client.acquire("lic", "pc-1"), (e) => e instanceof InvalidResponse && e.code === "invalid_response" && /session_id/.test(e.message));
  await assert.rejects(client.lease("lic", { clientId: "pc-1" }), InvalidResponse);
  assert.deepEqual(client.held(), []);
  assert.equal((await calls("session_null")).release, undefined); // no session to release
});

test("seat counts keep their last known values when a renewal omits them", async () => {
  await reset("heartbeat_no_counts");
  const lease = await pinned("heartbeat_no_counts").lease("lic", { clientId: "pc-1" });
  try {
    assert.deepEqual([lease.seatsUsed, lease.seatsTotal], [1, 2]);
    await sleep(2500); // two renewals (every second), without counts
    assert.ok((await calls("heartbeat_no_counts")).heartbeat >= 2);
    assert.deepEqual([lease.seatsUsed, lease.seatsTotal, lease.lost], [1, 2, false]);
  } finally {
    await lease.close();
  }
});

test("a 404 that is not license_not_found (the service's not_found, an empty 404) is a plain SeatError naming the URL; license_not_found is LicenseNotFound", async () => {
  for (const [scenario, code] of [["not_found", "not_found"], ["empty_404", "http_404"]]) {
    await assert.rejects(pinned(scenario).acquire("lic", "pc-1"), (e) => {
      assert.ok(e instanceof SeatError && !(e instanceof LicenseNotFound), `${e}`);
      assert.deepEqual([e.status, e.code], [404, code]);
      assert.ok(e.message.includes(`${BAD}/${scenario}/acquire`), e.message);
      return true;
    });
  }
  await assert.rejects(pinned("license_not_found").acquire("lic", "pc-1"), (e) => e instanceof LicenseNotFound && e.code === "license_not_found");
});

test("a redirect is never followed: an error naming its Location", async () => {
  await reset("signed");
  await assert.rejects(pinned("redirect").acquire("lic", "pc-1"), (e) => {
    assert.ok(e instanceof SeatError && e.status === 307 && e.code === "redirected", `${e}`);
    assert.ok(e.message.includes(`${BAD}/signed/acquire`), e.message);
    return true;
  });
  assert.deepEqual(await calls("signed"), {}); // the target never asked
});

test("bad bytes in a 2xx (truncated, wrong types, not an object, empty, HTML, 5 MiB, deep nesting) are invalid_response, never a seat", async () => {
  for (const scenario of ["truncated", "wrong_types", "not_an_object", "empty", "html", "huge", "deep_nesting"]) {
    await assert.rejects(pinned(scenario, { retries: 0 }).acquire("lic", "pc-1"), (e) => {
      assert.ok(e instanceof InvalidResponse && e.code === "invalid_response", `${scenario}: ${e}`);
      assert.ok(e.message.includes(`${BAD}/${scenario}/acquire`), e.message);
      return true;
    });
  }
  await assert.rejects(pinned("release_wrong_types", { retries: 0 }).release("lic", "s-1"), InvalidResponse);
});

// -- the review of issue 48: refused grants released only for their token or shape --------------

test("a grant whose key fetch fails once (a 503 on /keys) is not released: the check is retried and the seat held", async () => {
  await reset("keys503once");
  const lease = await pinned("keys503once").lease("lic", { clientId: "pc-1" });
  try {
    assert.ok(lease.token && !lease.lost);
    const counted = await calls("keys503once");
    assert.equal(counted.release, undefined, JSON.stringify(counted)); // never released for the JWKS's failure
    assert.ok(counted.keys === 2 && counted.acquire === 2, JSON.stringify(counted)); // the 503, then the keys; the acquire retried
  } finally {
    await lease.close();
  }
  assert.equal((await calls("keys503once")).release, 1); // the client's own release, at close
});

test("a release whose JWKS refetch drips (a rotated kid) ends within releaseTimeoutMs, the fetch included", async () => {
  await reset("rotated_release");
  // timeoutMs: the default 10 s; jwksMinRefetchMs 0: refetch on the unknown kid at once (the default waits 10 s)
  const client = pinned("rotated_release", { releaseTimeoutMs: 1000, jwksMinRefetchMs: 0 });
  const lease = await client.lease("lic", { clientId: "pc-1" });
  const started = performance.now();
  await lease.close();
  const took = performance.now() - started;
  assert.ok(took < 2000, `${took} ms`);
  const counted = await calls("rotated_release");
  assert.ok(counted.release === 1 && counted.keys === 2, JSON.stringify(counted)); // the refetch was made (and cut short)
});

test("a grant without lease_expires_at, with lease_seconds 60.5, or with session_id \"\" is invalid_response; the first two released at once", async () => {
  for (const [scenario, releases] of [["no_expiry", 1], ["float_lease", 1], ["empty_session", undefined]]) {
    await reset(scenario);
    await assert.rejects(pinned(scenario, { retries: 0 }).acquire("lic", "pc-1"), (e) => {
      assert.ok(e instanceof InvalidResponse && e.code === "invalid_response", `${scenario}: ${e}`);
      assert.ok(e.message.includes(`${BAD}/${scenario}/acquire`), e.message);
      return true;
    });
    const counted = await calls(scenario);
    assert.deepEqual([counted.acquire, counted.release], [1, releases], `${scenario}: ${JSON.stringify(counted)}`);
  }
});

test("a grant whose seats_used and seats_total are null is a seat (the counts as absent)", async () => {
  await reset("null_counts");
  const lease = await pinned("null_counts").lease("lic", { clientId: "pc-1" });
  try {
    assert.ok(lease.token && !lease.lost && lease.sessionId);
    assert.deepEqual([lease.seatsUsed, lease.seatsTotal], [0, 0]); // never known
    await sleep(1500); // a renewal (every second)
    assert.ok(!lease.lost);
  } finally {
    await lease.close();
  }
  const counted = await calls("null_counts");
  assert.ok(counted.heartbeat >= 1 && counted.release === 1, JSON.stringify(counted));
});

// The drips: one byte a second after the headers (answers of ~500 bytes). Run side by side.
describe("every exchange bounded against a dripping server", { concurrency: true }, () => {
  test("an acquire whose answer drips ends within its timeout (connect, headers and body)", async () => {
    const started = performance.now();
    await assert.rejects(pinned("drip", { timeoutMs: 2000, retries: 0 }).acquire("lic", "pc-1"), (e) => e instanceof BackendUnavailable && e.status === 0 && /timed out/.test(e.message));
    const took = performance.now() - started;
    assert.ok(took >= 1900 && took < 3500, `${took} ms`);
  });

  test("a release whose answer drips ends within releaseTimeoutMs (close() returns)", async () => {
    const lease = await pinned("drip_release", { timeoutMs: 30_000, releaseTimeoutMs: 1500 }).lease("lic", { clientId: "pc-1" });
    const started = performance.now();
    await lease.close();
    const took = performance.now() - started;
    assert.ok(took < 3000, `${took} ms`);
    assert.ok(lease.released);
  });

  test("a heartbeat whose answer drips loses the seat (unreachable) by the lease's deadline, not the timeout's", async () => {
    // the grant: a lease of 60 s, heartbeats every 20 s; a timeout far past the deadline
    const lost = [];
    const client = pinned("drip_heartbeat", { timeoutMs: 120_000 });
    // lostReason read in the callback: the re-acquire that follows (answered at once, 25-50
    // ms later) clears it before a poll of the lease would see it
    const lease = await client.lease("lic", { clientId: "pc-1", onLost: (l, reason) => lost.push([reason, Date.now(), l.lostReason]) });
    try {
      const deadline = lease.expiresAt.getTime();
      const granted = Date.now();
      await eventually(() => lost.length > 0, 75_000, "the seat lost");
      assert.equal(lost[0][0], "unreachable");
      assert.equal(lost[0][2], "unreachable");
      assert.ok(lost[0][1] - granted < 63_000, `lost ${lost[0][1] - granted} ms after the grant`);
      assert.ok(deadline > granted); // the server's deadline (year 2100 here): the client counts the lease's 60 s
    } finally {
      const started = performance.now();
      await lease.close();
      assert.ok(performance.now() - started < 4000);
    }
  });

  test("closing a lease while its heartbeat drips returns within releaseTimeoutMs", async () => {
    const lease = await pinned("drip_heartbeat", { timeoutMs: 120_000, releaseTimeoutMs: 1500 }).lease("lic", { clientId: "pc-2" });
    await sleep(21_000); // the first heartbeat (15 to 20 s after the grant) is dripping now
    const started = performance.now();
    await lease.close();
    const took = performance.now() - started;
    assert.ok(took < 3000, `${took} ms`);
  });
});
