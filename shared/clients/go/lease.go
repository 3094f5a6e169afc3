package seatlease

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// FinalRefusalPause: a re-acquire refused with a 403 (the license's term ended or has not
// begun, it is suspended, it does not entitle this product, version or user) stays refused
// until an operator acts, so it is asked again only this rarely (plus up to 20 % jitter):
// a renewal is noticed by itself without a stream of refused requests and log lines.
const FinalRefusalPause = 5 * time.Minute

// LeaseOptions for Client.Lease.
type LeaseOptions struct {
	// ClientID identifies this running copy (acquiring again with it returns the same seat).
	ClientID     string
	Metadata     map[string]any
	LeaseSeconds int // 0: the license's default
	// User and Host: who asks (sent with every acquire); a license whose policy has a
	// per-user limit, reserved seats or a deny list requires User.
	User, Host string
	// Entitlements and Version: what the product needs (sent with every acquire; see
	// AcquireOptions).
	Entitlements []string
	Version      string
	// Seats: the lease's weight (see AcquireOptions), sent with the first acquire and with
	// every re-acquire after a loss, so a regained seat has it too. 0: not sent.
	Seats int
	// RequestID: the idempotency key of the first acquire (see AcquireOptions); "": a
	// fresh one. Later acquires (waiting, a seat regained) have their own.
	RequestID string
	// Fingerprint binds every seat of the lease to a machine (see AcquireOptions); "":
	// not sent.
	Fingerprint string
	// Wait for a seat (paced by Retry-After) instead of returning ErrNoSeatsAvailable, for
	// at most Timeout (0: until ctx ends); then ErrSeatWaitTimeout. On a license with a
	// wait queue it waits in line (queue: true, keeping its place with the ticket).
	Wait    bool
	Timeout time.Duration
	// OnLost is called once (from the heartbeat goroutine) when the seat is known to be
	// gone: reason "expired", "unknown", "revoked" (an operator freed the seat), "idle"
	// (the license's idle rule reclaimed it: no seat is asked for again until Touch or
	// BeginBusy says the product is in use), "unreachable", or the refusal's code
	// ("license_expired" when the license's term ended).
	OnLost func(lease *Lease, reason string)
	// OnIdleWarning is called (from the heartbeat goroutine) when a heartbeat's answer
	// warns that the license's idle rule will reclaim the seat at reclaimAt: once per
	// warning, again only after a warning was cleared. Touch or BeginBusy before then
	// cancels it (the next heartbeat goes at once). See Touch.
	OnIdleWarning func(lease *Lease, reclaimAt time.Time)
	// OnRegained is called when a lost seat was acquired again (a new session).
	OnRegained func(lease *Lease)
}

// LeaseState is a copy of a lease's state at one moment.
type LeaseState struct {
	SessionID                string
	ExpiresAt                time.Time // the server's deadline
	LeaseSeconds             int
	HeartbeatIntervalSeconds int
	SeatsUsed, SeatsTotal    int
	// Seats: this lease's weight (how many of the license's seats it counts as; 1 when
	// the server does not say).
	Seats   int
	Overage bool
	// Lost is true from the moment the seat is known to be gone until it is regained;
	// LostReason is the reason OnLost got ("revoked" when an operator freed the seat), ""
	// while held.
	Lost       bool
	LostReason string
	Released   bool
	// Token: the last lease token of this session (verified with Verify). Kept whether or
	// not it is verified: it is the proof a heartbeat shows to keep the seat after the
	// server lost the session (a region's loss). "" from a server that sends none.
	Token string
	// The license's term and entitlements, when it has some (see Answer).
	Entitlements     []string
	LicenseExpiresAt time.Time
	InGrace          bool
	MaxVersion       string
	// IdleReclaimAt: while the seat is warned for idleness, when the license's idle rule
	// reclaims it (zero: no warning). SharedSessions: the sessions sharing this seat on a
	// license that shares, as its acquire said (0: not shared).
	IdleReclaimAt  time.Time
	SharedSessions int
}

