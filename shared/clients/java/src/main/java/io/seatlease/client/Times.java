package io.seatlease.client;

import java.time.OffsetDateTime;
import java.time.format.DateTimeParseException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/** RFC 3339 timestamps (any fraction, Z or an offset) as Unix seconds. */
final class Times {
    private static final Pattern RFC3339 =
            Pattern.compile("^(\\d{4}-\\d\\d-\\d\\d)[Tt ](\\d\\d:\\d\\d:\\d\\d)(\\.\\d+)?([Zz]|[+-]\\d\\d:\\d\\d)$");

    private Times() {}

    static Double parse(String text) {
        if (text == null) {
            return null;
        }
        Matcher m = RFC3339.matcher(text);
        if (!m.matches()) {
            return null;
        }
        try {
            String zone = m.group(4).equalsIgnoreCase("z") ? "Z" : m.group(4);
            OffsetDateTime parsed = OffsetDateTime.parse(m.group(1) + "T" + m.group(2) + zone);
            double fraction = m.group(3) == null ? 0 : Double.parseDouble("0" + m.group(3));
            return parsed.toEpochSecond() + fraction;
        } catch (DateTimeParseException e) {
            return null;
        }
    }
}
