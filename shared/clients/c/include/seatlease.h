/*
 * seatlease.h: the C client of seatlease, a floating-license seat service.
 *
 * C11, one header, a stable C ABI: opaque handles, plain types, no C++ in the interface.
 * Hold a seat (acquire, heartbeats on a background thread at the server's interval, a new
 * seat asked for at once when the old one is lost, release), make plain calls, and verify
 * every signed answer (Ed25519 JWTs against the deployment's JWKS and the vendor's pinned
 * keys). Thread-safe: one client may be shared by any number of threads. There is no
 * global state beyond seatlease_global_init(). Everything returned that must be freed
 * names its free function; every allocation has one.
 *
 * Errors: every call that can fail returns a seatlease_code (SEATLEASE_OK is 0) and,
 * when `error` is not NULL, stores a seatlease_error (free it with seatlease_error_free)
 * with the HTTP status, the server's machine code and its message.
 *
 * The ABI only grows: functions and error codes are only ever added, and fields only ever
 * appended to the structs. Each struct carries its size (struct_size, set by its _init
 * macro), so a program built against an older seatlease.h runs on a newer library (fields
 * past its struct_size take their defaults; a newer program's larger struct is taken while
 * it sets no field this library does not know), and results the library fills in take the
 * caller's size (seatlease_lease_get_info_sized) or come through getters. The SONAME
 * (libseatlease.so.0) changes only when that promise is broken: a function removed or
 * changed, a field moved, a code renumbered. seatlease_version_number() says, at run time,
 * which library a program got.
 */
#ifndef SEATLEASE_H
#define SEATLEASE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(SEATLEASE_SHARED)
#  ifdef SEATLEASE_BUILDING
#    define SEATLEASE_API __declspec(dllexport)
#  else
#    define SEATLEASE_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define SEATLEASE_API __attribute__((visibility("default")))
#else
#  define SEATLEASE_API
#endif

/* The version of this header; seatlease_version() and seatlease_version_number() give the
 * library's at run time (a program may run on a newer library than it was built with). */
/* CMake checks these against shared/clients/VERSION, the one version of the five clients. */
#define SEATLEASE_VERSION "0.3.0"
#define SEATLEASE_VERSION_MAJOR 0
#define SEATLEASE_VERSION_MINOR 3
#define SEATLEASE_VERSION_PATCH 0
/* 0xMMmmpp, as LIBCURL_VERSION_NUM: compare with >= */
#define SEATLEASE_VERSION_NUMBER                                                           \
    ((SEATLEASE_VERSION_MAJOR << 16) | (SEATLEASE_VERSION_MINOR << 8) | SEATLEASE_VERSION_PATCH)

