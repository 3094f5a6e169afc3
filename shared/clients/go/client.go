// Package seatlease is the Go client of seatlease, a floating-license seat service: hold
// a seat (acquire, heartbeats in a goroutine, a new seat asked for at once when the old
// one is lost, release on Close), borrow one for offline use, and verify the
// deployment's signed answers. Standard library only; every call takes a context.
package seatlease

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	mathrand "math/rand"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Version of this client (sent in the User-Agent): the one version of all five seatlease
// clients, shared/clients/VERSION (a test checks that they agree).
const Version = "0.3.0"

// Options configure a Client (zero values: the defaults).
type Options struct {
	// Timeout bounds one whole exchange: connecting, sending, the answer's headers and its
	// whole body (an answer dripped a byte at a time ends at Timeout) (default 10 s).
	Timeout time.Duration
	// Retries: extra attempts of a call after a network error or a 503/429/502/504
	// (default 5; negative: none).
	Retries int
	// Backoff: first pause between attempts, doubled each time with jitter, never shorter
	// than Retry-After (default 500 ms). MaxBackoff: the largest, whatever Retry-After
	// says (default 30 s).
	Backoff, MaxBackoff time.Duration
	// MaxWaitPoll: longest pause between two acquires while waiting for a seat (default 30 s).
	MaxWaitPoll time.Duration
	// ReleaseTimeout: time budget of the release when a lease is closed, and of the
	// release of a refused grant's session (default 5 s).
	ReleaseTimeout time.Duration
	// PinnedKeys: the vendor's Ed25519 public keys (JWK map, PEM, or the JWK's "x", as its
	// JWKS at <baseURL>/keys lists them). Required (New refuses a client without them,
	// unless InsecureSkipVerify): every grant, renewal and release must carry a token
	// signed by one of them, for this license, session, client and request; a forged,
	// tampered, replayed, expired or wrong-audience answer is a token error (ErrToken),
	// never a seat, and a refused grant's session is released at once.
	PinnedKeys []any
	// InsecureSkipVerify: the loud opt-out of verification, for tests and a local stack
	// only: any server at the base URL (a hosts-file entry, a proxy) can then grant seats.
	// Without PinnedKeys nothing is verified (unless Verify, below); with PinnedKeys it
	// changes nothing (pinned keys are always checked).
	InsecureSkipVerify bool
	// Verify is deprecated: verification is on by default (PinnedKeys). It only matters
	// with InsecureSkipVerify and no PinnedKeys: then the tokens are checked against the
	// keys the server itself serves (JWKSURL), which proves nothing about who the server
	// is. (Its zero value, false, is no opt-out: that is InsecureSkipVerify.)
	Verify bool
	// TenantID: the tenant expected in the tokens' aud.
	TenantID string
	// TokenLeeway: clock difference allowed on the tokens' times (default a minute;
	// negative: none, as VerifierOptions.Leeway).
	TokenLeeway time.Duration
	// JWKSURL: the deployment's keys (default <baseURL>/keys).
	JWKSURL string
	// JWKSMinRefetch: least time between two JWKS fetches prompted by a token under a kid
	// the cached JWKS does not list (a rotation) (default 10 s; negative: none).
	JWKSMinRefetch time.Duration
	// MachineID: this machine's id for binding borrowed seats (default: the system's,
	// MachineID()).
	MachineID string
	// HTTPClient to send with (default: a client of its own, proxies from the
	// environment). Redirects are never followed, with this one too (a copy of it is used
	// whose CheckRedirect stops at the first answer): a 3xx is an ErrHTTP naming its
	// Location, and the API key never reaches another host.
	HTTPClient *http.Client
	// Logger for retries and lost or regained seats (default: none). Never the API key.
	Logger *log.Logger
}

// Client is a seatlease client for one API key; safe for concurrent use, share one.
type Client struct {
	baseURL  string
	apiKey   string
	http     *http.Client
	opts     Options
	verifier *TokenVerifier
	logger   *log.Logger
}