// Lease is a seat held by this process: a goroutine heartbeats at the server's interval
// and asks for a new seat at once when the old one is lost (410). Close stops it and
// releases the seat. Safe for concurrent use.
type Lease struct {
	LicenseID string
	ClientID  string

	client  *Client
	options LeaseOptions

	mu         sync.Mutex
	state      LeaseState
	validUntil time.Time // the seat lapses then without a renewal
	failures   int
	announced  string // the refusal already logged (once), until the seat is back
	activity   activity

	wake chan struct{} // Touch after a warning: heartbeat now (never blocks the caller)

	run        context.Context // cancelled by Close: ends the goroutine and its call in flight
	inCallback atomic.Bool     // the goroutine is running OnLost or OnRegained
	cancel     context.CancelFunc
	done       chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

// Lease acquires a seat and keeps it until Close.
func (c *Client) Lease(ctx context.Context, licenseID string, options LeaseOptions) (*Lease, error) {
	l := &Lease{LicenseID: licenseID, ClientID: options.ClientID, client: c, options: options,
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
	if err := l.acquireFirst(ctx); err != nil {
		return nil, err
	}
	l.run, l.cancel = context.WithCancel(context.Background())
	go l.keep()
	return l, nil
}

// State returns a copy of the lease's state now.
func (l *Lease) State() LeaseState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// SessionID is the session holding the seat now (it changes when the seat is regained).
func (l *Lease) SessionID() string { return l.State().SessionID }

// body of an acquire; queue and ticket: the place in line while waiting for the first
// seat; requestID: the caller's for the first acquire, else "" (a fresh one).
func (l *Lease) body(queue bool, ticket, requestID string) map[string]any {
	return acquireBody(l.LicenseID, l.ClientID, AcquireOptions{
		LeaseSeconds: l.options.LeaseSeconds, Metadata: l.options.Metadata,
		User: l.options.User, Host: l.options.Host, Queue: queue, Ticket: ticket,
		Entitlements: l.options.Entitlements, Version: l.options.Version, Seats: l.options.Seats,
		RequestID: requestID, Fingerprint: l.options.Fingerprint,
	})
}

// took applies a grant or renewal; the seat is valid until at least the request's
// departure plus the lease length. warned: the answer began an idle warning (its time).
func (l *Lease) took(raw map[string]any, sentAt time.Time) (warned time.Time) {
	answer := answerOf(raw)
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &l.state
	if answer.SessionID != "" && answer.SessionID != s.SessionID {
		s.SessionID = answer.SessionID
		s.Token = "" // a token names one session: never show another's
		s.SharedSessions = 0
	}
	if !answer.LeaseExpiresAt.IsZero() {
		s.ExpiresAt = answer.LeaseExpiresAt
	}
	s.LeaseSeconds, s.HeartbeatIntervalSeconds = answer.LeaseSeconds, answer.HeartbeatIntervalSeconds
	// A renewal carries no counts: the last ones known stay (never 0 of 0).
	if _, ok := raw["seats_used"]; ok {
		s.SeatsUsed = answer.SeatsUsed
	}
	if _, ok := raw["seats_total"]; ok {
		s.SeatsTotal = answer.SeatsTotal
	}
	if _, ok := raw["overage"]; ok {
		s.Overage = answer.Overage
	}
	s.Seats = answer.Seats
	if token, ok := raw["lease_token"].(string); ok {
		s.Token = token
	}
	s.Entitlements, s.LicenseExpiresAt = answer.Entitlements, answer.LicenseExpiresAt
	s.InGrace, s.MaxVersion = answer.InGrace, answer.MaxVersion
	if _, ok := raw["shared_sessions"]; ok {
		s.SharedSessions = answer.SharedSessions
	}
	if s.IdleReclaimAt.IsZero() {
		warned = answer.IdleReclaimAt
	}
	s.IdleReclaimAt = answer.IdleReclaimAt // absent: the warning is over
	l.activity.woken = false               // a new answer: one wake may follow it
	l.validUntil = sentAt.Add(time.Duration(s.LeaseSeconds) * time.Second)
	return warned
}

func (l *Lease) acquireFirst(ctx context.Context) error {
	var giveUp time.Time
	if l.options.Timeout > 0 {
		giveUp = time.Now().Add(l.options.Timeout)
	}
	// Waiting asks for a place in line; a license without a queue ignores it.
	ticket, requestID := "", l.options.RequestID
	for {
		sentAt := time.Now()
		raw, err := l.client.call(ctx, "acquire", l.body(l.options.Wait, ticket, requestID), callPlan{retries: -1})
		requestID = "" // the caller's is the first acquire's: a later one is another request
		var denied *SeatError
		switch {
		case err == nil && raw["queued"] != true:
			l.took(raw, sentAt)
			return nil
		case err == nil: // a place in line (202): paced like a denial, by its retry_after_seconds
			place := answerOf(raw)
			ticket = place.Ticket
			denied = newError(http.StatusAccepted, "queued", "Waiting in line for a seat.", raw, -1, ErrNoSeatsAvailable)
			l.client.logf("seatlease: waiting in line for %s, position %d", l.LicenseID, place.Position)
			if !l.options.Wait {
				return denied
			}
		case !l.options.Wait || !errors.Is(err, ErrNoSeatsAvailable) || !errors.As(err, &denied):
			return err
		}
		pause := l.client.waitPause(denied)
		if !giveUp.IsZero() {
			left := time.Until(giveUp)
			if left <= 0 {
				return newError(http.StatusConflict, "seat_wait_timeout",
					fmt.Sprintf("No seat on %s came free within %v.", l.LicenseID, l.options.Timeout),
					denied.Body, denied.RetryAfterHeader, ErrNoSeatsAvailable, ErrSeatWaitTimeout)
			}
			if left < pause {
				pause = left
			}
		}
		l.client.logf("seatlease: no seat on %s (%d/%d in use); retrying in %v", l.LicenseID, denied.SeatsUsed(), denied.SeatsTotal(), pause)
		if err := sleepCtx(ctx, pause); err != nil {
			return err
		}
	}
}

// -- the heartbeat goroutine ----------------------------------------------------------------

func (l *Lease) keep() {
	defer close(l.done)
	timer := time.NewTimer(l.beatDelay())
	defer timer.Stop()
	for {
		select {
		case <-l.run.Done():
			return
		case <-timer.C:
			timer.Reset(l.step())
		case <-l.wake:
			if !timer.Stop() {
				<-timer.C
			}
			timer.Reset(l.step())
		}
	}
}

// beatDelay: the server's interval (at most a third of the lease) minus up to 25 % jitter,
// so that thousands of copies started together do not beat in step.
func (l *Lease) beatDelay() time.Duration {
	s := l.State()
	interval := time.Duration(s.HeartbeatIntervalSeconds) * time.Second
	if interval <= 0 {
		interval = time.Second
	}
	if third := time.Duration(s.LeaseSeconds) * time.Second / 3; s.LeaseSeconds > 0 && third < interval {
		interval = third
	}
	if interval < 200*time.Millisecond {
		interval = 200 * time.Millisecond
	}
	return uniform(interval*3/4, interval)
}

// step is one heartbeat, or one re-acquire while the seat is lost; it returns the delay
// to the next.
func (l *Lease) step() time.Duration {
	var delay time.Duration
	var err error
	if l.idleUntilActive() {
		return time.Hour // woken by Touch or BeginBusy
	}
	if l.State().Lost {
		delay, err = l.regain()
	} else {
		delay, err = l.beat()
	}
	if err == nil || l.run.Err() != nil {
		return delay
	}
	var failed *SeatError
	if errors.Is(err, ErrBackendUnavailable) && errors.As(err, &failed) {
		l.failed()
		if s := l.State(); !s.Lost && !time.Now().Before(l.deadline()) {
			l.lose("unreachable") // no renewal reached the server before the deadline
		}
		l.client.logf("seatlease: %s unreachable (%v); retrying", l.LicenseID, err)
		return l.backoff(failed.backendRetryAfter(), 0)
	}
	l.client.logf("seatlease: heartbeat step failed: %v", err)
	l.failed()
	return l.backoff(-1, 0)
}

func (l *Lease) deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validUntil
}

// failed counts one more failed step in a row (the backoff grows); succeeded resets it.
func (l *Lease) failed() {
	l.mu.Lock()
	l.failures++
	l.mu.Unlock()
}

func (l *Lease) succeeded() {
	l.mu.Lock()
	l.failures = 0
	l.mu.Unlock()
}

func (l *Lease) beat() (time.Duration, error) {
	body := map[string]any{"license_id": l.LicenseID, "session_id": l.State().SessionID}
	sentAt := time.Now()
	l.report(body, sentAt)
	// A renewal that has not come back by the lease's deadline is too late: the server has
	// reclaimed the seat by then. The call ends there (or at Timeout, if sooner), and the
	// seat is lost ("unreachable"), whatever the answer's pace (a dripped one included).
	plan := callPlan{retries: 0}
	if left := time.Until(l.deadline()); left > 0 {
		plan.budget = left
	}
	raw, err := l.client.call(l.run, "heartbeat", body, plan)
	var refused *SeatError
	switch {
	case err == nil:
		warned := l.took(raw, sentAt)
		l.succeeded()
		if !warned.IsZero() {
			l.warn(warned)
		}
		if l.urgent() {
			return 0, nil // activity since it left: cancel the warning now
		}
		return l.beatDelay(), nil
	case l.run.Err() != nil:
		return 0, err
	case errors.Is(err, ErrSessionExpired) && errors.As(err, &refused):
		if refused.Reason() == "unknown" {
			if renewed := l.recover(body); renewed != nil {
				l.took(renewed, sentAt)
				l.succeeded()
				return l.beatDelay(), nil
			}
		}
		l.lose(refused.Reason())
		return 0, nil // ask for the seat again at once
	case errors.Is(err, ErrBackendUnavailable) || !errors.As(err, &refused):
		return 0, err
	default:
		// 401 (key revoked), 403 (the license's term ended or has not begun), 404, a bad
		// token: it cannot be renewed. (A suspended license's held seats keep renewing.)
		l.loseTo(refused)
		l.failed()
		return l.backoff(-1, l.client.opts.MaxBackoff), nil
	}
}

// recover: after a 410 "unknown" (the server does not know the session: it may have lost
// its last writes with a region), the same heartbeat once more with the session's last
// lease token, which the server may take as proof of the seat. The renewal, or nil: then
// the seat is lost as before. Only then is the token sent (a normal heartbeat does not
// carry its 400 bytes; nor after "expired" or "revoked": an operator's revoke is final,
// its token refused); the call has a request_id of its own.
func (l *Lease) recover(body map[string]any) map[string]any {
	token := l.State().Token
	if token == "" || l.run.Err() != nil {
		return nil
	}
	retry := make(map[string]any, len(body)+1)
	for name, value := range body {
		retry[name] = value
	}
	retry["lease_token"] = token
	raw, err := l.client.call(l.run, "heartbeat", retry, callPlan{retries: 0})
	if err != nil {
		l.client.logf("seatlease: %s not re-admitted: %v", l.LicenseID, err)
		return nil
	}
	return raw
}

func (l *Lease) regain() (time.Duration, error) {
	sentAt := time.Now()
	raw, err := l.client.call(l.run, "acquire", l.body(false, "", ""), callPlan{retries: 0})
	var refused *SeatError
	switch {
	case err == nil:
	case l.run.Err() != nil:
		return 0, err
	case errors.Is(err, ErrNoSeatsAvailable) && errors.As(err, &refused):
		l.succeeded()
		return l.client.waitPause(refused), nil
	case errors.Is(err, ErrBackendUnavailable) || !errors.As(err, &refused):
		return 0, err
	case errors.Is(err, ErrLicenseSuspended):
		// 403: the term ended or has not begun, suspended, not entitled: final until an
		// operator acts. Said once, then asked again only every few minutes.
		l.sayRefused(refused)
		l.succeeded()
		return uniform(FinalRefusalPause, FinalRefusalPause*6/5), nil
	default: // deleted, key revoked, a bad answer: try now and then
		l.sayRefused(refused)
		l.failed()
		return l.backoff(-1, l.client.opts.MaxBackoff), nil
	}
	l.took(raw, sentAt)
	l.mu.Lock()
	l.state.Lost, l.state.LostReason = false, ""
	l.announced = ""
	session := l.state.SessionID
	l.mu.Unlock()
	l.succeeded()
	l.client.logf("seatlease: seat on %s regained (session %s)", l.LicenseID, session)
	if l.options.OnRegained != nil {
		l.callback(func() { l.options.OnRegained(l) })
	}
	return l.beatDelay(), nil
}

// backoff: while the lease runs, never wait longer than one heartbeat interval between
// attempts, and retry faster as the deadline nears (at most a third of the time left).
func (l *Lease) backoff(retryAfterSeconds float64, ceiling time.Duration) time.Duration {
	s := l.State()
	if ceiling == 0 {
		interval := time.Duration(s.HeartbeatIntervalSeconds) * time.Second
		if interval < 200*time.Millisecond {
			interval = 200 * time.Millisecond
		}
		ceiling = interval
		if ceiling > l.client.opts.MaxBackoff {
			ceiling = l.client.opts.MaxBackoff
		}
		if left := time.Until(l.deadline()); !s.Lost && left > 0 && left/3 < ceiling {
			ceiling = left / 3
			if ceiling < 50*time.Millisecond {
				ceiling = 50 * time.Millisecond
			}
		}
	}
	l.mu.Lock()
	failures := l.failures
	l.mu.Unlock()
	return l.client.backoffDelay(failures-1, retryAfterSeconds, ceiling)
}

// sayRefused logs a refused re-acquire the first time for its code only (a refusal that
// lasts, an ended term, must not fill the product's log).
func (l *Lease) sayRefused(refused *SeatError) {
	l.mu.Lock()
	said := l.announced == refused.Code
	l.announced = refused.Code
	l.mu.Unlock()
	if !said {
		l.client.logf("seatlease: re-acquire of %s refused: %v", l.LicenseID, refused)
	}
}

// lose marks the seat lost (once) and tells OnLost.
func (l *Lease) lose(reason string) {
	if l.markLost(reason, "") {
		l.client.logf("seatlease: seat on %s lost (%s); re-acquiring", l.LicenseID, reason)
		l.tellLost(reason)
	}
}

// loseTo: the seat lost by a refusal, said here, so the same refusal of the re-acquire
// that follows is not said again.
func (l *Lease) loseTo(refused *SeatError) {
	if l.markLost(refused.Code, refused.Code) {
		l.client.logf("seatlease: seat on %s lost: %v", l.LicenseID, refused)
		l.tellLost(refused.Code)
	}
}

func (l *Lease) markLost(reason, announced string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state.Lost || l.run.Err() != nil {
		return false
	}
	l.state.Lost, l.state.LostReason = true, reason
	l.state.IdleReclaimAt = time.Time{}
	if reason == "idle" {
		l.activity.lostIdleAt, l.activity.woken = time.Now(), false
	}
	if announced != "" {
		l.announced = announced
	}
	return true
}

func (l *Lease) tellLost(reason string) {
	if l.options.OnLost != nil {
		l.callback(func() { l.options.OnLost(l, reason) })
	}
}

// callback runs the product's callback; a panic in it must not end the heartbeats.
func (l *Lease) callback(run func()) {
	l.inCallback.Store(true)
	defer func() {
		l.inCallback.Store(false)
		if recovered := recover(); recovered != nil {
			l.client.logf("seatlease: lease callback failed: %v", recovered)
		}
	}()
	run()
}

// Close stops the heartbeats (waiting for the goroutine to end) and releases the seat,
// within the client's ReleaseTimeout. Once: later calls return the first one's result.
// A release that fails is returned, and the seat then expires by itself. OnLost and
// OnRegained may call it: it then does not wait for the goroutine it runs on, which
// ends as soon as the callback returns.
func (l *Lease) Close() error {
	l.closeOnce.Do(func() {
		l.cancel()
		if !l.inCallback.Load() {
			<-l.done
		}
		l.mu.Lock()
		l.state.Released = true
		session, lost := l.state.SessionID, l.state.Lost
		l.mu.Unlock()
		if session == "" || lost {
			return
		}
		// ReleaseTimeout bounds the whole release, a JWKS refetch for its token included.
		ctx, cancel := context.WithTimeout(context.Background(), l.client.opts.ReleaseTimeout)
		defer cancel()
		body := map[string]any{"license_id": l.LicenseID, "session_id": session}
		_, l.closeErr = l.client.call(ctx, "release", body, callPlan{retries: -1, budget: l.client.opts.ReleaseTimeout})
	})
	return l.closeErr
}
