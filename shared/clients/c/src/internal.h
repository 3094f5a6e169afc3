/* Internal declarations of libseatlease: not installed, not part of the ABI. Every name
 * here starts with sl_ and is hidden: not exported by the shared library, and local to the
 * one object of the static library (CMakeLists.txt). */
#ifndef SEATLEASE_INTERNAL_H
#define SEATLEASE_INTERNAL_H

#include "seatlease.h"

#include <cJSON.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>

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
    int queue_max;              /* a queue_full's (-1 when absent) */
};

/* -- the ABI's sizes ----------------------------------------------------------------------
 * The 0.1 structs, as programs built against seatlease.h 0.1 have them: the frozen
 * entry points (seatlease_options_init, seatlease_lease_get_info, ...) fill exactly these
 * sizes, never the newer, larger ones. */
#define SL_ROUND_UP(size, align) (((size) + (align) - 1) / (align) * (align))
#define SL_OPTIONS_V1_SIZE offsetof(seatlease_options, machine_id)
#define SL_ACQUIRE_OPTIONS_V1_SIZE offsetof(seatlease_acquire_options, entitlements)
#define SL_LEASE_OPTIONS_V1_SIZE offsetof(seatlease_lease_options, entitlements)
#define SL_LEASE_INFO_V1_SIZE                                                               \
    SL_ROUND_UP(offsetof(seatlease_lease_info, seats), alignof(seatlease_lease_info))
/* A struct_size beyond this is no size at all (a struct never given to its _init). */
#define SL_MAX_STRUCT_SIZE 4096

/* A caller's struct of any size (its struct_size, its first member) into this library's
 * `full` one, which holds the defaults: fields past the caller's size keep them; a larger
 * struct (a newer header) is taken when the fields this library does not know are zero.
 * SEATLEASE_ERR_ARGUMENT otherwise, naming `what`. */
seatlease_code sl_struct_in(void *full, size_t full_size, const void *given, const char *what,
                            seatlease_error **error);
/* The defaults of a struct of `size` bytes written over *out (zeros past full_size). */
void sl_struct_init(void *out, size_t size, const void *defaults, size_t full_size);

