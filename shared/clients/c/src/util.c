/* Errors, clocks, randomness and small JSON helpers of libseatlease. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const code_names[] = {
    "ok", "argument", "no_memory", "invalid_request", "unauthenticated", "license_suspended",
    "user_denied", "license_not_found", "no_seats_available", "user_limit_reached",
    "seat_wait_timeout", "session_expired", "backend_unavailable", "http_error",
    "invalid_response", "token_missing", "token_malformed", "token_unknown_kid",
    "token_untrusted_key", "token_bad_signature", "token_wrong_audience", "token_expired",
    "token_replayed", "token_mismatch", "cancelled", "license_not_started", "license_expired",
    "not_entitled", "version_not_entitled", "token_wrong_machine", "seats_mismatch",
    "machine_mismatch", "queue_full", "file_error",
};

const char *seatlease_version(void) { return SEATLEASE_VERSION; }

int seatlease_version_number(void) { return SEATLEASE_VERSION_NUMBER; }

const char *seatlease_code_name(seatlease_code code) {
    if ((int)code < 0 || (size_t)code >= sizeof code_names / sizeof code_names[0]) {
        return "unknown";
    }
    return code_names[code];
}

int seatlease_code_is_token_error(seatlease_code code) {
    return (code >= SEATLEASE_ERR_TOKEN_MISSING && code <= SEATLEASE_ERR_TOKEN_MISMATCH) ||
           code == SEATLEASE_ERR_TOKEN_WRONG_MACHINE;
}

int seatlease_code_is_license_suspended(seatlease_code code) {
    return code == SEATLEASE_ERR_LICENSE_SUSPENDED || code == SEATLEASE_ERR_USER_DENIED ||
           (code >= SEATLEASE_ERR_LICENSE_NOT_STARTED && code <= SEATLEASE_ERR_VERSION_NOT_ENTITLED);
}

int seatlease_code_is_no_seats(seatlease_code code) {
    return code == SEATLEASE_ERR_NO_SEATS_AVAILABLE || code == SEATLEASE_ERR_USER_LIMIT_REACHED ||
           code == SEATLEASE_ERR_QUEUE_FULL;
}

seatlease_code seatlease_machine_fingerprint(const char *machine_id, char out[65]) {
    if (machine_id == NULL || out == NULL) {
        return SEATLEASE_ERR_ARGUMENT;
    }
    static const char prefix[] = "seatlease-machine/1:";
    const char *start = machine_id;
    size_t length = strlen(machine_id);
    while (length > 0 && (*start == ' ' || *start == '\t' || *start == '\n' || *start == '\r' ||
                          *start == '\v' || *start == '\f')) {
        start++;
        length--;
    }
    while (length > 0 && (start[length - 1] == ' ' || start[length - 1] == '\t' ||
                          start[length - 1] == '\n' || start[length - 1] == '\r' ||
                          start[length - 1] == '\v' || start[length - 1] == '\f')) {
        length--;
    }
    crypto_hash_sha256_state state;
    unsigned char digest[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_init(&state);
    crypto_hash_sha256_update(&state, (const unsigned char *)prefix, sizeof prefix - 1);
    for (size_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)start[i];
        if (c >= 'A' && c <= 'Z') {
            c = (unsigned char)(c - 'A' + 'a'); /* ASCII: machine ids are hex, UUIDs, GUIDs */
        }
        crypto_hash_sha256_update(&state, &c, 1);
    }
    crypto_hash_sha256_final(&state, digest);
    sodium_bin2hex(out, 65, digest, sizeof digest);
    return SEATLEASE_OK;
}

/* When even an error cannot be allocated: a static one, which free ignores. */
static seatlease_error out_of_memory = {
    SEATLEASE_ERR_NO_MEMORY, 0, "no_memory", "Out of memory.", "{}", "", -1, -1, -1, 1, -1, -1, -1,
};

