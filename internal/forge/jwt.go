package forge

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

type rsaKey = rsa.PrivateKey

// ParsePrivateKey reads a GitHub App's PEM private key (PKCS #1, as
// GitHub hands it out, or PKCS #8). Literal "\n" are taken as newlines,
// as Taskcluster takes them, for keys passed through the environment.
func ParsePrivateKey(pemText []byte) (*rsa.PrivateKey, error) {
	text := strings.ReplaceAll(string(pemText), `\n`, "\n")
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, errors.New("the GitHub App private key is not PEM")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, errors.New("the GitHub App private key is neither a PKCS #1 nor a PKCS #8 RSA key")
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, errors.New("the GitHub App private key is not an RSA key")
	}
	return rk, nil
}

// AppJWT returns a JSON Web Token authenticating the GitHub App: RS256,
// issued a minute ago (clock drift), valid nine minutes (GitHub allows
// ten).
func (f *Forge) AppJWT() (string, error) {
	f.mu.Lock()
	key := f.key
	f.mu.Unlock()
	if key == nil {
		if f.AppID == 0 || len(f.PrivateKey) == 0 {
			return "", fmt.Errorf("forge %s is not configured as a GitHub App", f.Host)
		}
		k, err := ParsePrivateKey(f.PrivateKey)
		if err != nil {
			return "", err
		}
		f.mu.Lock()
		f.key, key = k, k
		f.mu.Unlock()
	}
	now := f.now().Unix()
	header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	claims, _ := json.Marshal(map[string]any{"iat": now - 60, "exp": now + 9*60, "iss": fmt.Sprint(f.AppID)})
	signing := header + "." + base64.RawURLEncoding.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing the GitHub App's JWT: %w", err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
