// seatlease.hpp: a header-only C++17 RAII wrapper of libseatlease (seatlease.h).
//
//     seatlease::Library library;                        // seatlease_global_init, once
//     seatlease::Client client(url, api_key, &options);  // options: a seatlease_options
//     seatlease::Seat seat = client.lease("cad-suite", lease_options);
//     seat.info().seats_used;                            // released in ~Seat
//
// A Seat shares the ownership of its client: `Seat s = Client(url, key).lease(...)` is
// safe (the client lives until the last Seat of it goes). Failures throw seatlease::Error
// (a std::runtime_error) with the C code, the HTTP status, the server's code and message,
// and a denial's seat counts. Seats are movable, not copyable; a Client is a shared handle.
#ifndef SEATLEASE_HPP
#define SEATLEASE_HPP

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "seatlease.h"

namespace seatlease {

class Error : public std::runtime_error {
  public:
    explicit Error(seatlease_error *error)
        : std::runtime_error(describe(error)), code_(seatlease_error_code(error)),
          status_(seatlease_error_status(error)), server_code_(seatlease_error_server_code(error)),
          message_(seatlease_error_message(error)), reason_(seatlease_error_reason(error)),
          body_json_(seatlease_error_body_json(error)),
          retry_after_(seatlease_error_retry_after_seconds(error)),
          seats_used_(seatlease_error_seats_used(error)),
          seats_total_(seatlease_error_seats_total(error)),
          seats_requested_(seatlease_error_seats_requested(error)),
          held_seats_(seatlease_error_held_seats(error)),
          queue_max_(seatlease_error_queue_max(error)) {
        seatlease_error_free(error);
    }
    Error(seatlease_code code, const std::string &message)
        : std::runtime_error(message), code_(code), server_code_(seatlease_code_name(code)),
          message_(message) {}

    seatlease_code code() const noexcept { return code_; }
    int status() const noexcept { return status_; }                  // 0: no answer came back
    const std::string &server_code() const noexcept { return server_code_; }
    const std::string &message() const noexcept { return message_; }
    // a 410's: "expired", "unknown" or "revoked" (an operator freed the seat)
    const std::string &reason() const noexcept { return reason_; }
    const std::string &body_json() const noexcept { return body_json_; }
    int retry_after_seconds() const noexcept { return retry_after_; }
    // A denial's numbers (409), -1 when the answer does not say.
    int seats_used() const noexcept { return seats_used_; }
    int seats_total() const noexcept { return seats_total_; }
    // The weight asked (1 when none is named), the weight of the lease held (a
    // seats_mismatch; -1 otherwise), a queue_full's queue size (-1 otherwise).
    int seats_requested() const noexcept { return seats_requested_; }
    int held_seats() const noexcept { return held_seats_; }
    int queue_max() const noexcept { return queue_max_; }
    bool is_token_error() const noexcept { return seatlease_code_is_token_error(code_) != 0; }
    bool is_license_suspended() const noexcept {
        return seatlease_code_is_license_suspended(code_) != 0;
    }
    bool is_no_seats() const noexcept { return seatlease_code_is_no_seats(code_) != 0; }

  private:
    static std::string describe(const seatlease_error *error) {
        return std::string("seatlease: ") + seatlease_error_server_code(error) + ": " +
               seatlease_error_message(error);
    }
    seatlease_code code_;
    int status_ = 0;
    std::string server_code_, message_, reason_, body_json_ = "{}";
    int retry_after_ = -1, seats_used_ = -1, seats_total_ = -1, seats_requested_ = 1,
        held_seats_ = -1, queue_max_ = -1;
};

namespace detail {
inline void check(seatlease_code code, seatlease_error *error) {
    if (code != SEATLEASE_OK) {
        if (error != nullptr) {
            throw Error(error);
        }
        throw Error(code, std::string("seatlease: ") + seatlease_code_name(code));
    }
}

// A copy the library made (seatlease_string_free), as a string ("" for NULL).
inline std::string take(char *text) {
    std::unique_ptr<char, void (*)(char *)> owned(text, seatlease_string_free);
    return owned ? std::string(owned.get()) : std::string();
}

inline std::optional<std::chrono::system_clock::time_point> time_of(double unix_seconds) {
    if (unix_seconds <= 0) {
        return std::nullopt;
    }
    auto since = std::chrono::duration<double>(unix_seconds);
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(since));
}
}  // namespace detail

