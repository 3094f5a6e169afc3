/* Bad server answers give the typed error, never a crash (run under ASan and UBSan):
 * tests/client_bad_server.py serves each scenario at SEATLEASE_BAD_URL/<scenario>. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *scenario;
    const char *call; /* acquire, lease, heartbeat, release */
    int verify;
    seatlease_code want;
    int status;
} bad_case;

static const bad_case cases[] = {
    {"truncated", "acquire", 0, SEATLEASE_ERR_INVALID_RESPONSE, 201},
    {"truncated", "lease", 1, SEATLEASE_ERR_INVALID_RESPONSE, 201},
    {"wrong_types", "acquire", 0, SEATLEASE_ERR_INVALID_RESPONSE, 201},
    {"wrong_types", "heartbeat", 1, SEATLEASE_ERR_INVALID_RESPONSE, 201},
    {"not_an_object", "acquire", 0, SEATLEASE_ERR_INVALID_RESPONSE, 201},
    {"empty", "acquire", 1, SEATLEASE_ERR_INVALID_RESPONSE, 201},
    {"html", "lease", 0, SEATLEASE_ERR_INVALID_RESPONSE, 200},
    {"no_token", "acquire", 1, SEATLEASE_ERR_TOKEN_MISSING, 201},
    {"no_token", "lease", 1, SEATLEASE_ERR_TOKEN_MISSING, 201},
    {"no_token", "heartbeat", 1, SEATLEASE_ERR_TOKEN_MISSING, 201},
    {"token_not_a_string", "acquire", 1, SEATLEASE_ERR_TOKEN_MISSING, 201},
    {"huge", "acquire", 0, SEATLEASE_ERR_INVALID_RESPONSE, 201},
    {"huge_error", "acquire", 0, SEATLEASE_ERR_INVALID_RESPONSE, 409},
    {"error_wrong_types", "acquire", 0, SEATLEASE_ERR_NO_SEATS_AVAILABLE, 409},
    {"error_not_json", "acquire", 0, SEATLEASE_ERR_INVALID_REQUEST, 400},
    {"jwks_not_a_key_set", "acquire", 1, SEATLEASE_ERR_UNKNOWN_KEY_ID, 0},
    {"jwks_truncated", "acquire", 1, SEATLEASE_ERR_INVALID_RESPONSE, 200},
    {"release_wrong_types", "release", 1, SEATLEASE_ERR_INVALID_RESPONSE, 200},
    {"deep_nesting", "acquire", 0, SEATLEASE_ERR_INVALID_RESPONSE, 201},
    {"absurd_numbers", "acquire", 0, SEATLEASE_ERR_BACKEND_UNAVAILABLE, 503},
    {"absurd_numbers_409", "acquire", 0, SEATLEASE_ERR_NO_SEATS_AVAILABLE, 409},
    {"seats_mismatch", "acquire", 0, SEATLEASE_ERR_SEATS_MISMATCH, 409},
    {"seats_mismatch", "lease", 0, SEATLEASE_ERR_SEATS_MISMATCH, 409},
    {"weighted_denial", "acquire", 0, SEATLEASE_ERR_NO_SEATS_AVAILABLE, 409},
    {"machine_mismatch", "acquire", 0, SEATLEASE_ERR_MACHINE_MISMATCH, 409},
    {"machine_mismatch", "lease", 0, SEATLEASE_ERR_MACHINE_MISMATCH, 409},
};

static void every_bad_answer_is_a_typed_error(void) {
    const char *server = getenv("SEATLEASE_BAD_URL");
    if (server == NULL || server[0] == '\0') {
        SKIP("SEATLEASE_BAD_URL not set: run through pytest tests/test_client_c.py");
    }
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bad_case *c = &cases[i];
        char url[512];
        snprintf(url, sizeof url, "%s/%s", server, c->scenario);
        seatlease_options options;
        seatlease_options_init(&options);
        options.verify = c->verify;
        options.retries = 0;
        seatlease_client *client = NULL;
        seatlease_error *error = NULL;
        CHECK_CODE(seatlease_client_new(url, "sl_test", &options, &client, NULL), SEATLEASE_OK);
        seatlease_code code;
        seatlease_answer *answer = NULL;
        seatlease_lease *lease = NULL;
        if (strcmp(c->call, "acquire") == 0) {
            code = seatlease_acquire(client, "lic", "pc-1", NULL, &answer, &error);
        } else if (strcmp(c->call, "heartbeat") == 0) {
            code = seatlease_heartbeat(client, "lic", "c2Vzc2lvbi0wMDAwMDAwMDAx", &answer, &error);
        } else if (strcmp(c->call, "release") == 0) {
            code = seatlease_release(client, "lic", "c2Vzc2lvbi0wMDAwMDAwMDAx", &answer, &error);
        } else {
            seatlease_lease_options o;
            seatlease_lease_options_init(&o);
            o.client_id = "pc-1";
            code = seatlease_lease_acquire(client, "lic", &o, &lease, &error);
        }
        int ok = code == c->want && answer == NULL && lease == NULL && error != NULL &&
                 seatlease_error_code(error) == c->want && seatlease_error_status(error) == c->status &&
                 seatlease_error_message(error)[0] != '\0';
        printf("--- %s: every_bad_answer_is_a_typed_error/%s_%s\n", ok ? "PASS" : "FAIL",
               c->scenario, c->call);
        if (!ok) {
            fprintf(stderr, "%s %s: got %s (status %d: %s), want %s (status %d)\n", c->scenario,
                    c->call, seatlease_code_name(code), seatlease_error_status(error),
                    seatlease_error_message(error), seatlease_code_name(c->want), c->status);
            failures++;
        }
        seatlease_answer_free(answer);
        seatlease_lease_free(lease);
        seatlease_error_free(error);
        seatlease_client_free(client);
    }
    CHECK(failures == 0);
}

