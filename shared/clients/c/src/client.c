/* The client of libseatlease: options, HTTP (libcurl), retries, the plain calls. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <curl/curl.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#if LIBCURL_VERSION_NUM < 0x075500
#error "libseatlease needs libcurl 7.85 or newer (CURLOPT_PROTOCOLS_STR)"
#endif

#define SL_MAX_BODY (1024 * 1024) /* a bigger answer is refused (invalid_response) */
/* How soon a cancel (or a lease's release) ends a transfer in flight: the longest wait
 * for the network between two looks at the call's stopper. */
#define SL_STOP_POLL_MS 50

seatlease_code seatlease_global_init(void) {
    if (sodium_init() < 0) {
        return SEATLEASE_ERR_NO_MEMORY;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        return SEATLEASE_ERR_NO_MEMORY;
    }
    return SEATLEASE_OK;
}

void seatlease_global_cleanup(void) { curl_global_cleanup(); }

static void options_defaults(seatlease_options *o) {
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->timeout_seconds = 10;
    o->retries = 5;
    o->backoff_seconds = 0.5;
    o->max_backoff_seconds = 30;
    o->max_wait_poll_seconds = 30;
    o->release_timeout_seconds = 5;
    o->verify = 1; /* verified by default (0.3): pinned keys, or insecure_skip_verify */
    o->token_leeway_seconds = 60;
}

void seatlease_options_init_sized(seatlease_options *o, size_t size) {
    seatlease_options defaults;
    options_defaults(&defaults);
    sl_struct_init(o, size, &defaults, sizeof defaults);
}

/* Programs built against seatlease.h 0.1 call this symbol with a 0.1 struct. */
void(seatlease_options_init)(seatlease_options *o) {
    seatlease_options_init_sized(o, SL_OPTIONS_V1_SIZE);
}

void seatlease_acquire_options_init_sized(seatlease_acquire_options *o, size_t size) {
    seatlease_acquire_options defaults;
    memset(&defaults, 0, sizeof defaults);
    defaults.struct_size = sizeof defaults;
    sl_struct_init(o, size, &defaults, sizeof defaults);
}

void(seatlease_acquire_options_init)(seatlease_acquire_options *o) {
    seatlease_acquire_options_init_sized(o, SL_ACQUIRE_OPTIONS_V1_SIZE);
}

void sl_log(seatlease_client *client, int level, const char *format, ...) {
    if (client->options.log == NULL) {
        return;
    }
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    client->options.log(client->options.log_user_data, level, message);
}

/* -- HTTP ------------------------------------------------------------------------------- */

typedef struct {
    char *data;
    size_t length, capacity;
    int too_big;
    double retry_after; /* the Retry-After header in seconds; -1: none */
    char location[512]; /* a redirect's Location ("" when none) */
} sl_exchange;

static size_t on_body(char *chunk, size_t size, size_t count, void *user) {
    sl_exchange *exchange = user;
    size_t bytes = size * count;
    if (exchange->length + bytes > SL_MAX_BODY) {
        exchange->too_big = 1;
        return 0; /* ends the transfer */
    }
    if (exchange->length + bytes + 1 > exchange->capacity) {
        size_t capacity = exchange->capacity ? exchange->capacity : 4096;
        while (capacity < exchange->length + bytes + 1) {
            capacity *= 2;
        }
        char *grown = realloc(exchange->data, capacity);
        if (grown == NULL) {
            return 0;
        }
        exchange->data = grown;
        exchange->capacity = capacity;
    }
    memcpy(exchange->data + exchange->length, chunk, bytes);
    exchange->length += bytes;
    exchange->data[exchange->length] = '\0';
    return bytes;
}

/* Nonzero when line starts with name (lowercase, with its colon), case-insensitively. */
static int header_is(const char *line, size_t bytes, const char *name) {
    size_t length = strlen(name);
    if (bytes < length) {
        return 0;
    }
    for (size_t i = 0; i < length; i++) {
        char c = line[i];
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if (c != name[i]) {
            return 0;
        }
    }
    return 1;
}

static size_t on_header(char *line, size_t size, size_t count, void *user) {
    sl_exchange *exchange = user;
    size_t bytes = size * count;
    if (header_is(line, bytes, "location:")) {
        size_t start = 9, end = bytes;
        while (start < end && (line[start] == ' ' || line[start] == '\t')) {
            start++;
        }
        while (end > start && (line[end - 1] == '\r' || line[end - 1] == '\n' ||
                               line[end - 1] == ' ')) {
            end--;
        }
        size_t length = end - start < sizeof exchange->location - 1
                            ? end - start : sizeof exchange->location - 1;
        memcpy(exchange->location, line + start, length);
        exchange->location[length] = '\0';
        return bytes;
    }
    static const char name[] = "retry-after:";
    if (bytes > sizeof name && bytes < 64) {
        char copy[64];
        memcpy(copy, line, bytes);
        copy[bytes] = '\0';
        int matches = 1;
        for (size_t i = 0; i + 1 < sizeof name; i++) {
            char c = copy[i];
            if (c >= 'A' && c <= 'Z') {
                c = (char)(c - 'A' + 'a');
            }
            if (c != name[i]) {
                matches = 0;
                break;
            }
        }
        if (matches) {
            char *end = NULL;
            double seconds = strtod(copy + sizeof name - 1, &end);
            /* integer seconds; an HTTP date from a proxy is ignored */
            if (end != copy + sizeof name - 1 && seconds >= 0 && seconds < 86400) {
                exchange->retry_after = seconds;
            }
        }
    }
    return bytes;
}

