/* The token vectors every client must agree on (../testdata/vectors.json, written from
 * the server's signing code): each case's outcome, "ok" or the error code. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static cJSON *load_vectors(void) {
    FILE *file = fopen("../testdata/vectors.json", "rb");
    if (file == NULL) {
        return NULL;
    }
    fseek(file, 0, SEEK_END);
    long size = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *text = malloc((size_t)size + 1);
    size_t got = fread(text, 1, (size_t)size, file);
    fclose(file);
    text[got] = '\0';
    cJSON *vectors = cJSON_Parse(text);
    free(text);
    return vectors;
}

static seatlease_code fetch_jwks(void *context, sl_stopper *stopper, double deadline,
                                 char **document, seatlease_error **error) {
    (void)stopper, (void)deadline, (void)error;
    char *printed = cJSON_PrintUnformatted(context);
    *document = sl_strdup(printed);
    cJSON_free(printed);
    return SEATLEASE_OK;
}

/* The verifier of one case (its jwks, pins, tenant and leeway, or the file's). */
static sl_verifier *verifier_for(const cJSON *vectors, const cJSON *c, double now) {
    const cJSON *jwks = cJSON_GetObjectItemCaseSensitive(c, "jwks");
    if (jwks == NULL) {
        jwks = cJSON_GetObjectItemCaseSensitive(vectors, "jwks");
    }
    const char *pins[8];
    size_t pin_count = 0;
    if (!cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "pinned"))) {
        const cJSON *pin;
        cJSON_ArrayForEach(pin, cJSON_GetObjectItemCaseSensitive(vectors, "pinned")) {
            if (pin_count < 8) {
                pins[pin_count++] = pin->valuestring;
            }
        }
    }
    const char *tenant = sl_json_string(vectors, "tenant_id");
    const cJSON *own_tenant = cJSON_GetObjectItemCaseSensitive(c, "tenant_id");
    if (own_tenant != NULL) {
        tenant = cJSON_IsString(own_tenant) ? own_tenant->valuestring : NULL;
    }
    const cJSON *leeway = cJSON_GetObjectItemCaseSensitive(c, "leeway");
    if (leeway == NULL) {
        leeway = cJSON_GetObjectItemCaseSensitive(vectors, "leeway");
    }
    sl_verifier *verifier = NULL;
    seatlease_error *error = NULL;
    if (sl_verifier_new(fetch_jwks, (void *)jwks, pins, pin_count, tenant, leeway->valuedouble,
                        &verifier, &error) != SEATLEASE_OK) {
        fprintf(stderr, "verifier: %s\n", seatlease_error_message(error));
        seatlease_error_free(error);
        return NULL;
    }
    sl_verifier_set_now(verifier, now);
    const char *machine_id = sl_json_string(c, "machine_id");
    if (machine_id != NULL) {
        char fingerprint[65];
        if (seatlease_machine_fingerprint(machine_id, fingerprint) != SEATLEASE_OK) {
            sl_verifier_free(verifier);
            return NULL;
        }
        sl_verifier_set_machine(verifier, fingerprint);
    }
    return verifier;
}

static int vector_count;

