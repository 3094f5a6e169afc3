/* Borrowed seats: a seat taken for a fixed time with no heartbeats (a laptop going
 * offline), saved to a file with its signed token and verified offline later; and this
 * machine's id, whose fingerprint binds a borrowed seat to the machine that took it.
 *
 * The file is the Python client's (shared/client/seatlease_client/_borrow.py), so that a
 * seat borrowed by one client loads in the other: a JSON object
 *     {"format": "seatlease-borrowed-seat/1", "base_url", "request", "answer", "jwks"}
 * with the acquire request as sent (its nonce), the answer (its lease_token) and the
 * deployment's JWKS at borrow time. Loading runs the verifier of live answers on the saved
 * JWKS, within the client's pinned keys. */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(_WIN32)
#include <io.h>
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#define SL_BORROWED_FORMAT "seatlease-borrowed-seat/1"
#define SL_MAX_BORROWED_FILE (4 * 1024 * 1024) /* an answer (1 MiB at most) and a JWKS */

struct seatlease_borrowed {
    seatlease_client *client; /* a reference: return_early releases through it */
    char *path, *license_id, *client_id, *session_id, *token;
    double expires_at;
    int seconds, seats;
};

/* -- this machine ------------------------------------------------------------------------- */

/* The system's own stable machine id (trimmed), as the other clients read it. */
static int system_machine_id(char *out, size_t size) {
    out[0] = '\0';
#if defined(_WIN32)
    DWORD length = (DWORD)size;
    if (RegGetValueA(HKEY_LOCAL_MACHINE, "SOFTWARE\\Microsoft\\Cryptography", "MachineGuid",
                     RRF_RT_REG_SZ | RRF_SUBKEY_WOW6464KEY, NULL, out, &length) != ERROR_SUCCESS) {
        out[0] = '\0';
    }
#elif defined(__APPLE__)
    FILE *ioreg = popen("/usr/sbin/ioreg -rd1 -c IOPlatformExpertDevice", "r");
    char line[512];
    while (ioreg != NULL && fgets(line, sizeof line, ioreg) != NULL) {
        const char *key = strstr(line, "\"IOPlatformUUID\"");
        const char *open = key ? strchr(key + 16, '"') : NULL;
        const char *close = open ? strchr(open + 1, '"') : NULL;
        if (close != NULL && (size_t)(close - open - 1) < size) {
            memcpy(out, open + 1, (size_t)(close - open - 1));
            out[close - open - 1] = '\0';
        }
    }
    if (ioreg != NULL) {
        pclose(ioreg);
    }
#else
    static const char *const files[] = {"/etc/machine-id", "/var/lib/dbus/machine-id", NULL};
    for (int i = 0; files[i] != NULL && out[0] == '\0'; i++) {
        FILE *file = fopen(files[i], "r");
        if (file == NULL) {
            continue;
        }
        if (fgets(out, (int)size, file) == NULL) {
            out[0] = '\0';
        }
        fclose(file);
        out[strcspn(out, " \t\r\n")] = '\0';
    }
#endif
    return out[0] != '\0' ? 0 : -1;
}

seatlease_code sl_this_machine(seatlease_client *client, char fingerprint[65],
                               seatlease_error **error) {
    if (client->machine_id != NULL) {
        return seatlease_machine_fingerprint(client->machine_id, fingerprint);
    }
    char id[256];
    if (system_machine_id(id, sizeof id) != 0) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL,
                       "This machine has no stable machine id: set seatlease_options.machine_id.");
    }
    return seatlease_machine_fingerprint(id, fingerprint);
}

/* -- the file ------------------------------------------------------------------------------- */

/* Write the file atomically (a crash leaves the old file or the new one, never half of
 * one), readable by this user only: a temporary file beside it, synced, renamed over it. */
