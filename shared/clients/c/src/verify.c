/* Verification of seatlease's signed answers: EdDSA (Ed25519) JWTs checked with
 * libsodium against the deployment's JWKS and the vendor's pinned keys, in the same
 * order as the Python, Node and Go clients (shared/clients/testdata/vectors.json). */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <math.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#define SL_KEY 32

typedef struct {
    char *kid;
    unsigned char key[SL_KEY];
} sl_jwk;

struct sl_verifier {
    sl_fetch_fn fetch;
    void *context;
    unsigned char (*pinned)[SL_KEY];
    size_t pinned_count;
    char *tenant_id;
    double leeway, ttl, min_refetch, fixed_now;
    pthread_mutex_t mu;
    sl_jwk *keys;
    size_t key_count;
    double fetched_at; /* monotonic; < 0: never */
    char machine[65];  /* this machine's fingerprint, for a saved borrowed seat ("": none) */
};

/* base64url without padding (RFC 7515), strict: the whole text, no stray characters. */
static int b64url_decode(const char *text, size_t length, unsigned char **out, size_t *out_length) {
    size_t capacity = length * 3 / 4 + 3;
    unsigned char *raw = malloc(capacity);
    if (raw == NULL) {
        return -1;
    }
    const char *end = NULL;
    if (sodium_base642bin(raw, capacity, text, length, NULL, out_length, &end,
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING) != 0 ||
        end != text + length) {
        free(raw);
        return -1;
    }
    *out = raw;
    return 0;
}

static int raw_from_x(const char *x, unsigned char key[SL_KEY]) {
    unsigned char *raw = NULL;
    size_t length = 0;
    if (x == NULL || b64url_decode(x, strlen(x), &raw, &length) != 0) {
        return -1;
    }
    int ok = length == SL_KEY;
    if (ok) {
        memcpy(key, raw, SL_KEY);
    }
    free(raw);
    return ok ? 0 : -1;
}

/* An Ed25519 JWK's key; -1 for any other kind of key (ignored). */
static int raw_from_jwk(const cJSON *jwk, unsigned char key[SL_KEY]) {
    const char *kty = sl_json_string(jwk, "kty"), *crv = sl_json_string(jwk, "crv");
    if (kty == NULL || crv == NULL || strcmp(kty, "OKP") != 0 || strcmp(crv, "Ed25519") != 0) {
        return -1;
    }
    return raw_from_x(sl_json_string(jwk, "x"), key);
}

int sl_pinned_key_raw(const char *text, unsigned char key[SL_KEY]) {
    if (text == NULL) {
        return -1;
    }
    if (strstr(text, "-----BEGIN PUBLIC KEY-----") != NULL) {
        /* SubjectPublicKeyInfo of an Ed25519 key (RFC 8410): a fixed 12-byte prefix. */
        static const unsigned char prefix[12] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03,
                                                 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
        const char *start = strstr(text, "-----BEGIN PUBLIC KEY-----") + 26;
        const char *stop = strstr(start, "-----END PUBLIC KEY-----");
        if (stop == NULL) {
            return -1;
        }
        unsigned char der[64];
        size_t length = 0;
        const char *end = NULL;
        if (sodium_base642bin(der, sizeof der, start, (size_t)(stop - start), " \r\n\t", &length,
                              &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
            length != sizeof prefix + SL_KEY || memcmp(der, prefix, sizeof prefix) != 0) {
            return -1;
        }
        memcpy(key, der + sizeof prefix, SL_KEY);
        return 0;
    }
    const char *p = text;
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') {
        p++;
    }
    if (*p == '{') {
        cJSON *jwk = sl_parse_object(text, strlen(text));
        int result = jwk != NULL ? raw_from_jwk(jwk, key) : -1;
        cJSON_Delete(jwk);
        return result;
    }
    size_t length = strlen(p);
    while (length > 0 && (p[length - 1] == ' ' || p[length - 1] == '\n' || p[length - 1] == '\r')) {
        length--;
    }
    unsigned char *raw = NULL;
    size_t raw_length = 0;
    if (b64url_decode(p, length, &raw, &raw_length) != 0) {
        return -1;
    }
    int ok = raw_length == SL_KEY;
    if (ok) {
        memcpy(key, raw, SL_KEY);
    }
    free(raw);
    return ok ? 0 : -1;
}