/* The kinds of error. Values are part of the ABI: new ones are only ever appended. */
typedef enum seatlease_code {
    SEATLEASE_OK = 0,
    SEATLEASE_ERR_ARGUMENT = 1,           /* a bad argument (NULL, a bad URL or pinned key) */
    SEATLEASE_ERR_NO_MEMORY = 2,
    SEATLEASE_ERR_INVALID_REQUEST = 3,    /* 400 */
    SEATLEASE_ERR_UNAUTHENTICATED = 4,    /* 401: API key missing, unknown or revoked */
    SEATLEASE_ERR_LICENSE_SUSPENDED = 5,  /* 403 */
    SEATLEASE_ERR_USER_DENIED = 6,        /* 403 user_denied (also a suspension) */
    SEATLEASE_ERR_LICENSE_NOT_FOUND = 7,  /* 404 license_not_found (only: any other 404, a
                                             wrong base URL's not_found or a middlebox's
                                             empty 404, is SEATLEASE_ERR_HTTP) */
    SEATLEASE_ERR_NO_SEATS_AVAILABLE = 8, /* 409 */
    SEATLEASE_ERR_USER_LIMIT_REACHED = 9, /* 409 user_limit_reached (also no seats) */
    SEATLEASE_ERR_SEAT_WAIT_TIMEOUT = 10, /* waited, and no seat came free in time */
    SEATLEASE_ERR_SESSION_EXPIRED = 11,   /* 410 */
    SEATLEASE_ERR_BACKEND_UNAVAILABLE = 12, /* unreachable, or 503/429/502/504 throughout */
    SEATLEASE_ERR_HTTP = 13,              /* any other status (a 500, a 404 that is not
                                             license_not_found, a redirect: never followed,
                                             the message names the Location): not retried;
                                             server code: the answer's, else http_<status> */
    SEATLEASE_ERR_INVALID_RESPONSE = 14,  /* a 2xx that is not the expected JSON, or too big */
    SEATLEASE_ERR_TOKEN_MISSING = 15,     /* token_missing */
    SEATLEASE_ERR_MALFORMED_TOKEN = 16,   /* token_malformed */
    SEATLEASE_ERR_UNKNOWN_KEY_ID = 17,    /* token_unknown_kid */
    SEATLEASE_ERR_UNTRUSTED_KEY = 18,     /* token_untrusted_key */
    SEATLEASE_ERR_BAD_SIGNATURE = 19,     /* token_bad_signature */
    SEATLEASE_ERR_WRONG_AUDIENCE = 20,    /* token_wrong_audience */
    SEATLEASE_ERR_TOKEN_EXPIRED = 21,     /* token_expired */
    SEATLEASE_ERR_TOKEN_REPLAYED = 22,    /* token_replayed */
    SEATLEASE_ERR_TOKEN_MISMATCH = 23,    /* token_mismatch */
    SEATLEASE_ERR_CANCELLED = 24,         /* the call's cancel handle was triggered, or its
                                             lease was released while the call ran */
    SEATLEASE_ERR_LICENSE_NOT_STARTED = 25,   /* 403 license_not_started (also a suspension) */
    SEATLEASE_ERR_LICENSE_EXPIRED = 26,       /* 403 license_expired (also a suspension) */
    SEATLEASE_ERR_NOT_ENTITLED = 27,          /* 403 not_entitled (also a suspension) */
    SEATLEASE_ERR_VERSION_NOT_ENTITLED = 28,  /* 403 version_not_entitled (also a suspension) */
    SEATLEASE_ERR_TOKEN_WRONG_MACHINE = 29,   /* token_wrong_machine: a borrowed token of
                                                 another machine (cnf.machine) */
    SEATLEASE_ERR_SEATS_MISMATCH = 30,        /* 409 seats_mismatch: this client holds a
                                                 lease of another weight (not a "no seats":
                                                 waiting does not cure it) */
    SEATLEASE_ERR_MACHINE_MISMATCH = 31,      /* 409 machine_mismatch: this client's seat
                                                 was borrowed for another machine, which
                                                 keeps it until it is returned or the borrow
                                                 ends (not a "no seats": waiting here does
                                                 not cure it) */
    SEATLEASE_ERR_QUEUE_FULL = 32,            /* 409 queue_full: no seat, and the license's
                                                 wait queue is full (seatlease_error_queue_max);
                                                 a "no seats": a wait waits it out */
    SEATLEASE_ERR_FILE = 33                   /* a borrowed-seat file could not be read or
                                                 written (the message says why) */
} seatlease_code;

/* The library's version at run time: "0.3.0", and 0xMMmmpp (SEATLEASE_VERSION_NUMBER of
 * the header it was built from). */
SEATLEASE_API const char *seatlease_version(void);
SEATLEASE_API int seatlease_version_number(void);

/* A short constant name of a code ("no_seats_available"); never NULL. */
SEATLEASE_API const char *seatlease_code_name(seatlease_code code);
/* Nonzero for the token verification codes (SEATLEASE_ERR_TOKEN_MISSING..TOKEN_MISMATCH,
 * and SEATLEASE_ERR_TOKEN_WRONG_MACHINE). */
SEATLEASE_API int seatlease_code_is_token_error(seatlease_code code);
/* Nonzero for the 403 kinds of a license-suspended error: LICENSE_SUSPENDED, USER_DENIED,
 * LICENSE_NOT_STARTED, LICENSE_EXPIRED, NOT_ENTITLED, VERSION_NOT_ENTITLED. */
SEATLEASE_API int seatlease_code_is_license_suspended(seatlease_code code);
/* Nonzero for the "no seat free now" kinds, which a wait waits out: NO_SEATS_AVAILABLE,
 * USER_LIMIT_REACHED and QUEUE_FULL (not SEATS_MISMATCH or MACHINE_MISMATCH). */
SEATLEASE_API int seatlease_code_is_no_seats(seatlease_code code);
/* A machine's fingerprint (what acquire sends as "fingerprint" and a borrowed token's
 * cnf.machine names): the lowercase hex SHA-256 of "seatlease-machine/1:" + the machine id
 * trimmed and lowercased. out: 65 bytes (64 hex digits and a NUL). */
