/* Bad server answers give the typed error, never a crash (run under ASan and UBSan), and
 * the behaviours no real server shows on demand (a long Retry-After, a region's loss, an
 * ended term, a suspension): tests/client_bad_server.py serves each scenario at
 * SEATLEASE_BAD_URL/<scenario>. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define NEED_BAD_SERVER()                                                                   \
    do {                                                                                    \
        if (bad_url() == NULL)                                                              \
            SKIP("SEATLEASE_BAD_URL not set: run through pytest tests/test_client_c.py");   \
    } while (0)

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
        if (c->verify) {
            pin_from_env(&options, "SEATLEASE_BAD_PINNED_KEY");
        } else {
            options.insecure_skip_verify = 1; /* the answer's bytes alone are refused */
        }
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
    pin_from_env(&options, "SEATLEASE_BAD_PINNED_KEY"); /* the scenarios sign their 2xx */
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

/* -- behaviours ------------------------------------------------------------------------- */

/* What the library logged, and the seat's losses. */
typedef struct {
    pthread_mutex_t mu;
    int warnings, lost;
    char text[8192], reasons[256];
} book;

static void book_log(void *user_data, int level, const char *message) {
    book *b = user_data;
    pthread_mutex_lock(&b->mu);
    b->warnings += level >= SEATLEASE_LOG_WARNING;
    strncat(b->text, message, sizeof b->text - strlen(b->text) - 2);
    strcat(b->text, "\n");
    pthread_mutex_unlock(&b->mu);
}

static void book_lost(seatlease_lease *lease, const char *reason, void *user_data) {
    (void)lease;
    book *b = user_data;
    pthread_mutex_lock(&b->mu);
    b->lost++;
    strncat(b->reasons, reason, sizeof b->reasons - strlen(b->reasons) - 2);
    strcat(b->reasons, ",");
    pthread_mutex_unlock(&b->mu);
}

/* How often the book's text says `words`. */
static int said(book *b, const char *words) {
    pthread_mutex_lock(&b->mu);
    int count = 0;
    for (const char *at = strstr(b->text, words); at != NULL; at = strstr(at + 1, words)) {
        count++;
    }
    pthread_mutex_unlock(&b->mu);
    return count;
}

static seatlease_client *behaviour_client(const char *scenario, book *b, double max_backoff,
                                          int retries) {
    char url[512];
    snprintf(url, sizeof url, "%s/%s", bad_url(), scenario);
    seatlease_options options;
    seatlease_options_init(&options);
    options.retries = retries;
    options.backoff_seconds = 0.05;
    options.max_backoff_seconds = max_backoff;
    options.log = b != NULL ? book_log : NULL;
    options.log_user_data = b;
    pin_from_env(&options, "SEATLEASE_BAD_PINNED_KEY"); /* the scenarios sign their 2xx */
    seatlease_client *client = NULL;
    return seatlease_client_new(url, "sl_test", &options, &client, NULL) == SEATLEASE_OK ? client : NULL;
}

static seatlease_lease *behaviour_lease(seatlease_client *client, const char *client_id, book *b) {
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = client_id;
    o.on_lost = book_lost;
    o.user_data = b;
    seatlease_lease *lease = NULL;
    return seatlease_lease_acquire(client, "lic", &o, &lease, NULL) == SEATLEASE_OK ? lease : NULL;
}

/* The scenario's calls of fn since its _reset (term_ended, suspended). */
static int calls_of(const char *scenario, const char *fn) {
    char url[512];
    snprintf(url, sizeof url, "%s/%s/_calls", bad_url(), scenario);
    cJSON *calls = fetch_json(url, NULL);
    int count = sl_json_int(calls, fn, 0);
    cJSON_Delete(calls);
    return count;
}

static void reset_calls(const char *scenario) {
    char url[512];
    snprintf(url, sizeof url, "%s/%s/_reset", bad_url(), scenario);
    cJSON_Delete(fetch_json(url, "{}"));
}

typedef struct {
    seatlease_client *client;
    atomic_int done;
    seatlease_code code;
} pending_acquire;

static void *acquire_in_background(void *argument) {
    pending_acquire *p = argument;
    p->code = seatlease_acquire(p->client, "lic", "pc-1", NULL, NULL, NULL);
    atomic_store(&p->done, 1);
    return NULL;
}

static int acquire_done(void *context) { return atomic_load(&((pending_acquire *)context)->done); }

/* 503 with Retry-After: 3600 on every call: the pause between attempts is the hint capped
 * at the maximum back-off, so 2 retries at 1 s end in about 2 s, not in two hours. */
static void a_retry_after_never_outlasts_the_max_backoff(void) {
    NEED_BAD_SERVER();
    seatlease_client *client = behaviour_client("retry_after_long", NULL, 1, 2);
    CHECK(client != NULL);
    pending_acquire p = {client, 0, SEATLEASE_OK};
    pthread_t thread;
    double started = now_seconds();
    pthread_create(&thread, NULL, acquire_in_background, &p);
    /* a watchdog: on a client that sleeps 3600 s this fails (and leaves the thread) */
    CHECK(eventually(10, acquire_done, &p));
    pthread_join(thread, NULL);
    double took = now_seconds() - started;
    CHECK_CODE(p.code, SEATLEASE_ERR_BACKEND_UNAVAILABLE);
    CHECK(took >= 1.0 && took < 4.0);
    seatlease_client_free(client);
}

/* A region lost its last writes: a heartbeat is 410 "unknown" without the lease's token
 * and 200 with it. The seat is kept: no on_lost, no warning, once per heartbeat (a normal
 * heartbeat never carries the token, so each is refused first). */
