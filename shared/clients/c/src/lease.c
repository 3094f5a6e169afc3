/* A held seat: the first acquire (waiting, in line on a license with a queue, until a
 * seat, a refusal, the timeout or the cancel handle), the heartbeat thread (the server's
 * interval, faster retries as the deadline nears, a 410 "unknown" answered once more with
 * the lease's token, a new seat at once after a loss, a final 403 said once and asked
 * again every few minutes), on_lost/on_regained, and the release. As the Python client. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A re-acquire refused by a 403 (the term ended, a suspension, entitlements) is final until
 * an operator acts: asked again only this often (with up to a fifth more, at random), so
 * that a renewed license is taken up by itself without a storm of refused calls. */
#define SL_FINAL_REFUSAL_PAUSE 300.0

/* The most idle_seconds a heartbeat may carry (ten years: the API's bound). */
#define SL_MAX_IDLE_SECONDS 315360000.0

struct seatlease_lease {
    seatlease_client *client; /* a reference: the client lives while the lease does */
    char *license_id, *client_id, *metadata_json, *user, *host, *fingerprint, *version;
    char **entitlements;
    size_t entitlement_count;
    int lease_seconds;
    int seats_asked; /* the weight sent with every acquire (0: not sent) */
    seatlease_lost_fn on_lost;
    seatlease_regained_fn on_regained;
    seatlease_idle_warning_fn on_idle_warning;
    void *user_data;
    char announced[64]; /* the refusal already said at WARNING (heartbeat thread only) */

    pthread_mutex_t mu; /* guards the fields below */
    seatlease_lease_info info;
    char *token;      /* the last verified lease token */
    char *last_token; /* the last lease token answered, verified or not: a 410 "unknown"
                         is answered with it (a region's loss) */
    char *entitlements_json, *max_version; /* the license's terms (NULL: none given) */
    double license_expires_at, license_grace_ends_at;
    int in_grace;
    int seats; /* the lease's weight, from the last answer (1 when it does not say) */
    double valid_until; /* monotonic: the seat lapses then without a renewal */
    int failures;
    /* What the product said of its use, for the license's idle rule (monotonic times). */
    int touched;        /* it opted in: a product that never touches is never idle */
    double last_touch;  /* the last user activity */
    int busy;           /* busy scopes open (nested ones count) */
    double lost_idle_at; /* the seat was reclaimed for idleness then */
    /* What the last heartbeat said (the warned one, when warned), and whether the thread
     * was already woken since its answer: once per answer, so that a product touching on
     * every key press sends one heartbeat, not one a key. */
    int sent_touched, sent_busy;
    double sent_touch;
    int woken;

    sl_stopper stopper; /* stopped by release: ends the thread and its call in flight */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t release_mu;
    int release_done;
    seatlease_code release_code;
    seatlease_error *release_error;
};

void seatlease_lease_options_init_sized(seatlease_lease_options *o, size_t size) {
    seatlease_lease_options defaults;
    memset(&defaults, 0, sizeof defaults);
    defaults.struct_size = sizeof defaults;
    sl_struct_init(o, size, &defaults, sizeof defaults);
}

/* Programs built against seatlease.h 0.1 call this symbol with a 0.1 struct. */
void(seatlease_lease_options_init)(seatlease_lease_options *o) {
    seatlease_lease_options_init_sized(o, SL_LEASE_OPTIONS_V1_SIZE);
}

static void copy_into(char **slot, const char *text) {
    char *copy = sl_strdup(text);
    if (copy != NULL) {
        free(*slot);
        *slot = copy;
    }
}

static void copy_text(char *into, size_t size, const char *text) {
    size_t length = text ? strlen(text) : 0;
    if (length >= size) {
        length = size - 1;
    }
    if (length > 0) {
        memcpy(into, text, length);
    }
    into[length] = '\0';
}

/* A grant or renewal: the seat is valid until at least the request's departure plus the
 * lease length. The time of an idle warning the answer began (Unix seconds), else 0. */