SEATLEASE_API seatlease_code seatlease_machine_fingerprint(const char *machine_id, char out[65]);

typedef struct seatlease_error seatlease_error;
SEATLEASE_API seatlease_code seatlease_error_code(const seatlease_error *error);
/* The HTTP status (0: no answer came back). */
SEATLEASE_API int seatlease_error_status(const seatlease_error *error);
/* The server's machine code ("no_seats_available", "network_error", "token_expired"). */
SEATLEASE_API const char *seatlease_error_server_code(const seatlease_error *error);
/* The server's (or the client's) human sentence. Never the API key. */
SEATLEASE_API const char *seatlease_error_message(const seatlease_error *error);
/* A denial's numbers (409), -1 when absent; retry_after: at least 1 for a 409. */
SEATLEASE_API int seatlease_error_seats_used(const seatlease_error *error);
SEATLEASE_API int seatlease_error_seats_total(const seatlease_error *error);
SEATLEASE_API int seatlease_error_retry_after_seconds(const seatlease_error *error);
/* Weighted seats (409): the weight asked (a denial's seats_requested, a seats_mismatch's
 * seats; 1 when the error names none) and a seats_mismatch's weight of the lease held
 * (held_seats; -1 when absent). */
SEATLEASE_API int seatlease_error_seats_requested(const seatlease_error *error);
SEATLEASE_API int seatlease_error_held_seats(const seatlease_error *error);
/* A queue_full's size of the license's wait queue (-1 when absent). */
SEATLEASE_API int seatlease_error_queue_max(const seatlease_error *error);
/* A SessionExpired's reason: "expired" (the heartbeat came after the deadline), "unknown"
 * (no such session: released, reclaimed, or lost with the server's data), "revoked" (an
 * operator freed the seat: seatlease revoke, the portal's "Free seat"; the product can
 * tell its user so) or "idle" (the license's idle rule reclaimed a seat nobody used);
 * "" for any other error. */
SEATLEASE_API const char *seatlease_error_reason(const seatlease_error *error);
/* The answer's "error" object as JSON text ("{}" when none). */
SEATLEASE_API const char *seatlease_error_body_json(const seatlease_error *error);
SEATLEASE_API void seatlease_error_free(seatlease_error *error);

/* Once per process, before any other call (libcurl's and libsodium's initialisation);
 * not thread-safe itself. Cleanup once at the end, after every client is freed. */
SEATLEASE_API seatlease_code seatlease_global_init(void);
SEATLEASE_API void seatlease_global_cleanup(void);

typedef void (*seatlease_log_fn)(void *user_data, int level, const char *message);
#define SEATLEASE_LOG_INFO 1
#define SEATLEASE_LOG_WARNING 2

/* Client options: seatlease_options_init() fills the defaults; then set what you need. */
typedef struct seatlease_options {
    size_t struct_size;               /* sizeof(seatlease_options), set by _init (see the
                                         ABI rule above: any older size is accepted) */
    double timeout_seconds;           /* bounds each HTTP exchange whole: connect, headers
                                         and body (10) */
    int retries;                      /* extra attempts after a network error or 503 (5; <0: none) */
    double backoff_seconds;           /* first pause between attempts, doubling with jitter (0.5) */
    double max_backoff_seconds;       /* largest pause (30) */
    double max_wait_poll_seconds;     /* longest pause between acquires while waiting (30) */
    double release_timeout_seconds;   /* budget of the release of a lease (5) */
    int verify;                       /* verify every answer's token (1: the default since
                                         0.3). 0 is refused unless insecure_skip_verify is
                                         1 (old code must not stay unverified silently) */
    const char *const *pinned_keys;   /* the vendor's Ed25519 keys: JWK "x", a JWK (JSON) or
                                         PEM. Required (since 0.3) unless insecure_skip_verify:
                                         without them seatlease_client_new fails with
                                         SEATLEASE_ERR_ARGUMENT, server code
                                         "pinned_keys_required" */
    size_t pinned_key_count;          /* > 0 turns verify on */
    const char *tenant_id;            /* the tenant the tokens' aud must name (NULL: any) */
    double token_leeway_seconds;      /* clock slack on exp/nbf/iat (60; <0: none) */
    const char *jwks_url;             /* NULL: <base_url>/keys */
    seatlease_log_fn log;             /* retries at INFO, losses and regains at WARNING (NULL: none) */
    void *log_user_data;
    /* -- 0.2 -- */
    const char *machine_id;           /* this machine's id, whose fingerprint binds a borrowed
                                         seat (NULL: the system's, Linux /etc/machine-id,
                                         macOS IOPlatformUUID, Windows MachineGuid) */
    /* -- 0.3 -- */
    int insecure_skip_verify;         /* 1: no pinned keys and no verification at all: any
                                         server at the base URL (a hosts-file entry, a
                                         proxy) can grant seats. For tests only (0); ignored
                                         when pinned keys are given (they are verified) */
    const char *ca_info;              /* a CA bundle file (PEM) for https (CURLOPT_CAINFO;
                                         NULL: libcurl's default) */
    const char *ca_path;              /* a directory of CA certificates (CURLOPT_CAPATH; NULL:
                                         libcurl's default) */
    const char *proxy;                /* a proxy URL (CURLOPT_PROXY: "http://proxy:3128",
                                         "socks5h://..."; NULL: libcurl's environment
                                         variables https_proxy, HTTPS_PROXY, http_proxy,
                                         ALL_PROXY and NO_PROXY, never for a loopback base
                                         URL; "": no proxy at all) */
} seatlease_options;

