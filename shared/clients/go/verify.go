package seatlease

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The header typ of each kind of token: one kind never passes for the other.
const (
	LeaseTyp   = "seatlease-lease+jwt"
	ReleaseTyp = "seatlease-release+jwt"
)

var tokenField = map[string]string{"acquire": "lease_token", "heartbeat": "lease_token", "release": "release_token"}
var tokenTyp = map[string]string{"acquire": LeaseTyp, "heartbeat": LeaseTyp, "release": ReleaseTyp}
var requiredClaims = []string{"iss", "aud", "sid", "iat", "nbf", "exp"}

// NewNonce returns a fresh nonce for one request (18 random bytes, base64url).
func NewNonce() string {
	raw := make([]byte, 18)
	if _, err := rand.Read(raw); err != nil {
		panic(err) // the system's randomness failed: nothing can be signed or checked safely
	}
	return base64.RawURLEncoding.EncodeToString(raw)
}

func b64urlDecode(text string) ([]byte, error) {
	return base64.RawURLEncoding.Strict().DecodeString(text)
}

// rawFromJWK: an Ed25519 JWK's public key, nil for any other kind of key (ignored).
func rawFromJWK(jwk map[string]any) ed25519.PublicKey {
	if jwk["kty"] != "OKP" || jwk["crv"] != "Ed25519" {
		return nil
	}
	x, ok := jwk["x"].(string)
	if !ok {
		return nil
	}
	raw, err := b64urlDecode(x)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil
	}
	return ed25519.PublicKey(raw)
}

// PinnedKeyRaw turns a pinned key into its 32 raw bytes: a JWK (map), a PEM public key,
// or the JWK's "x" (base64url). An error when it is not an Ed25519 public key.
func PinnedKeyRaw(key any) (ed25519.PublicKey, error) {
	switch value := key.(type) {
	case map[string]any:
		if raw := rawFromJWK(value); raw != nil {
			return raw, nil
		}
		return nil, errors.New("seatlease: a pinned JWK must be an Ed25519 key (kty OKP, crv Ed25519)")
	case ed25519.PublicKey:
		if len(value) == ed25519.PublicKeySize {
			return value, nil
		}
	case string:
		if strings.Contains(value, "-----BEGIN") {
			block, _ := pem.Decode([]byte(value))
			if block != nil {
				if parsed, err := x509.ParsePKIXPublicKey(block.Bytes); err == nil {
					if public, ok := parsed.(ed25519.PublicKey); ok {
						return public, nil
					}
				}
			}
			return nil, errors.New("seatlease: a pinned PEM key must be an Ed25519 public key")
		}
		raw, err := b64urlDecode(strings.TrimSpace(value))
		if err == nil && len(raw) == ed25519.PublicKeySize {
			return ed25519.PublicKey(raw), nil
		}
	}
	return nil, fmt.Errorf("seatlease: a pinned key must be an Ed25519 JWK, PEM or 32-byte base64url, not %T", key)
}

// smallOrder: the encodings of Ed25519's points of small order (libsodium's ed25519 ref10
// has_small_order list), the top bit of the last byte masked off. A key among them
// verifies signatures it never made: never pinned.
var smallOrder = func() [][]byte {
	hexes := []string{
		"0100000000000000000000000000000000000000000000000000000000000000",
		"0000000000000000000000000000000000000000000000000000000000000000",
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
	}
	out := make([][]byte, len(hexes))
	for i, h := range hexes {
		out[i], _ = hex.DecodeString(h)
	}
	return out
}()

func hasSmallOrder(raw []byte) bool {
	if len(raw) != 32 {
		return false
	}
	masked := append([]byte(nil), raw...)
	masked[31] &= 0x7f
	for _, encoding := range smallOrder {
		if bytes.Equal(masked, encoding) {
			return true
		}
	}
	return false
}

// VerifierOptions configure a TokenVerifier (zero values: the defaults).
type VerifierOptions struct {
	// PinnedKeys: the vendor's public keys (see PinnedKeyRaw); when given, only tokens
	// signed by one of them pass.
	PinnedKeys []any
	// TenantID: the tenant expected in aud (empty: any tenant with the right license).
	TenantID string
	// Leeway: clock difference allowed on exp, nbf and iat (default a minute; negative: none).
	Leeway time.Duration
	// JWKSTTL: how long a fetched JWKS is trusted (default 5 minutes).
	JWKSTTL time.Duration
	// MinRefetch: least time between two fetches prompted by an unknown kid (default 10 s;
	// negative: none).
	MinRefetch time.Duration
	// Now: the clock (default time.Now).
	Now func() time.Time
	// MachineFingerprint: this machine's (Fingerprint), for a saved borrowed seat: a
	// borrowed token must name it in cnf.machine (ErrTokenWrongMachine otherwise).
	MachineFingerprint string
}

