package seatlease_test

// The license's idle rule end to end (issue 50), against the served functions
// (tests/client_harness.py): a lease whose product was idle past the timeout is warned,
// reclaimed (always: at the warning's time; when_needed: only for another client's acquire),
// lost as "idle", and asked for again only once the product is in use; a busy one never is.

import (
	"context"
	"sync"
	"testing"
	"time"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

type idleBook struct {
	mu       sync.Mutex
	warnings []time.Time
	lost     []string
	regained int
}

func (b *idleBook) options(clientID string) seatlease.LeaseOptions {
	return seatlease.LeaseOptions{ClientID: clientID,
		OnIdleWarning: func(_ *seatlease.Lease, at time.Time) {
			b.mu.Lock()
			b.warnings = append(b.warnings, at)
			b.mu.Unlock()
		},
		OnLost:     func(_ *seatlease.Lease, reason string) { b.mu.Lock(); b.lost = append(b.lost, reason); b.mu.Unlock() },
		OnRegained: func(*seatlease.Lease) { b.mu.Lock(); b.regained++; b.mu.Unlock() },
	}
}

func (b *idleBook) counts() (warnings int, lost []string, regained int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.warnings), append([]string(nil), b.lost...), b.regained
}

func TestAnIdleLeaseIsWarnedReclaimedLostAsIdleAndTakenAgainOnATouch(t *testing.T) {
	s := stack(t)
	s.license("go-idle-always", map[string]any{"seats": 1, "lease_seconds": 3,
		"idle_timeout_seconds": 60, "idle_reclaim": "always"})
	client := s.client(seatlease.Options{Verify: true, TenantID: "acme", Backoff: 50 * time.Millisecond})
	var book idleBook
	lease, err := client.Lease(context.Background(), "go-idle-always", book.options("ws-idle"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	lease.TouchAgo(2 * time.Minute) // idle past the 60 s timeout
	eventually(t, 10*time.Second, "the idle warning", func() bool { w, _, _ := book.counts(); return w == 1 })
	eventually(t, 10*time.Second, "the seat lost as idle", func() bool { _, lost, _ := book.counts(); return len(lost) == 1 })
	if _, lost, _ := book.counts(); lost[0] != "idle" || lease.State().LostReason != "idle" {
		t.Fatalf("lost %v, state %+v", lost, lease.State())
	}
	if live := s.live("go-idle-always"); len(live) != 0 {
		t.Fatalf("the reclaimed seat is still held: %v", live)
	}
	// the seat is another client's now; the idle one does not take it back while idle
	other, err := client.Acquire(context.Background(), "go-idle-always", "ws-other", seatlease.AcquireOptions{})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if _, _, regained := book.counts(); regained != 0 || !lease.State().Lost {
		t.Fatalf("regained %d while idle", regained)
	}
	if _, err := client.Release(context.Background(), "go-idle-always", other.SessionID); err != nil {
		t.Fatal(err)
	}
	lease.Touch() // back at the keyboard
	eventually(t, 10*time.Second, "the seat taken again", func() bool { _, _, r := book.counts(); return r == 1 })
	if live := s.live("go-idle-always"); len(live) != 1 || live[0].ClientID != "ws-idle" {
		t.Fatalf("live %v", live)
	}
}

func TestWhenNeededAnIdleLeaseKeepsItsSeatUntilAnotherClientAsks(t *testing.T) {
	s := stack(t)
	s.license("go-idle-needed", map[string]any{"seats": 1, "lease_seconds": 3,
		"idle_timeout_seconds": 60, "idle_reclaim": "when_needed"})
	client := s.client(seatlease.Options{Verify: true, TenantID: "acme", Backoff: 50 * time.Millisecond})
	var book idleBook
	lease, err := client.Lease(context.Background(), "go-idle-needed", book.options("ws-idle"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	lease.TouchAgo(2 * time.Minute)
	eventually(t, 10*time.Second, "the idle warning", func() bool { w, _, _ := book.counts(); return w == 1 })
	time.Sleep(3 * time.Second) // past the warning's time: nobody waits, the seat is kept
	if _, lost, _ := book.counts(); len(lost) != 0 || lease.State().Lost {
		t.Fatalf("lost %v with nobody waiting", lost)
	}
	// another client asks: the idle seat is reclaimed for it
	other, err := client.Acquire(context.Background(), "go-idle-needed", "ws-other", seatlease.AcquireOptions{})
	if err != nil {
		t.Fatal("the waiting client did not get the idle seat:", err)
	}
	defer func() { _, _ = client.Release(context.Background(), "go-idle-needed", other.SessionID) }()
	eventually(t, 10*time.Second, "the seat lost as idle", func() bool { _, lost, _ := book.counts(); return len(lost) == 1 })
	if _, lost, _ := book.counts(); lost[0] != "idle" {
		t.Fatalf("lost %v", lost)
	}
}

func TestABusyLeaseIsNeverWarned(t *testing.T) {
	s := stack(t)
	s.license("go-idle-busy", map[string]any{"seats": 1, "lease_seconds": 3,
		"idle_timeout_seconds": 60, "idle_reclaim": "always"})
	client := s.client(seatlease.Options{Verify: true, TenantID: "acme", Backoff: 50 * time.Millisecond})
	var book idleBook
	lease, err := client.Lease(context.Background(), "go-idle-busy", book.options("ws-busy"))
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	lease.Busy(func() {
		lease.TouchAgo(2 * time.Minute) // idle, but rendering
		time.Sleep(5 * time.Second)     // several heartbeats
	})
	if w, lost, _ := book.counts(); w != 0 || len(lost) != 0 || !lease.State().IdleReclaimAt.IsZero() {
		t.Fatalf("busy, yet warned %d times, lost %v", w, lost)
	}
}
