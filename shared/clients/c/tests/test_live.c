/* libseatlease against the real served functions (acquire, heartbeat, release, keys on
 * real Redis and PostgreSQL), started by tests/test_client_c.py, which passes
 * SEATLEASE_TEST_URL and SEATLEASE_TEST_API_KEY; its /_test/ routes create licenses,
 * flush Redis, revoke a lease, stall or fail the next request, and show the request log
 * and live seats. Without them these tests skip (the pytest run fails on any skip). The
 * same tests as the Go client's live_test.go. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NEED_STACK()                                                                      \
    do {                                                                                  \
        if (served_url() == NULL || served_key() == NULL)                                 \
            SKIP("SEATLEASE_TEST_URL not set: run through pytest tests/test_client_c.py"); \
    } while (0)

static seatlease_client *client_with(const char *url, const char *key, int verify,
                                     double timeout, int retries, double backoff,
                                     double max_wait_poll) {
    seatlease_options options;
    seatlease_options_init(&options);
    if (verify) {
        pin_from_env(&options, "SEATLEASE_TEST_PINNED_KEYS"); /* the stack's keys */
    } else {
        options.insecure_skip_verify = 1; /* these tests are about other things */
    }
    options.tenant_id = verify ? "acme" : NULL;
    if (timeout > 0) options.timeout_seconds = timeout;
    if (retries >= 0) options.retries = retries;
    if (backoff > 0) options.backoff_seconds = backoff;
    if (max_wait_poll > 0) options.max_wait_poll_seconds = max_wait_poll;
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    if (seatlease_client_new(url, key, &options, &client, &error) != SEATLEASE_OK) {
        fprintf(stderr, "client: %s\n", seatlease_error_message(error));
        seatlease_error_free(error);
        return NULL;
    }
    return client;
}

static seatlease_client *served_client(int verify, double backoff) {
    return client_with(served_url(), served_key(), verify, 0, -1, backoff, 0);
}

typedef struct {
    pthread_mutex_t mu;
    int lost, regained;
    char reasons[256];
} watcher;

static void on_lost(seatlease_lease *lease, const char *reason, void *user_data) {
    (void)lease;
    watcher *w = user_data;
    pthread_mutex_lock(&w->mu);
    w->lost++;
    strncat(w->reasons, reason, sizeof w->reasons - strlen(w->reasons) - 2);
    strcat(w->reasons, ",");
    pthread_mutex_unlock(&w->mu);
}

static void on_regained(seatlease_lease *lease, void *user_data) {
    (void)lease;
    watcher *w = user_data;
    pthread_mutex_lock(&w->mu);
    w->regained++;
    pthread_mutex_unlock(&w->mu);
}

static int regained_once(void *context) {
    watcher *w = context;
    pthread_mutex_lock(&w->mu);
    int done = w->regained == 1;
    pthread_mutex_unlock(&w->mu);
    return done;
}

static int lease_lost(void *context) {
    seatlease_lease_info info;
    seatlease_lease_get_info(context, &info);
    return info.lost;
}

/* How many heartbeats logged after the first `since` were answered 410. */
static int heartbeats_refused_since(int since) {
    cJSON *log = requests("/heartbeat");
    int refused = 0;
    for (int i = since; i < cJSON_GetArraySize(log); i++) {
        refused += cJSON_GetObjectItem(cJSON_GetArrayItem(log, i), "status")->valueint == 410;
    }
    cJSON_Delete(log);
    return refused;
}

/* A heartbeat answered 410 among those logged after the first *context. */
static int a_heartbeat_refused_since(void *context) {
    return heartbeats_refused_since(*(int *)context) > 0;
}

static int only_live_seat(const char *license_id, const char *session_id, const char *client_id) {
    cJSON *seats = live(license_id);
    int ok = cJSON_GetArraySize(seats) == 1;
    if (ok) {
        cJSON *seat = cJSON_GetArrayItem(seats, 0);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(seat, "session_id");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(seat, "client_id");
        ok = cJSON_IsString(s) && strcmp(s->valuestring, session_id) == 0 &&
             (client_id == NULL || (cJSON_IsString(c) && strcmp(c->valuestring, client_id) == 0));
    }
    cJSON_Delete(seats);
    return ok;
}

static void lease_life_past_three_leases_a_redis_flush_and_a_revoke(void) {
    NEED_STACK();
    make_license("c-life", "{\"seats\": 2, \"lease_seconds\": 2}");
    seatlease_client *client = served_client(1, 0.05);
    CHECK(client != NULL);
    watcher w = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "ws-1";
    o.metadata_json = "{\"user\": \"ann\"}";
    o.on_lost = on_lost;
    o.on_regained = on_regained;
    o.user_data = &w;
    seatlease_lease *lease = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-life", &o, &lease, &error), SEATLEASE_OK);
    seatlease_lease_info first, now;
    seatlease_lease_get_info(lease, &first);
    char *token = seatlease_lease_token(lease);
    CHECK(token != NULL && strlen(token) > 40);
    seatlease_string_free(token);
    CHECK(first.session_id[0] && first.verified && first.lease_seconds == 2 &&
          first.seats_used == 1 && first.seats_total == 2 && !first.lost);
    cJSON *before = requests("/heartbeat");
    int beats_before = cJSON_GetArraySize(before);
    cJSON_Delete(before);
    sleep_seconds(6.5); /* three and a quarter leases of 2 s */
    seatlease_lease_get_info(lease, &now);
    CHECK(only_live_seat("c-life", first.session_id, "ws-1"));
    CHECK(strcmp(now.session_id, first.session_id) == 0 && !now.lost &&
          now.expires_at - first.expires_at >= 4);
    cJSON *after = requests("/heartbeat");
    int beats = cJSON_GetArraySize(after) - beats_before;
    cJSON_Delete(after);
    CHECK(beats >= 8 && beats <= 14);

    /* An operator revokes the lease and another client takes both seats before the next
     * heartbeat: that heartbeat answers 410 "revoked", the seat is lost with that reason
     * (never retried with its token: the server refuses a revoked session's token), asked
     * for again, and regained once the other lets go. */
    cJSON *log = requests("/heartbeat");
    int before_revoke = cJSON_GetArraySize(log);
    cJSON_Delete(log);
    char revoke[256];
    snprintf(revoke, sizeof revoke, "{\"license_id\": \"c-life\", \"session_id\": \"%s\"}",
             first.session_id);
    cJSON_Delete(control("revoke", revoke));
    seatlease_acquire_options both;
    seatlease_acquire_options_init(&both);
    both.seats = 2;
    seatlease_answer *other = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-life", "ws-2", &both, &other, NULL), SEATLEASE_OK);
    CHECK(eventually(5, lease_lost, lease));
    sleep_seconds(0.7); /* the re-acquires are answered 409: still lost */
    pthread_mutex_lock(&w.mu);
    int lost = w.lost, regained = w.regained;
    pthread_mutex_unlock(&w.mu);
    CHECK(lost == 1 && regained == 0 && lease_lost(lease));
    seatlease_lease_get_info(lease, &now);
    CHECK(strcmp(now.lost_reason, "revoked") == 0);
    CHECK(heartbeats_refused_since(before_revoke) == 1); /* no retry with the token */
    CHECK_CODE(seatlease_release(client, "c-life", seatlease_answer_session_id(other), NULL, NULL), SEATLEASE_OK);
    seatlease_answer_free(other);
    CHECK(eventually(5, regained_once, &w));
    seatlease_lease_info again;
    seatlease_lease_get_info(lease, &again);
    CHECK(!again.lost && strcmp(again.session_id, first.session_id) != 0);
    CHECK(only_live_seat("c-life", again.session_id, "ws-1"));

    /* Redis forgets every seat (a region lost): the next heartbeat answers 410 "unknown",
     * its one retry with the lease's token (a fresh request_id) re-admits the session: the
     * same seat, no on_lost. */
    log = requests("/heartbeat");
    int before_flush = cJSON_GetArraySize(log);
    cJSON_Delete(log);
    cJSON_Delete(control("flush", "{}"));
    CHECK(eventually(5, a_heartbeat_refused_since, &before_flush));
    sleep_seconds(1.5); /* the retry re-admitted it; later heartbeats renew it */
    log = requests("/heartbeat");
    int n = cJSON_GetArraySize(log), refused_at = -1, renewed_after = 1;
    for (int i = before_flush; i < n; i++) {
        int status = cJSON_GetObjectItem(cJSON_GetArrayItem(log, i), "status")->valueint;
        if (refused_at < 0 && status == 410) {
            refused_at = i;
        } else if (refused_at >= 0) {
            renewed_after &= status == 200;
        }
    }
    int fresh_id = refused_at >= 0 && refused_at + 1 < n &&
                   strcmp(cJSON_GetObjectItem(cJSON_GetArrayItem(log, refused_at), "request_id")->valuestring,
                          cJSON_GetObjectItem(cJSON_GetArrayItem(log, refused_at + 1), "request_id")->valuestring) != 0;
    cJSON_Delete(log);
    CHECK(refused_at >= 0 && renewed_after && fresh_id);
    pthread_mutex_lock(&w.mu);
    int unchanged = w.lost == 1 && w.regained == 1 && strcmp(w.reasons, "revoked,") == 0;
    pthread_mutex_unlock(&w.mu);
    CHECK(unchanged);
    seatlease_lease_info third;
    seatlease_lease_get_info(lease, &third);
    CHECK(!third.lost && strcmp(third.session_id, again.session_id) == 0);
    CHECK(only_live_seat("c-life", third.session_id, "ws-1"));
    CHECK_CODE(seatlease_lease_release(lease, &error), SEATLEASE_OK);
    CHECK_CODE(seatlease_lease_release(lease, &error), SEATLEASE_OK); /* once */
    seatlease_lease_get_info(lease, &third);
    CHECK(third.released && live_count("c-life") == 0);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
}

