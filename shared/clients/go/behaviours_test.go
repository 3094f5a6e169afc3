package seatlease_test

// The Go client against the fake bad server's behaviours (tests/client_bad_server.py),
// started by tests/test_client_go.py, which passes its URL in SEATLEASE_BAD_URL: a
// Retry-After of an hour never outlasts the maximum back-off, an ended term is said once
// and asked again only minutes later, a suspended license keeps its held seats. And, on a
// recording server of its own (the bad server's "recover" grant heartbeats every 20 s), a
// session the server forgot kept by its last lease token, and a seat an operator freed
// lost as "revoked" without its token being sent.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

const badKey = "sl_00000000_kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"

func badServer(t *testing.T) string {
	t.Helper()
	url := os.Getenv("SEATLEASE_BAD_URL")
	if url == "" {
		t.Skip("SEATLEASE_BAD_URL not set: run through pytest tests/test_client_go.py")
	}
	return url
}

// badPinned: the bad server's signing key (SEATLEASE_BAD_PINNED_KEY, its JWK's "x"): its
// behaviour scenarios sign every 2xx as a real deployment does.
func badPinned(t *testing.T) []any {
	t.Helper()
	x := os.Getenv("SEATLEASE_BAD_PINNED_KEY")
	if x == "" {
		t.Skip("SEATLEASE_BAD_PINNED_KEY not set: run through pytest tests/test_client_go.py")
	}
	return []any{x}
}

// badCalls: the bad server's count of calls per function for scenario since its reset
// (reset: clear it first).
func badCalls(t *testing.T, url, scenario string, reset bool) map[string]int {
	t.Helper()
	action := "_calls"
	if reset {
		action = "_reset"
	}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	response, err := client.Get(url + "/" + scenario + "/" + action)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	counts := map[string]int{}
	if !reset {
		if err := json.NewDecoder(response.Body).Decode(&counts); err != nil {
			t.Fatal(err)
		}
	}
	return counts
}

// lockedBuffer: a log's output, written by the heartbeat goroutine and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

type lostReasons struct {
	mu      sync.Mutex
	reasons []string
}

func (r *lostReasons) onLost(_ *seatlease.Lease, reason string) {
	r.mu.Lock()
	r.reasons = append(r.reasons, reason)
	r.mu.Unlock()
}

func (r *lostReasons) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reasons...)
}

func TestARetryAfterOfAnHourNeverOutlastsTheMaximumBackoff(t *testing.T) {
	url := badServer(t)
	client := newClient(t, url+"/retry_after_long", badKey, seatlease.Options{PinnedKeys: badPinned(t),
		Backoff: 100 * time.Millisecond, MaxBackoff: time.Second, Retries: 2,
	})
	// a client asleep for an hour fails here, not hangs
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	started := time.Now()
	_, err := client.Acquire(ctx, "lic", "pc-1", seatlease.AcquireOptions{})
	var failed *seatlease.SeatError
	if !errors.Is(err, seatlease.ErrBackendUnavailable) || !errors.As(err, &failed) || failed.Status != 503 {
		t.Fatal("not a 503 after the retries:", err)
	}
	if took := time.Since(started); took > 4*time.Second {
		t.Fatalf("took %v: two pauses of at most 1 s each, not of an hour", took)
	}
}

func TestAnEndedTermIsSaidOnceAndAskedAgainOnlyMinutesLater(t *testing.T) {
	url := badServer(t)
	badCalls(t, url, "term_ended", true)
	var logged lockedBuffer
	client := newClient(t, url+"/term_ended", badKey, seatlease.Options{PinnedKeys: badPinned(t),
		Backoff: 50 * time.Millisecond, Logger: log.New(&logged, "", 0),
	})
	var lost lostReasons
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1", OnLost: lost.onLost})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	eventually(t, 5*time.Second, "the seat lost", func() bool { return lease.State().Lost })
	if reason := lease.State().LostReason; reason != "license_expired" {
		t.Fatalf("lost for %q", reason)
	}
	time.Sleep(8 * time.Second) // the old client asked again (and logged) every few seconds
	if reasons := lost.get(); len(reasons) != 1 || reasons[0] != "license_expired" || !lease.State().Lost {
		t.Fatalf("lost %v, state %+v", reasons, lease.State())
	}
	// the first grant, then at most one re-acquire after the loss
	if counted := badCalls(t, url, "term_ended", false); counted["heartbeat"] != 1 || counted["acquire"] > 2 {
		t.Fatalf("calls %v", counted)
	}
	if lines := logged.lines(); len(lines) != 1 || !strings.Contains(lines[0], "license_expired") {
		t.Fatalf("logged %q", lines)
	}
	// a program waiting for its first seat is told at once, never made to wait
	started := time.Now()
	_, err = client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-2", Wait: true, Timeout: time.Minute})
	var refused *seatlease.SeatError
	if !errors.Is(err, seatlease.ErrLicenseExpired) || !errors.As(err, &refused) || refused.Body["expired_at"] == nil {
		t.Fatal("not a license_expired:", err)
	}
	if took := time.Since(started); took > 2*time.Second {
		t.Fatalf("waited %v for a final refusal", took)
	}
}

