// seatlease.hpp: a header-only C++17 RAII wrapper of libseatlease (seatlease.h).
//
//     seatlease::Library library;                        // seatlease_global_init, once
//     seatlease::Client client(url, api_key, options);   // options: a seatlease_options
//     seatlease::Seat seat = client.lease("cad-suite", lease_options);
//     seat.info().seats_used;                            // released in ~Seat
//
// Failures throw seatlease::Error (a std::runtime_error) with the C code, the HTTP
// status, the server's code and message. Handles are movable, not copyable.
#ifndef SEATLEASE_HPP
#define SEATLEASE_HPP

#include <memory>
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
          retry_after_(seatlease_error_retry_after_seconds(error)) {
        seatlease_error_free(error);
    }
    Error(seatlease_code code, const std::string &message)
        : std::runtime_error(message), code_(code), server_code_(seatlease_code_name(code)) {}

    seatlease_code code() const noexcept { return code_; }
    int status() const noexcept { return status_; }
    const std::string &server_code() const noexcept { return server_code_; }
    int retry_after_seconds() const noexcept { return retry_after_; }
    bool is_token_error() const noexcept { return seatlease_code_is_token_error(code_) != 0; }

  private:
    static std::string describe(const seatlease_error *error) {
        return std::string("seatlease: ") + seatlease_error_server_code(error) + ": " +
               seatlease_error_message(error);
    }
    seatlease_code code_;
    int status_ = 0;
    std::string server_code_;
    int retry_after_ = -1;
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
}  // namespace detail

// seatlease_global_init for the lifetime of the object (make one in main).
class Library {
  public:
    Library() { detail::check(seatlease_global_init(), nullptr); }
    ~Library() { seatlease_global_cleanup(); }
    Library(const Library &) = delete;
    Library &operator=(const Library &) = delete;
};

// A seat held by heartbeats on the library's thread; released in the destructor.
class Seat {
  public:
    explicit Seat(seatlease_lease *lease) noexcept : lease_(lease) {}
    Seat(Seat &&other) noexcept : lease_(std::exchange(other.lease_, nullptr)) {}
    Seat &operator=(Seat &&other) noexcept {
        if (this != &other) {
            seatlease_lease_free(lease_);
            lease_ = std::exchange(other.lease_, nullptr);
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
    // The seat's weight: how many of the license's seats it counts as (1 for a plain one).
    int seats() const { return seatlease_lease_seats(lease_); }
    std::string token() const {
        std::unique_ptr<char, void (*)(char *)> text(seatlease_lease_token(lease_),
                                                     seatlease_string_free);
        return text ? std::string(text.get()) : std::string();
    }
    // Release now (throws on failure); the destructor then only frees.
    void release() {
        seatlease_error *error = nullptr;
        seatlease_code code = seatlease_lease_release(lease_, &error);
        detail::check(code, error);
    }
    seatlease_lease *get() const noexcept { return lease_; }

  private:
    seatlease_lease *lease_;
};

class Client {
  public:
    Client(const std::string &base_url, const std::string &api_key,
           const seatlease_options *options = nullptr) {
        seatlease_error *error = nullptr;
        seatlease_code code =
            seatlease_client_new(base_url.c_str(), api_key.c_str(), options, &client_, &error);
        detail::check(code, error);  // not in one expression: arguments are unsequenced
    }
    Client(Client &&other) noexcept : client_(std::exchange(other.client_, nullptr)) {}
    Client(const Client &) = delete;
    Client &operator=(const Client &) = delete;
    Client &operator=(Client &&) = delete;
    // Every Seat of this client must be gone first.
    ~Client() { seatlease_client_free(client_); }

    Seat lease(const std::string &license_id, const seatlease_lease_options &options) {
        seatlease_lease *lease = nullptr;
        seatlease_error *error = nullptr;
        seatlease_code code =
            seatlease_lease_acquire(client_, license_id.c_str(), &options, &lease, &error);
        detail::check(code, error);
        return Seat(lease);
    }
    Seat lease(const std::string &license_id, const std::string &client_id) {
        seatlease_lease_options options;
        seatlease_lease_options_init(&options);
        options.client_id = client_id.c_str();
        return lease(license_id, options);
    }
    seatlease_client *get() const noexcept { return client_; }

  private:
    seatlease_client *client_ = nullptr;
};

}  // namespace seatlease

#endif  // SEATLEASE_HPP