// seatlease_global_init for the lifetime of the object (make one in main).
class Library {
  public:
    Library() { detail::check(seatlease_global_init(), nullptr); }
    ~Library() { seatlease_global_cleanup(); }
    Library(const Library &) = delete;
    Library &operator=(const Library &) = delete;
};

// A Cancel button: set get() as the options' cancel, trigger() from any thread.
class Cancel {
  public:
    Cancel() { detail::check(seatlease_cancel_new(&cancel_), nullptr); }
    ~Cancel() { seatlease_cancel_free(cancel_); }
    Cancel(const Cancel &) = delete;
    Cancel &operator=(const Cancel &) = delete;
    void trigger() noexcept { seatlease_cancel_trigger(cancel_); }
    bool triggered() const noexcept { return seatlease_cancel_triggered(cancel_) != 0; }
    seatlease_cancel *get() const noexcept { return cancel_; }

  private:
    seatlease_cancel *cancel_ = nullptr;
};

// A seat held by heartbeats on the library's thread; released in the destructor.
class Seat {
  public:
    using time_point = std::chrono::system_clock::time_point;

    Seat(std::shared_ptr<seatlease_client> client, seatlease_lease *lease) noexcept
        : client_(std::move(client)), lease_(lease) {}
    // A lease of the C API (its client lives as long as the lease: seatlease_client_free).
    explicit Seat(seatlease_lease *lease) noexcept : lease_(lease) {}
    Seat(Seat &&other) noexcept
        : client_(std::move(other.client_)), lease_(std::exchange(other.lease_, nullptr)) {}
    Seat &operator=(Seat &&other) noexcept {
        if (this != &other) {
            seatlease_lease_free(lease_);
            lease_ = std::exchange(other.lease_, nullptr);
            client_ = std::move(other.client_);
        }
        return *this;
    }
    Seat(const Seat &) = delete;
    Seat &operator=(const Seat &) = delete;
    ~Seat() { seatlease_lease_free(lease_); }  // releases (never throws), then frees

    seatlease_lease_info info() const {
        seatlease_lease_info info{};
        seatlease_lease_get_info(lease_, &info);
        return info;
    }
    std::string session_id() const { return info().session_id; }
    bool lost() const { return info().lost != 0; }
    std::string lost_reason() const { return info().lost_reason; }
    // The seat's weight: how many of the license's seats it counts as (1 for a plain one).
    int seats() const { return seatlease_lease_seats(lease_); }
    // The last verified lease token ("" when the client does not verify).
    std::string token() const { return detail::take(seatlease_lease_token(lease_)); }

    // The license's terms as the last answer gave them (its token signed them): its
    // entitlements, the highest product version it covers ("" when any), its end and its
    // grace's end (none when it has none), and whether it is in its grace.
    std::vector<std::string> entitlements() const {
        std::vector<std::string> granted;
        for (int i = 0;; i++) {
            char *entitlement = seatlease_lease_entitlement(lease_, i);
            if (entitlement == nullptr) {
                return granted;
            }
            granted.push_back(detail::take(entitlement));
        }
    }
    std::string max_version() const { return detail::take(seatlease_lease_max_version(lease_)); }
    std::optional<time_point> license_expires_at() const { return term().expires_at; }
    std::optional<time_point> license_grace_ends_at() const { return term().grace_ends_at; }
    bool in_grace() const { return term().in_grace; }