static void a_heartbeat_of_an_unknown_session_is_recovered_by_its_token(void) {
    NEED_BAD_SERVER();
    book b = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", ""};
    seatlease_client *client = behaviour_client("recover", &b, 1, 0);
    CHECK(client != NULL);
    seatlease_lease *lease = behaviour_lease(client, "pc-1", &b);
    CHECK(lease != NULL);
    for (int beat = 1; beat <= 2; beat++) {
        sl_lease_heartbeat_now(lease); /* the scenario's interval is 20 s */
        double deadline = now_seconds() + 5;
        while (said(&b, "re-admitted by its token") < beat && now_seconds() < deadline) {
            sleep_seconds(0.05);
        }
        CHECK(said(&b, "re-admitted by its token") == beat);
    }
    sleep_seconds(0.3);
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    pthread_mutex_lock(&b.mu);
    int lost = b.lost, warnings = b.warnings;
    pthread_mutex_unlock(&b.mu);
    CHECK(lost == 0 && !info.lost && warnings == 0);
    CHECK(strcmp(info.session_id, "c2Vzc2lvbi0wMDAwMDAwMDAx") == 0);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
}

static int lost_once(void *context) {
    book *b = context;
    pthread_mutex_lock(&b->mu);
    int lost = b->lost;
    pthread_mutex_unlock(&b->mu);
    return lost > 0;
}

/* The lease's lost_reason as on_lost saw it (a_seat_an_operator_freed_...). */
static char lost_reason_then[128]; /* "not lost: " and a lost_reason of 64 */

static void book_lost_reason(seatlease_lease *lease, const char *reason, void *user_data) {
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    book *b = user_data;
    pthread_mutex_lock(&b->mu);
    snprintf(lost_reason_then, sizeof lost_reason_then, "%s%s", info.lost ? "" : "not lost: ",
             info.lost_reason);
    pthread_mutex_unlock(&b->mu);
    book_lost(lease, reason, user_data);
}

static int regained_session(void *lease) {
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    return !info.lost && strcmp(info.session_id, "c2Vzc2lvbi0wMDAwMDAwMDAy") == 0;
}

/* An operator freed the seat (seatlease revoke, the portal's "Free seat"): a heartbeat is
 * 410 "revoked". The seat is lost with that reason (on_lost once, lost_reason), its token
 * is never sent (the server refuses a revoked session's token: only "unknown" is retried
 * with it), and it is acquired again at once: the scenario's second session. */
static void a_seat_an_operator_freed_is_lost_as_revoked_without_its_token(void) {
    NEED_BAD_SERVER();
    reset_calls("revoked");
    book b = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", ""};
    seatlease_client *client = behaviour_client("revoked", &b, 1, 0);
    CHECK(client != NULL);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    o.on_lost = book_lost_reason;
    o.user_data = &b;
    seatlease_lease *lease = NULL; /* heartbeats every 1 s */
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    CHECK(eventually(5, lost_once, &b));
    CHECK(eventually(5, regained_session, lease));
    pthread_mutex_lock(&b.mu);
    int lost = b.lost, one_reason = strcmp(b.reasons, "revoked,") == 0;
    int reason_then = strcmp(lost_reason_then, "revoked") == 0;
    pthread_mutex_unlock(&b.mu);
    CHECK(reason_then);
    CHECK(lost == 1 && one_reason);
    CHECK(said(&b, "lost (revoked)") == 1 && said(&b, "re-admitted") == 0);
    CHECK(calls_of("revoked", "token") == 0); /* no heartbeat carried the lease token */
    CHECK(calls_of("revoked", "acquire") == 2);
    seatlease_lease_free(lease);
    CHECK(calls_of("revoked", "release") == 1);
    seatlease_client_free(client);
}

/* The license's term ends while the seat is held: a heartbeat's 403 license_expired ends
 * it (on_lost once, with that reason), the re-acquire's 403 is final: said once, asked
 * again only minutes later; a wait for a first seat gets the 403 at once. */
static void an_ended_term_ends_the_seat_and_is_said_once(void) {
    NEED_BAD_SERVER();
    reset_calls("term_ended");
    book b = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", ""};
    seatlease_client *client = behaviour_client("term_ended", &b, 30, 5);
    CHECK(client != NULL);
    seatlease_lease *lease = behaviour_lease(client, "pc-1", &b); /* heartbeats every 1 s */
    CHECK(lease != NULL);
    CHECK(eventually(5, lost_once, &b));
    sleep_seconds(8);
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    CHECK(info.lost && strcmp(info.lost_reason, "license_expired") == 0);
    pthread_mutex_lock(&b.mu);
    int lost = b.lost, warnings = b.warnings, one_reason = strcmp(b.reasons, "license_expired,") == 0;
    pthread_mutex_unlock(&b.mu);
    CHECK(lost == 1 && one_reason);
    CHECK(warnings == 1); /* the loss, naming the refusal; the re-acquire's is not said again */
    CHECK(calls_of("term_ended", "acquire") == 2); /* the grant, and one re-acquire */
    CHECK(calls_of("term_ended", "heartbeat") == 1);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-2";
    o.wait = 1; /* a 403 is never waited on */
    seatlease_lease *never = NULL;
    seatlease_error *error = NULL;
    double started = now_seconds();
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &never, &error), SEATLEASE_ERR_LICENSE_EXPIRED);
    CHECK(never == NULL && seatlease_error_status(error) == 403 && now_seconds() - started < 2);
    seatlease_error_free(error);
    started = now_seconds();
    seatlease_lease_free(lease); /* its thread sleeps for minutes: the free does not wait */
    CHECK(now_seconds() - started < 2);
    seatlease_client_free(client);
}

/* A suspended license keeps the seats it holds (their heartbeats go on) and refuses new
 * ones at once. */