/* libsodium's has_small_order (ed25519 ref10) list: the encodings of the points of small
 * order, compared with the top bit of the last byte masked off. */
int sl_key_has_small_order(const unsigned char key[SL_KEY]) {
    static const unsigned char small[][SL_KEY] = {
        {0x01}, /* the identity */
        {0x00},
        {0x26, 0xe8, 0x95, 0x8f, 0xc2, 0xb2, 0x27, 0xb0, 0x45, 0xc3, 0xf4, 0x89, 0xf2, 0xef, 0x98,
         0xf0, 0xd5, 0xdf, 0xac, 0x05, 0xd3, 0xc6, 0x33, 0x39, 0xb1, 0x38, 0x02, 0x88, 0x6d, 0x53,
         0xfc, 0x05},
        {0xc7, 0x17, 0x6a, 0x70, 0x3d, 0x4d, 0xd8, 0x4f, 0xba, 0x3c, 0x0b, 0x76, 0x0d, 0x10, 0x67,
         0x0f, 0x2a, 0x20, 0x53, 0xfa, 0x2c, 0x39, 0xcc, 0xc6, 0x4e, 0xc7, 0xfd, 0x77, 0x92, 0xac,
         0x03, 0x7a},
        {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0x7f}, /* p - 1 */
        {0xed, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0x7f}, /* p */
        {0xee, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
         0xff, 0x7f}, /* p + 1 */
    };
    unsigned char masked[SL_KEY];
    memcpy(masked, key, SL_KEY);
    masked[SL_KEY - 1] &= 0x7f;
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        if (memcmp(masked, small[i], SL_KEY) == 0) {
            return 1;
        }
    }
    return 0;
}

seatlease_code sl_verifier_new(sl_fetch_fn fetch, void *context, const char *const *pinned,
                               size_t pinned_count, const char *tenant_id, double leeway,
                               sl_verifier **out, seatlease_error **error) {
    sl_verifier *v = calloc(1, sizeof *v);
    if (v == NULL) {
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    v->fetch = fetch;
    v->context = context;
    v->leeway = leeway;
    v->ttl = 300;
    v->min_refetch = 10;
    v->fetched_at = -1;
    if (pthread_mutex_init(&v->mu, NULL) != 0) {
        free(v);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "pthread_mutex_init failed.");
    }
    if (pinned_count > 0) {
        v->pinned = calloc(pinned_count, SL_KEY);
        if (v->pinned == NULL) {
            sl_verifier_free(v);
            return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
        }
        for (size_t i = 0; i < pinned_count; i++) {
            if (pinned == NULL || sl_pinned_key_raw(pinned[i], v->pinned[i]) != 0) {
                sl_verifier_free(v);
                return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL,
                               "Pinned key %zu is not an Ed25519 JWK, PEM or 32-byte base64url key.", i);
            }
            if (sl_key_has_small_order(v->pinned[i])) {
                sl_verifier_free(v);
                return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, "pinned_key_small_order",
                               "Pinned key %zu is a point of small order (such as the "
                               "identity), which any signature matches: never a vendor's key; "
                               "pin the vendor's key (the JWKS's \"x\").", i);
            }
        }
        v->pinned_count = pinned_count;
    }
    if (tenant_id != NULL && (v->tenant_id = sl_strdup(tenant_id)) == NULL) {
        sl_verifier_free(v);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    *out = v;
    return SEATLEASE_OK;
}

static void free_keys(sl_verifier *v) {
    for (size_t i = 0; i < v->key_count; i++) {
        free(v->keys[i].kid);
    }
    free(v->keys);
    v->keys = NULL;
    v->key_count = 0;
}

