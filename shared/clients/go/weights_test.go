package seatlease_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

// Weighted seats against a recording server (no seatlease needed): what the client sends,
// what it makes of an answer (an older server's without seats too), a re-acquire after a
// loss, and the typed seats_mismatch. The live story is in live_test.go.

var weightGrant = map[string]any{
	"session_id": "c2Vzc2lvbi0wMDAwMDAwMDAx", "license_id": "lic", "client_id": "pc-1",
	"lease_expires_at": "2100-01-01T00:00:00.000Z", "lease_seconds": 1, "heartbeat_interval_seconds": 1,
	"seats_used": 1, "seats_total": 8, "overage": false, "borrowed": false,
}

type recorder struct {
	mu     sync.Mutex
	bodies []struct {
		fn   string
		body map[string]any
	}
	answer func(fn string, body map[string]any) (int, any)
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, request *http.Request) {
	var body map[string]any
	_ = json.NewDecoder(request.Body).Decode(&body)
	fn := strings.TrimPrefix(request.URL.Path, "/")
	r.mu.Lock()
	r.bodies = append(r.bodies, struct {
		fn   string
		body map[string]any
	}{fn, body})
	r.mu.Unlock()
	status, reply := r.answer(fn, body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(reply)
}

func (r *recorder) sent(fn string) []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bodies []map[string]any
	for _, entry := range r.bodies {
		if entry.fn == fn {
			bodies = append(bodies, entry.body)
		}
	}
	return bodies
}

func recording(t *testing.T, answer func(fn string, body map[string]any) (int, any)) (*seatlease.Client, *recorder) {
	t.Helper()
	r := &recorder{answer: answer}
	server := httptest.NewServer(r)
	t.Cleanup(server.Close)
	client := newClient(t, server.URL, "sk_test", seatlease.Options{InsecureSkipVerify: true, Backoff: 10 * time.Millisecond, Retries: 1})
	return client, r
}

// echoWeight: a grant whose seats is the weight asked, none when none was asked (an older
// server's answer).
func echoWeight(fn string, body map[string]any) (int, any) {
	if fn == "release" {
		return 200, map[string]any{"released": true, "seats_used": 0}
	}
	grant := map[string]any{}
	for name, value := range weightGrant {
		grant[name] = value
	}
	if seats, ok := body["seats"]; ok {
		grant["seats"] = seats
	}
	if fn == "acquire" {
		return 201, grant
	}
	return 200, grant
}

func TestSeatsIsSentOnlyWhenGivenAndTheAnswerGivesTheWeight(t *testing.T) {
	client, r := recording(t, echoWeight)
	ctx := context.Background()
	plain, err := client.Acquire(ctx, "lic", "pc-1", seatlease.AcquireOptions{})
	if err != nil || plain.Seats != 1 {
		t.Fatalf("plain %+v %v", plain, err)
	}
	weighted, err := client.Acquire(ctx, "lic", "pc-2", seatlease.AcquireOptions{Seats: 3})
	if err != nil || weighted.Seats != 3 {
		t.Fatalf("weighted %+v %v", weighted, err)
	}
	old, err := client.Lease(ctx, "lic", seatlease.LeaseOptions{ClientID: "pc-3"})
	if err != nil || old.State().Seats != 1 {
		t.Fatalf("an older server's lease %v", err)
	}
	_ = old.Close()
	lease, err := client.Lease(ctx, "lic", seatlease.LeaseOptions{ClientID: "pc-4", Seats: 4})
	if err != nil || lease.State().Seats != 4 {
		t.Fatalf("a lease of 4 %v", err)
	}
	_ = lease.Close()
	acquires := r.sent("acquire")
	if len(acquires) != 4 {
		t.Fatalf("%d acquires", len(acquires))
	}
	_, first := acquires[0]["seats"]
	_, third := acquires[2]["seats"]
	if first || third || acquires[1]["seats"] != 3.0 || acquires[3]["seats"] != 4.0 {
		t.Fatalf("sent %v", acquires)
	}
}

func TestAReacquireAfterTheSeatIsLostAsksForTheSameWeight(t *testing.T) {
	var mu sync.Mutex
	lost := false
	client, r := recording(t, func(fn string, body map[string]any) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		if fn == "heartbeat" && !lost {
			lost = true // the first heartbeat finds the seat gone
			return 410, map[string]any{"error": map[string]any{"code": "session_expired", "message": "gone", "reason": "expired"}}
		}
		return echoWeight(fn, body)
	})
	regained := make(chan struct{}, 1)
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1", Seats: 3,
		OnRegained: func(*seatlease.Lease) {
			select {
			case regained <- struct{}{}:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-regained:
	case <-time.After(10 * time.Second):
		t.Fatal("the lost seat was not taken again")
	}
	if lease.State().Seats != 3 {
		t.Fatalf("state %+v", lease.State())
	}
	_ = lease.Close()
	acquires := r.sent("acquire")
	if len(acquires) < 2 {
		t.Fatalf("%d acquires", len(acquires))
	}
	for _, body := range acquires {
		if body["seats"] != 3.0 {
			t.Fatalf("an acquire without the weight: %v", body)
		}
	}
	for _, body := range r.sent("heartbeat") {
		if _, ok := body["seats"]; ok {
			t.Fatalf("a heartbeat with seats: %v", body)
		}
	}
}

