/* The license's idle rule, the client's side (issue 50), against a recording HTTP server
 * of this suite's own (a thread on a loopback port: the served functions' log does not
 * keep request bodies): heartbeats carry idle_seconds only once the product touched the
 * lease and busy: true while a busy scope is open; an answer's idle_reclaim_at calls
 * on_idle_warning once per warning, and a touch after it heartbeats at once; a 410 reason
 * "idle" loses the seat as "idle", asked for again only once the product is in use. */
#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* -- a recording server ---------------------------------------------------------------- */

#define MAX_RECORDED 512

/* The answer to a request of fn ("acquire", "heartbeat", "release") with body: its status,
 * its JSON written into reply. */
typedef int (*answer_fn)(const char *fn, const cJSON *body, char *reply, size_t size);

typedef struct {
    int listener;
    int port;
    atomic_int stop;
    pthread_t thread;
    answer_fn answer;
    pthread_mutex_t mu; /* guards what follows */
    int count;
    char *fns[MAX_RECORDED];
    cJSON *bodies[MAX_RECORDED];
} recorder;

static recorder server;

/* One request of the connection: read up to the body's end, answer, close. */
static void serve_one(int connection) {
    char request[65536];
    size_t got = 0;
    char *body = NULL;
    size_t length = 0;
    while (got < sizeof request - 1) {
        ssize_t n = recv(connection, request + got, sizeof request - 1 - got, 0);
        if (n <= 0) {
            return;
        }
        got += (size_t)n;
        request[got] = '\0';
        char *end = strstr(request, "\r\n\r\n");
        if (end == NULL) {
            continue;
        }
        const char *field = strstr(request, "Content-Length:");
        if (field == NULL) {
            field = strstr(request, "content-length:");
        }
        length = field != NULL ? strtoul(field + 15, NULL, 10) : 0;
        body = end + 4;
        if ((size_t)(request + got - body) >= length) {
            break;
        }
    }
    if (body == NULL) {
        return;
    }
    char fn[64] = "";
    sscanf(request, "POST /%63[^ ?]", fn);
    cJSON *parsed = cJSON_ParseWithLength(body, length);
    char reply[4096];
    int status = server.answer(fn, parsed, reply, sizeof reply);
    pthread_mutex_lock(&server.mu);
    if (server.count < MAX_RECORDED) {
        server.fns[server.count] = strdup(fn);
        server.bodies[server.count] = parsed;
        server.count++;
        parsed = NULL;
    }
    pthread_mutex_unlock(&server.mu);
    cJSON_Delete(parsed);
    char head[256];
    int head_length = snprintf(head, sizeof head,
                               "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                               "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                               status, strlen(reply));
    send(connection, head, (size_t)head_length, MSG_NOSIGNAL);
    send(connection, reply, strlen(reply), MSG_NOSIGNAL);
}

static void *serve(void *unused) {
    (void)unused;
    while (!atomic_load(&server.stop)) {
        struct pollfd ready = {.fd = server.listener, .events = POLLIN};
        if (poll(&ready, 1, 50) <= 0) {
            continue;
        }
        int connection = accept(server.listener, NULL, NULL);
        if (connection >= 0) {
            serve_one(connection);
            close(connection);
        }
    }
    return NULL;
}

static int server_start(answer_fn answer) {
    memset(&server, 0, sizeof server);
    pthread_mutex_init(&server.mu, NULL);
    server.answer = answer;
    server.listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (server.listener < 0 || bind(server.listener, (struct sockaddr *)&address, sizeof address) != 0 ||
        listen(server.listener, 16) != 0 ||
        getsockname(server.listener, (struct sockaddr *)&address, &size) != 0) {
        return -1;
    }
    server.port = ntohs(address.sin_port);
    return pthread_create(&server.thread, NULL, serve, NULL);
}

static void server_stop(void) {
    atomic_store(&server.stop, 1);
    pthread_join(server.thread, NULL);
    close(server.listener);
    for (int i = 0; i < server.count; i++) {
        free(server.fns[i]);
        cJSON_Delete(server.bodies[i]);
    }
    pthread_mutex_destroy(&server.mu);
}

