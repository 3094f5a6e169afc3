import io.seatlease.client.Lease;
import io.seatlease.client.LeaseOptions;
import io.seatlease.client.SeatClient;
import io.seatlease.client.SeatException;

/**
 * Holds one seat until standard input closes: {@code ./hold URL API_KEY LICENSE_ID CLIENT_ID}.
 * Acquires (verifying the signed token against URL/keys), prints one JSON line
 * {"session_id", "seats_used", "seats_total", "verified"}, heartbeats on the client's
 * thread, and when stdin closes (Ctrl-D, or the parent closing the pipe) releases the seat
 * and exits 0.
 */
public final class Hold {
    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: hold URL API_KEY LICENSE_ID CLIENT_ID");
            System.exit(2);
        }
        SeatClient client = new SeatClient(args[0], args[1], new SeatClient.Options()
                .verify(true) // every answer's token checked against URL/keys (pin the vendor's keys in a product)
                .logger((level, message) -> System.err.println(level + ": " + message)));
        try (Lease lease = client.lease(args[2], new LeaseOptions(args[3]).listener(new LeaseOptions.Listener() {
            @Override
            public void onLost(Lease l, String reason) {
                System.err.println("seat lost (" + reason + "); asking again");
            }
        }))) {
            System.out.printf("{\"session_id\": \"%s\", \"seats_used\": %d, \"seats_total\": %d, \"verified\": %s}%n",
                    lease.sessionId(), lease.seatsUsed(), lease.seatsTotal(), lease.token() != null);
            System.out.flush();
            System.in.transferTo(java.io.OutputStream.nullOutputStream()); // until stdin closes
            lease.release();
        } catch (SeatException e) {
            System.err.println(e);
            System.exit(1);
        }
    }
}