/* Errors: sl_fail stores a new error in *out (when out is not NULL) and returns code. */
seatlease_code sl_fail(seatlease_error **out, seatlease_code code, int status,
                       const char *server_code, const char *format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;
seatlease_error *sl_error_copy(const seatlease_error *error);
/* A non-2xx answer of url as its typed error: by the server's error.code (then by status
 * for a code this library does not know; a 404 only with license_not_found is
 * LICENSE_NOT_FOUND, any other is SEATLEASE_ERR_HTTP naming url); location: a redirect's
 * Location header ("" or NULL: none), named by its error. */
seatlease_code sl_error_from_answer(seatlease_error **out, const char *url, int status,
                                    const cJSON *payload, double retry_after_header,
                                    const char *location);
void sl_error_set_wait_timeout(seatlease_error *error, const char *license_id, double seconds);
/* Hand `error` to the caller's out (or free it). */
void sl_error_give(seatlease_error *error, seatlease_error **out);

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
/* A copy of a list of strings (NULL and 0 for none); 0 on success. */
int sl_strings_copy(const char *const *items, size_t count, char ***out);
void sl_strings_free(char **items, size_t count);

/* Something a thread sleeps on and another stops: a lease's heartbeat thread (stopped by
 * the release), a cancel handle (triggered by a Cancel button). nudged ends one sleep
 * early without stopping (the tests' "heartbeat now"). */
typedef struct sl_stopper {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    atomic_int stop;
    atomic_int nudged;
} sl_stopper;
int sl_stopper_init(sl_stopper *stopper);
void sl_stopper_destroy(sl_stopper *stopper);
void sl_stopper_stop(sl_stopper *stopper);
void sl_stopper_nudge(sl_stopper *stopper);
/* Nonzero once stopped (NULL: never). */
int sl_stopped(sl_stopper *stopper);
/* Sleep, or less when stopped or nudged; returns nonzero when stopped. NULL: a plain sleep. */
int sl_sleep(sl_stopper *stopper, double seconds);

struct seatlease_cancel {
    sl_stopper stopper;
};
/* The stopper of a cancel handle (NULL: none). */
sl_stopper *sl_cancel_stopper(seatlease_cancel *cancel);

/* The token verifier. fetch returns the JWKS document (a malloc'd string); stopper: the
 * call's, which may cancel the fetch; deadline (monotonic seconds, 0: none): the end of the
 * exchange that needs the keys, which bounds the fetch too. */
typedef seatlease_code (*sl_fetch_fn)(void *context, sl_stopper *stopper, double deadline,
                                      char **document, seatlease_error **error);
typedef struct sl_verifier sl_verifier;
seatlease_code sl_verifier_new(sl_fetch_fn fetch, void *context, const char *const *pinned,
                               size_t pinned_count, const char *tenant_id, double leeway,
                               sl_verifier **verifier, seatlease_error **error);
void sl_verifier_free(sl_verifier *verifier);
/* For tests: a fixed clock (Unix seconds; 0: the real one). */
void sl_verifier_set_now(sl_verifier *verifier, double now);
/* For tests: the least time between two fetches of the JWKS for an unknown kid (10 s). */
void sl_verifier_set_min_refetch(sl_verifier *verifier, double seconds);
/* Nonzero when an Ed25519 public key is of small order (libsodium's has_small_order list,
 * the top bit of the last byte masked off): never a vendor's key. */
int sl_key_has_small_order(const unsigned char key[32]);
/* This machine's fingerprint (seatlease_machine_fingerprint), as when a saved borrowed seat
 * is loaded: a borrowed token must name it in cnf.machine (token_wrong_machine). NULL or
 * "": no machine check. */
void sl_verifier_set_machine(sl_verifier *verifier, const char *fingerprint);
/* Check reply's token: fn is "acquire", "heartbeat" or "release"; request is the body as
 * sent (with its nonce). *claims (when claims is not NULL): the verified claims. */
seatlease_code sl_verifier_check(sl_verifier *verifier, const char *fn, const cJSON *request,
                                 const cJSON *reply, int status, sl_stopper *stopper,
                                 cJSON **claims, seatlease_error **error);
/* sl_verifier_check within an exchange's deadline (monotonic seconds, 0: none), which
 * bounds a fetch of the JWKS too; *fetch_failed (when not NULL): nonzero when the check
 * failed because the JWKS could not be fetched (a network error, a 5xx, a timeout, not a
 * key set): no verdict on the token, a transient failure. */
seatlease_code sl_verifier_check_within(sl_verifier *verifier, const char *fn,
                                        const cJSON *request, const cJSON *reply, int status,
                                        sl_stopper *stopper, double deadline, int *fetch_failed,
                                        cJSON **claims, seatlease_error **error);
/* The lease's weight a verified token signs (its seats claim; 1 when absent). */
int sl_claims_seats(const cJSON *claims);
/* An Ed25519 public key from a pinned key's text (x, JWK JSON, or PEM); 0 on success. */
int sl_pinned_key_raw(const char *text, unsigned char raw[32]);

/* A pooled (easy, multi) pair of libcurl handles (client.c): the multi keeps the
 * connection open between exchanges. */
typedef struct sl_handle sl_handle;

struct seatlease_client {
    atomic_int refs; /* the product's handle and each live lease and borrowed seat */
    char *base_url;
    char *api_key;
    char *jwks_url;
    seatlease_options options; /* its pointers cleared: copies are kept below */
    char **pinned_keys;        /* the texts as given: a borrowed seat's verifier pins them */
    size_t pinned_key_count;
    char *tenant_id;
    char *machine_id;
    sl_verifier *verifier;
    int loopback;
    char *ca_info, *ca_path, *proxy; /* copies of the options' (NULL: not given) */
    pthread_mutex_t pool_mu;         /* guards idle, idle_count */
    sl_handle *idle;                 /* the idle handles, their connections kept open */
    int idle_count;
};
/* The client's idle handles closed (client_destroy). */
void sl_client_pool_free(seatlease_client *client);

/* A lease or a borrowed seat keeps its client alive (seatlease_client_free defers). */
void sl_client_ref(seatlease_client *client);
void sl_client_unref(seatlease_client *client);

/* One POST to base_url/fn with the client's retries; body gets request_id (unless set)
 * and a nonce (verifying). retries < 0: the client's; budget > 0: give up after that long;
 * stopper: ends the call (and its transfer in flight) with SEATLEASE_ERR_CANCELLED.
 * *reply: the decoded (and verified) JSON object; *status: its HTTP status. */
seatlease_code sl_call(seatlease_client *client, const char *fn, cJSON *body, int retries,
                       double budget, sl_stopper *stopper, cJSON **reply, int *status,
                       seatlease_error **error);
/* The shape of a 2xx answer of fn ("acquire", "heartbeat", "release") to request (the body
 * as sent): SEATLEASE_OK, else SEATLEASE_ERR_INVALID_RESPONSE (client.c states the rules). */
seatlease_code sl_check_shape(const char *fn, const cJSON *request, const cJSON *reply,
                              long status, seatlease_error **error);
/* GET the client's JWKS (jwks_url) as text (malloc'd), within timeout_seconds and by the
 * deadline (monotonic seconds, 0: none) of the exchange that needs it. */
seatlease_code sl_fetch_jwks(seatlease_client *client, sl_stopper *stopper, double deadline,
                             char **document, seatlease_error **error);

/* What an acquire sends (NULL and 0: not sent). */
typedef struct sl_acquire_fields {
    const char *license_id, *client_id;
    int lease_seconds, borrow_seconds;
    const char *metadata_json, *user, *host;
    int queue;
    const char *ticket, *request_id, *fingerprint;
    int seats;
    const char *const *entitlements;
    size_t entitlement_count;
    const char *version;
} sl_acquire_fields;
/* The acquire body of a lease, of seatlease_acquire or of a borrow. */
seatlease_code sl_acquire_body(const sl_acquire_fields *fields, cJSON **body,
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

/* This machine's fingerprint: of the client's machine_id, else of the system's id. */
seatlease_code sl_this_machine(seatlease_client *client, char fingerprint[65],
                               seatlease_error **error);

/* For tests: the lease's next heartbeat now (a server's interval may be long). */
void sl_lease_heartbeat_now(seatlease_lease *lease);
/* For tests: the lease's deadline (its valid_until) moved to seconds from now (a
 * scenario's lease may be long). */
void sl_lease_deadline_in(seatlease_lease *lease, double seconds);

#endif