static void every_vector(void) {
    cJSON *vectors = load_vectors();
    CHECK(vectors != NULL);
    CHECK(strcmp(sl_json_string(vectors, "format"), "seatlease-client-vectors/1") == 0);
    const cJSON *c;
    int failures = 0;
    vector_count = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(vectors, "cases")) {
        const char *name = sl_json_string(c, "name"), *fn = sl_json_string(c, "function");
        const char *expect = sl_json_string(c, "expect");
        int status = sl_json_int(c, "status", 0);
        const cJSON *request = cJSON_GetObjectItemCaseSensitive(c, "request");
        const cJSON *answer = cJSON_GetObjectItemCaseSensitive(c, "answer");
        sl_verifier *verifier = verifier_for(vectors, c, 0);
        cJSON *claims = NULL;
        seatlease_error *error = NULL;
        seatlease_code code = verifier ? sl_verifier_check(verifier, fn, request, answer, status,
                                                           NULL, &claims, &error)
                                       : SEATLEASE_ERR_ARGUMENT;
        int ok;
        if (strcmp(expect, "ok") == 0) {
            const char *want = sl_json_string(answer, "session_id");
            if (want == NULL) {
                want = sl_json_string(request, "session_id");
            }
            const char *sid = sl_json_string(claims, "sid");
            ok = code == SEATLEASE_OK && sid != NULL && want != NULL && strcmp(sid, want) == 0 &&
                 /* the lease's weight the token signs, 1 when absent */
                 sl_claims_seats(claims) == sl_json_int(c, "seats_claim", 1);
        } else {
            ok = seatlease_code_is_token_error(code) &&
                 strcmp(seatlease_code_name(code), expect) == 0 &&
                 strcmp(seatlease_error_server_code(error), expect) == 0 &&
                 seatlease_error_status(error) == status;
        }
        printf("--- %s: every_vector/%s\n", ok ? "PASS" : "FAIL", name);
        if (!ok) {
            fprintf(stderr, "vector %s: want %s, got %s (%s)\n", name, expect,
                    seatlease_code_name(code), error ? seatlease_error_message(error) : "");
            failures++;
        }
        vector_count++;
        cJSON_Delete(claims);
        seatlease_error_free(error);
        sl_verifier_free(verifier);
    }
    cJSON_Delete(vectors);
    CHECK(failures == 0);
    CHECK(vector_count >= 30);
}

static void every_machine_fingerprint(void) {
    cJSON *vectors = load_vectors();
    CHECK(vectors != NULL);
    const cJSON *m;
    int count = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItemCaseSensitive(vectors, "machines")) {
        char fingerprint[65];
        CHECK_CODE(seatlease_machine_fingerprint(sl_json_string(m, "machine_id"), fingerprint),
                   SEATLEASE_OK);
        CHECK(strcmp(fingerprint, sl_json_string(m, "fingerprint")) == 0);
        count++;
    }
    cJSON_Delete(vectors);
    CHECK(count >= 4);
    CHECK_CODE(seatlease_machine_fingerprint(NULL, NULL), SEATLEASE_ERR_ARGUMENT);
}

static void leeway_by_the_verifiers_clock(void) {
    cJSON *vectors = load_vectors();
    CHECK(vectors != NULL);
    const cJSON *good = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(vectors, "cases"), 0);
    const cJSON *request = cJSON_GetObjectItemCaseSensitive(good, "request");
    const cJSON *answer = cJSON_GetObjectItemCaseSensitive(good, "answer");
    const double exp = 4102444800.0, iat = 1767225600.0;
    const double at[] = {exp + 59, exp + 60, iat - 59, iat - 61};
    const seatlease_code want[] = {SEATLEASE_OK, SEATLEASE_ERR_TOKEN_EXPIRED, SEATLEASE_OK,
                                   SEATLEASE_ERR_TOKEN_EXPIRED};
    seatlease_code got[4];
    for (int i = 0; i < 4; i++) {
        sl_verifier *verifier = verifier_for(vectors, good, at[i]);
        got[i] = sl_verifier_check(verifier, "acquire", request, answer, 201, NULL, NULL, NULL);
        sl_verifier_free(verifier);
    }
    cJSON_Delete(vectors);
    for (int i = 0; i < 4; i++) {
        CHECK_CODE(got[i], want[i]);
    }
}

static void pinned_key_forms(void) {
    const char *x = "4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk";
    const char *pem = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk=\n-----END PUBLIC KEY-----\n";
    const char *jwk = "{\"kty\": \"OKP\", \"crv\": \"Ed25519\", \"x\": \"4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk\"}";
    unsigned char a[32], b[32], c[32], d[32];
    CHECK(sl_pinned_key_raw(x, a) == 0);
    CHECK(sl_pinned_key_raw(pem, b) == 0);
    CHECK(sl_pinned_key_raw(jwk, c) == 0);
    CHECK(memcmp(a, b, 32) == 0 && memcmp(a, c, 32) == 0);
    CHECK(sl_pinned_key_raw("{\"kty\": \"RSA\"}", d) != 0);
    CHECK(sl_pinned_key_raw("not a key", d) != 0);
    CHECK(sl_pinned_key_raw("4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHyst", d) != 0);
    /* A client refuses a pin that is no key, with a typed error. */
    seatlease_options options;
    seatlease_options_init(&options);
    const char *pins[] = {"nope"};
    options.pinned_keys = pins;
    options.pinned_key_count = 1;
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:1", "k", &options, &client, &error),
               SEATLEASE_ERR_ARGUMENT);
    CHECK(client == NULL && error != NULL);
    seatlease_error_free(error);
}