/* -- the client's connections ------------------------------------------------------------
 * One connection reused per client: each exchange borrows an idle (easy, multi) pair from
 * the client's pool, whose multi handle keeps the connection (and its TLS session) open
 * for the next exchange, and gives it back. A client used by one thread at a time (the
 * product's calls, a lease's heartbeats) has one pair, so one connection; threads calling
 * at the same moment each get a pair of their own (at most SL_POOL_IDLE are kept). */
#define SL_POOL_IDLE 4

struct sl_handle {
    CURL *easy;
    CURLM *multi;
    struct sl_handle *next;
};

static void handle_free(sl_handle *handle) {
    if (handle != NULL) {
        curl_multi_cleanup(handle->multi);
        curl_easy_cleanup(handle->easy);
        free(handle);
    }
}

static sl_handle *handle_take(seatlease_client *client) {
    pthread_mutex_lock(&client->pool_mu);
    sl_handle *handle = client->idle;
    if (handle != NULL) {
        client->idle = handle->next;
        client->idle_count--;
    }
    pthread_mutex_unlock(&client->pool_mu);
    if (handle != NULL) {
        curl_easy_reset(handle->easy); /* its options, not its connections */
        return handle;
    }
    handle = calloc(1, sizeof *handle);
    if (handle == NULL || (handle->easy = curl_easy_init()) == NULL ||
        (handle->multi = curl_multi_init()) == NULL) {
        handle_free(handle);
        return NULL;
    }
    return handle;
}

static void handle_give_back(seatlease_client *client, sl_handle *handle) {
    pthread_mutex_lock(&client->pool_mu);
    if (client->idle_count < SL_POOL_IDLE) {
        handle->next = client->idle;
        client->idle = handle;
        client->idle_count++;
        handle = NULL;
    }
    pthread_mutex_unlock(&client->pool_mu);
    handle_free(handle);
}

void sl_client_pool_free(seatlease_client *client) {
    while (client->idle != NULL) {
        sl_handle *next = client->idle->next;
        handle_free(client->idle);
        client->idle = next;
    }
    client->idle_count = 0;
}

/* curl_easy_perform on the handle's multi (which keeps the connection for the next
 * exchange), but ended within SL_STOP_POLL_MS of the stopper's stop (a cancel handle
 * triggered, a lease released), whatever the transfer is waiting for; *stopped then. The
 * transfer's own deadline (CURLOPT_TIMEOUT_MS) covers it whole, body included. */
static CURLcode perform(sl_handle *handle, sl_stopper *stopper, int *stopped) {
    *stopped = 0;
    CURLM *multi = handle->multi;
    CURL *curl = handle->easy;
    if (curl_multi_add_handle(multi, curl) != CURLM_OK) {
        return CURLE_OUT_OF_MEMORY;
    }
    CURLcode result = CURLE_GOT_NOTHING;
    int running = 1;
    while (running) {
        if (curl_multi_perform(multi, &running) != CURLM_OK) {
            result = CURLE_OUT_OF_MEMORY;
            break;
        }
        if (running && sl_stopped(stopper)) {
            *stopped = 1;
            result = CURLE_ABORTED_BY_CALLBACK;
            break;
        }
        int wait_ms = stopper != NULL ? SL_STOP_POLL_MS : 1000; /* curl's own timers cut it */
        if (running && curl_multi_poll(multi, NULL, 0, wait_ms, NULL) != CURLM_OK) {
            result = CURLE_OUT_OF_MEMORY;
            break;
        }
    }
    if (!running) {
        int left = 0;
        const CURLMsg *message;
        while ((message = curl_multi_info_read(multi, &left)) != NULL) {
            if (message->msg == CURLMSG_DONE) {
                result = message->data.result;
            }
        }
    }
    curl_multi_remove_handle(multi, curl);
    return result;
}

/* One request. On success *status and the body (exchange->data, may be NULL). */
static seatlease_code http_exchange(seatlease_client *client, const char *url, const char *body,
                                    int with_key, double timeout, sl_stopper *stopper,
                                    sl_exchange *exchange, long *status, seatlease_error **error) {
    memset(exchange, 0, sizeof *exchange);
    exchange->retry_after = -1;
    if (sl_stopped(stopper)) {
        return sl_fail(error, SEATLEASE_ERR_CANCELLED, 0, "cancelled", "The call was cancelled.");
    }
    sl_handle *handle = handle_take(client);
    if (handle == NULL) {
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "curl_easy_init failed.");
    }
    CURL *curl = handle->easy;
    struct curl_slist *headers = NULL, *grown;
    char authorization[1100];
    const char *lines[] = {"Content-Type: application/json", "Accept: application/json",
                           "Expect:", NULL};
    for (int i = 0; lines[i] != NULL; i++) {
        if ((grown = curl_slist_append(headers, lines[i])) == NULL) {
            goto no_memory;
        }
        headers = grown;
    }
    if (with_key) {
        snprintf(authorization, sizeof authorization, "Authorization: Bearer %s", client->api_key);
        grown = curl_slist_append(headers, authorization);
        sodium_memzero(authorization, sizeof authorization);
        if (grown == NULL) {
            goto no_memory;
        }
        headers = grown;
    }
    long timeout_ms = (long)(timeout * 1000);
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "seatlease-c/" SEATLEASE_VERSION);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms > 1 ? timeout_ms : 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L); /* the key never reaches another host */
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, exchange);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, exchange);
    if (client->ca_info != NULL) {
        curl_easy_setopt(curl, CURLOPT_CAINFO, client->ca_info);
    }
    if (client->ca_path != NULL) {
        curl_easy_setopt(curl, CURLOPT_CAPATH, client->ca_path);
    }
    if (client->proxy != NULL) {
        curl_easy_setopt(curl, CURLOPT_PROXY, client->proxy); /* "": none, not even the environment's */
    } else if (client->loopback) {
        curl_easy_setopt(curl, CURLOPT_NOPROXY, "*"); /* proxies from the environment, never for loopback */
    }
    if (body != NULL) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    } else {
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
    }
    int stopped = 0;
    CURLcode result = perform(handle, stopper, &stopped);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(headers);
    handle_give_back(client, handle);
    if (result == CURLE_OK) {
        return SEATLEASE_OK;
    }
    free(exchange->data);
    exchange->data = NULL;
    if (exchange->too_big) {
        return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)*status, "invalid_response",
                       "%s answered more than %d bytes.", url, SL_MAX_BODY);
    }
    if (stopped) {
        return sl_fail(error, SEATLEASE_ERR_CANCELLED, 0, "cancelled", "The call was cancelled.");
    }
    return sl_fail(error, SEATLEASE_ERR_BACKEND_UNAVAILABLE, 0, "network_error", "%s: %s", url,
                   curl_easy_strerror(result));