static seatlease_client *client_at(const char *server, const char *scenario) {
    char url[512];
    snprintf(url, sizeof url, "%s/%s", server, scenario);
    seatlease_options options;
    seatlease_options_init(&options);
    options.retries = 0;
    seatlease_client *client = NULL;
    return seatlease_client_new(url, "sl_test", &options, &client, NULL) == SEATLEASE_OK ? client : NULL;
}

/* Weighted seats: seats is sent only when set (the "weights" scenario echoes the weight
 * asked, none when none was, and refuses a seats that is not a positive integer); the
 * answer's and the lease's weight, 1 from a server that does not say; a seats_mismatch's
 * and a weighted denial's numbers. */
static void weights_are_sent_and_read(void) {
    const char *server = getenv("SEATLEASE_BAD_URL");
    if (server == NULL || server[0] == '\0') {
        SKIP("SEATLEASE_BAD_URL not set: run through pytest tests/test_client_c.py");
    }
    seatlease_client *client = client_at(server, "weights");
    CHECK(client != NULL);
    seatlease_answer *answer = NULL;
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-1", NULL, &answer, NULL), SEATLEASE_OK);
    CHECK(seatlease_answer_seats(answer) == 1);
    CHECK(strstr(seatlease_answer_json(answer), "\"seats\":") == NULL); /* none asked */
    seatlease_answer_free(answer);
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    CHECK(ao.seats == 0);
    ao.seats = 3;
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-2", &ao, &answer, NULL), SEATLEASE_OK);
    CHECK(seatlease_answer_seats(answer) == 3);
    seatlease_answer_free(answer);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-3";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    CHECK(seatlease_lease_seats(lease) == 1);
    seatlease_lease_free(lease);
    o.seats = 4;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    CHECK(seatlease_lease_seats(lease) == 4);
    seatlease_lease_free(lease);
    CHECK(seatlease_lease_seats(NULL) == 1 && seatlease_answer_seats(NULL) == 1);
    /* A caller built before seats was appended passes a shorter struct: still accepted,
     * and no seats is sent (the echo answers none: a weight of 1). */
    seatlease_acquire_options older;
    seatlease_acquire_options_init(&older);
    older.seats = 5; /* beyond the older caller's struct: never read */
    older.struct_size = offsetof(seatlease_acquire_options, seats);
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-5", &older, &answer, NULL), SEATLEASE_OK);
    CHECK(seatlease_answer_seats(answer) == 1);
    seatlease_answer_free(answer);
    o.seats = 5;
    o.struct_size = offsetof(seatlease_lease_options, seats);
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    CHECK(seatlease_lease_seats(lease) == 1);
    seatlease_lease_free(lease);
    seatlease_lease_options_init(&o);
    o.client_id = "pc-3";
    seatlease_client_free(client);

    client = client_at(server, "seats_mismatch");
    CHECK(client != NULL);
    seatlease_error *error = NULL;
    ao.seats = 2;
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-1", &ao, NULL, &error),
               SEATLEASE_ERR_SEATS_MISMATCH);
    CHECK(seatlease_error_held_seats(error) == 4 && seatlease_error_seats_requested(error) == 2);
    CHECK(strcmp(seatlease_error_server_code(error), "seats_mismatch") == 0);
    seatlease_error_free(error);
    error = NULL;
    o.seats = 2;
    o.wait = 1; /* a mismatch is not waited for */
    o.wait_timeout_seconds = 30;
    double started = now_seconds();
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, &error),
               SEATLEASE_ERR_SEATS_MISMATCH);
    CHECK(now_seconds() - started < 5 && lease == NULL);
    seatlease_error_free(error);
    seatlease_client_free(client);

    client = client_at(server, "weighted_denial");
    CHECK(client != NULL);
    error = NULL;
    ao.seats = 4;
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-1", &ao, NULL, &error),
               SEATLEASE_ERR_NO_SEATS_AVAILABLE);
    CHECK(seatlease_error_seats_requested(error) == 4 && seatlease_error_held_seats(error) == -1);
    seatlease_error_free(error);
    seatlease_client_free(client);
}

static void misuse_is_an_argument_error(void) {
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_client_new(NULL, "k", NULL, &client, &error), SEATLEASE_ERR_ARGUMENT);
    seatlease_error_free(error);
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", NULL, &client, NULL), SEATLEASE_OK);
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.metadata_json = "[1]";
    CHECK_CODE(seatlease_acquire(client, "lic", "pc", &ao, NULL, &error), SEATLEASE_ERR_ARGUMENT);
    seatlease_error_free(error);
    CHECK_CODE(seatlease_acquire(client, NULL, "pc", NULL, NULL, NULL), SEATLEASE_ERR_ARGUMENT);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_ERR_ARGUMENT);
    o.struct_size = 3;
    o.client_id = "pc";
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_ERR_ARGUMENT);
    CHECK_CODE(seatlease_lease_release(NULL, NULL), SEATLEASE_ERR_ARGUMENT);
    seatlease_lease_free(NULL);
    seatlease_answer_free(NULL);
    seatlease_error_free(NULL);
    CHECK(seatlease_answer_session_id(NULL)[0] == '\0');
    seatlease_client_free(client);
    seatlease_client_free(NULL);
}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        {"every_bad_answer_is_a_typed_error", every_bad_answer_is_a_typed_error},
        {"weights_are_sent_and_read", weights_are_sent_and_read},
        {"misuse_is_an_argument_error", misuse_is_an_argument_error},
    };
    return run_tests("bad_answers", tests, sizeof tests / sizeof tests[0], argc, argv);
}