static void a_suspended_license_keeps_its_held_seats(void) {
    NEED_BAD_SERVER();
    reset_calls("suspended");
    book b = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", ""};
    seatlease_client *client = behaviour_client("suspended", &b, 30, 5);
    CHECK(client != NULL);
    seatlease_lease *lease = behaviour_lease(client, "pc-1", &b);
    CHECK(lease != NULL);
    sleep_seconds(3.5); /* past a lease of 3 s, heartbeats every second */
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    pthread_mutex_lock(&b.mu);
    int warnings = b.warnings;
    pthread_mutex_unlock(&b.mu);
    CHECK(!info.lost && !lost_once(&b) && warnings == 0);
    CHECK(calls_of("suspended", "heartbeat") >= 3);
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-2", NULL, NULL, &error), SEATLEASE_ERR_LICENSE_SUSPENDED);
    seatlease_error_free(error);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-3";
    o.wait = 1;
    seatlease_lease *never = NULL;
    double started = now_seconds();
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &never, NULL), SEATLEASE_ERR_LICENSE_SUSPENDED);
    CHECK(now_seconds() - started < 2);
    seatlease_lease_free(lease);
    CHECK(calls_of("suspended", "release") == 1);
    seatlease_client_free(client);
}

static void *free_lease(void *lease) {
    seatlease_lease_free(lease);
    return NULL;
}

/* seatlease_client_free with leases alive: they keep working (and release through it),
 * and the client goes with the last of them, freed on any thread (ASan, TSan). */
static void a_client_freed_before_its_leases_goes_with_the_last(void) {
    NEED_BAD_SERVER();
    seatlease_client *client = client_at(bad_url(), "weights");
    CHECK(client != NULL);
    enum { COUNT = 4 };
    seatlease_lease *leases[COUNT];
    for (int i = 0; i < COUNT; i++) {
        char id[16];
        snprintf(id, sizeof id, "pc-%d", i);
        seatlease_lease_options o;
        seatlease_lease_options_init(&o);
        o.client_id = id;
        CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &leases[i], NULL), SEATLEASE_OK);
    }
    seatlease_client_free(client); /* deferred: four leases hold it */
    CHECK_CODE(seatlease_lease_release(leases[0], NULL), SEATLEASE_OK);
    seatlease_lease_free(leases[0]);
    pthread_t threads[COUNT - 1];
    for (int i = 1; i < COUNT; i++) {
        pthread_create(&threads[i - 1], NULL, free_lease, leases[i]);
    }
    for (int i = 1; i < COUNT; i++) {
        pthread_join(threads[i - 1], NULL);
    }
}

/* The first acquire is cancelled before it starts: nothing is sent. */
static void a_triggered_cancel_ends_a_call_before_it_starts(void) {
    NEED_BAD_SERVER();
    seatlease_client *client = client_at(bad_url(), "weights");
    CHECK(client != NULL);
    seatlease_cancel *cancel = NULL;
    CHECK_CODE(seatlease_cancel_new(&cancel), SEATLEASE_OK);
    CHECK(!seatlease_cancel_triggered(cancel));
    seatlease_cancel_trigger(cancel);
    CHECK(seatlease_cancel_triggered(cancel));
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.cancel = cancel;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-1", &ao, NULL, &error), SEATLEASE_ERR_CANCELLED);
    CHECK(strcmp(seatlease_error_server_code(error), "cancelled") == 0);
    seatlease_error_free(error);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    o.cancel = cancel;
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_ERR_CANCELLED);
    CHECK(lease == NULL);
    seatlease_cancel_free(cancel);
    seatlease_client_free(client);
}

/* Structs of every size: an older (smaller) one takes the defaults past it, a newer
 * (larger) one is taken while what this library does not know is unset. */
static void option_structs_of_other_sizes(void) {
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    seatlease_options o;
    seatlease_options_init(&o);
    CHECK(o.struct_size == sizeof o && o.timeout_seconds == 10 && o.machine_id == NULL);
    o.struct_size = offsetof(seatlease_options, verify); /* older than 0.1 even */
    o.verify = 0; /* past its size: never read */
    /* its defaults: verified, and it cannot pin a key: refused (0.3: verified by default) */
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, &error), SEATLEASE_ERR_ARGUMENT);
    CHECK(strcmp(seatlease_error_server_code(error), "pinned_keys_required") == 0);
    seatlease_error_free(error);
    error = NULL;
    o.struct_size = offsetof(seatlease_options, insecure_skip_verify); /* a 0.2 struct */
    o.insecure_skip_verify = 1; /* past its size: never read */
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, NULL), SEATLEASE_ERR_ARGUMENT);
    seatlease_options_init(&o);
    o.insecure_skip_verify = 1;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, NULL), SEATLEASE_OK);
    CHECK(client->verifier == NULL && client->options.release_timeout_seconds == 5 &&
          client->options.token_leeway_seconds == 60);
    seatlease_client_free(client);
    o.struct_size = 0;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, &error), SEATLEASE_ERR_ARGUMENT);
    CHECK(strstr(seatlease_error_message(error), "seatlease_options_init") != NULL);
    seatlease_error_free(error);
    o.struct_size = (size_t)1 << 40; /* a struct never given to its _init */
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, NULL), SEATLEASE_ERR_ARGUMENT);
    /* a program built against a newer header: 16 bytes more */
    unsigned char newer[sizeof(seatlease_options) + 16];
    seatlease_options_init_sized((seatlease_options *)(void *)newer, sizeof newer);
    seatlease_options *as_options = (seatlease_options *)(void *)newer;
    CHECK(as_options->struct_size == sizeof newer && as_options->retries == 5);
    CHECK(as_options->verify == 1 && as_options->insecure_skip_verify == 0);
    as_options->insecure_skip_verify = 1;
    CHECK(newer[sizeof newer - 1] == 0);
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", as_options, &client, NULL), SEATLEASE_OK);
    seatlease_client_free(client);
    newer[sizeof newer - 3] = 1; /* a field this library does not know, set */
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", as_options, &client, &error), SEATLEASE_ERR_ARGUMENT);
    CHECK(strstr(seatlease_error_message(error), "newer libseatlease") != NULL);
    seatlease_error_free(error);
    /* the 0.1 entry points fill exactly a 0.1 struct */
    seatlease_lease_options lo;
    memset(&lo, 0xAB, sizeof lo);
    (seatlease_lease_options_init)(&lo);
    CHECK(lo.struct_size == offsetof(seatlease_lease_options, entitlements) && lo.seats == 0);
    CHECK(*(unsigned char *)&lo.entitlements == 0xAB); /* untouched: past a 0.1 struct */
    CHECK(strcmp(seatlease_version(), SEATLEASE_VERSION) == 0);
    CHECK(seatlease_version_number() == SEATLEASE_VERSION_NUMBER && SEATLEASE_VERSION_NUMBER >= 0x000300);
    CHECK(strcmp(seatlease_version(), "0.3.0") == 0);
}