seatlease_code sl_struct_in(void *full, size_t full_size, const void *given, const char *what,
                            seatlease_error **error) {
    size_t size;
    memcpy(&size, given, sizeof size); /* struct_size, every struct's first member */
    if (size < sizeof size || size > SL_MAX_STRUCT_SIZE) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL,
                       "%s: struct_size is %zu; fill it with %s_init first.", what, size, what);
    }
    if (size > full_size) {
        /* A program built against a newer seatlease.h: fine while it sets nothing this
         * library does not know. */
        const unsigned char *tail = (const unsigned char *)given + full_size;
        for (size_t i = 0; i < size - full_size; i++) {
            if (tail[i] != 0) {
                return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL,
                               "%s: a field this library (%s) does not know is set: the program "
                               "needs a newer libseatlease.", what, SEATLEASE_VERSION);
            }
        }
        size = full_size;
    }
    memcpy(full, given, size);
    memcpy(full, &full_size, sizeof full_size);
    return SEATLEASE_OK;
}

void sl_struct_init(void *out, size_t size, const void *defaults, size_t full_size) {
    if (out == NULL || size < sizeof size) {
        return;
    }
    memcpy(out, defaults, size < full_size ? size : full_size);
    if (size > full_size) {
        memset((char *)out + full_size, 0, size - full_size);
    }
    memcpy(out, &size, sizeof size);
}

int sl_strings_copy(const char *const *items, size_t count, char ***out) {
    *out = NULL;
    if (items == NULL || count == 0) {
        return 0;
    }
    char **copy = calloc(count, sizeof *copy);
    if (copy == NULL) {
        return -1;
    }
    for (size_t i = 0; i < count; i++) {
        if (items[i] == NULL || (copy[i] = sl_strdup(items[i])) == NULL) {
            sl_strings_free(copy, count);
            return -1;
        }
    }
    *out = copy;
    return 0;
}

void sl_strings_free(char **items, size_t count) {
    if (items == NULL) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        free(items[i]);
    }
    free(items);
}

char *sl_strdup(const char *text) {
    if (text == NULL) {
        return NULL;
    }
    size_t length = strlen(text) + 1;
    char *copy = malloc(length);
    if (copy != NULL) {
        memcpy(copy, text, length);
    }
    return copy;
}

static seatlease_error *error_new(seatlease_code code, int status, const char *server_code,
                                  const char *message) {
    seatlease_error *error = calloc(1, sizeof *error);
    if (error == NULL) {
        return &out_of_memory;
    }
    error->code = code;
    error->status = status;
    error->server_code = sl_strdup(server_code != NULL ? server_code : seatlease_code_name(code));
    error->message = sl_strdup(message != NULL ? message : "");
    error->body_json = sl_strdup("{}");
    error->reason = sl_strdup("");
    error->seats_used = error->seats_total = error->retry_after = -1;
    error->seats_requested = 1;
    error->held_seats = -1;
    error->backend_retry_after = -1;
    error->queue_max = -1;
    if (!error->server_code || !error->message || !error->body_json || !error->reason) {
        seatlease_error_free(error);
        return &out_of_memory;
    }
    return error;
}

seatlease_code sl_fail(seatlease_error **out, seatlease_code code, int status,
                       const char *server_code, const char *format, ...) {
    if (out == NULL) {
        return code;
    }
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    *out = error_new(code, status, server_code, message);
    return code;
}

seatlease_error *sl_error_copy(const seatlease_error *error) {
    if (error == NULL || error == &out_of_memory) {
        return (seatlease_error *)error;
    }
    seatlease_error *copy = error_new(error->code, error->status, error->server_code,
                                      error->message);
    if (copy == &out_of_memory) {
        return copy;
    }
    char *body = sl_strdup(error->body_json), *reason = sl_strdup(error->reason);
    if (body == NULL || reason == NULL) {
        free(body);
        free(reason);
        seatlease_error_free(copy);
        return &out_of_memory;
    }
    free(copy->body_json);
    free(copy->reason);
    copy->body_json = body;
    copy->reason = reason;
    copy->seats_used = error->seats_used;
    copy->seats_total = error->seats_total;
    copy->retry_after = error->retry_after;
    copy->seats_requested = error->seats_requested;
    copy->held_seats = error->held_seats;
    copy->backend_retry_after = error->backend_retry_after;
    copy->queue_max = error->queue_max;
    return copy;
}

void sl_error_give(seatlease_error *error, seatlease_error **out) {
    if (out != NULL) {
        *out = error;
    } else {
        seatlease_error_free(error);
    }
}

void seatlease_error_free(seatlease_error *error) {
    if (error == NULL || error == &out_of_memory) {
        return;
    }
    free(error->server_code);
    free(error->message);
    free(error->body_json);
    free(error->reason);
    free(error);
}

