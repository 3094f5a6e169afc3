package io.seatlease.client;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonPrimitive;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.PublicKey;
import java.security.SecureRandom;
import java.security.Signature;
import java.security.spec.X509EncodedKeySpec;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Checks the token of each answer: an EdDSA JWT of the expected typ, signed by a key of the
 * deployment's JWKS (fetched once and cached, fetched again after 5 minutes or on an unknown
 * kid, at most every 10 s) that is one of the pinned keys when any are pinned, for this aud
 * (tenant/license), session and client, within exp/nbf/iat give or take the leeway, carrying
 * this request's nonce, and agreeing with the answer's fields. Anything else is a {@link
 * SeatException.TokenException}, checked in the same order as the other clients, so that every
 * client gives each test vector (shared/clients/testdata/vectors.json) the same outcome. The
 * signature is checked by the JDK's Ed25519 ({@code Signature.getInstance("Ed25519")}).
 * Requests, answers and claims are plain Java values (a JSON object as a {@code Map}).
 * Thread-safe.
 */
public final class TokenVerifier {
    static final String LEASE_TYP = "seatlease-lease+jwt";
    static final String RELEASE_TYP = "seatlease-release+jwt";
    private static final byte[] ED25519_SPKI_PREFIX = {
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00
    };
    private static final String[] REQUIRED = {"iss", "aud", "sid", "iat", "nbf", "exp"};
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Supplier<String> fetch;
    private final List<byte[]> pinned = new ArrayList<>();
    private final String tenantId;
    private final double leeway;
    private final Supplier<Instant> clock;
    private final String machine;
    private final long ttlNanos = 300_000_000_000L;
    private long minRefetchNanos = 10_000_000_000L;

    private Map<String, byte[]> keys = new HashMap<>();
    private long fetchedAt;
    private boolean fetched;

    /**
     * @param fetch returns the JWKS document (may throw a SeatException)
     * @param pinnedKeys the vendor's Ed25519 keys: a JWK's "x", a JWK as JSON, or a PEM public key
     * @param tenantId the tenant the tokens' aud must name (null: any)
     * @param leeway clock slack on exp, nbf and iat
     * @param clock the clock (null: the system's)
     */
    public TokenVerifier(Supplier<String> fetch, List<String> pinnedKeys, String tenantId,
                         Duration leeway, Supplier<Instant> clock) {
        this(fetch, pinnedKeys, tenantId, leeway, clock, null);
    }

    /**
     * @param machineFingerprint this machine's ({@link Machine#fingerprint}), as when a saved
     *     borrowed seat is loaded: a borrowed token must name it in cnf.machine, else a {@link
     *     SeatException.TokenWrongMachine} (null or empty: no machine check)
     */
    public TokenVerifier(Supplier<String> fetch, List<String> pinnedKeys, String tenantId,
                         Duration leeway, Supplier<Instant> clock, String machineFingerprint) {
        this.fetch = fetch;
        this.machine = machineFingerprint == null || machineFingerprint.isEmpty() ? null : machineFingerprint;
        if (pinnedKeys != null) {
            for (String key : pinnedKeys) {
                pinned.add(pinnedKeyRaw(key));
            }
        }
        this.tenantId = tenantId;
        this.leeway = Math.max(0, Times.seconds(leeway));
        this.clock = clock != null ? clock : Instant::now;
    }

    /** Least time between two JWKS fetches prompted by an unknown kid (10 s). */
    synchronized void minRefetch(Duration value) { minRefetchNanos = value.toNanos(); }

    /** A fresh nonce for one request (18 random bytes, base64url). */
    public static String newNonce() {
        byte[] raw = new byte[18];
        RANDOM.nextBytes(raw);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(raw);
    }

    static byte[] b64url(String text) {
        if (text.indexOf('=') >= 0) {
            throw new IllegalArgumentException("padding");
        }
        return Base64.getUrlDecoder().decode(text);
    }