no_memory:
    curl_slist_free_all(headers);
    handle_free(handle);
    return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
}

/* A fetched answer decoded: a 2xx JSON object, else the typed error. */
static seatlease_code decode_answer(const char *url, long status, sl_exchange *exchange,
                                    cJSON **payload, seatlease_error **error) {
    cJSON *decoded = sl_parse_object(exchange->data, exchange->length);
    if (status >= 300 || status < 200) {
        seatlease_code code = sl_error_from_answer(error, url, (int)status, decoded,
                                                   exchange->retry_after, exchange->location);
        cJSON_Delete(decoded);
        return code;
    }
    if (decoded == NULL) {
        return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                       "%s answered something that is not a JSON object.", url);
    }
    *payload = decoded;
    return SEATLEASE_OK;
}

seatlease_code sl_fetch_jwks(seatlease_client *client, sl_stopper *stopper, double deadline,
                             char **document, seatlease_error **error) {
    /* The fetch is a wait inside the exchange that needs the keys: it ends by that
     * exchange's deadline (a release's by its release timeout, a heartbeat's by the
     * lease's deadline), never timeout_seconds later. */
    double timeout = client->options.timeout_seconds;
    if (deadline > 0) {
        double left = deadline - sl_mono_now();
        if (left < 0.001) {
            return sl_fail(error, SEATLEASE_ERR_BACKEND_UNAVAILABLE, 0, "network_error",
                           "%s: no time left in the exchange to fetch the keys.",
                           client->jwks_url);
        }
        timeout = fmin(timeout, left);
    }
    sl_exchange exchange;
    long status = 0;
    seatlease_code code = http_exchange(client, client->jwks_url, NULL, 0, timeout, stopper,
                                        &exchange, &status, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    cJSON *payload = NULL;
    code = decode_answer(client->jwks_url, status, &exchange, &payload, error);
    cJSON_Delete(payload);
    if (code != SEATLEASE_OK) {
        free(exchange.data);
        return code;
    }
    if (exchange.data == NULL) {
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    *document = exchange.data;
    return SEATLEASE_OK;
}

static seatlease_code fetch_jwks(void *context, sl_stopper *stopper, double deadline,
                                 char **document, seatlease_error **error) {
    return sl_fetch_jwks(context, stopper, deadline, document, error);
}

/* -- the client ----------------------------------------------------------------------------- */

/* The base URL's scheme and host checked; *loopback for 127.x, localhost and [::1]. */
static int check_base_url(const char *base_url, int *loopback) {
    CURLU *parsed = curl_url();
    char *scheme = NULL, *host = NULL;
    int bad = parsed == NULL || curl_url_set(parsed, CURLUPART_URL, base_url, 0) != CURLUE_OK ||
              curl_url_get(parsed, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
              curl_url_get(parsed, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
              (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) || host[0] == '\0';
    *loopback = !bad && (strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 ||
                         strcmp(host, "[::1]") == 0);
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(parsed);
    return bad ? -1 : 0;
}

/* The client's own copies of what the options point to (they need not outlive the call). */
static int copy_option_strings(seatlease_client *client, const char *base_url,
                               const seatlease_options *o) {
    size_t length = strlen(base_url);
    while (length > 0 && base_url[length - 1] == '/') {
        length--;
    }
    client->base_url = malloc(length + 1);
    if (client->base_url == NULL) {
        return -1;
    }
    memcpy(client->base_url, base_url, length);
    client->base_url[length] = '\0';
    if (o->jwks_url != NULL) {
        client->jwks_url = sl_strdup(o->jwks_url);
    } else if ((client->jwks_url = malloc(length + 6)) != NULL) {
        snprintf(client->jwks_url, length + 6, "%s/keys", client->base_url);
    }
    if (client->jwks_url == NULL ||
        (o->tenant_id != NULL && (client->tenant_id = sl_strdup(o->tenant_id)) == NULL) ||
        (o->machine_id != NULL && (client->machine_id = sl_strdup(o->machine_id)) == NULL)) {
        return -1;
    }
    if ((o->ca_info != NULL && (client->ca_info = sl_strdup(o->ca_info)) == NULL) ||
        (o->ca_path != NULL && (client->ca_path = sl_strdup(o->ca_path)) == NULL) ||
        (o->proxy != NULL && (client->proxy = sl_strdup(o->proxy)) == NULL)) {
        return -1;
    }
    if (o->pinned_key_count > 0 && o->pinned_keys != NULL) {
        if (sl_strings_copy(o->pinned_keys, o->pinned_key_count, &client->pinned_keys) != 0) {
            return -1;
        }
        client->pinned_key_count = o->pinned_key_count;
    }
    return 0;
}

static void client_destroy(seatlease_client *client) {
    sl_verifier_free(client->verifier);
    sl_client_pool_free(client);
    pthread_mutex_destroy(&client->pool_mu);
    free(client->ca_info);
    free(client->ca_path);
    free(client->proxy);
    if (client->api_key != NULL) {
        sodium_memzero(client->api_key, strlen(client->api_key));
    }
    free(client->api_key);
    free(client->base_url);
    free(client->jwks_url);
    free(client->tenant_id);
    free(client->machine_id);
    sl_strings_free(client->pinned_keys, client->pinned_key_count);
    free(client);
}

seatlease_code seatlease_client_new(const char *base_url, const char *api_key,
                                    const seatlease_options *options, seatlease_client **out,
                                    seatlease_error **error) {
    if (out == NULL || base_url == NULL || api_key == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "base_url, api_key and client are required.");
    }
    *out = NULL;
    seatlease_options o;
    seatlease_options_init(&o);
    if (options != NULL) {
        seatlease_code code = sl_struct_in(&o, sizeof o, options, "seatlease_options", error);
        if (code != SEATLEASE_OK) {
            return code;
        }
    }
    if (strlen(api_key) > 1000 || strpbrk(api_key, "\r\n") != NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "The API key is not a key.");
    }
    int loopback = 0;
    if (check_base_url(base_url, &loopback) != 0) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "base_url must be an http:// or https:// URL.");
    }
    if (o.pinned_key_count > 0 && o.pinned_keys == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "pinned_key_count is set but pinned_keys is NULL.");
    }
    /* Verified by default: a seat is granted only by a token signed with a pinned key,
     * unless the product says loudly that anyone may grant one. */
    if (o.pinned_key_count == 0 && !o.insecure_skip_verify) {
        if (!o.verify) {
            return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, "pinned_keys_required",
                           "verify = 0 is refused: pin the vendor's key (pinned_keys: the "
                           "JWKS's \"x\") or, for tests only, set insecure_skip_verify = 1 "
                           "(then any server at the base URL can grant seats).");
        }
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, "pinned_keys_required",
                       "No pinned key: pin the vendor's key (pinned_keys: the JWKS's \"x\", "
                       "a JWK or a PEM) or, for tests only, set insecure_skip_verify = 1 (then "
                       "any server at the base URL can grant seats).");
    }
    seatlease_client *client = calloc(1, sizeof *client);
    if (client == NULL) {
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    if (pthread_mutex_init(&client->pool_mu, NULL) != 0) {
        free(client);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "pthread_mutex_init failed.");
    }
    atomic_init(&client->refs, 1);
    client->loopback = loopback;
    if ((client->api_key = sl_strdup(api_key)) == NULL ||
        copy_option_strings(client, base_url, &o) != 0) {
        client_destroy(client);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    client->options = o;
    seatlease_options *kept = &client->options;
    kept->pinned_keys = NULL; /* the copies above stand for them */
    kept->pinned_key_count = 0;
    kept->tenant_id = NULL;
    kept->jwks_url = NULL;
    kept->machine_id = NULL;
    kept->ca_info = kept->ca_path = kept->proxy = NULL;
    if (kept->timeout_seconds <= 0) kept->timeout_seconds = 10;
    if (kept->backoff_seconds <= 0) kept->backoff_seconds = 0.5;
    if (kept->max_backoff_seconds <= 0) kept->max_backoff_seconds = 30;
    if (kept->max_wait_poll_seconds <= 0) kept->max_wait_poll_seconds = 30;
    if (kept->release_timeout_seconds <= 0) kept->release_timeout_seconds = 5;
    if (kept->retries < 0) kept->retries = 0;
    if (o.pinned_key_count > 0) { /* else insecure_skip_verify: nothing verified */
        double leeway = o.token_leeway_seconds < 0 ? 0 : o.token_leeway_seconds;
        seatlease_code code = sl_verifier_new(fetch_jwks, client, o.pinned_keys,
                                              o.pinned_key_count, o.tenant_id, leeway,
                                              &client->verifier, error);
        if (code != SEATLEASE_OK) {
            client_destroy(client);
            return code;
        }
    }
    *out = client;
    return SEATLEASE_OK;
}