static void times_and_urls(void) {
    double t;
    CHECK(sl_parse_time("2100-01-01T00:00:00.250Z", &t) == 0 && t == 4102444800.25);
    CHECK(sl_parse_time("2026-01-01T02:00:00+02:00", &t) == 0 && t == 1767225600.0);
    CHECK(sl_parse_time("2026-01-01 00:00:00z", &t) == 0 && t == 1767225600.0);
    CHECK(sl_parse_time("2026-01-01T00:00:00", &t) != 0);
    CHECK(sl_parse_time("2026-13-01T00:00:00Z", &t) != 0);
    CHECK(sl_parse_time("", &t) != 0 && sl_parse_time(NULL, &t) != 0);
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_client_new("ftp://x", "k", NULL, &client, &error), SEATLEASE_ERR_ARGUMENT);
    seatlease_error_free(error);
    CHECK_CODE(seatlease_client_new("not a url", "k", NULL, &client, NULL), SEATLEASE_ERR_ARGUMENT);
    seatlease_options insecure;
    seatlease_options_init(&insecure);
    insecure.insecure_skip_verify = 1;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:1/", "sl_secret", &insecure, &client, NULL),
               SEATLEASE_OK);
    CHECK(strcmp(client->base_url, "http://127.0.0.1:1") == 0);
    seatlease_client_free(client);
    CHECK(strcmp(seatlease_code_name(SEATLEASE_ERR_TOKEN_MISMATCH), "token_mismatch") == 0);
    CHECK(strcmp(seatlease_code_name((seatlease_code)999), "unknown") == 0);
    CHECK(strcmp(seatlease_code_name(SEATLEASE_ERR_TOKEN_WRONG_MACHINE), "token_wrong_machine") == 0);
    CHECK(strcmp(seatlease_code_name(SEATLEASE_ERR_VERSION_NOT_ENTITLED), "version_not_entitled") == 0);
    CHECK(strcmp(seatlease_code_name(SEATLEASE_ERR_SEATS_MISMATCH), "seats_mismatch") == 0);
    CHECK(strcmp(seatlease_code_name(SEATLEASE_ERR_MACHINE_MISMATCH), "machine_mismatch") == 0);
    CHECK(!seatlease_code_is_license_suspended(SEATLEASE_ERR_SEATS_MISMATCH));
    CHECK(!seatlease_code_is_token_error(SEATLEASE_ERR_SEATS_MISMATCH));
    CHECK(seatlease_code_is_token_error(SEATLEASE_ERR_TOKEN_WRONG_MACHINE));
    CHECK(!seatlease_code_is_token_error(SEATLEASE_ERR_NOT_ENTITLED));
    CHECK(seatlease_code_is_license_suspended(SEATLEASE_ERR_LICENSE_EXPIRED));
    CHECK(seatlease_code_is_license_suspended(SEATLEASE_ERR_USER_DENIED));
    CHECK(!seatlease_code_is_license_suspended(SEATLEASE_ERR_TOKEN_WRONG_MACHINE));
}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        {"every_vector", every_vector},
        {"every_machine_fingerprint", every_machine_fingerprint},
        {"leeway_by_the_verifiers_clock", leeway_by_the_verifiers_clock},
        {"pinned_key_forms", pinned_key_forms},
        {"times_and_urls", times_and_urls},
    };
    return run_tests("vectors", tests, sizeof tests / sizeof tests[0], argc, argv);
}