/* Fill *options with the defaults for a struct of struct_size bytes (the macro below
 * passes the caller's sizeof). A smaller, older struct gets the fields it has; a larger
 * one (a program built against a newer header) gets zeros past the fields this library
 * knows. */
SEATLEASE_API void seatlease_options_init_sized(seatlease_options *options, size_t struct_size);
/* The 0.1 entry point, kept for programs built against it: it fills a 0.1 struct. */
SEATLEASE_API void seatlease_options_init(seatlease_options *options);
#define seatlease_options_init(options) seatlease_options_init_sized((options), sizeof *(options))

typedef struct seatlease_client seatlease_client;

/* A client for base_url (http:// or https://, the functions' base). Strings are copied. */
SEATLEASE_API seatlease_code seatlease_client_new(const char *base_url, const char *api_key,
                                                  const seatlease_options *options,
                                                  seatlease_client **client,
                                                  seatlease_error **error);
/* Free a client. The handle must not be used for new calls afterwards, but its leases and
 * borrowed seats still alive keep working (heartbeats, release): the client is freed with
 * the last of them (seatlease_lease_free, seatlease_borrowed_free), on whichever thread
 * frees it. Thread-safe with respect to those frees. */
SEATLEASE_API void seatlease_client_free(seatlease_client *client);

/* -- cancelling a wait --------------------------------------------------------------- */

/* A cancel handle, for a Cancel button: make one before a call that may wait
 * (seatlease_lease_acquire with wait, which waits for ever by default, or
 * seatlease_acquire), put it in the call's options, and trigger it from any thread: the
 * call ends promptly (within a fraction of a second, a transfer in flight aborted) with
 * SEATLEASE_ERR_CANCELLED. A handle triggered before the call starts cancels it at once;
 * one handle may cancel several calls. It cancels nothing once the seat is held (release
 * the lease for that). Free it after the calls that use it have returned. */
typedef struct seatlease_cancel seatlease_cancel;
SEATLEASE_API seatlease_code seatlease_cancel_new(seatlease_cancel **cancel);
/* Thread-safe; once triggered it stays so. */
SEATLEASE_API void seatlease_cancel_trigger(seatlease_cancel *cancel);
SEATLEASE_API int seatlease_cancel_triggered(const seatlease_cancel *cancel);
SEATLEASE_API void seatlease_cancel_free(seatlease_cancel *cancel);

/* -- plain calls ------------------------------------------------------------------- */