static seatlease_code save_file(const char *path, const char *text, seatlease_error **error) {
    size_t length = strlen(path);
    const char *slash = strrchr(path, '/');
#if defined(_WIN32)
    const char *backslash = strrchr(path, '\\');
    if (backslash != NULL && (slash == NULL || backslash > slash)) {
        slash = backslash;
    }
#endif
    size_t folder = slash != NULL ? (size_t)(slash - path) + 1 : 0;
    char *temporary = malloc(folder + sizeof ".borrowed-XXXXXX");
    if (temporary == NULL || length == 0) {
        free(temporary);
        return sl_fail(error, length ? SEATLEASE_ERR_NO_MEMORY : SEATLEASE_ERR_ARGUMENT, 0, NULL,
                       length ? "Out of memory." : "The path is empty.");
    }
    memcpy(temporary, path, folder);
    memcpy(temporary + folder, ".borrowed-XXXXXX", sizeof ".borrowed-XXXXXX");
    size_t size = strlen(text);
    int failed;
#if defined(_WIN32)
    FILE *out = _mktemp_s(temporary, folder + sizeof ".borrowed-XXXXXX") == 0
                    ? fopen(temporary, "wbx") : NULL;
    failed = out == NULL;
    if (!failed) {
        failed = fwrite(text, 1, size, out) != size || fflush(out) != 0 ||
                 _commit(_fileno(out)) != 0;
        failed |= fclose(out) != 0;
        failed = failed || !MoveFileExA(temporary, path,
                                        MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH);
    }
#else
    int fd = mkstemp(temporary); /* 0600 */
    failed = fd < 0;
    if (!failed) {
        size_t written = 0;
        while (!failed && written < size) {
            ssize_t n = write(fd, text + written, size - written);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            failed = n <= 0;
            written += n > 0 ? (size_t)n : 0;
        }
        failed = failed || fchmod(fd, S_IRUSR | S_IWUSR) != 0 || fsync(fd) != 0;
        failed |= close(fd) != 0;
        failed = failed || rename(temporary, path) != 0;
    }
#endif
    int cause = errno;
    if (failed) {
        remove(temporary);
    }
    free(temporary);
    if (failed) {
        return sl_fail(error, SEATLEASE_ERR_FILE, 0, "file_error", "%.300s: not saved: %s", path,
                       strerror(cause));
    }
    return SEATLEASE_OK;
}

static seatlease_code read_file(const char *path, char **text, size_t *length,
                                seatlease_error **error) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) {
        return sl_fail(error, SEATLEASE_ERR_FILE, 0, "file_error", "%.300s: %s", path,
                       strerror(errno));
    }
    size_t capacity = 64 * 1024, used = 0;
    char *data = malloc(capacity + 1);
    size_t n;
    while (data != NULL && (n = fread(data + used, 1, capacity - used, file)) > 0) {
        used += n;
        if (used == capacity) {
            char *grown = capacity < SL_MAX_BORROWED_FILE ? realloc(data, capacity * 2 + 1) : NULL;
            if (grown == NULL) {
                break;
            }
            data = grown;
            capacity *= 2;
        }
    }
    int unreadable = ferror(file);
    fclose(file);
    if (data == NULL) {
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    if (unreadable || used == capacity) {
        free(data);
        return sl_fail(error, SEATLEASE_ERR_FILE, 0, "file_error",
                       "%.300s: unreadable, or larger than a borrowed seat.", path);
    }
    data[used] = '\0';
    *text = data;
    *length = used;
    return SEATLEASE_OK;
}

/* -- loading --------------------------------------------------------------------------------- */

/* The saved JWKS, as the verifier fetches keys (no request is sent). */
static seatlease_code saved_jwks(void *context, sl_stopper *stopper, double deadline,
                                 char **document, seatlease_error **error) {
    (void)stopper;
    (void)deadline;
    *document = sl_strdup(context);
    return *document != NULL ? SEATLEASE_OK
                             : sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
}

static seatlease_code not_a_borrowed_seat(const char *path, seatlease_error **error) {
    return sl_fail(error, SEATLEASE_ERR_MALFORMED_TOKEN, 0, "token_malformed",
                   "%.300s is not a saved borrowed seat.", path);
}

/* The saved token checked as a live answer's is, by a verifier of the saved JWKS within
 * the client's pinned keys, for this machine; *claims: the verified claims. */
static seatlease_code verify_saved(seatlease_client *client, const cJSON *request,
                                   const cJSON *answer, const cJSON *jwks, cJSON **claims,
                                   seatlease_error **error) {
    char fingerprint[65];
    seatlease_code code = sl_this_machine(client, fingerprint, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    char *keys = cJSON_PrintUnformatted(jwks);
    if (keys == NULL) {
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    double leeway = client->options.token_leeway_seconds;
    sl_verifier *verifier = NULL;
    code = sl_verifier_new(saved_jwks, keys, (const char *const *)client->pinned_keys,
                           client->pinned_key_count, client->tenant_id, leeway < 0 ? 0 : leeway,
                           &verifier, error);
    if (code == SEATLEASE_OK) {
        sl_verifier_set_machine(verifier, fingerprint);
        code = sl_verifier_check(verifier, "acquire", request, answer, 0, NULL, claims, error);
    }
    sl_verifier_free(verifier);
    cJSON_free(keys);
    if (code == SEATLEASE_OK &&
        (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(*claims, "borrowed")) ||
         !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(answer, "borrowed")))) {
        cJSON_Delete(*claims);
        *claims = NULL;
        code = sl_fail(error, SEATLEASE_ERR_TOKEN_MISMATCH, 0, "token_mismatch",
                       "The saved seat is not a borrowed one.");
    }
    return code;
}

static const char *answered(const cJSON *answer, const cJSON *request, const char *name) {
    const char *value = sl_json_string(answer, name);
    return value != NULL ? value : sl_json_string(request, name);
}

