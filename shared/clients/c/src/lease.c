/* A held seat: the first acquire (waiting, in line on a license with a queue), the
 * heartbeat thread (the server's interval, faster retries as the deadline nears, a new
 * seat at once after a 410), on_lost/on_regained, and the release. As the Go client. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct seatlease_lease {
    seatlease_client *client;
    char *license_id, *client_id, *metadata_json, *user, *host, *fingerprint;
    int lease_seconds;
    int seats_asked; /* the weight sent with every acquire (0: not sent) */
    seatlease_lost_fn on_lost;
    seatlease_regained_fn on_regained;
    void *user_data;

    pthread_mutex_t mu; /* guards the fields below */
    seatlease_lease_info info;
    char *token;
    char *entitlements_json, *max_version; /* the license's terms (NULL: none given) */
    double license_expires_at, license_grace_ends_at;
    int in_grace;
    int seats; /* the lease's weight, from the last answer (1 when it does not say) */
    double valid_until; /* monotonic: the seat lapses then without a renewal */
    int failures;

    sl_stopper stopper; /* stopped by release: ends the thread and its call in flight */
    pthread_t thread;
    int thread_started;
    pthread_mutex_t release_mu;
    int release_done;
    seatlease_code release_code;
    seatlease_error *release_error;
};

void seatlease_lease_options_init(seatlease_lease_options *o) {
    if (o != NULL) {
        memset(o, 0, sizeof *o);
        o->struct_size = sizeof *o;
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
 * lease length. */
static void took(seatlease_lease *l, const cJSON *reply, double sent_at) {
    pthread_mutex_lock(&l->mu);
    seatlease_lease_info *s = &l->info;
    const char *session = sl_json_string(reply, "session_id");
    if (session != NULL) {
        copy_text(s->session_id, sizeof s->session_id, session);
    }
    double deadline;
    if (sl_parse_time(sl_json_string(reply, "lease_expires_at"), &deadline) == 0) {
        s->expires_at = deadline;
    }
    s->lease_seconds = sl_json_int(reply, "lease_seconds", 0);
    s->heartbeat_interval_seconds = sl_json_int(reply, "heartbeat_interval_seconds", 0);
    s->seats_used = sl_json_int(reply, "seats_used", 0);
    s->seats_total = sl_json_int(reply, "seats_total", 0);
    s->overage = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "overage"));
    int seats = sl_json_int(reply, "seats", 1);
    l->seats = seats >= 1 ? seats : 1;
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
}

static seatlease_code lease_body(seatlease_lease *l, int queue, const char *ticket,
                                 const char *request_id, cJSON **body, seatlease_error **error) {
    return sl_acquire_body(l->license_id, l->client_id, l->lease_seconds, 0, l->metadata_json,
                           l->user, l->host, queue, ticket, request_id, l->fingerprint,
                           l->seats_asked, body, error);
}

