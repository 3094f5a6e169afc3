#define _POSIX_C_SOURCE 200809L
#include "harness.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int test_failed;
int test_skipped;

double now_seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

void sleep_seconds(double seconds) {
    struct timespec pause = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
    }
}

int eventually(double within, int (*check)(void *), void *context) {
    double deadline = now_seconds() + within;
    while (!check(context)) {
        if (now_seconds() > deadline) {
            return 0;
        }
        sleep_seconds(0.05);
    }
    return 1;
}

int run_tests(const char *suite, const test_case *tests, size_t count, int argc, char **argv) {
    if (seatlease_global_init() != SEATLEASE_OK) {
        fprintf(stderr, "seatlease_global_init failed\n");
        return 1;
    }
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < count; i++) {
        if (argc > 1) {
            int wanted = 0;
            for (int a = 1; a < argc; a++) {
                wanted |= strcmp(argv[a], tests[i].name) == 0;
            }
            if (!wanted) {
                continue;
            }
        }
        test_failed = test_skipped = 0;
        double started = now_seconds();
        tests[i].run();
        const char *outcome = test_failed ? "FAIL" : test_skipped ? "SKIP" : "PASS";
        printf("--- %s: %s (%.2fs)\n", outcome, tests[i].name, now_seconds() - started);
        fflush(stdout);
        failed += test_failed;
        skipped += !test_failed && test_skipped;
        passed += !test_failed && !test_skipped;
    }
    seatlease_global_cleanup();
    printf("seatlease-c %s: %d passed, %d failed, %d skipped\n", suite, passed, failed, skipped);
    /* 77: ctest's SKIP_RETURN_CODE (CMakeLists.txt): a suite that skipped is "Skipped" */
    return failed ? 1 : skipped ? 77 : 0;
}

const char *served_url(void) {
    const char *url = getenv("SEATLEASE_TEST_URL");
    return url && url[0] ? url : NULL;
}

const char *bad_url(void) {
    const char *url = getenv("SEATLEASE_BAD_URL");
    return url && url[0] ? url : NULL;
}

const char *served_key(void) {
    const char *key = getenv("SEATLEASE_TEST_API_KEY");
    return key && key[0] ? key : NULL;
}

typedef struct {
    char *data;
    size_t length;
} buffer;

static size_t collect(char *chunk, size_t size, size_t count, void *user) {
    buffer *b = user;
    char *grown = realloc(b->data, b->length + size * count + 1);
    if (grown == NULL) {
        return 0;
    }
    b->data = grown;
    memcpy(b->data + b->length, chunk, size * count);
    b->length += size * count;
    b->data[b->length] = '\0';
    return size * count;
}

cJSON *fetch_json(const char *url, const char *body_json) {
    CURL *curl = curl_easy_init();
    buffer b = {NULL, 0};
    struct curl_slist *headers = curl_slist_append(NULL, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 30L);
    if (body_json != NULL) {
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body_json);
    }
    CURLcode result = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    if (result != CURLE_OK || status != 200) {
        fprintf(stderr, "%s: %s, status %ld\n", url, curl_easy_strerror(result), status);
        free(b.data);
        exit(2);
    }
    cJSON *parsed = cJSON_Parse(b.data);
    free(b.data);
    return parsed;
}

cJSON *control(const char *action, const char *body_json) {
    char url[1024];
    snprintf(url, sizeof url, "%s/_test/%s", served_url(), action);
    return fetch_json(url, body_json);
}

void make_license(const char *license_id, const char *fields_json) {
    cJSON *body = cJSON_Parse(fields_json ? fields_json : "{}");
    cJSON_AddStringToObject(body, "license_id", license_id);
    char *text = cJSON_PrintUnformatted(body);
    cJSON_Delete(control("license", text));
    cJSON_free(text);
    cJSON_Delete(body);
}

cJSON *live(const char *license_id) {
    char action[256];
    snprintf(action, sizeof action, "live?license_id=%s", license_id);
    return control(action, NULL);
}

int live_count(const char *license_id) {
    cJSON *seats = live(license_id);
    int count = cJSON_GetArraySize(seats);
    cJSON_Delete(seats);
    return count;
}

cJSON *requests(const char *path) {
    cJSON *all = control("log", NULL), *matching = cJSON_CreateArray(), *entry;
    cJSON_ArrayForEach(entry, all) {
        cJSON *p = cJSON_GetObjectItemCaseSensitive(entry, "path");
        if (cJSON_IsString(p) && strcmp(p->valuestring, path) == 0) {
            cJSON_AddItemToArray(matching, cJSON_Duplicate(entry, 1));
        }
    }
    cJSON_Delete(all);
    return matching;
}

/* The keys of one environment variable, split once and kept for the process. */
typedef struct {
    const char *env;
    char text[1024];
    const char *keys[8];
    size_t count;
} pinned_set;

size_t pin_from_env(seatlease_options *options, const char *env) {
    static pinned_set sets[4];
    pinned_set *set = NULL;
    for (size_t i = 0; i < sizeof sets / sizeof sets[0] && set == NULL; i++) {
        if (sets[i].env == NULL) {
            sets[i].env = env;
            const char *value = getenv(env);
            snprintf(sets[i].text, sizeof sets[i].text, "%s", value ? value : "");
            char *saved = NULL;
            for (char *key = strtok_r(sets[i].text, ",", &saved); key != NULL && sets[i].count < 8;
                 key = strtok_r(NULL, ",", &saved)) {
                sets[i].keys[sets[i].count++] = key;
            }
        }
        if (strcmp(sets[i].env, env) == 0) {
            set = &sets[i];
        }
    }
    if (set == NULL || set->count == 0) {
        options->insecure_skip_verify = 1;
        return 0;
    }
    options->pinned_keys = set->keys;
    options->pinned_key_count = set->count;
    return set->count;
}
