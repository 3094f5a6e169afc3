package seatlease_test

// The idle rule's client side (issue 50), on a recording server of its own: heartbeats
// carry idle_seconds only once the product touched the lease and busy: true while a busy
// scope is open; an answer's idle_reclaim_at calls OnIdleWarning once per warning, and a
// Touch after it heartbeats at once; a 410 reason "idle" loses the seat as "idle", asked for
// again only once the product is in use.

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

const reclaimAt = "2100-01-01T00:00:30.000Z"

func idleSeconds(body map[string]any) (int, bool) {
	value, ok := body["idle_seconds"].(float64)
	return int(value), ok
}

func TestHeartbeatsCarryIdleSecondsOnlyAfterATouchAndBusyWhileAScopeIsOpen(t *testing.T) {
	client, r := recording(t, echoWeight)
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	eventually(t, 5*time.Second, "two heartbeats", func() bool { return len(r.sent("heartbeat")) >= 2 })
	for _, body := range r.sent("heartbeat") {
		if _, sent := body["idle_seconds"]; sent {
			t.Fatalf("idle_seconds before any Touch: %v", body)
		}
		if _, sent := body["busy"]; sent {
			t.Fatalf("busy outside a busy scope: %v", body)
		}
	}
	lease.Touch()
	before := len(r.sent("heartbeat"))
	// whole seconds since the touch: 0 at first, 1 once a second has passed
	eventually(t, 5*time.Second, "a heartbeat idle a second", func() bool {
		beats := r.sent("heartbeat")
		last, ok := idleSeconds(beats[len(beats)-1])
		return len(beats) > before && ok && last >= 1
	})
	for _, body := range r.sent("heartbeat")[before:] {
		if idle, ok := idleSeconds(body); !ok || idle < 0 || idle > 5 {
			t.Fatalf("after a Touch: %v", body)
		}
	}
	lease.Busy(func() {
		lease.BeginBusy() // nested: still busy after the inner scope ends
		lease.EndBusy()
		opened := len(r.sent("heartbeat"))
		eventually(t, 5*time.Second, "a busy heartbeat", func() bool { return len(r.sent("heartbeat")) > opened })
		if beats := r.sent("heartbeat"); beats[len(beats)-1]["busy"] != true {
			t.Fatalf("in a busy scope: %v", beats[len(beats)-1])
		}
	})
	closed := len(r.sent("heartbeat"))
	eventually(t, 5*time.Second, "a heartbeat after the scope", func() bool { return len(r.sent("heartbeat")) > closed+1 })
	if beats := r.sent("heartbeat"); beats[len(beats)-1]["busy"] != nil {
		t.Fatalf("busy after the scope closed: %v", beats[len(beats)-1])
	}
}

