// Idle reporting (issue 50): lease.touch(), the busy scope, onIdleWarning and a seat
// reclaimed for idleness. First against a scripted server in this process (it answers each
// heartbeat as the test says and records every request's body): the wire format exactly as
// the contract says, the warning's callback, the heartbeat a touch sends at once after a
// warning, a 410 reason idle. (End to end, where the engine decides: live.test.mjs.)
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, describe, test } from "node:test";

import { Lease, MAX_IDLE_SECONDS, InvalidResponse, SeatClient, SessionExpired } from "seatlease-client";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const RECLAIM_AT = "2100-01-01T00:00:00.000Z";

function renewal(sessionId, fields = {}) {
  return { session_id: sessionId, lease_expires_at: "2100-01-01T00:00:00.000Z", lease_seconds: 3, heartbeat_interval_seconds: 1, ...fields };
}
const gone = (reason) => [410, { error: { code: "session_expired", reason, message: `The session is ${reason}.` } }];

/** acquire grants a new session (a 3 s lease beaten every second), release releases, each heartbeat is answered by `onHeartbeat(body)`; every request recorded. */
async function scripted() {
  const server = { sent: [], sessions: 0, onHeartbeat: (body) => [200, renewal(body.session_id)] };
  const http = createServer((request, response) => {
    let raw = "";
    request.on("data", (chunk) => (raw += chunk));
    request.on("end", () => {
      const fn = request.url.split("/").pop();
      const body = raw ? JSON.parse(raw) : {};
      server.sent.push({ fn, body, at: performance.now() });
      let status, answer;
      if (fn === "acquire") {
        server.sessions += 1;
        [status, answer] = [201, { session_id: `session-${server.sessions}`, lease_seconds: 3, heartbeat_interval_seconds: 1, lease_expires_at: "2100-01-01T00:00:00.000Z", seats_used: 1, seats_total: 1 }];
      } else if (fn === "release") {
        [status, answer] = [200, { released: true, seats_used: 0 }];
      } else {
        [status, answer] = server.onHeartbeat(body);
      }
      response.writeHead(status, { "Content-Type": "application/json" });
      response.end(JSON.stringify(answer));
    });
  });
  await new Promise((resolve) => http.listen(0, "127.0.0.1", resolve));
  server.url = `http://127.0.0.1:${http.address().port}`;
  server.client = new SeatClient(server.url, "sk_test", { insecureSkipVerify: true, backoffMs: 50 });
  server.bodies = (fn, since = 0) => server.sent.filter((s) => s.fn === fn && s.at >= since).map((s) => s.body);
  server.waitFor = async (fn, count, withinMs, since = 0) => {
    const deadline = performance.now() + withinMs;
    while (server.bodies(fn, since).length < count) {
      if (performance.now() > deadline) assert.fail(`${server.bodies(fn, since).length} ${fn} of ${count} within ${withinMs} ms`);
      await sleep(20);
    }
    return server.bodies(fn, since).slice(0, count);
  };
  server.close = () => new Promise((resolve) => { http.closeAllConnections?.(); http.close(resolve); });
  return server;
}

async function eventually(check, ms, what) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

/** Heartbeats answered with an idle warning while `flag.on`, and `fields` with it (`always`: with every answer). */
function warnWhile(flag, fields = {}, always = false) {
  return (body) => [200, renewal(body.session_id, { ...(always || flag.on ? fields : {}), ...(flag.on ? { idle_reclaim_at: RECLAIM_AT } : {}) })];
}

