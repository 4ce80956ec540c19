// Package mailpittest starts a real SMTP server for tests: Mailpit
// (github.com/axllent/mailpit), a child process on loopback ports, with
// STARTTLS or implicit TLS on a certificate made for the test, SMTP
// authentication, and failures injected on demand; what it received is
// read back through its HTTP API.
//
// The binary is $HOPPER_TEST_MAILPIT, mailpit on the PATH, or one built
// from the Go module proxy into the user's cache directory on first use
// (go install github.com/axllent/mailpit@Version). Where none can be had,
// the test is skipped with the reason.
package mailpittest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Version is the Mailpit release the tests build when none is installed.
const Version = "v1.33.1"

// Options shape the server.
type Options struct {
	// TLS is "" (none), "starttls" (required) or "tls" (implicit).
	TLS string
	// Username and Password, if set, are required of clients.
	Username, Password string
	// Chaos, if set, makes the server fail commands
	// ("Recipient:451:100": every RCPT TO answered 451).
	Chaos string
}

// Server is a running Mailpit.
type Server struct {
	SMTPPort int
	APIURL   string
	// CAFile is the PEM of the certificate the server presents (TLS).
	CAFile string
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Binary returns the Mailpit executable, building it if need be.
func Binary() (string, error) {
	if p := os.Getenv("HOPPER_TEST_MAILPIT"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("mailpit"); err == nil {
		return p, nil
	}
	buildOnce.Do(func() {
		cache, err := os.UserCacheDir()
		if err != nil {
			buildErr = err
			return
		}
		dir := filepath.Join(cache, "hopper-test", "mailpit-"+Version)
		built = filepath.Join(dir, "mailpit")
		if _, err := os.Stat(built); err == nil {
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			buildErr = err
			return
		}
		// One build at a time across test binaries.
		lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			buildErr = err
			return
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			buildErr = err
			return
		}
		if _, err := os.Stat(built); err == nil {
			return
		}
		cmd := exec.Command("go", "install", "github.com/axllent/mailpit@"+Version)
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go install github.com/axllent/mailpit@%s: %v\n%s", Version, err, out)
		}
	})
	return built, buildErr
}

// Start runs a Mailpit for the test, stopped at its end.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Skipf("no Mailpit to test email against (set HOPPER_TEST_MAILPIT or let the test build it): %v", err)
	}
	dir := t.TempDir()
	smtpPort, httpPort := freePort(t), freePort(t)
	args := []string{"--smtp", "127.0.0.1:" + strconv.Itoa(smtpPort), "--listen", "127.0.0.1:" + strconv.Itoa(httpPort),
		"--database", filepath.Join(dir, "mailpit.db"), "--quiet", "--smtp-disable-rdns", "--max", "0"}
	s := &Server{SMTPPort: smtpPort, APIURL: "http://127.0.0.1:" + strconv.Itoa(httpPort)}
	if opts.TLS != "" {
		cert, key := selfSigned(t, dir)
		s.CAFile = cert
		args = append(args, "--smtp-tls-cert", cert, "--smtp-tls-key", key)
		if opts.TLS == "tls" {
			args = append(args, "--smtp-require-tls")
		} else {
			args = append(args, "--smtp-require-starttls")
		}
	}
	if opts.Username != "" {
		sum := sha1.Sum([]byte(opts.Password))
		file := filepath.Join(dir, "smtp-auth")
		line := opts.Username + ":{SHA}" + base64.StdEncoding.EncodeToString(sum[:]) + "\n"
		if err := os.WriteFile(file, []byte(line), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--smtp-auth-file", file)
		if opts.TLS == "" {
			args = append(args, "--smtp-auth-allow-insecure")
		}
	}
	if opts.Chaos != "" {
		args = append(args, "--chaos-triggers", opts.Chaos)
	}
	cmd := exec.Command(bin, args...)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting Mailpit: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.APIURL + "/api/v1/messages")
		if err == nil {
			resp.Body.Close()
			if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(smtpPort)); err == nil {
				c.Close()
				break
			}
		}
		select {
		case <-done:
			t.Fatalf("Mailpit exited: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Mailpit did not start: %s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// Summary is one message of the listing.
type Summary struct {
	ID        string `json:"ID"`
	MessageID string `json:"MessageID"`
	Subject   string `json:"Subject"`
	From      struct {
		Address string `json:"Address"`
	} `json:"From"`
	To []struct {
		Address string `json:"Address"`
	} `json:"To"`
}

// Message is one message in full.
type Message struct {
	Summary
	Text    string `json:"Text"`
	HTML    string `json:"HTML"`
	ReplyTo []struct {
		Address string `json:"Address"`
	} `json:"ReplyTo"`
}

// Messages lists what the server received, newest first.
func (s *Server) Messages(t testing.TB) []Summary {
	t.Helper()
	var out struct {
		Messages []Summary `json:"messages"`
	}
	s.get(t, "/api/v1/messages?limit=1000", &out)
	return out.Messages
}

// Message reads one message.
func (s *Server) Message(t testing.TB, id string) Message {
	t.Helper()
	var m Message
	s.get(t, "/api/v1/message/"+id, &m)
	return m
}

// Headers reads one message's headers.
func (s *Server) Headers(t testing.TB, id string) map[string][]string {
	t.Helper()
	var h map[string][]string
	s.get(t, "/api/v1/message/"+id+"/headers", &h)
	return h
}

func (s *Server) get(t testing.TB, path string, into any) {
	t.Helper()
	resp, err := http.Get(s.APIURL + path)
	if err != nil {
		t.Fatalf("asking Mailpit %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("Mailpit %s answered %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		t.Fatalf("reading Mailpit's %s: %v", path, err)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// selfSigned writes a certificate for 127.0.0.1 and localhost and its key.
func selfSigned(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hopper test SMTP"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