// TokenVerifier checks the token of each answer: an EdDSA JWT of the expected typ,
// signed by a key of the deployment's JWKS (fetched once and cached, fetched again after
// JWKSTTL or on an unknown kid, at most once per MinRefetch) that is one of the pinned
// keys when any are pinned, for this aud (<tenant>/<license>), session and client,
// within exp/nbf/iat give or take the leeway, carrying this request's nonce, and agreeing
// with the answer's fields. Anything else is a token error (ErrToken and its kind),
// checked in the same order as the Python and Node clients, so that every client gives
// each test vector (shared/clients/testdata/vectors.json) the same outcome. Safe for
// concurrent use.
type TokenVerifier struct {
	fetch      func(ctx context.Context) ([]byte, error)
	pinned     map[string]bool
	tenantID   string
	leeway     float64
	ttl        time.Duration
	minRefetch time.Duration
	now        func() time.Time
	machine    string

	mu        sync.Mutex
	keys      map[string]ed25519.PublicKey
	fetchedAt time.Time // zero: never
}

// NewTokenVerifier: fetch returns the JWKS document's bytes.
func NewTokenVerifier(fetch func(ctx context.Context) ([]byte, error), options VerifierOptions) (*TokenVerifier, error) {
	v := &TokenVerifier{fetch: fetch, pinned: map[string]bool{}, tenantID: options.TenantID,
		leeway: 60, ttl: 5 * time.Minute, minRefetch: 10 * time.Second, now: time.Now}
	for _, key := range options.PinnedKeys {
		raw, err := PinnedKeyRaw(key)
		if err != nil {
			return nil, err
		}
		if hasSmallOrder(raw) {
			return nil, fmt.Errorf("seatlease: pinned key %s is a point of small order, no vendor's key: pin the JWKS's \"x\" (a configuration error)", base64.RawURLEncoding.EncodeToString(raw))
		}
		v.pinned[string(raw)] = true
	}
	if options.Leeway > 0 {
		v.leeway = options.Leeway.Seconds()
	} else if options.Leeway < 0 {
		v.leeway = 0
	}
	if options.JWKSTTL > 0 {
		v.ttl = options.JWKSTTL
	}
	if options.MinRefetch > 0 {
		v.minRefetch = options.MinRefetch
	} else if options.MinRefetch < 0 {
		v.minRefetch = 0
	}
	if options.Now != nil {
		v.now = options.Now
	}
	v.machine = options.MachineFingerprint
	return v, nil
}

func (v *TokenVerifier) refresh(ctx context.Context) error {
	raw, err := v.fetch(ctx)
	if err != nil {
		return err
	}
	var document struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(raw, &document); err != nil || document.Keys == nil {
		return tokenError(0, "token_unknown_kid", "The JWKS is not a JSON key set.")
	}
	keys := map[string]ed25519.PublicKey{}
	for _, jwk := range document.Keys {
		kid, ok := jwk["kid"].(string)
		if public := rawFromJWK(jwk); public != nil && ok {
			keys[kid] = public
		}
	}
	v.keys, v.fetchedAt = keys, time.Now()
	return nil
}

func (v *TokenVerifier) keyFor(ctx context.Context, kid string, status int) (ed25519.PublicKey, error) {
	v.mu.Lock()
	var err error
	if v.fetchedAt.IsZero() || time.Since(v.fetchedAt) > v.ttl {
		err = v.refresh(ctx)
	} else if _, known := v.keys[kid]; !known && time.Since(v.fetchedAt) > v.minRefetch {
		err = v.refresh(ctx) // a key published since: rotation
	}
	key := v.keys[kid]
	v.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if key == nil {
		return nil, tokenError(status, "token_unknown_kid", fmt.Sprintf("No key %q in the deployment's JWKS.", kid))
	}
	if len(v.pinned) > 0 && !v.pinned[string(key)] {
		return nil, tokenError(status, "token_untrusted_key", fmt.Sprintf("Key %q is not one of the pinned keys.", kid))
	}
	return key, nil
}