typedef struct seatlease_acquire_options {
    size_t struct_size;        /* sizeof(seatlease_acquire_options), set by _init */
    int lease_seconds;         /* 0: the license's default */
    int borrow_seconds;        /* > 0: borrow the seat for that long (no heartbeats) */
    const char *metadata_json; /* a flat JSON object, shown to operators (NULL: none) */
    const char *user;          /* who asks (a policy may require it; NULL: not sent) */
    const char *host;
    int queue;                 /* on a full license with a wait queue: a place in line (202) */
    const char *ticket;        /* a previous place's ticket, to keep it */
    const char *request_id;    /* the same id for a retry of your own: answered exactly once
                                  (NULL: a fresh one, reused by the client's own retries) */
    const char *fingerprint;   /* bind the seat to this machine: seatlease_machine_fingerprint
                                  (the token's cnf.machine; NULL: not sent) */
    int seats;                 /* the lease's weight: it counts as that many of the license's
                                  seats (at most its seats). 0: not sent (1 for a new lease, a
                                  renewal keeps the held lease's); another weight than a held
                                  lease's is SEATLEASE_ERR_SEATS_MISMATCH */
    /* -- 0.2 -- */
    const char *const *entitlements; /* what the product needs: a license without one of
                                        them is SEATLEASE_ERR_NOT_ENTITLED (NULL: not sent) */
    size_t entitlement_count;
    const char *version;       /* the product's version: above the license's max_version is
                                  SEATLEASE_ERR_VERSION_NOT_ENTITLED (NULL: not sent) */
    seatlease_cancel *cancel;  /* triggered: the call ends with SEATLEASE_ERR_CANCELLED */
} seatlease_acquire_options;

SEATLEASE_API void seatlease_acquire_options_init_sized(seatlease_acquire_options *options,
                                                        size_t struct_size);
SEATLEASE_API void seatlease_acquire_options_init(seatlease_acquire_options *options);
#define seatlease_acquire_options_init(options)                                             \
    seatlease_acquire_options_init_sized((options), sizeof *(options))

typedef struct seatlease_answer seatlease_answer;
SEATLEASE_API const char *seatlease_answer_session_id(const seatlease_answer *answer);
SEATLEASE_API int seatlease_answer_seats_used(const seatlease_answer *answer);
SEATLEASE_API int seatlease_answer_seats_total(const seatlease_answer *answer);
/* The lease's (or a place in line's) weight: how many of the license's seats it counts as
 * (1 when the answer does not say). */
SEATLEASE_API int seatlease_answer_seats(const seatlease_answer *answer);
SEATLEASE_API int seatlease_answer_lease_seconds(const seatlease_answer *answer);
SEATLEASE_API int seatlease_answer_heartbeat_interval_seconds(const seatlease_answer *answer);
/* The server's deadline, Unix seconds (0 when absent). */
SEATLEASE_API double seatlease_answer_expires_at(const seatlease_answer *answer);
SEATLEASE_API int seatlease_answer_released(const seatlease_answer *answer);
SEATLEASE_API int seatlease_answer_borrowed(const seatlease_answer *answer);
/* A 202 place in line: queued, position (1: the head), ticket, retry_after_seconds. */
SEATLEASE_API int seatlease_answer_queued(const seatlease_answer *answer);
SEATLEASE_API int seatlease_answer_position(const seatlease_answer *answer);
SEATLEASE_API const char *seatlease_answer_ticket(const seatlease_answer *answer);
SEATLEASE_API int seatlease_answer_retry_after_seconds(const seatlease_answer *answer);
/* The license's terms (signed by the token as ent, lexp, maxv): its entitlements (count 0
 * when none), its end and its grace's end (Unix seconds, 0 when none), whether it is in its
 * grace, and the highest product version it covers ("" when any). */
SEATLEASE_API int seatlease_answer_entitlement_count(const seatlease_answer *answer);
SEATLEASE_API const char *seatlease_answer_entitlement(const seatlease_answer *answer, int index);
SEATLEASE_API double seatlease_answer_license_expires_at(const seatlease_answer *answer);
SEATLEASE_API double seatlease_answer_license_grace_ends_at(const seatlease_answer *answer);
SEATLEASE_API int seatlease_answer_in_grace(const seatlease_answer *answer);
SEATLEASE_API const char *seatlease_answer_max_version(const seatlease_answer *answer);
/* A heartbeat's idle warning: when the license's idle rule reclaims the seat unless the
 * product reports activity or busy work first (Unix seconds; 0: no warning). */
SEATLEASE_API double seatlease_answer_idle_reclaim_at(const seatlease_answer *answer);
/* On a license that shares seats, the sessions sharing this lease's seat, itself included
 * (0: not shared). */
SEATLEASE_API int seatlease_answer_shared_sessions(const seatlease_answer *answer);
/* The lease_token or release_token ("" when none; verified when the client verifies). */
SEATLEASE_API const char *seatlease_answer_token(const seatlease_answer *answer);
/* The HTTP status and the whole answer as JSON text. */
SEATLEASE_API int seatlease_answer_status(const seatlease_answer *answer);
SEATLEASE_API const char *seatlease_answer_json(const seatlease_answer *answer);
SEATLEASE_API void seatlease_answer_free(seatlease_answer *answer);