seatlease_code seatlease_error_code(const seatlease_error *e) { return e ? e->code : SEATLEASE_OK; }
int seatlease_error_status(const seatlease_error *e) { return e ? e->status : 0; }
const char *seatlease_error_server_code(const seatlease_error *e) { return e ? e->server_code : ""; }
const char *seatlease_error_message(const seatlease_error *e) { return e ? e->message : ""; }
int seatlease_error_seats_used(const seatlease_error *e) { return e ? e->seats_used : -1; }
int seatlease_error_seats_total(const seatlease_error *e) { return e ? e->seats_total : -1; }
int seatlease_error_retry_after_seconds(const seatlease_error *e) { return e ? e->retry_after : -1; }
int seatlease_error_seats_requested(const seatlease_error *e) { return e ? e->seats_requested : 1; }
int seatlease_error_held_seats(const seatlease_error *e) { return e ? e->held_seats : -1; }
int seatlease_error_queue_max(const seatlease_error *e) { return e ? e->queue_max : -1; }
const char *seatlease_error_reason(const seatlease_error *e) { return e ? e->reason : ""; }
const char *seatlease_error_body_json(const seatlease_error *e) { return e ? e->body_json : "{}"; }

int sl_json_int(const cJSON *object, const char *name, int fallback) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    if (!cJSON_IsNumber(item)) {
        return fallback;
    }
    double value = item->valuedouble;
    if (value != trunc(value) || value < -2147483648.0 || value > 2147483647.0) {
        return fallback;
    }
    return (int)value;
}

const char *sl_json_string(const cJSON *object, const char *name) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(object, name);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

cJSON *sl_parse_object(const char *text, size_t length) {
    if (text == NULL || length == 0) {
        return NULL;
    }
    const char *end = NULL;
    cJSON *value = cJSON_ParseWithLengthOpts(text, length, &end, 0);
    if (value == NULL) {
        return NULL;
    }
    if (!cJSON_IsObject(value)) {
        cJSON_Delete(value);
        return NULL;
    }
    for (; end != NULL && end < text + length; end++) {
        if (*end != ' ' && *end != '\n' && *end != '\r' && *end != '\t') {
            cJSON_Delete(value); /* more after the object */
            return NULL;
        }
    }
    return value;
}

/* The status's kind of error, for a code this library does not know (or none). A 404 is
 * no "license not found" by its status alone (a wrong base URL, a middlebox). */
static seatlease_code code_of_status(int status) {
    switch (status) {
    case 400: return SEATLEASE_ERR_INVALID_REQUEST;
    case 401: return SEATLEASE_ERR_UNAUTHENTICATED;
    case 403: return SEATLEASE_ERR_LICENSE_SUSPENDED;
    case 409: return SEATLEASE_ERR_NO_SEATS_AVAILABLE;
    case 410: return SEATLEASE_ERR_SESSION_EXPIRED;
    case 429: case 502: case 503: case 504: return SEATLEASE_ERR_BACKEND_UNAVAILABLE;
    default: return SEATLEASE_ERR_HTTP;
    }
}

/* The server's error.code as its kind of error (SEATLEASE_OK: not one this library knows). */
static seatlease_code code_of_server_code(const char *server_code) {
    static const struct {
        const char *name;
        seatlease_code code;
    } known[] = {
        {"invalid_request", SEATLEASE_ERR_INVALID_REQUEST},
        {"unauthenticated", SEATLEASE_ERR_UNAUTHENTICATED},
        {"license_suspended", SEATLEASE_ERR_LICENSE_SUSPENDED},
        {"user_denied", SEATLEASE_ERR_USER_DENIED},
        {"license_not_started", SEATLEASE_ERR_LICENSE_NOT_STARTED},
        {"license_expired", SEATLEASE_ERR_LICENSE_EXPIRED},
        {"not_entitled", SEATLEASE_ERR_NOT_ENTITLED},
        {"version_not_entitled", SEATLEASE_ERR_VERSION_NOT_ENTITLED},
        {"license_not_found", SEATLEASE_ERR_LICENSE_NOT_FOUND},
        {"no_seats_available", SEATLEASE_ERR_NO_SEATS_AVAILABLE},
        {"user_limit_reached", SEATLEASE_ERR_USER_LIMIT_REACHED},
        {"seats_mismatch", SEATLEASE_ERR_SEATS_MISMATCH},
        {"machine_mismatch", SEATLEASE_ERR_MACHINE_MISMATCH},
        {"queue_full", SEATLEASE_ERR_QUEUE_FULL},
        {"session_expired", SEATLEASE_ERR_SESSION_EXPIRED},
        {"backend_unavailable", SEATLEASE_ERR_BACKEND_UNAVAILABLE},
        {"rate_limited", SEATLEASE_ERR_BACKEND_UNAVAILABLE},
    };
    for (size_t i = 0; server_code != NULL && i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(server_code, known[i].name) == 0) {
            return known[i].code;
        }
    }
    return SEATLEASE_OK;
}