static seatlease_code borrowed_of(seatlease_client *client, const char *path,
                                  const cJSON *request, const cJSON *answer,
                                  const cJSON *claims, seatlease_borrowed **out,
                                  seatlease_error **error) {
    seatlease_borrowed *b = calloc(1, sizeof *b);
    if (b == NULL) {
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    b->path = sl_strdup(path);
    b->license_id = sl_strdup(answered(answer, request, "license_id"));
    b->client_id = sl_strdup(answered(answer, request, "client_id"));
    b->session_id = sl_strdup(sl_json_string(answer, "session_id"));
    b->token = sl_strdup(sl_json_string(answer, "lease_token"));
    b->seconds = sl_json_int(answer, "lease_seconds", 0);
    b->seats = sl_claims_seats(claims);
    if (sl_parse_time(sl_json_string(answer, "lease_expires_at"), &b->expires_at) != 0) {
        b->expires_at = 0;
    }
    sl_client_ref(client);
    b->client = client;
    if (!b->path || !b->license_id || !b->client_id || !b->session_id || !b->token) {
        seatlease_borrowed_free(b);
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    *out = b;
    return SEATLEASE_OK;
}

seatlease_code seatlease_borrowed_load(seatlease_client *client, const char *path,
                                       seatlease_borrowed **out, seatlease_error **error) {
    if (out != NULL) {
        *out = NULL;
    }
    if (client == NULL || path == NULL || out == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "client, path and borrowed are required.");
    }
    char *text = NULL;
    size_t length = 0;
    seatlease_code code = read_file(path, &text, &length, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    cJSON *document = sl_parse_object(text, length);
    free(text);
    const char *format = sl_json_string(document, "format");
    const cJSON *request = cJSON_GetObjectItemCaseSensitive(document, "request");
    const cJSON *answer = cJSON_GetObjectItemCaseSensitive(document, "answer");
    const cJSON *jwks = cJSON_GetObjectItemCaseSensitive(document, "jwks");
    if (format == NULL || strcmp(format, SL_BORROWED_FORMAT) != 0 || !cJSON_IsObject(request) ||
        !cJSON_IsObject(answer) || jwks == NULL) {
        cJSON_Delete(document);
        return not_a_borrowed_seat(path, error);
    }
    cJSON *claims = NULL;
    code = verify_saved(client, request, answer, jwks, &claims, error);
    if (code == SEATLEASE_OK) {
        code = borrowed_of(client, path, request, answer, claims, out, error);
    }
    cJSON_Delete(claims);
    cJSON_Delete(document);
    return code;
}

/* -- borrowing ------------------------------------------------------------------------------ */

/* The acquire body of a borrow: the caller's options, the borrow's length, this machine's
 * fingerprint and a nonce (kept in the file: the token must carry it). */
static seatlease_code borrow_body(seatlease_client *client, const char *license_id,
                                  const char *client_id, int seconds,
                                  const seatlease_acquire_options *o, cJSON **body,
                                  seatlease_error **error) {
    char fingerprint[65], nonce[32];
    seatlease_code code = sl_this_machine(client, fingerprint, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    sl_acquire_fields fields = {
        .license_id = license_id, .client_id = client_id, .borrow_seconds = seconds,
        .metadata_json = o->metadata_json, .user = o->user, .host = o->host,
        .request_id = o->request_id, .fingerprint = fingerprint, .seats = o->seats,
        .entitlements = o->entitlements, .entitlement_count = o->entitlement_count,
        .version = o->version,
    };
    if ((code = sl_acquire_body(&fields, body, error)) != SEATLEASE_OK) {
        return code;
    }
    sl_new_nonce(nonce);
    if (!cJSON_AddStringToObject(*body, "nonce", nonce)) {
        cJSON_Delete(*body);
        *body = NULL;
        return sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
    }
    return SEATLEASE_OK;
}

/* The file's text: the request as sent, the answer, the deployment's JWKS now. */
static seatlease_code borrowed_document(seatlease_client *client, const cJSON *request,
                                        const cJSON *answer, sl_stopper *stopper, char **text,
                                        seatlease_error **error) {
    char *keys = NULL;
    seatlease_code code = sl_fetch_jwks(client, stopper, 0, &keys, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    cJSON *jwks = sl_parse_object(keys, strlen(keys));
    free(keys);
    if (jwks == NULL) {
        return sl_fail(error, SEATLEASE_ERR_UNKNOWN_KEY_ID, 0, "token_unknown_kid",
                       "The JWKS is not JSON.");
    }
    /* request and answer are referred to (the caller's); jwks is the document's once added */
    cJSON *document = cJSON_CreateObject();
    int ok = document != NULL &&
             cJSON_AddStringToObject(document, "format", SL_BORROWED_FORMAT) &&
             cJSON_AddStringToObject(document, "base_url", client->base_url) &&
             cJSON_AddItemReferenceToObject(document, "request", (cJSON *)request) &&
             cJSON_AddItemReferenceToObject(document, "answer", (cJSON *)answer) &&
             cJSON_AddItemToObject(document, "jwks", jwks);
    if (!ok) {
        cJSON_Delete(jwks);
    }
    *text = ok ? cJSON_Print(document) : NULL;
    cJSON_Delete(document);
    return *text != NULL ? SEATLEASE_OK
                         : sl_fail(error, SEATLEASE_ERR_NO_MEMORY, 0, NULL, "Out of memory.");
}

seatlease_code seatlease_borrow(seatlease_client *client, const char *license_id,
                                const char *client_id, int seconds, const char *path,
                                const seatlease_acquire_options *given,
                                seatlease_borrowed **out, seatlease_error **error) {
    if (out != NULL) {
        *out = NULL;
    }
    if (client == NULL || path == NULL || out == NULL || seconds <= 0) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "client, path, borrowed and seconds > 0 are required.");
    }
    seatlease_acquire_options o;
    seatlease_acquire_options_init(&o);
    if (given != NULL) {
        seatlease_code code = sl_struct_in(&o, sizeof o, given, "seatlease_acquire_options", error);
        if (code != SEATLEASE_OK) {
            return code;
        }
    }
    cJSON *request = NULL, *answer = NULL;
    seatlease_code code = borrow_body(client, license_id, client_id, seconds, &o, &request, error);
    if (code != SEATLEASE_OK) {
        return code;
    }
    sl_stopper *cancel = sl_cancel_stopper(o.cancel);
    int status = 0;
    code = sl_call(client, "acquire", request, -1, 0, cancel, &answer, &status, error);
    if (code != SEATLEASE_OK) {
        cJSON_Delete(request);
        return code;
    }
    char *text = NULL;
    code = borrowed_document(client, request, answer, cancel, &text, error);
    cJSON_Delete(request);
    cJSON_Delete(answer);
    if (code == SEATLEASE_OK) {
        code = save_file(path, text, error);
        cJSON_free(text);
    }
    if (code != SEATLEASE_OK) {
        return code;
    }
    code = seatlease_borrowed_load(client, path, out, error);
    if (code != SEATLEASE_OK) {
        remove(path); /* a seat that does not verify is no seat: nothing saved for later */
    }
    return code;
}

/* -- the borrowed seat ----------------------------------------------------------------------- */

const char *seatlease_borrowed_license_id(const seatlease_borrowed *b) { return b ? b->license_id : ""; }
const char *seatlease_borrowed_client_id(const seatlease_borrowed *b) { return b ? b->client_id : ""; }
const char *seatlease_borrowed_session_id(const seatlease_borrowed *b) { return b ? b->session_id : ""; }
const char *seatlease_borrowed_token(const seatlease_borrowed *b) { return b ? b->token : ""; }
const char *seatlease_borrowed_path(const seatlease_borrowed *b) { return b ? b->path : ""; }
double seatlease_borrowed_expires_at(const seatlease_borrowed *b) { return b ? b->expires_at : 0; }
int seatlease_borrowed_seconds(const seatlease_borrowed *b) { return b ? b->seconds : 0; }
int seatlease_borrowed_seats(const seatlease_borrowed *b) { return b ? b->seats : 1; }

double seatlease_borrowed_seconds_left(const seatlease_borrowed *b) {
    double left = b ? b->expires_at - sl_wall_now() : 0;
    return left > 0 ? left : 0;
}

seatlease_code seatlease_borrowed_return(seatlease_borrowed *b, seatlease_answer **answer,
                                         seatlease_error **error) {
    if (answer != NULL) {
        *answer = NULL;
    }
    if (b == NULL) {
        return sl_fail(error, SEATLEASE_ERR_ARGUMENT, 0, NULL, "borrowed is NULL.");
    }
    seatlease_code code = seatlease_release(b->client, b->license_id, b->session_id, answer, error);
    if (code == SEATLEASE_OK && remove(b->path) != 0 && errno != ENOENT) {
        int cause = errno;
        if (answer != NULL) {
            seatlease_answer_free(*answer);
            *answer = NULL;
        }
        return sl_fail(error, SEATLEASE_ERR_FILE, 0, "file_error",
                       "%.300s: returned, but not deleted: %s", b->path, strerror(cause));
    }
    return code;
}

void seatlease_borrowed_free(seatlease_borrowed *b) {
    if (b == NULL) {
        return;
    }
    free(b->path);
    free(b->license_id);
    free(b->client_id);
    free(b->session_id);
    free(b->token);
    sl_client_unref(b->client);
    free(b);
}
