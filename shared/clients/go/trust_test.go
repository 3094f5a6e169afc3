package seatlease_test

// Issue 48, a client a vendor can trust: verified by default (PinnedKeys, or the loud
// InsecureSkipVerify), a refused grant released at once, every exchange bounded (the bad
// server's drip, drip_heartbeat and drip_release; a renewal cut at the lease's
// deadline), answers read by their code (a 404 that is not license_not_found, a null
// session, a renewal without counts), no redirect followed, borrow taking acquire's
// identity, acquire the caller's request id and fingerprint, and the module's version
// and LICENSE.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

func TestNewRequiresPinnedKeysOrTheInsecureOptOut(t *testing.T) {
	for _, options := range []seatlease.Options{{}, {Verify: true}, {TenantID: "acme"}} {
		client, err := seatlease.New("http://127.0.0.1:1", "sl_key", options)
		if client != nil || !errors.Is(err, seatlease.ErrNoPinnedKeys) {
			t.Fatalf("%+v: a client without pinned keys (%v)", options, err)
		}
		if message := err.Error(); !strings.Contains(message, "PinnedKeys") || !strings.Contains(message, "InsecureSkipVerify") {
			t.Fatalf("the message names neither way out: %q", message)
		}
	}
	if _, err := seatlease.New("http://127.0.0.1:1", "sl_key", seatlease.Options{PinnedKeys: []any{"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}}); err != nil {
		t.Fatal("pinned:", err)
	}
	if _, err := seatlease.New("http://127.0.0.1:1", "sl_key", seatlease.Options{InsecureSkipVerify: true}); err != nil {
		t.Fatal("the opt-out:", err)
	}
}

// A 2xx whose token is missing, or signed by a key that is not the vendor's, is no seat,
// and the session it names is released before the call returns.
func TestARefusedGrantIsNoSeatAndItsSessionIsReleasedAtOnce(t *testing.T) {
	url := badServer(t)
	for _, c := range []struct {
		scenario string
		kind     error
	}{{"no_token", seatlease.ErrTokenMissing}, {"foreign_key", seatlease.ErrUntrustedKey}} {
		badCalls(t, url, c.scenario, true)
		client := newClient(t, url+"/"+c.scenario, badKey, seatlease.Options{PinnedKeys: badPinned(t), ReleaseTimeout: 2 * time.Second})
		started := time.Now()
		answer, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{})
		if answer != nil || !errors.Is(err, seatlease.ErrToken) || !errors.Is(err, c.kind) {
			t.Fatalf("%s: %+v, %v", c.scenario, answer, err)
		}
		if took := time.Since(started); took > 4*time.Second {
			t.Fatalf("%s: took %v", c.scenario, took)
		}
		if counted := badCalls(t, url, c.scenario, false); counted["acquire"] != 1 || counted["release"] != 1 {
			t.Fatalf("%s: calls %v (the refused grant's session must be released once)", c.scenario, counted)
		}
		lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1"})
		if lease != nil || !errors.Is(err, c.kind) {
			t.Fatalf("%s: a lease %v", c.scenario, err)
		}
		if counted := badCalls(t, url, c.scenario, false); counted["release"] != 2 {
			t.Fatalf("%s: calls %v", c.scenario, counted)
		}
	}
}

func TestASessionNullGrantIsAnInvalidResponse(t *testing.T) {
	url := badServer(t)
	badCalls(t, url, "session_null", true)
	client := newClient(t, url+"/session_null", badKey, seatlease.Options{PinnedKeys: badPinned(t)})
	answer, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{})
	var refused *seatlease.SeatError
	if answer != nil || !errors.Is(err, seatlease.ErrInvalidResponse) || !errors.As(err, &refused) || refused.Code != "invalid_response" || !strings.Contains(err.Error(), "session_id") {
		t.Fatalf("%+v, %v", answer, err)
	}
	if lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1"}); lease != nil || !errors.Is(err, seatlease.ErrInvalidResponse) {
		t.Fatal("a lease:", err)
	}
	// an insecure client reads the answer's shape all the same
	insecure := newClient(t, url+"/session_null", badKey, seatlease.Options{InsecureSkipVerify: true})
	if _, err := insecure.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{}); !errors.Is(err, seatlease.ErrInvalidResponse) {
		t.Fatal("insecure:", err)
	}
	if counted := badCalls(t, url, "session_null", false); counted["release"] != 0 {
		t.Fatalf("calls %v: no session to release", counted)
	}
}