func TestSeatsMismatchIsTypedAndNeverWaitedFor(t *testing.T) {
	mismatch := map[string]any{"error": map[string]any{"code": "seats_mismatch",
		"message": "client pc-1 holds a lease of 4 seats; release it to take 2", "held_seats": 4, "seats": 2}}
	client, r := recording(t, func(string, map[string]any) (int, any) { return 409, mismatch })
	ctx := context.Background()
	_, err := client.Acquire(ctx, "lic", "pc-1", seatlease.AcquireOptions{Seats: 2})
	var refused *seatlease.SeatError
	if !errors.Is(err, seatlease.ErrSeatsMismatch) || errors.Is(err, seatlease.ErrNoSeatsAvailable) || !errors.As(err, &refused) {
		t.Fatal("mismatch:", err)
	}
	if refused.Status != 409 || refused.Code != "seats_mismatch" || refused.HeldSeats() != 4 || refused.SeatsRequested() != 2 {
		t.Fatalf("mismatch %+v", refused)
	}
	started := time.Now()
	_, err = client.Lease(ctx, "lic", seatlease.LeaseOptions{ClientID: "pc-1", Seats: 2, Wait: true, Timeout: 10 * time.Second})
	if !errors.Is(err, seatlease.ErrSeatsMismatch) || time.Since(started) > 5*time.Second {
		t.Fatal("a waiting lease:", err)
	}
	if n := len(r.sent("acquire")); n != 2 {
		t.Fatalf("%d acquires: a mismatch is neither retried nor waited for", n)
	}
}

func TestMachineMismatchIsTypedAndNeverWaitedFor(t *testing.T) {
	mismatch := map[string]any{"error": map[string]any{"code": "machine_mismatch",
		"message": "Client 'pc-1' borrowed its seat for another machine"}}
	client, r := recording(t, func(string, map[string]any) (int, any) { return 409, mismatch })
	ctx := context.Background()
	_, err := client.Acquire(ctx, "lic", "pc-1", seatlease.AcquireOptions{})
	var refused *seatlease.SeatError
	if !errors.Is(err, seatlease.ErrMachineMismatch) || errors.Is(err, seatlease.ErrNoSeatsAvailable) || !errors.As(err, &refused) {
		t.Fatal("mismatch:", err)
	}
	if refused.Status != 409 || refused.Code != "machine_mismatch" {
		t.Fatalf("mismatch %+v", refused)
	}
	started := time.Now()
	_, err = client.Lease(ctx, "lic", seatlease.LeaseOptions{ClientID: "pc-1", Wait: true, Timeout: 10 * time.Second})
	if !errors.Is(err, seatlease.ErrMachineMismatch) || time.Since(started) > 5*time.Second {
		t.Fatal("a waiting lease:", err)
	}
	if n := len(r.sent("acquire")); n != 2 {
		t.Fatalf("%d acquires: a mismatch is neither retried nor waited for", n)
	}
}

func TestADenialSaysHowManySeatsWereAsked(t *testing.T) {
	denial := map[string]any{"error": map[string]any{"code": "no_seats_available", "message": "2 seats are free, 4 asked",
		"seats_used": 6, "seats_total": 8, "seats_held": 0, "seats_reserved": 0, "retry_after_seconds": 5, "seats_requested": 4}}
	client, _ := recording(t, func(string, map[string]any) (int, any) { return 409, denial })
	_, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{Seats: 4})
	var refused *seatlease.SeatError
	if !errors.Is(err, seatlease.ErrNoSeatsAvailable) || !errors.As(err, &refused) || refused.SeatsRequested() != 4 {
		t.Fatal("denial:", err)
	}
	plain := &seatlease.SeatError{Body: map[string]any{}}
	if plain.SeatsRequested() != 1 {
		t.Fatal("a plain denial asks for 1")
	}
}

func TestTheSeatsClaimIs1WhenAbsent(t *testing.T) {
	for _, c := range []struct {
		claims map[string]any
		want   int
	}{{map[string]any{"sid": "s"}, 1}, {map[string]any{"seats": 4.0}, 4}, {map[string]any{"seats": true}, 1}, {map[string]any{"seats": 2.5}, 1}} {
		if got := seatlease.ClaimedSeats(c.claims); got != c.want {
			t.Errorf("ClaimedSeats(%v) = %d, want %d", c.claims, got, c.want)
		}
	}
}
