// Command hold holds one seat until its standard input closes:
//
//	./hold URL API_KEY LICENSE_ID CLIENT_ID   (or go run ./examples/hold ...)
//
// It acquires, verifying the signed token against the vendor's keys pinned in
// SEATLEASE_PINNED_KEYS (each JWK's "x", comma separated); prints one JSON line
// {"session_id", "seats_used", "seats_total", "seats", "verified"} (verified: true),
// heartbeats in the background, and when stdin closes (Ctrl-D, or the parent closing the
// pipe) releases the seat and exits 0. No seat: one line on stderr, exit status 1.
// Without SEATLEASE_PINNED_KEYS it takes no seat (one line on stderr naming it, exit
// status 2), unless SEATLEASE_INSECURE_SKIP_VERIFY=1, the loud opt-out: then nothing is
// verified and "verified" is false.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

// field is one name and value of a JSON line, in the order given.
type field struct {
	name  string
	value any
}

// jsonLine writes one JSON object with Python's json.dumps separators (", " and ": ") and
// the fields in their order: the same bytes as every client's hold (json.Marshal sorts a
// map's keys and writes no spaces).
func jsonLine(fields ...field) string {
	parts := make([]string, 0, len(fields))
	for _, f := range fields {
		name, _ := json.Marshal(f.name)
		value, err := json.Marshal(f.value)
		if err != nil {
			panic(err) // strings, numbers and booleans only
		}
		parts = append(parts, string(name)+": "+string(value))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func pinnedKeys() []any {
	var keys []any
	for _, x := range strings.Split(os.Getenv("SEATLEASE_PINNED_KEYS"), ",") {
		if x = strings.TrimSpace(x); x != "" {
			keys = append(keys, x)
		}
	}
	return keys
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: go run ./examples/hold URL API_KEY LICENSE_ID CLIENT_ID")
		os.Exit(2)
	}
	url, apiKey, licenseID, clientID := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	logger := log.New(os.Stderr, "", log.LstdFlags)
	pinned := pinnedKeys()
	insecure := os.Getenv("SEATLEASE_INSECURE_SKIP_VERIFY") == "1"
	if len(pinned) == 0 && !insecure {
		fmt.Fprintln(os.Stderr, "hold: no pinned key: set SEATLEASE_PINNED_KEYS to the vendor's "+
			"keys (each JWK's \"x\" of URL/keys, comma separated), or SEATLEASE_INSECURE_SKIP_VERIFY=1 "+
			"to verify nothing (tests only)")
		os.Exit(2)
	}
	client, err := seatlease.New(url, apiKey, seatlease.Options{
		PinnedKeys:         pinned,   // every answer's token must be signed by one of them
		InsecureSkipVerify: insecure, // only without pinned keys: nothing verified
		Logger:             logger,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		os.Exit(1)
	}
	lease, err := client.Lease(context.Background(), licenseID, seatlease.LeaseOptions{
		ClientID: clientID,
		OnLost:   func(_ *seatlease.Lease, reason string) { logger.Printf("seat lost (%s)", reason) },
	})
	if err != nil {
		// one line, the same in every language's hold: "hold: <code>: <message>"; exit 1
		var refused *seatlease.SeatError
		if errors.As(err, &refused) {
			fmt.Fprintf(os.Stderr, "hold: %s: %s\n", refused.Code, strings.Join(strings.Fields(refused.Message), " "))
		} else {
			fmt.Fprintln(os.Stderr, "hold: error:", err)
		}
		os.Exit(1)
	}
	verified := len(pinned) > 0
	state := lease.State()
	fmt.Println(jsonLine(
		field{"session_id", state.SessionID}, field{"seats_used", state.SeatsUsed},
		field{"seats_total", state.SeatsTotal}, field{"seats", state.Seats}, field{"verified", verified},
	))

	io.Copy(io.Discard, os.Stdin) // until stdin closes
	if err := lease.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "hold: release:", err)
		os.Exit(1)
	}
}
