/* Internal declarations of libseatlease: not installed, not part of the ABI. */
#ifndef SEATLEASE_INTERNAL_H
#define SEATLEASE_INTERNAL_H

#include "seatlease.h"

#include <cJSON.h>
#include <pthread.h>
#include <stdatomic.h>

struct seatlease_error {
    seatlease_code code;
    int status;
    char *server_code;
    char *message;
    char *body_json;
    char *reason;
    int seats_used, seats_total, retry_after;
    int seats_requested, held_seats; /* weighted seats' 409s (1 and -1 when absent) */
    double backend_retry_after; /* a 503's hint in seconds (body, then header); -1: none */
};

/* Errors: sl_fail stores a new error in *out (when out is not NULL) and returns code. */
seatlease_code sl_fail(seatlease_error **out, seatlease_code code, int status,
                       const char *server_code, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
seatlease_error *sl_error_copy(const seatlease_error *error);
seatlease_code sl_error_from_answer(seatlease_error **out, int status, const cJSON *payload,
                                    double retry_after_header);
void sl_error_set_wait_timeout(seatlease_error *error, const char *license_id, double seconds);

/* Clocks: Unix seconds, and a monotonic clock in seconds. */
double sl_wall_now(void);
double sl_mono_now(void);
/* A uniform random number in [low, high). */
double sl_uniform(double low, double high);
/* An RFC 3339 timestamp as Unix seconds; 0 on success, -1 when not one. */
int sl_parse_time(const char *text, double *seconds);
/* A fresh nonce (18 random bytes, base64url) and request id (16 random bytes, hex). */
void sl_new_nonce(char out[32]);
void sl_new_request_id(char out[40]);
char *sl_strdup(const char *text);
/* A JSON object from exactly text[0..length) (whitespace around), else NULL. */
cJSON *sl_parse_object(const char *text, size_t length);

/* Something a background thread sleeps on and the owner can stop. */
typedef struct sl_stopper {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    atomic_int stop;
} sl_stopper;
int sl_stopper_init(sl_stopper *stopper);
void sl_stopper_destroy(sl_stopper *stopper);
void sl_stopper_stop(sl_stopper *stopper);
/* Sleep, or less when stopped; returns nonzero when stopped. NULL: a plain sleep. */
int sl_sleep(sl_stopper *stopper, double seconds);

/* The token verifier. fetch returns the JWKS document (a malloc'd string). */
typedef seatlease_code (*sl_fetch_fn)(void *context, char **document, seatlease_error **error);
typedef struct sl_verifier sl_verifier;
seatlease_code sl_verifier_new(sl_fetch_fn fetch, void *context, const char *const *pinned,
                               size_t pinned_count, const char *tenant_id, double leeway,
                               sl_verifier **verifier, seatlease_error **error);
void sl_verifier_free(sl_verifier *verifier);
/* For tests: a fixed clock (Unix seconds; 0: the real one). */
void sl_verifier_set_now(sl_verifier *verifier, double now);
/* This machine's fingerprint (seatlease_machine_fingerprint), as when a saved borrowed seat
 * is loaded: a borrowed token must name it in cnf.machine (token_wrong_machine). NULL or
 * "": no machine check. */
void sl_verifier_set_machine(sl_verifier *verifier, const char *fingerprint);
/* Check reply's token: fn is "acquire", "heartbeat" or "release"; request is the body as
 * sent (with its nonce). *claims (when claims is not NULL): the verified claims. */
seatlease_code sl_verifier_check(sl_verifier *verifier, const char *fn, const cJSON *request,
                                 const cJSON *reply, int status, cJSON **claims,
                                 seatlease_error **error);
/* The lease's weight a verified token signs (its seats claim; 1 when absent). */
int sl_claims_seats(const cJSON *claims);
/* An Ed25519 public key from a pinned key's text (x, JWK JSON, or PEM); 0 on success. */
int sl_pinned_key_raw(const char *text, unsigned char raw[32]);

struct seatlease_client {
    char *base_url;
    char *api_key;
    char *jwks_url;
    seatlease_options options; /* its pointers cleared: copies are kept above */
    sl_verifier *verifier;
    int loopback;
};

/* One POST to base_url/fn with the client's retries; body gets request_id (unless set)
 * and a nonce (verifying). retries < 0: the client's; budget > 0: give up after that long.
 * *reply: the decoded (and verified) JSON object; *status: its HTTP status. */
seatlease_code sl_call(seatlease_client *client, const char *fn, cJSON *body, int retries,
                       double budget, sl_stopper *stopper, cJSON **reply, int *status,
                       seatlease_error **error);
/* The acquire body of a lease or of seatlease_acquire. */
seatlease_code sl_acquire_body(const char *license_id, const char *client_id,
                               int lease_seconds, int borrow_seconds, const char *metadata_json,
                               const char *user, const char *host, int queue,
                               const char *ticket, const char *request_id,
                               const char *fingerprint, int seats, cJSON **body,
                               seatlease_error **error);
void sl_log(seatlease_client *client, int level, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
double sl_backoff_delay(seatlease_client *client, int attempt, double retry_after,
                        double ceiling);
double sl_wait_pause(seatlease_client *client, const seatlease_error *denied);
int sl_json_int(const cJSON *object, const char *name, int fallback);
const char *sl_json_string(const cJSON *object, const char *name);

#endif