static void a_stalled_server_answers_the_retry_from_the_first_run(void) {
    NEED_STACK();
    make_license("c-stall", "{\"seats\": 2, \"lease_seconds\": 60}");
    seatlease_client *client = client_with(served_url(), served_key(), 1, 0.5, -1, 0.05, 0);
    CHECK(client != NULL);
    cJSON_Delete(control("stall", "{\"path\": \"/acquire\", \"seconds\": 1.5}"));
    seatlease_answer *answer = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-stall", "pc-1", NULL, &answer, &error), SEATLEASE_OK);
    cJSON *acquires = requests("/acquire");
    int n = cJSON_GetArraySize(acquires);
    const char *first_id = cJSON_GetObjectItem(cJSON_GetArrayItem(acquires, n - 2), "request_id")->valuestring;
    const char *second_id = cJSON_GetObjectItem(cJSON_GetArrayItem(acquires, n - 1), "request_id")->valuestring;
    int first_status = cJSON_GetObjectItem(cJSON_GetArrayItem(acquires, n - 2), "status")->valueint;
    int second_status = cJSON_GetObjectItem(cJSON_GetArrayItem(acquires, n - 1), "status")->valueint;
    int same_id = strcmp(first_id, second_id) == 0 && strlen(first_id) == 32;
    cJSON_Delete(acquires);
    CHECK(same_id);
    /* both attempts were answered 201 (created): the retry was told what the first did */
    CHECK(first_status == 201 && second_status == 201);
    CHECK(seatlease_answer_seats_used(answer) == 1);
    CHECK(only_live_seat("c-stall", seatlease_answer_session_id(answer), "pc-1"));
    cJSON_Delete(control("stall", "{\"path\": \"/release\", \"seconds\": 1.5}"));
    seatlease_answer *released = NULL;
    CHECK_CODE(seatlease_release(client, "c-stall", seatlease_answer_session_id(answer), &released, &error),
               SEATLEASE_OK);
    CHECK(seatlease_answer_released(released) && seatlease_answer_seats_used(released) == 0);
    CHECK(strlen(seatlease_answer_token(released)) > 40); /* a verified release token */
    seatlease_answer_free(released);
    seatlease_answer_free(answer);
    seatlease_client_free(client);
}

static void a_retry_of_your_own_with_the_same_request_id_takes_one_seat(void) {
    NEED_STACK();
    make_license("c-once", "{\"seats\": 3, \"lease_seconds\": 60}");
    /* No retries of the client's own, a timeout shorter than the stalled answer: the
     * product's retry carries the request_id of the acquire that timed out. */
    seatlease_client *client = client_with(served_url(), served_key(), 1, 0.5, 0, 0.05, 0);
    CHECK(client != NULL);
    seatlease_acquire_options o;
    seatlease_acquire_options_init(&o);
    o.request_id = "c-once-request-0001";
    o.user = "ann";
    o.host = "pc-ann";
    cJSON_Delete(control("stall", "{\"path\": \"/acquire\", \"seconds\": 1.5}"));
    seatlease_answer *answer = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-once", "pc-1", &o, &answer, &error),
               SEATLEASE_ERR_BACKEND_UNAVAILABLE);
    CHECK(seatlease_error_status(error) == 0 && strcmp(seatlease_error_server_code(error), "network_error") == 0);
    seatlease_error_free(error);
    CHECK(answer == NULL);
    CHECK(live_count("c-once") == 1); /* the first attempt took the seat */
    CHECK_CODE(seatlease_acquire(client, "c-once", "pc-1", &o, &answer, &error), SEATLEASE_OK);
    CHECK(seatlease_answer_status(answer) == 201 && seatlease_answer_seats_used(answer) == 1);
    CHECK(only_live_seat("c-once", seatlease_answer_session_id(answer), "pc-1"));
    cJSON *acquires = requests("/acquire");
    int n = cJSON_GetArraySize(acquires);
    int statuses = cJSON_GetObjectItem(cJSON_GetArrayItem(acquires, n - 1), "status")->valueint;
    const char *id = cJSON_GetObjectItem(cJSON_GetArrayItem(acquires, n - 1), "request_id")->valuestring;
    int same = strcmp(id, "c-once-request-0001") == 0;
    cJSON_Delete(acquires);
    CHECK(statuses == 201 && same);
    CHECK_CODE(seatlease_release(client, "c-once", seatlease_answer_session_id(answer), NULL, NULL), SEATLEASE_OK);
    seatlease_answer_free(answer);
    seatlease_client_free(client);
}

static void typed_errors(void) {
    NEED_STACK();
    make_license("c-full", "{\"seats\": 1, \"lease_seconds\": 60}");
    seatlease_client *wrong = client_with(served_url(), "sl_wrong_key", 0, 0, -1, 0.01, 0);
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(wrong, "c-full", "a", NULL, NULL, &error), SEATLEASE_ERR_UNAUTHENTICATED);
    CHECK(seatlease_error_status(error) == 401 && strstr(seatlease_error_message(error), served_key()) == NULL);
    CHECK(strcmp(seatlease_error_server_code(error), "unauthenticated") == 0);
    seatlease_error_free(error);
    seatlease_client_free(wrong);
    seatlease_client *client = served_client(0, 0.01);
    CHECK_CODE(seatlease_acquire(client, "no-such-license", "a", NULL, NULL, &error), SEATLEASE_ERR_LICENSE_NOT_FOUND);
    CHECK(seatlease_error_status(error) == 404);
    seatlease_error_free(error);
    seatlease_acquire_options bad;
    seatlease_acquire_options_init(&bad);
    bad.lease_seconds = 999999;
    CHECK_CODE(seatlease_acquire(client, "c-full", "a", &bad, NULL, &error), SEATLEASE_ERR_INVALID_REQUEST);
    CHECK(seatlease_error_status(error) == 400);
    seatlease_error_free(error);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "a";
    seatlease_lease *held = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-full", &o, &held, NULL), SEATLEASE_OK);
    CHECK_CODE(seatlease_acquire(client, "c-full", "b", NULL, NULL, &error), SEATLEASE_ERR_NO_SEATS_AVAILABLE);
    CHECK(seatlease_error_status(error) == 409 && seatlease_error_seats_used(error) == 1 &&
          seatlease_error_seats_total(error) == 1 && seatlease_error_retry_after_seconds(error) >= 1);
    seatlease_error_free(error);
    seatlease_lease_info info;
    seatlease_lease_get_info(held, &info);
    seatlease_answer *gone = NULL;
    CHECK_CODE(seatlease_heartbeat(client, "c-full", "no-such-session-00000000", &gone, &error),
               SEATLEASE_ERR_SESSION_EXPIRED);
    CHECK(seatlease_error_status(error) == 410 && strcmp(seatlease_error_reason(error), "unknown") == 0);
    seatlease_error_free(error);
    double started = now_seconds();
    seatlease_lease_options waiting = o;
    waiting.client_id = "b";
    waiting.wait = 1;
    waiting.wait_timeout_seconds = 0.3;
    seatlease_lease *never = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-full", &waiting, &never, &error), SEATLEASE_ERR_SEAT_WAIT_TIMEOUT);
    CHECK(never == NULL && strcmp(seatlease_error_server_code(error), "seat_wait_timeout") == 0);
    CHECK(now_seconds() - started < 3);
    seatlease_error_free(error);
    CHECK_CODE(seatlease_lease_release(held, NULL), SEATLEASE_OK);
    CHECK(live_count("c-full") == 0);
    seatlease_lease_free(held);
    seatlease_client_free(client);
}