/* POST /acquire (retried with backoff on a network error or 503, with the same
 * request_id). No heartbeats: see seatlease_lease_acquire. */
SEATLEASE_API seatlease_code seatlease_acquire(seatlease_client *client, const char *license_id,
                                               const char *client_id,
                                               const seatlease_acquire_options *options,
                                               seatlease_answer **answer,
                                               seatlease_error **error);
SEATLEASE_API seatlease_code seatlease_heartbeat(seatlease_client *client,
                                                 const char *license_id,
                                                 const char *session_id,
                                                 seatlease_answer **answer,
                                                 seatlease_error **error);
SEATLEASE_API seatlease_code seatlease_release(seatlease_client *client, const char *license_id,
                                               const char *session_id,
                                               seatlease_answer **answer,
                                               seatlease_error **error);

/* -- a held seat ------------------------------------------------------------------- */

typedef struct seatlease_lease seatlease_lease;

/* Called on the heartbeat thread: keep them short. reason: "expired", "unknown",
 * "revoked" (an operator freed the seat), "idle" (the license's idle rule reclaimed it:
 * no seat is asked for again until seatlease_lease_touch or seatlease_lease_busy_begin
 * says the product is in use), "unreachable", or the refusal's code. They may call
 * seatlease_lease_release (not seatlease_lease_free). */
typedef void (*seatlease_lost_fn)(seatlease_lease *lease, const char *reason, void *user_data);
typedef void (*seatlease_regained_fn)(seatlease_lease *lease, void *user_data);
/* A heartbeat's answer warned that the license's idle rule reclaims the seat at reclaim_at
 * (Unix seconds) unless the product is used before: called once per warning (again only
 * after a warning was cleared), on the heartbeat thread. */
typedef void (*seatlease_idle_warning_fn)(seatlease_lease *lease, double reclaim_at,
                                          void *user_data);

typedef struct seatlease_lease_options {
    size_t struct_size;        /* sizeof(seatlease_lease_options), set by _init */
    const char *client_id;     /* this running copy: acquiring again with it gives the same seat */
    const char *metadata_json;
    int lease_seconds;
    const char *user;
    const char *host;
    const char *request_id;    /* of the first acquire (NULL: a fresh one) */
    int wait;                  /* wait for a seat (in line on a license with a queue):
                                  no seats, user_limit_reached and queue_full are waited out;
                                  any other refusal (a 403, seats_mismatch) is returned at once */
    double wait_timeout_seconds; /* then SEATLEASE_ERR_SEAT_WAIT_TIMEOUT (0: for ever; see
                                    cancel) */
    seatlease_lost_fn on_lost;
    seatlease_regained_fn on_regained;
    void *user_data;
    const char *fingerprint;   /* bind every seat to this machine (NULL: not sent) */
    int seats;                 /* the lease's weight (see seatlease_acquire_options), asked for
                                  by the first acquire and by every re-acquire after a loss
                                  (0: not sent) */
    /* -- 0.2 -- */
    const char *const *entitlements; /* sent with every acquire (see seatlease_acquire_options;
                                        copied) */
    size_t entitlement_count;
    const char *version;
    seatlease_cancel *cancel;  /* ends the first acquire or the wait for a seat (and any
                                  transfer in flight) with SEATLEASE_ERR_CANCELLED */
    /* -- idle seats -- */
    seatlease_idle_warning_fn on_idle_warning; /* NULL: none (user_data is passed) */
} seatlease_lease_options;

SEATLEASE_API void seatlease_lease_options_init_sized(seatlease_lease_options *options,
                                                      size_t struct_size);
SEATLEASE_API void seatlease_lease_options_init(seatlease_lease_options *options);
#define seatlease_lease_options_init(options)                                               \
    seatlease_lease_options_init_sized((options), sizeof *(options))

/* Acquire a seat and keep it by heartbeats on a background thread until released.
 *
 * While held: a heartbeat answered 410 "unknown" is sent once more with the lease's last
 * token (a region's loss: the server may re-admit the seat; no on_lost then); a seat
 * otherwise lost (410 "expired", or "revoked": an operator freed it, never retried with
 * the token) is asked for again at once. A license's term that ended (403
 * license_expired, license_not_started) ends the seat (on_lost with that code); a
 * re-acquire refused by a 403 (the term, a suspension, entitlements) is final until an
 * operator acts: said once (one WARNING), then asked again every 5 to 6 minutes. A
 * suspended license keeps the seats it holds (their heartbeats go on). */