func TestASuspendedLicenseKeepsItsHeldSeatAndRefusesANewOne(t *testing.T) {
	url := badServer(t)
	badCalls(t, url, "suspended", true)
	client := newClient(t, url+"/suspended", badKey, seatlease.Options{PinnedKeys: badPinned(t), Backoff: 50 * time.Millisecond})
	var lost lostReasons
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1", OnLost: lost.onLost})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	started := time.Now()
	_, err = client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-2", Wait: true, Timeout: time.Minute})
	var refused *seatlease.SeatError
	if !errors.Is(err, seatlease.ErrLicenseSuspended) || !errors.As(err, &refused) || refused.Code != "license_suspended" {
		t.Fatal("not a license_suspended:", err)
	}
	if took := time.Since(started); took > 2*time.Second {
		t.Fatalf("waited %v for a final refusal", took)
	}
	time.Sleep(4 * time.Second) // past its 3 s lease: kept by heartbeats (every second)
	if lease.State().Lost || len(lost.get()) != 0 {
		t.Fatalf("lost %v, state %+v", lost.get(), lease.State())
	}
	if counted := badCalls(t, url, "suspended", false); counted["heartbeat"] < 3 || counted["acquire"] != 2 {
		t.Fatalf("calls %v", counted)
	}
}

// -- a session the server forgot (a region lost): kept by its last lease token -------------

const forgotToken = "eyJhbGciOiJFZERTQSJ9.eyJzaWQiOiJzIn0.c2lnbmF0dXJl" // not verified here: kept all the same

var sessionUnknown = map[string]any{"error": map[string]any{
	"code": "session_expired", "message": "The session is gone (unknown): acquire again.", "reason": "unknown",
}}

func grantWith(fields map[string]any) map[string]any {
	grant := map[string]any{}
	for name, value := range weightGrant {
		grant[name] = value
	}
	for name, value := range fields {
		grant[name] = value
	}
	return grant
}

func TestASessionTheServerForgotIsKeptByItsLastToken(t *testing.T) {
	// as the bad server's "recover": without the token a heartbeat is 410 unknown, with it 200
	client, r := recording(t, func(fn string, body map[string]any) (int, any) {
		switch {
		case fn == "acquire":
			return 201, grantWith(map[string]any{"lease_token": forgotToken})
		case fn == "heartbeat" && body["lease_token"] == forgotToken:
			return 200, grantWith(map[string]any{"lease_token": forgotToken})
		case fn == "heartbeat":
			return 410, sessionUnknown
		}
		return 200, map[string]any{"released": true, "seats_used": 0}
	})
	var lost lostReasons
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1", OnLost: lost.onLost})
	if err != nil {
		t.Fatal(err)
	}
	if lease.State().Token != forgotToken {
		t.Fatalf("token %q", lease.State().Token)
	}
	eventually(t, 5*time.Second, "two heartbeats, each retried with the token", func() bool { return len(r.sent("heartbeat")) >= 4 })
	if lease.State().Lost || len(lost.get()) != 0 {
		t.Fatalf("lost %v, state %+v", lost.get(), lease.State())
	}
	if err := lease.Close(); err != nil {
		t.Fatal(err)
	}
	heartbeats := r.sent("heartbeat")
	first, retry, second, again := heartbeats[0], heartbeats[1], heartbeats[2], heartbeats[3]
	if _, sent := first["lease_token"]; sent {
		t.Fatal("a normal heartbeat carried the token")
	}
	if _, sent := second["lease_token"]; sent {
		t.Fatal("a normal heartbeat carried the token")
	}
	if retry["lease_token"] != forgotToken || again["lease_token"] != forgotToken || retry["session_id"] != first["session_id"] {
		t.Fatalf("retries %v %v", retry, again)
	}
	if retry["request_id"] == nil || retry["request_id"] == first["request_id"] {
		t.Fatalf("the retry's request_id %v (first %v)", retry["request_id"], first["request_id"])
	}
	if acquires := len(r.sent("acquire")); acquires != 1 {
		t.Fatalf("%d acquires: never lost, never acquired again", acquires)
	}
}

