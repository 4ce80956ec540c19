package auth

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewAccessToken(t *testing.T) {
	t.Parallel()
	re := regexp.MustCompile(`^[A-Za-z0-9_-]{44}$`)
	seen := map[string]bool{}
	for range 50 {
		tok, err := NewAccessToken()
		require.NoError(t, err)
		require.Regexp(t, re, tok)
		// Each half is a v4 UUID: the version nibble is the top of
		// character 8, the variant bits the bottom of character 10.
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		for _, half := range []string{tok[:22], tok[22:]} {
			require.Contains(t, "QRST", string(half[8]), "version 4 in %s", half)
			require.Equal(t, 2, strings.IndexByte(alphabet, half[10])%4, "variant in %s", half)
		}
		require.False(t, seen[tok])
		seen[tok] = true
	}
}

func TestSealer(t *testing.T) {
	t.Parallel()
	key, err := GenerateKey()
	require.NoError(t, err)
	s, err := NewSealer(key)
	require.NoError(t, err)

	sealed, err := s.Seal("secret-token", "client-a")
	require.NoError(t, err)
	require.NotContains(t, sealed, "secret-token")
	again, err := s.Seal("secret-token", "client-a")
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "fresh nonce per seal")

	plain, err := s.Open(sealed, "client-a")
	require.NoError(t, err)
	require.Equal(t, "secret-token", plain)

	_, err = s.Open(sealed, "client-b")
	require.Error(t, err, "associated data is authenticated")
	tampered := []byte(sealed)
	tampered[len(tampered)-3] ^= 1
	_, err = s.Open(string(tampered), "client-a")
	require.Error(t, err)
	_, err = s.Open("v2:abc", "client-a")
	require.Error(t, err)
	_, err = s.Open("v1:!!!", "client-a")
	require.Error(t, err)
	_, err = s.Open("v1:YWJj", "client-a")
	require.Error(t, err)

	otherKey, err := GenerateKey()
	require.NoError(t, err)
	other, err := NewSealer(otherKey)
	require.NoError(t, err)
	_, err = other.Open(sealed, "client-a")
	require.Error(t, err)

	_, err = NewSealer(key[:16])
	require.Error(t, err)
}

func TestKeyFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "sealer.key")

	key, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	require.Len(t, key, SealerKeySize)
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	again, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	require.Equal(t, key, again)
	loaded, err := LoadKeyFile(path)
	require.NoError(t, err)
	require.Equal(t, key, loaded)

	_, err = WriteKeyFile(path)
	require.Error(t, err, "never overwrite a key")

	bad := filepath.Join(dir, "bad.key")
	require.NoError(t, os.WriteFile(bad, []byte("c2hvcnQ=\n"), 0o600))
	_, err = LoadKeyFile(bad)
	require.Error(t, err)
	require.NoError(t, os.WriteFile(bad, []byte("not base64!"), 0o600))
	_, err = LoadOrCreateKeyFile(bad)
	require.Error(t, err, "a corrupt key file is not replaced")
}
