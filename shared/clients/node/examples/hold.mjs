#!/usr/bin/env node
// Hold one seat until standard input closes:
//   ./hold URL API_KEY LICENSE_ID CLIENT_ID   (or, built: node examples/hold.mjs ...)
// Acquires, verifying the signed token against the vendor's keys pinned in
// SEATLEASE_PINNED_KEYS (each JWK's "x", comma separated) or, with none pinned, only
// against the keys the server serves at URL/keys; prints one JSON line
// {"session_id", "seats_used", "seats_total", "seats", "verified"} (verified: true when
// pinned, "unpinned" otherwise), heartbeats in the background, and when stdin closes
// (Ctrl-D, or the parent closing the pipe) releases the seat and exits 0. No seat: one
// line on stderr, exit status 1.
import { SeatClient } from "seatlease-client";

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
const client = new SeatClient(url, apiKey, {
  verify: true, // every answer's token checked; against the pinned keys when there are some
  pinnedKeys,
  logger: (level, message) => level === "warn" && console.error(message), // retries stay quiet
});
let lease;
try {
  lease = await client.lease(licenseId, {
    clientId,
    onLost: (_, reason) => console.error(`seat lost (${reason})`),
  });
} catch (error) {
  console.error(`hold: no seat: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
const verified = pinnedKeys.length > 0 ? true : "unpinned";
console.log(jsonLine({ session_id: lease.sessionId, seats_used: lease.seatsUsed, seats_total: lease.seatsTotal, seats: lease.seats, verified }));

process.stdin.resume(); // keeps the process alive; the lease's timers never do
process.stdin.on("end", async () => {
  await lease.close();
  process.exit(0);
});