func decodeObject(raw []byte) (map[string]any, bool) {
	var value map[string]any
	decoder := json.NewDecoder(bytes.NewReader(raw))
	if err := decoder.Decode(&value); err != nil || value == nil || decoder.More() {
		return nil, false
	}
	return value, true
}

// Check returns the verified claims of reply's token, else a token error. fn is
// "acquire", "heartbeat" or "release"; request is the body as sent (with its nonce).
func (v *TokenVerifier) Check(ctx context.Context, fn string, request, reply map[string]any, status int) (map[string]any, error) {
	field := tokenField[fn]
	token, ok := reply[field].(string)
	if !ok {
		return nil, tokenError(status, "token_missing", fmt.Sprintf("The %s answer has no %s.", fn, field))
	}
	malformed := func(why string) error {
		return tokenError(status, "token_malformed", fmt.Sprintf("The %s %s.", field, why))
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, malformed("is not a JWT")
	}
	headerBytes, err1 := b64urlDecode(parts[0])
	payload, err2 := b64urlDecode(parts[1])
	signature, err3 := b64urlDecode(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return nil, malformed("is not a JWT")
	}
	header, ok := decodeObject(headerBytes)
	if !ok {
		return nil, malformed("is not a JWT")
	}
	kid, isString := header["kid"].(string)
	if header["alg"] != "EdDSA" || !isString {
		return nil, malformed("is not an EdDSA JWT with a kid")
	}
	if header["typ"] != tokenTyp[fn] {
		return nil, tokenError(status, "token_mismatch", fmt.Sprintf("The %s is a %v token.", field, header["typ"]))
	}
	key, err := v.keyFor(ctx, kid, status)
	if err != nil {
		return nil, err
	}
	if !ed25519.Verify(key, []byte(parts[0]+"."+parts[1]), signature) {
		return nil, tokenError(status, "token_bad_signature", fmt.Sprintf("The %s's signature does not verify.", field))
	}
	claims, ok := decodeObject(payload)
	if !ok {
		return nil, malformed("has no JSON claims")
	}
	if err := v.checkTimes(claims, field, status); err != nil {
		return nil, err
	}
	if err := v.checkClaims(fn, request, reply, claims, status); err != nil {
		return nil, err
	}
	return claims, nil
}

func (v *TokenVerifier) checkTimes(claims map[string]any, field string, status int) error {
	for _, name := range requiredClaims {
		if claims[name] == nil {
			return tokenError(status, "token_malformed", fmt.Sprintf("The %s: missing the %q claim.", field, name))
		}
	}
	if sub, present := claims["sub"]; present {
		if _, ok := sub.(string); !ok {
			return tokenError(status, "token_malformed", fmt.Sprintf("The %s: sub is not a string.", field))
		}
	}
	now := float64(v.now().UnixMilli()) / 1000
	notYet := tokenError(status, "token_expired", fmt.Sprintf("The %s is not valid yet (check the clock).", field))
	iat, ok := claims["iat"].(float64)
	if !ok || iat > now+v.leeway {
		return notYet
	}
	nbf, ok1 := claims["nbf"].(float64)
	exp, ok2 := claims["exp"].(float64)
	if !ok1 || !ok2 {
		return tokenError(status, "token_malformed", fmt.Sprintf("The %s: nbf and exp must be numbers.", field))
	}
	if nbf > now+v.leeway {
		return notYet
	}
	if exp <= now-v.leeway {
		return tokenError(status, "token_expired", fmt.Sprintf("The %s has expired.", field))
	}
	return nil
}