static double took(seatlease_lease *l, const cJSON *reply, double sent_at) {
    pthread_mutex_lock(&l->mu);
    seatlease_lease_info *s = &l->info;
    const char *session = sl_json_string(reply, "session_id");
    if (session != NULL && session[0] != '\0') { /* a renewal may omit it */
        if (strcmp(s->session_id, session) != 0) {
            s->shared_sessions = 0; /* another session: shared or not as its grant says */
        }
        copy_text(s->session_id, sizeof s->session_id, session);
    }
    s->shared_sessions = sl_json_int(reply, "shared_sessions", s->shared_sessions);
    double reclaim_at = 0, warned = 0;
    if (sl_parse_time(sl_json_string(reply, "idle_reclaim_at"), &reclaim_at) != 0) {
        reclaim_at = 0; /* absent: the warning, if any, is over */
    }
    if (s->idle_reclaim_at == 0) {
        warned = reclaim_at;
    }
    s->idle_reclaim_at = reclaim_at;
    l->woken = 0; /* a new answer: one wake may follow it */
    double deadline;
    if (sl_parse_time(sl_json_string(reply, "lease_expires_at"), &deadline) == 0) {
        s->expires_at = deadline;
    }
    /* An answer that omits a number (a renewal carries no seat counts) keeps the last
     * known value: a heartbeat never makes it "0 of 0 seats". */
    s->lease_seconds = sl_json_int(reply, "lease_seconds", s->lease_seconds);
    s->heartbeat_interval_seconds =
        sl_json_int(reply, "heartbeat_interval_seconds", s->heartbeat_interval_seconds);
    s->seats_used = sl_json_int(reply, "seats_used", s->seats_used);
    s->seats_total = sl_json_int(reply, "seats_total", s->seats_total);
    s->overage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "overage"));
    int seats = sl_json_int(reply, "seats", l->seats >= 1 ? l->seats : 1);
    l->seats = seats >= 1 ? seats : 1;
    s->seats = l->seats;
    const cJSON *entitlements = cJSON_GetObjectItemCaseSensitive(reply, "entitlements");
    if (cJSON_IsArray(entitlements)) {
        char *printed = cJSON_PrintUnformatted(entitlements);
        char *copy = sl_strdup(printed);
        cJSON_free(printed);
        if (copy != NULL) {
            free(l->entitlements_json);
            l->entitlements_json = copy;
        }
    }
    const char *max_version = sl_json_string(reply, "max_version");
    if (max_version != NULL) {
        char *copy = sl_strdup(max_version);
        if (copy != NULL) {
            free(l->max_version);
            l->max_version = copy;
        }
    }
    double term;
    l->license_expires_at =
        sl_parse_time(sl_json_string(reply, "license_expires_at"), &term) == 0 ? term : 0;
    l->license_grace_ends_at =
        sl_parse_time(sl_json_string(reply, "license_grace_ends_at"), &term) == 0 ? term : 0;
    l->in_grace = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "in_grace"));
    const char *token = sl_json_string(reply, "lease_token");
    if (token != NULL) {
        copy_into(&l->last_token, token);
    }
    if (token != NULL && l->client->verifier != NULL) {
        char *copy = sl_strdup(token);
        if (copy != NULL) {
            free(l->token);
            l->token = copy;
            s->verified = 1;
        }
    }
    l->valid_until = sent_at + s->lease_seconds;
    pthread_mutex_unlock(&l->mu);
    return warned;
}

static seatlease_code lease_body(seatlease_lease *l, int queue, const char *ticket,
                                 const char *request_id, cJSON **body, seatlease_error **error) {
    sl_acquire_fields fields = {
        .license_id = l->license_id, .client_id = l->client_id,
        .lease_seconds = l->lease_seconds, .metadata_json = l->metadata_json, .user = l->user,
        .host = l->host, .queue = queue, .ticket = ticket, .request_id = request_id,
        .fingerprint = l->fingerprint, .seats = l->seats_asked,
        .entitlements = (const char *const *)l->entitlements,
        .entitlement_count = l->entitlement_count, .version = l->version,
    };
    return sl_acquire_body(&fields, body, error);
}

/* The first seat: once, or (wait) until one comes free, the timeout (0: none) or the cancel
 * handle; no seats, user_limit_reached and queue_full are waited out, nothing else. */