static void misuse_is_an_argument_error(void) {
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_client_new(NULL, "k", NULL, &client, &error), SEATLEASE_ERR_ARGUMENT);
    seatlease_error_free(error);
    seatlease_options insecure;
    seatlease_options_init(&insecure);
    insecure.insecure_skip_verify = 1;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &insecure, &client, NULL), SEATLEASE_OK);
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

/* -- issue 48: verified by default, bounded, read by their code, one connection -------- */

static seatlease_client *pinned_client(const char *scenario, double timeout, double release_timeout) {
    char url[512];
    snprintf(url, sizeof url, "%s/%s", bad_url(), scenario);
    seatlease_options options;
    seatlease_options_init(&options);
    options.retries = 0;
    if (timeout > 0) options.timeout_seconds = timeout;
    if (release_timeout > 0) options.release_timeout_seconds = release_timeout;
    pin_from_env(&options, "SEATLEASE_BAD_PINNED_KEY");
    seatlease_client *client = NULL;
    return seatlease_client_new(url, "sl_test", &options, &client, NULL) == SEATLEASE_OK ? client : NULL;
}

/* No pinned key and no opt-out: no client (a clear code and message); verify = 0 alone is
 * refused too, naming the opt-out; insecure_skip_verify = 1 is the only way unverified. */
static void a_client_is_verified_by_default(void) {
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", NULL, &client, &error), SEATLEASE_ERR_ARGUMENT);
    CHECK(client == NULL && strcmp(seatlease_error_server_code(error), "pinned_keys_required") == 0);
    CHECK(strstr(seatlease_error_message(error), "pinned_keys") != NULL);
    CHECK(strstr(seatlease_error_message(error), "insecure_skip_verify") != NULL);
    seatlease_error_free(error);
    error = NULL;
    seatlease_options o;
    seatlease_options_init(&o);
    CHECK(o.verify == 1 && o.insecure_skip_verify == 0 && o.proxy == NULL && o.ca_info == NULL);
    o.verify = 0;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, &error), SEATLEASE_ERR_ARGUMENT);
    CHECK(strstr(seatlease_error_message(error), "verify = 0") != NULL);
    CHECK(strstr(seatlease_error_message(error), "insecure_skip_verify") != NULL);
    seatlease_error_free(error);
    o.insecure_skip_verify = 1;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, NULL), SEATLEASE_OK);
    CHECK(client->verifier == NULL);
    seatlease_client_free(client);
    const char *key[] = {"A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"};
    o.verify = 0; /* pinned keys turn verification on, as before */
    o.insecure_skip_verify = 0;
    o.pinned_keys = key;
    o.pinned_key_count = 1;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, NULL), SEATLEASE_OK);
    CHECK(client->verifier != NULL);
    seatlease_client_free(client);
}

/* A 2xx without a token signed by a pinned key (none at all; a valid signature by a
 * foreign key) is never a seat, and the session it named is released at once. */
static void a_refused_grant_is_never_a_seat_and_is_released_at_once(void) {
    NEED_BAD_SERVER();
    static const char *const scenarios[] = {"no_token", "foreign_key"};
    for (size_t i = 0; i < 2; i++) {
        const char *scenario = scenarios[i];
        reset_calls(scenario);
        seatlease_client *client = pinned_client(scenario, 0, 2);
        CHECK(client != NULL);
        seatlease_error *error = NULL;
        seatlease_answer *answer = NULL;
        double started = now_seconds();
        seatlease_code code = seatlease_acquire(client, "lic", "pc-1", NULL, &answer, &error);
        CHECK(seatlease_code_is_token_error(code) && answer == NULL);
        seatlease_error_free(error);
        CHECK(calls_of(scenario, "acquire") == 1 && calls_of(scenario, "release") == 1);
        seatlease_lease_options o;
        seatlease_lease_options_init(&o);
        o.client_id = "pc-1";
        seatlease_lease *lease = NULL;
        code = seatlease_lease_acquire(client, "lic", &o, &lease, NULL);
        CHECK(seatlease_code_is_token_error(code) && lease == NULL);
        CHECK(calls_of(scenario, "acquire") == 2 && calls_of(scenario, "release") == 2);
        CHECK(now_seconds() - started < 5);
        seatlease_client_free(client);
    }
}

/* A signed grant whose session_id is null is an invalid_response, never a seat. */
static void a_grant_without_a_session_is_an_invalid_response(void) {
    NEED_BAD_SERVER();
    seatlease_client *client = pinned_client("session_null", 0, 0);
    CHECK(client != NULL);
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-1", NULL, NULL, &error), SEATLEASE_ERR_INVALID_RESPONSE);
    CHECK(strcmp(seatlease_error_server_code(error), "invalid_response") == 0);
    seatlease_error_free(error);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_ERR_INVALID_RESPONSE);
    CHECK(lease == NULL);
    seatlease_client_free(client);
}

