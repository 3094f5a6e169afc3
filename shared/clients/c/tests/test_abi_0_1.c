/* A program built against seatlease.h 0.1 (tests/abi/seatlease-0.1.h, the header as it
 * shipped: its structs are smaller than today's) runs on this library: its option structs
 * are taken with the defaults past their end, and the 0.1 entry points fill its structs
 * without writing past them. Each struct lives in a heap block of exactly its 0.1 size, so
 * AddressSanitizer reports any byte written or read beyond. Run by ctest against the fake
 * server's "weights" scenario (SEATLEASE_BAD_URL). It prints the harness's lines itself:
 * the harness speaks today's header. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "seatlease-0.1.h"

static int failures;

#define EXPECT(cond)                                                                       \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #cond);      \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static void old_program(const char *url) {
    seatlease_options *options = malloc(sizeof *options);
    seatlease_options_init(options);
    EXPECT(options->struct_size == sizeof *options && options->timeout_seconds == 10);
    options->retries = 0;
    seatlease_client *client = NULL;
    seatlease_error *error = NULL;
    /* 0.3 verifies by default: an old program that pins no key is refused (it cannot
     * name insecure_skip_verify: its struct ends before it) */
    EXPECT(seatlease_client_new(url, "sl_test", options, &client, &error) == SEATLEASE_ERR_ARGUMENT);
    EXPECT(error != NULL && strstr(seatlease_error_message(error), "insecure_skip_verify") != NULL);
    seatlease_error_free(error);
    error = NULL;
    const char *pinned[] = {getenv("SEATLEASE_BAD_PINNED_KEY")};
    options->pinned_keys = pinned;
    options->pinned_key_count = pinned[0] != NULL ? 1 : 0;
    EXPECT(seatlease_client_new(url, "sl_test", options, &client, &error) == SEATLEASE_OK);
    free(options);
    if (client == NULL) {
        fprintf(stderr, "client: %s\n", seatlease_error_message(error));
        seatlease_error_free(error);
        return;
    }
    seatlease_acquire_options *acquire = malloc(sizeof *acquire);
    seatlease_acquire_options_init(acquire);
    EXPECT(acquire->struct_size == sizeof *acquire);
    acquire->seats = 2;
    seatlease_answer *answer = NULL;
    EXPECT(seatlease_acquire(client, "lic", "pc-old", acquire, &answer, NULL) == SEATLEASE_OK);
    EXPECT(seatlease_answer_seats(answer) == 2); /* the weights scenario echoes it */
    seatlease_answer_free(answer);
    free(acquire);

    seatlease_lease_options *lease_options = malloc(sizeof *lease_options);
    seatlease_lease_options_init(lease_options);
    lease_options->client_id = "pc-old";
    lease_options->seats = 3;
    seatlease_lease *lease = NULL;
    EXPECT(seatlease_lease_acquire(client, "lic", lease_options, &lease, NULL) == SEATLEASE_OK);
    free(lease_options);
    seatlease_lease_info *info = malloc(sizeof *info);
    seatlease_lease_get_info(lease, info);
    EXPECT(strcmp(info->session_id, "c2Vzc2lvbi0wMDAwMDAwMDAx") == 0);
    EXPECT(info->seats_used == 1 && info->seats_total == 2 && !info->lost && info->verified);
    free(info);
    EXPECT(seatlease_lease_seats(lease) == 3);
    seatlease_lease_free(lease);
    seatlease_client_free(client);
}

int main(void) {
    const char *url = getenv("SEATLEASE_BAD_URL");
    if (seatlease_global_init() != SEATLEASE_OK) {
        return 1;
    }
    int skipped = url == NULL || url[0] == '\0';
    if (skipped) {
        fprintf(stderr, "skipped: SEATLEASE_BAD_URL not set: run through pytest tests/test_client_c.py\n");
        printf("--- SKIP: a_program_built_against_0_1_runs_on_this_library\n");
    } else {
        char scenario[512];
        snprintf(scenario, sizeof scenario, "%s/weights", url);
        old_program(scenario);
        printf("--- %s: a_program_built_against_0_1_runs_on_this_library\n", failures ? "FAIL" : "PASS");
    }
    seatlease_global_cleanup();
    printf("seatlease-c abi: %d passed, %d failed, %d skipped\n", !skipped && !failures,
           failures ? 1 : 0, skipped);
    return failures ? 1 : skipped ? 77 : 0; /* 77: ctest's SKIP_RETURN_CODE */
}