static seatlease_code acquire_first(seatlease_lease *l, int wait, double timeout,
                                    const char *request_id, sl_stopper *cancel,
                                    seatlease_error **error) {
    double give_up = timeout > 0 ? sl_mono_now() + timeout : 0;
    char *ticket = NULL;
    seatlease_code code;
    for (;;) {
        cJSON *body = NULL, *reply = NULL;
        int status = 0;
        seatlease_error *denied = NULL;
        code = lease_body(l, wait != 0, ticket, request_id, &body, error);
        if (code != SEATLEASE_OK) {
            break;
        }
        request_id = NULL; /* a new request each round */
        double sent_at = sl_mono_now();
        code = sl_call(l->client, "acquire", body, -1, 0, cancel, &reply, &status, &denied);
        cJSON_Delete(body);
        if (code == SEATLEASE_OK && status != 202) {
            took(l, reply, sent_at);
            cJSON_Delete(reply);
            break;
        }
        if (code == SEATLEASE_OK) { /* a place in line: paced by its retry_after_seconds */
            free(ticket);
            ticket = sl_strdup(sl_json_string(reply, "ticket"));
            int retry_after = sl_json_int(reply, "retry_after_seconds", 1);
            sl_log(l->client, SEATLEASE_LOG_INFO, "seatlease: waiting in line for %s, position %d",
                   l->license_id, sl_json_int(reply, "position", 0));
            cJSON_Delete(reply);
            sl_fail(&denied, SEATLEASE_ERR_NO_SEATS_AVAILABLE, 202, "queued", "Waiting in line for a seat.");
            denied->retry_after = retry_after > 1 ? retry_after : 1;
            if (ticket == NULL) {
                seatlease_error_free(denied);
                code = sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
                break;
            }
            code = SEATLEASE_ERR_NO_SEATS_AVAILABLE;
        }
        if (!wait || !seatlease_code_is_no_seats(code)) {
            sl_error_give(denied, error);
            break;
        }
        double pause = sl_wait_pause(l->client, denied);
        if (give_up > 0) {
            double left = give_up - sl_mono_now();
            if (left <= 0) {
                sl_error_set_wait_timeout(denied, l->license_id, timeout);
                code = SEATLEASE_ERR_SEAT_WAIT_TIMEOUT;
                sl_error_give(denied, error);
                break;
            }
            if (left < pause) {
                pause = left;
            }
        }
        sl_log(l->client, SEATLEASE_LOG_INFO, "seatlease: no seat on %s; retrying in %.2f s",
               l->license_id, pause);
        seatlease_error_free(denied);
        if (sl_sleep(cancel, pause)) {
            code = sl_fail(error, SEATLEASE_ERR_CANCELLED, 0, "cancelled",
                           "The wait for a seat on %.200s was cancelled.", l->license_id);
            break;
        }
    }
    free(ticket);
    return code;
}

/* -- the heartbeat thread ----------------------------------------------------------------- */

static int stopped(seatlease_lease *l) { return atomic_load(&l->stopper.stop); }

static void info_copy(seatlease_lease *l, seatlease_lease_info *info) {
    pthread_mutex_lock(&l->mu);
    *info = l->info;
    pthread_mutex_unlock(&l->mu);
}

/* The server's interval (at most a third of the lease) minus up to 25 % jitter. */
static double beat_delay(seatlease_lease *l) {
    seatlease_lease_info s;
    info_copy(l, &s);
    double interval = s.heartbeat_interval_seconds > 0 ? s.heartbeat_interval_seconds : 1;
    if (s.lease_seconds > 0 && s.lease_seconds / 3.0 < interval) {
        interval = s.lease_seconds / 3.0;
    }
    if (interval < 0.2) {
        interval = 0.2;
    }
    return sl_uniform(interval * 0.75, interval);
}

static void failed(seatlease_lease *l, int reset) {
    pthread_mutex_lock(&l->mu);
    l->failures = reset ? 0 : l->failures + 1;
    pthread_mutex_unlock(&l->mu);
}

/* While the lease runs, never wait longer than one heartbeat interval between attempts,
 * and retry faster as the deadline nears (at most a third of the time left). */
static double lease_backoff(seatlease_lease *l, double retry_after, double ceiling) {
    pthread_mutex_lock(&l->mu);
    int lost = l->info.lost, failures = l->failures, interval_seconds = l->info.heartbeat_interval_seconds;
    double left = l->valid_until - sl_mono_now();
    pthread_mutex_unlock(&l->mu);
    if (ceiling == 0) {
        double interval = interval_seconds > 0.2 ? interval_seconds : 0.2;
        ceiling = interval < l->client->options.max_backoff_seconds
                      ? interval : l->client->options.max_backoff_seconds;
        if (!lost && left > 0 && left / 3 < ceiling) {
            ceiling = left / 3 > 0.05 ? left / 3 : 0.05;
        }
    }
    return sl_backoff_delay(l->client, failures - 1, retry_after, ceiling);
}

/* The seat is gone: said once at WARNING, on_lost once. refused: the server's refusal that
 * ended it (a 403 of the term, a 401, a 404), said here so that the same refusal of the
 * re-acquire that follows is not said again. */
static void lose(seatlease_lease *l, const char *reason, const seatlease_error *refused) {
    pthread_mutex_lock(&l->mu);
    if (l->info.lost || stopped(l)) {
        pthread_mutex_unlock(&l->mu);
        return;
    }
    l->info.lost = 1;
    copy_text(l->info.lost_reason, sizeof l->info.lost_reason, reason);
    l->info.idle_reclaim_at = 0;
    int idle = strcmp(reason, "idle") == 0;
    if (idle) {
        l->lost_idle_at = sl_mono_now();
        l->woken = 0;
    }
    pthread_mutex_unlock(&l->mu);
    if (idle) {
        sl_log(l->client, SEATLEASE_LOG_WARNING,
               "seatlease: seat on %s lost (idle); asked for again once in use", l->license_id);
    } else if (refused == NULL) {
        sl_log(l->client, SEATLEASE_LOG_WARNING, "seatlease: seat on %s lost (%s); re-acquiring",
               l->license_id, reason);
    } else {
        copy_text(l->announced, sizeof l->announced, refused->server_code);
        sl_log(l->client, SEATLEASE_LOG_WARNING, "seatlease: seat on %s lost: %s (%s)",
               l->license_id, refused->message, refused->server_code);
    }
    if (l->on_lost != NULL) {
        l->on_lost(l, reason, l->user_data);
    }
}