static void a_500_is_an_http_error_not_retried(void) {
    NEED_STACK();
    make_license("c-500", "{\"seats\": 1}");
    seatlease_client *client = served_client(0, 0.01);
    cJSON *log = requests("/acquire");
    int before = cJSON_GetArraySize(log);
    cJSON_Delete(log);
    cJSON_Delete(control("fail", "{\"path\": \"/acquire\", \"status\": 500}"));
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-500", "a", NULL, NULL, &error), SEATLEASE_ERR_HTTP);
    CHECK(seatlease_error_status(error) == 500 && strcmp(seatlease_error_server_code(error), "internal") == 0);
    seatlease_error_free(error);
    log = requests("/acquire");
    int after = cJSON_GetArraySize(log);
    cJSON_Delete(log);
    CHECK(after == before + 1);
    seatlease_client_free(client);
}

static void a_503_with_retry_after_is_retried_no_sooner_with_the_same_request_id(void) {
    NEED_STACK();
    make_license("c-503", "{\"seats\": 1}");
    seatlease_client *client = served_client(0, 0.01);
    cJSON_Delete(control("fail", "{\"path\": \"/acquire\", \"status\": 503, \"retry_after\": 1}"));
    double started = now_seconds();
    seatlease_answer *answer = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-503", "a", NULL, &answer, NULL), SEATLEASE_OK);
    CHECK(now_seconds() - started >= 1.0);
    CHECK(seatlease_answer_seats_used(answer) == 1);
    cJSON *acquires = requests("/acquire");
    int n = cJSON_GetArraySize(acquires);
    cJSON *failed = cJSON_GetArrayItem(acquires, n - 2), *served = cJSON_GetArrayItem(acquires, n - 1);
    int ok = cJSON_GetObjectItem(failed, "status")->valueint == 503 &&
             cJSON_GetObjectItem(served, "status")->valueint == 201 &&
             strcmp(cJSON_GetObjectItem(failed, "request_id")->valuestring,
                    cJSON_GetObjectItem(served, "request_id")->valuestring) == 0;
    cJSON_Delete(acquires);
    CHECK(ok);
    seatlease_answer_free(answer);
    seatlease_client_free(client);
}

typedef struct {
    seatlease_lease *lease;
    double delay;
    seatlease_code code;
} delayed_release;

static void *release_later(void *argument) {
    delayed_release *r = argument;
    sleep_seconds(r->delay);
    r->code = seatlease_lease_release(r->lease, NULL);
    return NULL;
}

static void waiting_gets_the_seat_released_meanwhile(void) {
    NEED_STACK();
    make_license("c-wait", "{\"seats\": 1, \"lease_seconds\": 60}");
    /* Retry-After is ~60 s here: max_wait_poll paces the wait */
    seatlease_client *client = client_with(served_url(), served_key(), 0, 0, -1, 0, 0.3);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "a";
    seatlease_lease *first = NULL, *second = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-wait", &o, &first, NULL), SEATLEASE_OK);
    delayed_release r = {first, 0.5, SEATLEASE_ERR_ARGUMENT};
    pthread_t thread;
    pthread_create(&thread, NULL, release_later, &r);
    double started = now_seconds();
    o.client_id = "b";
    o.wait = 1;
    o.wait_timeout_seconds = 10;
    seatlease_code code = seatlease_lease_acquire(client, "c-wait", &o, &second, NULL);
    pthread_join(thread, NULL);
    CHECK_CODE(code, SEATLEASE_OK);
    CHECK_CODE(r.code, SEATLEASE_OK);
    CHECK(now_seconds() - started >= 0.45);
    seatlease_lease_info info;
    seatlease_lease_get_info(second, &info);
    CHECK(only_live_seat("c-wait", info.session_id, "b"));
    seatlease_lease_free(second);
    seatlease_lease_free(first);
    CHECK(live_count("c-wait") == 0);
    seatlease_client_free(client);
}

static void an_unreachable_url_is_backend_unavailable(void) {
    NEED_STACK();
    /* port 9 (discard) on loopback: nothing listens there in the test environment */
    seatlease_client *client = client_with("http://127.0.0.1:9", served_key(), 0, 0, 2, 0.01, 0);
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "lic", "a", NULL, NULL, &error), SEATLEASE_ERR_BACKEND_UNAVAILABLE);
    CHECK(seatlease_error_status(error) == 0 && strcmp(seatlease_error_server_code(error), "network_error") == 0);
    CHECK(strstr(seatlease_error_message(error), served_key()) == NULL);
    seatlease_error_free(error);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "a";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "lic", &o, &lease, NULL), SEATLEASE_ERR_BACKEND_UNAVAILABLE);
    CHECK(lease == NULL);
    seatlease_client_free(client);
}

typedef struct {
    atomic_int called;
    seatlease_code code;
} closer;

static void release_when_lost(seatlease_lease *lease, const char *reason, void *user_data) {
    (void)reason;
    closer *c = user_data;
    c->code = seatlease_lease_release(lease, NULL);
    atomic_store(&c->called, 1);
}

static int closer_called(void *context) { return atomic_load(&((closer *)context)->called); }

static void release_from_the_on_lost_callback(void) {
    NEED_STACK();
    make_license("c-callback", "{\"seats\": 1, \"lease_seconds\": 2}");
    seatlease_client *client = served_client(0, 0.05);
    closer c = {0, SEATLEASE_ERR_ARGUMENT};
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "ws-1";
    o.on_lost = release_when_lost;
    o.user_data = &c;
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-callback", &o, &lease, NULL), SEATLEASE_OK);
    cJSON_Delete(control("outage", "{\"seconds\": 3}")); /* longer than the lease: lost */
    CHECK(eventually(5, closer_called, &c));
    CHECK_CODE(c.code, SEATLEASE_OK);
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    CHECK(info.released && info.lost);
    sleep_seconds(2.5); /* no re-acquire after the release, once the outage is over */
    CHECK(live_count("c-callback") == 0);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
}

static int lease_held(void *context) { return !lease_lost(context); }

static void an_outage_longer_than_the_lease_marks_it_lost_then_regains(void) {
    NEED_STACK();
    make_license("c-outage", "{\"seats\": 1, \"lease_seconds\": 2}");
    seatlease_client *client = served_client(0, 0.05);
    watcher w = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "ws-1";
    o.on_lost = on_lost;
    o.on_regained = on_regained;
    o.user_data = &w;
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-outage", &o, &lease, NULL), SEATLEASE_OK);
    seatlease_lease_info old, info;
    seatlease_lease_get_info(lease, &old);
    cJSON_Delete(control("outage", "{\"seconds\": 3}"));
    CHECK(eventually(3, lease_lost, lease));
    seatlease_lease_get_info(lease, &info);
    CHECK(strcmp(info.lost_reason, "unreachable") == 0);
    CHECK(eventually(5, lease_held, lease));
    pthread_mutex_lock(&w.mu);
    int ok = strcmp(w.reasons, "unreachable,") == 0 && w.regained == 1;
    pthread_mutex_unlock(&w.mu);
    CHECK(ok);
    seatlease_lease_get_info(lease, &info);
    CHECK(strcmp(info.session_id, old.session_id) != 0);
    CHECK(only_live_seat("c-outage", info.session_id, "ws-1"));
    seatlease_lease_free(lease);
    seatlease_client_free(client);
}

/* -- the wait queue ------------------------------------------------------------------------ */

static int queue_length(const char *license_id) {
    char action[256];
    snprintf(action, sizeof action, "queue?license_id=%s", license_id);
    cJSON *queue = control(action, NULL);
    int n = cJSON_GetArraySize(queue);
    cJSON_Delete(queue);
    return n;
}

