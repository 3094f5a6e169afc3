package seatlease

import (
	"testing"
	"time"
)

// A server's Retry-After never makes a pause longer than MaxBackoff (a 503 with
// Retry-After: 3600 left the old client asleep for an hour), an absurd one neither; a
// shorter hint is still honoured.
func TestRetryAfterNeverExceedsMaxBackoff(t *testing.T) {
	client, err := New("http://127.0.0.1:1", "sl_key", Options{InsecureSkipVerify: true, Backoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 0; attempt < 8; attempt++ {
		for _, hint := range []float64{3600, 1e300} {
			if delay := client.backoffDelay(attempt, hint, 30*time.Second); delay != time.Second {
				t.Fatalf("attempt %d, Retry-After %v: %v", attempt, hint, delay)
			}
		}
		if delay := client.backoffDelay(attempt, -1, 30*time.Second); delay > time.Second {
			t.Fatalf("attempt %d without a hint: %v", attempt, delay)
		}
	}
	if delay := client.backoffDelay(0, 0.5, 30*time.Second); delay < 500*time.Millisecond {
		t.Fatalf("a hint of 0.5 s: %v", delay)
	}
}