seatlease_code sl_error_from_answer(seatlease_error **out, const char *url, int status,
                                    const cJSON *payload, double retry_after_header,
                                    const char *location) {
    const cJSON *body = cJSON_GetObjectItemCaseSensitive(payload, "error");
    if (!cJSON_IsObject(body)) {
        body = NULL;
    }
    if (url == NULL) {
        url = "the server";
    }
    if (status >= 300 && status < 400) {
        /* never followed: the API key never goes to another host */
        if (location != NULL && location[0] != '\0') {
            return sl_fail(out, SEATLEASE_ERR_HTTP, status, "redirected",
                           "%s answered a redirect (%d) to %s: redirects are not followed; "
                           "use the final URL as the base URL.", url, status, location);
        }
        return sl_fail(out, SEATLEASE_ERR_HTTP, status, "redirected",
                       "%s answered a redirect (%d) without a Location: redirects are not "
                       "followed; use the final URL as the base URL.", url, status);
    }
    const char *server_code = body ? sl_json_string(body, "code") : NULL;
    char status_code[32];
    if (server_code == NULL || server_code[0] == '\0') {
        snprintf(status_code, sizeof status_code, "http_%d", status);
        server_code = code_of_status(status) == SEATLEASE_ERR_BACKEND_UNAVAILABLE
                          ? "backend_unavailable" : status_code;
    }
    seatlease_code code = code_of_server_code(server_code);
    if (code == SEATLEASE_OK) {
        code = code_of_status(status);
    }
    char named[1024];
    if (code == SEATLEASE_ERR_HTTP && status == 404) {
        /* a wrong base URL (the service's own not_found) or a middlebox: say which URL */
        const char *said = body ? sl_json_string(body, "message") : NULL;
        snprintf(named, sizeof named, "%s answered 404 (%s)%s%s: check the base URL.", url,
                 server_code, said && said[0] ? ": " : "", said && said[0] ? said : "");
        if (body == NULL) {
            return sl_fail(out, code, status, server_code, "%s", named);
        }
    }
    const char *message = body ? sl_json_string(body, "message") : NULL;
    char fallback[64];
    if (code == SEATLEASE_ERR_HTTP && status == 404) {
        message = named;
    } else if (message == NULL || message[0] == '\0') {
        snprintf(fallback, sizeof fallback, "HTTP %d", status);
        message = fallback;
    }
    if (out == NULL) {
        return code;
    }
    seatlease_error *error = error_new(code, status, server_code, message);
    *out = error;
    if (error == &out_of_memory) {
        return code;
    }
    if (body != NULL) {
        char *text = cJSON_PrintUnformatted(body);
        if (text != NULL) {
            char *copy = sl_strdup(text);
            cJSON_free(text);
            if (copy != NULL) {
                free(error->body_json);
                error->body_json = copy;
            }
        }
        const char *reason = sl_json_string(body, "reason");
        if (reason != NULL) {
            char *copy = sl_strdup(reason);
            if (copy != NULL) {
                free(error->reason);
                error->reason = copy;
            }
        }
        error->seats_used = sl_json_int(body, "seats_used", -1);
        error->seats_total = sl_json_int(body, "seats_total", -1);
        /* the weight asked: a denial's seats_requested, a mismatch's seats */
        int asked = sl_json_int(body, "seats_requested", sl_json_int(body, "seats", 1));
        error->seats_requested = asked >= 1 ? asked : 1;
        error->held_seats = sl_json_int(body, "held_seats", -1);
        error->queue_max = sl_json_int(body, "queue_max", -1);
    }
    if (code == SEATLEASE_ERR_SESSION_EXPIRED && error->reason[0] == '\0') {
        char *unknown = sl_strdup("unknown");
        if (unknown != NULL) {
            free(error->reason);
            error->reason = unknown;
        }
    }
    const cJSON *hint = body ? cJSON_GetObjectItemCaseSensitive(body, "retry_after_seconds") : NULL;
    /* a hint beyond a day is no hint (it would only stall the retries) */
    error->backend_retry_after = cJSON_IsNumber(hint) && hint->valuedouble >= 0 &&
                                         hint->valuedouble < 86400
                                     ? hint->valuedouble : retry_after_header;
    if (status == 409) {
        int header = retry_after_header > 1 ? (int)retry_after_header : 1;
        int seconds = body ? sl_json_int(body, "retry_after_seconds", header) : header;
        error->retry_after = seconds > 1 ? seconds : 1;
    } else {
        error->retry_after = sl_json_int(body, "retry_after_seconds", -1);
    }
    return code;
}