/* A refused re-acquire: at WARNING the first time for its code, at INFO after (a refusal
 * that lasts, an ended term, must not fill the product's log). */
static void say_refused(seatlease_lease *l, const seatlease_error *refused) {
    int said = strcmp(l->announced, refused->server_code) == 0;
    copy_text(l->announced, sizeof l->announced, refused->server_code);
    sl_log(l->client, said ? SEATLEASE_LOG_INFO : SEATLEASE_LOG_WARNING,
           "seatlease: re-acquire of %s refused: %s (%s)", l->license_id, refused->message,
           refused->server_code);
}

/* After a 410 "unknown" (the server does not know the session: it may have lost its last
 * writes with a region), the same heartbeat once more with the lease's last token, which
 * the server may take as proof of the seat; a fresh request_id (it is not a retry of the
 * refused one). Nonzero when renewed: the seat is kept. Only then is the token sent (a
 * normal heartbeat does not carry its 400 bytes; nor after "expired" or "revoked": an
 * operator's revoke is final, its token refused). */
static int recover(seatlease_lease *l, const char *session_id) {
    pthread_mutex_lock(&l->mu);
    char *token = sl_strdup(l->last_token);
    pthread_mutex_unlock(&l->mu);
    if (token == NULL || stopped(l)) {
        free(token);
        return 0;
    }
    cJSON *body = cJSON_CreateObject();
    int ok = body != NULL && cJSON_AddStringToObject(body, "license_id", l->license_id) &&
             cJSON_AddStringToObject(body, "session_id", session_id) &&
             cJSON_AddStringToObject(body, "lease_token", token);
    free(token);
    cJSON *reply = NULL;
    int status = 0;
    seatlease_error *refused = NULL;
    double sent_at = sl_mono_now();
    seatlease_code code = ok ? sl_call(l->client, "heartbeat", body, 0, 0, &l->stopper, &reply,
                                       &status, &refused)
                             : SEATLEASE_ERR_NO_MEMORY;
    cJSON_Delete(body);
    if (code != SEATLEASE_OK) {
        sl_log(l->client, SEATLEASE_LOG_INFO, "seatlease: %s not re-admitted by its token: %s",
               l->license_id, refused != NULL ? refused->message : "out of memory");
        seatlease_error_free(refused);
        return 0;
    }
    took(l, reply, sent_at);
    cJSON_Delete(reply);
    sl_log(l->client, SEATLEASE_LOG_INFO, "seatlease: seat on %s re-admitted by its token",
           l->license_id);
    return 1;
}

/* The product's activity into a heartbeat's body: idle_seconds from the first touch on,
 * busy while a busy scope is open. Nonzero when out of memory. */
static int report_activity(seatlease_lease *l, cJSON *body, double now) {
    pthread_mutex_lock(&l->mu);
    int touched = l->touched, busy = l->busy;
    double idle = floor(now - l->last_touch);
    l->sent_touched = touched;
    l->sent_touch = l->last_touch;
    l->sent_busy = busy > 0;
    pthread_mutex_unlock(&l->mu);
    if (idle < 0) {
        idle = 0;
    }
    if (idle > SL_MAX_IDLE_SECONDS) {
        idle = SL_MAX_IDLE_SECONDS;
    }
    if (touched && cJSON_AddNumberToObject(body, "idle_seconds", idle) == NULL) {
        return -1;
    }
    if (busy > 0 && cJSON_AddTrueToObject(body, "busy") == NULL) {
        return -1;
    }
    return 0;
}

/* The heartbeat thread must act now, not at its next beat (under mu): activity came back
 * to a seat lost for idleness (asked for again), or a warning can be cancelled by what the
 * warned heartbeat did not say (a touch a whole second newer, or busy). Once per answer
 * (or loss): it marks the wake as sent. */
static int idle_urgent(seatlease_lease *l) {
    if (l->woken) {
        return 0;
    }
    if (l->info.lost && strcmp(l->info.lost_reason, "idle") == 0) {
        if (l->busy == 0 && !(l->touched && l->last_touch > l->lost_idle_at)) {
            return 0;
        }
    } else if (l->info.idle_reclaim_at != 0) {
        int newer = l->touched && (!l->sent_touched || l->last_touch - l->sent_touch >= 1.0);
        if (!newer && (l->busy == 0 || l->sent_busy)) {
            return 0;
        }
    } else {
        return 0;
    }
    l->woken = 1;
    return 1;
}

