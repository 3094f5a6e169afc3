/**
 * This machine's fingerprint: what binds a borrowed seat to the machine it was borrowed
 * on. Every seatlease client computes it the same way (../testdata/vectors.json holds
 * examples): the lowercase hex SHA-256 of "seatlease-machine/1:" + the machine id,
 * trimmed and lowercased (UTF-8). The machine id is the system's own stable one: Linux
 * /etc/machine-id (else /var/lib/dbus/machine-id), macOS IOPlatformUUID, Windows
 * MachineGuid; a product may give its own (`ClientOptions.machineId`).
 */

import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

export const MACHINE_PREFIX = "seatlease-machine/1:";

/** The fingerprint of a machine id (64 lowercase hex characters). */
export function fingerprint(machineId: string): string {
  return createHash("sha256").update(MACHINE_PREFIX + machineId.trim().toLowerCase(), "utf8").digest("hex");
}

function run(file: string, args: string[]): string {
  try {
    return execFileSync(file, args, { encoding: "utf8", timeout: 10_000, stdio: ["ignore", "pipe", "ignore"] });
  } catch {
    return "";
  }
}

/** This machine's id; throws when the system has none to give. */
export function machineId(): string {
  let found: string | undefined;
  if (process.platform === "darwin") {
    found = /"IOPlatformUUID"\s*=\s*"([^"]+)"/.exec(run("ioreg", ["-rd1", "-c", "IOPlatformExpertDevice"]))?.[1];
  } else if (process.platform === "win32") {
    found = /MachineGuid\s+REG_SZ\s+(\S+)/.exec(run("reg", ["query", "HKLM\\SOFTWARE\\Microsoft\\Cryptography", "/v", "MachineGuid"]))?.[1];
  } else {
    for (const path of ["/etc/machine-id", "/var/lib/dbus/machine-id"]) {
      try {
        found = readFileSync(path, "utf8").trim();
      } catch {
        continue;
      }
      if (found) break;
    }
  }
  if (!found || !found.trim()) throw new Error("this machine has no stable machine id: pass ClientOptions.machineId");
  return found.trim();
}

/** The fingerprint of `override` if given, else of this machine's id. */
export function thisMachine(override?: string): string {
  return fingerprint(override ?? machineId());
}
