package io.seatlease.client;

import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** RFC 3339 timestamps (any fraction, Z or an offset) as Instants, and Durations as seconds. */
final class Times {
    private static final Pattern RFC3339 =
            Pattern.compile("^(\\d{4}-\\d\\d-\\d\\d)[Tt ](\\d\\d:\\d\\d:\\d\\d)(\\.\\d+)?([Zz]|[+-]\\d\\d:\\d\\d)$");

    private Times() {}

    /** The instant of an RFC 3339 timestamp, else null. */
    static Instant parse(String text) {
        if (text == null) {
            return null;
        }
        Matcher m = RFC3339.matcher(text);
        if (!m.matches()) {
            return null;
        }
        try {
            String zone = m.group(4).equalsIgnoreCase("z") ? "Z" : m.group(4);
            Instant whole = OffsetDateTime.parse(m.group(1) + "T" + m.group(2) + zone).toInstant();
            String fraction = m.group(3) == null ? "" : m.group(3).substring(1);
            long nanos = fraction.isEmpty() ? 0 : Long.parseLong((fraction + "000000000").substring(0, 9));
            return whole.plusNanos(nanos);
        } catch (DateTimeParseException e) {
            return null;
        }
    }

    /** An RFC 3339 timestamp as Unix seconds with a fraction (a token's numeric claims), else null. */
    static Double parseSeconds(String text) {
        Instant at = parse(text);
        return at == null ? null : at.getEpochSecond() + at.getNano() / 1e9;
    }

    static double seconds(Duration duration) {
        return duration.toNanos() / 1e9;
    }

    static Duration ofSeconds(double seconds) {
        return Duration.ofNanos((long) (Math.max(0, seconds) * 1e9));
    }

    /** A whole, positive number of seconds (what the server takes), else IllegalArgumentException. */
    static long wholeSeconds(Duration duration, String what) {
        if (duration.isNegative() || duration.isZero() || duration.getNano() != 0) {
            throw new IllegalArgumentException(what + " must be a positive whole number of seconds: " + duration);
        }
        return duration.getSeconds();
    }
}
