package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// storedCredentials is the file `hopper login` writes and the other
// commands read when the environment names no credentials: the person's
// temporary credentials and the deployment they are for.
type storedCredentials struct {
	RootURL     string    `json:"rootUrl"`
	Identity    string    `json:"identity"`
	ClientID    string    `json:"clientId"`
	AccessToken string    `json:"accessToken"`
	Certificate string    `json:"certificate,omitempty"`
	Expires     time.Time `json:"expires"`
}

// credentialsPath is where `hopper login` keeps credentials:
// $HOPPER_CREDENTIALS, else $XDG_CONFIG_HOME/hopper/credentials.json, else
// ~/.config/hopper/credentials.json.
func credentialsPath(getenv func(string) string) (string, error) {
	if p := getenv("HOPPER_CREDENTIALS"); p != "" {
		return p, nil
	}
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "hopper", "credentials.json"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".config", "hopper", "credentials.json"), nil
	}
	return "", errors.New("neither HOPPER_CREDENTIALS, XDG_CONFIG_HOME nor HOME is set")
}

// writeStoredCredentials replaces the file at once (a new file renamed
// over the old), readable by its owner only.
func writeStoredCredentials(path string, sc storedCredentials) error {
	data, err := json.MarshalIndent(sc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("creating the credentials' directory: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".credentials-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(f.Name()) // after the rename, there is nothing to remove
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// loadStoredCredentials reads the credentials `hopper login` stored for
// rootURL (any deployment when rootURL is empty) and says which root URL
// they are for. No file, or a file for another deployment, gives nil: the
// command runs without credentials, as with an empty environment.
// Credentials that expired are an error that says to sign in again.
func loadStoredCredentials(getenv func(string) string, rootURL string, now time.Time) (*tcclient.Credentials, string, error) {
	path, err := credentialsPath(getenv)
	if err != nil {
		return nil, "", nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", usagef("reading the credentials of `hopper login`: %v", err)
	}
	var sc storedCredentials
	if err := json.Unmarshal(data, &sc); err != nil || sc.ClientID == "" || sc.AccessToken == "" || sc.RootURL == "" {
		return nil, "", usagef("%s is not a credentials file of `hopper login`: run `hopper login` again", path)
	}
	if rootURL != "" && strings.TrimRight(rootURL, "/") != strings.TrimRight(sc.RootURL, "/") {
		// Never send one deployment's credentials to another.
		return nil, "", nil
	}
	if !sc.Expires.IsZero() && !now.Before(sc.Expires) {
		return nil, "", usagef("the credentials `hopper login` stored for %s (%s) expired at %s: run `hopper login` again",
			sc.Identity, sc.RootURL, sc.Expires.UTC().Format(time.RFC3339))
	}
	return &tcclient.Credentials{ClientID: sc.ClientID, AccessToken: sc.AccessToken, Certificate: sc.Certificate}, sc.RootURL, nil
}