    private static byte[] rawFromJwk(JsonObject jwk) {
        if (!"OKP".equals(Json.string(jwk, "kty")) || !"Ed25519".equals(Json.string(jwk, "crv"))) {
            return null;
        }
        String x = Json.string(jwk, "x");
        try {
            byte[] raw = x == null ? null : b64url(x);
            return raw != null && raw.length == 32 ? raw : null;
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    /**
     * The encodings of Ed25519's points of small order (libsodium's ed25519 ref10
     * has_small_order list), the top bit of the last byte masked off: a key among them
     * verifies signatures it never made.
     */
    private static final String[] SMALL_ORDER = {
        "0100000000000000000000000000000000000000000000000000000000000000",
        "0000000000000000000000000000000000000000000000000000000000000000",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
        "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
    };

    static boolean hasSmallOrder(byte[] raw) {
        if (raw.length != 32) {
            return false;
        }
        byte[] masked = raw.clone();
        masked[31] &= 0x7f;
        for (String encoding : SMALL_ORDER) {
            if (Arrays.equals(masked, HexFormat.of().parseHex(encoding))) {
                return true;
            }
        }
        return false;
    }

    /**
     * A pinned key's 32 raw bytes: a JWK's "x", a JWK (JSON), or a PEM public key; an
     * IllegalArgumentException for anything else, and for a point of small order (no
     * vendor's key: it would verify what it never signed).
     */
    public static byte[] pinnedKeyRaw(String key) {
        byte[] raw = pinnedKeyBytes(key);
        if (hasSmallOrder(raw)) {
            throw new IllegalArgumentException("A pinned key of small order is no vendor's key (" + key.strip()
                    + "): pin the \"x\" of a key the deployment's /keys lists.");
        }
        return raw;
    }

    private static byte[] pinnedKeyBytes(String key) {
        String text = key == null ? "" : key.strip();
        try {
            if (text.startsWith("-----BEGIN PUBLIC KEY-----")) {
                String body = text.replace("-----BEGIN PUBLIC KEY-----", "").replace("-----END PUBLIC KEY-----", "")
                        .replaceAll("\\s", "");
                byte[] der = Base64.getDecoder().decode(body);
                if (der.length == 44 && Arrays.equals(Arrays.copyOf(der, 12), ED25519_SPKI_PREFIX)) {
                    return Arrays.copyOfRange(der, 12, 44);
                }
            } else if (text.startsWith("{")) {
                byte[] raw = rawFromJwk(Json.parseObject(text));
                if (raw != null) {
                    return raw;
                }
            } else {
                byte[] raw = b64url(text);
                if (raw.length == 32) {
                    return raw;
                }
            }
        } catch (IllegalArgumentException e) {
            // below
        }
        throw new IllegalArgumentException("A pinned key must be an Ed25519 JWK, PEM or 32-byte base64url key.");
    }

    private synchronized void refresh() {
        JsonObject document = Json.parseObject(fetch.get());
        JsonElement list = document == null ? null : document.get("keys");
        if (list == null || !list.isJsonArray()) {
            throw new SeatException.UnknownKeyId(0, "The JWKS is not a JSON key set.");
        }
        Map<String, byte[]> fresh = new HashMap<>();
        for (JsonElement jwk : (JsonArray) list) {
            if (jwk.isJsonObject()) {
                String kid = Json.string(jwk.getAsJsonObject(), "kid");
                byte[] raw = rawFromJwk(jwk.getAsJsonObject());
                if (kid != null && raw != null) {
                    fresh.put(kid, raw);
                }
            }
        }
        keys = fresh;
        fetchedAt = System.nanoTime();
        fetched = true;
    }

    private byte[] keyFor(String kid, int status) {
        byte[] key;
        synchronized (this) {
            long age = System.nanoTime() - fetchedAt;
            if (!fetched || age > ttlNanos) {
                refresh();
            } else if (!keys.containsKey(kid) && age > minRefetchNanos) {
                refresh(); // a key published since: rotation
            }
            key = keys.get(kid);
        }
        if (key == null) {
            throw new SeatException.UnknownKeyId(status, "No key \"" + kid + "\" in the deployment's JWKS.");
        }
        if (!pinned.isEmpty() && pinned.stream().noneMatch(p -> Arrays.equals(p, key))) {
            throw new SeatException.UntrustedKey(status, "Key \"" + kid + "\" is not one of the pinned keys.");
        }
        return key;
    }

    private static boolean verifies(byte[] key, byte[] message, byte[] signature) {
        try {
            byte[] der = Arrays.copyOf(ED25519_SPKI_PREFIX, 44);
            System.arraycopy(key, 0, der, 12, 32);
            PublicKey publicKey = KeyFactory.getInstance("Ed25519").generatePublic(new X509EncodedKeySpec(der));
            Signature verifier = Signature.getInstance("Ed25519");
            verifier.initVerify(publicKey);
            verifier.update(message);
            return verifier.verify(signature);
        } catch (GeneralSecurityException e) {
            return false;
        }
    }

    /**
     * The verified claims of reply's token, else a TokenException. fn is "acquire",
     * "heartbeat" or "release"; request is the body as sent (with its nonce), reply the
     * answer's JSON object, status its HTTP status (given to the exceptions).
     */
    public Map<String, Object> check(String fn, Map<String, ?> request, Map<String, ?> reply, int status) {
        return Json.toMap(verify(fn, Json.toJsonObject(request), Json.toJsonObject(reply), status));
    }

    JsonObject verify(String fn, JsonObject request, JsonObject reply, int status) {
        boolean release = fn.equals("release");
        String field = release ? "release_token" : "lease_token";
        String token = Json.string(reply, field);
        if (token == null) {
            throw new SeatException.TokenMissing(status, "The " + fn + " answer has no " + field + ".");
        }
        String[] parts = token.split("\\.", -1);
        if (parts.length != 3) {
            throw new SeatException.MalformedToken(status, "The " + field + " is not a JWT.");
        }
        JsonObject header;
        byte[] payload, signature;
        try {
            header = Json.parseObject(new String(b64url(parts[0]), StandardCharsets.UTF_8));
            payload = b64url(parts[1]);
            signature = b64url(parts[2]);
        } catch (IllegalArgumentException e) {
            header = null;
            payload = signature = null;
        }
        if (header == null) {
            throw new SeatException.MalformedToken(status, "The " + field + " is not a JWT.");
        }
        String kid = Json.string(header, "kid");
        if (!"EdDSA".equals(Json.string(header, "alg")) || kid == null) {
            throw new SeatException.MalformedToken(status, "The " + field + " is not an EdDSA JWT with a kid.");
        }
        String typ = Json.string(header, "typ");
        if (!(release ? RELEASE_TYP : LEASE_TYP).equals(typ)) {
            throw new SeatException.TokenMismatch(status, "The " + field + " is a " + typ + " token.");
        }
        byte[] key = keyFor(kid, status);
        byte[] signed = (parts[0] + "." + parts[1]).getBytes(StandardCharsets.US_ASCII);
        if (signature.length != 64 || !verifies(key, signed, signature)) {
            throw new SeatException.BadSignature(status, "The " + field + "'s signature does not verify.");
        }
        JsonObject claims = Json.parseObject(new String(payload, StandardCharsets.UTF_8));
        if (claims == null) {
            throw new SeatException.MalformedToken(status, "The " + field + " has no JSON claims.");
        }
        checkTimes(claims, field, status);
        checkClaims(fn, request, reply, claims, status);
        return claims;
    }

    private void checkTimes(JsonObject claims, String field, int status) {
        for (String name : REQUIRED) {
            if (claims.get(name) == null || claims.get(name).isJsonNull()) {
                throw new SeatException.MalformedToken(status, "The " + field + ": missing the \"" + name + "\" claim.");
            }
        }
        JsonElement sub = claims.get("sub");
        if (sub != null && !(sub.isJsonPrimitive() && sub.getAsJsonPrimitive().isString())) {
            throw new SeatException.MalformedToken(status, "The " + field + ": sub is not a string.");
        }
        double now = clock.get().toEpochMilli() / 1000.0;
        JsonElement iat = claims.get("iat"), nbf = claims.get("nbf"), exp = claims.get("exp");
        if (!Json.isNumber(iat) || iat.getAsDouble() > now + leeway) {
            throw new SeatException.TokenExpired(status, "The " + field + " is not valid yet (check the clock).");
        }
        if (!Json.isNumber(nbf) || !Json.isNumber(exp)) {
            throw new SeatException.MalformedToken(status, "The " + field + ": nbf and exp must be numbers.");
        }
        if (nbf.getAsDouble() > now + leeway) {
            throw new SeatException.TokenExpired(status, "The " + field + " is not valid yet (check the clock).");
        }
        if (exp.getAsDouble() <= now - leeway) {
            throw new SeatException.TokenExpired(status, "The " + field + " has expired.");
        }
    }

    private void checkClaims(String fn, JsonObject request, JsonObject reply, JsonObject claims, int status) {
        String aud = Json.string(claims, "aud");
        String licenseId = Json.string(request, "license_id");
        int cut = aud == null ? -1 : aud.lastIndexOf('/');
        boolean audienceOk = cut > 0 && licenseId != null && aud.substring(cut + 1).equals(licenseId)
                && (tenantId == null || tenantId.isEmpty() || aud.substring(0, cut).equals(tenantId));
        if (!audienceOk) {
            throw new SeatException.WrongAudience(status, "The token is for \"" + aud + "\", not this license.");
        }
        if (!Json.same(claims.get("nonce"), request.get("nonce"))) {
            throw new SeatException.TokenReplayed(status, "The token answers another request (nonce).");
        }
        boolean acquire = fn.equals("acquire"), release = fn.equals("release");
        JsonElement session = acquire ? reply.get("session_id") : request.get("session_id");
        List<String> problems = new ArrayList<>();
        if (!Json.same(claims.get("sid"), session)) {
            problems.add("session");
        }
        if (acquire && !Json.same(claims.get("sub"), request.get("client_id"))) {
            problems.add("client_id");
        }
        if (!release && !sameDeadline(reply, claims)) {
            problems.add("lease_expires_at");
        }
        if (release && !Json.same(claims.get("released"), reply.get("released"))) {
            problems.add("released");
        }
        if (!release) {
            termProblems(reply, claims, problems);
        }
        JsonElement cnf = claims.get("cnf");
        JsonElement bound = cnf != null && cnf.isJsonObject() ? cnf.getAsJsonObject().get("machine") : null;
        if (request.has("fingerprint") && !Json.same(bound, request.get("fingerprint"))) {
            problems.add("fingerprint");
        }
        if (!problems.isEmpty()) {
            throw new SeatException.TokenMismatch(status, "The token disagrees with the answer (" + String.join(", ", problems) + ").");
        }
        JsonElement borrowed = claims.get("borrowed");
        boolean isBorrowed = borrowed != null && borrowed.isJsonPrimitive() && borrowed.getAsJsonPrimitive().isBoolean()
                && borrowed.getAsBoolean();
        if (machine != null && isBorrowed && !Json.same(bound, new JsonPrimitive(machine))) {
            throw new SeatException.TokenWrongMachine(status, "This borrowed seat was taken for another machine (cnf.machine).");
        }
    }

    /**
     * The answer's term fields against the token's ent, lexp and maxv (a token without them:
     * nothing to compare); lexp is license_grace_ends_at rounded down to a second.
     */
    private static void termProblems(JsonObject reply, JsonObject claims, List<String> problems) {
        if (claims.has("ent") && !sameStrings(claims.get("ent"), reply.get("entitlements"))) {
            problems.add("entitlements");
        }
        if (claims.has("lexp")) {
            JsonElement lexp = claims.get("lexp");
            Double ends = Times.parseSeconds(Json.string(reply, "license_grace_ends_at"));
            double gap = -1;
            if (Json.isNumber(lexp) && ends != null && lexp.getAsDouble() == Math.rint(lexp.getAsDouble())) {
                gap = ends - lexp.getAsDouble();
            }
            if (!(gap >= 0 && gap < 1.001)) {
                problems.add("license_grace_ends_at");
            }
        }
        if (claims.has("maxv") && !Json.same(claims.get("maxv"), reply.get("max_version"))) {
            problems.add("max_version");
        }
        // The weight: a token that signs one must agree with the answer's (absent: 1).
        if (claims.has("seats")) {
            JsonElement answered = reply.has("seats") ? reply.get("seats") : new JsonPrimitive(1);
            if (!Json.isNumber(claims.get("seats")) || !Json.same(claims.get("seats"), answered)) {
                problems.add("seats");
            }
        }
    }

    /** The lease's weight a verified token signs (its seats claim; 1 when absent). */
    public static int claimedSeats(Map<String, ?> claims) {
        return claimedSeats(Json.toJsonObject(claims));
    }

    static int claimedSeats(JsonObject claims) {
        return Math.max(1, Json.integer(claims, "seats", 1));
    }

    /** Two decoded JSON arrays of strings equal. */
    private static boolean sameStrings(JsonElement a, JsonElement b) {
        if (a == null || b == null || !a.isJsonArray() || !b.isJsonArray()) {
            return false;
        }
        JsonArray x = a.getAsJsonArray(), y = b.getAsJsonArray();
        if (x.size() != y.size()) {
            return false;
        }
        for (int i = 0; i < x.size(); i++) {
            JsonElement item = x.get(i);
            if (!(item.isJsonPrimitive() && item.getAsJsonPrimitive().isString()) || !Json.same(item, y.get(i))) {
                return false;
            }
        }
        return true;
    }

    /** exp is the answer's deadline rounded down to a second. */
    private static boolean sameDeadline(JsonObject reply, JsonObject claims) {
        JsonElement exp = claims.get("exp");
        Double deadline = Times.parseSeconds(Json.string(reply, "lease_expires_at"));
        if (!Json.isNumber(exp) || deadline == null || exp.getAsDouble() != Math.rint(exp.getAsDouble())) {
            return false;
        }
        double gap = deadline - exp.getAsDouble();
        return gap >= 0 && gap < 1.001;
    }
}
