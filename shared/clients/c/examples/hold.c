/* hold: holds one seat until standard input closes.
 *
 *     hold URL API_KEY LICENSE_ID CLIENT_ID
 *
 * Acquires, verifying the signed lease token against the vendor's keys pinned in
 * SEATLEASE_PINNED_KEYS (their JWK "x", comma separated), prints one JSON line
 *     {"session_id": "...", "seats_used": 1, "seats_total": 3, "seats": 1, "verified": true}
 * heartbeats on the library's background thread, and when stdin closes (Ctrl-D, or the
 * parent closing the pipe) releases the seat and exits 0. Without SEATLEASE_PINNED_KEYS it
 * takes no seat: one line on stderr and exit status 2, unless the loud opt-out
 * SEATLEASE_INSECURE_SKIP_VERIFY=1 is set (for tests only: "verified": false, nothing was
 * verified). A refused seat is one line on stderr and exit status 1. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seatlease.h"

#define MAX_PINNED 16

static void log_line(void *user_data, int level, const char *message) {
    (void)user_data;
    if (level >= SEATLEASE_LOG_WARNING) { /* retries are the library's business */
        fprintf(stderr, "warning: %s\n", message);
    }
}

static void lost(seatlease_lease *lease, const char *reason, void *user_data) {
    (void)lease, (void)user_data;
    fprintf(stderr, "seat lost (%s); asking again\n", reason);
}

/* One line, the same in every language's hold: "hold: <code>: <message>" (the server's
 * code, or the library's name for a failure with none). */
static int fail(const char *what, seatlease_error *error) {
    const char *code = seatlease_error_server_code(error);
    (void)what;
    fprintf(stderr, "hold: %s: %s\n", code && *code ? code : seatlease_code_name(seatlease_error_code(error)),
            seatlease_error_message(error));
    seatlease_error_free(error);
    return 1;
}

/* SEATLEASE_PINNED_KEYS split at its commas, in place; the number of keys. */
static size_t pinned_from_env(char *keys, const char *pinned[MAX_PINNED]) {
    size_t count = 0;
    for (char *key = strtok(keys, ", "); key != NULL && count < MAX_PINNED; key = strtok(NULL, ", ")) {
        pinned[count++] = key;
    }
    return count;
}

/* The canonical line, as Python's json.dumps writes it (session ids are base64url). */
static void print_held(seatlease_lease *lease) {
    seatlease_lease_info info;
    seatlease_lease_get_info(lease, &info);
    const char *verified = info.verified ? "true" : "false";
    printf("{\"session_id\": \"%s\", \"seats_used\": %d, \"seats_total\": %d, \"seats\": %d, "
           "\"verified\": %s}\n",
           info.session_id, info.seats_used, info.seats_total, info.seats, verified);
    fflush(stdout);
}

static int hold(seatlease_client *client, const char *license_id, const char *client_id) {
    seatlease_lease_options lease_options;
    seatlease_lease_options_init(&lease_options);
    lease_options.client_id = client_id;
    lease_options.on_lost = lost;
    seatlease_lease *lease = NULL;
    seatlease_error *error = NULL;
    if (seatlease_lease_acquire(client, license_id, &lease_options, &lease, &error) != SEATLEASE_OK) {
        return fail("acquire", error);
    }
    print_held(lease);
    char chunk[256];
    while (fread(chunk, 1, sizeof chunk, stdin) > 0) { /* until stdin closes */
    }
    int status = 0;
    if (seatlease_lease_release(lease, &error) != SEATLEASE_OK) {
        status = fail("release", error);
    }
    seatlease_lease_free(lease);
    return status;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: hold URL API_KEY LICENSE_ID CLIENT_ID\n");
        return 2;
    }
    if (seatlease_global_init() != SEATLEASE_OK) {
        fprintf(stderr, "seatlease_global_init failed\n");
        return 1;
    }
    const char *env = getenv("SEATLEASE_PINNED_KEYS");
    char *keys = env != NULL ? strdup(env) : NULL;
    const char *pinned[MAX_PINNED];
    size_t pinned_count = keys != NULL ? pinned_from_env(keys, pinned) : 0;
    const char *insecure = getenv("SEATLEASE_INSECURE_SKIP_VERIFY");
    int skip_verify = pinned_count == 0 && insecure != NULL && strcmp(insecure, "1") == 0;
    if (pinned_count == 0 && !skip_verify) {
        fprintf(stderr, "hold: set SEATLEASE_PINNED_KEYS to the vendor's keys (the JWKS's \"x\", "
                        "comma separated); no seat taken\n");
        free(keys);
        seatlease_global_cleanup();
        return 2;
    }
    seatlease_options options;
    seatlease_options_init(&options);
    /* every answer's token checked against the pinned keys (verified by default) */
    options.pinned_keys = pinned;
    options.pinned_key_count = pinned_count;
    options.insecure_skip_verify = skip_verify; /* tests only: anyone could grant the seat */
    options.log = log_line;
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    int status;
    if (seatlease_client_new(argv[1], argv[2], &options, &client, &error) != SEATLEASE_OK) {
        status = fail("client", error);
    } else {
        status = hold(client, argv[3], argv[4]);
        seatlease_client_free(client);
    }
    free(keys);
    seatlease_global_cleanup();
    return status;
}
