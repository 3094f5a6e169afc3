#!/usr/bin/env node
// Hold one seat until standard input closes:
//   ./hold URL API_KEY LICENSE_ID CLIENT_ID   (or, built: node examples/hold.mjs ...)
// Acquires (verifying the signed token against the deployment's JWKS), prints one JSON
// line {"session_id", "seats_used", "seats_total", "verified"}, heartbeats in the background, and when
// stdin closes (Ctrl-D, or the parent closing the pipe) releases the seat and exits 0.
import { SeatClient } from "seatlease-client";

const [url, apiKey, licenseId, clientId] = process.argv.slice(2);
if (!clientId) {
  console.error("usage: node examples/hold.mjs URL API_KEY LICENSE_ID CLIENT_ID");
  process.exit(2);
}

const client = new SeatClient(url, apiKey, {
  verify: true, // every answer's token checked against URL/keys (pin the vendor's keys in a product)
  logger: (level, message) => console.error(`${level}: ${message}`),
});
const lease = await client.lease(licenseId, {
  clientId,
  onLost: (_, reason) => console.error(`seat lost (${reason}); asking again`),
});
console.log(JSON.stringify({ session_id: lease.sessionId, seats_used: lease.seatsUsed, seats_total: lease.seatsTotal, verified: lease.token !== undefined }));

process.stdin.resume(); // keeps the process alive; the lease's timers never do
process.stdin.on("end", async () => {
  await lease.close();
  process.exit(0);
});