static void queued_ids(const char *license_id, char *out, size_t size) {
    char action[256];
    snprintf(action, sizeof action, "queue?license_id=%s", license_id);
    cJSON *queue = control(action, NULL), *ticket;
    out[0] = '\0';
    cJSON_ArrayForEach(ticket, queue) {
        const char *id = cJSON_GetObjectItem(ticket, "client_id")->valuestring;
        if (out[0]) strncat(out, ",", size - strlen(out) - 1);
        strncat(out, id, size - strlen(out) - 1);
    }
    cJSON_Delete(queue);
}

typedef struct {
    seatlease_client *client;
    const char *name;
    char user[32], host[32];
    seatlease_lease *lease;
    seatlease_code code;
    pthread_mutex_t *mu;
    char *order;
} waiter;

static void *wait_in_line(void *argument) {
    waiter *w = argument;
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = w->name;
    o.user = w->user;
    o.host = w->host;
    o.wait = 1;
    o.wait_timeout_seconds = 30;
    w->code = seatlease_lease_acquire(w->client, "c-queue", &o, &w->lease, NULL);
    pthread_mutex_lock(w->mu);
    if (w->order[0]) strcat(w->order, ",");
    strcat(w->order, w->name);
    pthread_mutex_unlock(w->mu);
    return NULL;
}

typedef struct {
    const char *license_id;
    int n;
} queue_wait;

static int queue_has(void *context) {
    queue_wait *q = context;
    return queue_length(q->license_id) == q->n;
}

static void queued_waiters_get_the_seat_in_the_order_they_joined(void) {
    NEED_STACK();
    /* a hold of 3 s: the queue's retry_after_seconds is at most a third of it */
    make_license("c-queue", "{\"seats\": 1, \"lease_seconds\": 30, \"policy\": {\"queue\": true, \"queue_hold_seconds\": 3}}");
    seatlease_client *client = served_client(1, 0); /* a 202 carries no token */
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.user = "hal";
    seatlease_answer *holder = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-queue", "holder", &ao, &holder, NULL), SEATLEASE_OK);
    static const char *names[] = {"w1", "w2", "w3"};
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    char order[64] = "";
    waiter waiters[3];
    pthread_t threads[3];
    for (int i = 0; i < 3; i++) {
        waiters[i] = (waiter){client, names[i], "", "", NULL, SEATLEASE_ERR_ARGUMENT, &mu, order};
        snprintf(waiters[i].user, sizeof waiters[i].user, "user-%s", names[i]);
        snprintf(waiters[i].host, sizeof waiters[i].host, "pc-%s", names[i]);
        pthread_create(&threads[i], NULL, wait_in_line, &waiters[i]);
        queue_wait q = {"c-queue", i + 1};
        CHECK(eventually(5, queue_has, &q));
    }
    cJSON *queue = control("queue?license_id=c-queue", NULL);
    for (int i = 0; i < 3; i++) {
        cJSON *ticket = cJSON_GetArrayItem(queue, i);
        CHECK(strcmp(cJSON_GetObjectItem(ticket, "client_id")->valuestring, names[i]) == 0);
        CHECK(strcmp(cJSON_GetObjectItem(ticket, "user")->valuestring, waiters[i].user) == 0);
        CHECK(strcmp(cJSON_GetObjectItem(ticket, "host")->valuestring, waiters[i].host) == 0);
    }
    cJSON_Delete(queue);
    sleep_seconds(2.5); /* they keep their places: each comes back with its ticket */
    char ids[64];
    queued_ids("c-queue", ids, sizeof ids);
    CHECK(strcmp(ids, "w1,w2,w3") == 0);
    cJSON *log = control("log", NULL), *entry;
    int polls = 0;
    cJSON_ArrayForEach(entry, log) {
        polls += cJSON_GetObjectItem(entry, "status")->valueint == 202;
    }
    cJSON_Delete(log);
    CHECK(polls >= 6);
    CHECK_CODE(seatlease_release(client, "c-queue", seatlease_answer_session_id(holder), NULL, NULL), SEATLEASE_OK);
    seatlease_answer_free(holder);
    const char *expected_order[] = {"w1", "w1,w2", "w1,w2,w3"};
    const char *expected_queue[] = {"w2,w3", "w3", ""};
    for (int i = 0; i < 3; i++) {
        pthread_join(threads[i], NULL);
        CHECK_CODE(waiters[i].code, SEATLEASE_OK);
        pthread_mutex_lock(&mu);
        int in_order = strcmp(order, expected_order[i]) == 0;
        pthread_mutex_unlock(&mu);
        CHECK(in_order);
        seatlease_lease_info info;
        seatlease_lease_get_info(waiters[i].lease, &info);
        CHECK(info.verified);
        CHECK(only_live_seat("c-queue", info.session_id, names[i]));
        queued_ids("c-queue", ids, sizeof ids);
        CHECK(strcmp(ids, expected_queue[i]) == 0);
        seatlease_lease_free(waiters[i].lease);
    }
    CHECK(live_count("c-queue") == 0);
    seatlease_client_free(client);
}

static void waiting_in_line_gives_up_at_the_timeout(void) {
    NEED_STACK();
    make_license("c-queue-timeout", "{\"seats\": 1, \"lease_seconds\": 30, \"policy\": {\"queue\": true, \"queue_hold_seconds\": 3}}");
    seatlease_client *client = served_client(0, 0);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "a";
    seatlease_lease *held = NULL, *never = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-queue-timeout", &o, &held, NULL), SEATLEASE_OK);
    o.client_id = "b";
    o.wait = 1;
    o.wait_timeout_seconds = 1.5;
    double started = now_seconds();
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-queue-timeout", &o, &never, &error), SEATLEASE_ERR_SEAT_WAIT_TIMEOUT);
    CHECK(strcmp(seatlease_error_server_code(error), "seat_wait_timeout") == 0);
    seatlease_error_free(error);
    double took = now_seconds() - started;
    CHECK(took >= 1.4 && took <= 5);
    char ids[64];
    queued_ids("c-queue-timeout", ids, sizeof ids);
    CHECK(strcmp(ids, "b") == 0);
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.queue = 1;
    seatlease_answer *place = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-queue-timeout", "c", &ao, &place, NULL), SEATLEASE_OK);
    CHECK(seatlease_answer_status(place) == 202 && seatlease_answer_queued(place) &&
          seatlease_answer_position(place) == 2 && seatlease_answer_ticket(place)[0] &&
          seatlease_answer_retry_after_seconds(place) >= 1 && !seatlease_answer_session_id(place)[0]);
    seatlease_answer_free(place);
    seatlease_lease_free(held);
    seatlease_client_free(client);
}

static void typed_errors_of_a_license_policy(void) {
    NEED_STACK();
    make_license("c-policy", "{\"seats\": 3, \"lease_seconds\": 60, \"policy\": {\"max_per_user\": 1, \"deny_users\": [\"mallory\"]}}");
    seatlease_client *client = served_client(0, 0.01);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "ann-1";
    o.user = "ann";
    o.host = "pc-1";
    seatlease_lease *ann = NULL, *none = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-policy", &o, &ann, NULL), SEATLEASE_OK);
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.user = "ann";
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-policy", "ann-2", &ao, NULL, &error), SEATLEASE_ERR_USER_LIMIT_REACHED);
    CHECK(seatlease_error_status(error) == 409 && strcmp(seatlease_error_server_code(error), "user_limit_reached") == 0);
    CHECK(seatlease_error_retry_after_seconds(error) >= 50);
    CHECK(strstr(seatlease_error_body_json(error), "\"max_per_user\":1") != NULL);
    seatlease_error_free(error);
    o.client_id = "ann-2";
    o.wait = 1;
    o.wait_timeout_seconds = 0.3;
    CHECK_CODE(seatlease_lease_acquire(client, "c-policy", &o, &none, NULL), SEATLEASE_ERR_SEAT_WAIT_TIMEOUT);
    o.client_id = "m-1";
    o.user = "mallory";
    o.wait = 0;
    CHECK_CODE(seatlease_lease_acquire(client, "c-policy", &o, &none, &error), SEATLEASE_ERR_USER_DENIED);
    CHECK(seatlease_error_status(error) == 403 && strcmp(seatlease_error_server_code(error), "user_denied") == 0);
    seatlease_error_free(error);
    CHECK_CODE(seatlease_acquire(client, "c-policy", "x-1", NULL, NULL, NULL), SEATLEASE_ERR_INVALID_REQUEST);
    CHECK(only_live_seat("c-policy", "", NULL) == 0 && live_count("c-policy") == 1);
    seatlease_lease_free(ann);
    seatlease_client_free(client);
}