// Answer is a decoded 2xx answer: the fields of acquire, heartbeat and release, and Raw,
// the whole JSON object.
type Answer struct {
	SessionID                string
	LicenseID                string
	ClientID                 string
	LeaseExpiresAt           time.Time
	LeaseSeconds             int
	HeartbeatIntervalSeconds int
	SeatsUsed                int
	SeatsTotal               int
	Overage                  bool
	Borrowed                 bool
	Released                 bool
	// Seats: the lease's (or a place in line's) weight, how many of the license's seats
	// it counts as; 1 from a server that does not say.
	Seats int
	// Token: the lease_token (acquire, heartbeat) or release_token (release).
	Token string
	// Queued: a place in the license's wait queue (202, with Queue): no seat yet; call
	// Acquire again with Ticket after RetryAfterSeconds to keep it. Position 1 is the head.
	Queued            bool
	Position          int
	Ticket            string
	RetryAfterSeconds int
	// The license's term and entitlements, when it has some: what it entitles to, when
	// it expires (zero: no end; its grace may run after it), whether it is in its grace,
	// the highest version entitled ("": any).
	Entitlements     []string
	LicenseExpiresAt time.Time
	InGrace          bool
	MaxVersion       string
	// IdleReclaimAt: a heartbeat's warning that the license's idle rule will reclaim the
	// seat then unless the product reports activity or busy work first (zero: no warning).
	IdleReclaimAt time.Time
	// SharedSessions: on a license that shares seats, the sessions sharing this lease's
	// seat, itself included (0: not shared).
	SharedSessions int
	Raw            map[string]any
}

func answerOf(raw map[string]any) *Answer {
	text := func(name string) string { value, _ := raw[name].(string); return value }
	whole := func(name string) int {
		if value, ok := raw[name].(float64); ok && value == math.Trunc(value) {
			return int(value)
		}
		return 0
	}
	flag := func(name string) bool { value, _ := raw[name].(bool); return value }
	answer := &Answer{
		SessionID: text("session_id"), LicenseID: text("license_id"), ClientID: text("client_id"),
		LeaseSeconds: whole("lease_seconds"), HeartbeatIntervalSeconds: whole("heartbeat_interval_seconds"),
		SeatsUsed: whole("seats_used"), SeatsTotal: whole("seats_total"),
		Overage: flag("overage"), Borrowed: flag("borrowed"), Released: flag("released"),
		Token: text("lease_token"), Raw: raw,
		Queued: flag("queued"), Position: whole("position"), Ticket: text("ticket"),
		RetryAfterSeconds: whole("retry_after_seconds"),
	}
	if answer.Token == "" {
		answer.Token = text("release_token")
	}
	if answer.Seats = whole("seats"); answer.Seats < 1 {
		answer.Seats = 1 // absent (an older server) or nonsense: a plain lease
	}
	answer.LeaseExpiresAt, _ = parseTime(text("lease_expires_at"))
	answer.LicenseExpiresAt, _ = parseTime(text("license_expires_at"))
	answer.InGrace, answer.MaxVersion = flag("in_grace"), text("max_version")
	answer.IdleReclaimAt, _ = parseTime(text("idle_reclaim_at"))
	answer.SharedSessions = whole("shared_sessions")
	if names, ok := raw["entitlements"].([]any); ok {
		answer.Entitlements = make([]string, 0, len(names))
		for _, name := range names {
			if s, ok := name.(string); ok {
				answer.Entitlements = append(answer.Entitlements, s)
			}
		}
	}
	return answer
}

// ErrNoPinnedKeys is New's error for a client with neither Options.PinnedKeys nor
// Options.InsecureSkipVerify.
var ErrNoPinnedKeys = errors.New("seatlease: no pinned key: set Options.PinnedKeys to the " +
	"vendor's public key (the \"x\" of its JWKS at <baseURL>/keys) so that only its signed " +
	"answers grant seats, or opt out with Options.InsecureSkipVerify: true (tests only: any " +
	"server at the base URL could then grant seats)")

