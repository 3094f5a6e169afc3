package io.seatlease.client;

import static io.seatlease.client.Support.env;
import static io.seatlease.client.Support.key;
import static io.seatlease.client.Support.license;
import static io.seatlease.client.Support.live;
import static io.seatlease.client.Support.onlySeat;
import static io.seatlease.client.Support.url;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.gson.JsonObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 39 item 10: borrowed seats saved to a file and verified offline, the same file as
 * the other clients' (tests/test_client_java.py borrows one with the Python client for
 * these tests to load, and loads the one they save for it).
 */
@Tag("live")
class BorrowTests {
    static SeatClient pinnedClient(String machineId) throws Exception {
        SeatClient.Builder builder = SeatClient.builder(url(), key()).pinnedKeys(Support.deploymentKeys()).tenantId("acme");
        if (machineId != null) {
            builder.machineId(machineId);
        }
        return builder.build();
    }

    @Test
    void borrowLoadRefuseAnEditedFileReturnEarly(@TempDir Path folder) throws Exception {
        license("j-borrow-file", "{\"seats\": 1, \"lease_seconds\": 60, \"max_borrow_seconds\": 86400}");
        Path file = folder.resolve("seat.json");
        try (SeatClient client = pinnedClient(null)) {
            BorrowedSeat seat = client.borrow("j-borrow-file", "laptop", Duration.ofHours(1), file, Map.of("user", "ann"));
            assertTrue(onlySeat("j-borrow-file", seat.sessionId(), "laptop"));
            assertEquals(Duration.ofHours(1), seat.borrowDuration());
            assertTrue(seat.timeLeft().compareTo(Duration.ofMinutes(58)) > 0 && !seat.expired());
            assertEquals(Boolean.TRUE, seat.claims().get("borrowed"));
            assertEquals(1, seat.seats());
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
            JsonObject document = Json.parseObject(Files.readString(file));
            assertEquals("seatlease-borrowed-seat/1", Json.string(document, "format"));
            assertEquals(client.thisMachine(), Json.string(document.getAsJsonObject("request"), "fingerprint"));

            BorrowedSeat loaded = client.loadBorrowed(file); // offline: no request
            assertEquals(seat.sessionId(), loaded.sessionId());
            assertEquals(seat.expiresAt(), loaded.expiresAt());

            // an edited file: a longer borrow, another client
            Path edited = folder.resolve("edited.json");
            JsonObject changed = document.deepCopy();
            changed.getAsJsonObject("answer").addProperty("lease_expires_at", "2100-01-01T00:00:00.000Z");
            Files.writeString(edited, Json.write(changed));
            assertThrows(SeatException.TokenException.class, () -> client.loadBorrowed(edited));
            changed = document.deepCopy();
            changed.getAsJsonObject("request").addProperty("client_id", "other-laptop");
            changed.getAsJsonObject("answer").addProperty("client_id", "other-laptop");
            Files.writeString(edited, Json.write(changed));
            assertThrows(SeatException.TokenMismatch.class, () -> client.loadBorrowed(edited));
            Files.writeString(edited, "{\"format\": \"something else\"}");
            assertThrows(SeatException.MalformedToken.class, () -> client.loadBorrowed(edited));

            // copied to another machine, it verifies nowhere
            try (SeatClient elsewhere = pinnedClient("another-machine-0001")) {
                assertThrows(SeatException.TokenWrongMachine.class, () -> elsewhere.loadBorrowed(file));
            }
            // a client that pins another vendor's key does not trust the saved keys
            try (SeatClient stranger = SeatClient.builder(url(), key())
                    .pinnedKeys(java.util.List.of("4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk")).build()) {
                assertThrows(SeatException.UntrustedKey.class, () -> stranger.loadBorrowed(file));
            }

            Answer returned = loaded.returnEarly();
            assertTrue(returned.released());
            assertFalse(Files.exists(file));
            assertEquals(0, live("j-borrow-file").size());
        }
    }

    /**
     * A seat the Python client borrowed (SEATLEASE_BORROWED_BY_PYTHON) loads here and is
     * returned early; a seat borrowed here is saved for the Python client to load
     * (SEATLEASE_BORROW_FOR_PYTHON), which tests/test_client_java.py checks after this run.
     */
    @Test
    void aSeatBorrowedByThePythonClientLoadsAndOneBorrowedHereIsSavedForIt() throws Exception {
        Path fromPython = Path.of(env("SEATLEASE_BORROWED_BY_PYTHON"));
        Path forPython = Path.of(env("SEATLEASE_BORROW_FOR_PYTHON"));
        try (SeatClient client = pinnedClient(null)) {
            JsonObject saved = Json.parseObject(Files.readString(fromPython));
            BorrowedSeat seat = client.loadBorrowed(fromPython);
            assertEquals(Json.string(saved.getAsJsonObject("answer"), "session_id"), seat.sessionId());
            assertTrue(seat.timeLeft().compareTo(Duration.ofMinutes(50)) > 0, seat.toString());
            String license = seat.licenseId();
            assertTrue(onlySeat(license, seat.sessionId(), seat.clientId()));
            assertTrue(seat.returnEarly().released());
            assertEquals(0, live(license).size());

            BorrowedSeat mine = client.borrow(license, "java-laptop", Duration.ofHours(1), forPython);
            assertTrue(onlySeat(license, mine.sessionId(), "java-laptop"));
        }
    }
}
