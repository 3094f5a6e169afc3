package seatlease

import (
	"testing"
	"time"
)

// testKeyX: an Ed25519 public key's "x" (RFC 8032's first test key), pinned where the
// key itself does not matter.
const testKeyX = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"

// TokenLeeway follows VerifierOptions.Leeway: zero is the default minute, a negative one
// allows no clock difference at all, any other is taken as given.
func TestTokenLeewayZeroNegativeAndGiven(t *testing.T) {
	cases := []struct {
		leeway time.Duration
		want   float64
	}{{0, 60}, {-1, 0}, {-time.Hour, 0}, {5 * time.Second, 5}}
	for _, c := range cases {
		client, err := New("http://127.0.0.1:1", "sl_key", Options{PinnedKeys: []any{testKeyX}, TokenLeeway: c.leeway})
		if err != nil {
			t.Fatal(err)
		}
		if client.verifier.leeway != c.want {
			t.Errorf("TokenLeeway %v: verifier leeway %v s, want %v s", c.leeway, client.verifier.leeway, c.want)
		}
	}
}