void sl_client_ref(seatlease_client *client) { atomic_fetch_add(&client->refs, 1); }

void sl_client_unref(seatlease_client *client) {
    if (client != NULL && atomic_fetch_sub(&client->refs, 1) == 1) {
        client_destroy(client);
    }
}

/* The product's reference goes; the leases' and borrowed seats' keep it until theirs go. */
void seatlease_client_free(seatlease_client *client) { sl_client_unref(client); }


/* -- calls ------------------------------------------------------------------------------ */

/* An optional integer of an answer: absent (or, null_ok, null) is fine, else a JSON number
 * of integral value within an int (not 60.5, not a bool, not a string). */
static int optional_integer(const cJSON *reply, const char *name, int null_ok) {
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(reply, name);
    if (item == NULL || (null_ok && cJSON_IsNull(item))) {
        return 1;
    }
    if (!cJSON_IsNumber(item)) {
        return 0;
    }
    double value = item->valuedouble;
    return isfinite(value) && value == trunc(value) && value >= -2147483648.0 &&
           value <= 2147483647.0;
}

/* The shape of a 2xx: wrong types are an invalid_response, never a crash later. A grant:
 * session_id a non-empty string, lease_expires_at a time, lease_seconds an integer >= 1,
 * heartbeat_interval_seconds an optional integer; a renewal: lease_expires_at a time,
 * session_id absent, null or the lease's, lease_seconds and heartbeat_interval_seconds
 * optional integers. The counts (seats_used, seats_total, seats): absent or null (as
 * absent: the last known value is kept), else integers. request: the body as sent. */
