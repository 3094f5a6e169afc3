/* hold: holds one seat until standard input closes.
 *
 *     hold URL API_KEY LICENSE_ID CLIENT_ID
 *
 * Acquires (verifying the signed token against URL/keys), prints one JSON line
 * {"session_id", "seats_used", "seats_total", "verified"}, heartbeats on the library's
 * background thread, and when stdin closes (Ctrl-D, or the parent closing the pipe)
 * releases the seat and exits 0. */
#include <stdio.h>
#include <string.h>

#include "seatlease.h"

static void log_line(void *user_data, int level, const char *message) {
    (void)user_data;
    fprintf(stderr, "%s: %s\n", level == SEATLEASE_LOG_WARNING ? "warning" : "info", message);
}

static void lost(seatlease_lease *lease, const char *reason, void *user_data) {
    (void)lease, (void)user_data;
    fprintf(stderr, "seat lost (%s); asking again\n", reason);
}

static int fail(const char *what, seatlease_error *error) {
    fprintf(stderr, "%s: %s (%s, HTTP %d): %s\n", what,
            seatlease_code_name(seatlease_error_code(error)), seatlease_error_server_code(error),
            seatlease_error_status(error), seatlease_error_message(error));
    seatlease_error_free(error);
    return 1;
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
    seatlease_options options;
    seatlease_options_init(&options);
    options.verify = 1; /* every answer's token checked against URL/keys (pin the vendor's keys in a product) */
    options.log = log_line;
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    int status = 0;
    if (seatlease_client_new(argv[1], argv[2], &options, &client, &error) != SEATLEASE_OK) {
        status = fail("client", error);
    } else {
        seatlease_lease_options lease_options;
        seatlease_lease_options_init(&lease_options);
        lease_options.client_id = argv[4];
        lease_options.on_lost = lost;
        seatlease_lease *lease = NULL;
        if (seatlease_lease_acquire(client, argv[3], &lease_options, &lease, &error) != SEATLEASE_OK) {
            status = fail("acquire", error);
        } else {
            seatlease_lease_info info;
            seatlease_lease_get_info(lease, &info);
            printf("{\"session_id\": \"%s\", \"seats_used\": %d, \"seats_total\": %d, \"verified\": %s}\n",
                   info.session_id, info.seats_used, info.seats_total, info.verified ? "true" : "false");
            fflush(stdout);
            char chunk[256];
            while (fread(chunk, 1, sizeof chunk, stdin) > 0) { /* until stdin closes */
            }
            if (seatlease_lease_release(lease, &error) != SEATLEASE_OK) {
                status = fail("release", error);
            }
            seatlease_lease_free(lease);
        }
        seatlease_client_free(client);
    }
    seatlease_global_cleanup();
    return status;
}