/* Renewals that carry no seat counts keep the grant's (1 of 2), not 0 of 0. */
static void seat_counts_keep_their_last_known_values(void) {
    NEED_BAD_SERVER();
    reset_calls("heartbeat_no_counts");
    seatlease_client *client = pinned_client("heartbeat_no_counts", 0, 0);
    CHECK(client != NULL);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    double deadline = now_seconds() + 6;
    while (calls_of("heartbeat_no_counts", "heartbeat") < 2 && now_seconds() < deadline) {
        sleep_seconds(0.2);
    }
    sleep_seconds(0.2);
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    CHECK(calls_of("heartbeat_no_counts", "heartbeat") >= 2);
    CHECK(!info.lost && info.verified);
    CHECK(info.seats_used == 1 && info.seats_total == 2);
    CHECK(info.lease_seconds == 3 && info.heartbeat_interval_seconds == 1 && info.seats == 1);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
}

/* -- issue 48, round 2: the review's rules ------------------------------------------- */

/* Rule 1: the first /keys is a 503: the grant is good, the key fetch (with the acquire)
 * is retried, the seat held, and never released for it: a release there, then the retry
 * answered from the server's store, would hold a seat the server gave back. */
static void a_failed_key_fetch_is_retried_and_never_releases_the_grant(void) {
    NEED_BAD_SERVER();
    reset_calls("keys503once");
    book b = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", ""};
    seatlease_client *client = behaviour_client("keys503once", &b, 1, 2);
    CHECK(client != NULL);
    seatlease_lease *lease = behaviour_lease(client, "pc-1", &b);
    CHECK(lease != NULL);
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    CHECK(!info.lost && info.verified && strcmp(info.session_id, "c2Vzc2lvbi0wMDAwMDAwMDAx") == 0);
    CHECK(calls_of("keys503once", "keys") == 2);
    CHECK(calls_of("keys503once", "release") == 0);
    CHECK(said(&b, "released at once") == 0);
    CHECK_CODE(seatlease_lease_release(lease, NULL), SEATLEASE_OK);
    CHECK(calls_of("keys503once", "release") == 1); /* the client's own, once */
    seatlease_lease_free(lease);
    seatlease_client_free(client);
}

/* Rule 3: a release signed under a kid the cached keys lack refetches them, and that
 * fetch (dripped here) ends by the release timeout (1 s), not timeout_seconds (10 s). */
static void a_release_refetching_the_keys_ends_by_the_release_timeout(void) {
    NEED_BAD_SERVER();
    reset_calls("rotated_release");
    seatlease_client *client = pinned_client("rotated_release", 10, 1);
    CHECK(client != NULL);
    sl_verifier_set_min_refetch(client->verifier, 0); /* a new kid: refetch at once */
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    double started = now_seconds();
    seatlease_error *error = NULL;
    seatlease_code code = seatlease_lease_release(lease, &error);
    double took = now_seconds() - started;
    fprintf(stderr, "rotated_release: %s in %.2f s (%s)\n", seatlease_code_name(code), took,
            seatlease_error_message(error));
    seatlease_error_free(error);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
    CHECK(calls_of("rotated_release", "release") == 1 && calls_of("rotated_release", "keys") == 2);
    CHECK(code != SEATLEASE_OK && took < 1.8);
}

typedef struct {
    seatlease_client *client;
    seatlease_code code;
} pending_release;

static void *release_in_background(void *argument) {
    pending_release *p = argument;
    p->code = seatlease_release(p->client, "lic", "c2Vzc2lvbi0wMDAwMDAwMDAx", NULL, NULL);
    return NULL;
}

/* Rule 3 again: another thread's key refetch (a plain release's, bounded by its own
 * timeout, 4 s) never holds up a lease's release beyond release_timeout_seconds (1 s). */
static void a_release_never_waits_on_another_threads_key_fetch(void) {
    NEED_BAD_SERVER();
    reset_calls("rotated_release");
    seatlease_client *client = pinned_client("rotated_release", 4, 1);
    CHECK(client != NULL);
    sl_verifier_set_min_refetch(client->verifier, 0);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    pending_release p = {client, SEATLEASE_OK};
    pthread_t thread;
    pthread_create(&thread, NULL, release_in_background, &p);
    sleep_seconds(0.5); /* its key fetch is dripping now */
    double started = now_seconds();
    seatlease_code code = seatlease_lease_release(lease, NULL);
    double took = now_seconds() - started;
    pthread_join(thread, NULL);
    fprintf(stderr, "a release beside a slow key fetch: %s in %.2f s; the other %s\n",
            seatlease_code_name(code), took, seatlease_code_name(p.code));
    seatlease_lease_free(lease);
    seatlease_client_free(client);
    CHECK(code != SEATLEASE_OK && took < 1.8 && p.code != SEATLEASE_OK);
}

/* Rules 1 and 2: a signed grant without lease_expires_at, or with lease_seconds 60.5, is
 * an invalid_response, its session released at once (one release); one whose session_id
 * is "" too, but nothing is released (no session to name). */
static void a_grant_of_a_wrong_shape_is_refused_and_released_at_once(void) {
    NEED_BAD_SERVER();
    static const struct {
        const char *scenario;
        int releases;
    } shapes[] = {{"no_expiry", 1}, {"float_lease", 1}, {"empty_session", 0}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const char *scenario = shapes[i].scenario;
        reset_calls(scenario);
        seatlease_client *client = pinned_client(scenario, 0, 2);
        CHECK(client != NULL);
        seatlease_lease_options o;
        seatlease_lease_options_init(&o);
        o.client_id = "pc-1";
        seatlease_lease *lease = NULL;
        seatlease_error *error = NULL;
        seatlease_code code = seatlease_lease_acquire(client, "lic", &o, &lease, &error);
        int ok = code == SEATLEASE_ERR_INVALID_RESPONSE && lease == NULL &&
                 strcmp(seatlease_error_server_code(error), "invalid_response") == 0;
        int acquires = calls_of(scenario, "acquire"), releases = calls_of(scenario, "release");
        fprintf(stderr, "%s: %s (%s); %d acquire, %d release\n", scenario,
                seatlease_code_name(code), seatlease_error_message(error), acquires, releases);
        seatlease_error_free(error);
        seatlease_lease_free(lease);
        seatlease_client_free(client);
        CHECK(ok && acquires == 1 && releases == shapes[i].releases);
    }
}

