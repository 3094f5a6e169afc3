// seatlease.hpp: errors become seatlease::Error with the code and a denial's seat counts; a
// Seat is released in its destructor and keeps its client alive (a temporary Client is
// safe: built with ASan, this is where a use-after-free would show); the license's terms
// and the seat's weight (against the served functions when SEATLEASE_TEST_URL is set;
// tests/test_client_c.py creates the licenses cpp-seat, cpp-temp and cpp-terms).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "seatlease.hpp"

static int failures = 0;
#define EXPECT(cond)                                                                       \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static const char *url = std::getenv("SEATLEASE_TEST_URL");
static const char *key = std::getenv("SEATLEASE_TEST_API_KEY");
static int passed = 0, failed = 0, skipped = 0;

static void run(const char *name, bool live, const std::function<void()> &test) {
    if (live && (url == nullptr || key == nullptr)) {
        std::printf("--- SKIP: %s\n", name);
        skipped++;
        return;
    }
    int before = failures;
    try {
        test();
    } catch (const seatlease::Error &error) {
        std::fprintf(stderr, "%s: unexpected %s\n", name, error.what());
        failures++;
    }
    bool ok = failures == before;
    std::printf("--- %s: %s\n", ok ? "PASS" : "FAIL", name);
    (ok ? passed : failed)++;
}

static void errors_carry_the_code() {
    try {
        seatlease::Client bad("ftp://nowhere", "k");
        EXPECT(false);
    } catch (const seatlease::Error &error) {
        EXPECT(error.code() == SEATLEASE_ERR_ARGUMENT);
    }
}

// The served functions' keys, pinned (SEATLEASE_TEST_PINNED_KEYS, comma separated).
static std::vector<std::string> pinned_texts() {
    std::vector<std::string> keys;
    const char *env = std::getenv("SEATLEASE_TEST_PINNED_KEYS");
    std::string all = env != nullptr ? env : "";
    size_t start = 0;
    while (start < all.size()) {
        size_t comma = all.find(',', start);
        if (comma == std::string::npos) comma = all.size();
        if (comma > start) keys.push_back(all.substr(start, comma - start));
        start = comma + 1;
    }
    return keys;
}
static const std::vector<std::string> pinned_keys = pinned_texts();
static std::vector<const char *> pinned_pointers() {
    std::vector<const char *> pointers;
    for (const std::string &text : pinned_keys) pointers.push_back(text.c_str());
    return pointers;
}
static const std::vector<const char *> pinned = pinned_pointers();

static seatlease_options verifying() {
    seatlease_options options;
    seatlease_options_init(&options);
    options.pinned_keys = pinned.data();
    options.pinned_key_count = pinned.size();
    return options;
}

static void seat_released_in_its_destructor() {
    seatlease_options options = verifying();
    seatlease::Client client(url, key, &options);
    std::string session;
    {
        seatlease::Seat seat = client.lease("cpp-seat", "pc-1");  // a license of 1 seat
        session = seat.session_id();
        EXPECT(!session.empty() && seat.info().verified && !seat.token().empty());
        EXPECT(seat.seats() == 1 && seat.info().seats == 1);  // a plain seat
        try {
            seatlease::Seat second = client.lease("cpp-seat", "pc-2");
            EXPECT(false);
        } catch (const seatlease::Error &error) {
            EXPECT(error.code() == SEATLEASE_ERR_NO_SEATS_AVAILABLE && error.status() == 409);
            EXPECT(error.server_code() == "no_seats_available" && error.retry_after_seconds() >= 1);
            EXPECT(error.seats_used() == 1 && error.seats_total() == 1 && error.is_no_seats());
        }
    }
    // released by ~Seat: the seat is free again
    seatlease::Seat again = client.lease("cpp-seat", "pc-2");
    EXPECT(again.session_id() != session);
    again.release();
}