/* After an answer: activity that came while the warned heartbeat was on its way sends the
 * next one at once. */
static int urgent_now(seatlease_lease *l) {
    pthread_mutex_lock(&l->mu);
    int urgent = idle_urgent(l);
    pthread_mutex_unlock(&l->mu);
    return urgent;
}

/* One heartbeat; the delay to the next step in *delay. */
static seatlease_code beat(seatlease_lease *l, double *delay, seatlease_error **error) {
    cJSON *body = cJSON_CreateObject();
    seatlease_lease_info s;
    info_copy(l, &s);
    double sent_at = sl_mono_now();
    if (body == NULL || !cJSON_AddStringToObject(body, "license_id", l->license_id) ||
        !cJSON_AddStringToObject(body, "session_id", s.session_id) ||
        report_activity(l, body, sent_at) != 0) {
        cJSON_Delete(body);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    cJSON *reply = NULL;
    int status = 0;
    seatlease_error *refused = NULL;
    /* bounded by the lease's deadline too: a renewal still dripping in then is no renewal
     * (the seat is marked lost, unreachable, by its deadline, not by the stall's end) */
    pthread_mutex_lock(&l->mu);
    double left = l->valid_until - sent_at;
    double budget = l->info.lease_seconds > 0 ? (left > 0.05 ? left : 0.05) : 0; /* 0: unknown */
    pthread_mutex_unlock(&l->mu);
    seatlease_code code = sl_call(l->client, "heartbeat", body, 0, budget, &l->stopper, &reply,
                                  &status, &refused);
    cJSON_Delete(body);
    *delay = 0;
    if (code == SEATLEASE_OK) {
        double warned = took(l, reply, sent_at);
        cJSON_Delete(reply);
        failed(l, 1);
        if (warned > 0) {
            sl_log(l->client, SEATLEASE_LOG_WARNING,
                   "seatlease: seat on %s idle: reclaimed unless in use", l->license_id);
            if (l->on_idle_warning != NULL && !stopped(l)) {
                l->on_idle_warning(l, warned, l->user_data);
            }
        }
        /* activity since this heartbeat left: the next one cancels the warning now */
        *delay = urgent_now(l) ? 0 : beat_delay(l);
        return SEATLEASE_OK;
    }
    if (stopped(l) || code == SEATLEASE_ERR_BACKEND_UNAVAILABLE || code == SEATLEASE_ERR_NO_MEMORY) {
        *error = refused;
        return code;
    }
    if (code == SEATLEASE_ERR_SESSION_EXPIRED) {
        if (strcmp(refused->reason, "unknown") == 0 && recover(l, s.session_id)) {
            seatlease_error_free(refused);
            failed(l, 1);
            *delay = beat_delay(l);
            return SEATLEASE_OK;
        }
        lose(l, refused->reason, NULL);
        seatlease_error_free(refused);
        return SEATLEASE_OK; /* ask for the seat again at once */
    }
    /* 401 (key revoked), 403 (the license's term ended or has not begun), 404, a bad token
     * or answer: it cannot be renewed. (A suspended license's held seats keep renewing.) */
    lose(l, refused->server_code, refused);
    seatlease_error_free(refused);
    failed(l, 0);
    *delay = lease_backoff(l, -1, l->client->options.max_backoff_seconds);
    return SEATLEASE_OK;
}

static seatlease_code regain(seatlease_lease *l, double *delay, seatlease_error **error) {
    cJSON *body = NULL, *reply = NULL;
    seatlease_code code = lease_body(l, 0, NULL, NULL, &body, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    int status = 0;
    seatlease_error *refused = NULL;
    double sent_at = sl_mono_now();
    code = sl_call(l->client, "acquire", body, 0, 0, &l->stopper, &reply, &status, &refused);
    cJSON_Delete(body);
    *delay = 0;
    if (code != SEATLEASE_OK) {
        if (stopped(l) || code == SEATLEASE_ERR_BACKEND_UNAVAILABLE || code == SEATLEASE_ERR_NO_MEMORY) {
            *error = refused;
            return code;
        }
        if (seatlease_code_is_no_seats(code)) {
            failed(l, 1);
            *delay = sl_wait_pause(l->client, refused);
            sl_log(l->client, SEATLEASE_LOG_INFO, "seatlease: seat on %s still lost (%s); retrying in %.1f s",
                   l->license_id, refused->server_code, *delay);
        } else if (seatlease_code_is_license_suspended(code)) {
            /* the term, a suspension, entitlements: final until an operator acts */
            say_refused(l, refused);
            failed(l, 1);
            *delay = sl_uniform(SL_FINAL_REFUSAL_PAUSE, SL_FINAL_REFUSAL_PAUSE * 1.2);
        } else { /* deleted, key revoked, a bad answer: try now and then */
            say_refused(l, refused);
            failed(l, 0);
            *delay = lease_backoff(l, -1, l->client->options.max_backoff_seconds);
        }
        seatlease_error_free(refused);
        return SEATLEASE_OK;
    }
    took(l, reply, sent_at);
    cJSON_Delete(reply);
    pthread_mutex_lock(&l->mu);
    l->info.lost = 0;
    l->info.lost_reason[0] = '\0';
    pthread_mutex_unlock(&l->mu);
    l->announced[0] = '\0';
    failed(l, 1);
    sl_log(l->client, SEATLEASE_LOG_WARNING, "seatlease: seat on %s regained", l->license_id);
    if (l->on_regained != NULL && !stopped(l)) {
        l->on_regained(l, l->user_data);
    }
    *delay = beat_delay(l);
    return SEATLEASE_OK;
}

static double step(seatlease_lease *l) {
    double delay = 0;
    seatlease_error *error = NULL;
    pthread_mutex_lock(&l->mu);
    int lost = l->info.lost;
    /* reclaimed for idleness, and nobody used the product since: asking again would only
     * take the seat back from whoever needed it, to be reclaimed once more */
    int idle = lost && strcmp(l->info.lost_reason, "idle") == 0 && l->busy == 0 &&
               !(l->touched && l->last_touch > l->lost_idle_at);
    pthread_mutex_unlock(&l->mu);
    if (idle) {
        return 3600; /* woken by seatlease_lease_touch or _busy_begin */
    }
    seatlease_code code = lost ? regain(l, &delay, &error) : beat(l, &delay, &error);
    if (code == SEATLEASE_OK || stopped(l)) {
        seatlease_error_free(error);
        return delay;
    }
    failed(l, 0);
    double retry_after = error != NULL ? error->backend_retry_after : -1;
    if (code == SEATLEASE_ERR_BACKEND_UNAVAILABLE) {
        pthread_mutex_lock(&l->mu);
        int past = !l->info.lost && sl_mono_now() > l->valid_until;
        pthread_mutex_unlock(&l->mu);
        if (past) {
            lose(l, "unreachable", NULL); /* no renewal reached the server before the deadline */
        }
        sl_log(l->client, SEATLEASE_LOG_INFO, "seatlease: %s unreachable (%s); retrying",
               l->license_id, error != NULL ? error->message : "");
    } else {
        retry_after = -1;
    }
    seatlease_error_free(error);
    return lease_backoff(l, retry_after, 0);
}

static void *keep(void *argument) {
    seatlease_lease *l = argument;
    double delay = beat_delay(l);
    while (!sl_sleep(&l->stopper, delay)) {
        delay = step(l);
    }
    return NULL;
}

/* -- the public calls ----------------------------------------------------------------------- */

static void lease_destroy(seatlease_lease *l) {
    sl_client_unref(l->client);
    sl_stopper_destroy(&l->stopper);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->release_mu);
    free(l->license_id);
    free(l->client_id);
    free(l->metadata_json);
    free(l->user);
    free(l->host);
    free(l->fingerprint);
    free(l->version);
    sl_strings_free(l->entitlements, l->entitlement_count);
    free(l->token);
    free(l->last_token);
    free(l->entitlements_json);
    free(l->max_version);
    seatlease_error_free(l->release_error);
    free(l);
}

/* The lease's own copies of what the options point to. */
static int copy_lease_options(seatlease_lease *l, const char *license_id,
                              const seatlease_lease_options *o) {
    l->license_id = sl_strdup(license_id);
    l->client_id = sl_strdup(o->client_id);
    l->metadata_json = sl_strdup(o->metadata_json);
    l->user = sl_strdup(o->user);
    l->host = sl_strdup(o->host);
    l->fingerprint = sl_strdup(o->fingerprint);
    l->version = sl_strdup(o->version);
    if (o->entitlement_count > 0 && o->entitlements == NULL) {
        return -1;
    }
    if (sl_strings_copy(o->entitlements, o->entitlement_count, &l->entitlements) != 0) {
        return -1;
    }
    l->entitlement_count = l->entitlements != NULL ? o->entitlement_count : 0;
    return !l->license_id || !l->client_id || (o->metadata_json && !l->metadata_json) ||
                   (o->user && !l->user) || (o->host && !l->host) ||
                   (o->fingerprint && !l->fingerprint) || (o->version && !l->version)
               ? -1 : 0;
}

seatlease_code seatlease_lease_acquire(seatlease_client *client, const char *license_id,
                                       const seatlease_lease_options *given,
                                       seatlease_lease **out, seatlease_error **error) {
    if (out != NULL) {
        *out = NULL;
    }
    if (client == NULL || license_id == NULL || given == NULL || out == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "client, license_id, options.client_id and lease are required.");
    }
    /* A caller built against an older header passes a shorter struct: the newer fields
     * keep their defaults. */
    seatlease_lease_options o;
    seatlease_lease_options_init(&o);
    seatlease_code code = sl_struct_in(&o, sizeof o, given, "seatlease_lease_options", error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    if (o.client_id == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "client, license_id, options.client_id and lease are required.");
    }
    if (o.entitlement_count > 0 && o.entitlements == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "entitlement_count is set but entitlements is NULL.");
    }
    seatlease_lease *l = calloc(1, sizeof *l);
    if (l == NULL) {
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    if (sl_stopper_init(&l->stopper) != 0) {
        free(l);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->release_mu, NULL);
    sl_client_ref(client);
    l->client = client;
    l->lease_seconds = o.lease_seconds;
    l->seats_asked = o.seats;
    l->seats = 1;
    l->info.seats = 1;
    l->on_lost = o.on_lost;
    l->on_regained = o.on_regained;
    l->on_idle_warning = o.on_idle_warning;
    l->user_data = o.user_data;
    if (copy_lease_options(l, license_id, &o) != 0) {
        lease_destroy(l);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    code = acquire_first(l, o.wait, o.wait_timeout_seconds, o.request_id,
                         sl_cancel_stopper(o.cancel), error);
    if (code != SEATLEASE_OK) {
        lease_destroy(l);
        return code;
    }
    if (pthread_create(&l->thread, NULL, keep, l) != 0) {
        seatlease_lease_release(l, NULL);
        lease_destroy(l);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "pthread_create failed.");
    }
    l->thread_started = 1;
    *out = l;
    return SEATLEASE_OK;
}