void sl_verifier_free(sl_verifier *v) {
    if (v == NULL) {
        return;
    }
    free_keys(v);
    free(v->pinned);
    free(v->tenant_id);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

void sl_verifier_set_now(sl_verifier *v, double now) { v->fixed_now = now; }

void sl_verifier_set_min_refetch(sl_verifier *v, double seconds) {
    pthread_mutex_lock(&v->mu);
    v->min_refetch = seconds;
    pthread_mutex_unlock(&v->mu);
}

void sl_verifier_set_machine(sl_verifier *v, const char *fingerprint) {
    v->machine[0] = '\0';
    if (fingerprint != NULL && strlen(fingerprint) < sizeof v->machine) {
        strcpy(v->machine, fingerprint);
    }
}

/* Fetch the JWKS again: the fetch without v->mu held (another thread's exchange never
 * waits on this one's fetch beyond its own deadline), the keys swapped in under it. */
static seatlease_code refresh(sl_verifier *v, sl_stopper *stopper, double deadline,
                              seatlease_error **error) {
    char *document = NULL;
    seatlease_code code = v->fetch(v->context, stopper, deadline, &document, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    cJSON *parsed = sl_parse_object(document, strlen(document));
    free(document);
    const cJSON *keys = cJSON_GetObjectItemCaseSensitive(parsed, "keys");
    if (!cJSON_IsArray(keys)) {
        cJSON_Delete(parsed);
        return sl_fail(error, SEATLEASE_ERR_UNKNOWN_KEY_ID, 0, "token_unknown_kid",
                       "The JWKS is not a JSON key set.");
    }
    size_t count = (size_t)cJSON_GetArraySize(keys), found = 0;
    sl_jwk *fresh = calloc(count ? count : 1, sizeof *fresh);
    if (fresh == NULL) {
        cJSON_Delete(parsed);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    const cJSON *jwk;
    cJSON_ArrayForEach(jwk, keys) {
        const char *kid = sl_json_string(jwk, "kid");
        if (kid != NULL && raw_from_jwk(jwk, fresh[found].key) == 0) {
            if ((fresh[found].kid = sl_strdup(kid)) != NULL) {
                found++;
            }
        }
    }
    cJSON_Delete(parsed);
    pthread_mutex_lock(&v->mu);
    free_keys(v);
    v->keys = fresh;
    v->key_count = found;
    v->fetched_at = sl_mono_now();
    pthread_mutex_unlock(&v->mu);
    return SEATLEASE_OK;
}

static const unsigned char *known(sl_verifier *v, const char *kid) {
    for (size_t i = 0; i < v->key_count; i++) {
        if (strcmp(v->keys[i].kid, kid) == 0) {
            return v->keys[i].key;
        }
    }
    return NULL;
}

static seatlease_code key_for(sl_verifier *v, const char *kid, int status, sl_stopper *stopper,
                              double deadline, int *fetch_failed, unsigned char key[SL_KEY],
                              seatlease_error **error) {
    pthread_mutex_lock(&v->mu);
    double now = sl_mono_now();
    /* stale (or never fetched), or a key published since (rotation), not too often */
    int stale = v->fetched_at < 0 || now - v->fetched_at > v->ttl ||
                (known(v, kid) == NULL && now - v->fetched_at >= v->min_refetch);
    pthread_mutex_unlock(&v->mu);
    seatlease_code code = stale ? refresh(v, stopper, deadline, error) : SEATLEASE_OK;
    if (code != SEATLEASE_OK) {
        *fetch_failed = 1; /* no verdict on the token: the keys could not be had */
    }
    pthread_mutex_lock(&v->mu);
    const unsigned char *found = code == SEATLEASE_OK ? known(v, kid) : NULL;
    if (found != NULL) {
        memcpy(key, found, SL_KEY);
    }
    pthread_mutex_unlock(&v->mu);
    if (code != SEATLEASE_OK) {
        return code;
    }
    if (found == NULL) {
        return sl_fail(error, SEATLEASE_ERR_UNKNOWN_KEY_ID, status, "token_unknown_kid",
                       "No key \"%.64s\" in the deployment's JWKS.", kid);
    }
    if (v->pinned_count > 0) {
        for (size_t i = 0; i < v->pinned_count; i++) {
            if (sodium_memcmp(v->pinned[i], key, SL_KEY) == 0) {
                return SEATLEASE_OK;
            }
        }
        return sl_fail(error, SEATLEASE_ERR_UNTRUSTED_KEY, status, "token_untrusted_key",
                       "Key \"%.64s\" is not one of the pinned keys.", kid);
    }
    return SEATLEASE_OK;
}

/* Two decoded JSON scalars equal (a missing item and a JSON null are the same). */
static int same(const cJSON *a, const cJSON *b) {
    int a_none = a == NULL || cJSON_IsNull(a), b_none = b == NULL || cJSON_IsNull(b);
    if (a_none || b_none) {
        return a_none && b_none;
    }
    if (cJSON_IsString(a) && cJSON_IsString(b)) {
        return strcmp(a->valuestring, b->valuestring) == 0;
    }
    if (cJSON_IsBool(a) && cJSON_IsBool(b)) {
        return cJSON_IsTrue(a) == cJSON_IsTrue(b);
    }
    if (cJSON_IsNumber(a) && cJSON_IsNumber(b)) {
        return a->valuedouble == b->valuedouble;
    }
    return 0;
}

#define ITEM(object, name) cJSON_GetObjectItemCaseSensitive(object, name)

static seatlease_code check_times(sl_verifier *v, const cJSON *claims, const char *field,
                                  int status, seatlease_error **error) {
    static const char *const required[] = {"iss", "aud", "sid", "iat", "nbf", "exp", NULL};
    for (int i = 0; required[i] != NULL; i++) {
        const cJSON *item = ITEM(claims, required[i]);
        if (item == NULL || cJSON_IsNull(item)) {
            return sl_fail(error, SEATLEASE_ERR_MALFORMED_TOKEN, status, "token_malformed",
                           "The %s: missing the \"%s\" claim.", field, required[i]);
        }
    }
    const cJSON *sub = ITEM(claims, "sub");
    if (sub != NULL && !cJSON_IsString(sub)) {
        return sl_fail(error, SEATLEASE_ERR_MALFORMED_TOKEN, status, "token_malformed",
                       "The %s: sub is not a string.", field);
    }
    double now = v->fixed_now > 0 ? v->fixed_now : floor(sl_wall_now() * 1000) / 1000;
    const cJSON *iat = ITEM(claims, "iat"), *nbf = ITEM(claims, "nbf"), *exp = ITEM(claims, "exp");
    if (!cJSON_IsNumber(iat) || iat->valuedouble > now + v->leeway) {
        return sl_fail(error, SEATLEASE_ERR_TOKEN_EXPIRED, status, "token_expired",
                       "The %s is not valid yet (check the clock).", field);
    }
    if (!cJSON_IsNumber(nbf) || !cJSON_IsNumber(exp)) {
        return sl_fail(error, SEATLEASE_ERR_MALFORMED_TOKEN, status, "token_malformed",
                       "The %s: nbf and exp must be numbers.", field);
    }
    if (nbf->valuedouble > now + v->leeway) {
        return sl_fail(error, SEATLEASE_ERR_TOKEN_EXPIRED, status, "token_expired",
                       "The %s is not valid yet (check the clock).", field);
    }
    if (exp->valuedouble <= now - v->leeway) {
        return sl_fail(error, SEATLEASE_ERR_TOKEN_EXPIRED, status, "token_expired",
                       "The %s has expired.", field);
    }
    return SEATLEASE_OK;
}

/* exp is the answer's deadline rounded down to a second. */
static int same_deadline(const cJSON *reply, const cJSON *claims) {
    const cJSON *exp = ITEM(claims, "exp");
    double deadline;
    if (!cJSON_IsNumber(exp) || exp->valuedouble != trunc(exp->valuedouble) ||
        sl_parse_time(sl_json_string(reply, "lease_expires_at"), &deadline) != 0) {
        return 0;
    }
    double gap = deadline - exp->valuedouble;
    return gap >= 0 && gap < 1.001;
}

/* Two decoded JSON arrays of strings equal. */
static int same_strings(const cJSON *a, const cJSON *b) {
    if (!cJSON_IsArray(a) || !cJSON_IsArray(b) || cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) {
        return 0;
    }
    const cJSON *y = b->child;
    for (const cJSON *x = a->child; x != NULL; x = x->next, y = y->next) {
        if (!cJSON_IsString(x) || !same(x, y)) {
            return 0;
        }
    }
    return 1;
}

/* The answer's term fields against the token's ent, lexp and maxv (a token without them:
 * nothing to compare); lexp is license_grace_ends_at rounded down to a second. */
static void term_problems(const cJSON *reply, const cJSON *claims, char *problems) {
    const cJSON *ent = ITEM(claims, "ent"), *lexp = ITEM(claims, "lexp"), *maxv = ITEM(claims, "maxv");
    if (ent != NULL && !same_strings(ent, ITEM(reply, "entitlements"))) {
        strcat(problems, " entitlements");
    }
    if (lexp != NULL) {
        double ends;
        int ok = cJSON_IsNumber(lexp) && lexp->valuedouble == trunc(lexp->valuedouble) &&
                 sl_parse_time(sl_json_string(reply, "license_grace_ends_at"), &ends) == 0;
        double gap = ok ? ends - lexp->valuedouble : -1;
        if (!(gap >= 0 && gap < 1.001)) {
            strcat(problems, " license_grace_ends_at");
        }
    }
    if (maxv != NULL && !same(maxv, ITEM(reply, "max_version"))) {
        strcat(problems, " max_version");
    }
    /* The weight: a token that signs one must agree with the answer's (absent: 1). */
    const cJSON *seats = ITEM(claims, "seats");
    if (seats != NULL) {
        const cJSON *answered = ITEM(reply, "seats");
        int agree = cJSON_IsNumber(seats) &&
                    (answered == NULL ? seats->valuedouble == 1
                                      : cJSON_IsNumber(answered) &&
                                            answered->valuedouble == seats->valuedouble);
        if (!agree) {
            strcat(problems, " seats");
        }
    }
}

int sl_claims_seats(const cJSON *claims) {
    int seats = sl_json_int(claims, "seats", 1);
    return seats >= 1 ? seats : 1;
}

static seatlease_code check_claims(sl_verifier *v, const char *fn, const cJSON *request,
                                   const cJSON *reply, const cJSON *claims, int status,
                                   seatlease_error **error) {
    const char *aud = sl_json_string(claims, "aud");
    const char *license_id = sl_json_string(request, "license_id");
    const char *cut = aud ? strrchr(aud, '/') : NULL;
    int audience_ok = cut != NULL && cut != aud && license_id != NULL &&
                      strcmp(cut + 1, license_id) == 0;
    if (audience_ok && v->tenant_id != NULL && v->tenant_id[0] != '\0') {
        size_t tenant_length = (size_t)(cut - aud);
        audience_ok = strlen(v->tenant_id) == tenant_length &&
                      strncmp(aud, v->tenant_id, tenant_length) == 0;
    }
    if (!audience_ok) {
        return sl_fail(error, SEATLEASE_ERR_WRONG_AUDIENCE, status, "token_wrong_audience",
                       "The token is for \"%.100s\", not this license.", aud ? aud : "");
    }
    if (!same(ITEM(claims, "nonce"), ITEM(request, "nonce"))) {
        return sl_fail(error, SEATLEASE_ERR_TOKEN_REPLAYED, status, "token_replayed",
                       "The token answers another request (nonce).");
    }
    int acquire = strcmp(fn, "acquire") == 0, release = strcmp(fn, "release") == 0;
    const cJSON *session = acquire ? ITEM(reply, "session_id") : ITEM(request, "session_id");
    char problems[192] = "";
    if (!same(ITEM(claims, "sid"), session)) {
        strcat(problems, " session");
    }
    if (acquire && !same(ITEM(claims, "sub"), ITEM(request, "client_id"))) {
        strcat(problems, " client_id");
    }
    if (!release && !same_deadline(reply, claims)) {
        strcat(problems, " lease_expires_at");
    }
    if (release && !same(ITEM(claims, "released"), ITEM(reply, "released"))) {
        strcat(problems, " released");
    }
    if (!release) {
        term_problems(reply, claims, problems);
    }
    const cJSON *cnf = ITEM(claims, "cnf");
    const cJSON *bound = cJSON_IsObject(cnf) ? ITEM(cnf, "machine") : NULL;
    const cJSON *wanted = ITEM(request, "fingerprint");
    if (wanted != NULL && !same(bound, wanted)) {
        strcat(problems, " fingerprint");
    }
    if (problems[0] != '\0') {
        return sl_fail(error, SEATLEASE_ERR_TOKEN_MISMATCH, status, "token_mismatch",
                       "The token disagrees with the answer (%s).", problems + 1);
    }
    if (v->machine[0] != '\0' && cJSON_IsTrue(ITEM(claims, "borrowed")) &&
        !(cJSON_IsString(bound) && strcmp(bound->valuestring, v->machine) == 0)) {
        return sl_fail(error, SEATLEASE_ERR_TOKEN_WRONG_MACHINE, status, "token_wrong_machine",
                       "This borrowed seat was taken for another machine (cnf.machine).");
    }
    return SEATLEASE_OK;
}

seatlease_code sl_verifier_check(sl_verifier *v, const char *fn, const cJSON *request,
                                 const cJSON *reply, int status, sl_stopper *stopper,
                                 cJSON **claims_out, seatlease_error **error) {
    return sl_verifier_check_within(v, fn, request, reply, status, stopper, 0, NULL, claims_out,
                                    error);
}

seatlease_code sl_verifier_check_within(sl_verifier *v, const char *fn, const cJSON *request,
                                        const cJSON *reply, int status, sl_stopper *stopper,
                                        double deadline, int *fetch_failed, cJSON **claims_out,
                                        seatlease_error **error) {
    int fetch_failed_here = 0;
    if (fetch_failed == NULL) {
        fetch_failed = &fetch_failed_here;
    }
    *fetch_failed = 0;
    int release = strcmp(fn, "release") == 0;
    const char *field = release ? "release_token" : "lease_token";
    const char *typ = release ? "seatlease-release+jwt" : "seatlease-lease+jwt";
    const char *token = sl_json_string(reply, field);
    if (token == NULL) {
        return sl_fail(error, SEATLEASE_ERR_TOKEN_MISSING, status, "token_missing",
                       "The %s answer has no %s.", fn, field);
    }
    const char *dot1 = strchr(token, '.');
    const char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
    if (dot1 == NULL || dot2 == NULL || strchr(dot2 + 1, '.') != NULL) {
        return sl_fail(error, SEATLEASE_ERR_MALFORMED_TOKEN, status, "token_malformed",
                       "The %s is not a JWT.", field);
    }
    unsigned char *header_raw = NULL, *payload_raw = NULL, *signature = NULL;
    size_t header_length = 0, payload_length = 0, signature_length = 0;
    cJSON *header = NULL, *claims = NULL;
    seatlease_code code = SEATLEASE_OK;
    if (b64url_decode(token, (size_t)(dot1 - token), &header_raw, &header_length) != 0 ||
        b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), &payload_raw, &payload_length) != 0 ||
        b64url_decode(dot2 + 1, strlen(dot2 + 1), &signature, &signature_length) != 0 ||
        (header = sl_parse_object((const char *)header_raw, header_length)) == NULL) {
        code = sl_fail(error, SEATLEASE_ERR_MALFORMED_TOKEN, status, "token_malformed",
                       "The %s is not a JWT.", field);
        goto done;
    }
    const char *alg = sl_json_string(header, "alg"), *kid = sl_json_string(header, "kid");
    if (alg == NULL || strcmp(alg, "EdDSA") != 0 || kid == NULL) {
        code = sl_fail(error, SEATLEASE_ERR_MALFORMED_TOKEN, status, "token_malformed",
                       "The %s is not an EdDSA JWT with a kid.", field);
        goto done;
    }
    const char *header_typ = sl_json_string(header, "typ");
    if (header_typ == NULL || strcmp(header_typ, typ) != 0) {
        code = sl_fail(error, SEATLEASE_ERR_TOKEN_MISMATCH, status, "token_mismatch",
                       "The %s is a %.64s token.", field, header_typ ? header_typ : "(no typ)");
        goto done;
    }
    unsigned char key[SL_KEY];
    if ((code = key_for(v, kid, status, stopper, deadline, fetch_failed, key, error)) != SEATLEASE_OK) {
        goto done;
    }
    if (signature_length != crypto_sign_BYTES ||
        crypto_sign_verify_detached(signature, (const unsigned char *)token,
                                    (unsigned long long)(dot2 - token), key) != 0) {
        code = sl_fail(error, SEATLEASE_ERR_BAD_SIGNATURE, status, "token_bad_signature",
                       "The %s's signature does not verify.", field);
        goto done;
    }
    if ((claims = sl_parse_object((const char *)payload_raw, payload_length)) == NULL) {
        code = sl_fail(error, SEATLEASE_ERR_MALFORMED_TOKEN, status, "token_malformed",
                       "The %s has no JSON claims.", field);
        goto done;
    }
    if ((code = check_times(v, claims, field, status, error)) != SEATLEASE_OK ||
        (code = check_claims(v, fn, request, reply, claims, status, error)) != SEATLEASE_OK) {
        goto done;
    }
    if (claims_out != NULL) {
        *claims_out = claims;
        claims = NULL;
    }
done:
    cJSON_Delete(header);
    cJSON_Delete(claims);
    free(header_raw);
    free(payload_raw);
    free(signature);
    return code;
}
