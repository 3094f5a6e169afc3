package seatlease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// BorrowedFormat is the format of a saved borrowed seat, the same file in every client.
const BorrowedFormat = "seatlease-borrowed-seat/1"

// BorrowedSeat is a borrowed seat whose token verified: no heartbeats are needed (or
// sent) until ExpiresAt; ReturnEarly gives it back before.
type BorrowedSeat struct {
	Path          string
	LicenseID     string
	ClientID      string
	SessionID     string
	BorrowSeconds int
	ExpiresAt     time.Time // when the borrow ends by itself (the token's deadline)
	Token         string
	Claims        map[string]any // the verified token's claims (exp, aud, sub, borrowed, ...)
	Seats         int            // the seat's weight as the token signs it (1 when absent)
	client        *Client
}

// SecondsLeft until the borrow ends (by this machine's clock), 0 once it has.
func (b *BorrowedSeat) SecondsLeft() float64 {
	if left := time.Until(b.ExpiresAt).Seconds(); left > 0 {
		return left
	}
	return 0
}

// Expired tells whether the borrow has ended.
func (b *BorrowedSeat) Expired() bool { return b.SecondsLeft() <= 0 }

// ReturnEarly releases the seat now (POST /release, retried) and deletes the saved file.
func (b *BorrowedSeat) ReturnEarly(ctx context.Context) (*Answer, error) {
	answer, err := b.client.Release(ctx, b.LicenseID, b.SessionID)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(b.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return answer, err
	}
	return answer, nil
}

type borrowedFile struct {
	Format  string          `json:"format"`
	BaseURL string          `json:"base_url"`
	Request map[string]any  `json:"request"`
	Answer  map[string]any  `json:"answer"`
	JWKS    json.RawMessage `json:"jwks"`
}

// save writes the file atomically (the old file or the new one, never half of one),
// readable by this user only.
func save(path string, document borrowedFile) error {
	encoded, err := json.MarshalIndent(document, "", " ")
	if err != nil {
		return err
	}
	suffix := make([]byte, 6)
	if _, err := rand.Read(suffix); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), ".borrowed-"+filepath.Base(path)+"-"+hex.EncodeToString(suffix))
	file, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = file.Write(encoded)
	if err == nil {
		err = file.Sync()
	}
	if closeErr := file.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// BorrowOptions: who borrows and what for, as an acquire says it (AcquireOptions): User
// and Host (a license whose policy has a per-user limit, reserved seats or a deny list
// requires User), the Entitlements and Version the product needs, Seats (the seat's
// weight). Zero values: not sent.
type BorrowOptions struct {
	User, Host   string
	Entitlements []string
	Version      string
	Seats        int
}

// Borrow takes a seat for seconds (no heartbeats until it ends; at most the license's
// max_borrow_seconds), saves it with its signed token to path and returns it verified.
// Acquiring with the same clientID while it lasts returns it unchanged. options (at most
// one): the identity and needs sent as with an acquire (BorrowOptions). Pin the vendor's
// keys (Options.PinnedKeys): without them the saved JWKS is the only anchor. A borrow
// whose token does not verify is no seat: its session is released at once.
func (c *Client) Borrow(ctx context.Context, licenseID, clientID string, seconds int, path string, metadata map[string]any, options ...BorrowOptions) (*BorrowedSeat, error) {
	if len(options) > 1 {
		return nil, errors.New("seatlease: Borrow takes at most one BorrowOptions")
	}
	var given BorrowOptions
	if len(options) == 1 {
		given = options[0]
	}
	machine, err := thisMachine(c.opts.MachineID)
	if err != nil {
		return nil, err
	}
	// fingerprint: the seat is bound to this machine; a copy of the file verifies nowhere else
	request := acquireBody(licenseID, clientID, AcquireOptions{
		Metadata: metadata, User: given.User, Host: given.Host, Entitlements: given.Entitlements,
		Version: given.Version, Seats: given.Seats, Fingerprint: machine,
	})
	request["borrow_seconds"] = seconds
	request["nonce"] = NewNonce()
	answer, err := c.call(ctx, "acquire", request, callPlan{retries: -1})
	if err != nil {
		return nil, err
	}
	jwks, err := c.fetchJWKS(ctx)
	if err != nil {
		return nil, err
	}
	document := borrowedFile{Format: BorrowedFormat, BaseURL: c.baseURL, Request: request, Answer: answer, JWKS: jwks}
	if err := save(path, document); err != nil {
		return nil, err
	}
	seat, err := c.LoadBorrowed(ctx, path)
	if err != nil {
		os.Remove(path) // a seat that does not verify is no seat: nothing saved for later
		if errors.Is(err, ErrToken) {
			c.releaseRefused("acquire", request, answer)
		}
		return nil, err
	}
	return seat, nil
}

// LoadBorrowed returns the borrowed seat saved at path, its token verified offline (no
// request is sent): signature (the saved JWKS within the pinned keys), audience,
// session, client, nonce, exp (ErrTokenExpired once the borrow has ended, beyond the
// leeway), the borrowed claim and the machine (ErrTokenWrongMachine when cnf.machine is
// not this machine's fingerprint). Any failure is a token error.
func (c *Client) LoadBorrowed(ctx context.Context, path string) (*BorrowedSeat, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var document borrowedFile
	if json.Unmarshal(raw, &document) != nil || document.Format != BorrowedFormat || document.Request == nil || document.Answer == nil {
		return nil, tokenError(0, "token_malformed", path+" is not a saved borrowed seat.")
	}
	machine, err := thisMachine(c.opts.MachineID)
	if err != nil {
		return nil, err
	}
	verifier, err := NewTokenVerifier(func(context.Context) ([]byte, error) { return document.JWKS, nil }, VerifierOptions{
		PinnedKeys: c.opts.PinnedKeys, TenantID: c.opts.TenantID, Leeway: c.opts.TokenLeeway,
		MachineFingerprint: machine,
	})
	if err != nil {
		return nil, err
	}
	claims, err := verifier.Check(ctx, "acquire", document.Request, document.Answer, 0)
	if err != nil {
		return nil, err
	}
	if claims["borrowed"] != true || document.Answer["borrowed"] != true {
		return nil, tokenError(0, "token_mismatch", "The saved seat is not a borrowed one.")
	}
	answer := answerOf(document.Answer)
	return &BorrowedSeat{
		Path: path, LicenseID: answer.LicenseID, ClientID: answer.ClientID, SessionID: answer.SessionID,
		BorrowSeconds: answer.LeaseSeconds, ExpiresAt: answer.LeaseExpiresAt, Token: answer.Token,
		Claims: claims, Seats: ClaimedSeats(claims), client: c,
	}, nil
}