seatlease_code sl_check_shape(const char *fn, const cJSON *request, const cJSON *reply,
                              long status, seatlease_error **error) {
    if (status == 202) {
        if (sl_json_string(reply, "ticket") == NULL) {
            return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                           "The %s answer (202) has no ticket.", fn);
        }
        return SEATLEASE_OK;
    }
    static const char *const counts[] = {"seats_used", "seats_total", "seats", "shared_sessions", NULL};
    for (int i = 0; counts[i] != NULL; i++) {
        if (!optional_integer(reply, counts[i], 1)) {
            return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                           "The %s answer's %s is not an integer.", fn, counts[i]);
        }
    }
    if (strcmp(fn, "release") == 0) {
        if (!cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(reply, "released"))) {
            return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                           "The release answer has no released flag.");
        }
        return SEATLEASE_OK;
    }
    static const char *const numbers[] = {"lease_seconds", "heartbeat_interval_seconds", NULL};
    for (int i = 0; numbers[i] != NULL; i++) {
        if (!optional_integer(reply, numbers[i], 0)) {
            return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                           "The %s answer's %s is not an integer.", fn, numbers[i]);
        }
    }
    double deadline;
    const cJSON *warning = cJSON_GetObjectItemCaseSensitive(reply, "idle_reclaim_at");
    if (warning != NULL && !cJSON_IsNull(warning) &&
        sl_parse_time(cJSON_IsString(warning) ? warning->valuestring : NULL, &deadline) != 0) {
        return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                       "The %s answer's idle_reclaim_at is not a time.", fn);
    }
    if (sl_parse_time(sl_json_string(reply, "lease_expires_at"), &deadline) != 0) {
        return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                       "The %s answer has no lease_expires_at time.", fn);
    }
    const cJSON *lease_seconds = cJSON_GetObjectItemCaseSensitive(reply, "lease_seconds");
    const cJSON *session = cJSON_GetObjectItemCaseSensitive(reply, "session_id");
    if (strcmp(fn, "heartbeat") == 0) {
        const char *mine = sl_json_string(request, "session_id");
        int session_ok = session == NULL || cJSON_IsNull(session) ||
                         (cJSON_IsString(session) && session->valuestring[0] != '\0' &&
                          (mine == NULL || strcmp(session->valuestring, mine) == 0));
        if (!session_ok) {
            return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                           "The heartbeat answer's session_id is not the lease's.");
        }
        if (lease_seconds != NULL && lease_seconds->valuedouble < 1) {
            return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                           "The heartbeat answer's lease_seconds is not an integer >= 1.");
        }
        return SEATLEASE_OK;
    }
    if (!cJSON_IsString(session) || session->valuestring[0] == '\0') {
        return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                       "The %s answer has no session_id (a non-empty string).", fn);
    }
    if (lease_seconds == NULL || lease_seconds->valuedouble < 1) {
        return sl_fail(error, SEATLEASE_ERR_INVALID_RESPONSE, (int)status, "invalid_response",
                       "The %s answer's lease_seconds is not an integer >= 1.", fn);
    }
    return SEATLEASE_OK;
}

/* A grant refused for its token (missing, not signed by a pinned key, for another
 * audience, session or nonce) or for its shape (invalid_response) is never a seat; if a
 * server did take a seat for it, that seat is given back at once rather than held for the
 * whole lease: one release of its session (when the answer names one: a non-empty
 * string), unverified, without retries, within release_timeout_seconds (best effort).
 * Never for a transient failure (a network error, a 5xx, a JWKS that could not be
 * fetched): that grant is retried, and the server answers the retry from its store. */
static void release_refused(seatlease_client *client, const cJSON *request, const cJSON *reply,
                            const char *why) {
    const char *session = sl_json_string(reply, "session_id");
    const char *license = sl_json_string(request, "license_id");
    if (session == NULL || session[0] == '\0' || license == NULL) {
        return;
    }
    char url[2100], request_id[40];
    snprintf(url, sizeof url, "%s/release", client->base_url);
    sl_new_request_id(request_id);
    cJSON *body = cJSON_CreateObject();
    char *text = NULL;
    if (body != NULL && cJSON_AddStringToObject(body, "license_id", license) &&
        cJSON_AddStringToObject(body, "session_id", session) &&
        cJSON_AddStringToObject(body, "request_id", request_id)) {
        text = cJSON_PrintUnformatted(body);
    }
    cJSON_Delete(body);
    if (text == NULL) {
        return;
    }
    sl_exchange exchange;
    long status = 0;
    seatlease_error *failed = NULL;
    seatlease_code code = http_exchange(client, url, text, 1,
                                        client->options.release_timeout_seconds, NULL,
                                        &exchange, &status, &failed);
    cJSON_free(text);
    if (code == SEATLEASE_OK) {
        free(exchange.data);
    }
    sl_log(client, SEATLEASE_LOG_WARNING,
           "seatlease: a grant of %s was refused (%s); its session released at once (%s)",
           license, why,
           code == SEATLEASE_OK ? (status >= 200 && status < 300 ? "released" : "refused")
                                : seatlease_error_message(failed));
    seatlease_error_free(failed);
}