/* How many requests of fn were answered. */
static int sent(const char *fn) {
    pthread_mutex_lock(&server.mu);
    int count = 0;
    for (int i = 0; i < server.count; i++) {
        count += strcmp(server.fns[i], fn) == 0;
    }
    pthread_mutex_unlock(&server.mu);
    return count;
}

/* The index-th body of fn's requests, printed (free it), or NULL. */
static char *body_of(const char *fn, int index) {
    pthread_mutex_lock(&server.mu);
    char *printed = NULL;
    for (int i = 0, seen = 0; i < server.count && printed == NULL; i++) {
        if (strcmp(server.fns[i], fn) == 0 && seen++ == index) {
            printed = cJSON_PrintUnformatted(server.bodies[i]);
        }
    }
    pthread_mutex_unlock(&server.mu);
    return printed;
}

/* A field of the index-th heartbeat's body: idle_seconds (-1 when absent), busy. */
static int heartbeat_idle(int index) {
    char *printed = body_of("heartbeat", index);
    cJSON *body = cJSON_Parse(printed);
    const cJSON *idle = cJSON_GetObjectItemCaseSensitive(body, "idle_seconds");
    int seconds = cJSON_IsNumber(idle) ? (int)idle->valuedouble : -1;
    cJSON_Delete(body);
    cJSON_free(printed);
    return seconds;
}

static int heartbeat_busy(int index) {
    char *printed = body_of("heartbeat", index);
    cJSON *body = cJSON_Parse(printed);
    const cJSON *busy = cJSON_GetObjectItemCaseSensitive(body, "busy");
    int value = cJSON_IsTrue(busy) ? 1 : busy == NULL ? 0 : -1;
    cJSON_Delete(body);
    cJSON_free(printed);
    return value;
}

static const char *const grant_format =
    "{\"session_id\":\"%s\",\"license_id\":\"lic\",\"client_id\":\"pc-1\","
    "\"lease_expires_at\":\"2100-01-01T00:00:00.000Z\",\"lease_seconds\":%d,"
    "\"heartbeat_interval_seconds\":%d,\"seats_used\":1,\"seats_total\":8%s}";

static int grant(char *reply, size_t size, const char *session, int lease_seconds,
                 int interval, const char *more) {
    snprintf(reply, size, grant_format, session, lease_seconds, interval, more);
    return 201;
}

static seatlease_client *local_client(void) {
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", server.port);
    seatlease_options options;
    seatlease_options_init(&options);
    options.insecure_skip_verify = 1; /* this server signs nothing */
    options.retries = 1;
    options.backoff_seconds = 0.01;
    seatlease_client *client = NULL;
    return seatlease_client_new(url, "sk_test", &options, &client, NULL) == SEATLEASE_OK ? client : NULL;
}

/* What the callbacks saw. */
typedef struct {
    pthread_mutex_t mu;
    int warnings, lost, regained;
    double reclaim_at;
    char reasons[256];
} book;