// New makes a client for baseURL (the functions' base URL, http or https). Verified by
// default: Options.PinnedKeys is required, unless Options.InsecureSkipVerify.
func New(baseURL, apiKey string, options Options) (*Client, error) {
	parsed, err := url.Parse(baseURL)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return nil, errors.New("seatlease: baseURL must be an http:// or https:// URL")
	}
	defaults := []struct {
		value    *time.Duration
		fallback time.Duration
	}{
		{&options.Timeout, 10 * time.Second}, {&options.Backoff, 500 * time.Millisecond},
		{&options.MaxBackoff, 30 * time.Second}, {&options.MaxWaitPoll, 30 * time.Second},
		{&options.ReleaseTimeout, 5 * time.Second},
	}
	for _, d := range defaults {
		if *d.value <= 0 {
			*d.value = d.fallback
		}
	}
	if options.Retries == 0 {
		options.Retries = 5
	} else if options.Retries < 0 {
		options.Retries = 0
	}
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), apiKey: apiKey, opts: options, logger: options.Logger}
	if options.JWKSURL == "" {
		c.opts.JWKSURL = c.baseURL + "/keys"
	}
	if len(options.PinnedKeys) == 0 && !options.InsecureSkipVerify {
		return nil, ErrNoPinnedKeys
	}
	if options.HTTPClient != nil {
		own := *options.HTTPClient // the caller's transport, jar and timeout; never its redirects
		c.http = &own
	} else {
		// http.ProxyFromEnvironment (in the default transport) never proxies loopback.
		c.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	c.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if options.Verify || len(options.PinnedKeys) > 0 {
		c.verifier, err = NewTokenVerifier(c.fetchJWKS, VerifierOptions{
			PinnedKeys: options.PinnedKeys, TenantID: options.TenantID, Leeway: options.TokenLeeway,
			MinRefetch: options.JWKSMinRefetch,
		})
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// String never shows the API key.
func (c *Client) String() string {
	return fmt.Sprintf("seatlease.Client(%s, apiKey=<hidden>)", c.baseURL)
}

// BaseURL the client was made for (no trailing slash).
func (c *Client) BaseURL() string { return c.baseURL }

// CloseIdleConnections closes the client's idle keep-alive connections.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

func (c *Client) logf(format string, args ...any) {
	if c.logger != nil {
		c.logger.Printf(format, args...)
	}
}

// -- HTTP --------------------------------------------------------------------------------

// do sends one request and reads its whole answer within timeout: the status, the
// Retry-After header and the body; a BackendUnavailable (status 0) when none came.
func (c *Client) do(ctx context.Context, request *http.Request, timeout time.Duration) (*http.Response, []byte, error) {
	inner, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	response, err := c.http.Do(request.WithContext(inner))
	if err != nil {
		return nil, nil, c.noAnswer(ctx, request.URL.String(), err)
	}
	defer response.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(response.Body, 1<<20))
	if err != nil {
		return nil, nil, c.noAnswer(ctx, request.URL.String(), err)
	}
	return response, raw, nil
}

func (c *Client) noAnswer(ctx context.Context, where string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err() // the caller's context ended: not a network error
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return unavailable("network_error", fmt.Sprintf("%s: %v", where, err))
}

func decodeAnswer(where string, response *http.Response, raw []byte) (map[string]any, error) {
	payload, isObject := decodeObject(raw)
	if response.StatusCode >= 300 {
		if response.StatusCode < 400 {
			location := response.Header.Get("Location")
			if location == "" {
				location = "(no Location)"
			}
			return nil, newError(response.StatusCode, "redirected", fmt.Sprintf(
				"%s answered %d redirecting to %s: not followed (is the base URL the service's own?)",
				where, response.StatusCode, location), map[string]any{"location": location}, -1, ErrHTTP)
		}
		return nil, errorFromAnswer(where, response.StatusCode, payload, response.Header.Get("Retry-After"), response.Status)
	}
	if !isObject {
		return nil, invalidResponse(response.StatusCode, where+" answered no JSON object")
	}
	return payload, nil
}

func invalidResponse(status int, message string) *SeatError {
	return newError(status, "invalid_response", message, nil, -1, ErrInvalidResponse)
}

// checkShape: a 2xx answer of fn must have its required fields, each of its type, before
// anything of it is taken (or its token checked): a grant without a session id string
// (null, a number) is no seat.
func checkShape(where, fn string, status int, reply map[string]any) error {
	var problems []string
	need := func(name string, ok func(any) bool, required bool) {
		value, present := reply[name]
		if present && value == nil && !required {
			present = false // an optional null is absent (a count keeps its last value)
		}
		if (present || required) && !ok(value) {
			problems = append(problems, name)
		}
	}
	isText := func(v any) bool { s, ok := v.(string); return ok && s != "" }
	isTime := func(v any) bool { s, ok := v.(string); _, parsed := parseTime(s); return ok && parsed }
	isCount := func(v any) bool { n, ok := v.(float64); return ok && n >= 0 && n == math.Trunc(n) && n < 1e15 }
	isPositive := func(v any) bool { return isCount(v) && v.(float64) >= 1 }
	isBool := func(v any) bool { _, ok := v.(bool); return ok }
	switch {
	case fn == "release":
		need("released", isBool, true)
		need("seats_used", isCount, false)
		need("release_token", isText, false)
	case fn == "acquire" && status == http.StatusAccepted:
		need("queued", isBool, true)
		need("ticket", isText, true)
		need("position", isCount, false)
		need("retry_after_seconds", isCount, false)
	default: // a grant or a renewal
		if fn == "acquire" {
			need("session_id", isText, true)
		} else { // a renewal may name no session (null, absent); "" names none either
			need("session_id", func(v any) bool { _, ok := v.(string); return ok }, false)
		}
		need("lease_expires_at", isTime, true)
		need("lease_seconds", isPositive, true)
		need("heartbeat_interval_seconds", isPositive, false)
		need("seats_used", isCount, false)
		need("seats_total", isCount, false)
		need("seats", isPositive, false)
		need("overage", isBool, false)
		need("borrowed", isBool, false)
		need("lease_token", isText, false)
		need("idle_reclaim_at", isTime, false)
		need("shared_sessions", isCount, false)
	}
	if len(problems) > 0 {
		return invalidResponse(status, fmt.Sprintf("%s answered %d without a valid %s", where, status, strings.Join(problems, ", ")))
	}
	return nil
}

// send is one POST: the decoded JSON of a 2xx (its token verified with Verify), else a
// *SeatError.
func (c *Client) send(ctx context.Context, fn string, body map[string]any, timeout time.Duration) (map[string]any, error) {
	where := c.baseURL + "/" + fn
	encoded, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	request, err := http.NewRequest(http.MethodPost, where, bytes.NewReader(encoded))
	if err != nil {
		return nil, err
	}
	request.Header.Set("Content-Type", "application/json")
	request.Header.Set("Accept", "application/json")
	request.Header.Set("Authorization", "Bearer "+c.apiKey)
	request.Header.Set("User-Agent", "seatlease-go/"+Version)
	response, raw, err := c.do(ctx, request, timeout)
	if err != nil {
		return nil, err
	}
	reply, err := decodeAnswer(where, response, raw)
	if err != nil {
		return nil, err
	}
	if err := checkShape(where, fn, response.StatusCode, reply); err != nil {
		c.releaseRefused(fn, body, reply)
		return nil, err
	}
	if named, _ := reply["session_id"].(string); fn == "heartbeat" && named != "" && named != body["session_id"] {
		return nil, invalidResponse(response.StatusCode, fmt.Sprintf("%s answered %d for another session_id", where, response.StatusCode))
	}
	// A place in the wait queue (202) grants nothing: it carries no token to check.
	if c.verifier != nil && response.StatusCode != http.StatusAccepted {
		if _, err := c.verifier.Check(ctx, fn, body, reply, response.StatusCode); err != nil {
			if errors.Is(err, ErrToken) { // refused; not a JWKS out of reach (retried)
				c.releaseRefused(fn, body, reply)
			}
			return nil, err
		}
	}
	return reply, nil
}

// releaseRefused: a grant (acquire, borrow) this client refused for its token or its
// shape (a token that does not verify, a malformed answer) is never a seat, but the
// server may hold one for it: its session, when the answer named one, is released at
// once (within ReleaseTimeout, best effort), so that it does not stay taken for the whole
// lease. Never a renewal's (the lease it renews is the caller's, lost or not by its own
// rules), and never for a failed JWKS fetch (transient: retried).
func (c *Client) releaseRefused(fn string, request, reply map[string]any) {
	if fn != "acquire" { // a borrow is an acquire too
		return
	}
	session, ok := reply["session_id"].(string)
	licenseID, _ := request["license_id"].(string)
	if !ok || session == "" || licenseID == "" || reply["queued"] == true {
		return
	}
	c.logf("seatlease: %s answer for %s refused: releasing its session", fn, licenseID)
	c.releaseQuietly(licenseID, session)
}

// fetchJWKS GETs the deployment's JWKS (no API key: it is public).
func (c *Client) fetchJWKS(ctx context.Context) ([]byte, error) {
	request, err := http.NewRequest(http.MethodGet, c.opts.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	request.Header.Set("Accept", "application/json")
	request.Header.Set("User-Agent", "seatlease-go/"+Version)
	response, raw, err := c.do(ctx, request, c.opts.Timeout)
	if err != nil {
		return nil, err
	}
	if _, err := decodeAnswer(c.opts.JWKSURL, response, raw); err != nil {
		return nil, err
	}
	return raw, nil
}

func uniform(low, high time.Duration) time.Duration {
	if high <= low {
		return low
	}
	return low + time.Duration(mathrand.Int63n(int64(high-low)))
}

// backoffDelay is the pause before attempt attempt+1: the backoff (doubled per attempt, at
// most ceiling, with jitter), never shorter than the server's Retry-After, and never
// longer than MaxBackoff whatever the server asks (a Retry-After: 3600 from a proxy must
// not leave the product asleep for an hour).
func (c *Client) backoffDelay(attempt int, retryAfterSeconds float64, ceiling time.Duration) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	delay := time.Duration(math.Min(float64(ceiling), float64(c.opts.Backoff)*math.Pow(2, float64(attempt))))
	delay = uniform(delay/2, delay)
	// In float seconds first: an absurd hint (1e300) must not overflow a Duration.
	if hint := math.Min(retryAfterSeconds, c.opts.MaxBackoff.Seconds()); hint > delay.Seconds() {
		delay = time.Duration(hint * float64(time.Second))
	}
	if delay > c.opts.MaxBackoff {
		delay = c.opts.MaxBackoff
	}
	return delay
}

// waitPause before asking again for a seat: Retry-After plus up to 20 % jitter, at most MaxWaitPoll.
func (c *Client) waitPause(denied *SeatError) time.Duration {
	pause := time.Duration(denied.RetryAfterSeconds()) * time.Second
	if pause > c.opts.MaxWaitPoll {
		pause = c.opts.MaxWaitPoll
	}
	return uniform(pause, pause*6/5)
}

func sleepCtx(ctx context.Context, pause time.Duration) error {
	timer := time.NewTimer(pause)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

func newRequestID() string {
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		panic(err)
	}
	return hex.EncodeToString(raw)
}

type callPlan struct {
	retries int           // -1: the client's
	budget  time.Duration // 0: none
}

// call is send retried on network errors and 503 with backoff and Retry-After. Every
// attempt carries the same request_id (and nonce): should a reply be lost, the server
// answers the retry with what the first attempt did, so a retried acquire is still told
// 201 and a retried release "released".
func (c *Client) call(ctx context.Context, fn string, body map[string]any, plan callPlan) (map[string]any, error) {
	sent := make(map[string]any, len(body)+2)
	for name, value := range body {
		sent[name] = value
	}
	if _, given := sent["request_id"]; !given {
		sent["request_id"] = newRequestID()
	}
	if _, given := sent["nonce"]; c.verifier != nil && !given {
		sent["nonce"] = NewNonce()
	}
	retries := c.opts.Retries
	if plan.retries >= 0 {
		retries = plan.retries
	}
	var giveUp time.Time
	if plan.budget > 0 {
		giveUp = time.Now().Add(plan.budget)
	}
	for attempt := 0; ; attempt++ {
		timeout := c.opts.Timeout
		if !giveUp.IsZero() {
			if left := time.Until(giveUp); left < timeout {
				timeout = left
			}
			if timeout < 50*time.Millisecond {
				timeout = 50 * time.Millisecond
			}
		}
		reply, err := c.send(ctx, fn, sent, timeout)
		var failed *SeatError
		if err == nil || !errors.Is(err, ErrBackendUnavailable) || !errors.As(err, &failed) || attempt >= retries {
			return reply, err
		}
		delay := c.backoffDelay(attempt, failed.backendRetryAfter(), c.opts.MaxBackoff)
		if !giveUp.IsZero() && time.Now().Add(delay).After(giveUp) {
			return nil, err
		}
		c.logf("seatlease: %s failed (%v); retry in %v", fn, err, delay)
		if err := sleepCtx(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// -- plain calls -------------------------------------------------------------------------

// AcquireOptions: the optional fields of an acquire.
type AcquireOptions struct {
	LeaseSeconds int            // 0: the license's default
	Metadata     map[string]any // shown to the vendor's admins
	// User and Host: who asks (FlexNet's user and host names); a license whose policy has
	// a per-user limit, reserved seats or a deny list requires User. "": not sent.
	User, Host string
	// Queue: on a full license with a wait queue, answer a place in line (Answer.Queued,
	// a 202) instead of ErrNoSeatsAvailable. Ticket: a previous place's, to keep it.
	Queue  bool
	Ticket string
	// Entitlements and Version: what the product needs; every entitlement named must be
	// the license's (else ErrNotEntitled), Version at most its max_version (else
	// ErrVersionNotEntitled). Empty: not sent.
	Entitlements []string
	Version      string
	// Seats: the lease's weight (it counts as that many of the license's seats, at most
	// its seats). 0: not sent (1 for a new lease; a renewal keeps the held lease's weight).
	// Another weight than a held lease's is ErrSeatsMismatch.
	Seats int
	// RequestID: this call's idempotency key (request_id), for a retry of your own: the
	// server answers the same RequestID with the first run's answer (kept at least 90 s).
	// "": a fresh one (the client's own retries of this call share it either way).
	RequestID string
	// Fingerprint binds the seat to a machine: its token carries it as cnf.machine (a
	// verified answer must). seatlease.Fingerprint(machineID) computes it; "": not sent.
	Fingerprint string
}

func acquireBody(licenseID, clientID string, options AcquireOptions) map[string]any {
	body := map[string]any{"license_id": licenseID, "client_id": clientID}
	if options.RequestID != "" {
		body["request_id"] = options.RequestID
	}
	if options.Fingerprint != "" {
		body["fingerprint"] = options.Fingerprint
	}
	if options.LeaseSeconds > 0 {
		body["lease_seconds"] = options.LeaseSeconds
	}
	if options.Metadata != nil {
		body["metadata"] = options.Metadata
	}
	if len(options.Entitlements) > 0 {
		body["entitlements"] = options.Entitlements
	}
	for name, value := range map[string]string{"user": options.User, "host": options.Host, "ticket": options.Ticket, "version": options.Version} {
		if value != "" {
			body[name] = value
		}
	}
	if options.Queue {
		body["queue"] = true
	}
	if options.Seats > 0 {
		body["seats"] = options.Seats
	}
	return body
}

func (c *Client) answer(ctx context.Context, fn string, body map[string]any) (*Answer, error) {
	raw, err := c.call(ctx, fn, body, callPlan{retries: -1})
	if err != nil {
		return nil, err
	}
	return answerOf(raw), nil
}

// Acquire is POST /acquire (retried). No heartbeats: see Lease. With Queue, a full
// license with a wait queue answers a place in line (Answer.Queued), not a seat.
func (c *Client) Acquire(ctx context.Context, licenseID, clientID string, options AcquireOptions) (*Answer, error) {
	return c.answer(ctx, "acquire", acquireBody(licenseID, clientID, options))
}

// Heartbeat is POST /heartbeat (retried); ErrSessionExpired when the seat is gone.
func (c *Client) Heartbeat(ctx context.Context, licenseID, sessionID string) (*Answer, error) {
	return c.answer(ctx, "heartbeat", map[string]any{"license_id": licenseID, "session_id": sessionID})
}

// Release is POST /release (retried, idempotent): Released, SeatsUsed.
func (c *Client) Release(ctx context.Context, licenseID, sessionID string) (*Answer, error) {
	return c.answer(ctx, "release", map[string]any{"license_id": licenseID, "session_id": sessionID})
}

// releaseQuietly releases within ReleaseTimeout, logging a failure (the lease then
// expires by itself).
func (c *Client) releaseQuietly(licenseID, sessionID string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.ReleaseTimeout) // the JWKS refetch too
	defer cancel()
	body := map[string]any{"license_id": licenseID, "session_id": sessionID}
	if _, err := c.call(ctx, "release", body, callPlan{retries: -1, budget: c.opts.ReleaseTimeout}); err != nil {
		c.logf("seatlease: release of %s failed: %v", licenseID, err)
	}
}
