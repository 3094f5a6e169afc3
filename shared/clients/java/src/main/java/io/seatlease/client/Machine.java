package io.seatlease.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Machine binding: a machine's fingerprint is what acquire sends as {@code fingerprint} and
 * what a borrowed token's {@code cnf.machine} names, the lowercase hex SHA-256 of
 * {@code "seatlease-machine/1:"} + the machine id trimmed and lowercased (UTF-8). The id is
 * Linux /etc/machine-id (else /var/lib/dbus/machine-id), macOS IOPlatformUUID, Windows
 * MachineGuid, or a product's own ({@code SeatClient.Builder#machineId}), as the other
 * clients read it.
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

    /**
     * This machine's id, as the operating system keeps it; IllegalStateException when it has
     * none to give (a container without /etc/machine-id: give the client one of your own).
     */
    public static String machineId() {
        String found = read();
        if (found == null || found.isBlank()) {
            throw new IllegalStateException("This machine has no stable machine id: give SeatClient.Builder.machineId(...).");
        }
        return found.strip();
    }

    /** The fingerprint of override when given (not null), else of this machine's id. */
    static String thisMachine(String override) {
        return fingerprint(override != null ? override : machineId());
    }

    private static String read() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        if (os.contains("mac")) {
            return firstGroup(run("ioreg", "-rd1", "-c", "IOPlatformExpertDevice"), "\"IOPlatformUUID\"\\s*=\\s*\"([^\"]+)\"");
        }
        if (os.contains("windows")) {
            return firstGroup(run("reg", "query", "HKLM\\SOFTWARE\\Microsoft\\Cryptography", "/v", "MachineGuid"),
                    "MachineGuid\\s+REG_SZ\\s+(\\S+)");
        }
        for (String file : List.of("/etc/machine-id", "/var/lib/dbus/machine-id")) {
            try {
                String text = Files.readString(Path.of(file), StandardCharsets.UTF_8).strip();
                if (!text.isEmpty()) {
                    return text;
                }
            } catch (IOException e) {
                // the next place
            }
        }
        return null;
    }

    private static String firstGroup(String text, String pattern) {
        Matcher m = Pattern.compile(pattern).matcher(text == null ? "" : text);
        return m.find() ? m.group(1) : null;
    }

    private static String run(String... command) {
        try {
            Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
            try (InputStream out = process.getInputStream()) {
                String text = new String(out.readNBytes(1 << 16), StandardCharsets.UTF_8);
                process.waitFor(10, TimeUnit.SECONDS);
                return text;
            } finally {
                process.destroy();
            }
        } catch (IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }
}
