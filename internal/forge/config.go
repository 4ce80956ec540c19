package forge

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Secret says where a secret is read from: a file or an environment
// variable, never the configuration itself or a flag.
type Secret struct {
	File string `yaml:"file" json:"file"`
	Env  string `yaml:"env" json:"env"`
}

func (s Secret) read() ([]byte, error) {
	switch {
	case s.File != "" && s.Env != "":
		return nil, fmt.Errorf("a secret is read from a file or from the environment, not both")
	case s.File != "":
		b, err := os.ReadFile(s.File)
		if err != nil {
			return nil, fmt.Errorf("reading a secret: %w", err)
		}
		return []byte(strings.TrimRight(string(b), "\r\n")), nil
	case s.Env != "":
		v, ok := os.LookupEnv(s.Env)
		if !ok || v == "" {
			return nil, fmt.Errorf("the environment variable %s is not set", s.Env)
		}
		return []byte(v), nil
	}
	return nil, nil
}

// FileConfig is one forge in the configuration file.
type FileConfig struct {
	Host           string   `yaml:"host" json:"host"`
	Kind           string   `yaml:"kind" json:"kind"`
	APIURL         string   `yaml:"apiUrl" json:"apiUrl"`
	AppID          int64    `yaml:"appId" json:"appId"`
	PrivateKey     Secret   `yaml:"privateKey" json:"privateKey"`
	Token          Secret   `yaml:"token" json:"token"`
	WebhookSecrets []Secret `yaml:"webhookSecrets" json:"webhookSecrets"`
	AppName        string   `yaml:"appName" json:"appName"`
}

// Load reads the forges' configuration file (YAML or JSON): a list of
// forges under `forges:`, their secrets named by file or environment
// variable.
func Load(path string) ([]*Forge, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the forge configuration: %w", err)
	}
	var doc struct {
		Forges []FileConfig `yaml:"forges"`
	}
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("parsing the forge configuration %s: %w", path, err)
	}
	var out []*Forge
	seen := map[string]bool{}
	for i, fc := range doc.Forges {
		f, err := fc.build()
		if err != nil {
			return nil, fmt.Errorf("forge %d (%s) of %s: %w", i+1, fc.Host, path, err)
		}
		if seen[f.Host] {
			return nil, fmt.Errorf("forge %s is configured twice in %s", f.Host, path)
		}
		seen[f.Host] = true
		out = append(out, f)
	}
	return out, nil
}

func (fc FileConfig) build() (*Forge, error) {
	f := &Forge{Host: fc.Host, Kind: fc.Kind, APIURL: fc.APIURL, AppID: fc.AppID, AppName: fc.AppName}
	if f.Kind == "" {
		f.Kind = KindGitHub
	}
	if f.Kind != KindGitHub && f.Kind != KindGitea {
		return nil, fmt.Errorf("kind must be %q or %q (Forgejo is %q)", KindGitHub, KindGitea, KindGitea)
	}
	if f.Host == "" {
		return nil, fmt.Errorf("host is required")
	}
	if f.APIURL == "" {
		if f.Kind == KindGitHub && f.Host == "github.com" {
			f.APIURL = "https://api.github.com"
		} else {
			return nil, fmt.Errorf("apiUrl is required")
		}
	}
	if u, err := url.Parse(f.APIURL); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("apiUrl %q is not an absolute URL", f.APIURL)
	}
	var err error
	if f.PrivateKey, err = fc.PrivateKey.read(); err != nil {
		return nil, fmt.Errorf("privateKey: %w", err)
	}
	tok, err := fc.Token.read()
	if err != nil {
		return nil, fmt.Errorf("token: %w", err)
	}
	f.Token = string(tok)
	switch {
	case f.Kind == KindGitHub && f.AppID != 0:
		if _, err := ParsePrivateKey(f.PrivateKey); err != nil {
			return nil, err
		}
	case f.Token == "":
		return nil, fmt.Errorf("a GitHub App (appId, privateKey) or a token is required")
	}
	for _, s := range fc.WebhookSecrets {
		b, err := s.read()
		if err != nil {
			return nil, fmt.Errorf("webhookSecrets: %w", err)
		}
		if len(b) > 0 {
			f.WebhookSecrets = append(f.WebhookSecrets, b)
		}
	}
	if len(f.WebhookSecrets) == 0 {
		return nil, fmt.Errorf("at least one webhook secret is required: unsigned deliveries are refused")
	}
	return f, nil
}

// MarshalJSON never shows secrets.
func (f *Forge) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"host": f.Host, "kind": f.Kind, "apiUrl": f.APIURL, "appId": f.AppID})
}

// String never shows secrets.
func (f *Forge) String() string { return fmt.Sprintf("%s forge %s (%s)", f.Kind, f.Host, f.APIURL) }

// Name is the application's name in status contexts.
func (f *Forge) Name() string {
	if f.AppName != "" {
		return f.AppName
	}
	return "Taskcluster"
}

// WebURL is the forge's web address (https://github.com for the API at
// api.github.com; the API URL without /api/v1 or /api/v3 otherwise).
func (f *Forge) WebURL() string {
	u, err := url.Parse(f.APIURL)
	if err != nil {
		return ""
	}
	if u.Host == "api.github.com" {
		return "https://github.com"
	}
	u.Path = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v1"), "/api/v3")
	return strings.TrimSuffix(u.String(), "/")
}