func (v *TokenVerifier) checkClaims(fn string, request, reply, claims map[string]any, status int) error {
	aud, _ := claims["aud"].(string)
	tenant, licensed := "", ""
	if cut := strings.LastIndex(aud, "/"); cut >= 0 {
		tenant, licensed = aud[:cut], aud[cut+1:]
	}
	if licenseID, _ := request["license_id"].(string); licensed != licenseID || tenant == "" || (v.tenantID != "" && v.tenantID != tenant) {
		return tokenError(status, "token_wrong_audience", fmt.Sprintf("The token is for %q, not this license.", claims["aud"]))
	}
	if !same(claims["nonce"], request["nonce"]) {
		return tokenError(status, "token_replayed", "The token answers another request (nonce).")
	}
	session := request["session_id"]
	if fn == "acquire" {
		session = reply["session_id"]
	}
	var problems []string
	if !same(claims["sid"], session) {
		problems = append(problems, "session")
	}
	if fn == "acquire" && !same(claims["sub"], request["client_id"]) {
		problems = append(problems, "client_id")
	}
	if fn != "release" && !sameDeadline(reply, claims) {
		problems = append(problems, "lease_expires_at")
	}
	if fn == "release" && !same(claims["released"], reply["released"]) {
		problems = append(problems, "released")
	}
	if fn != "release" {
		problems = append(problems, termProblems(reply, claims)...)
	}
	var bound any
	if cnf, ok := claims["cnf"].(map[string]any); ok {
		bound = cnf["machine"]
	}
	if wanted, ok := request["fingerprint"]; ok && !same(bound, wanted) {
		problems = append(problems, "fingerprint")
	}
	if len(problems) > 0 {
		return tokenError(status, "token_mismatch", fmt.Sprintf("The token disagrees with the answer (%s).", strings.Join(problems, ", ")))
	}
	if v.machine != "" && claims["borrowed"] == true && !same(bound, v.machine) {
		return tokenError(status, "token_wrong_machine", "This borrowed seat was taken for another machine (cnf.machine).")
	}
	return nil
}

// same compares two decoded JSON scalars (== on two maps or slices would panic; they
// are never equal here).
func same(a, b any) bool {
	switch a.(type) {
	case nil, string, bool, float64:
		return a == b
	}
	return false
}

// termProblems: the answer's term fields against the token's ent, lexp and maxv (a token
// without them: nothing to compare).
func termProblems(reply, claims map[string]any) []string {
	var problems []string
	if ent, ok := claims["ent"]; ok && !sameStrings(ent, reply["entitlements"]) {
		problems = append(problems, "entitlements")
	}
	if lexp, ok := claims["lexp"]; ok {
		text, ok1 := reply["license_grace_ends_at"].(string)
		end, ok2 := lexp.(float64)
		ends, ok3 := parseTime(text)
		gap := -1.0
		if ok1 && ok2 && ok3 && end == math.Trunc(end) {
			gap = float64(ends.UnixMicro())/1e6 - end
		}
		if !(gap >= 0 && gap < 1.001) {
			problems = append(problems, "license_grace_ends_at")
		}
	}
	if maxv, ok := claims["maxv"]; ok && !same(maxv, reply["max_version"]) {
		problems = append(problems, "max_version")
	}
	// The weight: a token that signs one must agree with the answer's (absent: 1).
	if seats, ok := claims["seats"]; ok {
		answered, present := reply["seats"]
		if !present {
			answered = 1.0
		}
		if !same(seats, answered) {
			problems = append(problems, "seats")
		}
	}
	return problems
}

// ClaimedSeats is the lease's weight a verified token signs (its seats claim; 1 when
// absent).
func ClaimedSeats(claims map[string]any) int {
	if seats, ok := claims["seats"].(float64); ok && seats == math.Trunc(seats) && seats >= 1 && seats <= 1e9 {
		return int(seats)
	}
	return 1
}

// sameStrings compares two decoded JSON arrays of strings.
func sameStrings(a, b any) bool {
	x, ok1 := a.([]any)
	y, ok2 := b.([]any)
	if !ok1 || !ok2 || len(x) != len(y) {
		return false
	}
	for i := range x {
		s, ok := x[i].(string)
		if !ok || !same(s, y[i]) {
			return false
		}
	}
	return true
}

// sameDeadline: exp is the answer's deadline rounded down to a second.
func sameDeadline(reply, claims map[string]any) bool {
	text, ok1 := reply["lease_expires_at"].(string)
	exp, ok2 := claims["exp"].(float64)
	if !ok1 || !ok2 || exp != math.Trunc(exp) {
		return false
	}
	deadline, ok := parseTime(text)
	if !ok {
		return false
	}
	gap := float64(deadline.UnixMicro())/1e6 - exp
	return gap >= 0 && gap < 1.001
}

var rfc3339 = regexp.MustCompile(`^(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d:\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)$`)

// parseTime reads an RFC 3339 timestamp (any fraction, Z or an offset).
func parseTime(value string) (time.Time, bool) {
	parts := rfc3339.FindStringSubmatch(value)
	if parts == nil {
		return time.Time{}, false
	}
	zone := strings.ToUpper(parts[4])
	parsed, err := time.Parse(time.RFC3339Nano, parts[1]+"T"+parts[2]+parts[3]+zone)
	if err != nil {
		return time.Time{}, false
	}
	return parsed.UTC(), true
}
