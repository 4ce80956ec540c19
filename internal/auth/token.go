package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// NewAccessToken returns a fresh access token in Taskcluster's format: two
// v4 slugids concatenated, 44 characters of [A-Za-z0-9_-] carrying 244
// random bits.
func NewAccessToken() (string, error) {
	a, err := newSlugID()
	if err != nil {
		return "", err
	}
	b, err := newSlugID()
	if err != nil {
		return "", err
	}
	return a + b, nil
}

// newSlugID returns a random v4 UUID as a 22-character base64url slug.
func newSlugID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("generating slugid: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return base64.RawURLEncoding.EncodeToString(u[:]), nil
}

// SealerKeySize is the key length of a Sealer (AES-256).
const SealerKeySize = 32

// sealedPrefix versions sealed values so the scheme can change later.
const sealedPrefix = "v1:"

// Sealer encrypts secrets at rest (client access tokens in the database)
// with AES-256-GCM. Each sealed value has its own random nonce. A Sealer is
// safe for concurrent use.
type Sealer struct {
	aead cipher.AEAD
}

// NewSealer returns a Sealer using a 32-byte key.
func NewSealer(key []byte) (*Sealer, error) {
	if len(key) != SealerKeySize {
		return nil, fmt.Errorf("sealer key must be %d bytes, got %d", SealerKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("creating AES cipher: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("creating GCM: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plaintext and returns "v1:" + base64(nonce || ciphertext).
// associated is authenticated but not stored (pass the clientId so a
// sealed token cannot be moved to another client's row).
func (s *Sealer) Seal(plaintext, associated string) (string, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("generating nonce: %w", err)
	}
	out := s.aead.Seal(nonce, nonce, []byte(plaintext), []byte(associated))
	return sealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// Open decrypts a value produced by Seal with the same associated data.
func (s *Sealer) Open(sealed, associated string) (string, error) {
	body, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return "", errors.New("opening sealed value: unknown format")
	}
	raw, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return "", fmt.Errorf("opening sealed value: %w", err)
	}
	if len(raw) < s.aead.NonceSize()+s.aead.Overhead() {
		return "", errors.New("opening sealed value: too short")
	}
	n := s.aead.NonceSize()
	plain, err := s.aead.Open(nil, raw[:n], raw[n:], []byte(associated))
	if err != nil {
		return "", fmt.Errorf("opening sealed value: %w", err)
	}
	return string(plain), nil
}

// GenerateKey returns a fresh random Sealer key.
func GenerateKey() ([]byte, error) {
	key := make([]byte, SealerKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generating key: %w", err)
	}
	return key, nil
}

// LoadKeyFile reads a Sealer key stored as base64 text (surrounding
// whitespace ignored).
func LoadKeyFile(path string) ([]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading key file: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(text)))
	if err != nil {
		return nil, fmt.Errorf("decoding key file %s: %w", path, err)
	}
	if len(key) != SealerKeySize {
		return nil, fmt.Errorf("key file %s holds %d bytes, want %d", path, len(key), SealerKeySize)
	}
	return key, nil
}

// WriteKeyFile generates a key and stores it at path as base64 text,
// readable by the owner only. It refuses to overwrite an existing file:
// losing a key makes every sealed token unreadable.
func WriteKeyFile(path string) ([]byte, error) {
	key, err := GenerateKey()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating key directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating key file: %w", err)
	}
	if _, err := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("writing key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("writing key file: %w", err)
	}
	return key, nil
}

// LoadOrCreateKeyFile loads the key at path, generating and storing one
// first if the file does not exist.
func LoadOrCreateKeyFile(path string) ([]byte, error) {
	key, err := LoadKeyFile(path)
	if err == nil {
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	key, err = WriteKeyFile(path)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it between our read and write.
		return LoadKeyFile(path)
	}
	return key, err
}