func TestAnIdleWarningIsCalledOnceAndATouchCancelsItAtOnce(t *testing.T) {
	// a heartbeat idle a second or more is warned (a slow beat, every 2.25..3 s, so that the
	// one a Touch sends is told apart from the next due)
	slow := map[string]any{"lease_seconds": 30, "heartbeat_interval_seconds": 3}
	client, r := recording(t, func(fn string, body map[string]any) (int, any) {
		switch fn {
		case "acquire":
			return 201, grantWith(slow)
		case "heartbeat":
			if idle, _ := idleSeconds(body); idle >= 1 {
				return 200, grantWith(map[string]any{"lease_seconds": 30, "heartbeat_interval_seconds": 3, "idle_reclaim_at": reclaimAt})
			}
			return 200, grantWith(slow)
		}
		return 200, map[string]any{"released": true, "seats_used": 0}
	})
	var mu sync.Mutex
	var warnings []time.Time
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1",
		OnIdleWarning: func(_ *seatlease.Lease, at time.Time) { mu.Lock(); warnings = append(warnings, at); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	warned := func() int { mu.Lock(); defer mu.Unlock(); return len(warnings) }
	lease.Touch()
	eventually(t, 10*time.Second, "two warned heartbeats", func() bool { return len(r.sent("heartbeat")) >= 2 })
	want, _ := time.Parse(time.RFC3339, "2100-01-01T00:00:30Z")
	mu.Lock()
	if len(warnings) != 1 || !warnings[0].Equal(want) {
		t.Fatalf("warnings %v after two warned heartbeats: once per warning", warnings)
	}
	mu.Unlock()
	if at := lease.State().IdleReclaimAt; !at.Equal(want) {
		t.Fatalf("state's IdleReclaimAt %v", at)
	}
	before := len(r.sent("heartbeat"))
	touched := time.Now()
	lease.Touch()
	eventually(t, 2*time.Second, "the heartbeat a Touch sends at once", func() bool { return len(r.sent("heartbeat")) > before })
	if took := time.Since(touched); took > 1500*time.Millisecond {
		t.Fatalf("the heartbeat after the Touch went %v later: not at once", took)
	}
	if idle, ok := idleSeconds(r.sent("heartbeat")[before]); !ok || idle != 0 {
		t.Fatalf("after the Touch: %v", r.sent("heartbeat")[before])
	}
	eventually(t, time.Second, "the warning cleared", func() bool { return lease.State().IdleReclaimAt.IsZero() })
	// idle again: a new warning, called again
	eventually(t, 10*time.Second, "a second warning", func() bool { return warned() == 2 })
}

var sessionIdle = map[string]any{"error": map[string]any{
	"code": "session_expired", "message": "The session was reclaimed for idleness; acquire a seat again.",
	"reason": "idle",
}}

func TestA410IdleIsLostAsIdleAndAskedForAgainOnlyOnceInUse(t *testing.T) {
	var mu sync.Mutex
	sessions := 0
	client, r := recording(t, func(fn string, body map[string]any) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case fn == "acquire":
			sessions++
			return 201, grantWith(map[string]any{"session_id": "session-" + strconv.Itoa(sessions)})
		case fn == "heartbeat" && body["session_id"] == "session-1":
			return 410, sessionIdle
		case fn == "heartbeat":
			return 200, grantWith(map[string]any{"session_id": body["session_id"]})
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
	lease.Touch()
	eventually(t, 5*time.Second, "the seat lost", func() bool { return lease.State().Lost })
	if reasons := lost.get(); len(reasons) != 1 || reasons[0] != "idle" || lease.State().LostReason != "idle" {
		t.Fatalf("lost %v, state %+v", reasons, lease.State())
	}
	time.Sleep(1500 * time.Millisecond) // several heartbeat intervals: nobody uses the product
	if acquires := len(r.sent("acquire")); acquires != 1 {
		t.Fatalf("%d acquires while idle: a seat reclaimed for idleness was taken back", acquires)
	}
	lease.Touch()
	select {
	case <-regained:
	case <-time.After(2 * time.Second):
		t.Fatal("the seat was not asked for again after a Touch")
	}
	if state := lease.State(); state.Lost || state.SessionID != "session-2" {
		t.Fatalf("state %+v", state)
	}
}

func TestTouchesOnEveryKeyWhileWarnedSendAHeartbeatASecondAtMost(t *testing.T) {
	// a server that warns every heartbeat: a product touching every 50 ms must not send a
	// heartbeat a touch (one per answer, and only for a touch a whole second newer)
	client, r := recording(t, func(fn string, body map[string]any) (int, any) {
		switch fn {
		case "acquire":
			return 201, grantWith(map[string]any{"lease_seconds": 30, "heartbeat_interval_seconds": 3})
		case "heartbeat":
			return 200, grantWith(map[string]any{"lease_seconds": 30, "heartbeat_interval_seconds": 3, "idle_reclaim_at": reclaimAt})
		}
		return 200, map[string]any{"released": true, "seats_used": 0}
	})
	lease, err := client.Lease(context.Background(), "lic", seatlease.LeaseOptions{ClientID: "pc-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Close()
	lease.TouchAgo(5 * time.Second) // the system's idle time: 5 s
	eventually(t, 5*time.Second, "the first (warned) heartbeat", func() bool { return !lease.State().IdleReclaimAt.IsZero() })
	if idle, _ := idleSeconds(r.sent("heartbeat")[0]); idle < 5 || idle > 9 {
		t.Fatalf("touched 5 s before the lease began, the first heartbeat said idle %d s", idle)
	}
	before := len(r.sent("heartbeat"))
	for i := 0; i < 30; i++ { // 1.5 s of key presses
		lease.Touch()
		time.Sleep(50 * time.Millisecond)
	}
	if sent := len(r.sent("heartbeat")) - before; sent < 1 || sent > 3 {
		t.Fatalf("%d heartbeats for 30 touches in 1.5 s while warned", sent)
	}
}
