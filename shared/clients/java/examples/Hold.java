import io.seatlease.client.Lease;
import io.seatlease.client.LeaseOptions;
import io.seatlease.client.SeatClient;
import io.seatlease.client.SeatException;
import java.io.OutputStream;
import java.util.Arrays;
import java.util.List;

/**
 * Holds one seat until standard input closes: {@code ./hold URL API_KEY LICENSE_ID CLIENT_ID}.
 * Verified by default: the grant's token must be signed by one of the vendor's keys in
 * SEATLEASE_PINNED_KEYS (their JWK "x", comma separated). Without them it takes no seat: one
 * line on stderr naming SEATLEASE_PINNED_KEYS and exit status 2, unless the loud opt-out
 * SEATLEASE_INSECURE_SKIP_VERIFY=1 is set (insecureSkipVerify: nothing is verified). Prints
 * one JSON line, the same in every client:
 * {"session_id": "...", "seats_used": 1, "seats_total": 3, "seats": 1, "verified": true}
 * ("verified": true against the pinned keys, false under the opt-out); heartbeats on the
 * client's thread; when stdin closes (Ctrl-D, or the parent closing the pipe) releases the
 * seat and exits 0. A refused seat is one line on stderr and exit status 1.
 */
public final class Hold {
    public static void main(String[] args) {
        if (args.length != 4) {
            System.err.println("usage: hold URL API_KEY LICENSE_ID CLIENT_ID");
            System.exit(2);
        }
        List<String> pins = pinnedKeys(System.getenv("SEATLEASE_PINNED_KEYS"));
        boolean insecure = "1".equals(System.getenv("SEATLEASE_INSECURE_SKIP_VERIFY"));
        if (pins.isEmpty() && !insecure) {
            System.err.println("hold: no pinned key: set SEATLEASE_PINNED_KEYS to the vendor's key(s) (the \"x\" of "
                    + "each key URL/keys lists, comma separated), or SEATLEASE_INSECURE_SKIP_VERIFY=1 to verify nothing");
            System.exit(2);
        }
        int status;
        try (SeatClient client = SeatClient.builder(args[0], args[1])
                .pinnedKeys(pins)
                .insecureSkipVerify(pins.isEmpty()) // only with SEATLEASE_INSECURE_SKIP_VERIFY=1 (above)
                .logger((level, message) -> {
                    if (level.equals("warning")) {
                        System.err.println(message);
                    }
                })
                .build()) {
            status = hold(client, args[2], args[3]);
        } catch (IllegalArgumentException e) {
            System.err.println("hold: " + e.getMessage());
            status = 2;
        }
        System.exit(status);
    }

    private static int hold(SeatClient client, String licenseId, String clientId) {
        try (Lease lease = client.lease(licenseId, new LeaseOptions(clientId))) {
            String verified = client.pinned() && lease.token() != null ? "true" : "false";
            System.out.printf("{\"session_id\": %s, \"seats_used\": %d, \"seats_total\": %d, \"seats\": %d, \"verified\": %s}%n",
                    quoted(lease.sessionId()), lease.seatsUsed(), lease.seatsTotal(), lease.seats(), verified);
            System.out.flush();
            System.in.transferTo(OutputStream.nullOutputStream()); // until stdin closes
            lease.release();
            return 0;
        } catch (SeatException e) {
            // one line, the same in every language's hold: "hold: <code>: <message>"
            System.err.println("hold: " + e.code() + ": " + String.valueOf(e.getMessage()).strip().replaceAll("\\s+", " "));
            return 1;
        } catch (java.io.IOException e) {
            System.err.println("hold: stdin: " + e.getMessage());
            return 1;
        }
    }

    private static List<String> pinnedKeys(String env) {
        if (env == null || env.isBlank()) {
            return List.of();
        }
        return Arrays.stream(env.split(",")).map(String::strip).filter(key -> !key.isEmpty()).toList();
    }

    /** A JSON string, as Python's json.dumps writes it. */
    private static String quoted(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20 || c > 0x7e) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }
}