static void a_borrowed_seat(void) {
    NEED_STACK();
    make_license("c-borrow", "{\"seats\": 1, \"lease_seconds\": 60, \"max_borrow_seconds\": 86400}");
    seatlease_client *client = served_client(1, 0.01);
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.borrow_seconds = 3600;
    seatlease_answer *seat = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-borrow", "laptop", &ao, &seat, &error), SEATLEASE_OK);
    CHECK(seatlease_answer_borrowed(seat) && seatlease_answer_expires_at(seat) > 0);
    CHECK_CODE(seatlease_acquire(client, "c-borrow", "desk", NULL, NULL, NULL), SEATLEASE_ERR_NO_SEATS_AVAILABLE);
    ao.borrow_seconds = 86400 * 30;
    CHECK_CODE(seatlease_acquire(client, "c-borrow", "other", &ao, NULL, NULL), SEATLEASE_ERR_INVALID_REQUEST);
    seatlease_answer *back = NULL;
    CHECK_CODE(seatlease_release(client, "c-borrow", seatlease_answer_session_id(seat), &back, NULL), SEATLEASE_OK);
    CHECK(seatlease_answer_released(back) && live_count("c-borrow") == 0);
    seatlease_answer_free(back);
    seatlease_answer_free(seat);
    seatlease_client_free(client);
}

static void a_licenses_terms_and_a_machine_bound_seat(void) {
    NEED_STACK();
    make_license("c-term", "{\"seats\": 2, \"lease_seconds\": 60, \"max_borrow_seconds\": 86400, "
                           "\"expires_in_seconds\": 3600, \"grace_seconds\": 60, "
                           "\"entitlements\": [\"pro\", \"render\"], \"max_version\": \"2026.4\"}");
    make_license("c-later", "{\"seats\": 1, \"starts_in_seconds\": 3600}");
    seatlease_client *client = served_client(1, 0.01);
    char fingerprint[65];
    CHECK_CODE(seatlease_machine_fingerprint("4c4c4544004a3510804fb4c04f4e4d32\n", fingerprint), SEATLEASE_OK);
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.borrow_seconds = 3600;
    ao.fingerprint = fingerprint;
    seatlease_answer *seat = NULL;
    seatlease_error *error = NULL;
    /* Verified: the token's ent, lexp, maxv and cnf.machine agree with the answer. */
    CHECK_CODE(seatlease_acquire(client, "c-term", "laptop", &ao, &seat, &error), SEATLEASE_OK);
    CHECK(seatlease_answer_borrowed(seat));
    CHECK(seatlease_answer_entitlement_count(seat) == 2);
    CHECK(strcmp(seatlease_answer_entitlement(seat, 0), "pro") == 0 &&
          strcmp(seatlease_answer_entitlement(seat, 1), "render") == 0 &&
          strcmp(seatlease_answer_entitlement(seat, 2), "") == 0);
    CHECK(strcmp(seatlease_answer_max_version(seat), "2026.4") == 0);
    CHECK(seatlease_answer_license_expires_at(seat) > 0 &&
          seatlease_answer_license_grace_ends_at(seat) >= seatlease_answer_license_expires_at(seat) + 59);
    CHECK(!seatlease_answer_in_grace(seat));
    CHECK(strstr(seatlease_answer_token(seat), ".") != NULL);
    seatlease_answer_free(seat);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "ws-1";
    o.fingerprint = fingerprint;
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-term", &o, &lease, NULL), SEATLEASE_OK);
    char *entitlements = seatlease_lease_entitlements_json(lease);
    char *max_version = seatlease_lease_max_version(lease);
    double expires_at = 0, grace_ends_at = 0;
    int in_grace = -1;
    seatlease_lease_license_term(lease, &expires_at, &grace_ends_at, &in_grace);
    CHECK(entitlements != NULL && strcmp(entitlements, "[\"pro\",\"render\"]") == 0);
    CHECK(max_version != NULL && strcmp(max_version, "2026.4") == 0);
    CHECK(expires_at > 0 && grace_ends_at > expires_at && in_grace == 0);
    seatlease_string_free(entitlements);
    seatlease_string_free(max_version);
    seatlease_lease_free(lease);
    CHECK_CODE(seatlease_acquire(client, "c-later", "ws-2", NULL, NULL, &error), SEATLEASE_ERR_LICENSE_NOT_STARTED);
    CHECK(seatlease_error_status(error) == 403 && strcmp(seatlease_error_server_code(error), "license_not_started") == 0);
    CHECK(seatlease_code_is_license_suspended(seatlease_error_code(error)));
    seatlease_error_free(error);
    seatlease_client_free(client);
}

static void a_suspended_license_is_license_suspended_until_it_is_resumed(void) {
    NEED_STACK();
    make_license("c-suspend", "{\"seats\": 2, \"lease_seconds\": 30}");
    seatlease_client *client = served_client(1, 0.05);
    cJSON_Delete(control("suspend", "{\"license_id\": \"c-suspend\", \"suspended\": true}"));
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-suspend", "ws-1", NULL, NULL, &error), SEATLEASE_ERR_LICENSE_SUSPENDED);
    CHECK(seatlease_error_status(error) == 403 && strcmp(seatlease_error_server_code(error), "license_suspended") == 0);
    seatlease_error_free(error);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "ws-1";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-suspend", &o, &lease, NULL), SEATLEASE_ERR_LICENSE_SUSPENDED);
    CHECK(lease == NULL && live_count("c-suspend") == 0);
    cJSON_Delete(control("suspend", "{\"license_id\": \"c-suspend\", \"suspended\": false}"));
    CHECK_CODE(seatlease_lease_acquire(client, "c-suspend", &o, &lease, NULL), SEATLEASE_OK);
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    CHECK(only_live_seat("c-suspend", info.session_id, "ws-1"));
    seatlease_lease_free(lease);
    CHECK(live_count("c-suspend") == 0);
    seatlease_client_free(client);
}

static int weight_of(const char *license_id, const char *client_id) {
    char action[256];
    snprintf(action, sizeof action, "weights?license_id=%s", license_id);
    cJSON *weights = control(action, NULL);
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(weights, client_id);
    int seats = cJSON_IsNumber(item) ? item->valueint : 0;
    int count = cJSON_GetArraySize(weights);
    cJSON_Delete(weights);
    return count == 1 ? seats : -count;
}

/* A lease of 3 seats on a license of 4: its weight on the answer and the server, kept on
 * renewal and after a loss; seats_mismatch; a denial of more seats than are free. */
static void a_weighted_lease(void) {
    NEED_STACK();
    /* leases of 6 s, heartbeats every 2 s: room for a renewal's retry before the deadline */
    make_license("c-weights", "{\"seats\": 4, \"lease_seconds\": 6}");
    seatlease_client *client = served_client(1, 0.05);
    CHECK(client != NULL);
    watcher w = {PTHREAD_MUTEX_INITIALIZER, 0, 0, ""};
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "render-1";
    o.seats = 3;
    o.on_regained = on_regained;
    o.on_lost = on_lost;
    o.user_data = &w;
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-weights", &o, &lease, NULL), SEATLEASE_OK);
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    CHECK(seatlease_lease_seats(lease) == 3 && info.seats_used == 3 && info.seats_total == 4);
    seatlease_answer *answer = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-weights", "render-1", NULL, &answer, NULL), SEATLEASE_OK);
    CHECK(seatlease_answer_seats(answer) == 3); /* no seats sent: the weight is kept */
    CHECK(strcmp(seatlease_answer_session_id(answer), info.session_id) == 0);
    seatlease_answer_free(answer);
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.seats = 2;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-weights", "render-1", &ao, NULL, &error), SEATLEASE_ERR_SEATS_MISMATCH);
    CHECK(seatlease_error_held_seats(error) == 3 && seatlease_error_seats_requested(error) == 2);
    seatlease_error_free(error);
    error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-weights", "ws-2", &ao, NULL, &error), SEATLEASE_ERR_NO_SEATS_AVAILABLE);
    CHECK(seatlease_error_seats_requested(error) == 2 && seatlease_error_seats_used(error) == 3);
    seatlease_error_free(error);
    CHECK_CODE(seatlease_acquire(client, "c-weights", "ws-3", NULL, &answer, NULL), SEATLEASE_OK);
    CHECK(seatlease_answer_seats(answer) == 1 && seatlease_answer_seats_used(answer) == 4);
    CHECK_CODE(seatlease_release(client, "c-weights", seatlease_answer_session_id(answer), NULL, NULL), SEATLEASE_OK);
    seatlease_answer_free(answer);
    CHECK(weight_of("c-weights", "render-1") == 3);
    seatlease_lease_get_info(lease, &info);
    char session[128];
    snprintf(session, sizeof session, "%s", info.session_id);
    cJSON_Delete(control("flush", "{}")); /* forgotten: re-admitted by its token, with its weight */
    sleep_seconds(4.5); /* past the next heartbeat (2 s) and its retry with the token */
    seatlease_lease_get_info(lease, &info);
    pthread_mutex_lock(&w.mu);
    int regained = w.regained, lost = w.lost;
    fprintf(stderr, "a weighted lease after a flush: lost %d (%s), regained %d, %s session\n",
            lost, w.reasons, regained, strcmp(info.session_id, session) == 0 ? "the same" : "another");
    pthread_mutex_unlock(&w.mu);
    CHECK(regained == 0 && lost == 0 && !info.lost && strcmp(info.session_id, session) == 0);
    CHECK(seatlease_lease_seats(lease) == 3 && weight_of("c-weights", "render-1") == 3);
    /* longer than the lease: lost, and the re-acquire asks for the same weight */
    cJSON_Delete(control("outage", "{\"seconds\": 8}"));
    CHECK(eventually(16, regained_once, &w));
    seatlease_lease_get_info(lease, &info);
    CHECK(strcmp(info.session_id, session) != 0);
    CHECK(seatlease_lease_seats(lease) == 3 && weight_of("c-weights", "render-1") == 3);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
}

