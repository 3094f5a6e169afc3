package io.seatlease.client;

import com.google.gson.GsonBuilder;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileSystems;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;

/**
 * A borrowed seat whose token verified: a seat taken for a fixed time with no heartbeats (a
 * laptop going offline), saved to a file with its signed token and verified offline later.
 * It ends by itself at {@link #expiresAt()}; {@link #returnEarly()} gives it back before.
 *
 * <p>The file is the other clients' ({@code seatlease-borrowed-seat/1}: the acquire request
 * as sent, with its nonce and this machine's fingerprint; the answer with its token; the
 * deployment's JWKS at borrow time), so a seat borrowed by the Python, Node or Go client
 * loads here and the other way round. Immutable.
 */
public final class BorrowedSeat {
    static final String FORMAT = "seatlease-borrowed-seat/1";

    private final SeatClient client;
    private final Path path;
    private final String licenseId;
    private final String clientId;
    private final String sessionId;
    private final Duration borrowDuration;
    private final Instant expiresAt;
    private final String token;
    private final Map<String, Object> claims;
    private final int seats;

    private BorrowedSeat(SeatClient client, Path path, JsonObject answer, JsonObject claims) {
        this.client = client;
        this.path = path;
        this.licenseId = String.valueOf(Json.string(answer, "license_id"));
        this.clientId = String.valueOf(Json.string(answer, "client_id"));
        this.sessionId = Json.string(answer, "session_id");
        this.borrowDuration = Duration.ofSeconds(Json.integer(answer, "lease_seconds", 0));
        this.expiresAt = Times.parse(Json.string(answer, "lease_expires_at"));
        this.token = Json.string(answer, "lease_token");
        this.claims = Json.toMap(claims);
        this.seats = TokenVerifier.claimedSeats(claims);
    }

    public Path path() { return path; }
    public String licenseId() { return licenseId; }
    public String clientId() { return clientId; }
    public String sessionId() { return sessionId; }
    /** How long the seat was borrowed for. */
    public Duration borrowDuration() { return borrowDuration; }
    /** When the borrow ends by itself (the token's deadline). */
    public Instant expiresAt() { return expiresAt; }
    public String token() { return token; }
    /** The verified token's claims (exp, aud, sub, borrowed, cnf, ...), plain Java values. */
    public Map<String, Object> claims() { return claims; }
    /** The seat's weight as the token signs it (its seats claim; 1 when absent). */
    public int seats() { return seats; }
    /** The time until the borrow ends (by this machine's clock), zero once it has. */
    public Duration timeLeft() {
        Duration left = Duration.between(Instant.now(), expiresAt);
        return left.isNegative() ? Duration.ZERO : left;
    }
    public boolean expired() { return timeLeft().isZero(); }

    /**
     * Releases the seat now (POST /release, retried like any call) and deletes the saved
     * file; the release answer (released false: it had already ended).
     */
    public Answer returnEarly() throws IOException {
        Answer answer = client.release(licenseId, sessionId);
        Files.deleteIfExists(path);
        return answer;
    }

    @Override
    public String toString() {
        return "BorrowedSeat(" + licenseId + ", " + clientId + ", session " + sessionId + ", until " + expiresAt + ")";
    }

    static BorrowedSeat borrow(SeatClient client, String licenseId, String clientId, Duration duration, Path path,
                               AcquireOptions options) throws IOException {
        JsonObject request = options.borrowDuration(duration).queue(false).ticket(null)
                // the seat is bound to this machine: the token carries it, a copy of the file verifies nowhere else
                .fingerprint(client.thisMachine())
                .body(licenseId, clientId);
        request.addProperty("nonce", TokenVerifier.newNonce()); // kept in the file: the token must carry it
        Answer answer = client.call("acquire", request, SeatClient.Plan.DEFAULT);
        try {
            JsonObject jwks = Json.parseObject(client.fetchJwks());
            if (jwks == null) {
                throw new SeatException.MalformedToken(0, "The JWKS is not a JSON object.");
            }
            JsonObject document = new JsonObject();
            document.addProperty("format", FORMAT);
            document.addProperty("base_url", client.baseUrl());
            document.add("request", request);
            document.add("answer", answer.json());
            document.add("jwks", jwks);
            save(path, document);
            return load(client, path);
        } catch (RuntimeException | IOException failure) {
            Files.deleteIfExists(path); // a seat that does not verify is no seat: nothing saved for later
            client.releaseRefused(licenseId, answer.sessionId()); // ...and not left taken on the server
            throw failure;
        }
    }

    static BorrowedSeat load(SeatClient client, Path path) throws IOException {
        JsonObject document = Json.parseObject(Files.readString(path, StandardCharsets.UTF_8));
        JsonElement request = document == null ? null : document.get("request");
        JsonElement answer = document == null ? null : document.get("answer");
        JsonElement jwks = document == null ? null : document.get("jwks");
        if (document == null || !FORMAT.equals(Json.string(document, "format")) || request == null
                || !request.isJsonObject() || answer == null || !answer.isJsonObject() || jwks == null) {
            throw new SeatException.MalformedToken(0, path + " is not a saved borrowed seat.");
        }
        String keys = Json.write(jwks);
        TokenVerifier verifier = new TokenVerifier(() -> keys, client.pinnedKeys(), client.tenantId(),
                client.tokenLeeway(), null, client.thisMachine());
        JsonObject claims = verifier.verify("acquire", request.getAsJsonObject(), answer.getAsJsonObject(), 0);
        if (!Json.isTrue(claims, "borrowed") || !Json.isTrue(answer.getAsJsonObject(), "borrowed")) {
            throw new SeatException.TokenMismatch(0, "The saved seat is not a borrowed one.");
        }
        return new BorrowedSeat(client, path, answer.getAsJsonObject(), claims);
    }

    /**
     * Writes the file atomically (a crash leaves the old file or the new one, never half of
     * one), readable by this user only.
     */
    private static void save(Path path, JsonObject document) throws IOException {
        Path folder = path.toAbsolutePath().getParent();
        Path temporary = Files.createTempFile(folder, ".borrowed-", ".tmp");
        try {
            if (FileSystems.getDefault().supportedFileAttributeViews().contains("posix")) {
                Files.setPosixFilePermissions(temporary, PosixFilePermissions.fromString("rw-------"));
            }
            byte[] text = new GsonBuilder().setPrettyPrinting().create().toJson(document).getBytes(StandardCharsets.UTF_8);
            try (FileChannel out = FileChannel.open(temporary, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                ByteBuffer buffer = ByteBuffer.wrap(text);
                while (buffer.hasRemaining()) {
                    out.write(buffer);
                }
                out.force(true);
            }
            try {
                Files.move(temporary, path, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(temporary, path, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(temporary);
        }
    }
}
