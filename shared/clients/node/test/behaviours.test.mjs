// The Node client against the fake bad server's behaviours (tests/client_bad_server.py),
// started by tests/test_client_node.py, which passes its URL in SEATLEASE_BAD_URL: a
// Retry-After of an hour never outlasts the maximum back-off, an ended term is said once
// and asked again only minutes later, a suspended license keeps its held seats.
import assert from "node:assert/strict";
import { test } from "node:test";

import { BackendUnavailable, LicenseExpired, LicenseSuspended, SeatClient } from "seatlease-client";

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