/* -- cancel ------------------------------------------------------------------------------- */

typedef struct {
    seatlease_cancel *cancel;
    double delay, triggered_at;
} canceller;

static void *cancel_later(void *argument) {
    canceller *c = argument;
    sleep_seconds(c->delay);
    c->triggered_at = now_seconds();
    seatlease_cancel_trigger(c->cancel);
    return NULL;
}

/* A lease_acquire (waiting for ever when wait is set) cancelled from another thread after
 * 0.6 s; its code, and in *late how long after the trigger it returned. */
static seatlease_code cancelled_acquire(seatlease_client *client, const char *license_id,
                                        const char *client_id, int wait, double *late) {
    canceller c = {NULL, 0.6, 0};
    if (seatlease_cancel_new(&c.cancel) != SEATLEASE_OK) {
        return SEATLEASE_ERR_NO_MEMORY;
    }
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = client_id;
    o.wait = wait; /* wait_timeout_seconds 0: for ever */
    o.cancel = c.cancel;
    seatlease_lease *lease = NULL;
    seatlease_error *error = NULL;
    pthread_t thread;
    pthread_create(&thread, NULL, cancel_later, &c);
    seatlease_code code = seatlease_lease_acquire(client, license_id, &o, &lease, &error);
    double returned = now_seconds();
    pthread_join(thread, NULL);
    *late = returned - c.triggered_at;
    if (code == SEATLEASE_ERR_CANCELLED && strcmp(seatlease_error_server_code(error), "cancelled") != 0) {
        code = SEATLEASE_ERR_HTTP; /* not the cancel's error */
    }
    seatlease_error_free(error);
    seatlease_lease_free(lease);
    seatlease_cancel_free(c.cancel);
    return code;
}

/* A Cancel button: the wait on a full license, the wait in line, and an acquire whose
 * answer is stalled all end within a second of the trigger, with SEATLEASE_ERR_CANCELLED. */
static void a_wait_is_cancelled_from_another_thread(void) {
    NEED_STACK();
    make_license("c-cancel", "{\"seats\": 1, \"lease_seconds\": 60}");
    make_license("c-cancel-line", "{\"seats\": 1, \"lease_seconds\": 60, \"policy\": {\"queue\": true, \"queue_hold_seconds\": 30}}");
    make_license("c-cancel-stall", "{\"seats\": 2, \"lease_seconds\": 60}");
    seatlease_client *client = served_client(1, 0.05);
    CHECK(client != NULL);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "holder";
    seatlease_lease *full = NULL, *line = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-cancel", &o, &full, NULL), SEATLEASE_OK);
    CHECK_CODE(seatlease_lease_acquire(client, "c-cancel-line", &o, &line, NULL), SEATLEASE_OK);
    double late = 99;
    CHECK_CODE(cancelled_acquire(client, "c-cancel", "waiter", 1, &late), SEATLEASE_ERR_CANCELLED);
    CHECK(late >= 0 && late < 1.0);
    CHECK_CODE(cancelled_acquire(client, "c-cancel-line", "waiter", 1, &late), SEATLEASE_ERR_CANCELLED);
    CHECK(late >= 0 && late < 1.0);
    cJSON_Delete(control("stall", "{\"path\": \"/acquire\", \"seconds\": 5}"));
    CHECK_CODE(cancelled_acquire(client, "c-cancel-stall", "stalled", 0, &late), SEATLEASE_ERR_CANCELLED);
    CHECK(late >= 0 && late < 1.0); /* the transfer in flight was aborted */
    seatlease_lease_free(full);
    seatlease_lease_free(line);
    seatlease_client_free(client);
}

/* A full wait queue: its own code (a "no seats": a wait waits it out). */
static void a_full_queue_is_queue_full(void) {
    NEED_STACK();
    make_license("c-queue-full", "{\"seats\": 1, \"lease_seconds\": 30, \"policy\": {\"queue\": true, \"queue_max\": 1, \"queue_hold_seconds\": 30}}");
    seatlease_client *client = served_client(0, 0.05);
    CHECK(client != NULL);
    seatlease_answer *holder = NULL, *place = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-queue-full", "holder", NULL, &holder, NULL), SEATLEASE_OK);
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.queue = 1;
    CHECK_CODE(seatlease_acquire(client, "c-queue-full", "w1", &ao, &place, NULL), SEATLEASE_OK);
    CHECK(seatlease_answer_queued(place) && seatlease_answer_position(place) == 1);
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-queue-full", "w2", &ao, NULL, &error), SEATLEASE_ERR_QUEUE_FULL);
    CHECK(seatlease_error_status(error) == 409 && strcmp(seatlease_error_server_code(error), "queue_full") == 0);
    CHECK(seatlease_error_queue_max(error) == 1 && seatlease_error_seats_total(error) == 1);
    CHECK(seatlease_code_is_no_seats(seatlease_error_code(error)) &&
          !seatlease_code_is_no_seats(SEATLEASE_ERR_SEATS_MISMATCH));
    CHECK(strcmp(seatlease_code_name(SEATLEASE_ERR_QUEUE_FULL), "queue_full") == 0);
    seatlease_error_free(error);
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "w2";
    o.wait = 1;
    o.wait_timeout_seconds = 1.5;
    seatlease_lease *never = NULL;
    double started = now_seconds();
    CHECK_CODE(seatlease_lease_acquire(client, "c-queue-full", &o, &never, NULL), SEATLEASE_ERR_SEAT_WAIT_TIMEOUT);
    CHECK(now_seconds() - started >= 1.4); /* waited out, not returned at once */
    seatlease_answer_free(place);
    CHECK_CODE(seatlease_release(client, "c-queue-full", seatlease_answer_session_id(holder), NULL, NULL), SEATLEASE_OK);
    seatlease_answer_free(holder);
    seatlease_client_free(client);
}