static void book_warning(seatlease_lease *lease, double reclaim_at, void *user_data) {
    (void)lease;
    book *b = user_data;
    pthread_mutex_lock(&b->mu);
    b->warnings++;
    b->reclaim_at = reclaim_at;
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

static void book_regained(seatlease_lease *lease, void *user_data) {
    (void)lease;
    book *b = user_data;
    pthread_mutex_lock(&b->mu);
    b->regained++;
    pthread_mutex_unlock(&b->mu);
}

static int book_count(book *b, const int *field) {
    pthread_mutex_lock(&b->mu);
    int value = *field;
    pthread_mutex_unlock(&b->mu);
    return value;
}

static seatlease_lease *lease_with(seatlease_client *client, book *b) {
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    o.client_id = "pc-1";
    o.on_idle_warning = book_warning;
    o.on_lost = book_lost;
    o.on_regained = book_regained;
    o.user_data = b;
    seatlease_lease *lease = NULL;
    return seatlease_lease_acquire(client, "lic", &o, &lease, NULL) == SEATLEASE_OK ? lease : NULL;
}

/* -- the tests ------------------------------------------------------------------------- */

static int echo_answer(const char *fn, const cJSON *body, char *reply, size_t size) {
    (void)body;
    if (strcmp(fn, "release") == 0) {
        snprintf(reply, size, "{\"released\":true,\"seats_used\":0}");
        return 200;
    }
    int status = grant(reply, size, "session-1", 1, 1, "");
    return strcmp(fn, "acquire") == 0 ? status : 200;
}

static int heartbeats_more_than(void *count) { return sent("heartbeat") > *(int *)count; }

static int last_idle_at_least_one(void *from) {
    int count = sent("heartbeat");
    return count > *(int *)from && heartbeat_idle(count - 1) >= 1;
}

static void heartbeats_carry_idle_seconds_after_a_touch_and_busy_in_a_scope(void) {
    CHECK(server_start(echo_answer) == 0);
    seatlease_client *client = local_client();
    book b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    seatlease_lease *lease = client != NULL ? lease_with(client, &b) : NULL;
    int ok = lease != NULL;
    int two = 1;
    ok = ok && eventually(5, heartbeats_more_than, &two);
    for (int i = 0; ok && i < sent("heartbeat"); i++) {
        ok = heartbeat_idle(i) == -1 && heartbeat_busy(i) == 0; /* nothing before a touch */
    }
    int before = sent("heartbeat");
    if (ok) {
        seatlease_lease_touch(lease);
        /* whole seconds since the touch: 0 at first, then 1 once a second has passed */
        ok = eventually(5, last_idle_at_least_one, &before);
    }
    for (int i = before; ok && i < sent("heartbeat"); i++) {
        int idle = heartbeat_idle(i);
        ok = idle >= 0 && idle <= 5;
    }
    int busy_ok = 0, after_ok = 0;
    if (ok) {
        seatlease_lease_busy_begin(lease);
        seatlease_lease_busy_begin(lease); /* nested: still busy after the inner end */
        seatlease_lease_busy_end(lease);
        int opened = sent("heartbeat");
        busy_ok = eventually(5, heartbeats_more_than, &opened) && heartbeat_busy(sent("heartbeat") - 1) == 1;
        seatlease_lease_busy_end(lease);
        seatlease_lease_busy_end(lease); /* one too many: nothing */
        int closed = sent("heartbeat") + 1;
        after_ok = eventually(5, heartbeats_more_than, &closed) && heartbeat_busy(sent("heartbeat") - 1) == 0;
    }
    seatlease_lease_free(lease);
    seatlease_client_free(client);
    server_stop();
    CHECK(ok);
    CHECK(busy_ok);
    CHECK(after_ok);
}

/* Warned while the heartbeat says a second or more of idleness; a slow beat (every
 * 2.25..3 s) so that the one a touch sends is told apart from the next due. */
static int warning_answer(const char *fn, const cJSON *body, char *reply, size_t size) {
    if (strcmp(fn, "release") == 0) {
        snprintf(reply, size, "{\"released\":true,\"seats_used\":0}");
        return 200;
    }
    const cJSON *idle = cJSON_GetObjectItemCaseSensitive(body, "idle_seconds");
    int warned = strcmp(fn, "heartbeat") == 0 && cJSON_IsNumber(idle) && idle->valuedouble >= 1;
    int status = grant(reply, size, "session-1", 30, 3,
                       warned ? ",\"idle_reclaim_at\":\"2100-01-01T00:00:30.000Z\"" : "");
    return strcmp(fn, "acquire") == 0 ? status : 200;
}

static int two_warnings(void *b) { return book_count(b, &((book *)b)->warnings) >= 2; }

static int warning_cleared(void *lease) {
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    return info.idle_reclaim_at == 0;
}

static void an_idle_warning_is_called_once_and_a_touch_cancels_it_at_once(void) {
    CHECK(server_start(warning_answer) == 0);
    seatlease_client *client = local_client();
    book b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    seatlease_lease *lease = client != NULL ? lease_with(client, &b) : NULL;
    int ok = lease != NULL, once = 0, state_ok = 0, quick = 0, zero = 0, cleared = 0, again = 0;
    if (ok) {
        seatlease_lease_touch(lease);
        int one = 1;
        ok = eventually(10, heartbeats_more_than, &one); /* two warned heartbeats */
        pthread_mutex_lock(&b.mu);
        once = b.warnings == 1 && b.reclaim_at == 4102444830.0;
        pthread_mutex_unlock(&b.mu);
        seatlease_lease_info info;
        seatlease_lease_get_info(lease, &info);
        state_ok = info.idle_reclaim_at == 4102444830.0;
        int before = sent("heartbeat");
        double touched = now_seconds();
        seatlease_lease_touch(lease);
        quick = eventually(2, heartbeats_more_than, &before) && now_seconds() - touched < 1.5;
        zero = heartbeat_idle(before) == 0;
        cleared = eventually(1, warning_cleared, lease);
        again = eventually(10, two_warnings, &b); /* idle again: a new warning, called again */
    }
    seatlease_lease_free(lease);
    seatlease_client_free(client);
    server_stop();
    CHECK(ok);
    CHECK(once);
    CHECK(state_ok);
    CHECK(quick);
    CHECK(zero);
    CHECK(cleared);
    CHECK(again);
}

static atomic_int sessions;

/* The first session's heartbeats: 410 reason idle; a new session's: renewed. */
static int idle_loss_answer(const char *fn, const cJSON *body, char *reply, size_t size) {
    if (strcmp(fn, "release") == 0) {
        snprintf(reply, size, "{\"released\":true,\"seats_used\":0}");
        return 200;
    }
    if (strcmp(fn, "acquire") == 0) {
        char session[32];
        snprintf(session, sizeof session, "session-%d", atomic_fetch_add(&sessions, 1) + 1);
        return grant(reply, size, session, 1, 1, "");
    }
    const char *session = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "session_id"));
    if (session != NULL && strcmp(session, "session-1") == 0) {
        snprintf(reply, size, "{\"error\":{\"code\":\"session_expired\",\"message\":\"Reclaimed "
                              "for idleness.\",\"reason\":\"idle\"}}");
        return 410;
    }
    grant(reply, size, session != NULL ? session : "", 1, 1, "");
    return 200;
}