describe("idle reporting against a scripted server", () => {
  const servers = [];
  const serve = async () => {
    const server = await scripted();
    servers.push(server);
    return server;
  };
  after(async () => Promise.all(servers.map((s) => s.close())));

  test("a lease never touched sends neither idle_seconds nor busy", async () => {
    const server = await serve();
    const lease = await server.client.lease("lic", { clientId: "pc-1" });
    try {
      const beats = await server.waitFor("heartbeat", 2, 5000);
      assert.deepEqual(beats.map((b) => ["idle_seconds", "busy"].filter((n) => n in b)), [[], []]);
    } finally {
      await lease.close();
    }
  });

  test("after the first touch each heartbeat sends the whole seconds since it", async () => {
    const server = await serve();
    const lease = await server.client.lease("lic", { clientId: "pc-1" });
    try {
      lease.touch(75.6);
      const [first, second] = await server.waitFor("heartbeat", 2, 5000, performance.now());
      lease.touch();
      const [fresh] = await server.waitFor("heartbeat", 1, 5000, performance.now());
      assert.ok(Number.isInteger(first.idle_seconds) && first.idle_seconds >= 75 && first.idle_seconds <= 77, JSON.stringify(first));
      assert.ok(first.idle_seconds <= second.idle_seconds && second.idle_seconds <= 78);
      assert.ok([0, 1].includes(fresh.idle_seconds), JSON.stringify(fresh));
      assert.ok(![first, second, fresh].some((b) => "busy" in b));
    } finally {
      await lease.close();
    }
  });

  test("busy scopes nest (busy() and beginBusy/endBusy) and send busy: true only while one is open", async () => {
    const server = await serve();
    const lease = await server.client.lease("lic", { clientId: "pc-1" });
    try {
      let inner, outer;
      const result = await lease.busy(async () => {
        lease.beginBusy();
        [inner] = await server.waitFor("heartbeat", 1, 5000, performance.now());
        lease.endBusy();
        [outer] = await server.waitFor("heartbeat", 1, 5000, performance.now());
        return "rendered";
      });
      const [afterwards] = await server.waitFor("heartbeat", 1, 5000, performance.now());
      assert.equal(result, "rendered");
      assert.equal(inner.busy, true);
      assert.equal(outer.busy, true);
      assert.ok(!("busy" in afterwards));
      assert.ok(![inner, outer, afterwards].some((b) => "idle_seconds" in b)); // never touched
      await assert.rejects(lease.busy(() => { throw new Error("solve failed"); }), /solve failed/);
      assert.throws(() => lease.endBusy(), /beginBusy/); // the failed scope closed too
    } finally {
      await lease.close();
    }
  });

  test("touch takes a finite, non-negative number of seconds", () => {
    const lease = Lease.create("lic", "pc-1", undefined, async () => {});
    for (const bad of [-1, NaN, Infinity, "5"]) assert.throws(() => lease.touch(bad), RangeError);
    assert.equal(MAX_IDLE_SECONDS, 315_360_000);
  });

  test("the plain heartbeat sends idleSeconds and busy when given; a 410 idle is SessionExpired reason idle", async () => {
    const server = await serve();
    const { session_id: session } = await server.client.acquire("lic", "pc-1");
    await server.client.heartbeat("lic", session);
    await server.client.heartbeat("lic", session, { idleSeconds: 90, busy: false });
    await server.client.heartbeat("lic", session, { busy: true });
    const [plain, idle, busy] = server.bodies("heartbeat");
    assert.ok(!("idle_seconds" in plain) && !("busy" in plain));
    assert.deepEqual([idle.idle_seconds, idle.busy], [90, false]);
    assert.ok(busy.busy === true && !("idle_seconds" in busy));
    server.onHeartbeat = () => gone("idle");
    await assert.rejects(server.client.heartbeat("lic", session), (e) => e instanceof SessionExpired && e.reason === "idle");
    server.onHeartbeat = (body) => [200, renewal(body.session_id, { idle_reclaim_at: 7 })];
    await assert.rejects(server.client.heartbeat("lic", session), InvalidResponse);
  });

  test("the warning calls onIdleWarning once per warning and sets idleReclaimAt", async () => {
    const server = await serve();
    const flag = { on: false };
    server.onHeartbeat = warnWhile(flag);
    const warned = [];
    const lease = await server.client.lease("lic", { clientId: "pc-1", onIdleWarning: (l, at) => warned.push([l, at]) });
    try {
      flag.on = true;
      await server.waitFor("heartbeat", 3, 6000, performance.now());
      assert.equal(warned.length, 1); // three warned answers, one call
      assert.equal(lease.idleReclaimAt.toISOString(), RECLAIM_AT);
      assert.equal(warned[0][0], lease);
      assert.equal(warned[0][1].getTime(), lease.idleReclaimAt.getTime());
      flag.on = false;
      await server.waitFor("heartbeat", 2, 5000, performance.now());
      assert.equal(lease.idleReclaimAt, undefined);
      flag.on = true;
      await server.waitFor("heartbeat", 2, 5000, performance.now());
      assert.equal(warned.length, 2); // warned again after it was cleared
    } finally {
      await lease.close();
    }
  });

  test("after a warning a touch sends a heartbeat at once, one for many key presses", async () => {
    const server = await serve();
    const flag = { on: false };
    server.onHeartbeat = warnWhile(flag, { lease_seconds: 60, heartbeat_interval_seconds: 20 }, true); // renewed: beaten every 20 s
    let warned = 0;
    const lease = await server.client.lease("lic", { clientId: "pc-1", onIdleWarning: () => (warned += 1) });
    try {
      lease.touch(120);
      const touched = performance.now();
      flag.on = true;
      await eventually(() => warned === 1, 5000, "the warning");
      await sleep(300); // the next heartbeat is now 15-20 s away
      const before = server.bodies("heartbeat").length;
      // the same activity again, half a second newer (a poller of the system's idle time):
      // it cannot make the idle seconds any fewer, so no heartbeat
      lease.touch(120 + (performance.now() - touched) / 1000 - 0.5);
      await sleep(500);
      assert.equal(server.bodies("heartbeat").length, before);
      flag.on = false;
      const started = performance.now();
      lease.touch();
      const [cancel] = await server.waitFor("heartbeat", 1, 2000, started);
      for (let i = 0; i < 20; i++) lease.touch(); // key presses: no more heartbeats
      await sleep(500);
      assert.ok([0, 1].includes(cancel.idle_seconds), JSON.stringify(cancel));
      assert.equal(server.bodies("heartbeat", started).length, 1);
      assert.equal(lease.idleReclaimAt, undefined);
    } finally {
      await lease.close();
    }
  });

  test("after a warning entering a busy scope sends a heartbeat at once", async () => {
    const server = await serve();
    const flag = { on: false };
    server.onHeartbeat = warnWhile(flag, { lease_seconds: 60, heartbeat_interval_seconds: 20 }, true);
    let warned = 0;
    const lease = await server.client.lease("lic", { clientId: "pc-1", onIdleWarning: () => (warned += 1) });
    try {
      lease.touch(300);
      flag.on = true;
      await eventually(() => warned === 1, 5000, "the warning");
      const started = performance.now();
      lease.beginBusy();
      const [cancel] = await server.waitFor("heartbeat", 1, 2000, started);
      lease.endBusy();
      assert.equal(cancel.busy, true);
      assert.ok(cancel.idle_seconds >= 300);
    } finally {
      await lease.close();
    }
  });

  test("a 410 idle is lost as idle, not asked for again until a touch, then regained", async () => {
    const server = await serve();
    const reclaimed = { on: false };
    server.onHeartbeat = (body) => (reclaimed.on && body.session_id === "session-1" ? gone("idle") : [200, renewal(body.session_id)]);
    const lost = [];
    let regained = 0;
    const lease = await server.client.lease("lic", { clientId: "pc-1", onLost: (_l, reason) => lost.push(reason), onRegained: () => (regained += 1) });
    try {
      lease.touch(600);
      reclaimed.on = true;
      await eventually(() => lease.lost, 5000, "the seat lost");
      assert.deepEqual([lease.lostReason, lost], ["idle", ["idle"]]);
      await sleep(2500); // several heartbeat intervals: no re-acquire while idle
      assert.equal(server.bodies("acquire").length, 1);
      lease.touch();
      await eventually(() => regained === 1, 2000, "the seat regained on activity");
      assert.deepEqual([lease.lost, lease.lostReason, lease.sessionId], [false, undefined, "session-2"]);
      await server.waitFor("heartbeat", 1, 3000, performance.now());
      assert.deepEqual(lost, ["idle"]);
    } finally {
      await lease.close();
    }
  });

  test("a busy scope also asks again for a seat reclaimed for idleness", async () => {
    const server = await serve();
    server.onHeartbeat = (body) => (body.session_id === "session-1" ? gone("idle") : [200, renewal(body.session_id)]);
    let regained = 0;
    const lease = await server.client.lease("lic", { clientId: "pc-1", onRegained: () => (regained += 1) });
    try {
      await eventually(() => lease.lost, 5000, "the seat lost");
      assert.equal(lease.lostReason, "idle");
      await lease.busy(() => eventually(() => regained === 1, 2000, "the seat regained"));
    } finally {
      await lease.close();
    }
  });
});