/* What the product needs, asked with every acquire: entitlements and its version. */
static void entitlements_and_version_are_asked(void) {
    NEED_STACK();
    make_license("c-ent", "{\"seats\": 2, \"lease_seconds\": 60, \"entitlements\": [\"pro\", \"render\"], \"max_version\": \"2026.4\"}");
    seatlease_client *client = served_client(1, 0.05);
    CHECK(client != NULL);
    const char *pro[] = {"pro"}, *cloud[] = {"pro", "cloud"};
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "ws-1";
    o.entitlements = pro;
    o.entitlement_count = 1;
    o.version = "2026.1";
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-ent", &o, &lease, NULL), SEATLEASE_OK);
    CHECK(seatlease_lease_entitlement_count(lease) == 2);
    char *first = seatlease_lease_entitlement(lease, 0), *second = seatlease_lease_entitlement(lease, 1);
    int named = first && second && strcmp(first, "pro") == 0 && strcmp(second, "render") == 0;
    seatlease_string_free(first);
    seatlease_string_free(second);
    CHECK(named && seatlease_lease_entitlement(lease, 2) == NULL);
    seatlease_acquire_options ao;
    seatlease_acquire_options_init(&ao);
    ao.entitlements = cloud;
    ao.entitlement_count = 2;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_acquire(client, "c-ent", "ws-2", &ao, NULL, &error), SEATLEASE_ERR_NOT_ENTITLED);
    CHECK(seatlease_error_status(error) == 403 && strstr(seatlease_error_body_json(error), "cloud") != NULL);
    seatlease_error_free(error);
    ao.entitlements = pro;
    ao.entitlement_count = 1;
    ao.version = "2027.1";
    CHECK_CODE(seatlease_acquire(client, "c-ent", "ws-2", &ao, NULL, &error), SEATLEASE_ERR_VERSION_NOT_ENTITLED);
    seatlease_error_free(error);
    o.client_id = "ws-3";
    o.entitlements = cloud;
    o.entitlement_count = 2;
    o.wait = 1; /* a refusal of entitlements is not waited on */
    seatlease_lease *never = NULL;
    double started = now_seconds();
    CHECK_CODE(seatlease_lease_acquire(client, "c-ent", &o, &never, NULL), SEATLEASE_ERR_NOT_ENTITLED);
    CHECK(never == NULL && now_seconds() - started < 3);
    CHECK(live_count("c-ent") == 1);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
}

/* -- borrowed-seat files --------------------------------------------------------------------- */

static char *read_text(const char *path) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return NULL;
    }
    static char text[1 << 20];
    size_t length = fread(text, 1, sizeof text - 1, file);
    fclose(file);
    text[length] = '\0';
    char *copy = malloc(length + 1);
    if (copy != NULL) {
        memcpy(copy, text, length + 1);
    }
    return copy;
}

static int write_text(const char *path, const char *text) {
    FILE *file = fopen(path, "wb");
    if (file == NULL) {
        return -1;
    }
    int ok = fputs(text, file) >= 0;
    return fclose(file) == 0 && ok ? 0 : -1;
}

static seatlease_client *borrowing_client(const char *pins_text, const char *machine_id) {
    static char pins_copy[2048];
    const char *pins[8];
    size_t count = 0;
    if (pins_text != NULL) {
        snprintf(pins_copy, sizeof pins_copy, "%s", pins_text);
        for (char *pin = strtok(pins_copy, ","); pin != NULL && count < 8; pin = strtok(NULL, ",")) {
            pins[count++] = pin;
        }
    }
    seatlease_options options;
    seatlease_options_init(&options);
    options.pinned_keys = pins;
    options.pinned_key_count = count;
    options.insecure_skip_verify = count == 0; /* unpinned: only the saved JWKS vouches */
    options.tenant_id = count > 0 ? "acme" : NULL;
    options.machine_id = machine_id;
    options.backoff_seconds = 0.05;
    seatlease_client *client = NULL;
    return seatlease_client_new(served_url(), served_key(), &options, &client, NULL) == SEATLEASE_OK ? client : NULL;
}

static int holds_a_seat(const char *license_id, const char *client_id) {
    cJSON *seats = live(license_id), *seat;
    int held = 0;
    cJSON_ArrayForEach(seat, seats) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(seat, "client_id");
        held |= cJSON_IsString(c) && strcmp(c->valuestring, client_id) == 0;
    }
    cJSON_Delete(seats);
    return held;
}

static seatlease_code load_code(seatlease_client *client, const char *path) {
    seatlease_borrowed *borrowed = NULL;
    seatlease_code code = seatlease_borrowed_load(client, path, &borrowed, NULL);
    seatlease_borrowed_free(borrowed);
    return code;
}

/* A seat borrowed by the Python client loads here; one borrowed here is left for the
 * Python client (tests/test_client_c.py loads it after this suite); a round trip here:
 * borrow, load, an edited file, another machine, another vendor's keys, no file, return. */
static void borrowed_seat_files_are_the_python_clients(void) {
    NEED_STACK();
    const char *pins = getenv("SEATLEASE_TEST_PINNED_KEYS");
    const char *machine = getenv("SEATLEASE_TEST_MACHINE_ID");
    const char *from_python = getenv("SEATLEASE_BORROWED_FROM_PYTHON");
    const char *for_python = getenv("SEATLEASE_BORROWED_FOR_PYTHON");
    const char *this_machine = getenv("SEATLEASE_TEST_THIS_MACHINE");
    if (!pins || !machine || !from_python || !for_python || !this_machine) {
        SKIP("the borrowed files' environment is not set: run through pytest tests/test_client_c.py");
    }
    seatlease_client *client = borrowing_client(pins, machine);
    CHECK(client != NULL);
    seatlease_borrowed *python = NULL, *mine = NULL, *again = NULL;
    seatlease_error *error = NULL;
    CHECK_CODE(seatlease_borrowed_load(client, from_python, &python, &error), SEATLEASE_OK);
    CHECK(strcmp(seatlease_borrowed_license_id(python), "c-borrow-files") == 0 &&
          strcmp(seatlease_borrowed_client_id(python), "py-laptop") == 0);
    CHECK(seatlease_borrowed_seconds(python) == 3600 && seatlease_borrowed_seats(python) == 1);
    CHECK(seatlease_borrowed_seconds_left(python) > 3000 && strchr(seatlease_borrowed_token(python), '.'));
    seatlease_borrowed_free(python);

    CHECK_CODE(seatlease_borrow(client, "c-borrow-files", "c-laptop", 3600, for_python, NULL, &mine, &error), SEATLEASE_OK);
    seatlease_borrowed_free(mine); /* left for the Python client */

    char folder[] = "/tmp/seatlease-c-borrow-XXXXXX";
    CHECK(mkdtemp(folder) != NULL);
    char path[128], edited[128];
    snprintf(path, sizeof path, "%s/seat.json", folder);
    snprintf(edited, sizeof edited, "%s/edited.json", folder);
    CHECK_CODE(seatlease_borrow(client, "c-borrow-files", "c-roundtrip", 600, path, NULL, &mine, &error), SEATLEASE_OK);
    struct stat saved;
    CHECK(stat(path, &saved) == 0 && (saved.st_mode & 0777) == 0600);
    CHECK(seatlease_borrowed_seconds(mine) == 600 && seatlease_borrowed_expires_at(mine) > 0);
    CHECK(holds_a_seat("c-borrow-files", "c-laptop") && holds_a_seat("c-borrow-files", "c-roundtrip"));
    CHECK_CODE(seatlease_borrowed_load(client, path, &again, NULL), SEATLEASE_OK);
    CHECK(strcmp(seatlease_borrowed_session_id(again), seatlease_borrowed_session_id(mine)) == 0);
    seatlease_borrowed_free(again);

    char *text = read_text(path);
    CHECK(text != NULL && strstr(text, "\"seatlease-borrowed-seat/1\"") != NULL);
    char *at;
    while ((at = strstr(text, "c-roundtrip")) != NULL) {
        at[10] = 'q'; /* another client_id in the request and the answer */
    }
    int written = write_text(edited, text);
    free(text);
    CHECK(written == 0);
    CHECK_CODE(load_code(client, edited), SEATLEASE_ERR_TOKEN_MISMATCH);
    CHECK(write_text(edited, "{\"format\": \"something else\"}") == 0);
    CHECK_CODE(load_code(client, edited), SEATLEASE_ERR_MALFORMED_TOKEN);
    remove(edited);
    CHECK_CODE(load_code(client, edited), SEATLEASE_ERR_FILE);

    seatlease_client *elsewhere = borrowing_client(pins, "another machine");
    seatlease_client *unpinned = borrowing_client(NULL, machine);
    seatlease_client *other_vendor = borrowing_client("4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk", machine);
    CHECK(elsewhere && unpinned && other_vendor);
    CHECK_CODE(load_code(elsewhere, path), SEATLEASE_ERR_TOKEN_WRONG_MACHINE);
    CHECK_CODE(load_code(unpinned, path), SEATLEASE_OK); /* only the saved JWKS vouches */
    CHECK_CODE(load_code(other_vendor, path), SEATLEASE_ERR_UNTRUSTED_KEY);
    seatlease_client_free(elsewhere);
    seatlease_client_free(unpinned);
    seatlease_client_free(other_vendor);

    /* the borrowed seat keeps its client: returned after the client was freed */
    seatlease_client_free(client);
    seatlease_answer *back = NULL;
    CHECK_CODE(seatlease_borrowed_return(mine, &back, &error), SEATLEASE_OK);
    CHECK(seatlease_answer_released(back) && access(path, F_OK) != 0);
    CHECK(!holds_a_seat("c-borrow-files", "c-roundtrip"));
    seatlease_answer_free(back);
    seatlease_borrowed_free(mine);

    /* no machine_id: the system's, the same fingerprint as the Python client's */
    seatlease_client *system = borrowing_client(pins, NULL);
    CHECK_CODE(seatlease_borrow(system, "c-borrow-files", "c-system", 60, path, NULL, &mine, &error), SEATLEASE_OK);
    text = read_text(path);
    cJSON *document = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *request = cJSON_GetObjectItemCaseSensitive(document, "request");
    const cJSON *fingerprint = cJSON_GetObjectItemCaseSensitive(request, "fingerprint");
    int same = cJSON_IsString(fingerprint) && strcmp(fingerprint->valuestring, this_machine) == 0;
    cJSON_Delete(document);
    CHECK(same);
    CHECK_CODE(seatlease_borrowed_return(mine, NULL, NULL), SEATLEASE_OK);
    seatlease_borrowed_free(mine);
    seatlease_client_free(system);
    rmdir(folder);
}

