package seatlease_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

// The token test vectors every client must agree on (../testdata/vectors.json, written
// from the server's signing code): each case gives this client's verifier its expected
// outcome, "ok" or the error code.
type vectorFile struct {
	Format   string          `json:"format"`
	JWKS     json.RawMessage `json:"jwks"`
	Pinned   []string        `json:"pinned"`
	TenantID string          `json:"tenant_id"`
	Leeway   float64         `json:"leeway"`
	Machines []struct {
		MachineID   string `json:"machine_id"`
		Fingerprint string `json:"fingerprint"`
	} `json:"machines"`
	Cases []json.RawMessage `json:"cases"`
}

type vectorCase struct {
	Name     string          `json:"name"`
	Function string          `json:"function"`
	Status   int             `json:"status"`
	Request  map[string]any  `json:"request"`
	Answer   map[string]any  `json:"answer"`
	Expect   string          `json:"expect"`
	JWKS     json.RawMessage `json:"jwks"`
	Pinned   *bool           `json:"pinned"`
	Leeway   *float64        `json:"leeway"`
	TenantID *string         `json:"tenant_id"`
	// MachineID: the machine the client runs on (a borrowed token must name it).
	MachineID *string `json:"machine_id"`
	// SeatsClaim: the lease's weight read from the verified token (0: absent, meaning 1).
	SeatsClaim int `json:"seats_claim"`
	// HasTenantID: the case sets tenant_id (null: any tenant).
	HasTenantID bool `json:"-"`
}

func loadVectors(t *testing.T) vectorFile {
	t.Helper()
	raw, err := os.ReadFile("../testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var vectors vectorFile
	if err := json.Unmarshal(raw, &vectors); err != nil {
		t.Fatal(err)
	}
	if vectors.Format != "seatlease-client-vectors/1" || len(vectors.Cases) < 30 {
		t.Fatalf("unexpected vectors file: %s, %d cases", vectors.Format, len(vectors.Cases))
	}
	return vectors
}

func verifierFor(t *testing.T, vectors vectorFile, c vectorCase, now func() time.Time) *seatlease.TokenVerifier {
	t.Helper()
	jwks := vectors.JWKS
	if c.JWKS != nil {
		jwks = c.JWKS
	}
	options := seatlease.VerifierOptions{TenantID: vectors.TenantID, Leeway: time.Duration(vectors.Leeway) * time.Second, Now: now}
	if c.Pinned == nil || *c.Pinned {
		for _, x := range vectors.Pinned {
			options.PinnedKeys = append(options.PinnedKeys, x)
		}
	}
	if c.Leeway != nil {
		options.Leeway = time.Duration(*c.Leeway) * time.Second
	}
	if c.MachineID != nil {
		options.MachineFingerprint = seatlease.Fingerprint(*c.MachineID)
	}
	if c.HasTenantID {
		options.TenantID = "" // null: any tenant
		if c.TenantID != nil {
			options.TenantID = *c.TenantID
		}
	}
	verifier, err := seatlease.NewTokenVerifier(func(context.Context) ([]byte, error) { return jwks, nil }, options)
	if err != nil {
		t.Fatal(err)
	}
	return verifier
}

func TestEveryMachineFingerprint(t *testing.T) {
	vectors := loadVectors(t)
	if len(vectors.Machines) < 4 {
		t.Fatalf("want machine examples, got %d", len(vectors.Machines))
	}
	for _, m := range vectors.Machines {
		if got := seatlease.Fingerprint(m.MachineID); got != m.Fingerprint {
			t.Errorf("Fingerprint(%q) = %s, want %s", m.MachineID, got, m.Fingerprint)
		}
	}
}

func TestEveryVector(t *testing.T) {
	vectors := loadVectors(t)
	for _, raw := range vectors.Cases {
		var c vectorCase
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(raw, &fields)
		_, c.HasTenantID = fields["tenant_id"]
		t.Run(c.Name, func(t *testing.T) {
			claims, err := verifierFor(t, vectors, c, nil).Check(context.Background(), c.Function, c.Request, c.Answer, c.Status)
			if c.Expect == "ok" {
				if err != nil {
					t.Fatalf("want ok, got %v", err)
				}
				want := c.Answer["session_id"]
				if want == nil {
					want = c.Request["session_id"]
				}
				if claims["sid"] != want {
					t.Fatalf("sid %v, want %v", claims["sid"], want)
				}
				wantSeats := 1 // the lease's weight the token signs, 1 when absent
				if c.SeatsClaim != 0 {
					wantSeats = c.SeatsClaim
				}
				if got := seatlease.ClaimedSeats(claims); got != wantSeats {
					t.Fatalf("ClaimedSeats %d, want %d", got, wantSeats)
				}
				return
			}
			var refused *seatlease.SeatError
			if !errors.As(err, &refused) || !errors.Is(err, seatlease.ErrToken) {
				t.Fatalf("want a token error %s, got %v", c.Expect, err)
			}
			if refused.Code != c.Expect || refused.Status != c.Status {
				t.Fatalf("want %s (%d), got %s (%d): %v", c.Expect, c.Status, refused.Code, refused.Status, err)
			}
		})
	}
}

func TestLeewayByTheVerifiersClock(t *testing.T) {
	vectors := loadVectors(t)
	var good vectorCase
	_ = json.Unmarshal(vectors.Cases[0], &good)
	const exp, iat = 4102444800, 1767225600
	at := func(seconds int64) error {
		clock := func() time.Time { return time.Unix(seconds, 0) }
		_, err := verifierFor(t, vectors, good, clock).Check(context.Background(), "acquire", good.Request, good.Answer, 201)
		return err
	}
	if err := at(exp + 59); err != nil {
		t.Fatal("within the leeway after exp:", err)
	}
	if err := at(exp + 60); !errors.Is(err, seatlease.ErrTokenExpired) {
		t.Fatal("beyond the leeway after exp:", err)
	}
	if err := at(iat - 59); err != nil {
		t.Fatal("within the leeway before iat:", err)
	}
	if err := at(iat - 61); !errors.Is(err, seatlease.ErrTokenExpired) {
		t.Fatal("beyond the leeway before iat:", err)
	}
}

func TestPinnedKeyForms(t *testing.T) {
	const x = "4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk"
	const pem = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA4P6zMz3qNlp82HWLnCvYcqHJfiULC1etRbo2YHystqk=\n-----END PUBLIC KEY-----\n"
	fromX, err1 := seatlease.PinnedKeyRaw(x)
	fromJWK, err2 := seatlease.PinnedKeyRaw(map[string]any{"kty": "OKP", "crv": "Ed25519", "x": x})
	fromPEM, err3 := seatlease.PinnedKeyRaw(pem)
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if !fromX.Equal(fromJWK) || !fromX.Equal(fromPEM) {
		t.Fatal("the three forms differ")
	}
	if _, err := seatlease.PinnedKeyRaw(map[string]any{"kty": "RSA"}); err == nil {
		t.Fatal("an RSA JWK was accepted")
	}
}