static seatlease_code send_once(seatlease_client *client, const char *fn, const cJSON *body,
                                const char *text, double timeout, sl_stopper *stopper,
                                cJSON **reply, int *status_out, seatlease_error **error) {
    double deadline = sl_mono_now() + timeout; /* the exchange's, the JWKS fetch included */
    char url[2100];
    snprintf(url, sizeof url, "%s/%s", client->base_url, fn);
    sl_exchange exchange;
    long status = 0;
    seatlease_code code = http_exchange(client, url, text, 1, timeout, stopper, &exchange,
                                        &status, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    cJSON *payload = NULL;
    code = decode_answer(url, status, &exchange, &payload, error);
    free(exchange.data);
    if (code != SEATLEASE_OK) {
        return code;
    }
    /* A refused grant (acquire, borrow) is released at once for its shape or its token;
     * a refused renewal is not (the lease goes on with its own session). */
    int grant = strcmp(fn, "acquire") == 0 && status != 202;
    code = sl_check_shape(fn, body, payload, status, error);
    if (code != SEATLEASE_OK && grant) {
        release_refused(client, body, payload, "invalid_response: not the shape of a grant");
    }
    /* A place in the wait queue (202) grants nothing: it carries no token to check. */
    if (code == SEATLEASE_OK && client->verifier != NULL && status != 202) {
        int fetch_failed = 0;
        code = sl_verifier_check_within(client->verifier, fn, body, payload, (int)status,
                                        stopper, deadline, &fetch_failed, NULL, error);
        if (code != SEATLEASE_OK && grant && !fetch_failed && seatlease_code_is_token_error(code)) {
            release_refused(client, body, payload, "its token did not verify");
        }
    }
    if (code != SEATLEASE_OK) {
        cJSON_Delete(payload);
        return code;
    }
    *reply = payload;
    *status_out = (int)status;
    return SEATLEASE_OK;
}

/* The pause before attempt + 1: the back-off doubling with jitter, no sooner than the
 * server's Retry-After, and never longer than the ceiling (the client's maximum back-off,
 * or less while a lease runs out): a hint of an hour must not put the product to sleep. */
double sl_backoff_delay(seatlease_client *client, int attempt, double retry_after,
                        double ceiling) {
    if (attempt < 0) {
        attempt = 0;
    }
    if (attempt > 60) {
        attempt = 60;
    }
    double delay = fmin(ceiling, client->options.backoff_seconds * pow(2, attempt));
    delay = sl_uniform(delay / 2, delay);
    return fmin(fmax(delay, retry_after), ceiling);
}

double sl_wait_pause(seatlease_client *client, const seatlease_error *denied) {
    double pause = denied != NULL && denied->retry_after > 0 ? denied->retry_after : 1;
    if (pause > client->options.max_wait_poll_seconds) {
        pause = client->options.max_wait_poll_seconds;
    }
    return sl_uniform(pause, pause * 1.2);
}

seatlease_code sl_call(seatlease_client *client, const char *fn, cJSON *body, int retries,
                       double budget, sl_stopper *stopper, cJSON **reply, int *status,
                       seatlease_error **error) {
    char request_id[40], nonce[32];
    if (sl_stopped(stopper)) { /* a cancel handle triggered before the call: nothing sent */
        return sl_fail(error, SEATLEASE_ERR_CANCELLED, 0, "cancelled", "The call was cancelled.");
    }
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(body, "request_id"))) {
        sl_new_request_id(request_id);
        if (!cJSON_AddStringToObject(body, "request_id", request_id)) {
            return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
        }
    }
    if (client->verifier != NULL && cJSON_GetObjectItemCaseSensitive(body, "nonce") == NULL) {
        sl_new_nonce(nonce);
        if (!cJSON_AddStringToObject(body, "nonce", nonce)) {
            return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
        }
    }
    char *text = cJSON_PrintUnformatted(body);
    if (text == NULL) {
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    if (retries < 0) {
        retries = client->options.retries;
    }
    double give_up = budget > 0 ? sl_mono_now() + budget : 0;
    seatlease_code code;
    for (int attempt = 0;; attempt++) {
        double timeout = client->options.timeout_seconds;
        if (give_up > 0) {
            timeout = fmin(timeout, give_up - sl_mono_now());
            if (timeout < 0.05) {
                timeout = 0.05;
            }
        }
        seatlease_error *failed = NULL;
        code = send_once(client, fn, body, text, timeout, stopper, reply, status, &failed);
        if (code != SEATLEASE_ERR_BACKEND_UNAVAILABLE || attempt >= retries) {
            sl_error_give(failed, error);
            break;
        }
        double delay = sl_backoff_delay(client, attempt, failed->backend_retry_after,
                                        client->options.max_backoff_seconds);
        if (give_up > 0 && sl_mono_now() + delay > give_up) {
            sl_error_give(failed, error);
            break;
        }
        sl_log(client, SEATLEASE_LOG_INFO, "seatlease: %s failed (%s); retry in %.2f s", fn,
               failed->message, delay);
        seatlease_error_free(failed);
        if (sl_sleep(stopper, delay)) {
            code = sl_fail(error, SEATLEASE_ERR_CANCELLED, 0, "cancelled", "The call was cancelled.");
            break;
        }
    }
    cJSON_free(text);
    return code;
}

static cJSON *string_array(const char *const *items, size_t count) {
    cJSON *array = cJSON_CreateArray();
    for (size_t i = 0; array != NULL && i < count; i++) {
        cJSON *item = items[i] != NULL ? cJSON_CreateString(items[i]) : NULL;
        if (item == NULL || !cJSON_AddItemToArray(array, item)) {
            cJSON_Delete(item);
            cJSON_Delete(array);
            return NULL;
        }
    }
    return array;
}

