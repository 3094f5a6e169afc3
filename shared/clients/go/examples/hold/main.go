// Command hold holds one seat until its standard input closes:
//
//	./hold URL API_KEY LICENSE_ID CLIENT_ID   (or go run ./examples/hold ...)
//
// It acquires (verifying the signed token against the deployment's JWKS), prints one
// JSON line {"session_id", "seats_used", "seats_total", "verified"}, heartbeats in the background, and
// when stdin closes (Ctrl-D, or the parent closing the pipe) releases the seat and exits 0.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"

	seatlease "github.com/seatlease/seatlease/shared/clients/go"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: go run ./examples/hold URL API_KEY LICENSE_ID CLIENT_ID")
		os.Exit(2)
	}
	url, apiKey, licenseID, clientID := os.Args[1], os.Args[2], os.Args[3], os.Args[4]
	logger := log.New(os.Stderr, "", log.LstdFlags)
	client, err := seatlease.New(url, apiKey, seatlease.Options{
		Verify: true, // every answer's token checked against URL/keys (pin the vendor's keys in a product)
		Logger: logger,
	})
	if err != nil {
		logger.Fatal(err)
	}
	lease, err := client.Lease(context.Background(), licenseID, seatlease.LeaseOptions{
		ClientID: clientID,
		OnLost:   func(_ *seatlease.Lease, reason string) { logger.Printf("seat lost (%s); asking again", reason) },
	})
	if err != nil {
		logger.Fatal(err)
	}
	state := lease.State()
	line, _ := json.Marshal(map[string]any{"session_id": state.SessionID, "seats_used": state.SeatsUsed, "seats_total": state.SeatsTotal, "verified": state.Token != ""})
	fmt.Println(string(line))

	io.Copy(io.Discard, os.Stdin) // until stdin closes
	if err := lease.Close(); err != nil {
		logger.Fatal(err)
	}
}
