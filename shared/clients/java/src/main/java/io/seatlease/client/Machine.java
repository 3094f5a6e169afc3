package io.seatlease.client;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Locale;

/**
 * Machine binding: a machine's fingerprint is what acquire sends as {@code fingerprint} and
 * what a borrowed token's {@code cnf.machine} names, the lowercase hex SHA-256 of
 * {@code "seatlease-machine/1:"} + the machine id trimmed and lowercased (UTF-8). The id is
 * Linux /etc/machine-id (else /var/lib/dbus/machine-id), macOS IOPlatformUUID, Windows
 * MachineGuid, or a product's own.
 */
public final class Machine {
    /** The prefix hashed before the machine id. */
    public static final String PREFIX = "seatlease-machine/1:";

    private Machine() {}

    /** The fingerprint of a machine id. */
    public static String fingerprint(String machineId) {
        if (machineId == null) {
            throw new IllegalArgumentException("No machine id.");
        }
        try {
            MessageDigest sha256 = MessageDigest.getInstance("SHA-256");
            byte[] digest = sha256.digest((PREFIX + machineId.strip().toLowerCase(Locale.ROOT))
                    .getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(digest);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JDK.", e);
        }
    }
}