seatlease_code sl_acquire_body(const sl_acquire_fields *f, cJSON **out, seatlease_error **error) {
    if (f->license_id == NULL || f->client_id == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "license_id and client_id are required.");
    }
    if (f->entitlement_count > 0 && f->entitlements == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "entitlement_count is set but entitlements is NULL.");
    }
    for (size_t i = 0; i < f->entitlement_count; i++) {
        if (f->entitlements[i] == NULL) {
            return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "entitlements[%zu] is NULL.", i);
        }
    }
    cJSON *body = cJSON_CreateObject();
    int ok = body != NULL && cJSON_AddStringToObject(body, "license_id", f->license_id) &&
             cJSON_AddStringToObject(body, "client_id", f->client_id);
    if (ok && f->lease_seconds > 0) ok = cJSON_AddNumberToObject(body, "lease_seconds", f->lease_seconds) != NULL;
    if (ok && f->borrow_seconds > 0) ok = cJSON_AddNumberToObject(body, "borrow_seconds", f->borrow_seconds) != NULL;
    if (ok && f->user != NULL) ok = cJSON_AddStringToObject(body, "user", f->user) != NULL;
    if (ok && f->host != NULL) ok = cJSON_AddStringToObject(body, "host", f->host) != NULL;
    if (ok && f->queue) ok = cJSON_AddTrueToObject(body, "queue") != NULL;
    if (ok && f->ticket != NULL) ok = cJSON_AddStringToObject(body, "ticket", f->ticket) != NULL;
    if (ok && f->request_id != NULL) ok = cJSON_AddStringToObject(body, "request_id", f->request_id) != NULL;
    if (ok && f->fingerprint != NULL) ok = cJSON_AddStringToObject(body, "fingerprint", f->fingerprint) != NULL;
    if (ok && f->seats > 0) ok = cJSON_AddNumberToObject(body, "seats", f->seats) != NULL;
    if (ok && f->version != NULL) ok = cJSON_AddStringToObject(body, "version", f->version) != NULL;
    if (ok && f->entitlements != NULL) {
        cJSON *entitlements = string_array(f->entitlements, f->entitlement_count);
        ok = entitlements != NULL && cJSON_AddItemToObject(body, "entitlements", entitlements);
        if (!ok) {
            cJSON_Delete(entitlements);
        }
    }
    if (!ok) {
        cJSON_Delete(body);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    if (f->metadata_json != NULL) {
        cJSON *metadata = sl_parse_object(f->metadata_json, strlen(f->metadata_json));
        if (metadata == NULL) {
            cJSON_Delete(body);
            return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "metadata_json must be a JSON object.");
        }
        cJSON_AddItemToObject(body, "metadata", metadata);
    }
    *out = body;
    return SEATLEASE_OK;
}

/* -- answers ---------------------------------------------------------------------------- */

struct seatlease_answer {
    cJSON *json;
    char *text;
    int status;
};

static seatlease_code answer_of(cJSON *reply, int status, seatlease_answer **out,
                                seatlease_error **error) {
    seatlease_answer *answer = calloc(1, sizeof *answer);
    char *printed = cJSON_PrintUnformatted(reply);
    char *text = printed ? sl_strdup(printed) : NULL;
    if (printed) {
        cJSON_free(printed);
    }
    if (answer == NULL || text == NULL) {
        free(answer);
        free(text);
        cJSON_Delete(reply);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    answer->json = reply;
    answer->text = text;
    answer->status = status;
    *out = answer;
    return SEATLEASE_OK;
}

static seatlease_code plain_call(seatlease_client *client, const char *fn, cJSON *body,
                                 sl_stopper *stopper, seatlease_answer **answer,
                                 seatlease_error **error) {
    cJSON *reply = NULL;
    int status = 0;
    seatlease_code code = sl_call(client, fn, body, -1, 0, stopper, &reply, &status, error);
    cJSON_Delete(body);
    if (code != SEATLEASE_OK) {
        return code;
    }
    if (answer == NULL) {
        cJSON_Delete(reply);
        return SEATLEASE_OK;
    }
    return answer_of(reply, status, answer, error);
}

seatlease_code seatlease_acquire(seatlease_client *client, const char *license_id,
                                 const char *client_id, const seatlease_acquire_options *given,
                                 seatlease_answer **answer, seatlease_error **error) {
    if (answer != NULL) {
        *answer = NULL;
    }
    if (client == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "client is NULL.");
    }
    /* A caller built against an older header passes a shorter struct: the newer fields
     * keep their defaults. */
    seatlease_acquire_options o;
    seatlease_acquire_options_init(&o);
    if (given != NULL) {
        seatlease_code code = sl_struct_in(&o, sizeof o, given, "seatlease_acquire_options", error);
        if (code != SEATLEASE_OK) {
            return code;
        }
    }
    sl_acquire_fields fields = {
        .license_id = license_id, .client_id = client_id, .lease_seconds = o.lease_seconds,
        .borrow_seconds = o.borrow_seconds, .metadata_json = o.metadata_json, .user = o.user,
        .host = o.host, .queue = o.queue, .ticket = o.ticket, .request_id = o.request_id,
        .fingerprint = o.fingerprint, .seats = o.seats, .entitlements = o.entitlements,
        .entitlement_count = o.entitlement_count, .version = o.version,
    };
    cJSON *body = NULL;
    seatlease_code code = sl_acquire_body(&fields, &body, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    return plain_call(client, "acquire", body, sl_cancel_stopper(o.cancel), answer, error);
}

static seatlease_code session_call(seatlease_client *client, const char *fn,
                                   const char *license_id, const char *session_id,
                                   seatlease_answer **answer, seatlease_error **error) {
    if (answer != NULL) {
        *answer = NULL;
    }
    if (client == NULL || license_id == NULL || session_id == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "client, license_id and session_id are required.");
    }
    cJSON *body = cJSON_CreateObject();
    if (body == NULL || !cJSON_AddStringToObject(body, "license_id", license_id) ||
        !cJSON_AddStringToObject(body, "session_id", session_id)) {
        cJSON_Delete(body);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    return plain_call(client, fn, body, NULL, answer, error);
}

seatlease_code seatlease_heartbeat(seatlease_client *client, const char *license_id,
                                   const char *session_id, seatlease_answer **answer,
                                   seatlease_error **error) {
    return session_call(client, "heartbeat", license_id, session_id, answer, error);
}

seatlease_code seatlease_release(seatlease_client *client, const char *license_id,
                                 const char *session_id, seatlease_answer **answer,
                                 seatlease_error **error) {
    return session_call(client, "release", license_id, session_id, answer, error);
}

static const char *answer_text(const seatlease_answer *a, const char *name) {
    const char *value = a ? sl_json_string(a->json, name) : NULL;
    return value ? value : "";
}

static int answer_flag(const seatlease_answer *a, const char *name) {
    return a != NULL && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a->json, name));
}

