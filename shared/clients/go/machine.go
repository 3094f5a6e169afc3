package seatlease

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
)

// MachinePrefix is hashed before the machine id (see Fingerprint).
const MachinePrefix = "seatlease-machine/1:"

// Fingerprint is what binds a borrowed seat to the machine it was borrowed on: the
// lowercase hex SHA-256 of MachinePrefix + the machine id, trimmed and lowercased
// (UTF-8), computed the same way by every seatlease client (../testdata/vectors.json
// holds examples).
func Fingerprint(machineID string) string {
	sum := sha256.Sum256([]byte(MachinePrefix + strings.ToLower(strings.TrimSpace(machineID))))
	return hex.EncodeToString(sum[:])
}

var (
	ioregUUID   = regexp.MustCompile(`"IOPlatformUUID"\s*=\s*"([^"]+)"`)
	machineGUID = regexp.MustCompile(`MachineGuid\s+REG_SZ\s+(\S+)`)
)

// MachineID is the system's own stable machine id: Linux /etc/machine-id (else
// /var/lib/dbus/machine-id), macOS IOPlatformUUID, Windows MachineGuid. A product may
// give its own instead (Options.MachineID).
func MachineID() (string, error) {
	found := ""
	switch runtime.GOOS {
	case "darwin":
		out, _ := exec.Command("ioreg", "-rd1", "-c", "IOPlatformExpertDevice").Output()
		if m := ioregUUID.FindSubmatch(out); m != nil {
			found = string(m[1])
		}
	case "windows":
		out, _ := exec.Command("reg", "query", `HKLM\SOFTWARE\Microsoft\Cryptography`, "/v", "MachineGuid").Output()
		if m := machineGUID.FindSubmatch(out); m != nil {
			found = string(m[1])
		}
	default:
		for _, path := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
			if raw, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(raw)) != "" {
				found = string(raw)
				break
			}
		}
	}
	if strings.TrimSpace(found) == "" {
		return "", errors.New("seatlease: this machine has no stable machine id: set Options.MachineID")
	}
	return strings.TrimSpace(found), nil
}

// thisMachine is the fingerprint of override if given, else of the system's machine id.
func thisMachine(override string) (string, error) {
	if override != "" {
		return Fingerprint(override), nil
	}
	id, err := MachineID()
	if err != nil {
		return "", err
	}
	return Fingerprint(id), nil
}