SEATLEASE_API seatlease_code seatlease_lease_acquire(seatlease_client *client,
                                                     const char *license_id,
                                                     const seatlease_lease_options *options,
                                                     seatlease_lease **lease,
                                                     seatlease_error **error);

/* A copy of the lease's state at one moment. */
typedef struct seatlease_lease_info {
    char session_id[128];     /* a new one after the seat was lost and regained */
    double expires_at;        /* the server's deadline, Unix seconds */
    int lease_seconds;
    int heartbeat_interval_seconds;
    int seats_used;
    int seats_total;
    int overage;
    int lost;                 /* from the moment the seat is known gone until regained */
    char lost_reason[64];     /* the reason on_lost got ("revoked": an operator freed it) */
    int released;
    int verified;             /* the last grant's token was verified */
    /* -- 0.2 -- */
    int seats;                /* the lease's weight (seatlease_lease_seats) */
    /* -- idle and shared seats -- */
    double idle_reclaim_at;   /* while warned for idleness: when the license's idle rule
                                 reclaims the seat (Unix seconds); 0: no warning */
    int shared_sessions;      /* on a license that shares seats: the sessions sharing this
                                 seat, as its acquire said (0: not shared) */
} seatlease_lease_info;

/* Fill the first info_size bytes of *info (the macro passes the caller's sizeof: an older,
 * smaller struct gets the fields it has). */
SEATLEASE_API void seatlease_lease_get_info_sized(seatlease_lease *lease,
                                                  seatlease_lease_info *info, size_t info_size);
/* The 0.1 entry point, kept for programs built against it: it fills a 0.1 struct. */
SEATLEASE_API void seatlease_lease_get_info(seatlease_lease *lease, seatlease_lease_info *info);
#define seatlease_lease_get_info(lease, info)                                               \
    seatlease_lease_get_info_sized((lease), (info), sizeof *(info))
/* The lease's weight as the last answer gave it (1 when the server does not say). */
SEATLEASE_API int seatlease_lease_seats(seatlease_lease *lease);
/* The last verified lease token, a copy: free it with seatlease_string_free (NULL: none). */
SEATLEASE_API char *seatlease_lease_token(seatlease_lease *lease);
SEATLEASE_API void seatlease_string_free(char *text);
/* The license's terms as the last answer gave them (its token signed them): the
 * entitlements as a JSON array and the highest product version, copies to free with
 * seatlease_string_free (NULL: none given); the license's end and its grace's end (Unix
 * seconds, 0: none) and whether it is in its grace (any pointer may be NULL). */
SEATLEASE_API char *seatlease_lease_entitlements_json(seatlease_lease *lease);
SEATLEASE_API char *seatlease_lease_max_version(seatlease_lease *lease);
SEATLEASE_API void seatlease_lease_license_term(seatlease_lease *lease, double *expires_at,
                                                double *grace_ends_at, int *in_grace);
/* The entitlements one by one: their count, and a copy of one (free it with
 * seatlease_string_free; NULL past the end). */
SEATLEASE_API int seatlease_lease_entitlement_count(seatlease_lease *lease);
SEATLEASE_API char *seatlease_lease_entitlement(seatlease_lease *lease, int index);

/* The license's idle rule (a license with an idle timeout reclaims a seat nobody uses).
 * seatlease_lease_touch: the product saw user activity now (a keystroke, a command); from
 * the first touch on every heartbeat carries idle_seconds, the whole seconds since the last
 * one (a product that never touches is never idle). After an idle warning (on_idle_warning)
 * the next heartbeat goes at once, so the activity cancels it before the reclaim; after a
 * seat lost as "idle" the seat is asked for again. Cheap, never blocks on the network:
 * call it on every input, from any thread.
 * seatlease_lease_busy_begin/_end: a busy scope (they nest: a counter): while one is open,
 * heartbeats carry busy: true and the seat is never warned nor reclaimed for idleness (a
 * render, a solve). Each begin needs its end; an end without a begin does nothing. */
SEATLEASE_API void seatlease_lease_touch(seatlease_lease *lease);
/* seatlease_lease_touch for activity seen seconds_ago before now (the latest call wins), so
 * that a product may pass the system's own idle time (since the last input event). */
