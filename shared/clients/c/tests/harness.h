/* A small test runner for libseatlease's suites: named tests, CHECK, and one closing line
 * "seatlease-c SUITE: N passed, F failed, S skipped" that tests/test_client_c.py reads.
 * The live suite drives tests/client_harness.py's /_test/ routes with libcurl. */
#ifndef SEATLEASE_TEST_HARNESS_H
#define SEATLEASE_TEST_HARNESS_H

#include <cJSON.h>
#include <stdio.h>

#include "seatlease.h"

typedef struct {
    const char *name;
    void (*run)(void);
} test_case;

extern int test_failed;
extern int test_skipped;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);      \
            test_failed = 1;                                                              \
            return;                                                                       \
        }                                                                                 \
    } while (0)

#define CHECK_CODE(got, want)                                                             \
    do {                                                                                  \
        seatlease_code got_ = (got);                                                      \
        if (got_ != (want)) {                                                             \
            fprintf(stderr, "%s:%d: %s is %s, want %s\n", __FILE__, __LINE__, #got,       \
                    seatlease_code_name(got_), seatlease_code_name(want));                \
            test_failed = 1;                                                              \
            return;                                                                       \
        }                                                                                 \
    } while (0)

#define SKIP(why)                                                                         \
    do {                                                                                  \
        fprintf(stderr, "skipped: %s\n", why);                                            \
        test_skipped = 1;                                                                 \
        return;                                                                           \
    } while (0)

/* Runs the tests (all, or those named on the command line); the exit status. */
int run_tests(const char *suite, const test_case *tests, size_t count, int argc, char **argv);

/* The served functions (SEATLEASE_TEST_URL, SEATLEASE_TEST_API_KEY); NULL when unset. */
const char *served_url(void);
const char *served_key(void);
/* The fake server of bad answers and behaviours (SEATLEASE_BAD_URL); NULL when unset. */
const char *bad_url(void);
/* GET url without a body, else POST; the 200 answer's JSON (free it); exits on another. */
cJSON *fetch_json(const char *url, const char *body_json);
/* A /_test/ control route: GET without a body, else POST; the answer's JSON (free it). */
cJSON *control(const char *action, const char *body_json);
void make_license(const char *license_id, const char *fields_json);
/* The license's live seats as JSON [{"session_id", "client_id"}] (free it). */
cJSON *live(const char *license_id);
int live_count(const char *license_id);
/* The function requests logged for path ("/acquire"), as a JSON array (free it). */
cJSON *requests(const char *path);
/* Pin the keys of env (comma separated: "SEATLEASE_TEST_PINNED_KEYS", the served
 * functions', or "SEATLEASE_BAD_PINNED_KEY", the bad server's) in options (kept for the
 * process); when env is unset, the insecure opt-out. The number of keys pinned. */
size_t pin_from_env(seatlease_options *options, const char *env);
double now_seconds(void);
void sleep_seconds(double seconds);
/* Waits (up to within seconds) for check(context) to be nonzero. */
int eventually(double within, int (*check)(void *), void *context);

#endif
