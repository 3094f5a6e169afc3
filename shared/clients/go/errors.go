package seatlease

import (
	"errors"
	"fmt"
	"math"
	"strconv"
)

// The kinds of error, for errors.Is. Every error a call returns for an answer (or for no
// answer) is a *SeatError (errors.As gives its Status, Code, Message and Body) whose kinds
// are one or more of these: a SeatWaitTimeout, a UserLimitReached and a QueueFull are
// also a NoSeatsAvailable (a SeatsMismatch is not: waiting does not cure it), a UserDenied (and a LicenseNotStarted, LicenseExpired,
// NotEntitled or VersionNotEntitled) is also a LicenseSuspended, and every token error is
// also ErrToken.
var (
	ErrInvalidRequest     = errors.New("seatlease: invalid request (400)")
	ErrUnauthenticated    = errors.New("seatlease: API key missing, unknown or revoked (401)")
	ErrLicenseSuspended   = errors.New("seatlease: license suspended (403)")
	ErrLicenseNotFound    = errors.New("seatlease: no such license (404)")
	ErrNoSeatsAvailable   = errors.New("seatlease: every seat is taken (409)")
	ErrSeatWaitTimeout    = errors.New("seatlease: no seat came free in time")
	ErrSessionExpired     = errors.New("seatlease: the session holds no seat (410)")
	ErrBackendUnavailable = errors.New("seatlease: service unreachable or unavailable")

	// ErrUserLimitReached: the user already holds the license's MaxPerUser live leases
	// (409 user_limit_reached; RetryAfterSeconds: until the earliest of them ends).
	ErrUserLimitReached = errors.New("seatlease: user_limit_reached (409)")
	// ErrUserDenied: the license's policy refuses this user any seat (403 user_denied).
	ErrUserDenied = errors.New("seatlease: user_denied (403)")
	// ErrQueueFull: no seat, and the license's wait queue already holds QueueMax clients
	// (409 queue_full; also a NoSeatsAvailable).
	ErrQueueFull = errors.New("seatlease: queue_full (409)")
	// ErrSeatsMismatch: this client holds a live lease of HeldSeats seats and asked for
	// another weight (409 seats_mismatch; not a NoSeatsAvailable: release the lease to
	// take the other weight, or renew without Seats).
	ErrSeatsMismatch = errors.New("seatlease: seats_mismatch (409)")
	// ErrMachineMismatch: this client's seat was borrowed for another machine (its
	// token's cnf.machine), which keeps it until it is returned or the borrow ends (409
	// machine_mismatch; not a NoSeatsAvailable: waiting here does not cure it).
	ErrMachineMismatch = errors.New("seatlease: machine_mismatch (409)")
	// The license's term and entitlements (403s; each is also ErrLicenseSuspended): its
	// term has not begun (Body["starts_at"]), it ended with its grace (Body["expired_at"];
	// a heartbeat too, when the license ends its leases), it lacks entitlements the
	// product needs (Body["missing_entitlements"]), the version is above its max_version.
	ErrLicenseNotStarted  = errors.New("seatlease: license_not_started (403)")
	ErrLicenseExpired     = errors.New("seatlease: license_expired (403)")
	ErrNotEntitled        = errors.New("seatlease: not_entitled (403)")
	ErrVersionNotEntitled = errors.New("seatlease: version_not_entitled (403)")

	// ErrHTTP: an HTTP error answer with no kind of its own: a 404 that is not the
	// service's license_not_found (the service's own 404 "not_found" for a wrong base URL,
	// an empty 404 from a middlebox or a proxy), a redirect (never followed), a 500, any
	// status or code this client does not know. Its Code is the server's, else
	// "http_<status>" ("redirected" for a 3xx); its message names the URL requested (and a
	// redirect's Location): most often a wrong base URL.
	ErrHTTP = errors.New("seatlease: HTTP error (not a seatlease answer of a known kind)")
	// ErrInvalidResponse: a 2xx that is not a well-formed answer (not JSON, not an object,
	// a required field missing or of the wrong type, such as a grant whose session_id is
	// null); Code "invalid_response". Never a seat.
	ErrInvalidResponse = errors.New("seatlease: invalid_response")

	// ErrToken: the answer's signed token failed verification; the answer never counts.
	ErrToken          = errors.New("seatlease: token verification failed")
	ErrTokenMissing   = errors.New("seatlease: token_missing")
	ErrMalformedToken = errors.New("seatlease: token_malformed")
	ErrUnknownKeyID   = errors.New("seatlease: token_unknown_kid")
	ErrUntrustedKey   = errors.New("seatlease: token_untrusted_key")
	ErrBadSignature   = errors.New("seatlease: token_bad_signature")
	ErrWrongAudience  = errors.New("seatlease: token_wrong_audience")
	ErrTokenExpired   = errors.New("seatlease: token_expired")
	ErrTokenReplayed  = errors.New("seatlease: token_replayed")
	ErrTokenMismatch  = errors.New("seatlease: token_mismatch")
	// ErrTokenWrongMachine: a borrowed seat's token names another machine (cnf.machine):
	// the file was copied from the machine that borrowed it.
	ErrTokenWrongMachine = errors.New("seatlease: token_wrong_machine")
)

