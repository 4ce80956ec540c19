package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// loadSecretKey returns the 32-byte server secret: from value (64 hex
// characters or base64 of 32 bytes) when given, otherwise from
// <dataDir>/secret.key, generated on first start.
func loadSecretKey(value, dataDir string) ([32]byte, error) {
	var key [32]byte
	if value != "" {
		b, err := decodeKey(value)
		if err != nil {
			return key, fmt.Errorf("HOPPER_SECRET_KEY: %w", err)
		}
		copy(key[:], b)
		return key, nil
	}
	path := filepath.Join(dataDir, "secret.key")
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		b, err := decodeKey(strings.TrimSpace(string(data)))
		if err != nil {
			return key, fmt.Errorf("%s: %w", path, err)
		}
		copy(key[:], b)
		return key, nil
	case !errors.Is(err, os.ErrNotExist):
		return key, fmt.Errorf("reading %s: %w", path, err)
	}
	if _, err := rand.Read(key[:]); err != nil {
		return key, fmt.Errorf("generating secret key: %w", err)
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(key[:])+"\n"), 0o600); err != nil {
		return key, fmt.Errorf("writing %s: %w", path, err)
	}
	return key, nil
}

func decodeKey(s string) ([]byte, error) {
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, errors.New("must be 32 bytes as 64 hex characters or base64")
}