static seatlease_code acquire_first(seatlease_lease *l, double wait, double timeout,
                                    const char *request_id, seatlease_error **error) {
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
        code = sl_call(l->client, "acquire", body, -1, 0, NULL, &reply, &status, &denied);
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
        if (!wait || (code != SEATLEASE_ERR_NO_SEATS_AVAILABLE &&
                      code != SEATLEASE_ERR_USER_LIMIT_REACHED)) {
            if (error != NULL) {
                *error = denied;
            } else {
                seatlease_error_free(denied);
            }
            break;
        }
        double pause = sl_wait_pause(l->client, denied);
        if (give_up > 0) {
            double left = give_up - sl_mono_now();
            if (left <= 0) {
                sl_error_set_wait_timeout(denied, l->license_id, timeout);
                code = SEATLEASE_ERR_SEAT_WAIT_TIMEOUT;
                if (error != NULL) {
                    *error = denied;
                } else {
                    seatlease_error_free(denied);
                }
                break;
            }
            if (left < pause) {
                pause = left;
            }
        }
        sl_log(l->client, SEATLEASE_LOG_INFO, "seatlease: no seat on %s; retrying in %.2f s",
               l->license_id, pause);
        seatlease_error_free(denied);
        sl_sleep(NULL, pause);
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

static void lose(seatlease_lease *l, const char *reason) {
    pthread_mutex_lock(&l->mu);
    if (l->info.lost || stopped(l)) {
        pthread_mutex_unlock(&l->mu);
        return;
    }
    l->info.lost = 1;
    copy_text(l->info.lost_reason, sizeof l->info.lost_reason, reason);
    pthread_mutex_unlock(&l->mu);
    sl_log(l->client, SEATLEASE_LOG_WARNING, "seatlease: seat on %s lost (%s); re-acquiring",
           l->license_id, reason);
    if (l->on_lost != NULL) {
        l->on_lost(l, reason, l->user_data);
    }
}

/* One heartbeat; the delay to the next step in *delay. */
static seatlease_code beat(seatlease_lease *l, double *delay, seatlease_error **error) {
    cJSON *body = cJSON_CreateObject();
    seatlease_lease_info s;
    info_copy(l, &s);
    if (body == NULL || !cJSON_AddStringToObject(body, "license_id", l->license_id) ||
        !cJSON_AddStringToObject(body, "session_id", s.session_id)) {
        cJSON_Delete(body);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    cJSON *reply = NULL;
    int status = 0;
    seatlease_error *refused = NULL;
    double sent_at = sl_mono_now();
    seatlease_code code = sl_call(l->client, "heartbeat", body, 0, 0, &l->stopper, &reply,
                                  &status, &refused);
    cJSON_Delete(body);
    *delay = 0;
    if (code == SEATLEASE_OK) {
        took(l, reply, sent_at);
        cJSON_Delete(reply);
        failed(l, 1);
        *delay = beat_delay(l);
        return SEATLEASE_OK;
    }
    if (stopped(l) || code == SEATLEASE_ERR_BACKEND_UNAVAILABLE || code == SEATLEASE_ERR_NO_MEMORY) {
        *error = refused;
        return code;
    }
    if (code == SEATLEASE_ERR_SESSION_EXPIRED) {
        lose(l, refused->reason);
        seatlease_error_free(refused);
        return SEATLEASE_OK; /* ask for the seat again at once */
    }
    /* 401 (key revoked), 403, 404, a bad token or answer: it cannot be renewed */
    lose(l, refused->server_code);
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
        if (code == SEATLEASE_ERR_NO_SEATS_AVAILABLE || code == SEATLEASE_ERR_USER_LIMIT_REACHED) {
            failed(l, 1);
            *delay = sl_wait_pause(l->client, refused);
        } else { /* suspended, deleted, key revoked: try now and then */
            sl_log(l->client, SEATLEASE_LOG_INFO, "seatlease: re-acquire of %s refused: %s",
                   l->license_id, refused->message);
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
    pthread_mutex_unlock(&l->mu);
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
            lose(l, "unreachable"); /* no renewal reached the server before the deadline */
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
    sl_stopper_destroy(&l->stopper);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->release_mu);
    free(l->license_id);
    free(l->client_id);
    free(l->metadata_json);
    free(l->user);
    free(l->host);
    free(l->fingerprint);
    free(l->token);
    free(l->entitlements_json);
    free(l->max_version);
    seatlease_error_free(l->release_error);
    free(l);
}

seatlease_code seatlease_lease_acquire(seatlease_client *client, const char *license_id,
                                       const seatlease_lease_options *o,
                                       seatlease_lease **out, seatlease_error **error) {
    if (out != NULL) {
        *out = NULL;
    }
    if (client == NULL || license_id == NULL || o == NULL || out == NULL || o->client_id == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "client, license_id, options.client_id and lease are required.");
    }
    /* A caller built against an older header passes a shorter struct (before seats was
     * appended): read what it has, the newer fields stay at their defaults. */
    seatlease_lease_options full;
    if (o->struct_size < offsetof(seatlease_lease_options, seats) || o->struct_size > sizeof *o) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "seatlease_lease_options: call seatlease_lease_options_init first.");
    }
    if (o->struct_size < sizeof *o) {
        seatlease_lease_options_init(&full);
        memcpy(&full, o, o->struct_size);
        full.struct_size = sizeof full;
        o = &full;
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
    l->client = client;
    l->license_id = sl_strdup(license_id);
    l->client_id = sl_strdup(o->client_id);
    l->metadata_json = sl_strdup(o->metadata_json);
    l->user = sl_strdup(o->user);
    l->host = sl_strdup(o->host);
    l->fingerprint = sl_strdup(o->fingerprint);
    l->lease_seconds = o->lease_seconds;
    l->seats_asked = o->seats;
    l->seats = 1;
    l->on_lost = o->on_lost;
    l->on_regained = o->on_regained;
    l->user_data = o->user_data;
    if (!l->license_id || !l->client_id || (o->metadata_json && !l->metadata_json) ||
        (o->user && !l->user) || (o->host && !l->host) || (o->fingerprint && !l->fingerprint)) {
        lease_destroy(l);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    seatlease_code code = acquire_first(l, o->wait, o->wait_timeout_seconds, o->request_id, error);
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

void seatlease_lease_get_info(seatlease_lease *lease, seatlease_lease_info *info) {
    if (lease == NULL || info == NULL) {
        return;
    }
    info_copy(lease, info);
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