func TestSeatCountsKeepTheirLastValuesWhenARenewalOmitsThem(t *testing.T) {
	url := badServer(t)
	badCalls(t, url, "heartbeat_no_counts", true)
	client := newClient(t, url+"/heartbeat_no_counts", badKey, seatlease.Options{PinnedKeys: badPinned(t), TenantID: "acme"})
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	eventually(t, 10*time.Second, "two renewals", func() bool { return badCalls(t, url, "heartbeat_no_counts", false)["heartbeat"] >= 2 })
	time.Sleep(100 * time.Millisecond) // the second renewal applied
	if state := lease.State(); state.Lost || state.SeatsUsed != 1 || state.SeatsTotal != 2 {
		t.Fatalf("state %+v: 1 of 2 seats, as the grant said", state)
	}
}

// Only license_not_found is ErrLicenseNotFound: the service's own 404 not_found (a wrong
// base URL) and an empty 404 (a middlebox) are HTTP errors naming the URL.
func TestA404IsLicenseNotFoundOnlyByItsCode(t *testing.T) {
	url := badServer(t)
	for _, c := range []struct{ scenario, code string }{{"not_found", "not_found"}, {"empty_404", "http_404"}} {
		badCalls(t, url, c.scenario, true)
		client := newClient(t, url+"/"+c.scenario, badKey, seatlease.Options{PinnedKeys: badPinned(t)})
		_, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{})
		var failed *seatlease.SeatError
		if errors.Is(err, seatlease.ErrLicenseNotFound) || !errors.Is(err, seatlease.ErrHTTP) || !errors.As(err, &failed) {
			t.Fatalf("%s: %v", c.scenario, err)
		}
		if failed.Status != 404 || failed.Code != c.code || !strings.Contains(err.Error(), url+"/"+c.scenario+"/acquire") {
			t.Fatalf("%s: %+v (%v)", c.scenario, failed, err)
		}
		if counted := badCalls(t, url, c.scenario, false); counted["acquire"] != 1 {
			t.Fatalf("%s: calls %v (not retried)", c.scenario, counted)
		}
	}
	client := newClient(t, url+"/license_not_found", badKey, seatlease.Options{PinnedKeys: badPinned(t)})
	_, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{})
	if !errors.Is(err, seatlease.ErrLicenseNotFound) || errors.Is(err, seatlease.ErrHTTP) {
		t.Fatal("license_not_found:", err)
	}
}

// A redirect is no answer of the service's: never followed (with a caller's own
// http.Client too, which follows by default), an ErrHTTP naming the Location.
func TestARedirectIsNeverFollowed(t *testing.T) {
	url := badServer(t)
	for _, own := range []*http.Client{nil, {Transport: &http.Transport{}}} {
		badCalls(t, url, "signed", true)
		client := newClient(t, url+"/redirect", badKey, seatlease.Options{PinnedKeys: badPinned(t), HTTPClient: own})
		answer, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{})
		var failed *seatlease.SeatError
		if answer != nil || !errors.Is(err, seatlease.ErrHTTP) || !errors.As(err, &failed) || failed.Status != 307 {
			t.Fatalf("%+v %v", answer, err)
		}
		if !strings.Contains(err.Error(), url+"/signed/acquire") {
			t.Fatalf("the Location is not named: %v", err)
		}
		if counted := badCalls(t, url, "signed", false); len(counted) != 0 {
			t.Fatalf("followed: %v", counted)
		}
		if own != nil {
			own.CloseIdleConnections()
		}
	}
}

// -- every exchange bounded ------------------------------------------------------------------