void sl_error_set_wait_timeout(seatlease_error *error, const char *license_id, double seconds) {
    if (error == NULL || error == &out_of_memory) {
        return;
    }
    char message[256];
    snprintf(message, sizeof message, "No seat on %.120s came free within %.1f s.", license_id,
             seconds);
    char *code = sl_strdup("seat_wait_timeout"), *text = sl_strdup(message);
    if (code == NULL || text == NULL) {
        free(code);
        free(text);
        return;
    }
    free(error->server_code);
    free(error->message);
    error->server_code = code;
    error->message = text;
    error->code = SEATLEASE_ERR_SEAT_WAIT_TIMEOUT;
    error->status = 409;
}

double sl_wall_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

double sl_mono_now(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

double sl_uniform(double low, double high) {
    if (high <= low) {
        return low;
    }
    return low + (high - low) * ((double)randombytes_uniform(1000000) / 1000000.0);
}

void sl_new_nonce(char out[32]) {
    unsigned char raw[18];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2base64(out, 32, raw, sizeof raw, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}

void sl_new_request_id(char out[40]) {
    unsigned char raw[16];
    randombytes_buf(raw, sizeof raw);
    sodium_bin2hex(out, 40, raw, sizeof raw);
}

static int digits(const char *text, int count, int *value) {
    *value = 0;
    for (int i = 0; i < count; i++) {
        if (text[i] < '0' || text[i] > '9') {
            return -1;
        }
        *value = *value * 10 + (text[i] - '0');
    }
    return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static long days_from_civil(long y, unsigned m, unsigned d) {
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long)doe - 719468;
}

int sl_parse_time(const char *text, double *seconds) {
    /* YYYY-MM-DD[Tt ]HH:MM:SS(.fraction)?(Z|z|+HH:MM|-HH:MM) */
    if (text == NULL || strlen(text) < 20) {
        return -1;
    }
    int year, month, day, hour, minute, second;
    if (digits(text, 4, &year) || text[4] != '-' || digits(text + 5, 2, &month) ||
        text[7] != '-' || digits(text + 8, 2, &day) ||
        (text[10] != 'T' && text[10] != 't' && text[10] != ' ') ||
        digits(text + 11, 2, &hour) || text[13] != ':' || digits(text + 14, 2, &minute) ||
        text[16] != ':' || digits(text + 17, 2, &second)) {
        return -1;
    }
    if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 ||
        second > 60) {
        return -1;
    }
    const char *rest = text + 19;
    double fraction = 0, scale = 0.1;
    if (*rest == '.') {
        rest++;
        if (*rest < '0' || *rest > '9') {
            return -1;
        }
        while (*rest >= '0' && *rest <= '9') {
            fraction += (*rest - '0') * scale;
            scale /= 10;
            rest++;
        }
    }
    int offset = 0;
    if ((rest[0] == 'Z' || rest[0] == 'z') && rest[1] == '\0') {
        offset = 0;
    } else if ((rest[0] == '+' || rest[0] == '-') && strlen(rest) == 6 && rest[3] == ':') {
        int oh, om;
        if (digits(rest + 1, 2, &oh) || digits(rest + 4, 2, &om)) {
            return -1;
        }
        offset = (oh * 60 + om) * 60 * (rest[0] == '-' ? -1 : 1);
    } else {
        return -1;
    }
    double days = (double)days_from_civil(year, (unsigned)month, (unsigned)day);
    *seconds = days * 86400.0 + hour * 3600.0 + minute * 60.0 + second + fraction - offset;
    return 0;
}

int sl_stopper_init(sl_stopper *stopper) {
    atomic_init(&stopper->stop, 0);
    atomic_init(&stopper->nudged, 0);
    if (pthread_mutex_init(&stopper->mu, NULL) != 0) {
        return -1;
    }
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
#if !defined(__APPLE__)
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
#endif
    int failed = pthread_cond_init(&stopper->cond, &attributes);
    pthread_condattr_destroy(&attributes);
    if (failed) {
        pthread_mutex_destroy(&stopper->mu);
        return -1;
    }
    return 0;
}

void sl_stopper_destroy(sl_stopper *stopper) {
    pthread_cond_destroy(&stopper->cond);
    pthread_mutex_destroy(&stopper->mu);
}

void sl_stopper_stop(sl_stopper *stopper) {
    pthread_mutex_lock(&stopper->mu);
    atomic_store(&stopper->stop, 1);
    pthread_cond_broadcast(&stopper->cond);
    pthread_mutex_unlock(&stopper->mu);
}

void sl_stopper_nudge(sl_stopper *stopper) {
    pthread_mutex_lock(&stopper->mu);
    atomic_store(&stopper->nudged, 1);
    pthread_cond_broadcast(&stopper->cond);
    pthread_mutex_unlock(&stopper->mu);
}

int sl_stopped(sl_stopper *stopper) { return stopper != NULL && atomic_load(&stopper->stop); }

int sl_sleep(sl_stopper *stopper, double seconds) {
    if (seconds < 0) {
        seconds = 0;
    }
    if (stopper == NULL) {
        struct timespec pause = {(time_t)seconds, (long)((seconds - floor(seconds)) * 1e9)};
        while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
        }
        return 0;
    }
    struct timespec until;
#if defined(__APPLE__)
    clock_gettime(CLOCK_REALTIME, &until);
#else
    clock_gettime(CLOCK_MONOTONIC, &until);
#endif
    double at = (double)until.tv_nsec / 1e9 + seconds;
    until.tv_sec += (time_t)floor(at);
    until.tv_nsec = (long)((at - floor(at)) * 1e9);
    pthread_mutex_lock(&stopper->mu);
    while (!atomic_load(&stopper->stop) && !atomic_load(&stopper->nudged)) {
        if (pthread_cond_timedwait(&stopper->cond, &stopper->mu, &until) == ETIMEDOUT) {
            break;
        }
    }
    atomic_store(&stopper->nudged, 0);
    int stopped = atomic_load(&stopper->stop);
    pthread_mutex_unlock(&stopper->mu);
    return stopped;
}