SEATLEASE_API void seatlease_lease_touch_ago(seatlease_lease *lease, double seconds_ago);
SEATLEASE_API void seatlease_lease_busy_begin(seatlease_lease *lease);
SEATLEASE_API void seatlease_lease_busy_end(seatlease_lease *lease);

/* Stop the heartbeats and release the seat within release_timeout_seconds. Once: later
 * calls return the first one's result. */
SEATLEASE_API seatlease_code seatlease_lease_release(seatlease_lease *lease,
                                                     seatlease_error **error);
/* Release (when not done yet), wait for the heartbeat thread, and free (and the client, if
 * it was freed and this was its last lease or borrowed seat). */
SEATLEASE_API void seatlease_lease_free(seatlease_lease *lease);

/* -- a borrowed seat (offline use) ---------------------------------------------------- */

/* A seat borrowed for a fixed time with no heartbeats (a laptop going offline), saved to a
 * file with its signed token and verified offline later: the same file as the other
 * clients' (a JSON document "seatlease-borrowed-seat/1": the request with its nonce, the
 * answer with its lease_token, the deployment's JWKS), so a seat borrowed by the Python
 * client loads here and the other way round. Loading verifies the token as a live answer
 * is verified (signature by the saved JWKS within the client's pinned keys, aud, sid, sub,
 * nonce, exp against this machine's clock) whether or not the client verifies answers, and
 * that it was borrowed for this machine (cnf.machine: SEATLEASE_ERR_TOKEN_WRONG_MACHINE).
 * Pin the vendor's keys: without them the saved JWKS is the only anchor. */
typedef struct seatlease_borrowed seatlease_borrowed;

/* Borrow a seat of license_id for `seconds` (at most the license's max_borrow_seconds),
 * bound to this machine, save it to path (atomically, readable by this user only) and
 * return it verified from the file. options (NULL: none): metadata_json, user, host,
 * request_id, entitlements, version, seats and cancel are used. */
SEATLEASE_API seatlease_code seatlease_borrow(seatlease_client *client, const char *license_id,
                                              const char *client_id, int seconds,
                                              const char *path,
                                              const seatlease_acquire_options *options,
                                              seatlease_borrowed **borrowed,
                                              seatlease_error **error);
/* The borrowed seat saved at path, verified offline (no request is sent): a token error
 * when it does not verify (SEATLEASE_ERR_TOKEN_EXPIRED once the borrow has ended, beyond
 * the leeway), SEATLEASE_ERR_FILE when it cannot be read. */
SEATLEASE_API seatlease_code seatlease_borrowed_load(seatlease_client *client, const char *path,
                                                     seatlease_borrowed **borrowed,
                                                     seatlease_error **error);
SEATLEASE_API const char *seatlease_borrowed_license_id(const seatlease_borrowed *borrowed);
SEATLEASE_API const char *seatlease_borrowed_client_id(const seatlease_borrowed *borrowed);
SEATLEASE_API const char *seatlease_borrowed_session_id(const seatlease_borrowed *borrowed);
SEATLEASE_API const char *seatlease_borrowed_token(const seatlease_borrowed *borrowed);
SEATLEASE_API const char *seatlease_borrowed_path(const seatlease_borrowed *borrowed);
/* The borrow's end (Unix seconds: the answer's lease_expires_at), its length, the seconds
 * left by this machine's clock (0 once ended), and its weight (the token's seats; 1). */
SEATLEASE_API double seatlease_borrowed_expires_at(const seatlease_borrowed *borrowed);
SEATLEASE_API int seatlease_borrowed_seconds(const seatlease_borrowed *borrowed);
SEATLEASE_API double seatlease_borrowed_seconds_left(const seatlease_borrowed *borrowed);
SEATLEASE_API int seatlease_borrowed_seats(const seatlease_borrowed *borrowed);
/* Give the seat back early (POST /release, retried like any call) and delete the file;
 * answer (may be NULL): the release's (released false: it had already ended). */
SEATLEASE_API seatlease_code seatlease_borrowed_return(seatlease_borrowed *borrowed,
                                                       seatlease_answer **answer,
                                                       seatlease_error **error);
SEATLEASE_API void seatlease_borrowed_free(seatlease_borrowed *borrowed);

#ifdef __cplusplus
}
#endif

#endif /* SEATLEASE_H */