func TestADrippedAnswerEndsAtTheTimeout(t *testing.T) {
	url := badServer(t)
	client := newClient(t, url+"/drip", badKey, seatlease.Options{PinnedKeys: badPinned(t), Timeout: 2 * time.Second, Retries: -1})
	started := time.Now()
	_, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{})
	if took := time.Since(started); !errors.Is(err, seatlease.ErrBackendUnavailable) || took > 3500*time.Millisecond {
		t.Fatalf("after %v: %v", took, err)
	}
}

func TestADrippedHeartbeatEndsAtTheTimeout(t *testing.T) {
	url := badServer(t)
	client := newClient(t, url+"/drip_heartbeat", badKey, seatlease.Options{PinnedKeys: badPinned(t), TenantID: "acme", Timeout: 2 * time.Second, Retries: -1})
	answer, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{}) // answered at once
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	_, err = client.Heartbeat(context.Background(), "lic", answer.SessionID)
	if took := time.Since(started); !errors.Is(err, seatlease.ErrBackendUnavailable) || took > 3500*time.Millisecond {
		t.Fatalf("after %v: %v", took, err)
	}
}

func TestADrippedReleaseEndsAtTheReleaseTimeout(t *testing.T) {
	url := badServer(t)
	var logged lockedBuffer
	client := newClient(t, url+"/drip_release", badKey, seatlease.Options{PinnedKeys: badPinned(t), TenantID: "acme",
		ReleaseTimeout: time.Second, Logger: log.New(&logged, "", 0)})
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1"})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	err = lease.Close()
	if took := time.Since(started); err == nil || took > 2500*time.Millisecond {
		t.Fatalf("Close after %v: %v", took, err)
	}
}

