// seatlease.hpp: errors become seatlease::Error with the code; a Seat is released in its
// destructor (against the served functions when SEATLEASE_TEST_URL is set).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "seatlease.hpp"

static int failures = 0;
#define EXPECT(cond)                                                                       \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            std::fprintf(stderr, "%s:%d: EXPECT failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

int main() {
    seatlease::Library library;
    int passed = 0, skipped = 0;
    try {
        seatlease::Client bad("ftp://nowhere", "k");
        EXPECT(false);
    } catch (const seatlease::Error &error) {
        EXPECT(error.code() == SEATLEASE_ERR_ARGUMENT);
    }
    std::printf("--- %s: cpp_errors_carry_the_code\n", failures ? "FAIL" : "PASS");
    passed += failures == 0;
    const char *url = std::getenv("SEATLEASE_TEST_URL"), *key = std::getenv("SEATLEASE_TEST_API_KEY");
    if (url == nullptr || key == nullptr) {
        std::printf("--- SKIP: cpp_seat_released_in_its_destructor\n");
        skipped++;
    } else {
        int before = failures;
        seatlease_options options;
        seatlease_options_init(&options);
        options.verify = 1;
        seatlease::Client client(url, key, &options);
        std::string session;
        {
            seatlease::Seat seat = client.lease("cpp-seat", "pc-1");  // a license of 1 seat
            session = seat.session_id();
            EXPECT(!session.empty() && seat.info().verified && !seat.token().empty());
            EXPECT(seat.seats() == 1);  // a plain seat
            try {
                seatlease::Seat second = client.lease("cpp-seat", "pc-2");
                EXPECT(false);
            } catch (const seatlease::Error &error) {
                EXPECT(error.code() == SEATLEASE_ERR_NO_SEATS_AVAILABLE && error.status() == 409);
                EXPECT(error.server_code() == "no_seats_available" && error.retry_after_seconds() >= 1);
            }
        }
        // released by ~Seat: the seat is free again
        seatlease::Seat again = client.lease("cpp-seat", "pc-2");
        EXPECT(again.session_id() != session);
        again.release();
        std::printf("--- %s: cpp_seat_released_in_its_destructor\n", failures > before ? "FAIL" : "PASS");
        passed += failures == before;
    }
    std::printf("seatlease-c cpp: %d passed, %d failed, %d skipped\n", passed, failures ? 1 : 0, skipped);
    return failures ? 1 : 0;
}