/* Rule 2: null seat counts are absent: a seat (the counts unknown, 0). */
static void null_seat_counts_are_absent(void) {
    NEED_BAD_SERVER();
    reset_calls("null_counts");
    seatlease_client *client = pinned_client("null_counts", 0, 0);
    CHECK(client != NULL);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    CHECK(!info.lost && info.verified && info.lease_seconds == 3);
    CHECK(info.seats_used == 0 && info.seats_total == 0);
    seatlease_lease_free(lease);
    CHECK(calls_of("null_counts", "release") == 1);
    seatlease_client_free(client);
}

/* Rule 2: the shapes of a grant and of a renewal (a heartbeat's 2xx). */
static void grants_and_renewals_are_checked_for_their_shape(void) {
    static const struct {
        const char *fn, *reply;
        int ok;
    } cases[] = {
#define GRANT_ "\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"session_id\": \"s1\""
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 60}", 1},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 60, \"heartbeat_interval_seconds\": 20}", 1},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 60, \"seats_used\": null, \"seats_total\": null, \"seats\": null}", 1},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 60.5}", 0},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 0}", 0},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": \"60\"}", 0},
        {"acquire", "{" GRANT_ "}", 0},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 60, \"heartbeat_interval_seconds\": 20.5}", 0},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 60, \"heartbeat_interval_seconds\": null}", 0},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 60, \"seats_used\": 1.5}", 0},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 60, \"seats_total\": true}", 0},
        {"acquire", "{" GRANT_ ", \"lease_seconds\": 60, \"seats\": \"2\"}", 0},
        {"acquire", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"session_id\": \"\", \"lease_seconds\": 60}", 0},
        {"acquire", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"session_id\": null, \"lease_seconds\": 60}", 0},
        {"acquire", "{\"session_id\": \"s1\", \"lease_seconds\": 60}", 0},
        {"heartbeat", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\"}", 1},
        {"heartbeat", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"session_id\": null}", 1},
        {"heartbeat", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"session_id\": \"s1\", \"lease_seconds\": 60, \"heartbeat_interval_seconds\": 20}", 1},
        {"heartbeat", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"seats_used\": null}", 1},
        {"heartbeat", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"session_id\": \"s2\"}", 0},
        {"heartbeat", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"session_id\": \"\"}", 0},
        {"heartbeat", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"session_id\": 1}", 0},
        {"heartbeat", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"lease_seconds\": 60.5}", 0},
        {"heartbeat", "{\"lease_expires_at\": \"2100-01-01T00:00:00Z\", \"heartbeat_interval_seconds\": 2.5}", 0},
        {"heartbeat", "{\"session_id\": \"s1\", \"lease_seconds\": 60}", 0},
        {"heartbeat", "{\"lease_expires_at\": null}", 0},
#undef GRANT_
    };
    cJSON *request = cJSON_Parse("{\"license_id\": \"lic\", \"session_id\": \"s1\"}");
    int failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *reply = cJSON_Parse(cases[i].reply);
        seatlease_error *error = NULL;
        seatlease_code code = sl_check_shape(cases[i].fn, request, reply, 200, &error);
        int ok = cases[i].ok ? code == SEATLEASE_OK
                             : code == SEATLEASE_ERR_INVALID_RESPONSE &&
                                   strcmp(seatlease_error_server_code(error), "invalid_response") == 0;
        if (!ok) {
            fprintf(stderr, "%s %s: got %s, want %s\n", cases[i].fn, cases[i].reply,
                    seatlease_code_name(code), cases[i].ok ? "ok" : "invalid_response");
            failures++;
        }
        seatlease_error_free(error);
        cJSON_Delete(reply);
    }
    cJSON_Delete(request);
    CHECK(failures == 0);
}

/* Rule 4: a pinned key of small order (the identity, and p + 1 with the top bit set) is
 * refused at construction with a clear error; a real key is not. */
static void a_pinned_key_of_small_order_is_refused(void) {
    static const char *const small[] = {
        "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", /* the identity */
        "7v________________________________________8", /* p + 1, top bit set */
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        seatlease_options o;
        seatlease_options_init(&o);
        o.pinned_keys = &small[i];
        o.pinned_key_count = 1;
        seatlease_client *client = NULL;
        seatlease_error *error = NULL;
        CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, &error), SEATLEASE_ERR_ARGUMENT);
        CHECK(client == NULL);
        CHECK(strcmp(seatlease_error_server_code(error), "pinned_key_small_order") == 0);
        CHECK(strstr(seatlease_error_message(error), "small order") != NULL);
        seatlease_error_free(error);
    }
    unsigned char key[32] = {0};
    key[0] = 0xee;
    memset(key + 1, 0xff, 31); /* p + 1 with the top bit of its last byte set */
    CHECK(sl_key_has_small_order(key));
    key[5] = 0xfe;
    CHECK(!sl_key_has_small_order(key));
    const char *real[] = {"A6EHv_POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg"};
    seatlease_options o;
    seatlease_options_init(&o);
    o.pinned_keys = real;
    o.pinned_key_count = 1;
    seatlease_client *client = NULL;
    CHECK_CODE(seatlease_client_new("http://127.0.0.1:9", "k", &o, &client, NULL), SEATLEASE_OK);
    seatlease_client_free(client);
}

/* Only the server's license_not_found is LICENSE_NOT_FOUND: the service's own not_found
 * (a wrong base URL) and a middlebox's empty 404 are HTTP errors that name the URL. */