// A renewal not back by the lease's deadline is cut there, and the seat is lost
// ("unreachable") then, not when Timeout (here far longer than the lease) ends.
func TestARenewalNotBackByTheDeadlineLosesTheSeatThen(t *testing.T) {
	grant := map[string]any{"session_id": "s-1", "license_id": "lic", "client_id": "pc-1",
		"lease_expires_at": "2100-01-01T00:00:00.000Z", "lease_seconds": 2, "heartbeat_interval_seconds": 1,
		"seats_used": 1, "seats_total": 2, "overage": false, "borrowed": false}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/heartbeat": // the headers, then a byte now and then, never the end
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(200)
			for {
				_, _ = w.Write([]byte(" "))
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
		case "/acquire":
			w.WriteHeader(201)
			_, _ = w.Write(mustJSON(grant))
		default:
			_, _ = w.Write([]byte(`{"released": true, "seats_used": 0}`))
		}
	}))
	defer server.Close()
	client := newClient(t, server.URL, "sk_test", seatlease.Options{InsecureSkipVerify: true, Timeout: 30 * time.Second,
		Backoff: 50 * time.Millisecond, ReleaseTimeout: time.Second})
	lost := make(chan string, 1)
	started := time.Now()
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1",
		OnLost: func(_ *seatlease.Lease, reason string) {
			select {
			case lost <- reason:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	select {
	case reason := <-lost:
		if took := time.Since(started); reason != "unreachable" || took < 1900*time.Millisecond || took > 4*time.Second {
			t.Fatalf("lost %q after %v", reason, took)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("not lost by the lease's deadline")
	}
}

// -- parity ----------------------------------------------------------------------------------

func TestAcquireSendsTheCallersRequestIDAndFingerprint(t *testing.T) {
	client, r := recording(t, echoWeight)
	ctx := context.Background()
	machine := seatlease.Fingerprint("machine-1")
	if _, err := client.Acquire(ctx, "lic", "pc-1", seatlease.AcquireOptions{RequestID: "rid-1", Fingerprint: machine}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Acquire(ctx, "lic", "pc-1", seatlease.AcquireOptions{}); err != nil {
		t.Fatal(err)
	}
	lease, err := client.Lease(ctx, "lic", seatlease.LeaseOptions{ClientID: "pc-2", RequestID: "rid-2", Fingerprint: machine})
	if err != nil {
		t.Fatal(err)
	}
	_ = lease.Close()
	acquires := r.sent("acquire")
	if len(acquires) != 3 {
		t.Fatalf("%d acquires", len(acquires))
	}
	given, plain, leased := acquires[0], acquires[1], acquires[2]
	if given["request_id"] != "rid-1" || given["fingerprint"] != machine || leased["request_id"] != "rid-2" || leased["fingerprint"] != machine {
		t.Fatalf("sent %v and %v", given, leased)
	}
	if _, sent := plain["fingerprint"]; sent || plain["request_id"] == nil || plain["request_id"] == "rid-1" {
		t.Fatalf("sent %v", plain)
	}
}

// Borrow sends acquire's identity and needs; a borrow whose token does not verify (here:
// none the JWKS knows) is no seat, and is released at once.
func TestBorrowSendsTheIdentityOfAnAcquireAndReleasesARefusedOne(t *testing.T) {
	client, r := recording(t, func(fn string, body map[string]any) (int, any) {
		switch fn {
		case "keys":
			return 200, map[string]any{"keys": []any{}}
		case "acquire":
			return 201, grantWith(map[string]any{"borrowed": true, "lease_token": forgotToken})
		}
		return 200, map[string]any{"released": true, "seats_used": 0}
	})
	path := filepath.Join(t.TempDir(), "seat.json")
	seat, err := client.Borrow(context.Background(), "lic", "laptop", 3600, path, map[string]any{"team": "cad"}, seatlease.BorrowOptions{
		User: "ann", Host: "pc-ann", Entitlements: []string{"pro"}, Version: "2026.4", Seats: 2,
	})
	if seat != nil || !errors.Is(err, seatlease.ErrToken) {
		t.Fatal("a borrow that does not verify:", err)
	}
	acquires := r.sent("acquire")
	if len(acquires) != 1 {
		t.Fatalf("%d acquires", len(acquires))
	}
	sent := acquires[0]
	if sent["user"] != "ann" || sent["host"] != "pc-ann" || sent["version"] != "2026.4" || sent["seats"] != 2.0 ||
		sent["borrow_seconds"] != 3600.0 || sent["fingerprint"] == nil || sent["nonce"] == nil {
		t.Fatalf("sent %v", sent)
	}
	if entitlements, _ := sent["entitlements"].([]any); len(entitlements) != 1 || entitlements[0] != "pro" {
		t.Fatalf("sent %v", sent)
	}
	if metadata, _ := sent["metadata"].(map[string]any); metadata["team"] != "cad" {
		t.Fatalf("sent %v", sent)
	}
	if releases := r.sent("release"); len(releases) != 1 || releases[0]["session_id"] != weightGrant["session_id"] {
		t.Fatalf("releases %v", releases)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a refused borrow was kept on disk")
	}
	if _, err := client.Borrow(context.Background(), "lic", "laptop", 60, path, nil, seatlease.BorrowOptions{}, seatlease.BorrowOptions{}); err == nil {
		t.Fatal("two BorrowOptions taken")
	}
}

// Against the served functions: a borrow on a license whose policy needs a user, with
// entitlements and a version range, of 2 seats.
func TestABorrowTakesTheIdentityOfAnAcquire(t *testing.T) {
	s := stack(t)
	s.license("go-borrow-user", map[string]any{"seats": 3, "lease_seconds": 60, "max_borrow_seconds": 3600,
		"policy": map[string]any{"max_per_user": 2}, "entitlements": []string{"pro"}, "max_version": "2026.4"})
	client := s.client(seatlease.Options{TenantID: "acme", MachineID: "go-borrow-machine", Backoff: 10 * time.Millisecond})
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "seat.json")
	if _, err := client.Borrow(ctx, "go-borrow-user", "laptop", 600, path, nil); !errors.Is(err, seatlease.ErrInvalidRequest) {
		t.Fatal("no user on a per-user license:", err)
	}
	if _, err := client.Borrow(ctx, "go-borrow-user", "laptop", 600, path, nil, seatlease.BorrowOptions{User: "ann", Entitlements: []string{"cloud"}}); !errors.Is(err, seatlease.ErrNotEntitled) {
		t.Fatal("entitlements not sent:", err)
	}
	if _, err := client.Borrow(ctx, "go-borrow-user", "laptop", 600, path, nil, seatlease.BorrowOptions{User: "ann", Version: "2026.10"}); !errors.Is(err, seatlease.ErrVersionNotEntitled) {
		t.Fatal("version not sent:", err)
	}
	seat, err := client.Borrow(ctx, "go-borrow-user", "laptop", 600, path, nil, seatlease.BorrowOptions{
		User: "ann", Host: "pc-ann", Entitlements: []string{"pro"}, Version: "2026.4", Seats: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if seat.Seats != 2 || seat.BorrowSeconds != 600 || seat.Claims["borrowed"] != true {
		t.Fatalf("seat %+v", seat)
	}
	if live := s.live("go-borrow-user"); len(live) != 1 || live[0].SessionID != seat.SessionID {
		t.Fatalf("live %+v", live)
	}
	if answer, err := seat.ReturnEarly(ctx); err != nil || !answer.Released {
		t.Fatal(answer, err)
	}
}

// -- packaging -------------------------------------------------------------------------------

// The one version of all five clients is shared/clients/VERSION.
func TestTheVersionIsTheClientsVersionFile(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.TrimSpace(string(raw)); seatlease.Version != want {
		t.Fatalf("Version %q, shared/clients/VERSION %q", seatlease.Version, want)
	}
}

// The module's root holds LICENSE, the Apache-2.0 text (the repository's): a module zip
// (what `go mod download` and the module proxy serve) takes the regular files of the
// module's root, so it ships with the module. (tests/test_client_go.py checks that git
// archive, which cmd/go makes a module's zip from, keeps it.)
func TestTheModuleShipsTheApacheLicense(t *testing.T) {
	info, err := os.Lstat("LICENSE")
	if err != nil || !info.Mode().IsRegular() {
		t.Fatalf("LICENSE at the module root: %v %v (a symbolic link is left out of a module zip)", info, err)
	}
	text, _ := os.ReadFile("LICENSE")
	for _, words := range []string{"Apache License", "Version 2.0, January 2004", "http://www.apache.org/licenses/",
		"TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "4. Redistribution."} {
		if !bytes.Contains(text, []byte(words)) {
			t.Fatalf("LICENSE lacks %q", words)
		}
	}
	root, err := os.ReadFile(filepath.Join("..", "..", "..", "LICENSE"))
	if err != nil || !bytes.Equal(root, text) {
		t.Fatalf("LICENSE differs from the repository's (%v)", err)
	}
}

func mustJSON(value any) []byte {
	raw, err := json.Marshal(value)
	if err != nil {
		panic(err)
	}
	return raw
}

// -- the review of issue 48 ------------------------------------------------------------------

// A grant whose token cannot be checked yet (the JWKS answered 503) is retried, not
// released: the seat the client ends with is one the server still holds.
func TestAFailedKeyFetchIsRetriedAndNeverReleasesTheSeat(t *testing.T) {
	url := badServer(t)
	badCalls(t, url, "keys503once", true)
	client := newClient(t, url+"/keys503once", badKey, seatlease.Options{PinnedKeys: badPinned(t), TenantID: "acme",
		Backoff: 50 * time.Millisecond})
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1"})
	if err != nil {
		t.Fatal(err)
	}
	if state := lease.State(); state.Lost || state.SessionID == "" {
		t.Fatalf("state %+v", state)
	}
	if counted := badCalls(t, url, "keys503once", false); counted["keys"] < 2 || counted["release"] != 0 {
		t.Fatalf("calls %v: the key fetch retried, the seat never released", counted)
	}
	if err := lease.Close(); err != nil {
		t.Fatal(err)
	}
	if counted := badCalls(t, url, "keys503once", false); counted["release"] != 1 {
		t.Fatalf("calls %v: one release, the client's own", counted)
	}
}

// A renewal the client refuses (here an answer without lease_expires_at) is an error of
// that heartbeat, and the session it renews is not released for it.
func TestARefusedRenewalIsNotReleased(t *testing.T) {
	client, r := recording(t, func(fn string, body map[string]any) (int, any) {
		switch fn {
		case "acquire":
			return 201, grantWith(nil)
		case "heartbeat":
			return 200, map[string]any{"session_id": body["session_id"], "lease_seconds": 1}
		}
		return 200, map[string]any{"released": true, "seats_used": 0}
	})
	answer, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Heartbeat(context.Background(), "lic", answer.SessionID); !errors.Is(err, seatlease.ErrInvalidResponse) {
		t.Fatal("heartbeat:", err)
	}
	if released := r.sent("release"); len(released) != 0 {
		t.Fatalf("released %v: a refused renewal is not released", released)
	}
}

// A grant's shape: lease_seconds an integer, lease_expires_at present, session_id a
// non-empty string (each else invalid_response; the first two released at once, the
// third names no session); null counts are absent counts (a seat).
func TestAGrantsShapeIsCheckedAndNullCountsAreAbsent(t *testing.T) {
	url := badServer(t)
	for _, c := range []struct {
		scenario string
		releases int
	}{{"float_lease", 1}, {"no_expiry", 1}, {"empty_session", 0}} {
		badCalls(t, url, c.scenario, true)
		client := newClient(t, url+"/"+c.scenario, badKey, seatlease.Options{PinnedKeys: badPinned(t), ReleaseTimeout: 2 * time.Second})
		answer, err := client.Acquire(context.Background(), "lic", "pc-1", seatlease.AcquireOptions{})
		var refused *seatlease.SeatError
		if answer != nil || !errors.Is(err, seatlease.ErrInvalidResponse) || !errors.As(err, &refused) || refused.Code != "invalid_response" {
			t.Fatalf("%s: %+v, %v", c.scenario, answer, err)
		}
		if counted := badCalls(t, url, c.scenario, false); counted["acquire"] != 1 || counted["release"] != c.releases {
			t.Fatalf("%s: calls %v, want %d release(s)", c.scenario, counted, c.releases)
		}
	}
	badCalls(t, url, "null_counts", true)
	client := newClient(t, url+"/null_counts", badKey, seatlease.Options{PinnedKeys: badPinned(t), TenantID: "acme"})
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1"})
	if err != nil {
		t.Fatal("null counts:", err)
	}
	if state := lease.State(); state.Lost || state.SessionID == "" {
		t.Fatalf("state %+v", state)
	}
	if err := lease.Close(); err != nil {
		t.Fatal(err)
	}
	if counted := badCalls(t, url, "null_counts", false); counted["release"] != 1 {
		t.Fatalf("calls %v", counted)
	}
}

// A release signed under a kid the cached JWKS does not list makes the client fetch the
// JWKS again, and that fetch (dripped here) ends within ReleaseTimeout with the release.
func TestAReleasesKeyRefetchEndsWithinTheReleaseTimeout(t *testing.T) {
	url := badServer(t)
	badCalls(t, url, "rotated_release", true)
	client := newClient(t, url+"/rotated_release", badKey, seatlease.Options{PinnedKeys: badPinned(t), TenantID: "acme",
		ReleaseTimeout: 1500 * time.Millisecond, Timeout: 10 * time.Second, JWKSMinRefetch: -1})
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1"})
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	err = lease.Close()
	if took := time.Since(started); err == nil || took > 1700*time.Millisecond {
		t.Fatalf("Close after %v: %v", took, err)
	}
	if counted := badCalls(t, url, "rotated_release", false); counted["keys"] != 2 || counted["release"] != 1 {
		t.Fatalf("calls %v: the JWKS fetched again for the release's kid", counted)
	}
}

// A pinned key of small order (here the identity) verifies what it never signed: New
// refuses it.
func TestNewRefusesAPinnedKeyOfSmallOrder(t *testing.T) {
	for _, key := range []any{"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		"7P_______________________________________38", "xxdqcD1N2E-6PAt2DRBnDyogU_osOczGTsf9d5KsA3o",
		map[string]any{"kty": "OKP", "crv": "Ed25519", "x": "AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAIA"}} {
		client, err := seatlease.New("http://127.0.0.1:1", "sl_key", seatlease.Options{PinnedKeys: []any{key}})
		if client != nil || err == nil || !strings.Contains(err.Error(), "small order") {
			t.Fatalf("%v: %v, %v", key, client, err)
		}
	}
}