func TestATokenTheServerRefusesLosesTheSeatAsBefore(t *testing.T) {
	var mu sync.Mutex
	sessions := 0
	client, r := recording(t, func(fn string, body map[string]any) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case fn == "acquire":
			sessions++
			n := strconv.Itoa(sessions)
			return 201, grantWith(map[string]any{"session_id": "session-" + n, "lease_token": forgotToken + n})
		case fn == "heartbeat" && sessions == 1:
			return 410, sessionUnknown // with the token or not
		case fn == "heartbeat":
			return 200, grantWith(map[string]any{"session_id": "session-2"})
		}
		return 200, map[string]any{"released": true, "seats_used": 0}
	})
	var lost lostReasons
	regained := make(chan struct{}, 1)
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1", OnLost: lost.onLost,
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
	select {
	case <-regained:
	case <-time.After(5 * time.Second):
		t.Fatal("the seat was not regained")
	}
	state := lease.State()
	if reasons := lost.get(); len(reasons) != 1 || reasons[0] != "unknown" || state.SessionID != "session-2" || state.Token != forgotToken+"2" {
		t.Fatalf("lost %v, state %+v", reasons, state)
	}
	heartbeats := r.sent("heartbeat")
	if len(heartbeats) < 2 {
		t.Fatalf("heartbeats %v: the 410 was not sent again with the token", heartbeats)
	}
	if _, sent := heartbeats[0]["lease_token"]; sent || heartbeats[1]["lease_token"] != forgotToken+"1" {
		t.Fatalf("heartbeats %v", heartbeats[:2])
	}
}

// -- a seat an operator freed (seatlease revoke, the portal's "Free seat") ------------------

var sessionRevoked = map[string]any{"error": map[string]any{
	"code": "session_expired", "message": "The session has expired or was released, reclaimed or revoked; acquire a seat again.",
	"reason": "revoked",
}}

func TestASeatAnOperatorFreedIsLostAsRevokedWithoutItsToken(t *testing.T) {
	// a revoked session's token is refused by the server: the client must not send it (only
	// a 410 "unknown" is retried with it); the seat is lost as "revoked" and acquired again
	var mu sync.Mutex
	sessions := 0
	client, r := recording(t, func(fn string, body map[string]any) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case fn == "acquire":
			sessions++
			n := strconv.Itoa(sessions)
			return 201, grantWith(map[string]any{"session_id": "session-" + n, "lease_token": forgotToken + n})
		case fn == "heartbeat" && body["session_id"] == "session-1":
			return 410, sessionRevoked // with the token or not
		case fn == "heartbeat":
			return 200, grantWith(map[string]any{"session_id": body["session_id"]})
		}
		return 200, map[string]any{"released": true, "seats_used": 0}
	})
	var lost lostReasons
	var lostState seatlease.LeaseState
	regained := make(chan struct{}, 1)
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1",
		OnLost: func(l *seatlease.Lease, reason string) {
			mu.Lock()
			lostState = l.State()
			mu.Unlock()
			lost.onLost(l, reason)
		},
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
	select {
	case <-regained:
	case <-time.After(5 * time.Second):
		t.Fatal("the seat was not regained")
	}
	mu.Lock()
	atLoss := lostState
	mu.Unlock()
	if reasons := lost.get(); len(reasons) != 1 || reasons[0] != "revoked" || !atLoss.Lost || atLoss.LostReason != "revoked" {
		t.Fatalf("lost %v, state at the loss %+v", reasons, atLoss)
	}
	if state := lease.State(); state.Lost || state.LostReason != "" || state.SessionID != "session-2" {
		t.Fatalf("state %+v", state)
	}
	refused := 0
	for _, body := range r.sent("heartbeat") {
		if _, sent := body["lease_token"]; sent {
			t.Fatalf("a heartbeat carried the token: %v", body)
		}
		if body["session_id"] == "session-1" {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("%d heartbeats of the revoked session: it was sent again", refused)
	}
	if acquires := len(r.sent("acquire")); acquires != 2 {
		t.Fatalf("%d acquires", acquires)
	}
}

func TestSessionExpiredReasonIsTheAnswersReason(t *testing.T) {
	for _, reason := range []string{"expired", "unknown", "revoked", "idle"} {
		gone := &seatlease.SeatError{Status: 410, Code: "session_expired", Body: map[string]any{"reason": reason}}
		if gone.Reason() != reason {
			t.Fatalf("Reason() %q, want %q", gone.Reason(), reason)
		}
	}
	if gone := (&seatlease.SeatError{Status: 410, Code: "session_expired", Body: map[string]any{}}); gone.Reason() != "unknown" {
		t.Fatalf("Reason() %q without a reason", gone.Reason())
	}
}