static int is_lost(void *lease) {
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    return info.lost;
}

static int regained(void *b) { return book_count(b, &((book *)b)->regained) >= 1; }

static void a_410_idle_is_lost_as_idle_and_asked_for_again_once_in_use(void) {
    atomic_store(&sessions, 0);
    CHECK(server_start(idle_loss_answer) == 0);
    seatlease_client *client = local_client();
    book b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    seatlease_lease *lease = client != NULL ? lease_with(client, &b) : NULL;
    int ok = lease != NULL, as_idle = 0, waited = 0, back = 0, state_ok = 0;
    if (ok) {
        seatlease_lease_touch(lease);
        ok = eventually(5, is_lost, lease);
        seatlease_lease_info info;
        seatlease_lease_get_info(lease, &info);
        pthread_mutex_lock(&b.mu);
        as_idle = strcmp(b.reasons, "idle,") == 0 && strcmp(info.lost_reason, "idle") == 0;
        pthread_mutex_unlock(&b.mu);
        sleep_seconds(1.5); /* several heartbeat intervals: nobody uses the product */
        waited = sent("acquire") == 1;
        seatlease_lease_touch(lease);
        back = eventually(2, regained, &b);
        seatlease_lease_get_info(lease, &info);
        state_ok = !info.lost && strcmp(info.session_id, "session-2") == 0;
    }
    seatlease_lease_free(lease);
    seatlease_client_free(client);
    server_stop();
    CHECK(ok);
    CHECK(as_idle);
    CHECK(waited); /* a seat reclaimed for idleness is not taken back while idle */
    CHECK(back);
    CHECK(state_ok);
}

/* Every heartbeat warned: a product touching every 50 ms must not send a heartbeat a touch
 * (one per answer, and only for a touch a whole second newer than the warned one's). */
static int always_warned(const char *fn, const cJSON *body, char *reply, size_t size) {
    (void)body;
    if (strcmp(fn, "release") == 0) {
        snprintf(reply, size, "{\"released\":true,\"seats_used\":0}");
        return 200;
    }
    if (strcmp(fn, "acquire") == 0) {
        return grant(reply, size, "session-1", 30, 3, "");
    }
    grant(reply, size, "session-1", 30, 3, ",\"idle_reclaim_at\":\"2100-01-01T00:00:30.000Z\"");
    return 200;
}