/* -- cancel handles ------------------------------------------------------------------------ */

seatlease_code seatlease_cancel_new(seatlease_cancel **out) {
    if (out == NULL) {
        return SEATLEASE_ERR_ARGUMENT;
    }
    *out = NULL;
    seatlease_cancel *cancel = calloc(1, sizeof *cancel);
    if (cancel == NULL) {
        return SEATLEASE_ERR_NO_MEMORY;
    }
    if (sl_stopper_init(&cancel->stopper) != 0) {
        free(cancel);
        return SEATLEASE_ERR_NO_MEMORY;
    }
    *out = cancel;
    return SEATLEASE_OK;
}

void seatlease_cancel_trigger(seatlease_cancel *cancel) {
    if (cancel != NULL) {
        sl_stopper_stop(&cancel->stopper);
    }
}

int seatlease_cancel_triggered(const seatlease_cancel *cancel) {
    return cancel != NULL && atomic_load(&cancel->stopper.stop);
}

void seatlease_cancel_free(seatlease_cancel *cancel) {
    if (cancel != NULL) {
        sl_stopper_destroy(&cancel->stopper);
        free(cancel);
    }
}

sl_stopper *sl_cancel_stopper(seatlease_cancel *cancel) {
    return cancel != NULL ? &cancel->stopper : NULL;
}