const char *seatlease_answer_session_id(const seatlease_answer *a) { return answer_text(a, "session_id"); }
int seatlease_answer_seats_used(const seatlease_answer *a) { return a ? sl_json_int(a->json, "seats_used", 0) : 0; }
int seatlease_answer_seats_total(const seatlease_answer *a) { return a ? sl_json_int(a->json, "seats_total", 0) : 0; }
int seatlease_answer_seats(const seatlease_answer *a) {
    int seats = a ? sl_json_int(a->json, "seats", 1) : 1;
    return seats >= 1 ? seats : 1; /* absent (an older server) or nonsense: a plain lease */
}
int seatlease_answer_lease_seconds(const seatlease_answer *a) { return a ? sl_json_int(a->json, "lease_seconds", 0) : 0; }
int seatlease_answer_heartbeat_interval_seconds(const seatlease_answer *a) { return a ? sl_json_int(a->json, "heartbeat_interval_seconds", 0) : 0; }
int seatlease_answer_released(const seatlease_answer *a) { return answer_flag(a, "released"); }
int seatlease_answer_borrowed(const seatlease_answer *a) { return answer_flag(a, "borrowed"); }
int seatlease_answer_queued(const seatlease_answer *a) { return answer_flag(a, "queued"); }
int seatlease_answer_position(const seatlease_answer *a) { return a ? sl_json_int(a->json, "position", 0) : 0; }
const char *seatlease_answer_ticket(const seatlease_answer *a) { return answer_text(a, "ticket"); }
int seatlease_answer_retry_after_seconds(const seatlease_answer *a) { return a ? sl_json_int(a->json, "retry_after_seconds", 0) : 0; }
int seatlease_answer_entitlement_count(const seatlease_answer *a) {
    const cJSON *list = a ? cJSON_GetObjectItemCaseSensitive(a->json, "entitlements") : NULL;
    return cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
}
const char *seatlease_answer_entitlement(const seatlease_answer *a, int index) {
    const cJSON *list = a ? cJSON_GetObjectItemCaseSensitive(a->json, "entitlements") : NULL;
    const cJSON *item = cJSON_IsArray(list) && index >= 0 ? cJSON_GetArrayItem(list, index) : NULL;
    return cJSON_IsString(item) ? item->valuestring : "";
}
static double answer_time(const seatlease_answer *a, const char *name) {
    double at;
    return a && sl_parse_time(sl_json_string(a->json, name), &at) == 0 ? at : 0;
}
double seatlease_answer_license_expires_at(const seatlease_answer *a) { return answer_time(a, "license_expires_at"); }
double seatlease_answer_license_grace_ends_at(const seatlease_answer *a) { return answer_time(a, "license_grace_ends_at"); }
int seatlease_answer_in_grace(const seatlease_answer *a) { return answer_flag(a, "in_grace"); }
const char *seatlease_answer_max_version(const seatlease_answer *a) { return answer_text(a, "max_version"); }
double seatlease_answer_idle_reclaim_at(const seatlease_answer *a) { return answer_time(a, "idle_reclaim_at"); }
int seatlease_answer_shared_sessions(const seatlease_answer *a) { return a ? sl_json_int(a->json, "shared_sessions", 0) : 0; }
int seatlease_answer_status(const seatlease_answer *a) { return a ? a->status : 0; }
const char *seatlease_answer_json(const seatlease_answer *a) { return a ? a->text : "{}"; }

double seatlease_answer_expires_at(const seatlease_answer *a) {
    double seconds = 0;
    if (a == NULL || sl_parse_time(sl_json_string(a->json, "lease_expires_at"), &seconds) != 0) {
        return 0;
    }
    return seconds;
}

const char *seatlease_answer_token(const seatlease_answer *a) {
    const char *token = answer_text(a, "lease_token");
    return token[0] ? token : answer_text(a, "release_token");
}

void seatlease_answer_free(seatlease_answer *answer) {
    if (answer == NULL) {
        return;
    }
    cJSON_Delete(answer->json);
    free(answer->text);
    free(answer);
}

void seatlease_string_free(char *text) { free(text); }