// Issue 39, item 5: the Client is a temporary, gone at the end of the statement; the Seat
// keeps it (its heartbeats and its release use it). Under ASan a dangling client is a
// heap-use-after-free here.
static void a_seat_outlives_its_temporary_client() {
    std::string session;
    {
        seatlease_options options = verifying();
        seatlease::Seat seat = seatlease::Client(url, key, &options).lease("cpp-temp", "pc-1");
        session = seat.session_id();
        EXPECT(!session.empty() && !seat.lost());
        seatlease::Seat moved = std::move(seat);  // the client goes with the moved seat
        EXPECT(moved.session_id() == session);
    }
    // released through the client the Seat kept: the one seat is free for another
    seatlease_options options = verifying();
    seatlease::Seat next = seatlease::Client(url, key, &options).lease("cpp-temp", "pc-2");
    EXPECT(next.session_id() != session);
}

// The license's terms and the seat's weight as getters; an Error with the seat counts.
static void terms_weights_and_seat_counts() {
    seatlease_options options = verifying();
    seatlease::Client client(url, key, &options);
    seatlease_lease_options heavy;
    seatlease_lease_options_init(&heavy);
    heavy.client_id = "render-1";
    heavy.seats = 2;  // the whole license of 2
    seatlease::Seat seat = client.lease("cpp-terms", heavy);
    EXPECT(seat.seats() == 2);
    EXPECT((seat.entitlements() == std::vector<std::string>{"pro", "render"}));
    EXPECT(seat.max_version() == "2026.4");
    EXPECT(seat.license_expires_at().has_value() && seat.license_grace_ends_at().has_value());
    EXPECT(*seat.license_grace_ends_at() > *seat.license_expires_at());
    EXPECT(*seat.license_expires_at() > std::chrono::system_clock::now());
    EXPECT(!seat.in_grace());
    try {
        seatlease::Seat none = client.lease("cpp-terms", "ws-2");
        EXPECT(false);
    } catch (const seatlease::Error &error) {
        EXPECT(error.code() == SEATLEASE_ERR_NO_SEATS_AVAILABLE);
        EXPECT(error.seats_used() == 2 && error.seats_total() == 2 && error.seats_requested() == 1);
        EXPECT(error.held_seats() == -1 && error.queue_max() == -1);
    }
    heavy.seats = 1;  // another weight for the lease render-1 holds
    try {
        seatlease::Seat other = client.lease("cpp-terms", heavy);
        EXPECT(false);
    } catch (const seatlease::Error &error) {
        EXPECT(error.code() == SEATLEASE_ERR_SEATS_MISMATCH && !error.is_no_seats());
        EXPECT(error.held_seats() == 2 && error.seats_requested() == 1);
    }
}

// A Cancel handle ends a wait for ever on a full license.
static void a_cancel_ends_a_wait() {
    seatlease_options options = verifying();
    seatlease::Client client(url, key, &options);
    seatlease::Seat holder = client.lease("cpp-seat", "pc-1");
    seatlease::Cancel cancel;
    cancel.trigger();
    seatlease_lease_options waiting;
    seatlease_lease_options_init(&waiting);
    waiting.client_id = "pc-2";
    waiting.wait = 1;
    waiting.cancel = cancel.get();
    try {
        seatlease::Seat never = client.lease("cpp-seat", waiting);
        EXPECT(false);
    } catch (const seatlease::Error &error) {
        EXPECT(error.code() == SEATLEASE_ERR_CANCELLED && cancel.triggered());
    }
}

int main() {
    seatlease::Library library;
    run("cpp_errors_carry_the_code", false, errors_carry_the_code);
    run("cpp_seat_released_in_its_destructor", true, seat_released_in_its_destructor);
    run("cpp_a_seat_outlives_its_temporary_client", true, a_seat_outlives_its_temporary_client);
    run("cpp_terms_weights_and_seat_counts", true, terms_weights_and_seat_counts);
    run("cpp_a_cancel_ends_a_wait", true, a_cancel_ends_a_wait);
    std::printf("seatlease-c cpp: %d passed, %d failed, %d skipped\n", passed, failed, skipped);
    return failed ? 1 : skipped ? 77 : 0;  // 77: ctest's SKIP_RETURN_CODE
}
