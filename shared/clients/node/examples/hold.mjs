#!/usr/bin/env node
// Hold one seat until standard input closes:
//   ./hold URL API_KEY LICENSE_ID CLIENT_ID   (or, built: node examples/hold.mjs ...)
// Acquires, verifying the signed token against the vendor's keys pinned in
// SEATLEASE_PINNED_KEYS (each JWK's "x", comma separated); prints one JSON line
// {"session_id", "seats_used", "seats_total", "seats", "verified"} (verified: true),
// heartbeats in the background, and when stdin closes (Ctrl-D, or the parent closing the
// pipe) releases the seat and exits 0. No seat: one line on stderr, exit status 1. No
// pinned key: one line on stderr naming SEATLEASE_PINNED_KEYS, exit status 2, no request;
// unless SEATLEASE_INSECURE_SKIP_VERIFY=1 (the loud opt-out: nothing verified, "verified":
// false).
import { SeatClient, SeatError } from "seatlease-client";

const [url, apiKey, licenseId, clientId] = process.argv.slice(2);
if (!clientId) {
  console.error("usage: node examples/hold.mjs URL API_KEY LICENSE_ID CLIENT_ID");
  process.exit(2);
}

/** One JSON object with Python's json.dumps separators (", " and ": "): the same bytes as every client's hold (JSON.stringify alone writes none). */
function jsonLine(fields) {
  return `{${Object.entries(fields).map(([name, value]) => `${JSON.stringify(name)}: ${JSON.stringify(value)}`).join(", ")}}`;
}

const pinnedKeys = (process.env.SEATLEASE_PINNED_KEYS ?? "").split(",").map((x) => x.trim()).filter(Boolean);
const insecureSkipVerify = pinnedKeys.length === 0 && process.env.SEATLEASE_INSECURE_SKIP_VERIFY === "1";
if (pinnedKeys.length === 0 && !insecureSkipVerify) {
  console.error("hold: no pinned key: set SEATLEASE_PINNED_KEYS to the vendor's keys (each JWK's x of URL/keys, comma separated), or SEATLEASE_INSECURE_SKIP_VERIFY=1 to take an unverified seat");
  process.exit(2);
}
let client;
try {
  client = new SeatClient(url, apiKey, {
    pinnedKeys, // every answer's token checked against them: a grant from anyone else is no seat
    insecureSkipVerify,
    logger: (level, message) => level === "warn" && console.error(message), // retries stay quiet
  });
} catch (error) {
  console.error(`hold: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(2);
}
let lease;
try {
  lease = await client.lease(licenseId, {
    clientId,
    onLost: (_, reason) => console.error(`seat lost (${reason})`),
  });
} catch (error) {
  // one line, the same in every language's hold: "hold: <code>: <the server's message>"
  if (error instanceof SeatError) {
    const said = typeof error.body?.message === "string" ? error.body.message : error.message;
    console.error(`hold: ${error.code}: ${said.split(/\s+/).join(" ")}`);
  } else {
    console.error(`hold: error: ${error instanceof Error ? error.message : String(error)}`);
  }
  process.exit(1);
}
const verified = client.verified; // true: checked against the pinned keys; false: the opt-out
console.log(jsonLine({ session_id: lease.sessionId, seats_used: lease.seatsUsed, seats_total: lease.seatsTotal, seats: lease.seats, verified }));

process.stdin.resume(); // keeps the process alive; the lease's timers never do
process.stdin.on("end", async () => {
  await lease.close();
  process.exit(0);
});