/* -- the license's idle rule (issue 50) ---------------------------------------------------- */

/* A watcher (its first member: on_lost and on_regained take it) that counts warnings too. */
typedef struct {
    watcher w;
    int warnings;
} idle_watcher;

static void on_idle_warning(seatlease_lease *lease, double reclaim_at, void *user_data) {
    (void)lease;
    idle_watcher *iw = user_data;
    pthread_mutex_lock(&iw->w.mu);
    iw->warnings += reclaim_at > 0;
    pthread_mutex_unlock(&iw->w.mu);
}

/* The warnings so far; the losses, regains and reasons into the pointers. */
static int watched(idle_watcher *iw, int *lost, int *regained, char *reasons, size_t size) {
    pthread_mutex_lock(&iw->w.mu);
    int warnings = iw->warnings;
    *lost = iw->w.lost;
    *regained = iw->w.regained;
    snprintf(reasons, size, "%s", iw->w.reasons);
    pthread_mutex_unlock(&iw->w.mu);
    return warnings;
}

static int warned_once(void *context) {
    int lost, regained;
    char reasons[256];
    return watched(context, &lost, &regained, reasons, sizeof reasons) == 1;
}

static int lost_once(void *context) {
    int lost, regained;
    char reasons[256];
    watched(context, &lost, &regained, reasons, sizeof reasons);
    return lost == 1;
}

/* A license of 1 seat with an idle timeout of 60 s, reclaimed always: a lease idle two
 * minutes (touch_ago) is warned, reclaimed at the warning's time, lost as "idle" (its seat
 * free for another), not taken back while idle, and taken again on a touch. */
static void an_idle_lease_is_warned_reclaimed_and_taken_again_on_a_touch(void) {
    NEED_STACK();
    make_license("c-idle-always", "{\"seats\": 1, \"lease_seconds\": 3, \"idle_timeout_seconds\": 60, "
                                  "\"idle_reclaim\": \"always\"}");
    seatlease_client *client = served_client(1, 0.05);
    CHECK(client != NULL);
    idle_watcher w = {{PTHREAD_MUTEX_INITIALIZER, 0, 0, ""}, 0};
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "ws-idle";
    o.on_lost = on_lost;
    o.on_regained = on_regained;
    o.on_idle_warning = on_idle_warning;
    o.user_data = &w;
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-idle-always", &o, &lease, NULL), SEATLEASE_OK);
    seatlease_lease_touch_ago(lease, 120);
    int warned = eventually(10, warned_once, &w);
    int lost_ok = warned && eventually(10, lost_once, &w);
    int lost, regained;
    char reasons[256];
    watched(&w, &lost, &regained, reasons, sizeof reasons);
    int as_idle = strcmp(reasons, "idle,") == 0;
    int freed = live_count("c-idle-always") == 0;
    sleep_seconds(2); /* not taken back while idle */
    watched(&w, &lost, &regained, reasons, sizeof reasons);
    int kept_away = regained == 0 && live_count("c-idle-always") == 0;
    seatlease_lease_touch(lease);
    int back = eventually(10, regained_once, &w.w) && live_count("c-idle-always") == 1;
    seatlease_lease_free(lease);
    seatlease_client_free(client);
    CHECK(warned);
    CHECK(lost_ok);
    CHECK(as_idle);
    CHECK(freed);
    CHECK(kept_away);
    CHECK(back);
}

/* Busy the whole time (idle two minutes all the same): never warned, never reclaimed. */
static void a_busy_lease_is_never_warned(void) {
    NEED_STACK();
    make_license("c-idle-busy", "{\"seats\": 1, \"lease_seconds\": 3, \"idle_timeout_seconds\": 60, "
                                "\"idle_reclaim\": \"always\"}");
    seatlease_client *client = served_client(1, 0.05);
    CHECK(client != NULL);
    idle_watcher w = {{PTHREAD_MUTEX_INITIALIZER, 0, 0, ""}, 0};
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "ws-busy";
    o.on_lost = on_lost;
    o.on_idle_warning = on_idle_warning;
    o.user_data = &w;
    seatlease_lease *lease = NULL;
    CHECK_CODE(seatlease_lease_acquire(client, "c-idle-busy", &o, &lease, NULL), SEATLEASE_OK);
    seatlease_lease_busy_begin(lease);
    seatlease_lease_touch_ago(lease, 120);
    sleep_seconds(5); /* several heartbeats */
    seatlease_lease_busy_end(lease);
    int lost, regained;
    char reasons[256];
    int warnings = watched(&w, &lost, &regained, reasons, sizeof reasons);
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
    CHECK(warnings == 0 && lost == 0 && !info.lost && info.idle_reclaim_at == 0);
}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        {"lease_life_past_three_leases_a_redis_flush_and_a_revoke", lease_life_past_three_leases_a_redis_flush_and_a_revoke},
        {"a_stalled_server_answers_the_retry_from_the_first_run", a_stalled_server_answers_the_retry_from_the_first_run},
        {"a_retry_of_your_own_with_the_same_request_id_takes_one_seat", a_retry_of_your_own_with_the_same_request_id_takes_one_seat},
        {"typed_errors", typed_errors},
        {"a_500_is_an_http_error_not_retried", a_500_is_an_http_error_not_retried},
        {"a_503_with_retry_after_is_retried_no_sooner_with_the_same_request_id", a_503_with_retry_after_is_retried_no_sooner_with_the_same_request_id},
        {"waiting_gets_the_seat_released_meanwhile", waiting_gets_the_seat_released_meanwhile},
        {"an_unreachable_url_is_backend_unavailable", an_unreachable_url_is_backend_unavailable},
        {"release_from_the_on_lost_callback", release_from_the_on_lost_callback},
        {"an_outage_longer_than_the_lease_marks_it_lost_then_regains", an_outage_longer_than_the_lease_marks_it_lost_then_regains},
        {"queued_waiters_get_the_seat_in_the_order_they_joined", queued_waiters_get_the_seat_in_the_order_they_joined},
        {"waiting_in_line_gives_up_at_the_timeout", waiting_in_line_gives_up_at_the_timeout},
        {"typed_errors_of_a_license_policy", typed_errors_of_a_license_policy},
        {"a_borrowed_seat", a_borrowed_seat},
        {"a_licenses_terms_and_a_machine_bound_seat", a_licenses_terms_and_a_machine_bound_seat},
        {"a_suspended_license_is_license_suspended_until_it_is_resumed", a_suspended_license_is_license_suspended_until_it_is_resumed},
        {"a_weighted_lease", a_weighted_lease},
        {"a_wait_is_cancelled_from_another_thread", a_wait_is_cancelled_from_another_thread},
        {"a_full_queue_is_queue_full", a_full_queue_is_queue_full},
        {"entitlements_and_version_are_asked", entitlements_and_version_are_asked},
        {"borrowed_seat_files_are_the_python_clients", borrowed_seat_files_are_the_python_clients},
        {"an_idle_lease_is_warned_reclaimed_and_taken_again_on_a_touch", an_idle_lease_is_warned_reclaimed_and_taken_again_on_a_touch},
        {"a_busy_lease_is_never_warned", a_busy_lease_is_never_warned},
    };
    return run_tests("live", tests, sizeof tests / sizeof tests[0], argc, argv);
}