void seatlease_lease_get_info_sized(seatlease_lease *lease, seatlease_lease_info *info,
                                    size_t info_size) {
    if (lease == NULL || info == NULL) {
        return;
    }
    seatlease_lease_info full;
    info_copy(lease, &full);
    /* an older caller's struct gets the fields it has; a newer one zeros past ours */
    memcpy(info, &full, info_size < sizeof full ? info_size : sizeof full);
    if (info_size > sizeof full) {
        memset((char *)info + sizeof full, 0, info_size - sizeof full);
    }
}

/* Programs built against seatlease.h 0.1 call this symbol with a 0.1 struct. */
void(seatlease_lease_get_info)(seatlease_lease *lease, seatlease_lease_info *info) {
    seatlease_lease_get_info_sized(lease, info, SL_LEASE_INFO_V1_SIZE);
}

void sl_lease_heartbeat_now(seatlease_lease *lease) { sl_stopper_nudge(&lease->stopper); }

void seatlease_lease_touch(seatlease_lease *lease) { seatlease_lease_touch_ago(lease, 0); }

void seatlease_lease_touch_ago(seatlease_lease *lease, double seconds_ago) {
    if (lease == NULL) {
        return;
    }
    if (!(seconds_ago > 0)) { /* negative or NaN: now */
        seconds_ago = 0;
    }
    pthread_mutex_lock(&lease->mu);
    lease->touched = 1;
    lease->last_touch = sl_mono_now() - seconds_ago;
    int urgent = idle_urgent(lease);
    pthread_mutex_unlock(&lease->mu);
    if (urgent) {
        sl_stopper_nudge(&lease->stopper); /* wakes the thread; never waits for it */
    }
}

