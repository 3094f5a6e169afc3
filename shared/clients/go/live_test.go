package seatlease_test

// The Go client against the real served functions (acquire, heartbeat, release, keys on
// real Redis and PostgreSQL), started by tests/test_client_go.py, which passes
// SEATLEASE_TEST_URL and SEATLEASE_TEST_API_KEY; its /_test/ routes create licenses,
// flush Redis, revoke a lease, stall or fail the next request, and show the request log
// and live seats.
// Without them these tests skip (the pytest run fails on any skip).

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

var baseGoroutines int

// TestMain fails the run when goroutines outlive the tests (a keeper never stopped, a
// request never ended): every test closes its leases and its clients' idle connections.
func TestMain(m *testing.M) {
	baseGoroutines = runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > baseGoroutines && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > baseGoroutines {
			buf := make([]byte, 1<<20)
			fmt.Fprintf(os.Stderr, "goroutine leak: %d running, %d before the tests\n%s\n", n, baseGoroutines, buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}

type served struct {
	t    *testing.T
	url  string
	key  string
	http *http.Client
}

func stack(t *testing.T) *served {
	t.Helper()
	url, key := os.Getenv("SEATLEASE_TEST_URL"), os.Getenv("SEATLEASE_TEST_API_KEY")
	if url == "" || key == "" {
		t.Skip("SEATLEASE_TEST_URL not set: run through pytest tests/test_client_go.py")
	}
	s := &served{t: t, url: url, key: key, http: &http.Client{Transport: &http.Transport{}}}
	t.Cleanup(s.http.CloseIdleConnections)
	return s
}

func (s *served) control(action string, body any, into any) {
	s.t.Helper()
	method, payload := http.MethodGet, []byte(nil)
	if body != nil {
		method = http.MethodPost
		payload, _ = json.Marshal(body)
	}
	request, _ := http.NewRequest(method, s.url+"/_test/"+action, bytes.NewReader(payload))
	response, err := s.http.Do(request)
	if err != nil {
		s.t.Fatal(err)
	}
	defer response.Body.Close()
	if response.StatusCode != 200 {
		s.t.Fatalf("control %s: %d", action, response.StatusCode)
	}
	if into != nil {
		if err := json.NewDecoder(response.Body).Decode(into); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *served) license(id string, fields map[string]any) {
	body := map[string]any{"license_id": id}
	for name, value := range fields {
		body[name] = value
	}
	s.control("license", body, nil)
}

type liveSeat struct {
	SessionID string `json:"session_id"`
	ClientID  string `json:"client_id"`
}

func (s *served) live(licenseID string) []liveSeat {
	var seats []liveSeat
	s.control("live?license_id="+licenseID, nil, &seats)
	return seats
}

type logged struct {
	Path      string `json:"path"`
	RequestID string `json:"request_id"`
	Status    int    `json:"status"`
}

func (s *served) requests(path string) []logged {
	var all, matching []logged
	s.control("log", nil, &all)
	for _, entry := range all {
		if entry.Path == path {
			matching = append(matching, entry)
		}
	}
	return matching
}

// client: a client of the stack, verified by default against the stack's own signing
// keys (SEATLEASE_TEST_PINNED_KEYS), as a vendor pins its keys.
func (s *served) client(options seatlease.Options) *seatlease.Client {
	if len(options.PinnedKeys) == 0 && !options.InsecureSkipVerify {
		options.PinnedKeys = s.pinned()
	}
	return newClient(s.t, s.url, s.key, options)
}

// pinned: the stack's signing keys' "x" (SEATLEASE_TEST_PINNED_KEYS).
func (s *served) pinned() []any {
	s.t.Helper()
	var keys []any
	for _, x := range strings.Split(os.Getenv("SEATLEASE_TEST_PINNED_KEYS"), ",") {
		if x = strings.TrimSpace(x); x != "" {
			keys = append(keys, x)
		}
	}
	if len(keys) == 0 {
		s.t.Fatal("SEATLEASE_TEST_PINNED_KEYS not set: run through pytest tests/test_client_go.py")
	}
	return keys
}

func newClient(t *testing.T, url, key string, options seatlease.Options) *seatlease.Client {
	t.Helper()
	client, err := seatlease.New(url, key, options)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseIdleConnections)
	return client
}

func eventually(t *testing.T, within time.Duration, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestLeaseLifePastThreeLeasesAndARedisFlush(t *testing.T) {
	s := stack(t)
	s.license("go-life", map[string]any{"seats": 2, "lease_seconds": 2})
	client := s.client(seatlease.Options{Verify: true, TenantID: "acme", Backoff: 50 * time.Millisecond})
	var mu sync.Mutex
	var lost []string
	regained := 0
	lease, err := client.Lease(context.Background(), "go-life", seatlease.LeaseOptions{
		ClientID: "ws-1", Metadata: map[string]any{"user": "ann"},
		OnLost:     func(_ *seatlease.Lease, reason string) { mu.Lock(); lost = append(lost, reason); mu.Unlock() },
		OnRegained: func(*seatlease.Lease) { mu.Lock(); regained++; mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	first := lease.State()
	if first.SessionID == "" || first.Token == "" || first.LeaseSeconds != 2 || first.SeatsUsed != 1 || first.SeatsTotal != 2 {
		t.Fatalf("first state %+v", first)
	}
	beatsBefore := len(s.requests("/heartbeat")) // the log is the whole run's: other tests' too
	time.Sleep(6500 * time.Millisecond)          // three and a quarter leases of 2 s
	now := lease.State()
	if seats := s.live("go-life"); len(seats) != 1 || seats[0].SessionID != first.SessionID {
		t.Fatalf("live seats %+v", seats)
	}
	if now.SessionID != first.SessionID || now.Lost || now.ExpiresAt.Sub(first.ExpiresAt) < 4*time.Second {
		t.Fatalf("after 6.5 s: %+v (first %+v)", now, first)
	}
	if beats := len(s.requests("/heartbeat")) - beatsBefore; beats < 8 || beats > 14 {
		t.Fatalf("%d heartbeats in 6.5 s", beats)
	}

	// Redis forgets every seat (a region lost): the next heartbeat answers 410 unknown, its
	// one retry with the lease token re-admits the session, and later heartbeats renew it.
	before := len(s.requests("/heartbeat"))
	s.control("flush", map[string]any{}, nil)
	gone := -1
	eventually(t, 5*time.Second, "a heartbeat answered 410", func() bool {
		for i, r := range s.requests("/heartbeat")[before:] {
			if r.Status == 410 {
				gone = i
				return true
			}
		}
		return false
	})
	time.Sleep(1500 * time.Millisecond)
	since := s.requests("/heartbeat")[before+gone:]
	if len(since) < 3 || since[1].Status != 200 || since[1].RequestID == since[0].RequestID || since[2].Status != 200 {
		t.Fatalf("heartbeats after the flush %+v", since)
	}
	mu.Lock()
	if len(lost) != 0 || regained != 0 {
		t.Fatalf("lost %v, regained %d", lost, regained)
	}
	mu.Unlock()
	again := lease.State()
	if again.Lost || again.SessionID != first.SessionID {
		t.Fatalf("after the flush: %+v", again)
	}
	if seats := s.live("go-life"); len(seats) != 1 || seats[0] != (liveSeat{first.SessionID, "ws-1"}) {
		t.Fatalf("live seats %+v", seats)
	}
	if err := lease.Close(); err != nil {
		t.Fatal(err)
	}
	if err := lease.Close(); err != nil { // once
		t.Fatal(err)
	}
	if !lease.State().Released || len(s.live("go-life")) != 0 {
		t.Fatal("not released")
	}
}

// An operator revokes the seat (seatlease revoke): the next heartbeat answers 410
// "revoked", the lease is lost with that reason (never retried with its token: the server
// refuses a revoked session's token) and acquired again as a new session.
func TestARevokedSeatIsLostAsRevokedAndAcquiredAgain(t *testing.T) {
	s := stack(t)
	s.license("go-revoke", map[string]any{"seats": 1, "lease_seconds": 2})
	client := s.client(seatlease.Options{Verify: true, TenantID: "acme", Backoff: 50 * time.Millisecond})
	var mu sync.Mutex
	var lost []string
	regained := 0
	lease, err := client.Lease(context.Background(), "go-revoke", seatlease.LeaseOptions{
		ClientID: "ws-1",
		OnLost: func(l *seatlease.Lease, reason string) {
			mu.Lock()
			lost = append(lost, reason+"/"+l.State().LostReason)
			mu.Unlock()
		},
		OnRegained: func(*seatlease.Lease) { mu.Lock(); regained++; mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	first := lease.State().SessionID
	before := len(s.requests("/heartbeat"))
	s.control("revoke", map[string]any{"license_id": "go-revoke", "session_id": first}, nil)
	eventually(t, 6*time.Second, "the seat regained after the revoke", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return regained == 1
	})
	mu.Lock()
	if len(lost) != 1 || lost[0] != "revoked/revoked" {
		t.Fatalf("lost %v", lost)
	}
	mu.Unlock()
	now := lease.State()
	if now.Lost || now.SessionID == first {
		t.Fatalf("after the revoke: %+v", now)
	}
	if seats := s.live("go-revoke"); len(seats) != 1 || seats[0] != (liveSeat{now.SessionID, "ws-1"}) {
		t.Fatalf("live seats %+v", seats)
	}
	refused := 0
	for _, r := range s.requests("/heartbeat")[before:] {
		if r.Status == 410 {
			refused++
		}
	}
	if refused != 1 { // a retry with the token would be refused too
		t.Fatalf("%d heartbeats answered 410 after the revoke", refused)
	}
	if err := lease.Close(); err != nil {
		t.Fatal(err)
	}
	if len(s.live("go-revoke")) != 0 {
		t.Fatal("not released")
	}
}

func TestAStalledServerAnswersTheRetryFromTheFirstRun(t *testing.T) {
	s := stack(t)
	s.license("go-stall", map[string]any{"seats": 2, "lease_seconds": 60})
	client := s.client(seatlease.Options{Verify: true, Timeout: 500 * time.Millisecond, Backoff: 50 * time.Millisecond})
	s.control("stall", map[string]any{"path": "/acquire", "seconds": 1.5}, nil)
	answer, err := client.Acquire(context.Background(), "go-stall", "pc-1", seatlease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	acquires := s.requests("/acquire")
	acquires = acquires[len(acquires)-2:]
	if acquires[0].RequestID == "" || acquires[0].RequestID != acquires[1].RequestID {
		t.Fatalf("request ids %+v", acquires)
	}
	// both attempts were answered 201 (created): the retry was told what the first did
	if acquires[0].Status != 201 || acquires[1].Status != 201 {
		t.Fatalf("statuses %+v", acquires)
	}
	if seats := s.live("go-stall"); len(seats) != 1 || seats[0].SessionID != answer.SessionID || answer.SeatsUsed != 1 {
		t.Fatalf("live %+v, answer %+v", seats, answer)
	}
	s.control("stall", map[string]any{"path": "/release", "seconds": 1.5}, nil)
	released, err := client.Release(context.Background(), "go-stall", answer.SessionID)
	if err != nil || !released.Released || released.SeatsUsed != 0 {
		t.Fatalf("release %+v %v", released, err)
	}
	releases := s.requests("/release")
	if releases[len(releases)-1].RequestID != releases[len(releases)-2].RequestID {
		t.Fatalf("release request ids %+v", releases)
	}
}

func TestBorrowLoadRefuseAnEditedFileReturnEarly(t *testing.T) {
	s := stack(t)
	s.license("go-borrow", map[string]any{"seats": 1, "lease_seconds": 60, "max_borrow_seconds": 86400})
	var jwks struct {
		Keys []map[string]any `json:"keys"`
	}
	response, err := s.http.Get(s.url + "/keys")
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(response.Body).Decode(&jwks)
	response.Body.Close()
	var pinned []any
	for _, key := range jwks.Keys {
		pinned = append(pinned, key)
	}
	client := s.client(seatlease.Options{PinnedKeys: pinned, TenantID: "acme"})
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seat.json")
	seat, err := client.Borrow(ctx, "go-borrow", "laptop", 3600, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if seat.BorrowSeconds != 3600 || seat.SecondsLeft() < 3590 || seat.Expired() || seat.Claims["borrowed"] != true {
		t.Fatalf("seat %+v", seat)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("file %v %v", info, err)
	}
	if _, err := client.Acquire(ctx, "go-borrow", "desk", seatlease.AcquireOptions{}); !errors.Is(err, seatlease.ErrNoSeatsAvailable) {
		t.Fatal("the borrow should hold the only seat:", err)
	}
	loaded, err := client.LoadBorrowed(ctx, path)
	if err != nil || loaded.SessionID != seat.SessionID {
		t.Fatal(loaded, err)
	}
	raw, _ := os.ReadFile(path)
	edited := filepath.Join(filepath.Dir(path), "edited.json")
	_ = os.WriteFile(edited, bytes.Replace(raw, []byte(`"lease_expires_at": "`), []byte(`"lease_expires_at": "2099-01-01T00:00:00.000Z", "was": "`), 1), 0o600)
	if _, err := client.LoadBorrowed(ctx, edited); !errors.Is(err, seatlease.ErrTokenMismatch) {
		t.Fatal("an edited file loaded:", err)
	}
	answer, err := loaded.ReturnEarly(ctx)
	if err != nil || !answer.Released {
		t.Fatal(answer, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) || len(s.live("go-borrow")) != 0 {
		t.Fatal("the file or the seat is still there")
	}
}

func TestTypedErrors(t *testing.T) {
	s := stack(t)
	ctx := context.Background()
	s.license("go-full", map[string]any{"seats": 1, "lease_seconds": 60})
	wrong := newClient(t, s.url, "sl_wrong_key", seatlease.Options{PinnedKeys: s.pinned(), Backoff: 10 * time.Millisecond})
	var refused *seatlease.SeatError
	if _, err := wrong.Acquire(ctx, "go-full", "a", seatlease.AcquireOptions{}); !errors.Is(err, seatlease.ErrUnauthenticated) || !errors.As(err, &refused) || refused.Status != 401 || strings.Contains(err.Error(), s.key) {
		t.Fatal("wrong key:", err)
	}
	client := s.client(seatlease.Options{Backoff: 10 * time.Millisecond})
	if _, err := client.Acquire(ctx, "no-such-license", "a", seatlease.AcquireOptions{}); !errors.Is(err, seatlease.ErrLicenseNotFound) {
		t.Fatal("unknown license:", err)
	}
	held, err := client.Lease(ctx, "go-full", seatlease.LeaseOptions{ClientID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Acquire(ctx, "go-full", "b", seatlease.AcquireOptions{})
	if !errors.Is(err, seatlease.ErrNoSeatsAvailable) || !errors.As(err, &refused) || refused.SeatsUsed() != 1 || refused.RetryAfterSeconds() < 1 {
		t.Fatal("no seats:", err)
	}
	started := time.Now()
	_, err = client.Lease(ctx, "go-full", seatlease.LeaseOptions{ClientID: "b", Wait: true, Timeout: 300 * time.Millisecond})
	if !errors.Is(err, seatlease.ErrSeatWaitTimeout) || !errors.Is(err, seatlease.ErrNoSeatsAvailable) || time.Since(started) > 3*time.Second {
		t.Fatal("wait timeout:", err)
	}
	if err := held.Close(); err != nil || len(s.live("go-full")) != 0 {
		t.Fatal("close:", err)
	}
}

func TestA500IsASeatErrorNotRetried(t *testing.T) {
	s := stack(t)
	ctx := context.Background()
	s.license("go-500", map[string]any{"seats": 1})
	client := s.client(seatlease.Options{Backoff: 10 * time.Millisecond})
	before := len(s.requests("/acquire"))
	s.control("fail", map[string]any{"path": "/acquire", "status": 500}, nil)
	_, err := client.Acquire(ctx, "go-500", "a", seatlease.AcquireOptions{})
	var refused *seatlease.SeatError
	if !errors.As(err, &refused) || refused.Status != 500 || refused.Code != "internal" || errors.Is(err, seatlease.ErrBackendUnavailable) {
		t.Fatal("500:", err)
	}
	if after := len(s.requests("/acquire")); after != before+1 {
		t.Fatalf("%d attempts", after-before)
	}
}

func TestA503WithRetryAfterIsRetriedNoSoonerWithTheSameRequestID(t *testing.T) {
	s := stack(t)
	s.license("go-503", map[string]any{"seats": 1})
	client := s.client(seatlease.Options{Backoff: 10 * time.Millisecond})
	s.control("fail", map[string]any{"path": "/acquire", "status": 503, "retry_after": 1}, nil)
	started := time.Now()
	answer, err := client.Acquire(context.Background(), "go-503", "a", seatlease.AcquireOptions{})
	if err != nil || answer.SeatsUsed != 1 {
		t.Fatal(answer, err)
	}
	if waited := time.Since(started); waited < time.Second {
		t.Fatalf("retried after %v, before Retry-After", waited)
	}
	acquires := s.requests("/acquire")
	failed, served := acquires[len(acquires)-2], acquires[len(acquires)-1]
	if failed.Status != 503 || served.Status != 201 || failed.RequestID != served.RequestID {
		t.Fatalf("attempts %+v %+v", failed, served)
	}
}

func TestWaitingGetsTheSeatReleasedMeanwhile(t *testing.T) {
	s := stack(t)
	s.license("go-wait", map[string]any{"seats": 1, "lease_seconds": 60})
	client := s.client(seatlease.Options{MaxWaitPoll: 300 * time.Millisecond}) // Retry-After is ~60 s here
	ctx := context.Background()
	first, err := client.Lease(ctx, "go-wait", seatlease.LeaseOptions{ClientID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	time.AfterFunc(500*time.Millisecond, func() { released <- first.Close() })
	started := time.Now()
	second, err := client.Lease(ctx, "go-wait", seatlease.LeaseOptions{ClientID: "b", Wait: true, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if err := <-released; err != nil || time.Since(started) < 450*time.Millisecond {
		t.Fatal("first release:", err, time.Since(started))
	}
	if seats := s.live("go-wait"); len(seats) != 1 || seats[0] != (liveSeat{second.SessionID(), "b"}) {
		t.Fatalf("live %+v", seats)
	}
}

func TestUnreachableURLAndCancelledContext(t *testing.T) {
	s := stack(t)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + listener.Addr().String()
	listener.Close()
	client := newClient(t, url, s.key, seatlease.Options{PinnedKeys: s.pinned(), Retries: 2, Backoff: 10 * time.Millisecond})
	var refused *seatlease.SeatError
	_, err = client.Acquire(context.Background(), "lic", "a", seatlease.AcquireOptions{})
	if !errors.Is(err, seatlease.ErrBackendUnavailable) || !errors.As(err, &refused) || refused.Status != 0 || refused.Code != "network_error" || strings.Contains(err.Error(), s.key) {
		t.Fatal("unreachable:", err)
	}
	if _, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "a"}); !errors.Is(err, seatlease.ErrBackendUnavailable) {
		t.Fatal("lease on an unreachable URL:", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	slow := newClient(t, url, s.key, seatlease.Options{PinnedKeys: s.pinned(), Retries: 50, Backoff: time.Second})
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	if _, err := slow.Acquire(ctx, "lic", "a", seatlease.AcquireOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatal("cancelled:", err)
	}
}

func TestTheClientNeverShowsItsKey(t *testing.T) {
	client := newClient(t, "http://127.0.0.1:1/", "sl_secret", seatlease.Options{InsecureSkipVerify: true})
	if shown := fmt.Sprint(client); strings.Contains(shown, "sl_secret") || client.BaseURL() != "http://127.0.0.1:1" {
		t.Fatal(shown)
	}
	if _, err := seatlease.New("ftp://x", "k", seatlease.Options{InsecureSkipVerify: true}); err == nil {
		t.Fatal("an ftp URL was accepted")
	}
}

func TestCloseFromTheOnLostCallback(t *testing.T) {
	s := stack(t)
	s.license("go-callback", map[string]any{"seats": 1, "lease_seconds": 2})
	client := s.client(seatlease.Options{Backoff: 50 * time.Millisecond})
	closed := make(chan error, 1)
	lease, err := client.Lease(context.Background(), "go-callback", seatlease.LeaseOptions{
		ClientID: "ws-1",
		OnLost:   func(l *seatlease.Lease, _ string) { closed <- l.Close() },
	})
	if err != nil {
		t.Fatal(err)
	}
	s.control("outage", map[string]any{"seconds": 3}, nil) // longer than the lease: lost (unreachable)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("OnLost never ran, or Close blocked in it")
	}
	if state := lease.State(); !state.Released || !state.Lost {
		t.Fatalf("state %+v", state)
	}
	time.Sleep(1500 * time.Millisecond) // no re-acquire after the close
	if seats := s.live("go-callback"); len(seats) != 0 {
		t.Fatalf("live %+v", seats)
	}
}

func TestAnOutageLongerThanTheLeaseMarksItLostThenRegains(t *testing.T) {
	s := stack(t)
	s.license("go-outage", map[string]any{"seats": 1, "lease_seconds": 2})
	client := s.client(seatlease.Options{Backoff: 50 * time.Millisecond})
	var mu sync.Mutex
	var lost []string
	regained := 0
	lease, err := client.Lease(context.Background(), "go-outage", seatlease.LeaseOptions{
		ClientID:   "ws-1",
		OnLost:     func(_ *seatlease.Lease, reason string) { mu.Lock(); lost = append(lost, reason); mu.Unlock() },
		OnRegained: func(*seatlease.Lease) { mu.Lock(); regained++; mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	old := lease.SessionID()
	s.control("outage", map[string]any{"seconds": 3}, nil)
	eventually(t, 3*time.Second, "the lease marked lost", func() bool { return lease.State().Lost })
	if state := lease.State(); state.LostReason != "unreachable" {
		t.Fatalf("state %+v", state)
	}
	eventually(t, 5*time.Second, "the seat regained", func() bool { return !lease.State().Lost })
	mu.Lock()
	if len(lost) != 1 || lost[0] != "unreachable" || regained != 1 {
		t.Fatalf("lost %v, regained %d", lost, regained)
	}
	mu.Unlock()
	if seats := s.live("go-outage"); len(seats) != 1 || seats[0] != (liveSeat{lease.SessionID(), "ws-1"}) || lease.SessionID() == old {
		t.Fatalf("live %+v (old session %s)", seats, old)
	}
}

type queued struct {
	ClientID string `json:"client_id"`
	User     string `json:"user"`
	Host     string `json:"host"`
}

func (s *served) queue(licenseID string) []queued {
	var tickets []queued
	s.control("queue?license_id="+licenseID, nil, &tickets)
	return tickets
}

func (s *served) queuedIDs(licenseID string) []string {
	ids := []string{}
	for _, ticket := range s.queue(licenseID) {
		ids = append(ids, ticket.ClientID)
	}
	return ids
}

func TestQueuedWaitersGetTheSeatInTheOrderTheyJoined(t *testing.T) {
	s := stack(t)
	// a hold of 3 s: the queue's retry_after_seconds is at most a third of it
	s.license("go-queue", map[string]any{"seats": 1, "lease_seconds": 30, "policy": map[string]any{"queue": true, "queue_hold_seconds": 3}})
	client := s.client(seatlease.Options{Verify: true, TenantID: "acme"}) // a 202 carries no token
	ctx := context.Background()
	holder, err := client.Acquire(ctx, "go-queue", "holder", seatlease.AcquireOptions{User: "hal"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"w1", "w2", "w3"}
	var mu sync.Mutex
	var order []string
	leases := make([]chan *seatlease.Lease, len(names))
	for i, name := range names {
		leases[i] = make(chan *seatlease.Lease, 1)
		go func(name string, got chan<- *seatlease.Lease) {
			lease, err := client.Lease(ctx, "go-queue", seatlease.LeaseOptions{ClientID: name, User: "user-" + name, Host: "pc-" + name, Wait: true, Timeout: 30 * time.Second})
			if err != nil {
				t.Error(name, err)
				close(got)
				return
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			got <- lease
		}(name, leases[i])
		eventually(t, 5*time.Second, name+" in line", func() bool { return len(s.queue("go-queue")) == i+1 })
	}
	for i, ticket := range s.queue("go-queue") {
		if ticket != (queued{names[i], "user-" + names[i], "pc-" + names[i]}) {
			t.Fatalf("ticket %d: %+v", i, ticket)
		}
	}
	time.Sleep(2500 * time.Millisecond) // they keep their places: each comes back with its ticket
	if ids := s.queuedIDs("go-queue"); strings.Join(ids, ",") != "w1,w2,w3" {
		t.Fatalf("queue %v", ids)
	}
	polls := 0
	for _, entry := range s.requests("/acquire") {
		if entry.Status == http.StatusAccepted {
			polls++
		}
	}
	if polls < 6 {
		t.Fatalf("%d answers 202", polls)
	}
	if _, err := client.Release(ctx, "go-queue", holder.SessionID); err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		lease, ok := <-leases[i]
		if !ok {
			t.Fatal(name, "got no seat")
		}
		mu.Lock()
		got := strings.Join(order, ",")
		mu.Unlock()
		if got != strings.Join(names[:i+1], ",") || lease.State().Token == "" {
			t.Fatalf("order %s after %s (token %q)", got, name, lease.State().Token)
		}
		if seats := s.live("go-queue"); len(seats) != 1 || seats[0] != (liveSeat{lease.SessionID(), name}) {
			t.Fatalf("live %+v", seats)
		}
		if ids := s.queuedIDs("go-queue"); strings.Join(ids, ",") != strings.Join(names[i+1:], ",") {
			t.Fatalf("queue %v after %s", ids, name)
		}
		if err := lease.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if seats := s.live("go-queue"); len(seats) != 0 {
		t.Fatalf("live %+v", seats)
	}
}

func TestWaitingInLineGivesUpAtTheTimeout(t *testing.T) {
	s := stack(t)
	s.license("go-queue-timeout", map[string]any{"seats": 1, "lease_seconds": 30, "policy": map[string]any{"queue": true, "queue_hold_seconds": 3}})
	client := s.client(seatlease.Options{})
	ctx := context.Background()
	held, err := client.Lease(ctx, "go-queue-timeout", seatlease.LeaseOptions{ClientID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	started := time.Now()
	_, err = client.Lease(ctx, "go-queue-timeout", seatlease.LeaseOptions{ClientID: "b", Wait: true, Timeout: 1500 * time.Millisecond})
	var refused *seatlease.SeatError
	if !errors.Is(err, seatlease.ErrSeatWaitTimeout) || !errors.As(err, &refused) || refused.Code != "seat_wait_timeout" {
		t.Fatal("wait timeout:", err)
	}
	if took := time.Since(started); took < 1400*time.Millisecond || took > 5*time.Second {
		t.Fatal("gave up after", took)
	}
	if ids := s.queuedIDs("go-queue-timeout"); strings.Join(ids, ",") != "b" {
		t.Fatalf("queue %v", ids)
	}
	place, err := client.Acquire(ctx, "go-queue-timeout", "c", seatlease.AcquireOptions{Queue: true})
	if err != nil || !place.Queued || place.Position != 2 || place.Ticket == "" || place.RetryAfterSeconds < 1 || place.SessionID != "" {
		t.Fatalf("place %+v %v", place, err)
	}
}

func TestAFullQueueIsQueueFull(t *testing.T) {
	s := stack(t)
	s.license("go-queue-full", map[string]any{"seats": 1, "lease_seconds": 30, "policy": map[string]any{"queue": true, "queue_max": 1}})
	client := s.client(seatlease.Options{Backoff: 10 * time.Millisecond})
	ctx := context.Background()
	if _, err := client.Acquire(ctx, "go-queue-full", "a", seatlease.AcquireOptions{}); err != nil {
		t.Fatal(err)
	}
	if place, err := client.Acquire(ctx, "go-queue-full", "b", seatlease.AcquireOptions{Queue: true}); err != nil || !place.Queued {
		t.Fatalf("place %+v %v", place, err)
	}
	_, err := client.Acquire(ctx, "go-queue-full", "c", seatlease.AcquireOptions{Queue: true})
	var refused *seatlease.SeatError
	if !errors.Is(err, seatlease.ErrQueueFull) || !errors.Is(err, seatlease.ErrNoSeatsAvailable) || !errors.As(err, &refused) ||
		refused.Status != 409 || refused.Code != "queue_full" || refused.QueueMax() != 1 || refused.RetryAfterSeconds() < 1 {
		t.Fatal("queue full:", err)
	}
	_, err = client.Acquire(ctx, "go-queue-full", "d", seatlease.AcquireOptions{})
	if !errors.Is(err, seatlease.ErrNoSeatsAvailable) || errors.Is(err, seatlease.ErrQueueFull) || !errors.As(err, &refused) || refused.SeatsHeld() != 0 {
		t.Fatal("no seats:", err)
	}
}

func TestTypedErrorsOfALicensePolicy(t *testing.T) {
	s := stack(t)
	s.license("go-policy", map[string]any{"seats": 3, "lease_seconds": 60, "policy": map[string]any{"max_per_user": 1, "deny_users": []string{"mallory"}}})
	client := s.client(seatlease.Options{Backoff: 10 * time.Millisecond})
	ctx := context.Background()
	ann, err := client.Lease(ctx, "go-policy", seatlease.LeaseOptions{ClientID: "ann-1", User: "ann", Host: "pc-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer ann.Close()
	var refused *seatlease.SeatError
	_, err = client.Acquire(ctx, "go-policy", "ann-2", seatlease.AcquireOptions{User: "ann"})
	if !errors.Is(err, seatlease.ErrUserLimitReached) || !errors.Is(err, seatlease.ErrNoSeatsAvailable) || !errors.As(err, &refused) ||
		refused.Status != 409 || refused.Code != "user_limit_reached" || refused.MaxPerUser() != 1 || refused.Sessions() != 1 || refused.RetryAfterSeconds() < 50 {
		t.Fatal("user limit:", err)
	}
	_, err = client.Lease(ctx, "go-policy", seatlease.LeaseOptions{ClientID: "ann-2", User: "ann", Wait: true, Timeout: 300 * time.Millisecond})
	if !errors.Is(err, seatlease.ErrSeatWaitTimeout) {
		t.Fatal("user limit, waiting:", err)
	}
	_, err = client.Lease(ctx, "go-policy", seatlease.LeaseOptions{ClientID: "m-1", User: "mallory"})
	if !errors.Is(err, seatlease.ErrUserDenied) || !errors.Is(err, seatlease.ErrLicenseSuspended) || !errors.As(err, &refused) || refused.Status != 403 || refused.Code != "user_denied" {
		t.Fatal("user denied:", err)
	}
	_, err = client.Acquire(ctx, "go-policy", "x-1", seatlease.AcquireOptions{})
	if !errors.Is(err, seatlease.ErrInvalidRequest) || errors.Is(err, seatlease.ErrUserDenied) {
		t.Fatal("no user:", err)
	}
	_, err = client.Acquire(ctx, "no-such-license", "y-1", seatlease.AcquireOptions{User: "ann"})
	if !errors.Is(err, seatlease.ErrLicenseNotFound) || errors.Is(err, seatlease.ErrUserLimitReached) {
		t.Fatal("unknown license:", err)
	}
	if seats := s.live("go-policy"); len(seats) != 1 || seats[0].ClientID != "ann-1" {
		t.Fatalf("live %+v", seats)
	}
}

func TestALicensesTermAndEntitlements(t *testing.T) {
	s := stack(t)
	s.license("go-term", map[string]any{"seats": 2, "lease_seconds": 60, "expires_in_seconds": 1.5, "grace_seconds": 1,
		"entitlements": []string{"pro", "render"}, "max_version": "2026.4"})
	s.license("go-later", map[string]any{"seats": 1, "starts_in_seconds": 3600})
	client := s.client(seatlease.Options{Verify: true, TenantID: "acme", Backoff: 50 * time.Millisecond})
	ctx := context.Background()
	var mu sync.Mutex
	var lost []string
	lease, err := client.Lease(ctx, "go-term", seatlease.LeaseOptions{ClientID: "ws-1", Entitlements: []string{"pro"}, Version: "2026.4",
		OnLost: func(_ *seatlease.Lease, reason string) { mu.Lock(); lost = append(lost, reason); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	state := lease.State()
	if strings.Join(state.Entitlements, ",") != "pro,render" || state.MaxVersion != "2026.4" || state.LicenseExpiresAt.IsZero() || state.InGrace {
		t.Fatalf("state %+v", state)
	}
	var refused *seatlease.SeatError
	_, err = client.Acquire(ctx, "go-term", "ws-2", seatlease.AcquireOptions{Entitlements: []string{"pro", "cloud"}})
	if !errors.Is(err, seatlease.ErrNotEntitled) || !errors.Is(err, seatlease.ErrLicenseSuspended) || !errors.As(err, &refused) || fmt.Sprint(refused.Body["missing_entitlements"]) != "[cloud]" {
		t.Fatal("not entitled:", err)
	}
	_, err = client.Acquire(ctx, "go-term", "ws-2", seatlease.AcquireOptions{Version: "2026.10"})
	if !errors.Is(err, seatlease.ErrVersionNotEntitled) || !errors.As(err, &refused) || refused.Body["max_version"] != "2026.4" {
		t.Fatal("version:", err)
	}
	_, err = client.Acquire(ctx, "go-later", "ws-2", seatlease.AcquireOptions{})
	if !errors.Is(err, seatlease.ErrLicenseNotStarted) || !errors.As(err, &refused) || refused.Body["starts_at"] == nil {
		t.Fatal("not started:", err)
	}
	time.Sleep(time.Until(state.LicenseExpiresAt) + 200*time.Millisecond)
	grace, err := client.Acquire(ctx, "go-term", "ws-3", seatlease.AcquireOptions{})
	if err != nil || !grace.InGrace {
		t.Fatalf("in grace %+v %v", grace, err)
	}
	time.Sleep(1200 * time.Millisecond)
	_, err = client.Acquire(ctx, "go-term", "ws-4", seatlease.AcquireOptions{})
	if !errors.Is(err, seatlease.ErrLicenseExpired) || !errors.As(err, &refused) || refused.Body["expired_at"] == nil {
		t.Fatal("expired:", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !lease.State().Lost && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if !lease.State().Lost || len(lost) == 0 || lost[0] != "license_expired" {
		t.Fatalf("lost %v %+v", lost, lease.State())
	}
}

func TestAWeightedLease(t *testing.T) {
	s := stack(t)
	s.license("go-weights", map[string]any{"seats": 4, "lease_seconds": 3}) // heartbeats every second
	client := s.client(seatlease.Options{Verify: true, TenantID: "acme", Backoff: 50 * time.Millisecond})
	ctx := context.Background()
	regained := make(chan struct{}, 1)
	lease, err := client.Lease(ctx, "go-weights", seatlease.LeaseOptions{ClientID: "render-1", Seats: 3,
		OnRegained: func(*seatlease.Lease) {
			select {
			case regained <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	state := lease.State()
	if state.Seats != 3 || state.SeatsUsed != 3 || state.SeatsTotal != 4 {
		t.Fatalf("state %+v", state)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(state.Token, ".")[1])
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil || seatlease.ClaimedSeats(claims) != 3 {
		t.Fatalf("the token's claims %v %v", claims, err)
	}
	renewed, err := client.Acquire(ctx, "go-weights", "render-1", seatlease.AcquireOptions{}) // keeps the weight
	if err != nil || renewed.Seats != 3 || renewed.SessionID != state.SessionID {
		t.Fatalf("renewed %+v %v", renewed, err)
	}
	var refused *seatlease.SeatError
	_, err = client.Acquire(ctx, "go-weights", "render-1", seatlease.AcquireOptions{Seats: 2})
	if !errors.Is(err, seatlease.ErrSeatsMismatch) || !errors.As(err, &refused) || refused.HeldSeats() != 3 || refused.SeatsRequested() != 2 {
		t.Fatal("mismatch:", err)
	}
	_, err = client.Acquire(ctx, "go-weights", "ws-2", seatlease.AcquireOptions{Seats: 2})
	if !errors.Is(err, seatlease.ErrNoSeatsAvailable) || !errors.As(err, &refused) || refused.SeatsRequested() != 2 || refused.SeatsUsed() != 3 {
		t.Fatal("no seats:", err)
	}
	plain, err := client.Acquire(ctx, "go-weights", "ws-3", seatlease.AcquireOptions{}) // the last seat
	if err != nil || plain.Seats != 1 || plain.SeatsUsed != 4 {
		t.Fatalf("plain %+v %v", plain, err)
	}
	if _, err := client.Release(ctx, "go-weights", plain.SessionID); err != nil {
		t.Fatal(err)
	}
	var weights map[string]int
	s.control("weights?license_id=go-weights", nil, &weights)
	if len(weights) != 1 || weights["render-1"] != 3 {
		t.Fatalf("weights %v", weights)
	}
	s.control("flush", map[string]any{}, nil) // Redis forgets the seat: re-admitted by its token, with its weight
	time.Sleep(2500 * time.Millisecond)
	s.control("weights?license_id=go-weights", nil, &weights)
	if now := lease.State(); len(regained) != 0 || now.Lost || now.SessionID != state.SessionID || now.Seats != 3 || len(weights) != 1 || weights["render-1"] != 3 {
		t.Fatalf("after the flush: %+v %v", now, weights)
	}
	s.control("outage", map[string]any{"seconds": 4}, nil) // longer than the lease: lost, the re-acquire asks for the same weight
	select {
	case <-regained:
	case <-time.After(10 * time.Second):
		t.Fatal("the weighted seat was not regained")
	}
	s.control("weights?license_id=go-weights", nil, &weights)
	if now := lease.State(); now.Seats != 3 || now.SessionID == state.SessionID || len(weights) != 1 || weights["render-1"] != 3 {
		t.Fatalf("after the loss: %+v %v", now, weights)
	}
}