// byCode: the kinds of each error code the service answers, whatever the status (issue
// 48: an answer is read by its code, so a 404 "not_found" from a wrong base URL or an
// empty 404 from a middlebox is no ErrLicenseNotFound).
var byCode = map[string][]error{
	"invalid_request":      {ErrInvalidRequest},
	"unauthenticated":      {ErrUnauthenticated},
	"license_suspended":    {ErrLicenseSuspended},
	"forbidden":            {ErrLicenseSuspended}, // a tenant admin key: no seat with it
	"user_denied":          {ErrLicenseSuspended, ErrUserDenied},
	"license_not_started":  {ErrLicenseSuspended, ErrLicenseNotStarted},
	"license_expired":      {ErrLicenseSuspended, ErrLicenseExpired},
	"not_entitled":         {ErrLicenseSuspended, ErrNotEntitled},
	"version_not_entitled": {ErrLicenseSuspended, ErrVersionNotEntitled},
	"license_not_found":    {ErrLicenseNotFound},
	"no_seats_available":   {ErrNoSeatsAvailable},
	"user_limit_reached":   {ErrNoSeatsAvailable, ErrUserLimitReached},
	"queue_full":           {ErrNoSeatsAvailable, ErrQueueFull},
	"seats_mismatch":       {ErrSeatsMismatch},   // alone: waiting does not cure it
	"machine_mismatch":     {ErrMachineMismatch}, // alone: waiting here does not cure it
	"session_expired":      {ErrSessionExpired},
	"rate_limited":         {ErrBackendUnavailable},
	"backend_unavailable":  {ErrBackendUnavailable},
	"not_configured":       {ErrBackendUnavailable},
	"recovering":           {ErrBackendUnavailable},
}

// gateway: the statuses a front end (a load balancer, a proxy) answers by itself, with
// no code of the service's: retried as an unavailable service.
var gateway = map[int]bool{429: true, 502: true, 503: true, 504: true}

var tokenKinds = map[string]error{
	"token_missing":        ErrTokenMissing,
	"token_malformed":      ErrMalformedToken,
	"token_unknown_kid":    ErrUnknownKeyID,
	"token_untrusted_key":  ErrUntrustedKey,
	"token_bad_signature":  ErrBadSignature,
	"token_wrong_audience": ErrWrongAudience,
	"token_expired":        ErrTokenExpired,
	"token_replayed":       ErrTokenReplayed,
	"token_mismatch":       ErrTokenMismatch,
	"token_wrong_machine":  ErrTokenWrongMachine,
}

// SeatError is an error answer from seatlease: HTTP Status (0 when no answer came back),
// machine Code, human Message; Body is the answer's "error" object as sent.
type SeatError struct {
	Status  int
	Code    string
	Message string
	Body    map[string]any
	// RetryAfterHeader: seconds from the answer's Retry-After header, -1 without one.
	RetryAfterHeader float64
	kinds            []error
}