static void a_404_is_license_not_found_only_by_its_code(void) {
    NEED_BAD_SERVER();
    static const struct {
        const char *scenario, *server_code;
        seatlease_code want;
    } cases404[] = {
        {"not_found", "not_found", SEATLEASE_ERR_HTTP},
        {"empty_404", "http_404", SEATLEASE_ERR_HTTP},
        {"license_not_found", "license_not_found", SEATLEASE_ERR_LICENSE_NOT_FOUND},
    };
    for (size_t i = 0; i < 3; i++) {
        seatlease_client *client = pinned_client(cases404[i].scenario, 0, 0);
        CHECK(client != NULL);
        seatlease_error *error = NULL;
        CHECK_CODE(seatlease_acquire(client, "lic", "pc-1", NULL, NULL, &error), cases404[i].want);
        CHECK(seatlease_error_status(error) == 404);
        CHECK(strcmp(seatlease_error_server_code(error), cases404[i].server_code) == 0);
        if (cases404[i].want == SEATLEASE_ERR_HTTP) {
            char url[600];
            snprintf(url, sizeof url, "%s/%s/acquire", bad_url(), cases404[i].scenario);
            CHECK(strstr(seatlease_error_message(error), url) != NULL);
        }
        seatlease_error_free(error);
        seatlease_client_free(client);
    }
}

/* A 307 is never followed (the API key stays with the base URL's host): an HTTP error
 * that names the Location; the target never hears of it. */
static void a_redirect_is_an_error_naming_its_location(void) {
    NEED_BAD_SERVER();
    reset_calls("signed");
    seatlease_client *client = pinned_client("redirect", 0, 0);
    CHECK(client != NULL);
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-1", NULL, NULL, &error), SEATLEASE_ERR_HTTP);
    char location[600];
    snprintf(location, sizeof location, "%s/signed/acquire", bad_url());
    CHECK(seatlease_error_status(error) == 307);
    CHECK(strcmp(seatlease_error_server_code(error), "redirected") == 0);
    CHECK(strstr(seatlease_error_message(error), location) != NULL);
    seatlease_error_free(error);
    CHECK(calls_of("signed", "acquire") == 0);
    seatlease_client_free(client);
}

/* Answers dripped a byte a second after their headers: each exchange ends by its
 * timeout (connect, headers and body), a release by release_timeout. */
static void a_dripped_answer_ends_by_the_timeout(void) {
    NEED_BAD_SERVER();
    seatlease_client *client = pinned_client("drip", 2, 0);
    CHECK(client != NULL);
    seatlease_error *error = NULL;
    double started = now_seconds();
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-1", NULL, NULL, &error), SEATLEASE_ERR_BACKEND_UNAVAILABLE);
    double took = now_seconds() - started;
    CHECK(took >= 1.5 && took < 4);
    seatlease_error_free(error);
    seatlease_client_free(client);

    client = pinned_client("drip_heartbeat", 2, 0);
    CHECK(client != NULL);
    error = NULL;
    started = now_seconds();
    CHECK_CODE(seatlease_heartbeat(client, "lic", "c2Vzc2lvbi0wMDAwMDAwMDAx", NULL, &error),
               SEATLEASE_ERR_BACKEND_UNAVAILABLE);
    took = now_seconds() - started;
    CHECK(took >= 1.5 && took < 4);
    seatlease_error_free(error);
    seatlease_client_free(client);

    client = pinned_client("drip_release", 30, 2);
    CHECK(client != NULL);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    started = now_seconds();
    error = NULL;
    seatlease_code code = seatlease_lease_release(lease, &error);
    took = now_seconds() - started;
    seatlease_error_free(error);
    seatlease_lease_free(lease);
    CHECK(code != SEATLEASE_OK && took < 4);
    CHECK(now_seconds() - started < 4.5);
    seatlease_client_free(client);
}

/* A heartbeat dripping past the lease's deadline marks the seat lost (unreachable) by
 * that deadline, not by the client's timeout (30 s here) nor the stall's end. The
 * scenario's lease is 60 s: its deadline is moved 2 s ahead. */
static int lost_unreachable(void *context) {
    book *b = context;
    pthread_mutex_lock(&b->mu);
    int lost = strstr(b->reasons, "unreachable") != NULL;
    pthread_mutex_unlock(&b->mu);
    return lost;
}

static void a_stalled_heartbeat_loses_the_seat_by_its_deadline(void) {
    NEED_BAD_SERVER();
    book b = {PTHREAD_MUTEX_INITIALIZER, 0, 0, "", ""};
    seatlease_client *client = pinned_client("drip_heartbeat", 30, 2);
    CHECK(client != NULL);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    o.on_lost = book_lost;
    o.user_data = &b;
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    double started = now_seconds();
    sl_lease_deadline_in(lease, 2);
    sl_lease_heartbeat_now(lease);
    int lost = eventually(6, lost_unreachable, &b);
    double took = now_seconds() - started;
    seatlease_lease_free(lease);
    seatlease_client_free(client);
    CHECK(lost && took >= 1.5 && took < 6);
}

/* One connection per client: a lease's grant, the JWKS, its heartbeats, plain calls and
 * the release all go over one kept-alive connection (tests/test_client_c.py counts the
 * connections its server accepted). */
static void one_connection_reused_per_client(void) {
    NEED_BAD_SERVER();
    seatlease_client *client = pinned_client("signed", 0, 0);
    CHECK(client != NULL);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_OK);
    sleep_seconds(2.5); /* heartbeats every second */
    CHECK_CODE(seatlease_lease_release(lease, NULL), SEATLEASE_OK);
    seatlease_lease_free(lease);
    /* A plain call after the lease's thread has ended: one thread at a time, so the same
     * connection (a plain call beside a heartbeat in flight would rightly take a second). */
    seatlease_answer *answer = NULL;
    seatlease_code code = seatlease_heartbeat(client, "lic", "c2Vzc2lvbi0wMDAwMDAwMDAx", &answer, NULL);
    seatlease_answer_free(answer);
    int idle = client->idle_count;
    seatlease_client_free(client); /* before any CHECK: a failed one frees nothing after it */
    CHECK_CODE(code, SEATLEASE_OK);
    CHECK(idle == 1);
}