void seatlease_lease_busy_begin(seatlease_lease *lease) {
    if (lease == NULL) {
        return;
    }
    pthread_mutex_lock(&lease->mu);
    lease->busy++;
    int urgent = idle_urgent(lease);
    pthread_mutex_unlock(&lease->mu);
    if (urgent) {
        sl_stopper_nudge(&lease->stopper);
    }
}

void seatlease_lease_busy_end(seatlease_lease *lease) {
    if (lease == NULL) {
        return;
    }
    pthread_mutex_lock(&lease->mu);
    if (lease->busy > 0) {
        lease->busy--;
    }
    pthread_mutex_unlock(&lease->mu);
}

void sl_lease_deadline_in(seatlease_lease *lease, double seconds) {
    pthread_mutex_lock(&lease->mu);
    lease->valid_until = sl_mono_now() + seconds;
    pthread_mutex_unlock(&lease->mu);
}

int seatlease_lease_seats(seatlease_lease *lease) {
    if (lease == NULL) {
        return 1;
    }
    pthread_mutex_lock(&lease->mu);
    int seats = lease->seats;
    pthread_mutex_unlock(&lease->mu);
    return seats;
}

char *seatlease_lease_token(seatlease_lease *lease) {
    if (lease == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&lease->mu);
    char *copy = sl_strdup(lease->token);
    pthread_mutex_unlock(&lease->mu);
    return copy;
}

char *seatlease_lease_entitlements_json(seatlease_lease *lease) {
    if (lease == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&lease->mu);
    char *copy = sl_strdup(lease->entitlements_json);
    pthread_mutex_unlock(&lease->mu);
    return copy;
}

