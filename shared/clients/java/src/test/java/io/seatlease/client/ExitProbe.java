package io.seatlease.client;

import java.time.Duration;

/**
 * A product in a JVM of its own (TrustedAnswerTests starts it): holds a seat from the URL
 * given, says "held", then waits to be terminated (SIGTERM) or, with "exit", calls
 * System.exit(0) at once: the client's shutdown hook releases the seat either way.
 */
final class ExitProbe {
    private ExitProbe() {}

    public static void main(String[] args) throws Exception {
        SeatClient client = Support.insecure(args[0], "sl_test").releaseTimeout(Duration.ofSeconds(2)).build();
        Lease lease = client.lease("lic", new LeaseOptions("pc-1"));
        System.out.println("held " + lease.sessionId());
        System.out.flush();
        if (args.length > 1 && args[1].equals("exit")) {
            System.exit(0);
        }
        Thread.sleep(60_000);
        System.exit(3); // never terminated: the test fails on this status
    }
}
