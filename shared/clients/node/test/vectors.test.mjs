// The token test vectors every client must agree on (../testdata/vectors.json, written
// from the server's signing code): each case gives this client's verifier its expected
// outcome, "ok" or the error code.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { TokenError, TokenVerifier, claimedSeats, fingerprint } from "seatlease-client";

const vectors = JSON.parse(readFileSync(new URL("../../testdata/vectors.json", import.meta.url), "utf8"));

test("the vectors file has cases", () => {
  assert.equal(vectors.format, "seatlease-client-vectors/1");
  assert.ok(vectors.cases.length >= 30);
});

test("this client computes each machine's fingerprint as the vectors say", () => {
  assert.ok(vectors.machines.length >= 4);
  for (const machine of vectors.machines) assert.equal(fingerprint(machine.machine_id), machine.fingerprint);
});

for (const vector of vectors.cases) {
  test(`vector ${vector.name} -> ${vector.expect}`, async () => {
    const jwks = vector.jwks ?? vectors.jwks;
    const verifier = new TokenVerifier(async () => jwks, {
      pinnedKeys: vector.pinned === false ? [] : vectors.pinned,
      tenantId: "tenant_id" in vector ? vector.tenant_id : vectors.tenant_id,
      leewaySeconds: vector.leeway ?? vectors.leeway,
      machineFingerprint: vector.machine_id === undefined ? undefined : fingerprint(vector.machine_id),
    });
    const check = verifier.check(vector.function, vector.request, vector.answer, vector.status);
    if (vector.expect === "ok") {
      const claims = await check;
      assert.equal(claims.sid, vector.answer.session_id ?? vector.request.session_id);
      assert.equal(claimedSeats(claims), vector.seats_claim ?? 1); // the lease's weight, 1 when absent
      return;
    }
    await assert.rejects(check, (error) => {
      assert.ok(error instanceof TokenError, `${error}`);
      assert.equal(error.code, vector.expect);
      assert.equal(error.status, vector.status);
      return true;
    });
  });
}

test("a token within the leeway passes and beyond it fails, by the verifier's clock", async () => {
  const good = vectors.cases.find((c) => c.name === "acquire_good");
  const exp = 4102444800;
  const at = (seconds) => new TokenVerifier(async () => vectors.jwks, { pinnedKeys: vectors.pinned, leewaySeconds: 60, now: () => seconds * 1000 });
  await at(exp + 59).check("acquire", good.request, good.answer, 201);
  await assert.rejects(at(exp + 60).check("acquire", good.request, good.answer, 201), { code: "token_expired" });
  await assert.rejects(at(1767225600 - 61).check("acquire", good.request, good.answer, 201), { code: "token_expired" });
  await at(1767225600 - 59).check("acquire", good.request, good.answer, 201);
});