/* proxy: every request goes through it (a name that does not resolve reaches the bad
 * server as the proxy); ca_info: the bundle libcurl loads for https (a missing one fails
 * the exchange, saying so). */
static void the_proxy_and_ca_options_reach_libcurl(void) {
    NEED_BAD_SERVER();
    seatlease_options options;
    seatlease_options_init(&options);
    options.retries = 0;
    pin_from_env(&options, "SEATLEASE_BAD_PINNED_KEY");
    options.proxy = bad_url();
    seatlease_client *client = NULL;
    CHECK_CODE(seatlease_client_new("http://seatlease.invalid/weights", "sl_test", &options, &client, NULL), SEATLEASE_OK);
    seatlease_answer *answer = NULL;
    seatlease_error *error = NULL;
    seatlease_code code = seatlease_acquire(client, "lic", "pc-1", NULL, &answer, &error);
    if (code != SEATLEASE_OK) {
        fprintf(stderr, "through the proxy: %s\n", seatlease_error_message(error));
    }
    seatlease_error_free(error);
    CHECK_CODE(code, SEATLEASE_OK);
    CHECK(strcmp(seatlease_answer_session_id(answer), "c2Vzc2lvbi0wMDAwMDAwMDAx") == 0);
    seatlease_answer_free(answer);
    seatlease_client_free(client);

    seatlease_options_init(&options);
    options.retries = 0;
    pin_from_env(&options, "SEATLEASE_BAD_PINNED_KEY");
    options.ca_info = "/nonexistent/seatlease-ca.pem";
    char url[512];
    snprintf(url, sizeof url, "https://%s/weights", strstr(bad_url(), "://") + 3);
    CHECK_CODE(seatlease_client_new(url, "sl_test", &options, &client, NULL), SEATLEASE_OK);
    error = NULL;
    CHECK_CODE(seatlease_acquire(client, "lic", "pc-1", NULL, NULL, &error), SEATLEASE_ERR_BACKEND_UNAVAILABLE);
    fprintf(stderr, "a missing CA bundle: %s\n", seatlease_error_message(error));
    CHECK(strstr(seatlease_error_message(error), "CA") != NULL);
    seatlease_error_free(error);
    seatlease_client_free(client);
}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        {"every_bad_answer_is_a_typed_error", every_bad_answer_is_a_typed_error},
        {"weights_are_sent_and_read", weights_are_sent_and_read},
        {"misuse_is_an_argument_error", misuse_is_an_argument_error},
        {"a_retry_after_never_outlasts_the_max_backoff", a_retry_after_never_outlasts_the_max_backoff},
        {"a_heartbeat_of_an_unknown_session_is_recovered_by_its_token", a_heartbeat_of_an_unknown_session_is_recovered_by_its_token},
        {"a_seat_an_operator_freed_is_lost_as_revoked_without_its_token", a_seat_an_operator_freed_is_lost_as_revoked_without_its_token},
        {"an_ended_term_ends_the_seat_and_is_said_once", an_ended_term_ends_the_seat_and_is_said_once},
        {"a_suspended_license_keeps_its_held_seats", a_suspended_license_keeps_its_held_seats},
        {"a_client_freed_before_its_leases_goes_with_the_last", a_client_freed_before_its_leases_goes_with_the_last},
        {"a_triggered_cancel_ends_a_call_before_it_starts", a_triggered_cancel_ends_a_call_before_it_starts},
        {"option_structs_of_other_sizes", option_structs_of_other_sizes},
        {"a_client_is_verified_by_default", a_client_is_verified_by_default},
        {"a_refused_grant_is_never_a_seat_and_is_released_at_once", a_refused_grant_is_never_a_seat_and_is_released_at_once},
        {"a_grant_without_a_session_is_an_invalid_response", a_grant_without_a_session_is_an_invalid_response},
        {"seat_counts_keep_their_last_known_values", seat_counts_keep_their_last_known_values},
        {"a_404_is_license_not_found_only_by_its_code", a_404_is_license_not_found_only_by_its_code},
        {"a_redirect_is_an_error_naming_its_location", a_redirect_is_an_error_naming_its_location},
        {"a_dripped_answer_ends_by_the_timeout", a_dripped_answer_ends_by_the_timeout},
        {"a_stalled_heartbeat_loses_the_seat_by_its_deadline", a_stalled_heartbeat_loses_the_seat_by_its_deadline},
        {"one_connection_reused_per_client", one_connection_reused_per_client},
        {"the_proxy_and_ca_options_reach_libcurl", the_proxy_and_ca_options_reach_libcurl},
        {"a_failed_key_fetch_is_retried_and_never_releases_the_grant", a_failed_key_fetch_is_retried_and_never_releases_the_grant},
        {"a_release_refetching_the_keys_ends_by_the_release_timeout", a_release_refetching_the_keys_ends_by_the_release_timeout},
        {"a_release_never_waits_on_another_threads_key_fetch", a_release_never_waits_on_another_threads_key_fetch},
        {"a_grant_of_a_wrong_shape_is_refused_and_released_at_once", a_grant_of_a_wrong_shape_is_refused_and_released_at_once},
        {"null_seat_counts_are_absent", null_seat_counts_are_absent},
        {"grants_and_renewals_are_checked_for_their_shape", grants_and_renewals_are_checked_for_their_shape},
        {"a_pinned_key_of_small_order_is_refused", a_pinned_key_of_small_order_is_refused},
    };
    return run_tests("bad_answers", tests, sizeof tests / sizeof tests[0], argc, argv);
}