char *seatlease_lease_max_version(seatlease_lease *lease) {
    if (lease == NULL) {
        return NULL;
    }
    pthread_mutex_lock(&lease->mu);
    char *copy = sl_strdup(lease->max_version);
    pthread_mutex_unlock(&lease->mu);
    return copy;
}

/* The granted entitlements (a JSON array of strings) parsed, under the lease's lock. */
static cJSON *granted_entitlements(seatlease_lease *lease) {
    pthread_mutex_lock(&lease->mu);
    cJSON *list = lease->entitlements_json != NULL ? cJSON_Parse(lease->entitlements_json) : NULL;
    pthread_mutex_unlock(&lease->mu);
    return list;
}

int seatlease_lease_entitlement_count(seatlease_lease *lease) {
    if (lease == NULL) {
        return 0;
    }
    cJSON *list = granted_entitlements(lease);
    int count = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    cJSON_Delete(list);
    return count;
}

char *seatlease_lease_entitlement(seatlease_lease *lease, int index) {
    if (lease == NULL || index < 0) {
        return NULL;
    }
    cJSON *list = granted_entitlements(lease);
    const cJSON *item = cJSON_IsArray(list) ? cJSON_GetArrayItem(list, index) : NULL;
    char *copy = cJSON_IsString(item) ? sl_strdup(item->valuestring) : NULL;
    cJSON_Delete(list);
    return copy;
}

void seatlease_lease_license_term(seatlease_lease *lease, double *expires_at,
                                  double *grace_ends_at, int *in_grace) {
    if (lease == NULL) {
        return;
    }
    pthread_mutex_lock(&lease->mu);
    if (expires_at != NULL) {
        *expires_at = lease->license_expires_at;
    }
    if (grace_ends_at != NULL) {
        *grace_ends_at = lease->license_grace_ends_at;
    }
    if (in_grace != NULL) {
        *in_grace = lease->in_grace;
    }
    pthread_mutex_unlock(&lease->mu);
}

seatlease_code seatlease_lease_release(seatlease_lease *l, seatlease_error **error) {
    if (l == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "lease is NULL.");
    }
    if (l->thread_started && pthread_equal(pthread_self(), l->thread)) {
        /* From a callback: when another thread is releasing (and joining this one), it
         * does the work; waiting for it here would never end. */
        if (pthread_mutex_trylock(&l->release_mu) != 0) {
            sl_stopper_stop(&l->stopper);
            if (error != NULL) {
                *error = NULL;
            }
            return SEATLEASE_OK;
        }
    } else {
        pthread_mutex_lock(&l->release_mu);
    }
    if (!l->release_done) {
        l->release_done = 1;
        sl_stopper_stop(&l->stopper);
        /* From a callback (on the heartbeat thread) the thread cannot be joined here: it
         * ends when the callback returns, and seatlease_lease_free joins it. */
        if (l->thread_started && !pthread_equal(pthread_self(), l->thread)) {
            pthread_join(l->thread, NULL);
            l->thread_started = 0;
        }
        pthread_mutex_lock(&l->mu);
        l->info.released = 1;
        char session[sizeof l->info.session_id];
        memcpy(session, l->info.session_id, sizeof session);
        int lost = l->info.lost;
        pthread_mutex_unlock(&l->mu);
        l->release_code = SEATLEASE_OK;
        if (session[0] != '\0' && !lost) {
            cJSON *body = cJSON_CreateObject();
            if (body == NULL || !cJSON_AddStringToObject(body, "license_id", l->license_id) ||
                !cJSON_AddStringToObject(body, "session_id", session)) {
                l->release_code = sl_fail(&l->release_error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
            } else {
                cJSON *reply = NULL;
                int status = 0;
                l->release_code = sl_call(l->client, "release", body, -1,
                                          l->client->options.release_timeout_seconds, NULL,
                                          &reply, &status, &l->release_error);
                cJSON_Delete(reply);
                if (l->release_code != SEATLEASE_OK) {
                    sl_log(l->client, SEATLEASE_LOG_WARNING, "seatlease: release of %s failed: %s",
                           l->license_id, l->release_error ? l->release_error->message : "");
                }
            }
            cJSON_Delete(body);
        }
    }
    seatlease_code code = l->release_code;
    if (error != NULL) {
        *error = code != SEATLEASE_OK ? sl_error_copy(l->release_error) : NULL;
    }
    pthread_mutex_unlock(&l->release_mu);
    return code;
}

void seatlease_lease_free(seatlease_lease *l) {
    if (l == NULL) {
        return;
    }
    seatlease_lease_release(l, NULL);
    if (l->thread_started) {
        pthread_join(l->thread, NULL);
    }
    lease_destroy(l);
}