static int warned(void *lease) { return !warning_cleared(lease); }

static void touches_on_every_key_while_warned_send_a_heartbeat_a_second_at_most(void) {
    CHECK(server_start(always_warned) == 0);
    seatlease_client *client = local_client();
    book b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    seatlease_lease *lease = client != NULL ? lease_with(client, &b) : NULL;
    int ok = lease != NULL, count = -1;
    if (ok) {
        seatlease_lease_touch_ago(lease, 5); /* the system's idle time: 5 s */
        ok = eventually(5, warned, lease);
        int before = sent("heartbeat");
        for (int i = 0; i < 30; i++) { /* 1.5 s of key presses */
            seatlease_lease_touch(lease);
            sleep_seconds(0.05);
        }
        count = sent("heartbeat") - before;
    }
    int first_idle = heartbeat_idle(0);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
    server_stop();
    CHECK(ok);
    CHECK(first_idle >= 5 && first_idle <= 9); /* touched 5 s before the lease's start */
    if (count < 1 || count > 3) {
        fprintf(stderr, "%d heartbeats for 30 touches in 1.5 s while warned\n", count);
    }
    CHECK(count >= 1 && count <= 3);
}

/* The plain calls read a warning and a shared seat; a warning that is not a time is an
 * invalid response. */
static int plain_answer(const char *fn, const cJSON *body, char *reply, size_t size) {
    (void)fn;
    const char *session = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(body, "session_id"));
    if (session != NULL && strcmp(session, "bad") == 0) {
        grant(reply, size, "bad", 30, 10, ",\"idle_reclaim_at\":\"soon\"");
        return 200;
    }
    grant(reply, size, "session-1", 30, 10,
          ",\"idle_reclaim_at\":\"2100-01-01T00:00:30Z\",\"shared_sessions\":3");
    return 200;
}

static void answers_carry_the_warning_and_the_shared_sessions(void) {
    CHECK(server_start(plain_answer) == 0);
    seatlease_client *client = local_client();
    seatlease_answer *answer = NULL;
    seatlease_error *error = NULL;
    seatlease_code code = client != NULL
                              ? seatlease_heartbeat(client, "lic", "session-1", &answer, &error)
                              : SEATLEASE_ERR_ARGUMENT;
    double at = seatlease_answer_idle_reclaim_at(answer);
    int shared = seatlease_answer_shared_sessions(answer);
    seatlease_answer_free(answer);
    seatlease_error_free(error);
    error = NULL;
    seatlease_code bad = client != NULL ? seatlease_heartbeat(client, "lic", "bad", NULL, &error)
                                        : SEATLEASE_ERR_ARGUMENT;
    seatlease_error_free(error);
    seatlease_client_free(client);
    server_stop();
    CHECK_CODE(code, SEATLEASE_OK);
    CHECK(at == 4102444830.0 && shared == 3);
    CHECK_CODE(bad, SEATLEASE_ERR_INVALID_RESPONSE);
}

int main(int argc, char **argv) {
    static const test_case tests[] = {
        {"heartbeats_carry_idle_seconds_after_a_touch_and_busy_in_a_scope", heartbeats_carry_idle_seconds_after_a_touch_and_busy_in_a_scope},
        {"an_idle_warning_is_called_once_and_a_touch_cancels_it_at_once", an_idle_warning_is_called_once_and_a_touch_cancels_it_at_once},
        {"a_410_idle_is_lost_as_idle_and_asked_for_again_once_in_use", a_410_idle_is_lost_as_idle_and_asked_for_again_once_in_use},
        {"touches_on_every_key_while_warned_send_a_heartbeat_a_second_at_most", touches_on_every_key_while_warned_send_a_heartbeat_a_second_at_most},
        {"answers_carry_the_warning_and_the_shared_sessions", answers_carry_the_warning_and_the_shared_sessions},
    };
    return run_tests("idle", tests, sizeof tests / sizeof tests[0], argc, argv);
}