    // The license's idle rule: touch() on user activity (from the first one on, heartbeats
    // say how long the product was idle; after a warning the next goes at once); a busy
    // scope while work must not be interrupted (`auto busy = seat.busy();`, nestable).
    // idle_reclaim_at(): while warned, when the seat is reclaimed unless used before.
    void touch() const noexcept { seatlease_lease_touch(lease_); }
    // touch() for activity seen that long ago (the system's own idle time).
    void touch_ago(std::chrono::duration<double> ago) const noexcept {
        seatlease_lease_touch_ago(lease_, ago.count());
    }
    void busy_begin() const noexcept { seatlease_lease_busy_begin(lease_); }
    void busy_end() const noexcept { seatlease_lease_busy_end(lease_); }
    class Busy {
      public:
        explicit Busy(seatlease_lease *lease) noexcept : lease_(lease) {
            seatlease_lease_busy_begin(lease_);
        }
        Busy(Busy &&other) noexcept : lease_(std::exchange(other.lease_, nullptr)) {}
        Busy(const Busy &) = delete;
        Busy &operator=(const Busy &) = delete;
        Busy &operator=(Busy &&) = delete;
        ~Busy() {
            if (lease_ != nullptr) {
                seatlease_lease_busy_end(lease_);
            }
        }

      private:
        seatlease_lease *lease_;
    };
    [[nodiscard]] Busy busy() const noexcept { return Busy(lease_); }
    std::optional<time_point> idle_reclaim_at() const {
        return detail::time_of(info().idle_reclaim_at);
    }
    // On a license that shares seats: the sessions sharing this seat (0: not shared).
    int shared_sessions() const { return info().shared_sessions; }

    // Release now (throws on failure); the destructor then only frees.
    void release() {
        seatlease_error *error = nullptr;
        seatlease_code code = seatlease_lease_release(lease_, &error);
        detail::check(code, error);
    }
    seatlease_lease *get() const noexcept { return lease_; }

  private:
    struct Term {
        std::optional<time_point> expires_at, grace_ends_at;
        bool in_grace;
    };
    Term term() const {
        double expires_at = 0, grace_ends_at = 0;
        int in_grace = 0;
        seatlease_lease_license_term(lease_, &expires_at, &grace_ends_at, &in_grace);
        return {detail::time_of(expires_at), detail::time_of(grace_ends_at), in_grace != 0};
    }

    std::shared_ptr<seatlease_client> client_;  // declared first: freed after the lease
    seatlease_lease *lease_;
};

// A client (thread-safe, cheap to copy: copies share it). It lives as long as the last
// copy or Seat of it.
class Client {
  public:
    Client(const std::string &base_url, const std::string &api_key,
           const seatlease_options *options = nullptr) {
        seatlease_client *client = nullptr;
        seatlease_error *error = nullptr;
        seatlease_code code =
            seatlease_client_new(base_url.c_str(), api_key.c_str(), options, &client, &error);
        detail::check(code, error);  // not in one expression: arguments are unsequenced
        client_.reset(client, seatlease_client_free);
    }

    Seat lease(const std::string &license_id, const seatlease_lease_options &options) {
        seatlease_lease *lease = nullptr;
        seatlease_error *error = nullptr;
        seatlease_code code =
            seatlease_lease_acquire(client_.get(), license_id.c_str(), &options, &lease, &error);
        detail::check(code, error);
        return Seat(client_, lease);
    }
    Seat lease(const std::string &license_id, const std::string &client_id) {
        seatlease_lease_options options;
        seatlease_lease_options_init(&options);
        options.client_id = client_id.c_str();
        return lease(license_id, options);
    }
    seatlease_client *get() const noexcept { return client_.get(); }

  private:
    std::shared_ptr<seatlease_client> client_;
};

}  // namespace seatlease

#endif  // SEATLEASE_HPP