func (e *SeatError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("seatlease: %d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("seatlease: %s: %s", e.Code, e.Message)
}

// Is makes errors.Is(err, ErrNoSeatsAvailable) (and the other kinds) work.
func (e *SeatError) Is(target error) bool {
	for _, kind := range e.kinds {
		if kind == target {
			return true
		}
	}
	return false
}

func (e *SeatError) intField(name string, fallback int) int {
	if value, ok := e.Body[name].(float64); ok && value == math.Trunc(value) {
		return int(value)
	}
	return fallback
}

// SeatsUsed and SeatsTotal: a denial's numbers (409).
func (e *SeatError) SeatsUsed() int  { return e.intField("seats_used", 0) }
func (e *SeatError) SeatsTotal() int { return e.intField("seats_total", 0) }

// SeatsHeld and SeatsReserved: a denial's free seats that are not the caller's (held for
// clients ahead in the wait queue; reserved for groups its user is not in).
func (e *SeatError) SeatsHeld() int     { return e.intField("seats_held", 0) }
func (e *SeatError) SeatsReserved() int { return e.intField("seats_reserved", 0) }

// SeatsRequested: the weight a denial (409 no_seats_available) or a SeatsMismatch asked
// for (1 for a plain request); HeldSeats: a SeatsMismatch's weight of the lease held.
func (e *SeatError) SeatsRequested() int {
	return e.intField("seats_requested", e.intField("seats", 1))
}
func (e *SeatError) HeldSeats() int { return e.intField("held_seats", 0) }

// QueueMax: a QueueFull's bound (the most clients the license's wait queue holds).
func (e *SeatError) QueueMax() int { return e.intField("queue_max", 0) }

// MaxPerUser and Sessions: a UserLimitReached's numbers (the license's limit, the user's
// live leases).
func (e *SeatError) MaxPerUser() int { return e.intField("max_per_user", 0) }
func (e *SeatError) Sessions() int   { return e.intField("sessions", 0) }

// RetryAfterSeconds of a denial (409): when a seat may free, at least 1.
func (e *SeatError) RetryAfterSeconds() int {
	header := 1
	if e.RetryAfterHeader > 0 {
		header = int(e.RetryAfterHeader)
	}
	if seconds := e.intField("retry_after_seconds", header); seconds > 1 {
		return seconds
	}
	return 1
}

// Reason of a SessionExpired: "expired" (the heartbeat came after the deadline), "unknown"
// (no such session: released, reclaimed, or lost with the server's data) or "revoked" (an
// operator freed the seat: seatlease revoke, the portal's "Free seat"; the product can
// tell its user so). "unknown" when the answer names none.
func (e *SeatError) Reason() string {
	if reason, ok := e.Body["reason"].(string); ok {
		return reason
	}
	return "unknown"
}

// backendRetryAfter: a 503's hint in seconds (body, then header), -1 without one.
func (e *SeatError) backendRetryAfter() float64 {
	if value, ok := e.Body["retry_after_seconds"].(float64); ok {
		return value
	}
	return e.RetryAfterHeader
}

func newError(status int, code, message string, body map[string]any, retryAfter float64, kinds ...error) *SeatError {
	if body == nil {
		body = map[string]any{}
	}
	return &SeatError{Status: status, Code: code, Message: message, Body: body, RetryAfterHeader: retryAfter, kinds: kinds}
}

func tokenError(status int, code, message string) *SeatError {
	return newError(status, code, message, nil, -1, ErrToken, tokenKinds[code])
}

func unavailable(code, message string) *SeatError {
	return newError(0, code, message, nil, -1, ErrBackendUnavailable)
}

// errorFromAnswer: the typed error of an HTTP error answer, by the answer's error.code
// (byCode); without a code of the service's, a front end's 429/502/503/504 is an
// unavailable service and any other status an ErrHTTP. where: the URL requested, named
// in an ErrHTTP's message.
func errorFromAnswer(where string, status int, payload map[string]any, retryAfterHeader, statusText string) *SeatError {
	body, _ := payload["error"].(map[string]any)
	code, _ := body["code"].(string)
	message, _ := body["message"].(string)
	if message == "" {
		message = "HTTP " + statusText
	}
	kinds, known := byCode[code]
	if !known && gateway[status] {
		kinds = []error{ErrBackendUnavailable}
	}
	if code == "" {
		code = fmt.Sprintf("http_%d", status)
	}
	if len(kinds) == 0 {
		kinds = []error{ErrHTTP}
		message = fmt.Sprintf("%s answered %d: %s", where, status, message)
	}
	return newError(status, code, message, body, parseRetryAfter(retryAfterHeader), kinds...)
}

// parseRetryAfter: seconds from a Retry-After header (integer seconds; an HTTP date from
// a proxy is ignored), -1 when there is none.
func parseRetryAfter(value string) float64 {
	seconds, err := strconv.ParseFloat(value, 64)
	if err != nil || seconds < 0 || seconds >= 86400 || math.IsNaN(seconds) {
		return -1
	}
	return seconds
}
